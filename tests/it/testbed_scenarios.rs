//! Every shipped scenario, shortened, across the test bed's hosts over SSH:
//! the same files operators run on a rack, on real separate network stacks.

use crate::common;

use common::testbed::Bed;
use common::{run_json, shipped_scenarios, Bench};

#[test]
fn shipped_scenarios_run_shortened_on_the_bed() {
    // The window's length and the stress's measured load are checked: no
    // other test's burners or streams may share the CPUs meanwhile.
    let Some(bed) = Bed::up_quiet(5, &[]) else { return };
    let ssh = bed.ssh_args();
    let mut extra: Vec<&str> = ssh.iter().map(String::as_str).collect();
    extra.extend(["--duration", "1s", "--warmup", "200ms"]);
    for scenario in shipped_scenarios() {
        let name = scenario.display().to_string();
        let run = run_json(&Bench::new(), &scenario, &bed.hostfile, &extra);
        let phases = run["phases"].as_array().unwrap();
        assert_eq!(phases.len(), run["plan"]["phases"].as_array().unwrap().len(), "{name}");
        for phase in phases {
            assert_eq!(phase["complete"], true, "{name}");
            let window_s = phase["window_s"].as_f64().unwrap();
            assert!((window_s - 1.0).abs() < 0.2, "{name}: shortened window of 1 s lasted {window_s} s");
            for flow in phase["flows"].as_array().unwrap() {
                assert!(flow["bytes"].as_u64().unwrap() > 0, "{name}: idle flow {flow}");
                assert!(flow["src_host"].as_str().unwrap().starts_with('h'), "{name}: ran on the bed");
            }
            for rank in phase["ranks"].as_array().unwrap() {
                if let Some(stress) = rank.get("stress") {
                    let measured = stress["measured_load_pct"].as_f64().unwrap();
                    let asked = stress["asked_load_pct"].as_f64().unwrap();
                    // Burners on all cores (or unpinned): their cores are the host's cores.
                    let share = stress["threads"].as_f64().unwrap() / rank["cpu"]["host_cores"].as_f64().unwrap();
                    assert!(measured >= (asked * share).min(100.0) - 10.0, "{name}: stress {stress}");
                }
            }
        }
        if let Some(sweep) = run.get("sweep") {
            for point in sweep["points"].as_array().unwrap() {
                for cell in point["groups"].as_array().unwrap() {
                    let ratio = cell["ratio"].as_f64();
                    assert!(ratio.is_none_or(|r| r > 0.0), "{name}: {cell}");
                }
            }
        }
        assert!(bed.hosts_with_workers(&["h1", "h2", "h3", "h4", "h5"], std::time::Duration::from_secs(5)).is_empty());
    }
}
