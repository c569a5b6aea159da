//! docs/COMING-FROM.md maps other tools' flags onto fabricbench's, so what
//! it maps must exist: every `fabricbench …` command line in it parses with
//! the real CLI, every flag of ours in its tables is one of the CLI's,
//! every TOML snippet parses and validates as a scenario, and every
//! `rdma.KEY` it names is set in one of those snippets. A renamed flag or
//! key fails here, naming the document's line.

use std::collections::BTreeSet;
use std::path::Path;

use crate::common::shell;
use clap::{CommandFactory, Parser};
use fabricbench::cli::Cli;
use fabricbench::scenario;

const DOC: &str = "docs/COMING-FROM.md";

fn doc() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(DOC);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A fenced block: its language and its lines, each with its line number.
struct Block {
    lang: String,
    lines: Vec<(usize, String)>,
}

/// The document's fenced blocks, and the lines outside them (numbered from 1).
fn split(doc: &str) -> (Vec<Block>, Vec<(usize, &str)>) {
    let (mut blocks, mut prose) = (Vec::new(), Vec::new());
    let mut open: Option<Block> = None;
    for (line, text) in doc.lines().enumerate().map(|(i, t)| (i + 1, t)) {
        match (text.strip_prefix("```"), open.take()) {
            (Some(_), Some(block)) => blocks.push(block),
            (Some(lang), None) => open = Some(Block { lang: lang.trim().to_string(), lines: Vec::new() }),
            (None, Some(mut block)) => {
                block.lines.push((line, text.to_string()));
                open = Some(block);
            }
            (None, None) => prose.push((line, text)),
        }
    }
    assert!(open.is_none(), "{DOC}: a code block is not closed");
    (blocks, prose)
}

/// The `code spans` of a line of prose (a table row's cells among them).
fn code_spans(text: &str) -> impl Iterator<Item = &str> {
    text.split('`').skip(1).step_by(2)
}

/// A table row's cells, with the header cell above each (`\|` is no border).
struct Row<'a> {
    line: usize,
    cells: Vec<(String, &'a str)>,
}

fn cells(text: &str) -> Vec<&str> {
    let text = text.trim().trim_start_matches('|').trim_end_matches('|');
    let mut cells = Vec::new();
    let mut start = 0;
    for (at, _) in text.match_indices('|').filter(|(at, _)| !text[..*at].ends_with('\\')) {
        cells.push(text[start..at].trim());
        start = at + 1;
    }
    cells.push(text[start..].trim());
    cells
}

/// The body rows of every table in the prose.
fn table_rows<'a>(prose: &[(usize, &'a str)]) -> Vec<Row<'a>> {
    let mut rows = Vec::new();
    let mut header: Vec<String> = Vec::new();
    for (i, (line, text)) in prose.iter().enumerate() {
        if !text.starts_with('|') || text.starts_with("| ---") {
            continue;
        }
        let above_is_table = i > 0 && prose[i - 1].1.starts_with('|');
        if !above_is_table {
            header = cells(text).into_iter().map(str::to_string).collect();
            continue;
        }
        rows.push(Row { line: *line, cells: header.iter().cloned().zip(cells(text)).collect() });
    }
    rows
}

/// Every `fabricbench …` command of the document with its line: in shell
/// blocks (from the word `fabricbench` on, so `salloc -N 16 fabricbench …`
/// counts; `\` continues a line) and in the tables' code spans.
fn command_lines(doc: &str) -> Vec<(usize, Vec<String>)> {
    let (blocks, prose) = split(doc);
    let mut found = Vec::new();
    for block in blocks.iter().filter(|b| b.lang == "sh") {
        let mut pending: Option<(usize, String)> = None;
        for (line, text) in &block.lines {
            let (start, joined) = pending.take().map_or((*line, text.clone()), |(s, j)| (s, j + text));
            match joined.strip_suffix('\\') {
                Some(head) => pending = Some((start, head.to_string())),
                None => found.push((start, shell::words(&joined))),
            }
        }
    }
    for row in table_rows(&prose) {
        let spans = row.cells.iter().flat_map(|(_, cell)| code_spans(cell));
        found.extend(spans.map(|s| (row.line, shell::words(s))));
    }
    found
        .into_iter()
        .filter_map(|(line, words)| {
            let at = words.iter().position(|w| w == "fabricbench")?;
            Some((line, words[at..].to_vec()))
        })
        .collect()
}

/// Every `-x`, `--long` and alias the subcommands `names` take.
fn flags_of(names: &[&str]) -> BTreeSet<String> {
    let cli = Cli::command();
    let args = names.iter().flat_map(|n| cli.find_subcommand(n).unwrap_or_else(|| panic!("no `{n}`")).get_arguments());
    let mut flags = BTreeSet::new();
    for arg in args {
        let shorts = arg.get_short().into_iter().chain(arg.get_all_short_aliases().unwrap_or_default());
        flags.extend(shorts.map(|c| format!("-{c}")));
        let longs = arg.get_long().into_iter().chain(arg.get_all_aliases().unwrap_or_default());
        flags.extend(longs.map(|l| format!("--{l}")));
    }
    flags
}

/// The flags in the tables' code spans (outside whole command lines) are
/// the CLI's: of `pair` in a `pair` column, of `pair` or `run` in a
/// `fabricbench` column, and of the subcommand a span starts with
/// (`run --port PORT`) in any column.
#[test]
fn every_flag_in_the_tables_is_one_of_the_cli() {
    let doc = doc();
    let (_, prose) = split(&doc);
    let (pair, run, any) = (flags_of(&["pair"]), flags_of(&["run"]), flags_of(&["pair", "run"]));
    let (mut checked, mut unknown) = (0, Vec::new());
    for row in table_rows(&prose) {
        for (column, cell) in &row.cells {
            for span in code_spans(cell).filter(|s| !s.contains("fabricbench")) {
                let words = shell::words(span);
                let (of, known) = match (words.first().map(String::as_str), column.as_str()) {
                    (Some("pair"), _) | (_, "pair") => ("pair", &pair),
                    (Some("run"), _) => ("run", &run),
                    (_, "fabricbench") => ("pair or run", &any),
                    _ => continue,
                };
                for word in words.iter().filter(|w| w.starts_with('-') && *w != "-") {
                    let flag = word.split('=').next().unwrap_or_default();
                    checked += 1;
                    if !known.contains(flag) {
                        unknown.push(format!("{DOC}:{}: `{flag}` is no flag of {of}", row.line));
                    }
                }
            }
        }
    }
    assert!(checked >= 40, "{DOC}: only {checked} flags found in the tables");
    assert!(unknown.is_empty(), "{}", unknown.join("\n"));
}

/// Every TOML snippet of the document, with the line it starts on.
fn toml_snippets(doc: &str) -> Vec<(usize, String)> {
    let (blocks, _) = split(doc);
    blocks
        .into_iter()
        .filter(|b| b.lang == "toml")
        .map(|b| (b.lines[0].0, b.lines.iter().map(|(_, t)| format!("{t}\n")).collect()))
        .collect()
}

/// At least `least` of `what` were found (a reader that finds none cannot
/// pass), and `refusal` refuses none of them.
fn assert_none_refused<T>(what: &str, found: &[T], least: usize, refusal: impl Fn(&T) -> Option<String>) {
    assert!(found.len() >= least, "{DOC}: only {} {what} found", found.len());
    let refused: Vec<String> = found.iter().filter_map(refusal).collect();
    assert!(refused.is_empty(), "{what} refused:\n{}", refused.join("\n"));
}

#[test]
fn every_fabricbench_command_line_parses_with_the_real_cli() {
    assert_none_refused("fabricbench command lines", &command_lines(&doc()), 20, |(line, words)| {
        let e = Cli::try_parse_from(words).err()?;
        Some(format!("{DOC}:{line}: `{}`:\n{}", words.join(" "), e.render()))
    });
}

#[test]
fn every_toml_snippet_is_a_valid_scenario() {
    assert_none_refused("TOML snippets", &toml_snippets(&doc()), 8, |(line, text)| {
        // Blank lines above the snippet: its errors name the document's lines.
        let placed = "\n".repeat(line - 1) + text;
        scenario::parse(&placed, Path::new(DOC)).err().map(|e| e.to_string())
    });
}

/// The keys set in the `[group.rdma]` tables of the document's snippets.
fn rdma_keys_set(doc: &str) -> BTreeSet<String> {
    let mut keys = BTreeSet::new();
    for (line, text) in toml_snippets(doc) {
        let table: toml::Table = text.parse().unwrap_or_else(|e| panic!("{DOC}:{line}: {e}"));
        let groups = table.get("group").and_then(|g| g.as_array()).into_iter().flatten();
        for rdma in groups.filter_map(|g| g.get("rdma")?.as_table()) {
            keys.extend(rdma.keys().cloned());
        }
    }
    keys
}

/// A mapped `rdma.KEY` is set in a snippet that validates (the previous
/// test), and `[group.rdma]` refuses unknown keys: so the key exists.
#[test]
fn every_mapped_rdma_key_is_set_in_a_valid_snippet() {
    let doc = doc();
    let set = rdma_keys_set(&doc);
    let (_, prose) = split(&doc);
    let mapped: Vec<(usize, &str)> = prose
        .iter()
        .flat_map(|(line, text)| code_spans(text).filter_map(|s| s.strip_prefix("rdma.")).map(|key| (*line, key)))
        .collect();
    assert_none_refused("`rdma.KEY` mappings", &mapped, 15, |(line, key)| {
        (!set.contains(*key))
            .then(|| format!("{DOC}:{line}: `rdma.{key}` is set in no [group.rdma] snippet (those set: {set:?})"))
    });
}

#[test]
fn commands_split_into_words_as_a_shell_splits_them() {
    let line = r#"salloc -N 2 fabricbench run a.toml --check 'flow >= 90% of best' -x "a b"  # why"#;
    assert_eq!(
        shell::words(line),
        ["salloc", "-N", "2", "fabricbench", "run", "a.toml", "--check", "flow >= 90% of best", "-x", "a b"]
    );
    assert_eq!(
        shell::words("fabricbench run a.toml --export-json - | jq ."),
        ["fabricbench", "run", "a.toml", "--export-json", "-"]
    );
    assert_eq!(
        shell::words("fabricbench pair a b write --x=1#2"),
        ["fabricbench", "pair", "a", "b", "write", "--x=1#2"]
    );
}
