//! A reader that closes stdout early (`fabricbench plan … | head -1`): the
//! command drops the rest of its output and ends as it would have, status
//! 0 for one that only prints; no panic.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use crate::common::{text, Bench};

fn repo(path: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path).display().to_string()
}

/// Runs `args` with stdout a pipe whose read end is closed before the
/// command writes: every write it makes meets a closed reader (reading a
/// line first, as `head -1` does, would let a short output fit the pipe's
/// buffer and never meet one).
fn with_stdout_closed(bench: &Bench, args: &[String]) {
    let mut child = bench
        .command(&args.iter().map(String::as_str).collect::<Vec<_>>())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn fabricbench");
    drop(child.stdout.take());
    let out = child.wait_with_output().expect("fabricbench ends");
    let stderr = text(&out.stderr);
    assert!(!stderr.contains("panicked") && !stderr.contains("error"), "{args:?}: {stderr}");
    assert_eq!(out.status.code(), Some(0), "{args:?}: {stderr}");
}

#[test]
fn every_printing_command_survives_a_closed_reader() {
    let bench = Bench::new();
    let run_json: PathBuf = bench.dir.path().join("run.json");
    std::fs::copy(repo("tests/fixtures/v3-fan-in.json"), &run_json).unwrap();
    let fixture = repo("tests/fixtures/v3-fan-in.json");
    let commands: [Vec<String>; 6] = [
        vec!["plan".into(), repo("scenarios/fan-in.toml"), "-H".into(), repo("hostfiles/local")],
        vec!["compare".into(), fixture.clone(), fixture],
        vec!["report".into(), run_json.display().to_string()],
        vec!["facts".into(), "--json".into()],
        vec!["completions".into(), "bash".into()],
        vec!["man".into()],
    ];
    for args in commands {
        with_stdout_closed(&bench, &args);
    }
}
