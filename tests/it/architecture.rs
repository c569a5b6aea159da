//! The module graph is a stack: every `crate::` path in src/ points down it
//! (or stays in its own module), and no files import each other in a circle
//! (a module's `mod.rs` and its own parts aside). docs/ARCHITECTURE.md
//! describes the stack; this test keeps the code telling the same story.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The modules, bottom first. A module may use the modules of lower layers only;
/// modules of one layer are peers and do not use each other.
const STACK: &[&[&str]] = &[
    &["units", "hostfile", "fdlimit", "histogram", "sysfs", "exit", "diag"],
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
    &["watch"],
    &["cli"],
    &["commands"],
];

/// Modules kept from a lower module they could reach: the transport and the
/// worker obey the plan's resolved groups, never the scenario's TOML model
/// (the plan names the words they need).
const FORBIDDEN: &[(&str, &str)] = &[("transport", "scenario"), ("worker", "scenario")];

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
    /// The module paths of the two files.
    from_module: Vec<String>,
    to_module: Vec<String>,
    /// Written in test code, which may use any file of its module.
    in_test: bool,
}

fn top_module_of(path: &str) -> &str {
    let first = path.split('/').next().unwrap_or(path);
    first.strip_suffix(".rs").unwrap_or(first)
}

fn layer_of(top: &str) -> Option<usize> {
    STACK.iter().position(|layer| layer.contains(&top))
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

/// The module path of every file, `#[path = "x.rs"] mod name;` followed (a
/// file beside the one that declares it: `worker/session_tests.rs` is
/// `worker::session::tests`).
fn module_paths(sources: &[Source]) -> BTreeMap<String, Vec<String>> {
    let mut modules: BTreeMap<String, Vec<String>> =
        sources.iter().map(|s| (s.path.clone(), module_path(&s.path))).collect();
    for source in sources {
        let dir = source.path.rsplit_once('/').map_or(String::new(), |(dir, _)| format!("{dir}/"));
        for (at, _) in source.text.match_indices("#[path = \"") {
            let Some((file, after)) = source.text[at + 10..].split_once('"') else { continue };
            if let Some(name) = declared_modules(after).into_iter().next() {
                let mut module = module_path(&source.path);
                module.push(name);
                modules.insert(format!("{dir}{file}"), module);
            }
        }
    }
    modules
}

/// The modules that code declares from files (`mod name;`, any visibility).
fn declared_modules(code: &str) -> Vec<String> {
    let mut names = Vec::new();
    for (at, _) in code.match_indices("mod ") {
        if code[..at].chars().next_back().is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let rest = &code[at + 4..];
        let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
        if !name.is_empty() && rest[name.len()..].trim_start().starts_with(';') {
            names.push(name);
        }
    }
    names
}

/// Every path a file's code names (`{a::b, c}` groups expanded to their
/// leading segments), made absolute: after `crate::`, after `super::` and
/// `self::`, and after the name of a module the file declares (`mod tasks;`
/// … `tasks::Stream`). Inside an inline test module `super::` is the file;
/// each path says whether test code (such a module, or a test file) wrote it.
fn paths_in(source: &Source, module: &[String]) -> Vec<(Vec<String>, bool)> {
    let code = blanked(&source.text);
    let tests = test_modules(&code);
    let children = declared_modules(&code);
    let starts = ["crate", "super", "self"].into_iter().chain(children.iter().map(String::as_str));
    let mut paths = Vec::new();
    for start in starts {
        for (at, _) in code.match_indices(&format!("{start}::")) {
            let before = code[..at].chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || matches!(c, '_' | '$' | ':' | '.')) {
                continue;
            }
            let in_test = tests.iter().any(|&(from, to)| (from..=to).contains(&at));
            if in_test && children.iter().any(|c| c == start) {
                continue;
            }
            let mut here = module.to_vec();
            if in_test {
                here.push("tests".to_string());
            }
            let test_code = here.last().is_some_and(|m| m == "tests");
            paths.extend(expand(&code[at..]).into_iter().map(|segments| (absolute(&here, &segments), test_code)));
        }
    }
    paths
}

/// A path as written in module `here`, from the crate root.
fn absolute(here: &[String], segments: &[String]) -> Vec<String> {
    let (base, rest) = match segments[0].as_str() {
        "crate" => (&[][..], &segments[1..]),
        "self" => (here, &segments[1..]),
        "super" => {
            let ups = segments.iter().take_while(|s| *s == "super").count();
            (&here[..here.len().saturating_sub(ups)], &segments[ups..])
        }
        _ => (here, segments),
    };
    base.iter().chain(rest).cloned().collect()
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

/// What a file re-exports (`pub use child::Name;`, any visibility): the
/// name it gives, and the path it stands for, from the crate root.
fn reexports(source: &Source, module: &[String]) -> BTreeMap<String, Vec<String>> {
    let code = blanked(&source.text);
    let mut names = BTreeMap::new();
    for (at, _) in code.match_indices("use ") {
        let head = code[..at].trim_end();
        if !(head.ends_with("pub") || head.ends_with(')')) {
            continue;
        }
        for segments in expand(&code[at + 4..]) {
            if let Some(last) = segments.last().filter(|s| *s != "self") {
                names.insert(last.clone(), absolute(module, &segments));
            }
        }
    }
    names
}

fn imports(sources: &[Source]) -> Vec<Import> {
    let files: BTreeSet<String> = sources.iter().map(|s| s.path.clone()).collect();
    let modules = module_paths(sources);
    let exported: BTreeMap<&str, _> =
        sources.iter().map(|s| (s.path.as_str(), reexports(s, &modules[&s.path]))).collect();
    let mut found = Vec::new();
    for source in sources {
        for (path, in_test) in paths_in(source, &modules[&source.path]) {
            let Some(mut to) = resolve(&path, &files) else { continue };
            // A name a front door re-exports is an import of the file that defines it.
            let beyond = path.get(module_path(&to).len());
            if let Some(real) = beyond.and_then(|name| exported[to.as_str()].get(name)) {
                to = resolve(real, &files).unwrap_or(to);
            }
            if to != source.path {
                let (from_module, to_module) = (modules[&source.path].clone(), modules[&to].clone());
                let name = path.join("::");
                found.push(Import { from: source.path.clone(), to, name, from_module, to_module, in_test });
            }
        }
    }
    found.sort_by(|a, b| (&a.from, &a.to, a.in_test, &a.name).cmp(&(&b.from, &b.to, b.in_test, &b.name)));
    found.dedup_by(|a, b| a.from == b.from && a.to == b.to && a.in_test == b.in_test);
    found
}

/// Every way the sources break the stack, one line each.
fn violations(sources: &[Source]) -> Vec<String> {
    let mut problems = Vec::new();
    let tops: BTreeSet<&str> = sources.iter().map(|s| top_module_of(&s.path)).collect();
    for top in &tops {
        if layer_of(top).is_none() {
            problems.push(format!("module `{top}` is not in the stack (tests/it/architecture.rs STACK)"));
        }
    }
    let all = imports(sources);
    for import in &all {
        let (from, to) = (top_module_of(&import.from), top_module_of(&import.to));
        if from == to {
            continue;
        }
        // The module as written: a name the plan re-exports is the plan's
        // word, wherever it is defined.
        let written = import.name.split("::").next().unwrap_or_default();
        if FORBIDDEN.contains(&(from, written)) {
            problems.push(format!(
                "src/{} imports `{written}`, which `{from}` may not use: src/{} (crate::{})",
                import.from, import.to, import.name
            ));
        }
        if let (Some(lower), Some(upper)) = (layer_of(to), layer_of(from)) {
            let verb = if lower == upper { "a peer module" } else { "a module above it" };
            if lower >= upper {
                problems
                    .push(format!("src/{} imports {verb}: src/{} (crate::{})", import.from, import.to, import.name));
            }
        }
    }
    problems.extend(file_cycles(&all));
    problems
}

/// Circles among files, through any files, a `mod.rs` included: only a
/// module's front door and its own parts (`tcp/mod.rs` and `tcp/latency.rs`)
/// may use each other, the door its parts and the parts what it declares.
/// A name a front door re-exports counts as the file that defines it; test
/// code is left out.
fn file_cycles(all: &[Import]) -> Vec<String> {
    let mut edges: BTreeMap<&str, Vec<(&str, &Import)>> = BTreeMap::new();
    for import in all {
        let (from, to) = (&import.from_module, &import.to_module);
        if !import.in_test && !from.starts_with(to) && !to.starts_with(from) {
            edges.entry(import.from.as_str()).or_default().push((import.to.as_str(), import));
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
    edges: &BTreeMap<&'a str, Vec<(&'a str, &'a Import)>>,
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
    for &(to, import) in edges.get(file).into_iter().flatten() {
        trail.push(import);
        walk(to, edges, open, trail, done, cycles);
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
                // The crate root and the binary are above every module.
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
        ["src/units.rs imports a module above it: src/report/table.rs (crate::report::table::Table)"]
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
            "src/load/mod.rs imports a peer module: src/transport/mod.rs (crate::transport::Side)",
            "src/transport/mod.rs imports a module above it: src/run/mod.rs (crate::run::X)",
        ]
    );
    let found = imports(&sources);
    assert!(found.iter().any(|i| i.from == "plan/mod.rs" && i.to == "scenario/rdma.rs"));
    assert!(found.iter().any(|i| i.from == "scenario/rdma.rs" && i.to == "scenario/mod.rs"));
}

#[test]
fn the_transport_and_the_worker_take_the_plans_words_not_the_scenarios() {
    let sources = [
        source("scenario/mod.rs", "pub enum Op {}\n"),
        source("plan/mod.rs", "pub use crate::scenario::Op;\n"),
        source("transport/mod.rs", "use crate::plan::Op;\n"),
        source("worker/mod.rs", "use crate::scenario::Op;\n"),
    ];
    assert_eq!(
        violations(&sources),
        ["src/worker/mod.rs imports `scenario`, which `worker` may not use: src/scenario/mod.rs (crate::scenario::Op)"]
    );
}

#[test]
fn files_of_one_module_in_a_circle_are_named() {
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
fn a_circle_through_a_front_door_or_a_reexport_is_named() {
    let sources = [
        source("transport/mod.rs", "pub mod task;\npub mod tcp;\n"),
        source("transport/task.rs", "use crate::transport::tcp::TcpError;\n"),
        source(
            "transport/tcp/mod.rs",
            "mod accept;\nmod handshake;\npub use accept::Accepted;\npub struct TcpError;\nuse crate::transport::task::FlowTask;\n",
        ),
        source("transport/tcp/accept.rs", "use super::handshake::Shake;\n"),
        source("transport/tcp/handshake.rs", "use crate::transport::tcp::{Accepted, TcpError};\n"),
    ];
    assert_eq!(
        violations(&sources),
        [
            "files import each other in a circle: \
             src/transport/task.rs → src/transport/tcp/mod.rs (crate::transport::tcp::TcpError), \
             src/transport/tcp/mod.rs → src/transport/task.rs (crate::transport::task::FlowTask)",
            "files import each other in a circle: \
             src/transport/tcp/accept.rs → src/transport/tcp/handshake.rs (crate::transport::tcp::handshake::Shake), \
             src/transport/tcp/handshake.rs → src/transport/tcp/accept.rs (crate::transport::tcp::Accepted)",
        ]
    );
}

/// A front door and its own parts are no circle; a test module's `super::`
/// is its file, and a `#[path]` file is the module that declares it.
#[test]
fn test_modules_and_path_attributes_are_read_as_rust_reads_them() {
    let sources = [
        source("worker/mod.rs", "mod session;\npub struct Engine;\nfn f() { session::run() }\n"),
        source("worker/session.rs", "pub fn run() {}\n#[cfg(test)]\n#[path = \"session_tests.rs\"]\nmod tests;\n"),
        source("worker/session_tests.rs", "use super::run;\n"),
        source("worker/phase.rs", "pub fn go() {}\n#[cfg(test)]\nmod tests {\n    use super::*;\n}\n"),
        source("report/mod.rs", "mod csv;\npub enum ReportError {}\nfn flows() { csv::flows() }\n"),
        source("report/csv.rs", "use super::ReportError;\npub fn flows() {}\n"),
    ];
    assert!(violations(&sources).is_empty(), "{:?}", violations(&sources));
    let found = imports(&sources);
    assert!(found.iter().any(|i| i.from == "worker/session_tests.rs" && i.to == "worker/session.rs"));
    assert!(found.iter().any(|i| i.from == "worker/mod.rs" && i.to == "worker/session.rs"));
    assert!(!found.iter().any(|i| i.from == "worker/phase.rs"));
    assert!(found.iter().any(|i| i.from == "report/mod.rs" && i.to == "report/csv.rs"));
}

#[test]
fn a_module_outside_the_stack_is_named() {
    assert_eq!(
        violations(&[source("gadgets.rs", "")]),
        ["module `gadgets` is not in the stack (tests/it/architecture.rs STACK)"]
    );
}

/// Longest a file outside tests may be, in lines.
const FILE_LINES: usize = 450;
/// Longest a function outside tests and src/transport may be, in lines
/// from its signature to its closing brace: one screen.
const FN_LINES: usize = 80;

/// `text` with comments, and the insides of string and character literals,
/// made blanks (line breaks kept): braces and `fn` left are code.
fn blanked(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        let ident_before = i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_');
        let end = if c == '/' && next == Some('/') {
            chars[i..].iter().position(|&c| c == '\n').map_or(chars.len(), |n| i + n)
        } else if c == '/' && next == Some('*') {
            block_comment_end(&chars, i)
        } else if c == '"' {
            string_end(&chars, i + 1, 0)
        } else if (c == 'r' || (c == 'b' && next == Some('r'))) && !ident_before {
            let open = i + if c == 'b' { 2 } else { 1 };
            let hashes = chars[open..].iter().take_while(|&&c| c == '#').count();
            if chars.get(open + hashes) == Some(&'"') {
                string_end(&chars, open + hashes + 1, hashes)
            } else {
                i + 1
            }
        } else if c == '\'' && next == Some('\\') {
            chars[i + 2..].iter().position(|&c| c == '\'').map_or(chars.len(), |n| i + 3 + n)
        } else if c == '\'' && chars.get(i + 2) == Some(&'\'') {
            i + 3
        } else {
            i + 1
        };
        if end == i + 1 {
            out.push(c);
        } else {
            out.extend(chars[i..end].iter().map(|&c| blank(c)));
        }
        i = end;
    }
    out
}

/// Just past the `*/` that closes the (nested) block comment opening at `at`.
fn block_comment_end(chars: &[char], at: usize) -> usize {
    let (mut depth, mut i) = (0, at);
    while i + 1 < chars.len() {
        match (chars[i], chars[i + 1]) {
            ('/', '*') => (depth, i) = (depth + 1, i + 2),
            ('*', '/') if depth == 1 => return i + 2,
            ('*', '/') => (depth, i) = (depth - 1, i + 2),
            _ => i += 1,
        }
    }
    chars.len()
}

/// Just past the quote (and `hashes` #s) that closes a string whose text starts at `from`.
fn string_end(chars: &[char], from: usize, hashes: usize) -> usize {
    let mut i = from;
    while i < chars.len() {
        match chars[i] {
            '\\' if hashes == 0 => i += 2,
            '"' if chars[i + 1..].iter().take(hashes).filter(|&&c| c == '#').count() == hashes => {
                return i + 1 + hashes
            }
            _ => i += 1,
        }
    }
    chars.len()
}

/// The index of the brace that closes the one at `open` in blanked code.
fn matching_brace(code: &[u8], open: usize) -> usize {
    let mut depth = 0;
    for (i, &b) in code.iter().enumerate().skip(open) {
        match b {
            b'{' => depth += 1,
            b'}' if depth == 1 => return i,
            b'}' => depth -= 1,
            _ => {}
        }
    }
    code.len()
}

fn line_at(code: &[u8], at: usize) -> usize {
    code[..at].iter().filter(|&&b| b == b'\n').count() + 1
}

/// Where the inline `#[cfg(test)]` modules of blanked code are (byte ranges).
fn test_modules(code: &str) -> Vec<(usize, usize)> {
    let mut tests = Vec::new();
    for (at, _) in code.match_indices("#[cfg(test)]") {
        let rest = code[at..].trim_start_matches("#[cfg(test)]").trim_start();
        if rest.starts_with("mod ") || rest.starts_with("pub mod ") {
            if let Some(open) = code[at..].find(['{', ';']).map(|n| at + n).filter(|&o| code.as_bytes()[o] == b'{') {
                tests.push((at, matching_brace(code.as_bytes(), open)));
            }
        }
    }
    tests
}

/// The lines of `text` that are not inside an inline test module.
fn lines_outside_tests(text: &str) -> usize {
    let code = blanked(text);
    let inside: usize = test_modules(&code)
        .into_iter()
        .map(|(from, to)| line_at(code.as_bytes(), to) - line_at(code.as_bytes(), from) + 1)
        .sum();
    text.lines().count() - inside
}

/// Every function with a body in `text`: its name, its first line and how many
/// lines it spans. Functions inside a `#[cfg(test)]` module are left out.
fn functions(text: &str) -> Vec<(String, usize, usize)> {
    let code = blanked(text);
    let bytes = code.as_bytes();
    let tests = test_modules(&code);
    let mut found = Vec::new();
    for (at, _) in code.match_indices("fn ") {
        let ident_before = at > 0 && (bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_');
        let name: String = code[at + 3..].chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
        if ident_before || name.is_empty() || tests.iter().any(|&(from, to)| (from..=to).contains(&at)) {
            continue;
        }
        // The body opens at the first `{` outside parentheses and brackets; a `;` first means none.
        let mut depth = 0i32;
        let body = bytes[at..].iter().enumerate().find_map(|(n, &b)| {
            match b {
                b'(' | b'[' => depth += 1,
                b')' | b']' => depth -= 1,
                b'{' if depth == 0 => return Some(Some(at + n)),
                b';' if depth == 0 => return Some(None),
                _ => {}
            }
            None
        });
        if let Some(Some(open)) = body {
            let first = line_at(bytes, at);
            found.push((name, first, line_at(bytes, matching_brace(bytes, open)) - first + 1));
        }
    }
    found
}

/// Files over FILE_LINES, and functions over FN_LINES (src/transport's
/// aside), not counting test files and test modules; one line each.
fn oversized(sources: &[Source]) -> Vec<String> {
    let mut problems = Vec::new();
    for source in sources.iter().filter(|s| !s.path.ends_with("tests.rs")) {
        let lines = lines_outside_tests(&source.text);
        if lines > FILE_LINES {
            problems.push(format!("src/{} has {lines} lines outside tests (at most {FILE_LINES})", source.path));
        }
        if source.path.starts_with("transport/") {
            continue;
        }
        for (name, line, length) in functions(&source.text) {
            if length > FN_LINES {
                problems.push(format!("src/{}:{line}: fn {name} has {length} lines (at most {FN_LINES})", source.path));
            }
        }
    }
    problems
}

#[test]
fn files_and_functions_fit_on_a_screen() {
    let sources = read_tree(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    let problems = oversized(&sources);
    assert!(problems.is_empty(), "split these:\n  {}", problems.join("\n  "));
}

/// A function of `body` lines between its signature and its closing brace.
fn function_of(name: &str, body: usize) -> String {
    format!("pub fn {name}(x: [u8; 2]) -> usize {{\n{}}}\n", "    let _ = x;\n".repeat(body))
}

#[test]
fn a_planted_long_function_and_long_file_are_named() {
    let tricky = "fn tricky() {\n    let s = \"}}}\"; let c = '}'; let r = r#\"}\"#; // }\n    /* } /* } */ } */\n}\n";
    let long = format!("{}{}{tricky}", function_of("fits", 78), function_of("long", 79));
    let tests = format!("#[cfg(test)]\nmod tests {{\n{}}}\n", function_of("long_test", 100));
    let file = format!("{long}{tests}{}", "\n".repeat(300));
    let sources = [
        source("run/mod.rs", &file),
        source("transport/tcp.rs", &function_of("hot_loop", 100)),
        source("worker/session_tests.rs", &function_of("scripted", 100)),
    ];
    assert_eq!(
        oversized(&sources),
        [
            "src/run/mod.rs has 465 lines outside tests (at most 450)",
            "src/run/mod.rs:81: fn long has 81 lines (at most 80)"
        ]
    );
    assert_eq!(functions(tricky), [("tricky".to_string(), 1, 4)]);
}
