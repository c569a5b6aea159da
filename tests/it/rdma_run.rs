//! RDMA flows through the real CLI: the shipped RDMA scenarios on local
//! ranks over whatever device the host has (Soft-RoCE in the project's VM:
//! `scripts/test-rdma`). Skipped with a printed reason without a device,
//! unless FABRICBENCH_REQUIRE_RDMA=1.

use crate::common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::{perftest_rows, read_json, run_json, text, Bench};
use fabricbench::scenario::sweep::Value;
use fabricbench::scenario::Transport;

pub(crate) fn has_rdma() -> bool {
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
    // Why each number: every bandwidth flow's verdict rests on this run's
    // evidence (Soft-RoCE's port says 2 Gb/s: only a rate near it is "line
    // rate"); the latency probe has none.
    for f in &flows[..3] {
        let kind = f["limit"]["kind"].as_str().unwrap_or_else(|| panic!("no limit: {f}"));
        assert!(!f["limit"]["evidence"].as_array().unwrap().is_empty(), "{f}");
        if kind == "line_rate" {
            let share = f["gbps"].as_f64().unwrap() / port["ports"][0]["rate_gbps"].as_f64().unwrap();
            assert!((0.9..=1.05).contains(&share), "{f}");
        }
        if kind == "loss" || kind == "congestion" {
            assert!(
                f["limit"]["evidence"][0]["what"].as_str().unwrap().contains(port["name"].as_str().unwrap()),
                "{f}"
            );
        }
    }
    // Soft-RoCE counts lost and out-of-order packets but has no congestion
    // counters (no CNP, no ECN): said unavailable, never read as 0; and
    // every rank kept which of those counters its port has.
    let rxe = port["name"].as_str().unwrap();
    let lacking = unavailable_of(&flows[0]);
    assert!(lacking.contains(&format!("sender {rxe}:1 congestion counters")), "{lacking:?}");
    assert!(!lacking.iter().any(|l| l.ends_with("loss counters")), "{lacking:?}");
    for rank in phase["ranks"].as_array().unwrap() {
        for counters in rank["rdma_counters"].as_array().unwrap() {
            let signals = counters["signals"].as_array().unwrap_or_else(|| panic!("{counters}"));
            assert!(signals.iter().any(|s| s == "rcvd_seq_err"), "{counters}");
        }
    }
    assert!(flows[3].get("limit").is_none(), "{}", flows[3]);
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

/// Three repeats of the RDMA fan-in: the incast's message rate and the
/// probe's latency each get their three values (the repeats' own numbers)
/// and an interval around their mean. Correctness and order only: Soft-RoCE
/// under emulation says nothing about rates.
#[test]
fn rdma_repeats_give_message_rate_and_latency_intervals() {
    if !has_rdma() {
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let scenario = root.join("scenarios/rdma-fan-in.toml");
    // The scenario's own 3 s windows: under emulation a 1 s one may end before a flow moves a byte.
    let bench = Bench::new();
    let (s, hosts) = (scenario.to_str().unwrap(), root.join("hostfiles/local"));
    let out = bench.run(&["run", s, "-H", hosts.to_str().unwrap(), "--repeat", "3", "--export-json", "-", "--no-save"]);
    // 4: an emulated repeat may come out degraded (a flow that started late); it is not counted.
    assert!(matches!(out.status.code(), Some(0 | 4)), "{}", text(&out.stderr));
    let run: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let phases = run["phases"].as_array().unwrap();
    let names: Vec<&str> = phases.iter().map(|p| p["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["rdma-fan-in (repeat 1/3)", "rdma-fan-in (repeat 2/3)", "rdma-fan-in (repeat 3/3)"]);
    let counted: Vec<&serde_json::Value> =
        phases.iter().filter(|p| p["complete"] == true && p.get("degraded").is_none()).collect();
    let repeated = &run["repeats"][0];
    assert_eq!(repeated["counted"].as_u64(), Some(counted.len() as u64), "{repeated}");
    assert!(!counted.is_empty(), "no repeat counted: {}", text(&out.stderr));
    let number = |item: &str, metric: &str| {
        repeated["numbers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["item"] == item && n["metric"] == metric)
            .unwrap_or_else(|| panic!("no {item} {metric}: {repeated}"))
            .clone()
    };
    let mpps = number("group incast", "mpps");
    assert_eq!(mpps["values"].as_array().unwrap().len(), counted.len());
    for (v, p) in mpps["values"].as_array().unwrap().iter().zip(&counted) {
        assert_eq!(v["phase"], p["index"]);
        let flows = p["flows"].as_array().unwrap();
        let rate: f64 =
            flows.iter().filter(|f| f["group"] == "incast").map(|f| f["msgs_per_s"].as_f64().unwrap()).sum();
        assert!((v["value"].as_f64().unwrap() - rate / 1e6).abs() < 1e-12, "{v} vs {rate}");
        assert!(rate > 0.0);
    }
    if counted.len() < 2 {
        return; // one counted repeat has no spread (checked on TCP in repeats::)
    }
    for metric in ["latency_typical_us", "latency_p99_us"] {
        let n = number("probe 127.0.0.3 → 127.0.0.1", metric);
        let s = &n["spread"];
        let f = |k: &str| s[k].as_f64().unwrap();
        assert_eq!(s["n"].as_u64(), Some(counted.len() as u64), "{n}");
        assert!(f("ci95_low") <= f("mean") && f("mean") <= f("ci95_high"), "{n}");
        assert!(f("min") > 0.0 && f("min") <= f("max"), "{n}");
    }
}

#[test]
fn rdma_ops_through_the_cli() {
    if !has_rdma() {
        return;
    }
    let bench = Bench::new();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    // Atomics move their 8-byte operand (another size is refused).
    for (op, size) in [("read", "16K"), ("send", "16K"), ("write-imm", "16K"), ("fetch-add", "8")] {
        let scenario = bench.write(
            "op.toml",
            &format!(
                "[run]\nduration = \"1s\"\nwarmup = \"200ms\"\ninterval = \"500ms\"\n[[group]]\nname = \"g\"\npattern = \"explicit\"\ntransport = \"rdma\"\nop = \"{op}\"\nflows = [[1, 0]]\nmessage_size = \"{size}\"\n"
            ),
        );
        let run = run_json(&bench, &scenario, &root.join("hostfiles/local"), &[]);
        let flow = &run["phases"][0]["flows"][0];
        assert!(flow["bytes"].as_u64().unwrap() > 0, "{op}: {flow}");
        let bytes = fabricbench::units::ByteSize::parse(size).unwrap().bytes();
        assert_eq!(flow["message_size"].as_u64(), Some(bytes), "{op}: {flow}");
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
    // A killed worker's connection ends with FIN or RST, either of them
    // "connection lost", naming the flow.
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

/// `pair atomic --lat` / `atomic_lat -A CMP_AND_SWAP`: ib_atomic_lat's
/// title and table, 8-byte rows of full round trips.
#[test]
fn pair_atomic_latency_like_ib_atomic_lat() {
    if !has_rdma() {
        return;
    }
    let bench = Bench::new();
    for (args, title) in [
        (&["atomic", "--lat"][..], "Atomic FETCH_AND_ADD Latency Test"),
        (&["atomic_lat", "-A", "CMP_AND_SWAP"][..], "Atomic CMP_AND_SWAP Latency Test"),
    ] {
        let mut line = vec!["pair", "localhost", "localhost"];
        line.extend_from_slice(args);
        line.extend(["-D", "0.5", "--no-progress", "--no-save"]);
        let out = bench.run(&line);
        let stdout = text(&out.stdout);
        assert!(out.status.success(), "{line:?}:\n{stdout}\n{}", text(&out.stderr));
        assert!(stdout.contains(title) && stdout.contains("round trip (one atomic at a time)"), "{stdout}");
        let rows = perftest_rows(&stdout, " #bytes #iterations    t_min[usec]");
        let r = &rows[0];
        assert!(rows.len() == 1 && r.len() == 9 && r[0] == 8.0 && r[1] > 0.0, "{stdout}");
        assert!(r[2] > 0.0 && r[2] <= r[4] && r[4] <= r[7] && r[7] <= r[3], "min <= typical <= p99 <= max: {r:?}");
    }
}

/// perftest's `ib_send_bw -c UD` at `size` for 2 s on `dev`: the server on
/// `server` over ssh (or here), the client here. Its BW average, MB/sec;
/// `None` (said) when perftest is not installed.
fn ib_send_bw_ud(dev: &str, size: u64, server: Option<&str>) -> Option<f64> {
    if std::process::Command::new("ib_send_bw").arg("--help").output().is_err() {
        eprintln!("perftest is not installed: no ib_send_bw -c UD reference");
        return None;
    }
    // A port of this test's own (not perftest's 18515, which a server left
    // by an earlier test may hold), and `timeout`: a server whose client
    // never came ends by itself.
    let port = 20000 + std::process::id() % 20000;
    let line = format!("timeout 60 ib_send_bw -c UD -d {dev} -s {size} -D 2 -F -p {port}");
    let client = format!("{line} {}", server.unwrap_or("127.0.0.1"));
    let mut last = String::new();
    // A loaded host can be slow to bring the server up: a fresh server per attempt.
    for _ in 0..3 {
        let log = tempfile::NamedTempFile::new().unwrap();
        let mut listening = match server {
            Some(host) => logged(std::process::Command::new("ssh").arg(host).arg(&line), log.path()),
            None => logged(std::process::Command::new("sh").arg("-c").arg(&line), log.path()),
        };
        let mut ran = None;
        for _ in 0..40 {
            std::thread::sleep(Duration::from_millis(500));
            let out = std::process::Command::new("sh").arg("-c").arg(&client).output().unwrap();
            if out.status.success() {
                ran = Some(text(&out.stdout));
                break;
            }
            let gone = listening.try_wait().unwrap().is_some();
            last = format!("client: {}{}", text(&out.stdout), text(&out.stderr));
            if gone {
                break;
            }
        }
        let _ = listening.kill();
        let _ = listening.wait();
        if let Some(out) = ran {
            let rows = perftest_rows(&out, " #bytes     #iterations    BW peak[MB/sec]");
            assert!(rows.len() == 1 && rows[0][0] == size as f64, "{out}");
            // perftest's UD client on rxe once counted 31 200 iterations at
            // "0.00" MB/s (CI, this session): no measurement, try again.
            if rows[0][3] > 0.0 {
                return Some(rows[0][3]);
            }
            last = format!("client reported no bandwidth: {out}");
        }
        last += &format!("server: {}", std::fs::read_to_string(log.path()).unwrap_or_default());
    }
    panic!("ib_send_bw -c UD: no measurement in 3 attempts (the client never ran, or reported none); last:\n{last}");
}

/// The RDMA device rank 0 used in the run's first phase (the device its
/// counters were read from): the reference runs on the same one. (The
/// probe's first device need not be it: an earlier test may have added an
/// rxe device on an interface of a smaller MTU, which a 4 KiB UD send
/// exceeds.)
fn used_device(run: &serde_json::Value) -> String {
    let device = &run["phases"][0]["ranks"][0]["rdma_counters"][0]["device"];
    device.as_str().unwrap_or_else(|| panic!("rank 0 read no RDMA device's counters: {run}")).to_string()
}

/// Spawns with its output to `log` (the reference's server prints its own
/// table; kept to say why, should it fail).
fn logged(command: &mut std::process::Command, log: &std::path::Path) -> std::process::Child {
    let file = std::fs::File::create(log).expect("a log file");
    let err = file.try_clone().expect("the log file again");
    command.stdout(file).stderr(err).spawn().expect("spawn")
}

/// `pair -c UD` on two local ranks (ib_send_bw -c UD / ib_send_lat -c UD):
/// the UD header, one row per size up to the MTU, what was lost noted
/// under the table and in run.json, beside perftest's own UD run.
#[test]
fn pair_ud_like_ib_send_bw() {
    if !has_rdma() {
        return;
    }
    let bench = Bench::new();
    // -e: a UD sender is not held back by its receiver, and two busy-polling
    // ends starve the VM's rxe (and the ranks' samplers) of its two vCPUs.
    let line = ["pair", "localhost", "localhost", "send", "-c", "UD", "-s", "1K,4K", "-D", "1", "-e", "--no-progress"];
    let out = bench.run(&line);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{line:?}:\n{stdout}\n{}", text(&out.stderr));
    assert!(stdout.contains("Send BW Test") && stdout.contains(" Connection type : UD\n"), "{stdout}");
    let rows = perftest_rows(&stdout, " #bytes     #iterations    BW peak[MB/sec]");
    assert_eq!(rows.iter().map(|r| r[0]).collect::<Vec<_>>(), [1024.0, 4096.0], "{stdout}");
    assert!(rows.iter().all(|r| r[1] > 0.0 && r[3] > 0.0 && r[4] > 0.0), "{stdout}");
    for size in [1024, 4096] {
        assert!(stdout.contains(&format!("{size} B, 127.0.0.1 -> 127.0.0.2: UD: ")), "{stdout}");
    }
    let run = read_json(&bench.result_dir().join("run.json"));
    for p in run["phases"].as_array().unwrap() {
        let flow = &p["flows"][0];
        let d = &flow["datagrams"];
        let (sent, received) = (d["sent"].as_u64().unwrap(), d["received"].as_u64().unwrap());
        assert!(sent > 0 && received > 0, "{flow}");
        // The sender counts in steps of cq_moderation (100) per QP: at each
        // edge of the window up to that many count at the receiver only; and
        // the two ranks' samplers read the window's edges apart, by up to
        // the phase's start skew at each edge (under emulation ~15 ms
        // usually: one run saw 10 707 received of 10 368 counted sent; one
        // right after the VM booted, 7 094 of 6 272), each edge worth the
        // sender's message rate times the skew.
        let skew_s = p["start_skew_us"].as_f64().unwrap() / 1e6;
        let edges = (2.0 * skew_s * flow["msgs_per_s"].as_f64().unwrap()).ceil() as u64;
        assert!(received <= sent + 2 * 100 + sent / 20 + edges, "skew {skew_s} s: {flow}");
        assert_eq!(flow["bytes"], flow["rx_bytes"], "UD counts what arrived: {flow}");
    }
    println!("{stdout}");
    let dev = used_device(&run);
    if let Some(reference) = ib_send_bw_ud(&dev, 4096, None) {
        println!("4096 B over UD: fabricbench {:.2} MB/sec, ib_send_bw -c UD {reference:.2} MB/sec", rows[1][3]);
    }

    let out = bench.run(&[
        "pair",
        "localhost",
        "localhost",
        "send_lat",
        "-c",
        "UD",
        "-D",
        "0.5",
        "--no-progress",
        "--no-save",
    ]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "send_lat -c UD:\n{stdout}\n{}", text(&out.stderr));
    assert!(stdout.contains("Send Latency Test") && stdout.contains(" Connection type : UD\n"), "{stdout}");
    let r = &perftest_rows(&stdout, " #bytes #iterations    t_min[usec]")[0];
    assert!(r[0] == 2.0 && r[1] > 0.0 && r[2] > 0.0 && r[2] <= r[4] && r[4] <= r[3], "{stdout}");
}

/// Across two VMs (FB_RDMA_PEER_HOST): a scenario's `[group.rdma]
/// connection = "UD"` send group from here to the peer, the datagrams
/// counted at both ends, beside ib_send_bw -c UD between the same hosts.
#[test]
fn ud_send_across_two_hosts() {
    let bench = Bench::new();
    let Some((peer, hosts)) = peer_hostfile(&bench) else { return };
    let scenario = bench.write(
        "ud.toml",
        "[run]\nduration = \"2s\"\nwarmup = \"500ms\"\ninterval = \"500ms\"\n[[group]]\nname = \"ud\"\n\
         pattern = \"explicit\"\ntransport = \"rdma\"\nop = \"send\"\nflows = [[1, 0]]\nmessage_size = \"4K\"\n\
         [group.rdma]\nconnection = \"UD\"\nqps = 2\n",
    );
    let run = run_json(&bench, &scenario, &hosts, &["--connect-timeout", "60s"]);
    let flow = &run["phases"][0]["flows"][0];
    let d = &flow["datagrams"];
    let (sent, received) = (d["sent"].as_u64().unwrap(), d["received"].as_u64().unwrap());
    // Up to cq_moderation (100) per QP (2) at each edge count at the receiver
    // only, and the two hosts' samplers read the window's edges apart by up
    // to the phase's start skew, each edge worth its rate times the skew (as
    // in pair_ud_like_ib_send_bw; one run here: 19 231 received of 18 804).
    let skew_s = f(&run["phases"][0]["start_skew_us"]) / 1e6;
    let edges = (2.0 * skew_s * f(&flow["msgs_per_s"])).ceil() as u64;
    assert!(sent > 0 && received > 0 && received <= sent + 2 * 100 * 2 + edges, "skew {skew_s} s: {flow}");
    assert_eq!(flow["bytes"].as_u64(), Some(flow["rx_bytes"].as_u64().unwrap()), "{flow}");
    assert!(f(&flow["gbps"]) > 0.0, "{flow}");
    let lost = f(&d["lost_ratio"]);
    assert!((0.0..=1.0).contains(&lost), "{flow}");
    println!(
        "UD 4 KiB across hosts: {} Gb/s, {received} of {sent} received ({:.2} % lost)",
        f(&flow["gbps"]),
        lost * 100.0
    );
    let dev = used_device(&run);
    if let Some(reference) = ib_send_bw_ud(&dev, 4096, Some(&peer)) {
        let ours = f(&flow["gbps"]) * 1e9 / 8.0 / f64::from(1 << 20);
        println!("4096 B over UD across hosts: fabricbench {ours:.2} MB/sec, ib_send_bw -c UD {reference:.2} MB/sec");
    }
}

/// A shipped scenario cut to a few seconds: 2 s phases (Soft-RoCE under
/// emulation on a loaded host has stalled whole 1 s windows) and the first
/// two values of each sweep axis (`values` replaces the first axis' when given).
/// Runs it on local ranks; `None` (skipped) without an RDMA device.
fn run_shortened(name: &str, values: Option<Vec<Value>>) -> Option<serde_json::Value> {
    if !has_rdma() {
        return None;
    }
    let bench = Bench::new();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let (mut s, _) = fabricbench::scenario::read(&root.join("scenarios").join(name)).unwrap();
    s.run.duration = Duration::from_secs(2);
    s.run.warmup = Duration::from_millis(500);
    s.run.interval = Duration::from_secs(1);
    // Soft-RoCE under emulation drops packets of deep send queues and
    // recovers only by retransmit timeouts (its completer_retry_err counter),
    // which can idle a whole short window: keep 16 WRs in flight per QP.
    for g in s.groups.iter_mut().filter(|g| g.transport == Transport::Rdma) {
        g.rdma.get_or_insert_with(Default::default).tx_depth = 16;
    }
    let sweep = s.sweep.as_mut().expect("a sweep");
    sweep.values = values.unwrap_or_else(|| sweep.values[..2].to_vec());
    if let Some(by) = &mut sweep.by {
        by.values.truncate(2);
    }
    let scenario = bench.write(name, &toml::to_string(&s).unwrap());
    Some(run_json(&bench, &scenario, &root.join("hostfiles/local"), &[]))
}

/// The sweep's points, each checked: one phase each, complete, every cell
/// with a value > 0 and a ratio > 0 (and ≤ `max_ratio`).
fn checked_points(run: &serde_json::Value, points: usize, max_ratio: f64) -> Vec<serde_json::Value> {
    let phases = run["phases"].as_array().unwrap();
    assert_eq!(phases.len(), points, "one phase per point");
    assert!(phases.iter().all(|p| p["complete"] == true));
    let rows = run["sweep"]["points"].as_array().unwrap().clone();
    assert_eq!(rows.len(), points, "one row per point");
    for row in &rows {
        let phase = &phases[row["phase"].as_u64().unwrap() as usize];
        for cell in row["groups"].as_array().unwrap() {
            assert!(cell["value"].as_f64().unwrap() > 0.0, "{row}\n{}", phase["flows"]);
            let ratio = cell["ratio"].as_f64().unwrap_or_else(|| panic!("no impact ratio: {row}"));
            assert!(ratio > 0.0 && ratio <= max_ratio, "{row}");
            assert!(cell["max_worker_cpu_pct"].as_f64().unwrap() > 0.0, "CPU measured: {row}");
        }
    }
    rows
}

#[test]
fn tcp_vs_rdma_under_receiver_stress() {
    // One burner: a VM's few vCPUs under emulation cannot spare four.
    let Some(run) = run_shortened("tcp-vs-rdma-stress.toml", Some(vec![Value::Number(0), Value::Number(1)])) else {
        return;
    };
    let points = run["sweep"]["points"].as_array().unwrap();
    matrix_shows_gbps_of_both_transports(&run, points);
    let rows = checked_points(&run, 4, 1.5);
    assert_eq!(run["sweep"]["by_parameter"], "transport");
    let cells: Vec<(&str, &str, bool)> = rows
        .iter()
        .map(|r| (r["value"].as_str().unwrap(), r["by_value"].as_str().unwrap(), r["groups"][0]["rdma"] == true))
        .collect();
    assert_eq!(cells, [("0", "tcp", false), ("0", "rdma", true), ("1", "tcp", false), ("1", "rdma", true)]);
    // Each transport is compared with itself unstressed.
    assert!(rows[..2].iter().all(|r| r["baseline"] == true && r["groups"][0]["ratio"] == 1.0));
    for phase in &run["phases"].as_array().unwrap()[2..] {
        let rank0 = &phase["ranks"][0];
        let stress = &rank0["stress"];
        let share = 100.0 / rank0["cpu"]["host_cores"].as_f64().unwrap();
        assert!(stress["measured_load_pct"].as_f64().unwrap() >= share - 10.0, "{stress}");
    }
    // Every point moved data (checked_points: value > 0); single senders of
    // three may starve for a 1 s window on two emulated vCPUs with a burner.
}

/// The summary's stress × transport matrix: Gb/s in the TCP and the RDMA
/// column alike (TCP has no message rate), each ratio of the Gb/s beside it.
fn matrix_shows_gbps_of_both_transports(run: &serde_json::Value, rows: &[serde_json::Value]) {
    let bench = Bench::new();
    let dir = bench.results().join("matrix");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("run.json"), run.to_string()).unwrap();
    let out = bench.run(&["report", dir.to_str().unwrap()]);
    let summary = text(&out.stdout);
    assert!(out.status.success(), "{summary}{}", text(&out.stderr));
    let at = summary.find("incast: Gb/s by stress.threads × transport").unwrap_or_else(|| panic!("{summary}"));
    let matrix = &summary[at..];
    let value = |point: &serde_json::Value| point["groups"][0]["value"].as_f64().unwrap();
    // rows: (0, tcp), (0, rdma), (1, tcp), (1, rdma); each column's baseline is its stress = 0 point.
    for (points, stressed) in rows.chunks(2).zip(["0", "1"]) {
        let line = matrix.lines().find(|l| l.trim_start_matches(['│', ' ']).starts_with(stressed)).unwrap();
        let cells: Vec<&str> = line.split('┆').skip(1).map(|c| c.trim_matches(['│', ' '])).collect();
        assert_eq!(cells.len(), 2, "{line}");
        for (column, (cell, point)) in cells.iter().zip(points).enumerate() {
            let ratio = value(point) / value(&rows[column]);
            let shown = format!("{} Gb/s ({ratio:.2}×)", fabricbench::units::number(value(point), 3));
            assert_eq!(*cell, shown, "{matrix}");
        }
    }
}

#[test]
fn qps_by_post_list_message_rate_matrix() {
    let Some(run) = run_shortened("qps-post-list.toml", None) else { return };
    // More QPs may well beat one by more than 1.5×: only sanity here.
    let rows = checked_points(&run, 4, 100.0);
    let cells: Vec<(&str, &str)> =
        rows.iter().map(|r| (r["value"].as_str().unwrap(), r["by_value"].as_str().unwrap())).collect();
    assert_eq!(cells, [("1", "1"), ("1", "4"), ("2", "1"), ("2", "4")]);
    for (row, phase) in rows.iter().zip(run["phases"].as_array().unwrap()) {
        let mpps = row["groups"][0]["mpps"].as_f64().unwrap();
        let flow = &phase["flows"][0];
        assert!(mpps > 0.0 && (mpps - flow["msgs_per_s"].as_f64().unwrap() / 1e6).abs() < 1e-9, "{row}");
        assert_eq!(flow["message_size"], 64);
    }
}

/// Seed 001's question: during ib_write_bw one core of the initiator is
/// pegged and none of the receiver's. The writer's data-path thread polls
/// its completion queue without pause: ≈ a thread whatever the rate; the
/// target's thread only waits (a write never involves the target's CPU).
/// On one Soft-RoCE device (local ranks in one VM) the software NIC's work
/// — the target's side and the completion too — runs inside the writer's
/// own post (system time), so the writer never waits and event mode costs
/// the same here: the difference event mode makes is shown across two
/// hosts (`busy_poll_vs_event_across_two_hosts`).
#[test]
fn busy_poll_vs_event_mode_cpu() {
    let Some(run) = run_shortened("busy-vs-event.toml", None) else { return };
    // On Soft-RoCE the NIC is the kernel: a spinning writer takes the CPU
    // the NIC needs, and event mode can be several times faster.
    let rows = checked_points(&run, 2, 10.0);
    assert_eq!(rows[0]["value"], "busy");
    assert_eq!(rows[1]["value"], "event");
    for (phase, row) in run["phases"].as_array().unwrap().iter().zip(&rows) {
        assert!(phase["aggregate_gbps"].as_f64().unwrap() > 0.0);
        let (target, writer) = (&phase["ranks"][0]["cpu"], &phase["ranks"][1]["cpu"]);
        println!("{}: writer {writer}\n  target {target}", row["value"]);
        assert_initiator_pegged_target_idle(writer, target);
        // The sweep's column is the worker's, burners aside: the writer's.
        assert!(f(&row["groups"][0]["max_worker_cpu_pct"]) >= f(&writer["data"]["pct"]), "{row}");
    }
}

fn f(v: &serde_json::Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// The writer's one data-path thread near a whole thread (a VM's vCPUs also
/// run the NIC's softirqs and the control plane), the target's idle: under
/// 10 % of a thread, as the softirqs of rxe's receive path are charged to
/// whichever thread they interrupt (one CI run saw 5.05 %, 3.5 % of it
/// system time), still a seventh of the writer's floor.
fn assert_initiator_pegged_target_idle(writer: &serde_json::Value, target: &serde_json::Value) {
    assert_eq!((writer["data"]["threads"].as_u64(), target["data"]["threads"].as_u64()), (Some(1), Some(1)));
    let pegged = f(&writer["data"]["busiest_thread_pct"]);
    assert!((70.0..=103.0).contains(&pegged), "the writer's thread is pegged: {writer}");
    assert!(f(&target["data"]["pct"]) < 10.0, "the target's thread does nothing: {target}");
}

/// The two-VM run's peer host and a hostfile of it (rank 0) and this host
/// (rank 1); `None` (said) outside that run.
fn peer_hostfile(bench: &Bench) -> Option<(String, std::path::PathBuf)> {
    let Ok(peer) = std::env::var("FB_RDMA_PEER_HOST") else {
        eprintln!("SKIP: FB_RDMA_PEER_HOST is not set (only the two-VM run has a peer host)");
        return None;
    };
    let here = std::env::var("SOFTROCE_HOSTS").ok().and_then(|h| h.split_whitespace().next().map(str::to_string));
    let hosts = bench.write("hosts", &format!("{peer}\n{}\n", here.unwrap_or_else(|| "localhost".into())));
    Some((peer, hosts))
}

/// Across two VMs (scripts/test-rdma's two-VM run sets FB_RDMA_PEER_HOST):
/// the target on the peer, the writer here, one 4 KiB write in flight, so
/// the writer waits a whole round trip for each completion: busy polling
/// spins through the wait (user time, ≈ a thread), event mode sleeps in it
/// (much lower, its spin gone), while the target's thread stays idle.
#[test]
fn busy_poll_vs_event_across_two_hosts() {
    let bench = Bench::new();
    let Some((_, hosts)) = peer_hostfile(&bench) else { return };
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let (mut s, _) = fabricbench::scenario::read(&root.join("scenarios/busy-vs-event.toml")).unwrap();
    s.run.duration = Duration::from_secs(3);
    s.run.warmup = Duration::from_millis(500);
    s.run.interval = Duration::from_secs(1);
    s.groups[0].message_size = Some(fabricbench::units::ByteSize(4096));
    s.groups[0].rdma.get_or_insert_with(Default::default).tx_depth = 1;
    let scenario = bench.write("busy-vs-event.toml", &toml::to_string(&s).unwrap());
    let run = run_json(&bench, &scenario, &hosts, &["--connect-timeout", "60s"]);
    let phases = run["phases"].as_array().unwrap();
    assert_eq!(phases.len(), 2);
    let writer = |p: usize| phases[p]["ranks"][1]["cpu"].clone();
    for p in phases {
        println!(
            "{}: {} Gb/s, writer {}\n  target {}",
            p["name"], p["aggregate_gbps"], p["ranks"][1]["cpu"], p["ranks"][0]["cpu"]
        );
        assert!(p["aggregate_gbps"].as_f64().unwrap() > 0.0, "{p}");
    }
    let (busy, event) = (writer(0), writer(1));
    assert_initiator_pegged_target_idle(&busy, &phases[0]["ranks"][0]["cpu"]);
    assert!(f(&phases[1]["ranks"][0]["cpu"]["data"]["pct"]) < 5.0, "{}", phases[1]["ranks"][0]);
    // Event mode's own work per message (post, arm, epoll, read the event:
    // system calls, each dear under emulation) is over half of rxe's ~1 ms
    // round trip here: 56-58 % of a vCPU against busy polling's 93 %, its
    // user time 25-29 % against 64-72 %.
    let (b, e) = (f(&busy["data"]["busiest_thread_pct"]), f(&event["data"]["busiest_thread_pct"]));
    assert!(e <= 0.7 * b, "event mode sleeps through the wait: {e:.1} % against busy polling's {b:.1} %");
    let (bu, eu) = (f(&busy["data"]["user_pct"]), f(&event["data"]["user_pct"]));
    assert!(eu * 2.0 <= bu, "the spin on the completion queue is user time: {eu:.1} % against {bu:.1} %");
}

/// Every round trip of a 10 s RDMA latency window is a sample (the loop once
/// kept the first 2^20 and cut the window by count): the histogram's count
/// equals the round trips the initiator's counter moved by between the
/// sampler's reads at the window's edges, up to those the reads' wake-up
/// slack lets in or out, and the target's own count of the messages it
/// answered (another process, its clock offset by up to the rank's rtt).
#[test]
fn rdma_latency_keeps_every_round_trip_of_its_window() {
    if !has_rdma() {
        return;
    }
    let bench = Bench::new();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for op in ["write", "send"] {
        let scenario = bench.write(
            "lat.toml",
            &format!(
                "[run]\nduration = \"10s\"\nwarmup = \"500ms\"\ninterval = \"1s\"\n[[group]]\nname = \"lat\"\n\
                 pattern = \"explicit\"\ntransport = \"rdma\"\nmode = \"latency\"\nop = \"{op}\"\nflows = [[1, 0]]\nmessage_size = \"64\"\n"
            ),
        );
        let run = run_json(&bench, &scenario, &root.join("hostfiles/local"), &[]);
        let phase = &run["phases"][0];
        let flow = &phase["flows"][0];
        let samples = flow["latency"]["samples"].as_u64().unwrap_or_else(|| panic!("{op}: no latency: {flow}"));
        let size = flow["message_size"].as_u64().unwrap();
        let (sent, answered) = (flow["tx_bytes"].as_u64().unwrap() / size, flow["rx_bytes"].as_u64().unwrap() / size);
        let rate = flow["msgs_per_s"].as_f64().unwrap();
        let rtt_s =
            phase["ranks"].as_array().unwrap().iter().map(|r| r["rtt_us"].as_f64().unwrap()).fold(0.0, f64::max) / 1e6;
        println!("{op}: {samples} samples, {sent} round trips counted, {answered} answered, {rate:.0}/s");
        // The sampler's reads wake late, in an emulated VM with two threads
        // spinning on its two vCPUs by up to ~75 ms: 100 ms of round trips.
        // (tests/it/rdma.rs checks the count exactly, without a sampler.)
        let (slack, across) = (2.0 + rate * 0.1, 2.0 + rate * (0.1 + rtt_s));
        assert!((samples as f64 - sent as f64).abs() <= slack, "{op}: {samples} samples of {sent} round trips");
        assert!((samples as f64 - answered as f64).abs() <= across, "{op}: {samples} samples, {answered} answered");
        assert!(samples as f64 >= rate * 9.0, "{op}: the whole 10 s window, not its start: {flow}");
    }
}

/// Names of the devices with an ACTIVE port 1, sorted.
pub(crate) fn active_devices() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir("/sys/class/infiniband")
        .map(|d| d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    names.retain(|d| {
        std::fs::read_to_string(format!("/sys/class/infiniband/{d}/ports/1/state")).is_ok_and(|s| s.contains("ACTIVE"))
    });
    names.sort();
    names
}

/// Two devices for the multi-rail test: inside the project's throwaway VM
/// (SOFTROCE_VM_INDEX set), which has only rxe0, a second Soft-RoCE device
/// goes on a dummy interface; elsewhere the host's own devices.
pub(crate) fn two_devices() -> Vec<String> {
    if active_devices().len() < 2 && std::env::var("SOFTROCE_VM_INDEX").is_ok() {
        // eth0's MTU (9000: RoCE MTU 4096), so rxe1 takes what rxe0 takes.
        let setup = "ip link add fbrail0 type dummy && ip link set fbrail0 mtu 9000 \
                     && ip addr add 10.88.0.1/24 dev fbrail0 \
                     && ip link set fbrail0 up && rdma link add rxe1 type rxe netdev fbrail0";
        let ok = std::process::Command::new("sh").args(["-c", setup]).status().is_ok_and(|s| s.success());
        assert!(ok, "could not add rxe1 on a dummy interface");
        for _ in 0..100 {
            if active_devices().len() >= 2 {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    active_devices().into_iter().take(2).collect()
}

/// Packets a device sent (rxe's hw counter, else the IB port counter).
pub(crate) fn sent_packets(device: &str) -> u64 {
    let port = format!("/sys/class/infiniband/{device}/ports/1");
    [format!("{port}/hw_counters/sent_pkts"), format!("{port}/counters/port_xmit_packets")]
        .iter()
        .find_map(|p| std::fs::read_to_string(p).ok()?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no packet counter under {port}"))
}

/// A 2-rail flow's per-rail rows (`lanes`): one per device in rail order,
/// summing to the flow's bytes and Gb/s; each rail's device sent, in the
/// same window, packets enough to carry that rail's bytes (Soft-RoCE counts
/// packets, not bytes: a packet holds at most the port's MTU).
fn rails_add_up(run: &serde_json::Value, devices: &[String]) {
    let phase = &run["phases"][0];
    let flow = &phase["flows"][0];
    let lanes = flow["lanes"].as_array().unwrap_or_else(|| panic!("a 2-rail flow has lanes: {flow}"));
    let named: Vec<&str> = lanes.iter().map(|l| l["device"].as_str().unwrap()).collect();
    assert_eq!(named, devices, "{flow}");
    let bytes: Vec<u64> = lanes.iter().map(|l| l["bytes"].as_u64().unwrap()).collect();
    assert_eq!(bytes.iter().sum::<u64>(), flow["bytes"].as_u64().unwrap(), "{flow}");
    let gbps: f64 = lanes.iter().map(|l| l["gbps"].as_f64().unwrap()).sum();
    let flow_gbps = flow["gbps"].as_f64().unwrap();
    assert!((gbps - flow_gbps).abs() <= 1e-9 * flow_gbps, "rails {gbps} Gb/s vs the flow's {flow_gbps}");
    let sender = &phase["ranks"][1];
    for (device, rail_bytes) in devices.iter().zip(&bytes) {
        assert!(*rail_bytes > 0, "rail on {device} moved nothing: {flow}");
        let counters = sender["rdma_counters"].as_array().unwrap().iter().find(|c| c["device"] == device.as_str());
        let counters = counters.unwrap_or_else(|| panic!("no counters of {device}: {sender}"));
        let packets = ["hw_counters/sent_pkts", "counters/port_xmit_packets"]
            .iter()
            .find_map(|k| counters["counters"][k].as_u64())
            .unwrap_or_else(|| panic!("no packet counter moved on {device}: {counters}"));
        // No RDMA packet carries more than 4096 B (the largest IB and RoCE
        // MTU). Not the probed MTU: a short run's probe can come too late
        // to be in run.json (noticed, not fixed).
        let mtu = 4096;
        assert!(packets * mtu >= *rail_bytes, "{device}: {packets} packets of ≤ {mtu} B cannot carry {rail_bytes} B");
    }
}

/// Multi-rail: one flow's 4 QPs over two devices, two rails, both carry
/// traffic (the devices' own counters), the flow counts both; the same with
/// the devices from the hostfile's `devices=`; an unknown
/// device fails naming the rank's host, the name and what exists.
#[test]
fn multi_rail_spreads_qps_over_devices() {
    if !has_rdma() {
        return;
    }
    let devices = two_devices();
    if devices.len() < 2 {
        eprintln!("SKIP: multi-rail needs two ACTIVE RDMA devices, found {devices:?}");
        return;
    }
    let bench = Bench::new();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let scenario = |list: &str| {
        format!(
            "[run]\nduration = \"2s\"\nwarmup = \"500ms\"\ninterval = \"1s\"\n[[group]]\nname = \"rails\"\n\
             pattern = \"explicit\"\ntransport = \"rdma\"\nflows = [[1, 0]]\nmessage_size = \"16K\"\n\
             [group.rdma]\nqps = 4\ntx_depth = 16\ndevices = {list}\n"
        )
    };
    let before: Vec<u64> = devices.iter().map(|d| sent_packets(d)).collect();
    let file = bench.write("rails.toml", &scenario(&format!("[\"{}\", \"{}\"]", devices[0], devices[1])));
    let run = run_json(&bench, &file, &root.join("hostfiles/local"), &[]);
    let flow = &run["phases"][0]["flows"][0];
    assert!(flow["bytes"].as_u64().unwrap() > 0, "{flow}");
    for (device, before) in devices.iter().zip(before) {
        assert!(sent_packets(device) > before, "rail on {device} carried nothing");
    }
    rails_add_up(&run, &devices);

    // The same rails from the hostfile's `devices=`, for a group that names none.
    let list = devices.join(",");
    let hosts = bench.write("hosts", &format!("127.0.0.1 slots=1 devices={list}\n127.0.0.2 slots=1 devices={list}\n"));
    let before: Vec<u64> = devices.iter().map(|d| sent_packets(d)).collect();
    let run = run_json(&bench, &bench.write("host-rails.toml", &scenario("[]")), &hosts, &[]);
    assert!(run["phases"][0]["flows"][0]["bytes"].as_u64().unwrap() > 0, "{run}");
    for (device, before) in devices.iter().zip(before) {
        assert!(sent_packets(device) > before, "hostfile rail on {device} carried nothing");
    }
    rails_add_up(&run, &devices);

    let file = bench.write("bad.toml", &scenario(&format!("[\"{}\", \"nosuch\"]", devices[0])));
    let hosts = root.join("hostfiles/local");
    let out = bench.run(&["run", file.to_str().unwrap(), "-H", hosts.to_str().unwrap(), "--no-save", "--quiet"]);
    assert!(!out.status.success());
    let err = common::text(&out.stderr);
    let named = format!("RDMA device \"nosuch\" not found (available: {}", devices.join(", "));
    assert!(err.contains("(127.0.0.") && err.contains(&named), "{err}");
}

/// `[congestion]` over verbs: an RDMA latency canary 1 → 0 measured alone
/// and beside an RDMA write incast 2, 3 → 0 on the same device. Soft-RoCE
/// under emulation gives no rates to trust: this checks the shape (both
/// phases, the canary alone in the first, the congestors moving data in
/// the second, both impacts of the numbers beside them).
#[test]
fn rdma_congestion_impact_on_local_ranks() {
    if !has_rdma() {
        return;
    }
    let bench = Bench::new();
    let scenario = bench.write(
        "congestion.toml",
        "[run]\nduration = \"3s\"\nwarmup = \"1s\"\ninterval = \"500ms\"\n\n[congestion]\n\n\
         [[group]]\nname = \"canary\"\nrole = \"canary\"\npattern = \"explicit\"\nflows = [[1, 0]]\n\
         transport = \"rdma\"\nmode = \"latency\"\nmessage_size = 8\n\n\
         [[group]]\nname = \"incast\"\nrole = \"congestor\"\npattern = \"fan-in\"\nreceivers = 0\nsenders = \"2-3\"\n\
         transport = \"rdma\"\n",
    );
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let run = run_json(&bench, &scenario, &root.join("hostfiles/local"), &[]);
    let impact = &run["congestion"][0];
    assert_eq!(impact["group"], "canary", "{impact}");
    let phases = run["phases"].as_array().unwrap();
    assert_eq!(phases.len(), 2, "isolated, then congested");
    let (isolated, congested) = (&phases[0], &phases[1]);
    assert_eq!((impact["isolated_phase"].as_u64(), impact["congested_phase"].as_u64()), (Some(0), Some(1)));
    assert!(isolated["flows"].as_array().unwrap().iter().all(|f| f["group"] == "canary"), "{isolated}");
    let incast: Vec<_> = congested["flows"].as_array().unwrap().iter().filter(|f| f["group"] == "incast").collect();
    assert_eq!(incast.len(), 2);
    // Bytes in the window (not in every interval: an initiator counts writes at their
    // signalled completions, which Soft-RoCE under emulation delivers in bursts).
    assert!(incast.iter().all(|f| f["bytes"].as_u64().unwrap() > 0), "{incast:?}");
    let n = |side: &str, what: &str| impact[side][what].as_f64().unwrap_or_else(|| panic!("{side}.{what}: {impact}"));
    for side in ["isolated", "congested"] {
        assert!(n(side, "mean") > 0.0 && n(side, "mean") <= n(side, "tail"), "mean within the p99: {impact}");
    }
    let ratio = impact["impact_mean"].as_f64().unwrap();
    assert!((ratio - n("congested", "mean") / n("isolated", "mean")).abs() < 1e-9, "{impact}");
    let tail = impact["impact_tail"].as_f64().unwrap();
    assert!((tail - n("congested", "tail") / n("isolated", "tail")).abs() < 1e-9, "{impact}");
    // Order, not size: the canary shares its receiver (and rxe's CPU) with the incast.
    assert!(ratio > 1.0, "the incast slows the canary behind it: {impact}");
}

/// Data validation of write, read and send (flows 0, 1, 2, from rank 1 to
/// rank 0, all at once): clean, every flow checks and finds nothing bad;
/// with the test hook flipping byte 5 of one flow's source slots
/// (`FABRICBENCH_TEST_DV_FLIP`, tests/it/data_validation.rs), exactly that
/// flow fails the run (exit 1), named with the offset; and `pair read
/// --data_validation` checks its reads.
#[test]
fn rdma_data_validation_of_write_read_and_send() {
    if !has_rdma() {
        return;
    }
    let bench = Bench::new();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let groups: String = ["write", "read", "send"]
        .iter()
        .map(|op| {
            format!("[[group]]\nname = \"{op}\"\npattern = \"explicit\"\ntransport = \"rdma\"\nop = \"{op}\"\nflows = [[1, 0]]\nmessage_size = \"4K\"\nvalidate = true\n")
        })
        .collect();
    let text_of = format!("[run]\nduration = \"1s\"\nwarmup = \"200ms\"\ninterval = \"500ms\"\n{groups}");
    let scenario = bench.write("dv.toml", &text_of);
    let hosts = root.join("hostfiles/local");
    for flipped in [None, Some(0), Some(1), Some(2)] {
        let args =
            ["run", scenario.to_str().unwrap(), "-H", hosts.to_str().unwrap(), "--export-json", "-", "--no-save"];
        let mut cmd = bench.command(&args);
        if let Some(flow) = flipped {
            cmd.env("FABRICBENCH_TEST_DV_FLIP", format!("{flow}:5"));
        }
        let out = cmd.output().unwrap();
        let stderr = text(&out.stderr);
        let run: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stdout is one JSON document");
        // Clean: 0, or 4 where the loaded emulation made the window short
        // (degraded is about time, not data); a flipped byte fails the run.
        let codes: &[i32] = if flipped.is_some() { &[1] } else { &[0, 4] };
        assert!(out.status.code().is_some_and(|c| codes.contains(&c)), "{flipped:?}: {stderr}");
        let flows = run["phases"][0]["flows"].as_array();
        for f in flows.unwrap_or_else(|| panic!("{flipped:?}: no phase measured: {stderr}")) {
            let id = f["id"].as_u64().unwrap();
            assert!(f["dv_checked"].as_u64().unwrap() > 0, "{flipped:?}: {f}");
            if Some(id) == flipped {
                assert!(f["dv_errors"].as_u64().unwrap() > 0, "{f}");
                assert_eq!(f["dv_first_bad"]["offset"], 5, "{f}");
                assert!(stderr.contains(&format!("flow {id} (")) && stderr.contains("the first at byte 5"), "{stderr}");
            } else {
                assert_eq!(f["dv_errors"], 0, "{flipped:?}: {f}");
            }
        }
    }
    // perftest's spelling on pair, over RDMA.
    let pair = "pair localhost localhost read -s 4K -D 0.5 --data_validation --no-save --export-json -";
    let out = bench.run(&pair.split(' ').collect::<Vec<_>>());
    assert!(out.status.success(), "{}", text(&out.stderr));
    let run: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stdout is one JSON document");
    let flow = &run["phases"][0]["flows"][0];
    assert!(flow["dv_checked"].as_u64().unwrap() > 0 && flow["dv_errors"] == 0, "{flow}");
}

/// Many RDMA bandwidth flows on a few ranks: every flow's shards run as
/// lanes of its rank's engines (no more engines than the rank has cores,
/// not a thread per shard), every flow moves data, and the per-flow
/// accounting of both ends holds. Completion and accounting, not rates.
#[test]
fn rdma_bandwidth_flows_share_each_ranks_engines() {
    if !has_rdma() {
        return;
    }
    let bench = Bench::new();
    let ranks = 6;
    let hosts: String = (1..=ranks).map(|k| format!("127.0.0.{k}\n")).collect();
    let hosts = bench.write("hosts", &hosts);
    // Rank 0 receives 5 flows of 2 shards (QPs 2): 10 lanes.
    let scenario = "[run]\nduration = \"1s\"\nwarmup = \"200ms\"\ninterval = \"500ms\"\n[[group]]\nname = \"in\"\npattern = \"fan-in\"\ntransport = \"rdma\"\nop = \"send\"\nmessage_size = \"4K\"\n[group.rdma]\nqps = 2\nthreads = 2\n";
    let scenario = bench.write("many.toml", scenario);
    let cores = fabricbench::load::placement::allowed_cores().len() as u64;
    let ran = std::sync::atomic::AtomicBool::new(false);
    let (out, (most_users, seen)) = std::thread::scope(|scope| {
        let cqs = scope.spawn(|| most_qps_on_one_cq(&ran));
        let out = bench.run(&["run", scenario.to_str().unwrap(), "-H", hosts.to_str().unwrap(), "--quiet"]);
        ran.store(true, std::sync::atomic::Ordering::Relaxed);
        (out, cqs.join().expect("the CQ sampler"))
    });
    // Rank 0's 10 receiving shards (a QP each) poll at most one CQ per
    // core: some CQ has several QPs (a CQ per shard would have one each).
    assert!(most_users >= 10 / cores.max(1), "at most {most_users} QPs on one CQ on {cores} cores:\n{seen}");
    // 4: the emulated machine may start a rank's flows late (degraded is about time).
    assert!(matches!(out.status.code(), Some(0 | 4)), "stdout:\n{}\nstderr:\n{}", text(&out.stdout), text(&out.stderr));
    let run = read_json(&bench.result_dir().join("run.json"));
    let phase = &run["phases"][0];
    assert_eq!(phase["complete"], true, "{}", run["status"]);
    let flows = phase["flows"].as_array().unwrap();
    assert_eq!(flows.len(), ranks - 1);
    let mut receiver_lanes = 0;
    for f in flows {
        assert!(f["tx_bytes"].as_u64().unwrap() > 0 && f["rx_bytes"].as_u64().unwrap() > 0, "{f}");
        for end in ["sender", "receiver"] {
            let seats = f["engines"][end].as_array().unwrap_or_else(|| panic!("the {end}'s engines: {f}"));
            assert!(seats.iter().all(|s| s["engine"].as_u64().unwrap() < cores), "{end} on {cores} cores: {f}");
            let lanes: u64 = seats.iter().map(|s| s["lanes"].as_u64().unwrap()).sum();
            assert_eq!(lanes, 2, "two shards per flow end: {f}");
            if end == "receiver" {
                receiver_lanes += lanes;
            }
        }
    }
    assert_eq!(receiver_lanes, 2 * (ranks as u64 - 1));
    let rank0 = &phase["ranks"][0];
    let threads = rank0["cpu"]["data"]["threads"].as_u64().unwrap();
    assert!((1..=cores).contains(&threads), "rank 0: {threads} data-path threads for 10 shards on {cores} cores");
    assert_eq!(bench.leftovers(Duration::from_secs(2)), []);
}

/// The most QPs the kernel saw on one CQ (`rdma -j
/// resource show cq`, its `users`), sampled every 50 ms until `done`, and
/// the busiest listing seen.
fn most_qps_on_one_cq(done: &std::sync::atomic::AtomicBool) -> (u64, String) {
    let mut best = (0, String::new());
    while !done.load(std::sync::atomic::Ordering::Relaxed) {
        let out = std::process::Command::new("rdma").args(["-j", "resource", "show", "cq"]).output();
        let listing = out.map(|o| text(&o.stdout)).unwrap_or_default();
        let cqs: Vec<serde_json::Value> = serde_json::from_str(&listing).unwrap_or_default();
        // The VM runs nothing else on verbs (a CQ's `comm` is the thread
        // that made it, not always "fabricbench").
        let most = cqs.iter().filter_map(|cq| cq["users"].as_u64()).max().unwrap_or(0);
        if most > best.0 {
            best = (most, listing);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    best
}

/// A write pair of 256 KiB messages (a 256 KiB buffer at each end, above a
/// 64 KiB limit) under the locked-memory limit `soft:hard` (prlimit's
/// `--memlock`), its stdout and stderr; no process may be left. Root holds
/// CAP_IPC_LOCK, which lifts the limit, so the run is started without it
/// (`setpriv`); the workers inherit both. The window is 2 s: completions
/// come every 100 messages (25 MiB), a slow while on emulated rxe.
fn pair_under_memlock(limit: &str) -> (bool, String, String) {
    let bench = Bench::new();
    let line = ["pair", "localhost", "localhost", "write", "-s", "256K", "-D", "2", "--no-progress", "--no-save"];
    let out = std::process::Command::new("setpriv")
        .args(["--inh-caps=-ipc_lock", "--bounding-set=-ipc_lock", "prlimit"])
        .arg(format!("--memlock={limit}"))
        .arg(common::bin())
        .args(line)
        .env("FABRICBENCH_TEST_TAG", &bench.tag)
        .current_dir(bench.dir.path())
        .output()
        .expect("run setpriv");
    assert_eq!(bench.processes(), Vec::new(), "processes left");
    (out.status.success(), text(&out.stdout), text(&out.stderr))
}

/// A locked-memory limit too small for a flow's buffer: the run fails
/// naming the flow, the limit and how to raise it.
#[test]
fn a_low_memlock_limit_is_named_with_how_to_raise_it() {
    if !has_rdma() {
        return;
    }
    let (ok, stdout, stderr) = pair_under_memlock("65536:65536");
    let all = format!("{stdout}\n{stderr}");
    assert!(!ok, "{all}");
    assert!(all.contains(" of flow 0 0->1: registering its buffers on device"), "named once: {all}");
    assert!(all.contains("ibv_reg_mr(") && all.contains("RLIMIT_MEMLOCK is 64 KiB here, its hard limit too"), "{all}");
    assert!(all.contains("`ulimit -l unlimited`"), "{all}");
}

/// A soft limit below the hard one is no obstacle: every process raises it,
/// as `ulimit -l` may unprivileged.
#[test]
fn a_soft_memlock_limit_below_the_hard_one_is_raised() {
    if !has_rdma() {
        return;
    }
    let (ok, stdout, stderr) = pair_under_memlock("65536:unlimited");
    assert!(ok, "{stdout}\n{stderr}");
    assert!(stdout.contains("Gb/s"), "{stdout}");
}

/// A flow's `limit.unavailable`, as strings.
fn unavailable_of(flow: &serde_json::Value) -> Vec<String> {
    let listed = flow["limit"]["unavailable"].as_array().map_or(&[][..], |a| &a[..]);
    listed.iter().map(|v| v.as_str().unwrap().to_string()).collect()
}
