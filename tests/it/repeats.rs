//! `[run] repeat` and `--repeat`: the plan's interleaving, bad input, real
//! repeated runs on local ranks (their statistics against the phases they
//! come from), and a stopped run keeping its finished repeats.

use std::path::Path;
use std::time::Duration;

use crate::common::{self, fan_in, read_json, text, Bench, FanIn, LOCAL_HOSTS};
use crate::run_local::stop_after_in;
use fabricbench::{hostfile, plan, scenario};

/// Two-sided 95 % quantiles of Student's t for 1 to 4 degrees of freedom,
/// as printed in the tables (NIST/SEMATECH e-Handbook 1.3.6.7.2): an
/// independent check of the ones fabricbench computes.
const T95: [f64; 4] = [12.706, 4.303, 3.182, 2.776];

fn parsed(text: &str) -> Result<scenario::Scenario, String> {
    scenario::parse(text, Path::new("s.toml")).map(|(s, _)| s).map_err(|e| e.to_string())
}

#[test]
fn repeats_interleave_the_points_of_a_sweep() {
    let text = "[run]\nname = \"s\"\nrepeat = 3\n\n[[group]]\nname = \"g\"\npattern = \"fan-in\"\n\n\
                [sweep]\nparameter = \"message_size\"\nvalues = [\"16K\", \"64K\"]\n";
    let hosts = hostfile::parse("a\nb\nc\n", Path::new("hosts")).unwrap();
    let p = plan::build(&hosts, &parsed(text).unwrap()).unwrap();
    let names: Vec<&str> = p.phases.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "message_size=16K (repeat 1/3)",
            "message_size=64K (repeat 1/3)",
            "message_size=16K (repeat 2/3)",
            "message_size=64K (repeat 2/3)",
            "message_size=16K (repeat 3/3)",
            "message_size=64K (repeat 3/3)",
        ]
    );
    // A B A B: each point's repeats alternate with the other's, indices in run order.
    let order: Vec<(usize, &str, u32)> =
        p.phases.iter().map(|p| p.repeat.as_ref().map(|r| (p.index, r.of.as_str(), r.number)).unwrap()).collect();
    assert_eq!(order[0], (0, "message_size=16K", 1));
    assert_eq!(order[1], (1, "message_size=64K", 1));
    assert_eq!(order[4], (4, "message_size=16K", 3));
    assert!(p.phases.iter().all(|q| q.repeat.as_ref().unwrap().count == 3));
    // The repeats of one point are the same phase: its flows, groups and point.
    assert_eq!(p.phases[0].flows, p.phases[2].flows);
    assert_eq!(p.phases[1].groups, p.phases[5].groups);
    assert_eq!(p.phases[1].sweep, p.phases[3].sweep);
    // One repeat is the plan without repeats: nothing renamed, nothing tagged.
    let once = plan::build(&hosts, &parsed(&text.replace("repeat = 3", "repeat = 1")).unwrap()).unwrap();
    assert_eq!(
        once.phases.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(),
        ["message_size=16K", "message_size=64K"]
    );
    assert!(once.phases.iter().all(|p| p.repeat.is_none()));
}

#[test]
fn bad_repeats_name_the_field_and_what_is_valid() {
    let with = |value: &str| {
        parsed(&format!("[run]\nname = \"s\"\nrepeat = {value}\n\n[[group]]\nname = \"g\"\npattern = \"fan-in\"\n"))
    };
    assert_eq!(
        with("0").unwrap_err(),
        "s.toml:3: [run]: field `repeat`: 0 repeats asked; give 1 to 100 (each phase runs that many times)"
    );
    assert_eq!(
        with("101").unwrap_err(),
        "s.toml:3: [run]: field `repeat`: 101 repeats asked; give 1 to 100 (each phase runs that many times)"
    );
    let e = with("\"five\"").unwrap_err();
    assert!(e.starts_with("s.toml:3") && e.contains("invalid type: string \"five\", expected u32"), "{e}");
    let e = with("-1").unwrap_err();
    assert!(e.starts_with("s.toml:3") && e.contains("invalid value: integer `-1`, expected u32"), "{e}");

    // The flag: bounded by clap, before anything starts.
    let bench = Bench::new();
    let hosts = bench.write("hosts", LOCAL_HOSTS);
    let s = bench.write("s.toml", &fan_in("1s"));
    let refused = |value: &str| {
        let out = bench.run(&["run", s.to_str().unwrap(), "-H", hosts.to_str().unwrap(), "--repeat", value]);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
        text(&out.stderr)
    };
    assert!(refused("0").contains("invalid value '0' for '--repeat <N>': 0 is not in 1..=100"));
    assert!(refused("101").contains("invalid value '101' for '--repeat <N>': 101 is not in 1..=100"));
    assert!(refused("five").contains("invalid value 'five' for '--repeat <N>': invalid digit found in string"));
    assert!(!bench.results().exists());
}

/// Five repeats of a short fan-in, for real: five phases, and in run.json
/// each aggregate's five values (the phases' own numbers) with statistics
/// recomputed here, and an interval that holds most of the repeats.
#[test]
fn five_repeats_of_a_local_fan_in_give_intervals_around_their_repeats() {
    let _machine = common::busy_machine();
    let bench = Bench::new();
    let hosts = bench.write("hosts", LOCAL_HOSTS);
    let scenario = bench.write("fan.toml", &fan_in("1s"));
    let out = bench.run(&["run", scenario.to_str().unwrap(), "-H", hosts.to_str().unwrap(), "--repeat", "5"]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    // 4: a repeat may come out degraded on a busy machine; it is then not counted.
    assert!(matches!(out.status.code(), Some(0 | 4)), "stdout:\n{stdout}\nstderr:\n{stderr}");
    let dir = bench.result_dir();
    let run = read_json(&dir.join("run.json"));
    let phases = run["phases"].as_array().unwrap();
    let names: Vec<&str> = phases.iter().map(|p| p["name"].as_str().unwrap()).collect();
    assert_eq!(names, (1..=5).map(|k| format!("fan (repeat {k}/5)")).collect::<Vec<_>>());
    let counted: Vec<&serde_json::Value> =
        phases.iter().filter(|p| p["complete"] == true && p.get("degraded").is_none()).collect();
    assert!(counted.len() >= 3, "{} of 5 repeats counted", counted.len());

    let repeated = &run["repeats"][0];
    assert_eq!((repeated["phase"].as_str(), repeated["count"].as_u64()), (Some("fan"), Some(5)));
    assert_eq!(repeated["counted"].as_u64(), Some(counted.len() as u64));
    let numbers = repeated["numbers"].as_array().unwrap();
    let metrics: Vec<&str> = numbers.iter().map(|n| n["metric"].as_str().unwrap()).collect();
    assert_eq!(metrics, ["aggregate_gbps", "receiver_gbps", "max_worker_cpu_pct"]);
    let (mut inside, mut all) = (0, 0);
    for n in numbers {
        let values: Vec<f64> = n["values"].as_array().unwrap().iter().map(|v| v["value"].as_f64().unwrap()).collect();
        assert_eq!(values.len(), counted.len(), "{n}");
        let s = &n["spread"];
        let f = |k: &str| s[k].as_f64().unwrap();
        let k = values.len() as f64;
        let mean = values.iter().sum::<f64>() / k;
        let stdev = (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (k - 1.0)).sqrt();
        let half = T95[values.len() - 2] * stdev / k.sqrt();
        assert!((f("mean") - mean).abs() < 1e-9 * mean.abs().max(1.0), "{n}");
        assert!((f("stdev") - stdev).abs() < 1e-9 * stdev.max(1.0), "{n}");
        assert!((f("ci95_half") - half).abs() < 1e-3 * half.max(1e-9), "{n}: {half}");
        assert!((f("ci95_low") - (mean - half)).abs() < 1e-3 * half.max(1e-9) && f("ci95_high") > f("ci95_low"));
        assert!(f("min") <= mean && mean <= f("max"), "{n}");
        assert!(stdev > 0.0, "five real runs of TCP on loopback never measure the same: {n}");
        inside += values.iter().filter(|&&v| (f("ci95_low")..=f("ci95_high")).contains(&v)).count();
        all += values.len();
    }
    // An interval of the mean is not one of single repeats, but at n = 3…5
    // it is wide enough (t ≥ 2.776) to hold most of them.
    assert!(inside * 5 >= all * 3, "{inside} of {all} repeats inside their interval");

    // Each value is its repeat's own number: the aggregate of that phase.
    let aggregate = &numbers[0]["values"];
    for (v, p) in aggregate.as_array().unwrap().iter().zip(&counted) {
        assert_eq!(v["phase"], p["index"]);
        assert_eq!(v["value"], p["aggregate_gbps"]);
    }

    // What a reader sees: mean ± CI in the summary and the CSV's columns.
    assert!(stdout.contains("Repeats of `fan`") && stdout.contains("mean ± 95 % CI"), "{stdout}");
    let mut csv = csv::Reader::from_path(dir.join("repeats.csv")).unwrap();
    let header: Vec<String> = csv.headers().unwrap().iter().map(String::from).collect();
    for column in ["phase", "item", "metric", "unit", "repeats", "mean", "stdev", "ci95_low", "ci95_high", "values"] {
        assert!(header.iter().any(|h| h == column), "{column} missing: {header:?}");
    }
    assert_eq!(csv.records().count(), numbers.len());
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.contains("Aggregate per phase, mean ± 95 % CI"), "no repeats chart");
    assert_eq!(bench.leftovers(Duration::from_secs(2)), []);
}

/// Stopped after its first repeat: the journal keeps that repeat, run.json
/// counts it, and `report` renders the repeats again from the journal.
#[test]
fn a_stopped_run_keeps_its_finished_repeats() {
    let _machine = common::busy_machine();
    let bench = Bench::new();
    let repeated =
        &FanIn::new("rep", "2s").warmup("200ms").interval("250ms").run_line("repeat = 3").senders("1-3").text();
    let (child, dir) = stop_after_in(&bench, repeated, 1);
    common::signal(child.id(), "-TERM");
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(143), "{}", text(&out.stderr));
    let journal = std::fs::read_to_string(dir.join("journal.jsonl")).unwrap();
    let journaled: Vec<serde_json::Value> = journal
        .lines()
        .filter(|l| l.starts_with("{\"phase\""))
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["phase"].clone())
        .collect();
    assert!(!journaled.is_empty());
    assert_eq!(journaled[0]["name"], "rep (repeat 1/3)");
    assert_eq!(journaled[0]["complete"], true);

    // run.json rebuilt from the journal alone still has the finished repeat.
    std::fs::remove_file(dir.join("run.json")).unwrap();
    std::fs::remove_file(dir.join("repeats.csv")).unwrap();
    let out = bench.run(&["report", dir.to_str().unwrap(), "--quiet"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let run = read_json(&dir.join("run.json"));
    assert_eq!(run["status"]["state"], "failed");
    let repeated = &run["repeats"][0];
    assert_eq!((repeated["phase"].as_str(), repeated["count"].as_u64()), (Some("rep"), Some(3)));
    let first = &repeated["numbers"][0];
    assert_eq!(first["metric"], "aggregate_gbps");
    assert_eq!(first["values"][0]["value"], journaled[0]["aggregate_gbps"]);
    assert_eq!(repeated["counted"].as_u64().unwrap() as usize, first["values"].as_array().unwrap().len());
    assert!(dir.join("repeats.csv").is_file());
    assert_eq!(bench.leftovers(Duration::from_secs(5)), []);
}
