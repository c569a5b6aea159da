//! RDMA flows through the real CLI: the shipped RDMA scenarios on local
//! ranks over whatever device the host has (Soft-RoCE in the project's VM:
//! `scripts/test-rdma`). Skipped with a printed reason without a device,
//! unless FABRICBENCH_REQUIRE_RDMA=1.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::{read_json, run_json, text, Bench};

fn has_rdma() -> bool {
    let found = fabricbench::transport::rdma::probe()
        .is_ok_and(|r| r.devices.iter().any(|d| d.ports.iter().any(|p| p.state == "ACTIVE")));
    if !found {
        assert!(std::env::var("FABRICBENCH_REQUIRE_RDMA").map_or(true, |v| v != "1"), "no ACTIVE RDMA port");
        eprintln!("SKIP: no ACTIVE RDMA port on this host (run scripts/test-rdma)");
    }
    found
}

#[test]
fn rdma_fan_in_with_a_latency_probe() {
    if !has_rdma() {
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let run = run_json(&Bench::new(), &root.join("scenarios/rdma-fan-in.toml"), &root.join("hostfiles/local"), &[]);
    for p in run["probes"].as_array().unwrap() {
        let port = &p["devices"][0]["ports"][0];
        assert_eq!(port["state"], "ACTIVE", "{p}");
        assert!(port["rate_gbps"].as_f64().unwrap() > 0.0 && port["mtu"].as_u64().unwrap() >= 256, "{p}");
    }
    assert_eq!(run["probes"].as_array().unwrap().len(), run["hosts"].as_array().unwrap().len());
    let phase = &run["phases"][0];
    assert_eq!(phase["complete"], true);
    let flows = phase["flows"].as_array().unwrap();
    for f in &flows[..3] {
        // Writes are counted by the initiator: the receiver's CPU never sees them.
        assert!(f["tx_bytes"].as_u64().unwrap() > 0, "{f}");
        assert_eq!(f["bytes"], f["tx_bytes"], "{f}");
        assert!(f["gbps"].as_f64().unwrap() > 0.0, "{f}");
    }
    let sum: f64 = flows[..3].iter().map(|f| f["gbps"].as_f64().unwrap()).sum();
    assert!((phase["aggregate_gbps"].as_f64().unwrap() - sum).abs() < 1e-9);
    assert_eq!(phase["receivers"][0]["senders"], 3);
    // The NIC's view: every rank's device counters moved in the window.
    for rank in phase["ranks"].as_array().unwrap() {
        let moved = &rank["rdma_counters"][0];
        assert_eq!(moved["device"], run["probes"][0]["devices"][0]["name"], "{rank}");
        let counters = moved["counters"].as_object().unwrap_or_else(|| panic!("no RDMA counters: {rank}"));
        assert!(counters.values().any(|v| v.as_u64().unwrap() > 0), "{rank}");
        // RDMA threads go near the device by default; Soft-RoCE has no NUMA node: recorded, not pinned.
        let placement = &rank["placements"][0];
        assert!(placement["note"].as_str().is_some_and(|n| n.contains("no NUMA node")), "{rank}");
    }
    let l = &flows[3]["latency"];
    let v = |k: &str| l[k].as_f64().unwrap();
    assert!(l["samples"].as_u64().unwrap() > 10, "{l}");
    assert!(
        v("min_us") > 0.0
            && v("min_us") <= v("typical_us")
            && v("typical_us") <= v("p99_us")
            && v("p99_us") <= v("max_us"),
        "{l}"
    );
}

#[test]
fn rdma_ops_through_the_cli() {
    if !has_rdma() {
        return;
    }
    let bench = Bench::new();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for op in ["read", "send", "write-imm", "fetch-add"] {
        let scenario = bench.write(
            "op.toml",
            &format!(
                "[run]\nduration = \"1s\"\nwarmup = \"200ms\"\ninterval = \"500ms\"\n[[group]]\nname = \"g\"\npattern = \"explicit\"\ntransport = \"rdma\"\nop = \"{op}\"\nflows = [[1, 0]]\nmessage_size = \"16K\"\n"
            ),
        );
        let run = run_json(&bench, &scenario, &root.join("hostfiles/local"), &[]);
        let flow = &run["phases"][0]["flows"][0];
        assert!(flow["bytes"].as_u64().unwrap() > 0, "{op}: {flow}");
        if op == "send" || op == "write-imm" {
            // Two-sided: the receiver counted what arrived.
            assert!(flow["rx_bytes"].as_u64().unwrap() > 0, "{op}: {flow}");
        }
    }
}

/// Across VMs (scripts/test-rdma's two-VM run sets FB_RDMA_PEER_HOST):
/// `fabricbench hosts` reaches the peer over ssh and lists its RDMA ports.
#[test]
fn hosts_lists_rdma_ports_over_ssh() {
    let Ok(peer) = std::env::var("FB_RDMA_PEER_HOST") else {
        eprintln!("SKIP: FB_RDMA_PEER_HOST is not set (only the two-VM run has a peer host)");
        return;
    };
    let bench = Bench::new();
    let hosts = bench.write("hosts", &format!("{peer}\n"));
    let out = bench.run(&["hosts", "-H", hosts.to_str().unwrap(), "--json"]);
    assert!(out.status.success(), "{}", common::text(&out.stderr));
    let checks: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let ports = checks[0]["rdma"].as_array().unwrap_or_else(|| panic!("no RDMA ports reported: {checks}"));
    assert!(ports.iter().any(|p| p.as_str().unwrap().contains("ACTIVE")), "{checks}");
}

/// A flow that fails mid-phase ends the run, named, in bounded time, with
/// what was measured kept. Frozen: rank 1 (the receiver of a send flow)
/// stops, its receives run out, the sender's sends find none (RNR, retried
/// without end) and stall for `stall_timeout_ms`; the sender's rank reports
/// the flow. Killed: rank 1's control connection drops at once and the
/// coordinator names the rank and its flow.
#[test]
fn a_failed_rdma_flow_ends_the_run_naming_it() {
    if !has_rdma() {
        return;
    }
    // A killed worker's connection ends with FIN or RST ("connection lost"
    // or "protocol error: Connection reset by peer"); both name the flow.
    let cases = [
        ("-STOP", ["rank 0 (127.0.0.1): failed in phase 0: flow 0 0->1: QP 0: no progress for", ""]),
        ("-KILL", ["rank 1 (127.0.0.2): ", "; its flows: 0 (0->1)"]),
    ];
    for (signal, named) in cases {
        let bench = Bench::new();
        let hosts = bench.write("hosts", "127.0.0.1\n127.0.0.2\n");
        let scenario = bench.write(
            "stall.toml",
            "[run]\nduration = \"30s\"\nwarmup = \"200ms\"\ninterval = \"500ms\"\n[[group]]\nname = \"g\"\npattern = \"explicit\"\ntransport = \"rdma\"\nop = \"send\"\nflows = [[0, 1]]\nmessage_size = \"4K\"\n[group.rdma]\nrx_depth = 64\nstall_timeout_ms = 1000\n",
        );
        let child = bench.spawn(&["run", scenario.to_str().unwrap(), "-H", hosts.to_str().unwrap()]);
        let victim = bench.worker_pid(1, Duration::from_secs(60));
        // Let the phase start and traffic flow (connecting takes a few s in the VM).
        std::thread::sleep(Duration::from_secs(6));
        let hit_at = Instant::now();
        common::signal(victim, signal);

        let out = child.wait_with_output().unwrap();
        let took = hit_at.elapsed();
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{signal}: {err}");
        assert!(took < Duration::from_secs(20), "{signal}: took {took:?}: {err}");
        assert!(named.iter().all(|part| err.contains(part)), "{signal}: {err}");

        let run = read_json(&bench.result_dir().join("run.json"));
        let error = run["status"]["error"].as_str().unwrap();
        assert!(named.iter().all(|part| error.contains(part)), "{signal}: {error}");
        let phase = &run["phases"][0];
        assert_eq!(phase["complete"], false, "{signal}");
        assert!(phase["flows"][0]["tx_bytes"].as_u64().unwrap() > 0, "{signal}: {phase}");
        if signal == "-STOP" {
            assert!(phase["flows"][0]["error"].as_str().unwrap().contains("no progress"), "{phase}");
        }
        // The launcher ended the frozen worker.
        assert_eq!(bench.leftovers(Duration::from_secs(3)), [], "{signal}");
    }
}

/// Across three VMs (scripts/test-rdma's `--vms 3` run sets FB_RDMA_FAN_IN_HOSTS):
/// `fabricbench run` over ssh, vm2 and vm3 RDMA-write into vm1.
#[test]
fn three_vm_fan_in_over_ssh() {
    let Ok(names) = std::env::var("FB_RDMA_FAN_IN_HOSTS") else {
        eprintln!("SKIP: FB_RDMA_FAN_IN_HOSTS is not set (only the three-VM run has the hosts)");
        return;
    };
    let bench = Bench::new();
    let hosts = bench.write("hosts", &names.split_whitespace().map(|h| format!("{h}\n")).collect::<String>());
    let scenario = bench.write(
        "fan-in.toml",
        // Small messages, few in flight and frequent completions: three
        // 1-vCPU VMs under TCG move little, and a completion is what counts.
        "[run]\nduration = \"2s\"\nwarmup = \"1s\"\ninterval = \"500ms\"\n[[group]]\nname = \"incast\"\npattern = \"fan-in\"\ntransport = \"rdma\"\nop = \"write\"\nmessage_size = \"4K\"\n[group.rdma]\ntx_depth = 16\ncq_moderation = 4\n",
    );
    // Each ssh connection takes seconds under TCG, more on a loaded host.
    let run = run_json(&bench, &scenario, &hosts, &["--connect-timeout", "60s"]);
    let phase = &run["phases"][0];
    assert_eq!(phase["complete"], true, "{phase}");
    let flows = phase["flows"].as_array().unwrap();
    assert_eq!(flows.len(), 2);
    for f in flows {
        assert_eq!(f["dst"], 0);
        assert!(f["bytes"].as_u64().unwrap() > 0 && f["gbps"].as_f64().unwrap() > 0.0, "{f}");
    }
    let receiver = &phase["receivers"][0];
    assert_eq!((receiver["rank"].as_u64(), receiver["senders"].as_u64()), (Some(0), Some(2)), "{receiver}");
    assert!(receiver["aggregate_gbps"].as_f64().unwrap() > 0.0, "{receiver}");
    assert_eq!(run["probes"].as_array().unwrap().len(), 3);
}
