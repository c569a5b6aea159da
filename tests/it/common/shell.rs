//! Command lines as the documents show them, split as a shell would.

/// The words a POSIX shell passes for `command`, as far as the documents
/// need: quotes group and are dropped, an unquoted word starting with `#`
/// begins a comment, and a redirection, pipe or list ends the command.
pub fn words(command: &str) -> Vec<String> {
    let mut words = Vec::new();
    let (mut word, mut quote, mut in_word) = (String::new(), None, false);
    for c in command.chars() {
        match (quote, c) {
            (Some(open), c) if c == open => quote = None,
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => (quote, in_word) = (Some(c), true),
            (None, c) if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                }
                in_word = false;
            }
            (None, '#') if !in_word => break,
            (None, c) => {
                word.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        words.push(word);
    }
    let end = words.iter().position(|w| [">", ">>", "2>", "<", "|", "||", "&&", ";", "&"].contains(&w.as_str()));
    words.truncate(end.unwrap_or(words.len()));
    words
}
