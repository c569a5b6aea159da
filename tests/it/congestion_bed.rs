//! Congestion impact on the test bed: h1's switch port is shaped (tc tbf,
//! what flows into h1), and an incast h2, h3 → h1 fills its queue. A
//! canary ping-pong h2 → h1 waits behind that queue when congested (impact
//! well above 1); a canary h4 → h5 shares no link with the incast and stays
//! near 1. The congestors run through the canaries' whole window: every
//! interval of the window carries incast bytes.

use crate::common;

use common::testbed::Bed;
use common::{text, Bench};
use serde_json::Value;

const SCENARIO: &str = r#"[run]
name = "congestion-bed"
duration = "2s"
warmup = "1s"
interval = "500ms"

[congestion]

[[group]]
name = "near"
role = "canary"
pattern = "explicit"
mode = "latency"
flows = [[1, 0]]
message_size = 64

[[group]]
name = "far"
role = "canary"
pattern = "explicit"
mode = "latency"
flows = [[3, 4]]
message_size = 64

[[group]]
name = "incast"
role = "congestor"
pattern = "fan-in"
receivers = 0
senders = "1-2"
"#;

fn impact<'a>(run: &'a Value, group: &str) -> &'a Value {
    run["congestion"].as_array().unwrap().iter().find(|c| c["group"] == group).unwrap_or_else(|| panic!("{group}"))
}

#[test]
fn an_incast_hurts_the_canary_behind_it_and_not_the_one_beside_it() {
    let Some(bed) = Bed::up_quiet(5, &["--shape", "h1=20mbit/in"]) else { return };
    let bench = Bench::new();
    let scenario = bench.write("congestion.toml", SCENARIO);
    let json = bench.dir.path().join("run.json");
    let mut args =
        vec!["run".to_string(), scenario.display().to_string(), "-H".into(), bed.hostfile.display().to_string()];
    args.extend(bed.ssh_args());
    args.extend(["--no-save".into(), "--export-json".into(), json.display().to_string()]);
    let out = bench.run(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let shown = text(&out.stdout);
    println!("{shown}"); // what a user reads, kept in the test's log
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(shown.contains("Congestion impact") && shown.contains("impact tail (×)"), "{shown}");
    let run: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();

    let (near, far) = (impact(&run, "near"), impact(&run, "far"));
    let ratio = |c: &Value, key: &str| c[key].as_f64().unwrap_or_else(|| panic!("{key}: {c}"));
    // Behind 20 Mbit/s of tbf queue a 64-byte request waits milliseconds instead of tens of µs.
    assert!(ratio(near, "impact_mean") > 3.0, "the canary behind the incast: {near}");
    assert!(ratio(near, "impact_tail") > 3.0, "its p99 too: {near}");
    // Another pair of hosts: only the machine's CPU is shared. Loose bounds: on a busy
    // 2-core machine the incast's senders and receiver take CPU from the far canary too,
    // and its p99 moved 0.6-2.5x between phases in fifteen runs here. What tells the two
    // canaries apart is the order of magnitude: the near one's ratios were 50-1000x.
    assert!((0.33..3.0).contains(&ratio(far, "impact_mean")), "the canary on other links stays near 1: {far}");
    assert!(ratio(far, "impact_tail") < 6.0, "and its tail is not hurt much: {far}");
    for key in ["impact_mean", "impact_tail"] {
        assert!(ratio(near, key) > 10.0 * ratio(far, key), "{key}: near {near} vs far {far}");
    }
    // The ratio is of the numbers beside it.
    let n = |side: &str, what: &str| near[side][what].as_f64().unwrap();
    assert!((ratio(near, "impact_mean") - n("congested", "mean") / n("isolated", "mean")).abs() < 1e-9);

    // The congestors loaded every interval of the canary's window, from the first to the last.
    let phases = run["phases"].as_array().unwrap();
    let congested = &phases[near["congested_phase"].as_u64().unwrap() as usize];
    for flow in congested["flows"].as_array().unwrap().iter().filter(|f| f["group"] == "incast") {
        let intervals = flow["interval_gbps"].as_array().unwrap();
        assert_eq!(intervals.len(), 4, "{flow}");
        assert!(intervals.iter().all(|g| g.as_f64().unwrap() > 0.0), "an incast flow idle in the window: {flow}");
    }
    let isolated = &phases[near["isolated_phase"].as_u64().unwrap() as usize];
    let alone = isolated["flows"].as_array().unwrap();
    assert!(alone.iter().all(|f| f["group"] == "near"), "alone: {isolated}");
    // One flow: the group's round trips are the flow's (within the histogram's 0.1 %).
    let flow_mean = alone[0]["latency"]["mean_us"].as_f64().unwrap();
    assert!((n("isolated", "mean") - flow_mean).abs() <= flow_mean * 1e-3, "{near} vs {flow_mean}");
}
