//! A table, or a line of text, made to fit a terminal of known width
//! without splitting a number: headers keep their first words and units
//! (a long explanation in brackets goes to a legend under the table), and
//! columns are left out until every cell that holds a number fits whole:
//! columns of values, from the right. The first two columns (what a row
//! is) and columns of text (a note, an error) stay; empty columns go.
//! Text cells and headers wrap between words, and so do lines of text.

use comfy_table::{ColumnConstraint, Width};

use crate::report::tables::table::Table;

/// What the terminal shows of one table at a width.
pub struct Fitted {
    /// Indexes into the table's columns, in order.
    pub columns: Vec<usize>,
    /// The kept columns' headers, short.
    pub header: Vec<String>,
    /// The kept columns' least widths: no number split, no word split.
    pub least: Vec<u16>,
    /// `short header: explanation`, one per shortened header kept.
    pub legend: Vec<String>,
    /// The headers of the columns left out, in order.
    pub left_out: Vec<String>,
}

/// What a column holds, for the order in which columns are left out.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Holds {
    /// No cell has text: left out, nothing is lost.
    Nothing,
    /// Words only (a note, an error, `1 (a) → 0 (b)`): kept, wrapped.
    Text,
    /// At least one value: left out from the right.
    Values,
}

/// Columns at least as wide as their widest number, within `width` if the
/// first two columns and the text columns allow it.
pub fn fit(table: &Table, width: u16) -> Fitted {
    let (short, explained): (Vec<&str>, Vec<Option<&str>>) = table.header.iter().map(|h| shorten(h)).unzip();
    let cells = |c: usize| table.rows.iter().filter_map(move |row| row.get(c));
    let least: Vec<u16> = (0..short.len())
        .map(|c| cells(c).map(|cell| least_cell(cell)).fold(longest_word(short[c]), u16::max))
        .collect();
    let holds = |c: usize| match (cells(c).any(|cell| is_value(cell)), cells(c).all(|cell| cell.trim().is_empty())) {
        (true, _) => Holds::Values,
        (false, true) => Holds::Nothing,
        (false, false) => Holds::Text,
    };
    let mut columns: Vec<usize> = (0..short.len()).filter(|&c| c < 2 || holds(c) != Holds::Nothing).collect();
    for out in (2..short.len()).rev().filter(|&c| holds(c) == Holds::Values) {
        if drawn_width(columns.iter().map(|&c| least[c])) <= usize::from(width) {
            break;
        }
        columns.retain(|&c| c != out);
    }
    let left_out = (0..short.len())
        .filter(|&c| !columns.contains(&c) && holds(c) != Holds::Nothing)
        .map(|c| short[c].to_string())
        .collect();
    let legend = columns.iter().filter_map(|&c| Some(format!("{}: {}", short[c], explained[c]?))).collect();
    Fitted {
        header: columns.iter().map(|&c| short[c].to_string()).collect(),
        least: columns.iter().map(|&c| least[c]).collect(),
        columns,
        legend,
        left_out,
    }
}

impl Fitted {
    /// Keeps comfy-table's dynamic arrangement from narrowing a column
    /// below what its numbers and words need (its widths count the
    /// padding, a space each side).
    pub fn constraints(&self) -> impl Iterator<Item = ColumnConstraint> + '_ {
        self.least.iter().map(|&w| ColumnConstraint::LowerBoundary(Width::Fixed(w.saturating_add(2))))
    }

    /// The lines under the table: the legend, and what was left out.
    pub fn notes(&self, width: u16) -> String {
        let mut notes = self.legend.clone();
        if !self.left_out.is_empty() {
            notes.push(format!(
                "left out to fit {width} columns (a wider terminal, or summary.md, shows them): {}",
                self.left_out.join("; ")
            ));
        }
        notes.iter().map(|n| wrap(n, width)).collect()
    }
}

/// `worker CPU % (user+sys, of 1 core)` is `worker CPU %` explained by
/// `user+sys, of 1 core`; a unit in brackets (`msg size (B)`, one word)
/// stays in the header.
fn shorten(header: &str) -> (&str, Option<&str>) {
    match header.split_once(" (") {
        Some((short, rest)) if rest.ends_with(')') && rest.contains(' ') => (short, Some(&rest[..rest.len() - 1])),
        _ => (header, None),
    }
}

/// Most words of a value: a cell of a digit and at most this many words
/// (`100.0 of 2`, `lo 13601.8/13601.8`, `-157 ± 364`) keeps each of its lines
/// whole. Longer text (a note, a suspect's evidence, `1 (a) → 0 (b)`)
/// wraps between words.
const VALUE_WORDS: usize = 3;

fn is_value(cell: &str) -> bool {
    cell.chars().any(|c| c.is_ascii_digit()) && cell.lines().all(|line| line.split_whitespace().count() <= VALUE_WORDS)
}

fn least_cell(cell: &str) -> u16 {
    match is_value(cell) {
        true => cell.lines().map(chars).max().unwrap_or(0),
        false => longest_word(cell),
    }
}

fn longest_word(text: &str) -> u16 {
    text.split_whitespace().map(chars).max().unwrap_or(0)
}

/// Terminal columns of a cell's text: every character the tables hold
/// (`→`, `µ`, `±`) takes one.
fn chars(text: &str) -> u16 {
    u16::try_from(text.chars().count()).unwrap_or(u16::MAX)
}

/// The width of a table drawn with these column widths: one space of
/// padding each side and one border between and around the columns.
fn drawn_width(widths: impl Iterator<Item = u16>) -> usize {
    let (sum, count) = widths.fold((0usize, 0usize), |(sum, n), w| (sum + usize::from(w) + 3, n + 1));
    sum + usize::from(count > 0)
}

/// `text` wrapped between words to `width` columns, each wrapped line
/// indented by two spaces; a word longer than a line stays whole.
pub fn wrap(text: &str, width: u16) -> String {
    let width = usize::from(width);
    let mut out = String::new();
    for line in text.lines() {
        let mut length = 0;
        for (k, word) in line.split(' ').enumerate() {
            let w = word.chars().count();
            if k > 0 && length + 1 + w > width {
                out.push_str("\n  ");
                length = 2;
            } else if k > 0 {
                out.push(' ');
                length += 1;
            }
            out.push_str(word);
            length += w;
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ranks() -> Table {
        let mut t = Table::new(
            "Ranks".into(),
            &["rank", "host", "tx Gb/s", "worker CPU % (user+sys, of 1 core)", "msg size (B)", "host CPU %", "note"],
        );
        t.rows.push(["0", "127.0.0.1", "13601.812", "41.4", "131072", "100.0 of 2", "lost"].map(String::from).to_vec());
        t
    }

    #[test]
    fn long_explanations_go_to_the_legend_and_units_stay() {
        let fitted = fit(&ranks(), 200);
        assert_eq!(fitted.header, ["rank", "host", "tx Gb/s", "worker CPU %", "msg size (B)", "host CPU %", "note"]);
        assert_eq!(fitted.legend, ["worker CPU %: user+sys, of 1 core"]);
        assert!(fitted.left_out.is_empty());
        assert_eq!(fitted.least, [4, 9, 9, 6, 6, 10, 4], "numbers whole, headers by their longest word");
    }

    #[test]
    fn columns_of_values_are_left_out_from_the_right_before_a_number_would_split() {
        let full = drawn_width(fit(&ranks(), 200).least.into_iter());
        let fitted = fit(&ranks(), (full - 1) as u16);
        assert_eq!(fitted.columns, [0, 1, 2, 3, 4, 6], "the note (text) stays");
        assert_eq!(fitted.left_out, ["host CPU %"]);
        assert!(drawn_width(fitted.least.iter().copied()) < full);
        assert!(fitted.notes(200).ends_with("shows them): host CPU %\n"), "{}", fitted.notes(200));
        // However narrow, what a row is and its note stay.
        assert_eq!(fit(&ranks(), 10).columns, [0, 1, 6]);
        // An empty column goes, and nothing is said to be left out.
        let mut quiet = ranks();
        quiet.rows[0][6].clear();
        let fitted = fit(&quiet, 200);
        assert_eq!((fitted.columns.len(), fitted.left_out.len()), (6, 0));
    }

    #[test]
    fn text_wraps_between_words() {
        assert_eq!(wrap("aaa bbb ccc", 7), "aaa bbb\n  ccc\n");
        assert_eq!(wrap("a 13601.812 b", 5), "a\n  13601.812\n  b\n");
        assert_eq!(wrap("short", 80), "short\n");
    }
}
