//! Every scenario shipped in scenarios/ plans on the hostfile its header
//! names, and the TCP ones run as-is on it.

use crate::common;

use std::path::Path;

use common::{all_shipped_scenarios, header_hostfile, run_json, shipped_scenarios, uses_rdma, Bench};

/// Every shipped scenario parses and plans; the RDMA ones run only where
/// verbs exist (tests/it/rdma_run.rs, in the Soft-RoCE VM: scripts/test-rdma).
#[test]
fn every_shipped_scenario_plans_and_rdma_ones_are_named() {
    let all = all_shipped_scenarios();
    let rdma: Vec<_> = all.iter().filter(|p| uses_rdma(p)).collect();
    for name in ["rdma-fan-in.toml", "tcp-vs-rdma-stress.toml", "qps-post-list.toml", "busy-vs-event.toml"] {
        assert!(rdma.iter().any(|p| p.ends_with(name)), "{name} is a shipped RDMA scenario: {rdma:?}");
    }
    for file in &rdma {
        let text = std::fs::read_to_string(file).unwrap();
        assert!(
            text.starts_with('#') && text.contains("Answers:"),
            "{}: says which question it answers",
            file.display()
        );
        eprintln!(
            "SKIP running {}: it needs RDMA devices (tests/it/rdma_run.rs runs it shortened in the Soft-RoCE VM)",
            file.display()
        );
    }
}

/// Every shipped scenario, RDMA ones included, plans on the hostfile its
/// header names (one that needs RDMA devices plans without them), and no
/// scenario hides two folders deep in scenarios/, where the tests would
/// miss it.
#[test]
fn every_shipped_scenario_plans_on_the_hostfile_its_header_names() {
    use fabricbench::{hostfile, plan, scenario};
    let folder = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    let subfolders = std::fs::read_dir(&folder).unwrap().flatten().filter(|e| e.path().is_dir());
    let deeper: Vec<_> =
        subfolders.flat_map(|d| std::fs::read_dir(d.path()).unwrap().flatten()).filter(|e| e.path().is_dir()).collect();
    assert!(deeper.is_empty(), "scenarios/ holds folders the tests do not read: {deeper:?}");
    for file in all_shipped_scenarios() {
        let named = header_hostfile(&file);
        let hosts = hostfile::read(&named).unwrap_or_else(|e| panic!("{}: {}: {e}", file.display(), named.display()));
        let (scenario, _) = scenario::read(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        if let Err(e) = plan::build(&hosts, &scenario) {
            panic!("{} does not plan on {}, the hostfile its header names: {e}", file.display(), named.display());
        }
    }
}

#[test]
fn every_shipped_scenario_runs_on_local_ranks() {
    let _machine = common::busy_machine();
    let scenarios = shipped_scenarios();
    assert!(scenarios.len() >= 6, "{scenarios:?}");
    for scenario in scenarios {
        let hostfile = header_hostfile(&scenario);
        let run = run_json(&Bench::new(), &scenario, &hostfile, &[]);
        let name = scenario.display();
        for phase in run["phases"].as_array().unwrap() {
            assert_eq!(phase["complete"], true, "{name}");
            for flow in phase["flows"].as_array().unwrap() {
                assert!(flow["gbps"].as_f64().unwrap() > 0.0, "{name}: idle flow {flow}");
            }
        }
    }
}

/// Under Slurm rank 0 plans the run itself from the scenario it is sent
/// (tests/it/testbed_slurm.rs): every shipped scenario must survive that trip
/// and give the launcher's plan.
#[test]
fn every_shipped_scenario_plans_the_same_after_the_srun_broadcast() {
    use fabricbench::worker::srun::SrunSpec;
    use fabricbench::{hostfile, plan, scenario};
    for file in all_shipped_scenarios() {
        let hosts = hostfile::read(&header_hostfile(&file)).unwrap();
        let (scenario, _) = scenario::read(&file).unwrap();
        let launcher = plan::build(&hosts, &scenario).unwrap();
        let spec = SrunSpec { job: 1, token: "t".into(), hosts: None, scenario, phases: None, port: 0, lldp: false };
        let sent: SrunSpec = serde_json::from_str(&serde_json::to_string(&spec).unwrap()).unwrap();
        assert_eq!(plan::build(&hosts, &sent.scenario).unwrap(), launcher, "{}", file.display());
        // Tests shorten scenarios by writing them back as TOML (tests/it/rdma_run.rs).
        let text = toml::to_string(&sent.scenario).unwrap();
        let (reread, _) = scenario::parse(&text, &file).unwrap();
        assert_eq!(plan::build(&hosts, &reread).unwrap(), launcher, "{}: TOML round trip", file.display());
    }
}
