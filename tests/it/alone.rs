//! The tests that measure against a baseline of their own run alone:
//! .config/nextest.toml gives each test that takes `common::quiet_machine`
//! (directly or through `Bed::up_quiet`) every test thread. This keeps that
//! list equal to the tests that take the lock, so a new one is not left to
//! share two cores with whatever nextest schedules beside it.

use std::collections::BTreeSet;
use std::path::Path;

/// `module::test` for every function in tests/it/*.rs whose body takes the
/// quiet machine lock (the function the line belongs to is the last `fn`
/// above it; common/ defines the lock and is a folder, so it is left out).
fn tests_taking_the_lock(dir: &Path) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for entry in std::fs::read_dir(dir).expect("tests/it") {
        let path = entry.expect("tests/it entry").path();
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let module = path.file_stem().unwrap().to_string_lossy().into_owned();
        if module == "alone" {
            continue; // this file names the lock in its own examples
        }
        let text = std::fs::read_to_string(&path).expect("a test source");
        let mut function = None;
        for line in text.lines() {
            if let Some(name) = function_name(line) {
                function = Some(name);
            }
            if line.contains("quiet_machine()") || line.contains("up_quiet(") {
                let name = function.unwrap_or_else(|| panic!("{}: the lock outside a function", path.display()));
                found.insert(format!("{module}::{name}"));
            }
        }
    }
    found
}

fn function_name(line: &str) -> Option<&str> {
    let rest = line.trim_start().strip_prefix("pub ").unwrap_or(line.trim_start()).strip_prefix("fn ")?;
    rest.split(['(', '<']).next()
}

/// The names in the config's `test(=…)` filters.
fn tests_run_alone(config: &str) -> BTreeSet<String> {
    config.split("test(=").skip(1).map(|rest| rest.split(')').next().unwrap().to_string()).collect()
}

#[test]
fn every_test_that_takes_the_quiet_lock_runs_alone_under_nextest() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = std::fs::read_to_string(root.join(".config/nextest.toml")).expect(".config/nextest.toml");
    assert!(config.contains("threads-required = \"num-test-threads\""), "{config}");
    let taking = tests_taking_the_lock(&root.join("tests/it"));
    let alone = tests_run_alone(&config);
    assert!(taking.len() >= 8, "the scan found too few tests: {taking:?}");
    let missing: Vec<_> = taking.difference(&alone).collect();
    let stale: Vec<_> = alone.difference(&taking).collect();
    assert!(missing.is_empty(), "take the quiet lock but are not in .config/nextest.toml: {missing:?}");
    assert!(stale.is_empty(), "in .config/nextest.toml but take no quiet lock: {stale:?}");
}

#[test]
fn the_scan_names_the_function_that_holds_the_lock() {
    assert_eq!(function_name("    pub fn quiet_machine() -> File {"), Some("quiet_machine"));
    assert_eq!(function_name("fn run_json<T>(x: T)"), Some("run_json"));
    assert_eq!(function_name("let f = fn_pointer;"), None);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("a.rs"),
        "#[test]\nfn one() {\n    let _m = common::quiet_machine();\n}\nfn two() {}\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("b.rs"),
        "fn bed() {\n    let Some(b) = Bed::up_quiet(3, &[]) else { return };\n}\n",
    )
    .unwrap();
    let found: Vec<_> = tests_taking_the_lock(dir.path()).into_iter().collect();
    assert_eq!(found, ["a::one", "b::bed"]);
    let config = "filter = '''\n    test(=a::one)\n  | test(=b::bed)\n'''\n";
    assert_eq!(tests_run_alone(config).into_iter().collect::<Vec<_>>(), ["a::one", "b::bed"]);
}
