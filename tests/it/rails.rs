//! `rails = "same"` through the binary: `plan` on hosts of two rails
//! prints only rail k of one host with rail k of another, each group's
//! flows and the run's length; a local run moves bytes on exactly those,
//! and in the Soft-RoCE VM (rxe0, and rxe1 on a dummy interface) an RDMA
//! all-pairs moves them device k to device k, each device's counters
//! moving. (One VM: both "hosts" share its two devices, so the counters
//! show each device carried traffic, and the ranks' own counters which
//! device each rank used.) Across two VMs of two NICs each
//! (scripts/softroce-vm --nics 2: NIC k of both on a segment of its own,
//! rxek on it), a device can reach only its own rail: data moving at all
//! is NIC k meeting NIC k, and each device of each VM counts its share.

use crate::common;

use common::{run_json, text, Bench};

/// Two local hosts of two rails each: ranks 0 1 and 2 3.
const TWO_RAILS: &str = "127.0.0.1 slots=2 devices=rxe0,rxe1\n127.0.0.2 slots=2 devices=rxe0,rxe1\n";

fn all_pairs(duration: &str) -> String {
    format!(
        "[run]\nduration = \"{duration}\"\nwarmup = \"200ms\"\ninterval = \"500ms\"\n\n\
         [[group]]\nname = \"rails\"\npattern = \"all-pairs\"\nrails = \"same\"\nbidirectional = true\n"
    )
}

#[test]
fn plan_prints_one_rail_of_two_hosts_per_flow_and_the_length() {
    let bench = Bench::new();
    let scenario = bench.write("rails.toml", &all_pairs("10s"));
    let plan = |hostfile: &str| {
        let hosts = bench.write("hosts", hostfile);
        let out = bench.run(&["plan", scenario.to_str().unwrap(), "-H", hosts.to_str().unwrap()]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        text(&out.stdout)
    };
    let stdout = plan(TWO_RAILS);
    let flows: Vec<&str> = stdout.lines().filter(|l| l.starts_with("  flow")).collect();
    // "  flow    0  rails        0 (127.0.0.1#0) -> 2 (127.0.0.2#0)  1 x 128K B": the ends.
    let ends: Vec<&str> = flows
        .iter()
        .map(|line| line.split_once(" rails ").unwrap().1.trim_start().split("  ").next().unwrap())
        .collect();
    assert_eq!(
        ends,
        [
            "0 (127.0.0.1#0) -> 2 (127.0.0.2#0)",
            "1 (127.0.0.1#1) -> 3 (127.0.0.2#1)",
            "2 (127.0.0.2#0) -> 0 (127.0.0.1#0)",
            "3 (127.0.0.2#1) -> 1 (127.0.0.1#1)",
        ],
        "{stdout}"
    );
    assert!(stdout.contains("phase 0 `round 1/1`: 4 flow(s)\n"), "{stdout}");
    assert!(stdout.contains("\ngroup `rails` (all-pairs, rails = \"same\"): 4 flow(s) in 1 round(s)\n"), "{stdout}");
    assert!(stdout.ends_with("\nestimate: 1 phase(s) × 10s 200ms (warm-up + duration) + 1s setup ≈ 11s\n"), "{stdout}");
    // A third host of one rail: paired on rail 0 only, and said.
    let stdout = plan(&format!("{TWO_RAILS}127.0.0.3 devices=rxe0\n"));
    assert!(stdout.contains("\ngroup `rails` (all-pairs, rails = \"same\"): 8 flow(s) in 3 round(s)\n"), "{stdout}");
    assert!(
        stdout.contains("\nnote: group `rails`: the hosts do not all have the same rails (ranks): 2 host(s) have 2, 127.0.0.3 has 1;"),
        "{stdout}"
    );
    for rail_1 in ["1 (127.0.0.1#1)", "3 (127.0.0.2#1)"] {
        for pair in [format!("{rail_1} -> 4 ("), format!("4 (127.0.0.3) -> {rail_1}")] {
            assert!(!stdout.contains(&pair), "{pair} in\n{stdout}");
        }
    }
}

/// A senders sweep of a rail fan-in takes the first N of the senders the
/// group lists; left to every rank, it says to list the rail's.
#[test]
fn a_senders_sweep_on_rails_takes_the_listed_senders_of_the_rail() {
    let bench = Bench::new();
    let hosts = bench.write("hosts", "n[1-5] devices=mlx5_0,mlx5_1\n");
    let sweep = |senders: &str| {
        let scenario = bench.write(
            "sweep.toml",
            &format!(
                "[[group]]\nname = \"incast\"\npattern = \"fan-in\"\nrails = \"same\"\nreceivers = 0\n{senders}\
                 [sweep]\nparameter = \"senders\"\nvalues = [1, 2, 4]\n"
            ),
        );
        bench.run(&["plan", scenario.to_str().unwrap(), "-H", hosts.to_str().unwrap(), "--json"])
    };
    let out = sweep("");
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr)
            .contains("sweeping `senders` of group `incast` with rails = \"same\" needs its senders listed"),
        "{}",
        text(&out.stderr)
    );
    let out = sweep("senders = \"2,4,6,8\"\n");
    let plan: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out.stderr)));
    let phases = plan["plan"]["phases"].as_array().unwrap();
    let senders: Vec<Vec<u64>> = phases
        .iter()
        .map(|p| p["flows"].as_array().unwrap().iter().map(|f| f["src"].as_u64().unwrap()).collect())
        .collect();
    assert_eq!(senders, [vec![2], vec![2, 4], vec![2, 4, 6, 8]], "rail 0 of the next hosts, into rank 0");
}

#[test]
fn a_local_run_moves_bytes_on_the_same_rail_of_two_hosts_only() {
    let _machine = common::busy_machine();
    let bench = Bench::new();
    let hosts = bench.write("hosts", "127.0.0.1 slots=2\n127.0.0.2 slots=2\n");
    // 2 s: the skew four workers may start apart on a busy machine stays well inside 10 % of it.
    let scenario = bench.write("rails.toml", &all_pairs("2s"));
    let run = run_json(&bench, &scenario, &hosts, &[]);
    assert_eq!(run["scenario"]["group"][0]["rails"], "same", "the run's copy of the scenario");
    let phases = run["phases"].as_array().unwrap();
    assert_eq!(phases.len(), 1, "two hosts: one round");
    let flows = phases[0]["flows"].as_array().unwrap();
    let mut ends: Vec<(&str, &str)> =
        flows.iter().map(|f| (f["src_host"].as_str().unwrap(), f["dst_host"].as_str().unwrap())).collect();
    ends.sort_unstable();
    assert_eq!(
        ends,
        [
            ("127.0.0.1#0", "127.0.0.2#0"),
            ("127.0.0.1#1", "127.0.0.2#1"),
            ("127.0.0.2#0", "127.0.0.1#0"),
            ("127.0.0.2#1", "127.0.0.1#1"),
        ]
    );
    for f in flows {
        assert!(f["rx_bytes"].as_u64().unwrap() > 0, "{f}");
    }
}

#[test]
fn rdma_rails_move_data_device_k_to_device_k_in_the_softroce_vm() {
    use crate::rdma_run::{has_rdma, sent_packets, two_devices};
    if !has_rdma() {
        return;
    }
    let devices = two_devices();
    if devices.len() < 2 {
        eprintln!("SKIP: two rails need two ACTIVE RDMA devices, found {devices:?}");
        return;
    }
    let bench = Bench::new();
    let list = devices.join(",");
    let hosts = bench.write("hosts", &format!("127.0.0.1 devices={list}\n127.0.0.2 devices={list}\n"));
    let scenario = bench.write(
        "rails.toml",
        &format!("{}transport = \"rdma\"\nmessage_size = \"16K\"\n[group.rdma]\ntx_depth = 16\n", all_pairs("2s")),
    );
    let before: Vec<u64> = devices.iter().map(|d| sent_packets(d)).collect();
    let run = run_json(&bench, &scenario, &hosts, &[]);
    for (device, before) in devices.iter().zip(before) {
        assert!(sent_packets(device) > before, "{device} carried nothing");
    }
    let device_of = |rank: u64| run["plan"]["ranks"][rank as usize]["devices"][0].as_str().unwrap().to_string();
    let phase = &run["phases"][0];
    let flows = phase["flows"].as_array().unwrap();
    assert_eq!(flows.len(), 4, "two rails of one host pair, both ways");
    for f in flows {
        let (src, dst) = (f["src"].as_u64().unwrap(), f["dst"].as_u64().unwrap());
        assert_eq!(device_of(src), device_of(dst), "rail k meets rail k: {f}");
        assert!(f["bytes"].as_u64().unwrap() > 0, "{f}");
    }
    for (rank, r) in phase["ranks"].as_array().unwrap().iter().enumerate() {
        let used: Vec<&str> =
            r["rdma_counters"].as_array().unwrap().iter().map(|c| c["device"].as_str().unwrap()).collect();
        assert_eq!(used, [device_of(rank as u64).as_str()], "rank {rank} counts only its own device: {r}");
    }
}

/// Packets `device` of `host` sent: read here, or over ssh on a peer VM.
fn sent_on(host: &str, device: &str) -> u64 {
    let here = std::env::var("SOFTROCE_VM_INDEX").is_ok_and(|i| host == format!("vm{i}"));
    if here {
        return crate::rdma_run::sent_packets(device);
    }
    let path = format!("/sys/class/infiniband/{device}/ports/1/hw_counters/sent_pkts");
    let out = std::process::Command::new("ssh").args([host, "cat", &path]).output().unwrap();
    assert!(out.status.success(), "ssh {host} cat {path}: {}", text(&out.stderr));
    text(&out.stdout).trim().parse().unwrap_or_else(|e| panic!("{host} {path}: {e}"))
}

#[test]
fn rdma_rails_across_two_vms_meet_nic_k_to_nic_k() {
    let Ok(names) = std::env::var("FB_RDMA_RAILS_HOSTS") else {
        eprintln!("SKIP: FB_RDMA_RAILS_HOSTS is not set (only VMs of two NICs each have the rails)");
        return;
    };
    let hosts: Vec<&str> = names.split_whitespace().collect();
    assert_eq!(hosts.len(), 2, "FB_RDMA_RAILS_HOSTS names two VMs: {names}");
    let devices = ["rxe0", "rxe1"];
    let bench = Bench::new();
    let hostfile: String = hosts.iter().map(|h| format!("{h} devices={}\n", devices.join(","))).collect();
    let hostfile = bench.write("hosts", &hostfile);
    let scenario = bench.write(
        "rails.toml",
        &format!("{}transport = \"rdma\"\nmessage_size = \"4K\"\n[group.rdma]\ntx_depth = 16\n", all_pairs("2s")),
    );
    let counters = || -> Vec<u64> { hosts.iter().flat_map(|h| devices.map(|d| sent_on(h, d))).collect() };
    let before = counters();
    // Each ssh connection takes seconds under TCG.
    let run = run_json(&bench, &scenario, &hostfile, &["--connect-timeout", "60s"]);
    let after = counters();
    let named = hosts.iter().flat_map(|h| devices.map(|d| format!("{h} {d}")));
    for ((name, before), after) in named.zip(before).zip(after) {
        assert!(after > before, "{name} sent nothing ({before} packets before, {after} after)");
    }
    let phase = &run["phases"][0];
    assert_eq!(phase["complete"], true, "{phase}");
    let flows = phase["flows"].as_array().unwrap();
    assert_eq!(flows.len(), 4, "two rails of one host pair, both ways: {phase}");
    let device_of = |rank: &serde_json::Value| {
        run["plan"]["ranks"][rank.as_u64().unwrap() as usize]["devices"][0].as_str().unwrap().to_string()
    };
    for f in flows {
        let host = |end: &str| f[end].as_str().unwrap().split('#').next().unwrap().to_string();
        assert_ne!(host("src_host"), host("dst_host"), "one VM's NIC with the other's: {f}");
        assert_eq!(device_of(&f["src"]), device_of(&f["dst"]), "rail k meets rail k: {f}");
        assert!(f["bytes"].as_u64().unwrap() > 0, "{f}");
    }
}
