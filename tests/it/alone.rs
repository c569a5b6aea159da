//! Two lists in .config/nextest.toml follow the tests' own code, and this
//! keeps them equal to it:
//! - the tests that measure against a baseline of their own (they take
//!   `common::quiet_machine`, directly or through `Bed::up_quiet` or
//!   `Bed::selftest`) get every test thread, so a new one is not left to
//!   share two cores with whatever nextest schedules beside it;
//! - the other tests on the shared test bed (`Bed::up`) are one test
//!   group of one thread, so none holds a thread while it waits for the bed.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// What a test that takes the quiet machine lock calls (the bed's
/// selftest measures a shaped rate).
const QUIET: &[&str] = &["quiet_machine()", "up_quiet(", "Bed::selftest("];
/// What a test on the shared (not quiet) test bed calls.
const BED: &[&str] = &["Bed::up(", "Bed::up_fabric("];

/// `module::test` for every function in tests/it/*.rs whose body contains
/// one of `calls` (the function the line belongs to is the last `fn` above
/// it; common/ defines them and is a folder, so it is left out).
fn tests_calling(dir: &Path, calls: &[&str]) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for entry in std::fs::read_dir(dir).expect("tests/it") {
        let path = entry.expect("tests/it entry").path();
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let module = path.file_stem().unwrap().to_string_lossy().into_owned();
        if module == "alone" {
            continue; // this file names the calls in its own examples
        }
        let text = std::fs::read_to_string(&path).expect("a test source");
        let mut function = None;
        for line in text.lines() {
            if let Some(name) = function_name(line) {
                function = Some(name);
            }
            if calls.iter().any(|call| line.contains(call)) {
                let name = function.unwrap_or_else(|| panic!("{}: {calls:?} outside a function", path.display()));
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

/// The names in the `test(=…)` filters of the config's overrides that
/// carry `setting` (a whole line, e.g. `test-group = "bed"`).
fn tests_named_where(config: &str, setting: &str) -> BTreeSet<String> {
    config
        .split("[[profile.default.overrides]]")
        .skip(1)
        .filter(|section| section.lines().any(|line| line.trim() == setting))
        .flat_map(|section| section.split("test(=").skip(1))
        .map(|rest| rest.split(')').next().unwrap().to_string())
        .collect()
}

/// Names the tests in one list and not the other, both ways round.
fn difference(calling: &BTreeSet<String>, listed: &BTreeSet<String>, what: &str) {
    let missing: Vec<_> = calling.difference(listed).collect();
    let stale: Vec<_> = listed.difference(calling).collect();
    assert!(missing.is_empty(), "{what} but are not in .config/nextest.toml: {missing:?}");
    assert!(stale.is_empty(), "in .config/nextest.toml but not {what}: {stale:?}");
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn config() -> String {
    std::fs::read_to_string(root().join(".config/nextest.toml")).expect(".config/nextest.toml")
}

fn tests_dir() -> PathBuf {
    root().join("tests/it")
}

#[test]
fn every_test_that_takes_the_quiet_lock_runs_alone_under_nextest() {
    let taking = tests_calling(&tests_dir(), QUIET);
    assert!(taking.len() >= 8, "the scan found too few tests: {taking:?}");
    let alone = tests_named_where(&config(), "threads-required = \"num-test-threads\"");
    difference(&taking, &alone, "take the quiet lock");
}

#[test]
fn every_other_bed_test_is_in_the_beds_test_group() {
    let config = config();
    assert!(config.contains("bed = { max-threads = 1 }"), "{config}");
    let on_the_bed = tests_calling(&tests_dir(), BED);
    assert!(on_the_bed.len() >= 20, "the scan found too few tests: {on_the_bed:?}");
    let grouped = tests_named_where(&config, "test-group = \"bed\"");
    difference(&on_the_bed, &grouped, "call Bed::up");
}

#[test]
fn the_scan_names_the_function_that_makes_the_call() {
    assert_eq!(function_name("    pub fn quiet_machine() -> File {"), Some("quiet_machine"));
    assert_eq!(function_name("fn run_json<T>(x: T)"), Some("run_json"));
    assert_eq!(function_name("let f = fn_pointer;"), None);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("a.rs"),
        "#[test]\nfn one() {\n    let _m = common::quiet_machine();\n}\nfn two() {\n    Bed::up(2, &[]);\n}\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("b.rs"),
        "fn bed() {\n    let Some(b) = Bed::up_quiet(3, &[]) else { return };\n}\n",
    )
    .unwrap();
    let quiet: Vec<_> = tests_calling(dir.path(), QUIET).into_iter().collect();
    assert_eq!(quiet, ["a::one", "b::bed"]);
    let bed: Vec<_> = tests_calling(dir.path(), BED).into_iter().collect();
    assert_eq!(bed, ["a::two"]);
    let config = "[[profile.default.overrides]]\nfilter = '''\n    test(=a::one)\n  | test(=b::bed)\n'''\nx = 1\n\
                  [[profile.default.overrides]]\nfilter = 'test(=a::two)'\ntest-group = \"bed\"\n";
    assert_eq!(tests_named_where(config, "x = 1").into_iter().collect::<Vec<_>>(), ["a::one", "b::bed"]);
    assert_eq!(tests_named_where(config, "test-group = \"bed\"").into_iter().collect::<Vec<_>>(), ["a::two"]);
}
