//! Many hosts over SSH on the test bed (network namespaces with real sshd):
//! the measured incast on a shaped link, `fabricbench hosts`, and faults.
//! Every test holds the machine's one bed for its duration.

use crate::common;

use std::io::Write;
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

use common::testbed::Bed;
use common::{read_json, text, Bench, FanIn};
use fabricbench::control::framing::frame;
use fabricbench::control::wire::{Hello, ToCoordinator, MAGIC, PROTOCOL_VERSION};

const HOSTS4: [&str; 4] = ["h1", "h2", "h3", "h4"];

fn fan_in(duration: &str) -> String {
    FanIn::new("bed-fan", duration).warmup("1s").message_size("128K").senders("1-3").text()
}

fn run_args<'a>(bed: &'a [String], scenario: &'a str, hostfile: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["run", scenario, "-H", hostfile];
    args.extend(bed.iter().map(String::as_str));
    args.extend_from_slice(extra);
    args
}

/// Waits until `host` runs its worker and traffic has flowed for a while.
fn wait_for_phase(host: &str, bed: &Bed) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while bed.workers(host).is_empty() {
        assert!(Instant::now() < deadline, "no worker on {host}");
        std::thread::sleep(Duration::from_millis(100));
    }
    // Past the warm-up and a couple of intervals.
    std::thread::sleep(Duration::from_secs(3));
}

/// Starts a 30 s fan-in over the bed, returning once `host`'s worker moves data.
fn start_long_fan_in(bed: &Bed, bench: &Bench, host: &str, extra: &[&str]) -> std::process::Child {
    let scenario = bench.write("fan.toml", &fan_in("30s"));
    let ssh = bed.ssh_args();
    let child = bench.spawn(&run_args(&ssh, scenario.to_str().unwrap(), bed.hostfile.to_str().unwrap(), extra));
    wait_for_phase(host, bed);
    child
}

#[test]
fn incast_on_a_shaped_receiver_matches_the_link() {
    let Some(bed) = Bed::up(4, &["--shape", "h1=200mbit/in"]) else { return };
    let bench = Bench::new();
    let scenario = bench.write("fan.toml", &fan_in("4s"));
    let ssh = bed.ssh_args();
    let args = run_args(
        &ssh,
        scenario.to_str().unwrap(),
        bed.hostfile.to_str().unwrap(),
        &["--export-json", "-", "--no-save", "--quiet"],
    );
    let out = bench.run(&args);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let run: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let phase = &run["phases"][0];
    let aggregate = phase["aggregate_gbps"].as_f64().unwrap();
    assert!((aggregate - 0.2).abs() <= 0.01, "aggregate {aggregate} Gb/s vs the 200 Mbit/s link");
    let receiver = &phase["receivers"][0];
    assert_eq!(receiver["senders"], 3);
    assert!(receiver["jain"].as_f64().unwrap() > 0.0);

    // The receiver's interface saw what the senders' applications counted as
    // arrived (plus headers, less than 5 % at this MTU).
    let app: u64 = phase["flows"].as_array().unwrap().iter().map(|f| f["rx_bytes"].as_u64().unwrap()).sum();
    let sent: u64 = phase["flows"].as_array().unwrap().iter().map(|f| f["tx_bytes"].as_u64().unwrap()).sum();
    let nic = &phase["ranks"][0]["netdevs"][0];
    assert_eq!(nic["iface"], "eth0");
    let rx = nic["rx_bytes"].as_u64().unwrap();
    assert!(rx >= app && (rx as f64) < app as f64 * 1.05, "eth0 rx {rx} vs application {app}");
    assert!((sent as f64 - app as f64).abs() < app as f64 * 0.05, "sent {sent} vs received {app}");
    assert!(bed.hosts_with_workers(&HOSTS4, Duration::from_secs(5)).is_empty());
}

#[test]
fn hosts_command_checks_every_host() {
    let Some(bed) = Bed::up(3, &[]) else { return };
    let bench = Bench::new();
    let config = bed.ssh_config.to_str().unwrap();
    let out = bench.run(&["hosts", "-H", bed.hostfile.to_str().unwrap(), "--ssh-config", config, "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let checks: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for (i, c) in checks.as_array().unwrap().iter().enumerate() {
        assert_eq!(c["host"], format!("h{}", i + 1));
        assert_eq!(c["version"], format!("fabricbench {}", env!("CARGO_PKG_VERSION")));
        // The bed's hosts have no RDMA: the probe ran there and found none.
        assert!(c["rdma"].is_null(), "{c}");
        // What the host is, from its own `fabricbench facts` (a namespace shares our kernel).
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
        assert_eq!(c["facts"]["kernel"], kernel.trim(), "{c}");
        assert!(c["facts"]["cores"].as_u64().unwrap() > 0, "{c}");
        // The locked-memory limit its sshd gives a session, as the workers get it.
        let memlock = &c["facts"]["locked_memory"];
        assert!(["unlimited", "cap_ipc_lock"].iter().any(|m| memlock == m) || memlock["bytes"].is_u64(), "{c}");
        // Read with the shell before fabricbench runs there, and it starts.
        assert_eq!(c["platform"]["machine"], std::env::consts::ARCH, "{c}");
        assert_eq!(c["platform"]["kernel"], kernel.trim(), "{c}");
        assert!(c["platform"]["glibc"].as_str().is_some_and(|g| g.starts_with("2.")), "{c}");
        assert_eq!(c["starts"], true, "{c}");
        // Same clock underneath: the offset is within the (possibly slow) round trip.
        let (offset, rtt) = (c["clock_offset_ms"].as_f64().unwrap(), c["rtt_ms"].as_f64().unwrap());
        assert!(offset.abs() <= rtt / 2.0 + 50.0, "{c}");
    }
    // A host whose sshd is gone fails, named, and the exit code says so: a check failed.
    let hosts = bench.write("hosts", "h1\nh2\nh3\nh9\n");
    let out = bench.run(&["hosts", "-H", hosts.to_str().unwrap(), "--ssh-config", config, "--connect-timeout", "2s"]);
    assert_eq!(out.status.code(), Some(3));
    let table = text(&out.stdout);
    assert!(table.lines().any(|l| l.contains("h9") && l.contains("NO") && l.contains("unreachable")), "{table}");
    assert!(text(&out.stderr).contains("1 of 4 host(s) failed"), "{}", text(&out.stderr));
}

#[test]
fn unreachable_host_is_named_and_nothing_is_left_running() {
    let Some(bed) = Bed::up(3, &[]) else { return };
    let bench = Bench::new();
    // h4 is not up: its name resolves through the bed's ssh_config to nothing that answers.
    let hosts = bench.write("hosts", "h1\nh2\nh3\nh4\n");
    let scenario = bench.write("fan.toml", &fan_in("3s"));
    let ssh = bed.ssh_args();
    let started = Instant::now();
    let args =
        run_args(&ssh, scenario.to_str().unwrap(), hosts.to_str().unwrap(), &["--connect-timeout", "2s", "--quiet"]);
    let out = bench.run(&args);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(err.contains("rank 3 on h4"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(20), "took {:?}", started.elapsed());
    assert_eq!(bed.hosts_with_workers(&["h1", "h2", "h3"], Duration::from_secs(8)), Vec::<String>::new());
}

#[test]
fn worker_killed_inside_its_host_ends_the_run() {
    let Some(bed) = Bed::up(4, &[]) else { return };
    let bench = Bench::new();
    let results = bench.results();
    let child = start_long_fan_in(&bed, &bench, "h3", &["--results", results.to_str().unwrap()]);
    let killed = Instant::now();
    assert!(bed.exec("h3", &["pkill", "-9", "-f", "fabricbench worker"]).status.success());
    let out = child.wait_with_output().unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(killed.elapsed() < Duration::from_secs(5), "took {:?}", killed.elapsed());
    assert!(err.contains("rank 2 (h3)"), "{err}");
    let run = read_json(&bench.result_dir().join("run.json"));
    assert_eq!(run["phases"][0]["complete"], false);
    assert!(run["phases"][0]["flows"][0]["bytes"].as_u64().unwrap() > 0);
    assert_eq!(bed.hosts_with_workers(&HOSTS4, Duration::from_secs(8)), Vec::<String>::new());
}

#[test]
fn link_cut_is_detected_by_heartbeat() {
    let Some(bed) = Bed::up(4, &[]) else { return };
    let bench = Bench::new();
    let child = start_long_fan_in(&bed, &bench, "h3", &["--no-save"]);
    let cut = Instant::now();
    assert!(bed.exec("h3", &["ip", "link", "set", "eth0", "down"]).status.success());
    let out = child.wait_with_output().unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("rank 2 (h3)") && err.contains("heartbeat"), "{err}");
    // Detection takes the 3 s silence limit, then the launcher waits for partial reports.
    assert!(cut.elapsed() < Duration::from_secs(20), "took {:?}", cut.elapsed());
    // The cut-off worker ends on its own when its coordinator lease expires.
    assert_eq!(bed.hosts_with_workers(&HOSTS4, Duration::from_secs(10)), Vec::<String>::new());
}

#[test]
fn ctrl_c_on_the_launcher_cleans_every_host() {
    let Some(bed) = Bed::up(4, &[]) else { return };
    let bench = Bench::new();
    let child = start_long_fan_in(&bed, &bench, "h4", &["--no-save"]);
    let sent = Instant::now();
    assert!(Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap().success());
    let out = child.wait_with_output().unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "128 + SIGINT: {err}");
    assert!(err.contains("stopped by SIGINT"), "{err}");
    assert!(sent.elapsed() < Duration::from_secs(10), "took {:?}", sent.elapsed());
    assert_eq!(bed.hosts_with_workers(&HOSTS4, Duration::from_secs(5)), Vec::<String>::new());
    assert!(bench.leftovers(Duration::from_secs(5)).is_empty(), "local ssh processes left");
}

#[test]
fn strangers_on_the_coordinator_port_do_not_disturb_the_run() {
    let Some(bed) = Bed::up(3, &[]) else { return };
    let bench = Bench::new();
    let scenario = bench.write(
        "fan.toml",
        "[run]\nduration = \"4s\"\nwarmup = \"500ms\"\ninterval = \"500ms\"\n[[group]]\nname = \"g\"\npattern = \"fan-in\"\n",
    );
    let ssh = bed.ssh_args();
    let args =
        run_args(&ssh, scenario.to_str().unwrap(), bed.hostfile.to_str().unwrap(), &["--port", "17777", "--no-save"]);
    let child = bench.spawn(&args);
    wait_for_phase("h1", &bed);
    let hello = |token: &str, version: u32| Hello {
        magic: MAGIC,
        token: token.into(),
        version,
        tool_version: "0.0.0".into(),
        job: 1,
        rank: 1,
        host: "intruder".into(),
        pid: 1,
    };
    let attempts: Vec<Vec<u8>> = vec![
        frame(&ToCoordinator::Hello(hello("guessed-token", PROTOCOL_VERSION))).unwrap(),
        b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
        u32::MAX.to_be_bytes().to_vec(),
        frame(&ToCoordinator::Hello(hello("guessed-token", PROTOCOL_VERSION - 1))).unwrap(),
    ];
    for bytes in &attempts {
        let mut s = TcpStream::connect_timeout(&"10.199.0.1:17777".parse().unwrap(), Duration::from_secs(2)).unwrap();
        s.write_all(bytes).unwrap();
        let _ = s.flush();
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = child.wait_with_output().unwrap();
    let (stdout, err) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{err}");
    assert!(stdout.contains("completed"), "{stdout}");
    // Every attempt came from this machine's one address: reported once.
    assert_eq!(err.matches("rejected").count(), 1, "{err}");
    assert!(err.contains("wrong job token from `intruder`"), "{err}");
    assert!(err.contains("later ones from its address are not shown"), "{err}");
}

#[test]
fn stage_copies_the_binary_where_it_is_missing() {
    let Some(bed) = Bed::up(2, &[]) else { return };
    let bench = Bench::new();
    let cache = std::path::Path::new("/root/.cache/fabricbench");
    let sum = |path: &std::path::Path| {
        let out = Command::new("sha256sum").arg(path).output().unwrap();
        text(&out.stdout).split_whitespace().next().unwrap_or_default().to_string()
    };
    let ours = sum(std::path::Path::new(common::bin()));
    let staged = cache.join(format!("fabricbench-{}-{}", env!("CARGO_PKG_VERSION"), &ours[..16]));
    let _ = std::fs::remove_file(&staged);
    // Builds staged before: one unused for 8 days goes, one of yesterday stays.
    let (stale, recent) = (cache.join("fabricbench-0.0.0-stale"), cache.join("fabricbench-0.0.0-recent"));
    for (path, age) in [(&stale, "8 days ago"), (&recent, "1 day ago")] {
        std::fs::create_dir_all(cache).unwrap();
        std::fs::write(path, "an old build").unwrap();
        assert!(Command::new("touch").args(["-d", age]).arg(path).status().unwrap().success());
    }
    let scenario = bench.write("pair.toml", "[run]\nduration = \"1s\"\nwarmup = \"0s\"\ninterval = \"500ms\"\n[[group]]\nname = \"p\"\npattern = \"pairwise\"\n");
    let ssh = bed.ssh_args();
    let args = run_args(&ssh, scenario.to_str().unwrap(), bed.hostfile.to_str().unwrap(), &["--stage", "--no-save"]);
    let out = bench.run(&args);
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("staged fabricbench to h"), "{err}");
    assert_eq!(sum(&staged), ours, "the staged copy is this binary");
    assert!(!stale.exists(), "a build unused for over 7 days is removed");
    assert!(recent.exists(), "a build used yesterday stays");
    std::fs::remove_file(&recent).unwrap();
    // Present and equal now: the next run copies nothing.
    let out = bench.run(&args);
    assert!(out.status.success());
    assert!(!text(&out.stderr).contains("staged fabricbench"), "{}", text(&out.stderr));
}

#[test]
fn tree_launch_reaches_every_host_and_stops_them_all() {
    let Some(bed) = Bed::up(8, &[]) else { return };
    let bench = Bench::new();
    let scenario = bench.write(
        "ring.toml",
        "[run]\nduration = \"1s\"\nwarmup = \"0s\"\ninterval = \"500ms\"\n[[group]]\nname = \"ring\"\npattern = \"ring\"\n",
    );
    let ssh = bed.ssh_args();
    let args = run_args(
        &ssh,
        scenario.to_str().unwrap(),
        bed.hostfile.to_str().unwrap(),
        &["--tree-radix", "2", "--no-save", "--export-json", "-"],
    );
    let out = bench.run(&args);
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    let run: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let flows = run["phases"][0]["flows"].as_array().unwrap();
    assert_eq!(flows.len(), 8);
    assert!(flows.iter().all(|f| f["rx_bytes"].as_u64().unwrap() > 0), "{flows:?}");
    // Who logged in where, from each sshd's log (the root side, .254, is the
    // launcher and `testbed up`'s own check): ranks 2-4 and 6-7 were started
    // from inside the bed, by their parents in the tree.
    let started_from_bed = |host: &str| {
        let log = bed.hostfile.parent().unwrap().join("run").join(host).join("sshd.log");
        let log = std::fs::read_to_string(&log).unwrap_or_default();
        let mut from: Vec<String> = log
            .lines()
            .filter_map(|l| l.split("Accepted publickey for root from ").nth(1))
            .filter_map(|rest| rest.split_whitespace().next().map(str::to_string))
            .filter(|addr| addr != "10.199.0.254")
            .collect();
        from.dedup();
        from
    };
    let expected: [(&str, &[&str]); 8] = [
        ("h1", &[]),
        ("h2", &[]),
        ("h6", &[]),
        ("h3", &["10.199.0.2"]),
        ("h5", &["10.199.0.2"]),
        ("h4", &["10.199.0.3"]),
        ("h7", &["10.199.0.6"]),
        ("h8", &["10.199.0.6"]),
    ];
    for (host, parents) in expected {
        assert_eq!(started_from_bed(host), parents, "who started {host}");
    }
    let hosts: Vec<String> = (1..=8).map(|i| format!("h{i}")).collect();
    let hosts: Vec<&str> = hosts.iter().map(String::as_str).collect();
    assert_eq!(bed.hosts_with_workers(&hosts, Duration::from_secs(8)), Vec::<String>::new());
    assert!(bench.leftovers(Duration::from_secs(5)).is_empty(), "{:?}", bench.processes());
}

#[test]
fn tree_launch_names_a_host_its_subtree_cannot_reach() {
    let Some(bed) = Bed::up(8, &[]) else { return };
    let bench = Bench::new();
    // With radix 2 over ranks 1-7 the launcher starts h2 (ranks 1-4) and h6;
    // h2 starts h3 (ranks 2-3) and h5, h3 starts h4, and h3 cannot reach h4.
    assert!(bed.exec("h4", &["ip", "link", "set", "eth0", "down"]).status.success());
    let scenario = bench.write("fan.toml", &fan_in("3s"));
    let ssh = bed.ssh_args();
    let started = Instant::now();
    let args = run_args(
        &ssh,
        scenario.to_str().unwrap(),
        bed.hostfile.to_str().unwrap(),
        &["--tree-radix", "2", "--connect-timeout", "2s", "--no-save"],
    );
    let out = bench.run(&args);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    // Rank 2 could not start its child: the run names it (as exited or as its
    // coordinator connection lost, whichever the launcher hears first).
    assert!(err.contains("rank 2 (h3)"), "the worker that could not start it is named: {err}");
    assert!(err.contains("cannot start the worker for rank 3 on h4"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(20), "took {:?}", started.elapsed());
    assert_eq!(
        bed.hosts_with_workers(&["h1", "h2", "h3", "h5", "h6", "h7", "h8"], Duration::from_secs(8)),
        Vec::<String>::new()
    );
}

/// Three 2 s phases over the bed, stopped by `signal` once one is journaled:
/// the finished phases are on disk and re-render, and nothing the run
/// started is left on the launcher's side (ssh clients, masters) or on any
/// host (workers, sshd sessions).
#[test]
fn a_stopped_launcher_keeps_its_phases_and_leaves_nothing_anywhere() {
    let Some(bed) = Bed::up(4, &[]) else { return };
    let three = FanIn::new("bed-three", "2s")
        .senders("1-3")
        .then("\n[sweep]\nparameter = \"message_size\"\nvalues = [\"32K\", \"64K\", \"128K\"]\n")
        .text();
    // Ctrl-C twice: the second shortens the grace, and still saves.
    for (signal, times, code) in
        [("-TERM", 1, Some(143)), ("-HUP", 1, Some(129)), ("-INT", 2, Some(130)), ("-KILL", 1, None)]
    {
        let bench = Bench::new();
        let scenario = bench.write("three.toml", &three);
        let results = bench.results();
        let ssh = bed.ssh_args();
        let extra = ["--no-progress", "--results", results.to_str().unwrap()];
        let child = bench.spawn(&run_args(&ssh, scenario.to_str().unwrap(), bed.hostfile.to_str().unwrap(), &extra));
        let deadline = Instant::now() + Duration::from_secs(60);
        let dir = loop {
            let dir =
                std::fs::read_dir(&results).ok().and_then(|mut d| d.next()).and_then(|e| e.ok()).map(|e| e.path());
            let journal = dir.as_ref().and_then(|d| std::fs::read_to_string(d.join("journal.jsonl")).ok());
            // A phase's own line, not an interval line of the phase under way.
            if journal.is_some_and(|j| j.lines().any(|l| l.starts_with("{\"phase\""))) {
                break dir.unwrap();
            }
            assert!(Instant::now() < deadline, "{signal}: no phase journaled in 60 s");
            std::thread::sleep(Duration::from_millis(100));
        };
        // What must be gone afterwards is there now.
        assert!(!bed.ssh_sessions("h2").is_empty() && !bed.workers("h2").is_empty(), "{signal}: no session on h2");
        for _ in 0..times {
            common::signal(child.id(), signal);
            std::thread::sleep(Duration::from_millis(100));
        }
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), code, "{signal}: {}", text(&out.stderr));
        // SIGKILL leaves the ssh masters to close themselves once idle (30 s).
        let within = if code.is_none() { Duration::from_secs(45) } else { Duration::from_secs(10) };
        assert_eq!(bench.leftovers(within), [], "{signal}: local processes left");
        assert_eq!(bed.hosts_with_workers(&HOSTS4, Duration::from_secs(10)), Vec::<String>::new(), "{signal}");
        for host in HOSTS4 {
            assert_eq!(bed.ssh_sessions(host), Vec::<String>::new(), "{signal}: sshd sessions left on {host}");
        }
        let out = bench.run(&["report", dir.to_str().unwrap(), "--quiet"]);
        assert!(out.status.success(), "{signal}: {}", text(&out.stderr));
        let run = read_json(&dir.join("run.json"));
        assert!(!run["phases"].as_array().unwrap().is_empty(), "{signal}: no phase kept");
        assert!(run["phases"][0]["aggregate_gbps"].as_f64().unwrap() > 0.0, "{signal}");
    }
}

/// The bed's own selftest as a two-level fabric: 4 hosts on 2 leaves, each
/// on its leaf bridge, each uplink up between its leaf and the spine, and
/// leaf1's uplink shaped to 200 Mbit/s carrying h1 -> h4 at that rate
/// (tbf's byte counter, within the selftest's 5 %).
#[test]
fn selftest_checks_the_leaves_and_a_shaped_uplink() {
    let Some(out) = Bed::selftest(&["--leaves", "1"]) else { return };
    assert!(!out.status.success(), "one leaf is no fabric");
    assert!(text(&out.stderr).contains("--leaves is 2..4"), "{}", text(&out.stderr));
    let Some(out) = Bed::selftest(&["--leaves", "2"]) else { return };
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stdout}{stderr}");
    for line in ["h1 on leaf1 (expected leaf1)", "h2 on leaf1", "h3 on leaf2", "h4 on leaf2 (expected leaf2)"] {
        assert!(stdout.contains(line), "{line}: {stdout}");
    }
    assert_eq!(stdout.matches("uplink: up-leaf").count(), 2, "{stdout}");
    let measured = stdout
        .lines()
        .find_map(|l| l.split_once("L2 rate through leaf1's uplink (tbf byte counter, 4 s window): "))
        .and_then(|(_, rest)| rest.split_whitespace().next()?.parse::<f64>().ok())
        .unwrap_or_else(|| panic!("no uplink rate: {stdout}"));
    assert!((190.0..=210.0).contains(&measured), "{measured} Mbit/s through a 200 Mbit/s uplink: {stdout}");
    assert!(stdout.ends_with("selftest: 1 passed, 0 failed\n"), "{stdout}");
}
