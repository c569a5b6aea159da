//! RDMA flows through the real CLI: the shipped RDMA scenarios on local
//! ranks over whatever device the host has (Soft-RoCE in the project's VM:
//! `scripts/test-rdma`). Skipped with a printed reason without a device,
//! unless FABRICBENCH_REQUIRE_RDMA=1.

mod common;

use std::path::Path;

use common::{perftest_rows, read_json, run_json, Bench};

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
    let check = ["--check", "receiver >= 0.1% of line rate"];
    let run = run_json(&Bench::new(), &root.join("scenarios/rdma-fan-in.toml"), &root.join("hostfiles/local"), &check);
    // "% of line rate" takes the receiver's port rate from its own probe.
    let receiver = &run["acceptance"]["checks"][0];
    let port = &run["probes"][0]["devices"][0];
    let rate = port["ports"][0]["rate_gbps"].as_f64().unwrap();
    assert_eq!(receiver["verdict"], "pass", "{receiver}");
    assert!((receiver["limit"].as_f64().unwrap() - rate * 0.001).abs() < 1e-9, "{receiver}");
    assert!(receiver["note"].as_str().unwrap().starts_with(port["name"].as_str().unwrap()), "{receiver}");
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

/// `fabricbench pair` on two local ranks over the device: perftest's -a
/// (cut to 2..16 B for time), -b with events, and write latency, each a
/// perftest-shaped table whose rows carry real numbers.
#[test]
fn pair_like_perftest() {
    if !has_rdma() {
        return;
    }
    let bench = Bench::new();
    let pair = |extra: &[&str]| {
        let mut args = vec!["pair", "localhost", "localhost"];
        args.extend_from_slice(extra);
        args.extend(["-D", "0.5", "--no-progress"]);
        let out = bench.run(&args);
        let stdout = common::text(&out.stdout);
        assert!(out.status.success(), "{args:?}:\n{stdout}\n{}", common::text(&out.stderr));
        stdout
    };
    let bw = " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]";

    // Tiny messages: MB/sec (perftest's default unit) and the message rate show them best.
    let out = pair(&["write", "-a", "--max-size", "16", "-q", "2", "-l", "4"]);
    assert!(out.contains("RDMA_Write BW Test") && out.contains(" Number of qps   : 2\n"), "{out}");
    // From rank 0's probe in run.json: the port the flow used (Soft-RoCE is Ethernet).
    assert!(out.contains(" Link type       : Ethernet\n") && out.contains(" Mtu             : "), "{out}");
    let rows = perftest_rows(&out, &bw.replace("Gb/sec", "MB/sec"));
    assert_eq!(rows.iter().map(|r| r[0]).collect::<Vec<_>>(), [2.0, 4.0, 8.0, 16.0], "{out}");
    for r in &rows {
        assert!(r.len() == 5 && r[1] > 0.0 && r[4] > 0.0 && r[2] >= r[3] - 0.01, "{r:?}\n{out}");
    }
    let run = read_json(&bench.result_dir().join("run.json"));
    let phases = run["phases"].as_array().unwrap();
    assert_eq!(phases.len(), 4);
    for p in phases {
        assert!(p["flows"][0]["tx_bytes"].as_u64().unwrap() > 0, "{p}");
    }

    let out = pair(&["send", "-s", "4K", "-b", "-e", "--report-gbits", "--no-save"]);
    assert!(out.contains(" Hosts           : 127.0.0.1 <-> 127.0.0.2\n"), "{out}");
    let rows = perftest_rows(&out, bw);
    assert!(rows.len() == 1 && rows[0][0] == 4096.0 && rows[0][1] > 0.0 && rows[0][3] > 0.0, "{out}");

    let out = pair(&["write_lat", "--no-save"]);
    assert!(out.contains("RDMA_Write Latency Test") && out.contains("half round trip"), "{out}");
    let rows = perftest_rows(&out, " #bytes #iterations    t_min[usec]");
    let r = &rows[0];
    assert!(rows.len() == 1 && r.len() == 9 && r[0] == 2.0 && r[1] > 0.0, "{out}");
    assert!(r[2] > 0.0 && r[2] <= r[4] && r[4] <= r[7] && r[7] <= r[3], "min <= typical <= p99 <= max: {r:?}");
}
