//! Several ranks per host (hostfile `slots=N`, `devices=`, `addrs=`): each
//! its own worker process, its own data address and port, named by host,
//! slot and device in every output; and the hostfile's bad inputs, as the
//! CLI says them.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use common::testbed::Bed;
use common::{read_json, text, Bench, FanIn, TcpSocket};

/// Senders 1 and 2 into rank 0: with `h slots=2` first, rank 1 is rank 0's
/// neighbour on the same host, rank 2 another host.
fn fan_in(duration: &str) -> String {
    FanIn::new("slots", duration).message_size("64K").senders("1-2").text()
}

/// What a run on `first slots=2` + `second` must show: three ranks, two on
/// the first host (slots 0 and 1), both flows moving data, each rank
/// reporting its own CPU, and the rank named `host#slot` where it shares
/// its host.
fn check_two_slot_run(run: &serde_json::Value, first: &str, second: &str) {
    let hosts: Vec<(&str, u64)> = run["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| (h["name"].as_str().unwrap(), h["slot"].as_u64().unwrap_or(0)))
        .collect();
    assert_eq!(hosts, [(first, 0), (first, 1), (second, 0)], "the rank list");
    let phase = &run["phases"][0];
    assert_eq!(phase["complete"], true, "{phase}");
    let flows = phase["flows"].as_array().unwrap();
    let ends: Vec<(u64, &str, &str)> = flows
        .iter()
        .map(|f| (f["src"].as_u64().unwrap(), f["src_host"].as_str().unwrap(), f["dst_host"].as_str().unwrap()))
        .collect();
    let (first0, first1) = (format!("{first}#0"), format!("{first}#1"));
    assert_eq!(ends, [(1, first1.as_str(), first0.as_str()), (2, second, first0.as_str())], "{flows:?}");
    for f in flows {
        assert!(f["rx_bytes"].as_u64().unwrap() > 0, "{f}");
    }
    let ranks = phase["ranks"].as_array().unwrap();
    let rows: Vec<(&str, u64, bool)> = ranks
        .iter()
        .map(|r| {
            (r.get("host").and_then(|h| h.as_str()).unwrap(), r["slot"].as_u64().unwrap_or(0), r["reported"] == true)
        })
        .collect();
    assert_eq!(rows, [(first, 0, true), (first, 1, true), (second, 0, true)], "{ranks:?}");
    // Two processes on one host: each measures its own worker's CPU.
    for r in ranks {
        assert!(r["cpu"]["worker_pct"].as_f64().unwrap() > 0.0, "{r}");
    }
}

#[test]
fn two_slots_on_one_local_host_are_two_workers() {
    let _machine = common::busy_machine();
    let bench = Bench::new();
    let hosts = bench.write("hosts", "127.0.0.1 slots=2\n127.0.0.2\n");
    let scenario = bench.write("fan.toml", &fan_in("2s"));
    let child = bench.spawn(&["run", scenario.to_str().unwrap(), "-H", hosts.to_str().unwrap(), "--quiet"]);
    // Ranks 0 and 1 are two processes, both bound to 127.0.0.1.
    let (pid0, pid1) = (bench.worker_pid(0, Duration::from_secs(20)), bench.worker_pid(1, Duration::from_secs(20)));
    assert_ne!(pid0, pid1);
    let out = child.wait_with_output().unwrap();
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    let dir = bench.result_dir();
    let run = read_json(&dir.join("run.json"));
    check_two_slot_run(&run, "127.0.0.1", "127.0.0.2");
    let plan: Vec<(&str, &str)> = run["plan"]["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["host"].as_str().unwrap(), r["addr"].as_str().unwrap()))
        .collect();
    assert_eq!(plan, [("127.0.0.1", "127.0.0.1"), ("127.0.0.1", "127.0.0.1"), ("127.0.0.2", "127.0.0.2")]);

    // ranks.csv names each rank's slot; the tables show `slot / devices` once a host has several.
    let mut ranks = csv::Reader::from_path(dir.join("ranks.csv")).unwrap();
    let headers = ranks.headers().unwrap().clone();
    let at = |name: &str| headers.iter().position(|h| h == name).unwrap_or_else(|| panic!("no {name}: {headers:?}"));
    let (host, slot) = (at("host"), at("slot"));
    let rows: Vec<(String, String)> =
        ranks.records().map(|r| r.unwrap()).map(|r| (r[host].to_string(), r[slot].to_string())).collect();
    assert_eq!(
        rows,
        [("127.0.0.1".into(), "0".into()), ("127.0.0.1".into(), "1".into()), ("127.0.0.2".into(), "0".into())]
    );
    let summary = std::fs::read_to_string(dir.join("summary.md")).unwrap();
    assert!(
        summary.contains("| rank | host | slot / devices |") && summary.contains("| 1 | 127.0.0.1 | 1 / - |"),
        "{summary}"
    );
    assert!(summary.contains("127.0.0.1#1"), "flows name the rank's slot: {summary}");
    assert_eq!(bench.leftovers(Duration::from_secs(2)), []);
}

#[test]
fn plan_lists_each_rank_with_its_slot_and_device() {
    let bench = Bench::new();
    let hosts = bench.write("hosts", "n1 devices=mlx5_0,mlx5_1\nn2\n");
    let scenario = bench.write("fan.toml", &fan_in("1s"));
    let out = bench.run(&["plan", scenario.to_str().unwrap(), "-H", hosts.to_str().unwrap()]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let ranks: Vec<&str> = stdout.lines().filter(|l| l.starts_with("rank")).collect();
    assert_eq!(ranks.len(), 3, "{stdout}");
    assert!(ranks[0].contains("n1") && ranks[0].ends_with("slot 0 of 2  devices mlx5_0"), "{stdout}");
    assert!(ranks[1].ends_with("slot 1 of 2  devices mlx5_1"), "{stdout}");
    assert!(ranks[2].contains("n2") && ranks[2].ends_with("slot 0 of 1  devices -"), "{stdout}");
    assert!(stdout.contains("1 (n1#1) -> 0 (n1#0)") && stdout.contains("2 (n2) -> 0 (n1#0)"), "{stdout}");
}

/// Two loopback "hosts" of two ranks, each rank on its own loopback
/// "NIC" address (all of 127.0.0.0/8 is loopback on Linux).
const ADDRS_HOSTS: &str = "127.0.0.1 slots=2 addrs=127.0.1.1,127.0.1.2\n127.0.0.2 slots=2 addrs=127.0.2.1,127.0.2.2\n";
/// Each rank's address in ADDRS_HOSTS, by rank.
const RANK_ADDRS: [[u8; 4]; 4] = [[127, 0, 1, 1], [127, 0, 1, 2], [127, 0, 2, 1], [127, 0, 2, 2]];
/// Flows across the hosts and within one, two streams each, so that every
/// rank sends or receives and each pair of addresses is a flow's.
const ADDRS_FLOWS: [(usize, usize); 3] = [(0, 2), (3, 1), (1, 0)];

/// The established TCP connections of this test's workers, by the rank
/// whose process holds each end.
fn established_by_rank(bench: &Bench) -> Vec<(usize, TcpSocket)> {
    let mut found = Vec::new();
    for (pid, cmdline) in bench.processes() {
        let Some(rank) = cmdline.split("worker --rank ").nth(1) else { continue };
        let Some(rank) = rank.split_whitespace().next().and_then(|r| r.parse().ok()) else { continue };
        let established = common::tcp_table(pid).into_iter().filter(|s| s.state == "01");
        found.extend(established.map(|s| (rank, s)));
    }
    found
}

/// `addrs=`: rank k of a host binds its TCP data to the host's k-th
/// address. The kernel's own table of the workers' connections, sampled
/// while the run goes, shows each flow's streams between exactly its two
/// ranks' addresses (the sender's end on the sender's address), no data on
/// the hosts' own addresses, and the control connections to the
/// coordinator where they were; run.json records each rank's address.
#[test]
fn addrs_bind_each_ranks_tcp_data_to_its_own_address() {
    let _machine = common::busy_machine();
    let bench = Bench::new();
    let hosts = bench.write("hosts", ADDRS_HOSTS);
    let flows = ADDRS_FLOWS.map(|(s, d)| format!("[{s}, {d}]")).join(", ");
    let scenario = bench.write(
        "rails.toml",
        &format!(
            "[run]\nname = \"rails\"\nduration = \"2s\"\nwarmup = \"300ms\"\ninterval = \"500ms\"\n\
             [[group]]\nname = \"rails\"\npattern = \"explicit\"\nflows = [{flows}]\nstreams = 2\n\
             message_size = \"64K\"\n"
        ),
    );
    let args = ["run", scenario.to_str().unwrap(), "-H", hosts.to_str().unwrap()];
    let mut child = bench.spawn(&[&args[..], &["--export-json", "-", "--no-save", "--quiet"]].concat());
    let mut stdout = child.stdout.take().expect("stdout piped");
    let json = std::thread::spawn(move || {
        let mut all = Vec::new();
        stdout.read_to_end(&mut all).map(|_| all)
    });
    let (_, stderr) = common::follow_stderr(&mut child);
    // Every established connection seen while the run goes, by the rank
    // holding it (its ports tell the streams of one flow apart).
    let mut seen: BTreeSet<(usize, TcpSocket)> = BTreeSet::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "the run did not end");
        seen.extend(established_by_rank(&bench));
        std::thread::sleep(Duration::from_millis(20));
    }
    let status = child.wait().unwrap();
    let (stdout, stderr) = (json.join().unwrap().unwrap(), stderr.join().unwrap());
    // What is tested is where the connections run; a rank that started late
    // on a loaded machine shortens its window, which fabricbench rightly
    // calls degraded (exit 4, the result complete).
    assert!(matches!(status.code(), Some(0 | 4)), "{stderr}");
    assert_eq!(bench.leftovers(Duration::from_secs(2)), []);

    let addr = |rank: usize| Ipv4Addr::from(RANK_ADDRS[rank]);
    let data: BTreeSet<(usize, TcpSocket)> =
        seen.iter().filter(|(_, s)| RANK_ADDRS.contains(&s.local.ip().octets())).cloned().collect();
    // Each end of a data connection is on its own rank's address.
    for (rank, s) in &data {
        assert_eq!(*s.local.ip(), addr(*rank), "rank {rank} holds a data connection off its address: {s:?}");
    }
    // Exactly the flows' address pairs, both ends seen, and nothing else.
    let pairs: BTreeSet<(Ipv4Addr, Ipv4Addr)> = data.iter().map(|(_, s)| (*s.local.ip(), *s.remote.ip())).collect();
    let wanted: BTreeSet<(Ipv4Addr, Ipv4Addr)> =
        ADDRS_FLOWS.iter().flat_map(|&(s, d)| [(addr(s), addr(d)), (addr(d), addr(s))]).collect();
    assert_eq!(pairs, wanted, "the data connections' address pairs");
    // Two streams a flow: on each sender, two connections to the flow's receiver.
    for &(s, d) in &ADDRS_FLOWS {
        let streams = data.iter().filter(|(rank, c)| *rank == s && *c.remote.ip() == addr(d)).count();
        assert!(streams >= 2, "flow {s} -> {d}: {streams} connection(s) seen from its sender: {data:?}");
    }
    // Everything else is the control plane, as without addrs=: members
    // connected to rank 0's coordinator on its host's address, 127.0.0.1.
    let host0 = Ipv4Addr::new(127, 0, 0, 1);
    let control: Vec<&(usize, TcpSocket)> = seen.iter().filter(|entry| !data.contains(entry)).collect();
    assert!(control.iter().all(|(_, s)| *s.local.ip() == host0 && *s.remote.ip() == host0), "{control:?}");
    let members: BTreeSet<usize> = control.iter().map(|(rank, _)| *rank).filter(|&r| r != 0).collect();
    assert_eq!(members, BTreeSet::from([1, 2, 3]), "every member's control connection: {control:?}");

    // The result records each rank's data address, where its host is named.
    let run: serde_json::Value = serde_json::from_slice(&stdout).expect("stdout is one JSON document");
    let phase = &run["phases"][0];
    for rank in 0..4 {
        let (own, host) = (addr(rank).to_string(), ["127.0.0.1", "127.0.0.2"][rank / 2]);
        assert_eq!(run["plan"]["ranks"][rank]["data_addr"], own.as_str(), "{}", run["plan"]["ranks"]);
        assert_eq!(run["plan"]["ranks"][rank]["addr"], host, "{}", run["plan"]["ranks"]);
        assert_eq!(phase["ranks"][rank]["data_addr"], own.as_str(), "{}", phase["ranks"][rank]);
        assert_eq!(run["hosts"][rank]["addrs"], serde_json::json!([own]), "{}", run["hosts"]);
    }
    let moved: BTreeMap<(u64, u64), u64> = phase["flows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| ((f["src"].as_u64().unwrap(), f["dst"].as_u64().unwrap()), f["rx_bytes"].as_u64().unwrap()))
        .collect();
    let planned: BTreeSet<(u64, u64)> = ADDRS_FLOWS.iter().map(|&(s, d)| (s as u64, d as u64)).collect();
    assert_eq!(moved.keys().copied().collect::<BTreeSet<_>>(), planned, "the flows of the scenario");
    assert!(moved.values().all(|&bytes| bytes > 0), "every flow moved data: {moved:?}");
}

#[test]
fn plan_shows_each_ranks_address_from_addrs() {
    let bench = Bench::new();
    let hosts = bench.write("hosts", ADDRS_HOSTS);
    let scenario = bench.write("fan.toml", &fan_in("1s"));
    let out = bench.run(&["plan", scenario.to_str().unwrap(), "-H", hosts.to_str().unwrap()]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let ranks: Vec<&str> = stdout.lines().filter(|l| l.starts_with("rank")).collect();
    assert_eq!(ranks.len(), 4, "{stdout}");
    for (line, own) in ranks.iter().zip(RANK_ADDRS) {
        assert!(line.ends_with(&format!("devices -  addr {} (addrs=)", Ipv4Addr::from(own))), "{stdout}");
    }
    // One address, one rank: still listed, as the address is news.
    let hosts = bench.write("hosts", "n1 addrs=10.0.0.1\nn2\nn3\n");
    let out = bench.run(&["plan", scenario.to_str().unwrap(), "-H", hosts.to_str().unwrap()]);
    let stdout = text(&out.stdout);
    assert!(stdout.lines().any(|l| l.starts_with("rank") && l.ends_with("addr 10.0.0.1 (addrs=)")), "{stdout}");
}

#[test]
fn bad_slots_and_devices_are_refused_naming_the_line() {
    let bench = Bench::new();
    let scenario = bench.write("fan.toml", &fan_in("1s"));
    let plan = |hostfile: &str| {
        let hosts = bench.write("hosts", hostfile);
        let out = bench.run(&["plan", scenario.to_str().unwrap(), "-H", hosts.to_str().unwrap()]);
        (out.status.code(), text(&out.stderr))
    };
    let (code, err) = plan("n0\nn1 slots=0\n");
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("hosts:2: slot count `0` is not a positive integer"), "{err}");
    let (code, err) = plan("n0\nn1 slots=3 devices=mlx5_0,mlx5_1\n");
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("hosts:2: `n1`: slots=3 but devices= lists 2 (mlx5_0, mlx5_1)"), "{err}");
    assert!(err.contains("give slots=2 (or leave slots out)"), "{err}");
    let (code, err) = plan("n0\nn1 slots=2 addrs=10.0.0.1,ib1\n");
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("hosts:2: `addrs=10.0.0.1,ib1`: `ib1` is not an IP address"), "{err}");
    let (_, err) = plan("n0\nn1 slots=3 addrs=10.0.0.1,10.1.0.1\n");
    assert!(err.contains("hosts:2: `n1`: slots=3 but addrs= lists 2 (10.0.0.1, 10.1.0.1)"), "{err}");
    let (_, err) = plan("n0\nn[1-1024] slots=64\n");
    assert!(
        err.contains("hosts:2: `n1024` with slots=64 makes 65537 ranks or more; a run takes at most 65536 ranks"),
        "{err}"
    );
    // A count of cores is no error, but it is said.
    let (code, err) = plan("n0 slots=64\n");
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("warning: host `n0` has slots=64: 64 workers will run on it"), "{err}");
}

/// A device the hostfile names that the host does not have ends an RDMA
/// run as it starts, naming the rank, the device and what the host has. A TCP run uses no device: there `devices=` only names the
/// ranks' NICs (for the topology and suspects), and the run goes on.
#[test]
fn a_device_not_on_the_host_fails_an_rdma_run_at_the_start() {
    let _machine = common::busy_machine();
    let bench = Bench::new();
    // Both ranks name it: here neither has RDMA, and a rank without a
    // check would fail in the phase on its own, racing the other's.
    let hosts = bench.write("hosts", "127.0.0.1 devices=nosuch0\n127.0.0.2 devices=nosuch0\n");
    let pair = |transport: &str| {
        let scenario = bench.write(
            "pair.toml",
            &format!(
                // 2 s after a warm-up: the Soft-RoCE VM's emulated CPUs start
                // two workers far enough apart to degrade a 1 s window.
                "[run]\nduration = \"2s\"\nwarmup = \"500ms\"\ninterval = \"500ms\"\n[[group]]\nname = \"p\"\n\
                 pattern = \"pairwise\"\ntransport = \"{transport}\"\n"
            ),
        );
        bench.run(&["run", scenario.to_str().unwrap(), "-H", hosts.to_str().unwrap(), "--no-save", "--quiet"])
    };
    let tcp = pair("tcp");
    assert!(tcp.status.success(), "{}", text(&tcp.stderr));
    let out = pair("rdma");
    let err = text(&out.stderr);
    assert!(!out.status.success(), "{err}");
    // The probe's check, never the engine's failure to open it: a rank's
    // failure in phase 0 waits for its probe, which rank 0 judges first.
    let probed = ["1 (127.0.0.2)", "0 (127.0.0.1)"].iter().any(|r| {
        err.contains(&format!(
            "rank {r}: the hostfile gives host `{}` device `nosuch0` (devices=), which is not on the host; ",
            &r[3..r.len() - 1]
        ))
    });
    assert!(probed, "{err}");
    assert!(err.contains("it has no RDMA devices") || err.contains("its RDMA devices: "), "{err}");
    assert_eq!(bench.leftovers(Duration::from_secs(2)), []);
}

/// On the namespace bed over ssh: `h1 slots=2` runs two workers on h1
/// (seen there while the run goes), both reached through one ssh master.
#[test]
fn two_slots_on_one_bed_host_over_ssh() {
    let Some(bed) = Bed::up(2, &[]) else { return };
    let bench = Bench::new();
    let lines = std::fs::read_to_string(&bed.hostfile).unwrap();
    let with_slots: String = lines
        .lines()
        .map(|l| if l.split_whitespace().next() == Some("h1") { format!("{l} slots=2\n") } else { format!("{l}\n") })
        .collect();
    let hosts = bench.write("hosts", &with_slots);
    let scenario = bench.write("fan.toml", &fan_in("4s"));
    let mut args = vec!["run", scenario.to_str().unwrap(), "-H", hosts.to_str().unwrap()];
    let ssh = bed.ssh_args();
    args.extend(ssh.iter().map(String::as_str));
    args.extend(["--export-json", "-", "--no-save", "--quiet"]);
    let child = bench.spawn(&args);
    // The ranks whose workers run on h1 (a worker's command line names its rank).
    let ranks_on_h1 = || -> BTreeSet<String> {
        let out = bed.exec("h1", &["pgrep", "-af", "fabricbench worker"]);
        text(&out.stdout).lines().filter_map(|l| l.split("--rank ").nth(1)).map(|r| r.trim().to_string()).collect()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let mut seen = BTreeSet::new();
    while seen.len() < 2 && std::time::Instant::now() < deadline {
        seen.extend(ranks_on_h1());
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = child.wait_with_output().unwrap();
    // What is tested is where the ranks run; a rank whose first boundary
    // came late on a loaded host shortens its window, which fabricbench
    // rightly calls degraded (exit 4, run.json complete).
    assert!(matches!(out.status.code(), Some(0 | 4)), "{}", text(&out.stderr));
    assert_eq!(seen, BTreeSet::from(["0".to_string(), "1".to_string()]), "h1 runs one worker per slot");
    let run: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    check_two_slot_run(&run, "h1", "h2");
    assert!(bed.hosts_with_workers(&["h1", "h2"], Duration::from_secs(5)).is_empty());

    // `fabricbench hosts` checks each host once, however many ranks it runs.
    let config = bed.ssh_config.to_str().unwrap();
    let out = bench.run(&["hosts", "-H", hosts.to_str().unwrap(), "--ssh-config", config, "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let checks: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let checked: Vec<&str> = checks.as_array().unwrap().iter().map(|c| c["host"].as_str().unwrap()).collect();
    assert_eq!(checked, ["h1", "h2"]);
}

/// In the VM with rxe0 and rxe1: two hosts of `slots=2 devices=rxe0,rxe1`
/// make four ranks, rank k of a host on its k-th device; flows 2 → 0 (both
/// on rxe0) and 3 → 1 (both on rxe1) each move data on their own device
/// only: each rank's RDMA counters name its device alone, and both devices'
/// own packet counters moved.
#[test]
fn rdma_slots_bind_each_rank_to_its_own_device() {
    use crate::rdma_run::{has_rdma, sent_packets, two_devices};
    if !has_rdma() {
        return;
    }
    let devices = two_devices();
    if devices.len() < 2 {
        eprintln!("SKIP: one rank per device needs two ACTIVE RDMA devices, found {devices:?}");
        return;
    }
    let bench = Bench::new();
    let list = devices.join(",");
    let hosts = bench.write("hosts", &format!("127.0.0.1 slots=2 devices={list}\n127.0.0.2 devices={list}\n"));
    let scenario = bench.write(
        "per-nic.toml",
        "[run]\nduration = \"2s\"\nwarmup = \"500ms\"\ninterval = \"1s\"\n[[group]]\nname = \"per-nic\"\n\
         pattern = \"explicit\"\ntransport = \"rdma\"\nflows = [[2, 0], [3, 1]]\nmessage_size = \"16K\"\n\
         [group.rdma]\ntx_depth = 16\n",
    );
    let before: Vec<u64> = devices.iter().map(|d| sent_packets(d)).collect();
    let run = common::run_json(&bench, &scenario, &hosts, &[]);
    for (device, before) in devices.iter().zip(before) {
        assert!(sent_packets(device) > before, "{device} carried nothing");
    }
    let planned: Vec<(u64, &str)> = run["plan"]["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["slot"].as_u64().unwrap_or(0), r["devices"][0].as_str().unwrap()))
        .collect();
    let (d0, d1) = (devices[0].as_str(), devices[1].as_str());
    assert_eq!(planned, [(0, d0), (1, d1), (0, d0), (1, d1)], "rank k of a host on its k-th device");
    let phase = &run["phases"][0];
    for f in phase["flows"].as_array().unwrap() {
        assert!(f["bytes"].as_u64().unwrap() > 0, "{f}");
        eprintln!("flow {} → {}: {} Gb/s", f["src_host"], f["dst_host"], f["gbps"]);
    }
    for (rank, device) in [(0, d0), (1, d1), (2, d0), (3, d1)] {
        let r = &phase["ranks"][rank];
        assert_eq!(r["devices"], serde_json::json!([device]), "{r}");
        let used: Vec<&str> =
            r["rdma_counters"].as_array().unwrap().iter().map(|c| c["device"].as_str().unwrap()).collect();
        assert_eq!(used, [device], "rank {rank} counts only its own device: {r}");
    }
}

/// A tree launch (`--tree-radix 2`) of two bed hosts of two slots each:
/// workers start the ranks below them, a host's second rank among them,
/// and a ring over the four ranks moves data on every flow.
#[test]
fn tree_launch_of_two_slot_hosts_over_ssh() {
    let Some(bed) = Bed::up(2, &[]) else { return };
    let bench = Bench::new();
    let hosts = bench.write("hosts", "h1 slots=2\nh2 slots=2\n");
    let scenario = bench.write(
        "ring.toml",
        // A warm-up and a 3 s window: on a loaded host a tree's ranks start
        // up to ~0.15 s apart, which a 1 s window would call degraded.
        "[run]\nduration = \"3s\"\nwarmup = \"500ms\"\ninterval = \"500ms\"\n[[group]]\nname = \"ring\"\npattern = \"ring\"\n",
    );
    let mut args = vec!["run", scenario.to_str().unwrap(), "-H", hosts.to_str().unwrap()];
    let ssh = bed.ssh_args();
    args.extend(ssh.iter().map(String::as_str));
    args.extend(["--tree-radix", "2", "--export-json", "-", "--no-save", "--quiet"]);
    let out = bench.run(&args);
    // What is tested is where the ranks run and that every flow moves data;
    // a rank whose Start came late on a loaded host shortens its window,
    // which fabricbench rightly calls degraded (exit 4, run.json complete).
    assert!(matches!(out.status.code(), Some(0 | 4)), "{}", text(&out.stderr));
    let run: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let flows = run["phases"][0]["flows"].as_array().unwrap();
    let ends: Vec<(&str, &str)> =
        flows.iter().map(|f| (f["src_host"].as_str().unwrap(), f["dst_host"].as_str().unwrap())).collect();
    assert_eq!(ends, [("h1#0", "h1#1"), ("h1#1", "h2#0"), ("h2#0", "h2#1"), ("h2#1", "h1#0")]);
    assert!(flows.iter().all(|f| f["rx_bytes"].as_u64().unwrap() > 0), "{flows:?}");
    assert!(bed.hosts_with_workers(&["h1", "h2"], Duration::from_secs(5)).is_empty());
}
