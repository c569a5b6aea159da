//! A phase that is not a valid measurement says so: a rank frozen across
//! the window's opening (a late starter with a short window) makes the run
//! degraded with its reasons and exit 4; the same run unfrozen is not.

use std::time::Duration;

use crate::common::{self, read_json, text, Bench, FanIn, LOCAL_HOSTS};

/// Four ranks, a fan-in into rank 0; a 1 s warm-up leaves time to freeze a
/// rank between Start and the window's opening.
fn fan_in() -> String {
    FanIn::new("frozen", "2s").warmup("1s").senders("1-3").text()
}

/// Runs fan_in(); with `freeze`, stops rank 2's worker (SIGSTOP) for that
/// long as soon as the phase has started. The exit code and run.json.
fn run(bench: &Bench, freeze: Option<Duration>) -> (Option<i32>, String, serde_json::Value) {
    let hosts = bench.write("hosts", LOCAL_HOSTS);
    let scenario = bench.write("frozen.toml", &fan_in());
    // Progress as plain lines (stderr is a pipe): the phase says when it starts.
    let mut child = bench.spawn(&["run", scenario.to_str().unwrap(), "-H", hosts.to_str().unwrap()]);
    let (heard, reader) = common::follow_stderr(&mut child);
    if let Some(freeze) = freeze {
        let victim = bench.worker_pid(2, Duration::from_secs(20));
        let started = heard.iter().find(|l| l.contains("phase 0 `frozen` started"));
        assert!(started.is_some(), "the phase never started");
        common::signal(victim, "-STOP");
        std::thread::sleep(freeze);
        common::signal(victim, "-CONT");
    }
    let out = child.wait_with_output().unwrap();
    let stderr = reader.join().unwrap();
    let run = read_json(&bench.result_dir().join("run.json"));
    assert_eq!(bench.leftovers(Duration::from_secs(3)), []);
    (out.status.code(), format!("{}\n{stderr}", text(&out.stdout)), run)
}

#[test]
fn a_rank_frozen_across_the_window_opening_degrades_the_run() {
    let _machine = common::busy_machine();
    let bench = Bench::new();
    let (code, said, run) = run(&bench, Some(Duration::from_secs(2)));
    assert_eq!(code, Some(4), "{said}");
    assert_eq!(run["status"]["state"], "degraded", "{}", run["status"]);
    let phase = &run["phases"][0];
    assert_eq!(phase["complete"], true, "nothing failed: the run completed");
    let reasons: Vec<&str> =
        phase["degraded"].as_array().unwrap().iter().map(|d| d["reason"].as_str().unwrap()).collect();
    // Rank 2 began its flow ~0.8 s after the window opened and took its
    // first boundaries only when it thawed: late, skewed and short.
    for expected in ["short_window", "start_skew", "late_start"] {
        assert!(reasons.contains(&expected), "{expected} missing from {}", phase["degraded"]);
    }
    let short = phase["degraded"].as_array().unwrap().iter().find(|d| d["reason"] == "short_window").unwrap();
    assert_eq!(short["rank"], 2, "{short}");
    assert!(short["window_s"].as_f64().unwrap() < 1.8, "{short}");
    assert!(!reasons.contains(&"failed_flows"), "a late end is late, not broken: {}", phase["degraded"]);
    assert!(said.contains("DEGRADED: rank 2's window was"), "{said}");
    assert!(said.contains("run `frozen` DEGRADED"), "{said}");
    let html = std::fs::read_to_string(bench.result_dir().join("report.html")).unwrap();
    assert!(html.contains("Run DEGRADED") && html.contains("DEGRADED: rank 2's window"), "report.html");
}

#[test]
fn the_same_run_unfrozen_is_not_degraded() {
    let _machine = common::busy_machine();
    let (code, said, run) = run(&Bench::new(), None);
    assert_eq!(code, Some(0), "{said}");
    assert_eq!(run["status"]["state"], "ok");
    assert!(run["phases"][0].get("degraded").is_none(), "{}", run["phases"][0]["degraded"]);
    assert!(!said.contains("DEGRADED"), "{said}");
}
