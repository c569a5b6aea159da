//! The documents say what the code does: the README's sample output is what
//! the current code renders from the run it came from, the exit code table
//! of docs/RESULTS.md is the one `--help` shows, and every relative link in
//! the documents reaches a file of the repository.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::bin;
use fabricbench::exit;
use fabricbench::report::store::results_dir;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &str) -> String {
    std::fs::read_to_string(repo().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The text between `<!-- NAME … -->` and `<!-- /NAME -->` in `path`.
fn marked_block(path: &str, name: &str) -> String {
    let text = read(path);
    let open = format!("<!-- {name}");
    let start = text.find(&open).unwrap_or_else(|| panic!("{path} has no `{open} … -->` marker"));
    let body = start + text[start..].find("-->\n").expect("the opening marker ends with -->") + "-->\n".len();
    let end =
        text[body..].find(&format!("<!-- /{name} -->")).unwrap_or_else(|| panic!("{path}: `{open}` is not closed"));
    text[body..body + end].to_string()
}

/// The command the README shows above its sample: the one
/// scripts/readme-sample ran.
const SAMPLE_COMMAND: &str = "fabricbench run scenarios/fan-in.toml -H hostfiles/local";

/// The terminal width the sample is drawn at: a code block GitHub shows
/// whole.
const SAMPLE_WIDTH: u16 = 100;

/// The README's sample block as the current code draws it from
/// tests/fixtures/readme/run.json.
fn readme_sample() -> String {
    let run = results_dir::read(&repo().join("tests/fixtures/readme/run.json")).unwrap();
    let rendered = fabricbench::report::terminal::render(&run, Some(SAMPLE_WIDTH));
    format!("```console\n$ {SAMPLE_COMMAND}\n{}```\n", rendered.trim_start_matches('\n'))
}

/// The README's sample is the summary of tests/fixtures/readme/run.json
/// drawn by the current code, so a change to the summary cannot leave it
/// stale. With FABRICBENCH_WRITE_README set (scripts/readme-sample) it
/// writes the block instead.
#[test]
fn readme_sample_is_what_the_code_renders() {
    let expected = readme_sample();
    if std::env::var_os("FABRICBENCH_WRITE_README").is_some() {
        let text = read("README.md");
        let in_readme = marked_block("README.md", "sample");
        let start = text.find(&format!("-->\n{in_readme}<!-- /sample -->")).expect("the sample's markers") + 4;
        let written = format!("{}{expected}{}", &text[..start], &text[start + in_readme.len()..]);
        std::fs::write(repo().join("README.md"), written).unwrap();
    }
    let in_readme = marked_block("README.md", "sample");
    assert!(
        in_readme == expected,
        "README.md's sample output differs from what the code draws from tests/fixtures/readme/run.json; \
         run `scripts/readme-sample --render` (or `scripts/readme-sample` for a new run) and commit README.md.\n\
         README:\n{in_readme}\ndrawn now:\n{expected}"
    );
}

/// The README teaches by example in a few screens; reference belongs in docs/.
const README_MOST_LINES: usize = 200;

#[test]
fn the_readme_stays_a_few_screens() {
    let lines = read("README.md").lines().count();
    assert!(
        lines <= README_MOST_LINES,
        "README.md has {lines} lines, over {README_MOST_LINES}: move reference text into docs/ and link it"
    );
}

#[test]
fn the_exit_codes_of_the_docs_are_the_codes_of_the_code() {
    assert_eq!(
        marked_block("docs/RESULTS.md", "exit-codes"),
        exit::markdown_table(),
        "docs/RESULTS.md's exit code table differs from src/exit.rs's: paste exit::markdown_table() between the markers"
    );
    let help = Command::new(bin()).arg("run").arg("--help").output().unwrap();
    let help = String::from_utf8(help.stdout).unwrap();
    assert!(help.contains(&exit::help_text()), "`run --help` lacks the exit code table:\n{help}");
}

/// Every Markdown file of the repository (not target/ or fuzz's build).
/// Symbolic links are not followed: a checkout may hold links that loop or
/// lead out of it (a CI runner's shared folder), and they are not its files.
fn markdown_files(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let path = entry.path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let is_dir = entry.file_type().unwrap().is_dir();
        if is_dir && !name.starts_with('.') && name != "target" && name != "results" {
            markdown_files(&path, found);
        } else if name.ends_with(".md") {
            found.push(path);
        }
    }
}

/// The relative targets of `[text](target)` links in a Markdown text.
fn relative_links(text: &str) -> Vec<String> {
    text.split("](")
        .skip(1)
        .filter_map(|rest| rest.split_once(')').map(|(target, _)| target.split('#').next().unwrap_or("").to_string()))
        .filter(|t| !t.is_empty() && !t.contains("://") && !t.starts_with("mailto:"))
        .collect()
}

#[test]
fn every_relative_link_stays_in_the_repository_and_reaches_a_file() {
    let mut files = Vec::new();
    markdown_files(repo(), &mut files);
    assert!(files.iter().any(|f| f.ends_with("README.md")), "no README.md among {files:?}");
    let root = repo().canonicalize().unwrap();
    let mut broken = Vec::new();
    for file in &files {
        for link in relative_links(&std::fs::read_to_string(file).unwrap()) {
            let target = file.parent().unwrap().join(&link);
            match target.canonicalize() {
                Ok(found) if found.starts_with(&root) => {}
                Ok(_) => broken.push(format!("{}: {link} points outside the repository", file.display())),
                Err(_) => broken.push(format!("{}: {link} reaches no file", file.display())),
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn links_are_found_and_anchors_dropped() {
    let text = "see [a](docs/A.md#x), [b](https://x.org/y) and [c](../c.md).";
    assert_eq!(relative_links(text), ["docs/A.md", "../c.md"]);
}
