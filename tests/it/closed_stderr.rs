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
    // A run (progress lines, `results:`), a report (`report:`), a plan that
    // fails, each with the codes it may end with: a real run on a loaded
    // machine may come out degraded (4) either time, which is no panic (101).
    let commands: [(&[&str], &[i32]); 3] = [
        (&["run", &fan_in, "-H", &local, "--duration", "500ms"], &[0, 4]),
        (&["report", &degraded], &[0]),
        (&["plan", "no-such-scenario.toml", "-H", &local], &[2]),
    ];
    for (args, codes) in commands {
        let open = run(&bench, args, false);
        let diagnostics = text(&open.stderr);
        assert!(!diagnostics.is_empty(), "{args:?} writes to stderr, so the closed case is tested");
        let code = |out: &Output| out.status.code().unwrap_or(-1);
        assert!(codes.contains(&code(&open)), "{args:?} ended {:?}: {diagnostics}", open.status);
        let closed = run(&bench, args, true);
        assert!(codes.contains(&code(&closed)), "{args:?} with stderr closed ended {:?}", closed.status);
        assert_eq!(text(&closed.stdout).is_empty(), text(&open.stdout).is_empty(), "{args:?}: stdout as it was");
    }
}
