//! Every scenario shipped in scenarios/ runs as-is on local ranks.

mod common;

use std::path::Path;

use common::{text, Bench};

#[test]
fn every_shipped_scenario_runs_on_local_ranks() {
    let _machine = common::busy_machine();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let hostfile = |scenario: &Path| {
        // The 4x2 fan-in needs five ranks; the others are sized for four.
        let needs_eight = scenario.file_name().is_some_and(|n| n == "fan-in-4x2.toml");
        root.join(if needs_eight { "hostfiles/local8" } else { "hostfiles/local" })
    };
    let mut scenarios: Vec<_> = std::fs::read_dir(root.join("scenarios"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    scenarios.sort();
    assert!(scenarios.len() >= 6, "{scenarios:?}");
    for scenario in scenarios {
        let bench = Bench::new();
        let out = bench.run(&[
            "run",
            scenario.to_str().unwrap(),
            "-H",
            hostfile(&scenario).to_str().unwrap(),
            "--export-json",
            "-",
            "--no-save",
            "--quiet",
        ]);
        let name = scenario.display();
        assert!(out.status.success(), "{name}: {}", text(&out.stderr));
        let run: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let phase = &run["phases"][0];
        assert_eq!(phase["complete"], true, "{name}");
        for flow in phase["flows"].as_array().unwrap() {
            assert!(flow["gbps"].as_f64().unwrap() > 0.0, "{name}: idle flow {flow}");
        }
        assert!(bench.processes().is_empty(), "{name}: processes left");
    }
}
