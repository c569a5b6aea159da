//! The documents say what the code does: the README's sample output is what
//! the current code renders from the run it came from, the exit code table
//! of docs/RESULTS.md is the one `--help` shows and the scripts end with its
//! codes, every relative link in the documents reaches a file of the
//! repository, every `fabricbench …` line of their code blocks parses with
//! the CLI, and every repository path they name exists.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::{bin, shell};
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

/// The documents a user or contributor reads for how to use the tool:
/// README.md, CONTRIBUTING.md and every docs/*.md, sorted.
fn user_documents() -> Vec<String> {
    let mut found: Vec<String> = std::fs::read_dir(repo().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .filter(|name| name.ends_with(".md"))
        .map(|name| format!("docs/{name}"))
        .collect();
    found.sort();
    ["README.md".to_string(), "CONTRIBUTING.md".to_string()].into_iter().chain(found).collect()
}

/// A line of a document, as messages name it (`docs/RDMA.md:112`).
fn place(file: &str, line: usize) -> String {
    format!("{file}:{line}")
}

/// Every `fabricbench …` command line in the code blocks of `text`, with the
/// number of the line it starts on: a line of a fenced block that starts
/// (after indentation) with `fabricbench ` or `$ fabricbench `, joined with
/// the lines a trailing `\` continues it onto. The documents write commands
/// with concrete values (`node01`, `mlx5_0`), never placeholders.
fn command_lines(text: &str) -> Vec<(usize, String)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut found = Vec::new();
    let mut in_block = false;
    let mut index = 0;
    while index < lines.len() {
        let trimmed = lines[index].trim_start();
        let start = index;
        index += 1;
        if trimmed.starts_with("```") {
            in_block = !in_block;
            continue;
        }
        let command = trimmed.strip_prefix("$ ").unwrap_or(trimmed);
        if !in_block || !command.starts_with("fabricbench ") {
            continue;
        }
        let mut command = command.to_string();
        while let Some(continued) = command.trim_end().strip_suffix('\\') {
            command = format!("{continued} {}", lines.get(index).map_or("", |l| l.trim()));
            index += 1;
        }
        found.push((start + 1, command));
    }
    found
}

#[test]
fn command_lines_are_found_joined_and_split_as_a_shell_would() {
    let text =
        "fabricbench run a.toml\n```sh\n$ fabricbench plan s.toml -H h   # why\n  fabricbench run x.toml \\\n    \
                --check 'flow >= 93% of best' > out\nsalloc fabricbench run y.toml\n```\n";
    let found = command_lines(text);
    let joined = "fabricbench run x.toml  --check 'flow >= 93% of best' > out";
    assert_eq!(found, [(3, "fabricbench plan s.toml -H h   # why".to_string()), (4, joined.to_string())]);
    assert_eq!(shell::words(&found[0].1), ["fabricbench", "plan", "s.toml", "-H", "h"]);
    assert_eq!(shell::words(&found[1].1), ["fabricbench", "run", "x.toml", "--check", "flow >= 93% of best"]);
}

/// Every command line the documents show is one the CLI accepts: a renamed
/// flag or subcommand fails here, naming the line and clap's error.
#[test]
fn every_command_line_of_the_documents_parses() {
    use clap::error::ErrorKind;
    use clap::Parser;
    let (mut checked, mut failures) = (0, Vec::new());
    for file in user_documents() {
        for (line, command) in command_lines(&read(&file)) {
            checked += 1;
            match fabricbench::cli::Cli::try_parse_from(shell::words(&command)) {
                Err(e) if ![ErrorKind::DisplayHelp, ErrorKind::DisplayVersion].contains(&e.kind()) => {
                    failures.push(format!("{}: `{command}`\n{e}", place(&file, line)))
                }
                _ => {}
            }
        }
    }
    // The documents show dozens; a handful means the search broke.
    assert!(checked >= 30, "only {checked} command lines found in {:?}", user_documents());
    assert!(failures.is_empty(), "command lines the CLI refuses:\n{}", failures.join("\n"));
}

/// The folders of the repository whose paths the documents must keep true.
const REPOSITORY_FOLDERS: [&str; 8] =
    ["scenarios/", "hostfiles/", "profiles/", "prometheus/", "docs/", "scripts/", "src/", "tests/"];

/// A character a path is made of.
fn in_path(c: char) -> bool {
    c.is_ascii_alphanumeric() || "_./-".contains(c)
}

/// Every repository path `text` names, anywhere (prose, backticks, code
/// blocks), with its line. The rule: a word that starts with one of
/// REPOSITORY_FOLDERS, where no path character (or `~`, `$`) comes right
/// before it, so `/var/tmp/…/hostfile` and `fuzz/corpus/…` are not such
/// words; it runs over letters, digits and `_ . / -`, less a sentence's
/// final `.`. A placeholder (`<name>`, `*`, `{a,b}`, `…`) ends the path,
/// and what comes before it must exist: `scenarios/<name>.toml` names
/// `scenarios/`, `hostfiles/rack<N>` a file `hostfiles/rack`.
fn repository_paths(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (number, line) in text.lines().enumerate() {
        for (at, c) in line.char_indices() {
            let before = line[..at].chars().next_back();
            if before.is_some_and(|b| in_path(b) || "~$".contains(b)) || !c.is_ascii_lowercase() {
                continue;
            }
            let rest = &line[at..];
            if REPOSITORY_FOLDERS.iter().any(|folder| rest.starts_with(folder)) {
                let end = rest.find(|c: char| !in_path(c)).unwrap_or(rest.len());
                let named = (number + 1, rest[..end].trim_end_matches('.').to_string());
                // A link names its path twice, as its text and its target.
                if !found.contains(&named) {
                    found.push(named);
                }
            }
        }
    }
    found
}

#[test]
fn repository_paths_follow_the_rule() {
    let text = "`scripts/test`, see [docs/RDMA.md](docs/RDMA.md).\n/var/tmp/x/hostfile and fuzz/corpus/hello \
                and scenarios/<name>.toml (src/result/).";
    let found = repository_paths(text);
    let expected = [(1, "scripts/test"), (1, "docs/RDMA.md"), (2, "scenarios/"), (2, "src/result/")];
    assert_eq!(found, expected.map(|(line, path)| (line, path.to_string())));
}

/// Every path of the repository the documents name exists: a renamed or
/// removed file, or an example hostfile that was never shipped, fails here.
#[test]
fn every_repository_path_the_documents_name_exists() {
    let mut missing = Vec::new();
    for file in user_documents() {
        for (line, path) in repository_paths(&read(&file)) {
            if !repo().join(&path).exists() {
                missing.push(format!("{}: {path}", place(&file, line)));
            }
        }
    }
    assert!(missing.is_empty(), "paths the documents name that the repository lacks:\n{}", missing.join("\n"));
}

/// The scripts that run another program and end with its exit status,
/// with the codes they add of their own. scripts/softroce-vm runs a command
/// in VMs and says its own failures as timeout(1) and env(1) do, 124 (out of
/// time) and 125 (the command could not be started), so neither is taken
/// for the command's; scripts/test ends as cargo-nextest does, 100 when a
/// test failed. docs/RESULTS.md says so.
const PASS_THROUGH: [(&str, &[u32]); 2] = [("scripts/softroce-vm", &[124, 125]), ("scripts/test", &[100])];

/// The literal codes of the `exit N` commands of a shell text, with their
/// lines: `exit` at a line's start or after a space, `;`, `{`, `(`, `|`,
/// `&` or the quote of a trap's command. `exit "$VAR"` passes on a code
/// that was checked where it was made.
fn exit_codes(text: &str) -> Vec<(usize, u32)> {
    let mut found = Vec::new();
    for (number, line) in text.lines().enumerate() {
        for (at, _) in line.match_indices("exit ") {
            let command = line[..at].chars().next_back().is_none_or(|b| b.is_whitespace() || ";{(|&'".contains(b));
            let digits: String = line[at + "exit ".len()..].chars().take_while(char::is_ascii_digit).collect();
            if let (true, Ok(code)) = (command, digits.parse()) {
                found.push((number + 1, code));
            }
        }
    }
    found
}

/// Every file under `dir`, sorted.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        match path.is_dir() {
            true => found.extend(files_under(&path)),
            false => found.push(path),
        }
    }
    found.sort();
    found
}

/// Whether `code` is one of the table's: a fixed row, or 128 + a signal's
/// number.
fn in_the_table(code: u32) -> bool {
    let fixed = exit::TABLE.iter().any(|e| !matches!(e, exit::Exit::Stopped(_)) && u32::from(e.code()) == code);
    let signal = code.checked_sub(128).and_then(|n| i32::try_from(n).ok());
    fixed || signal.is_some_and(|n| nix::sys::signal::Signal::try_from(n).is_ok())
}

/// The scripts end as fabricbench does: "a check failed" is 3 from
/// scripts/gpu-check as from `fabricbench gpus`, and no script makes up a
/// code of its own.
#[test]
fn every_exit_code_of_the_scripts_is_in_the_table() {
    let mut outside = Vec::new();
    for path in files_under(&repo().join("scripts")) {
        let name = path.strip_prefix(repo()).unwrap().to_string_lossy().to_string();
        let own = PASS_THROUGH.iter().find(|(script, _)| *script == name).map_or(&[][..], |(_, codes)| codes);
        for (line, code) in exit_codes(&std::fs::read_to_string(&path).unwrap()) {
            if !in_the_table(code) && !own.contains(&code) {
                outside.push(format!("{}: exit {code}", place(&name, line)));
            }
        }
    }
    assert!(
        outside.is_empty(),
        "exit codes outside docs/RESULTS.md's table (src/exit.rs): use the table's code for the outcome\n{}",
        outside.join("\n")
    );
}

#[test]
fn exit_commands_are_found_and_strings_left_alone() {
    let text =
        "die() { echo x; exit 125; }\ntrap 'exit 130' INT\nprintf '#!/bin/sh\\nexit 101\\n'\nexit \"$RC\"\nexit 3";
    assert_eq!(exit_codes(text), [(1, 125), (2, 130), (5, 3)]);
    assert!(in_the_table(3) && in_the_table(130) && in_the_table(143) && !in_the_table(100) && !in_the_table(5));
}
