//! A closed stderr (`fabricbench run … 2>&-` under a pipe, a reader that
//! went away): the notes, warnings and errors that would go there are
//! dropped, and the command ends with the exit code it has with stderr
//! open; no panic (whose code would be 101).

use std::path::Path;
use std::process::{Output, Stdio};

use crate::common::{text, Bench};

fn repo(path: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path).display().to_string()
}

/// Runs `args` with stderr a pipe whose read end is closed before the
/// command writes (`closed`), or one that is read to its end.
fn run(bench: &Bench, args: &[&str], closed: bool) -> Output {
    let mut child = bench
        .command(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn fabricbench");
    if closed {
        drop(child.stderr.take());
    }
    child.wait_with_output().expect("fabricbench ends")
}

#[test]
fn diagnostics_survive_a_closed_stderr() {
    let bench = Bench::new();
    let (fan_in, local) = (repo("scenarios/fan-in.toml"), repo("hostfiles/local"));
    // `report` writes its files beside the run.json it reads.
    let degraded = bench.dir.path().join("run.json");
    std::fs::copy(repo("tests/fixtures/v3-degraded.json"), &degraded).unwrap();
    let degraded = degraded.display().to_string();
    // A run (progress lines, `results:`), a report (`report:`), a plan that fails.
    let commands: [(&[&str], bool); 3] = [
        (&["run", &fan_in, "-H", &local, "--duration", "500ms"], true),
        (&["report", &degraded], true),
        (&["plan", "no-such-scenario.toml", "-H", &local], false),
    ];
    for (args, succeeds) in commands {
        let open = run(&bench, args, false);
        let diagnostics = text(&open.stderr);
        assert!(!diagnostics.is_empty(), "{args:?} writes to stderr, so the closed case is tested");
        assert_eq!(open.status.success(), succeeds, "{args:?}: {diagnostics}");
        let closed = run(&bench, args, true);
        assert_eq!(closed.status.code(), open.status.code(), "{args:?} with stderr closed");
        assert_eq!(text(&closed.stdout).is_empty(), text(&open.stdout).is_empty(), "{args:?}: stdout as it was");
    }
}
