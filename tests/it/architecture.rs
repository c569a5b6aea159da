//! The module graph is a stack: every `crate::` path in src/ points down it
//! (or stays in its own room), and no two files of one room import each
//! other in a circle. docs/ARCHITECTURE.md describes the stack; this test
//! keeps the code telling the same story.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The rooms, bottom first. A room may use the rooms of lower layers only;
/// rooms of one layer are peers and do not use each other.
const STACK: &[&[&str]] = &[
    &["units", "hostfile", "fdlimit", "histogram", "sysfs", "exit"],
    &["topology"],
    &["scenario"],
    &["plan"],
    &["transport", "load"],
    &["metrics", "hostfacts"],
    &["result"],
    &["control", "acceptance", "launch"],
    &["worker", "progress", "hostcheck"],
    &["run"],
    &["report"],
    &["cli"],
    &["commands"],
];

/// One source file: its path below src/ (`worker/phase.rs`) and its text.
struct Source {
    path: String,
    text: String,
}

/// A `crate::` path found in a file, resolved to the file that defines it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Import {
    from: String,
    to: String,
    /// The path as written after `crate::` (for the message).
    name: String,
}

fn room_of(path: &str) -> &str {
    let first = path.split('/').next().unwrap_or(path);
    first.strip_suffix(".rs").unwrap_or(first)
}

fn layer_of(room: &str) -> Option<usize> {
    STACK.iter().position(|layer| layer.contains(&room))
}

/// The module path of a file: `worker/phase.rs` → [worker, phase],
/// `worker/mod.rs` → [worker].
fn module_path(path: &str) -> Vec<String> {
    let mut parts: Vec<String> = path.trim_end_matches(".rs").split('/').map(str::to_string).collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts
}

/// The code of a file without comments (a `//` comment line, or the tail of
/// a line after ` // `), so prose that names a module does not count.
fn code_of(text: &str) -> String {
    let mut code = String::with_capacity(text.len());
    for line in text.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("//") {
            continue;
        }
        code.push_str(line.split(" // ").next().unwrap_or(line));
        code.push('\n');
    }
    code
}

/// Every path a file names after `crate::` (`{a::b, c}` groups expanded to
/// their leading segments) and after `super::` (made absolute).
fn paths_in(source: &Source) -> Vec<Vec<String>> {
    let code = code_of(&source.text);
    let mut paths = Vec::new();
    for (prefix, base) in [("crate::", Vec::new()), ("super::", parent(&module_path(&source.path)))] {
        let mut rest = code.as_str();
        while let Some(at) = rest.find(prefix) {
            let before = rest[..at].chars().next_back();
            rest = &rest[at + prefix.len()..];
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$' || c == ':') {
                continue;
            }
            for tail in expand(rest) {
                let mut path = base.clone();
                path.extend(tail);
                paths.push(path);
            }
        }
    }
    paths
}

fn parent(module: &[String]) -> Vec<String> {
    module[..module.len().saturating_sub(1)].to_vec()
}

/// The segments at the start of `text`: `a::b::C` → [[a, b, C]];
/// `{a::b, c::{d}}` → [[a, b], [c, d]] (one level of nesting followed).
fn expand(text: &str) -> Vec<Vec<String>> {
    let mut segments = Vec::new();
    let mut rest = text;
    loop {
        if let Some(group) = rest.strip_prefix('{') {
            let inner = &group[..closing_brace(group)];
            return split_top_level(inner)
                .into_iter()
                .flat_map(|item| {
                    expand(item.trim()).into_iter().map({
                        let segments = segments.clone();
                        move |tail| segments.iter().cloned().chain(tail).collect()
                    })
                })
                .collect();
        }
        let ident: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
        if ident.is_empty() {
            break;
        }
        rest = &rest[ident.len()..];
        segments.push(ident);
        match rest.strip_prefix("::") {
            Some(next) => rest = next,
            None => break,
        }
    }
    if segments.is_empty() {
        Vec::new()
    } else {
        vec![segments]
    }
}

fn closing_brace(text: &str) -> usize {
    let mut depth = 0;
    for (i, c) in text.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => return i,
            '}' => depth -= 1,
            _ => {}
        }
    }
    text.len()
}

fn split_top_level(text: &str) -> Vec<&str> {
    let (mut items, mut depth, mut start) = (Vec::new(), 0, 0);
    for (i, c) in text.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(&text[start..]);
    items
}

/// The file that defines a module path: the longest prefix that is a file.
fn resolve(path: &[String], files: &BTreeSet<String>) -> Option<String> {
    (1..=path.len()).rev().find_map(|n| {
        let stem = path[..n].join("/");
        [format!("{stem}.rs"), format!("{stem}/mod.rs")].into_iter().find(|f| files.contains(f))
    })
}

fn imports(sources: &[Source]) -> Vec<Import> {
    let files: BTreeSet<String> = sources.iter().map(|s| s.path.clone()).collect();
    let mut found = Vec::new();
    for source in sources {
        for path in paths_in(source) {
            if let Some(to) = resolve(&path, &files) {
                if to != source.path {
                    found.push(Import { from: source.path.clone(), to, name: path.join("::") });
                }
            }
        }
    }
    found.sort_by(|a, b| (&a.from, &a.to, &a.name).cmp(&(&b.from, &b.to, &b.name)));
    found.dedup_by(|a, b| a.from == b.from && a.to == b.to);
    found
}

/// Every way the sources break the stack, one line each.
fn violations(sources: &[Source]) -> Vec<String> {
    let mut problems = Vec::new();
    let rooms: BTreeSet<&str> = sources.iter().map(|s| room_of(&s.path)).collect();
    for room in &rooms {
        if layer_of(room).is_none() {
            problems.push(format!("room `{room}` is not in the stack (tests/it/architecture.rs STACK)"));
        }
    }
    let all = imports(sources);
    for import in &all {
        let (from, to) = (room_of(&import.from), room_of(&import.to));
        if from == to {
            continue;
        }
        if let (Some(lower), Some(upper)) = (layer_of(to), layer_of(from)) {
            let verb = if lower == upper { "a peer room" } else { "a room above it" };
            if lower >= upper {
                problems
                    .push(format!("src/{} imports {verb}: src/{} (crate::{})", import.from, import.to, import.name));
            }
        }
    }
    problems.extend(file_cycles(&all));
    problems
}

/// Circles among the files of one room. A room's front door (mod.rs) is left
/// out: its children may use what it declares while it re-exports them.
fn file_cycles(all: &[Import]) -> Vec<String> {
    let mut edges: BTreeMap<&str, Vec<&Import>> = BTreeMap::new();
    for import in all {
        let same_room = room_of(&import.from) == room_of(&import.to);
        let front_door = |f: &str| f.ends_with("mod.rs") || !f.contains('/');
        if same_room && !front_door(&import.from) && !front_door(&import.to) {
            edges.entry(import.from.as_str()).or_default().push(import);
        }
    }
    let mut cycles = Vec::new();
    let mut done = BTreeSet::new();
    for &start in edges.keys() {
        walk(start, &edges, &mut Vec::new(), &mut Vec::new(), &mut done, &mut cycles);
    }
    cycles
}

/// Depth first from `file`; `open[i]` is a file on the current path and
/// `trail[i]` the import that leaves it, so a file met again closes a circle.
fn walk<'a>(
    file: &'a str,
    edges: &BTreeMap<&'a str, Vec<&'a Import>>,
    open: &mut Vec<&'a str>,
    trail: &mut Vec<&'a Import>,
    done: &mut BTreeSet<&'a str>,
    cycles: &mut Vec<String>,
) {
    if done.contains(file) {
        return;
    }
    if let Some(at) = open.iter().position(|f| *f == file) {
        let circle: Vec<String> =
            trail[at..].iter().map(|i| format!("src/{} → src/{} (crate::{})", i.from, i.to, i.name)).collect();
        cycles.push(format!("files import each other in a circle: {}", circle.join(", ")));
        return;
    }
    open.push(file);
    for import in edges.get(file).into_iter().flatten() {
        trail.push(import);
        walk(&import.to, edges, open, trail, done, cycles);
        trail.pop();
    }
    open.pop();
    done.insert(file);
}

fn read_tree(root: &Path) -> Vec<Source> {
    let mut sources = Vec::new();
    let mut dirs = vec![PathBuf::from(root)];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path.strip_prefix(root).unwrap().to_string_lossy().replace('\\', "/");
                // The crate root and the binary are above every room.
                if rel != "lib.rs" && rel != "main.rs" {
                    sources.push(Source { text: std::fs::read_to_string(&path).unwrap(), path: rel });
                }
            }
        }
    }
    sources.sort_by(|a, b| a.path.cmp(&b.path));
    sources
}

#[test]
fn every_import_points_down_the_stack() {
    let sources = read_tree(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    assert!(sources.len() > 50, "src/ was not read ({} files)", sources.len());
    let problems = violations(&sources);
    assert!(problems.is_empty(), "the module graph breaks the stack:\n  {}", problems.join("\n  "));
}

fn source(path: &str, text: &str) -> Source {
    Source { path: path.to_string(), text: text.to_string() }
}

#[test]
fn a_planted_upward_import_is_named_with_both_files() {
    let sources = [
        source("units.rs", "use crate::report::table::Table;\n"),
        source("report/mod.rs", "pub mod table;\n"),
        source("report/table.rs", "pub struct Table;\n"),
    ];
    assert_eq!(
        violations(&sources),
        ["src/units.rs imports a room above it: src/report/table.rs (crate::report::table::Table)"]
    );
}

#[test]
fn grouped_super_and_commented_paths_are_read_as_rust_reads_them() {
    let sources = [
        source("scenario/mod.rs", "pub mod rdma;\n"),
        source("scenario/rdma.rs", "// crate::run::x is prose\nuse super::Pattern;\n"),
        source("plan/mod.rs", "use crate::{\n    scenario::rdma::{A, B},\n    units,\n};\n"),
        source("units.rs", "x::crate::run::y; $crate::run::z;\n"),
        source("run/mod.rs", ""),
        source("transport/mod.rs", "use crate::{run::X};\n"),
        source("load/mod.rs", "use crate::transport::Side;\n"),
    ];
    assert_eq!(
        violations(&sources),
        [
            "src/load/mod.rs imports a peer room: src/transport/mod.rs (crate::transport::Side)",
            "src/transport/mod.rs imports a room above it: src/run/mod.rs (crate::run::X)",
        ]
    );
    let found = imports(&sources);
    assert!(found.iter().any(|i| i.from == "plan/mod.rs" && i.to == "scenario/rdma.rs"));
    assert!(found.iter().any(|i| i.from == "scenario/rdma.rs" && i.to == "scenario/mod.rs"));
}

#[test]
fn files_of_one_room_in_a_circle_are_named() {
    let sources = [
        source("worker/mod.rs", "pub mod phase; pub mod streams;\n"),
        source("worker/phase.rs", "use crate::worker::streams::End;\n"),
        source("worker/streams.rs", "use super::phase::FlowFailed;\n"),
    ];
    let problems = violations(&sources);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].starts_with("files import each other in a circle: src/worker/phase.rs → src/worker/streams.rs"));
}

#[test]
fn a_room_outside_the_stack_is_named() {
    assert_eq!(
        violations(&[source("gadgets.rs", "")]),
        ["room `gadgets` is not in the stack (tests/it/architecture.rs STACK)"]
    );
}
