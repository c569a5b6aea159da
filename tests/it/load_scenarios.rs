//! CPU stress and sweeps through the real CLI on local ranks: the load is
//! measured, not assumed, and every sweep point is compared with its baseline.

use crate::common;

use std::path::Path;

use common::{run_json, Bench};

fn run_shipped(bench: &Bench, name: &str) -> serde_json::Value {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    run_json(bench, &root.join("scenarios").join(name), &root.join("hostfiles/local"), &[])
}

#[test]
fn stressed_receiver_carries_the_asked_load() {
    let _machine = common::busy_machine();
    let run = run_shipped(&Bench::new(), "receiver-stress.toml");
    let rank0 = &run["phases"][0]["ranks"][0];
    let stress = &rank0["stress"];
    assert_eq!(stress["asked_load_pct"], 100.0);
    assert_eq!(stress["threads"].as_u64().unwrap() as usize, std::thread::available_parallelism().unwrap().get());
    let measured = stress["measured_load_pct"].as_f64().unwrap();
    assert!(measured >= 90.0, "asked 100 %, measured {measured} %");
    assert!(rank0["cpu"]["host_pct"].as_f64().unwrap() >= 90.0);
    // Only rank 0 was stressed.
    assert!(run["phases"][0]["ranks"][1].get("stress").is_none());
    assert!(run["phases"][0]["aggregate_gbps"].as_f64().unwrap() > 0.0);
}

#[test]
fn stress_sweep_reports_impact_ratios() {
    // The unloaded baseline must be unloaded: nothing else heavy runs now.
    let _machine = common::quiet_machine();
    let bench = Bench::new();
    let run = run_shipped(&bench, "stress-sweep.toml");
    let phases = run["phases"].as_array().unwrap();
    assert_eq!(phases.len(), 3);
    assert!(phases[0]["ranks"][0].get("stress").is_none(), "0 threads = unloaded");
    for (i, threads) in [(1, 1), (2, 2)] {
        let stress = &phases[i]["ranks"][0]["stress"];
        assert_eq!(stress["threads"], threads);
        let asked = f64::from(threads) * 100.0 / std::thread::available_parallelism().unwrap().get() as f64;
        let measured = stress["measured_load_pct"].as_f64().unwrap();
        assert!(measured >= asked.min(100.0) - 10.0, "{threads} burners: measured {measured} %, asked ≥ {asked} %");
    }
    let sweep = &run["sweep"];
    assert_eq!(sweep["parameter"], "stress.threads");
    assert_eq!(sweep["baseline"], "0");
    let points = sweep["points"].as_array().unwrap();
    assert_eq!(points.len(), 3);
    assert_eq!(points[0]["groups"][0]["ratio"], 1.0);
    for p in points {
        let ratio = p["groups"][0]["ratio"].as_f64().unwrap();
        assert!(ratio > 0.0 && ratio <= 1.5, "{p}");
        let value = p["groups"][0]["value"].as_f64().unwrap();
        let phase = &phases[p["phase"].as_u64().unwrap() as usize];
        assert_eq!(value, phase["aggregate_gbps"].as_f64().unwrap());
    }

    // The report page carries the sweep: its ratio chart and its table.
    let dir = bench.results().join("sweep");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("run.json"), run.to_string()).unwrap();
    let out = bench.run(&["report", dir.to_str().unwrap(), "--quiet"]);
    assert!(out.status.success(), "{}", common::text(&out.stderr));
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    let sweep_at = html.find("<h2>Sweep of stress.threads</h2>").expect("a sweep section");
    assert!(sweep_at < html.find("<h2>Phases</h2>").unwrap(), "the sweep's answer comes before the phases");
    assert!(html.contains("× baseline per stress.threads"), "the impact chart");
    assert!(html.contains("<h4>Sweep of stress.threads (baseline 0)</h4>"), "the sweep table");
}

#[test]
fn two_parameter_sweep_compares_each_column_with_its_baseline() {
    let _machine = common::busy_machine();
    let bench = Bench::new();
    let scenario = bench.write(
        "matrix.toml",
        "[run]\nduration = \"500ms\"\nwarmup = \"100ms\"\ninterval = \"250ms\"\n\
         [[group]]\nname = \"in\"\npattern = \"fan-in\"\nsenders = \"1-2\"\n\
         [sweep]\nparameter = \"streams\"\nvalues = [1, 2]\n\
         [sweep.by]\nparameter = \"message_size\"\nvalues = [\"4K\", \"64K\"]\n",
    );
    let json = bench.dir.path().join("run.json");
    let hosts = Path::new(env!("CARGO_MANIFEST_DIR")).join("hostfiles/local");
    let args = [scenario.to_str().unwrap(), "-H", hosts.to_str().unwrap(), "--export-json", json.to_str().unwrap()];
    let out = bench.run(&[&["run", "--no-save"][..], &args].concat());
    assert!(out.status.success(), "{}", common::text(&out.stderr));
    let run = common::read_json(&json);
    let sweep = &run["sweep"];
    assert_eq!(sweep["by_parameter"], "message_size");
    let points = sweep["points"].as_array().unwrap();
    let cells: Vec<(&str, &str, bool)> = points
        .iter()
        .map(|p| (p["value"].as_str().unwrap(), p["by_value"].as_str().unwrap(), p["baseline"] == true))
        .collect();
    assert_eq!(cells, [("1", "4K", true), ("1", "64K", true), ("2", "4K", false), ("2", "64K", false)]);
    for (p, base) in points[2..].iter().zip(&points[..2]) {
        let (cell, base) = (&p["groups"][0], &base["groups"][0]);
        let want = cell["value"].as_f64().unwrap() / base["value"].as_f64().unwrap();
        assert!((cell["ratio"].as_f64().unwrap() - want).abs() < 1e-9, "against its own column: {p}");
        assert!(cell["mpps"].as_f64().unwrap() > 0.0 && cell["max_worker_cpu_pct"].as_f64().unwrap() > 0.0);
    }
    let summary = common::text(&out.stdout);
    assert!(summary.contains("in: Gb/s by streams × message_size"), "{summary}");
}
