//! The real CLI on local ranks (127.0.0.x): real processes, real sockets.

use crate::common;

use std::time::{Duration, Instant};

use common::{fan_in, read_json, text, Bench, FanIn, LOCAL_HOSTS};

#[test]
fn four_rank_fan_in_end_to_end() {
    let _machine = common::busy_machine();
    let bench = Bench::new();
    let hosts = bench.write("hosts", LOCAL_HOSTS);
    let scenario = bench.write("fan.toml", &fan_in("2s"));
    let out = bench.run(&["run", scenario.to_str().unwrap(), "-H", hosts.to_str().unwrap()]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(stdout.contains("Receivers") && stdout.contains("Jain index"), "{stdout}");
    assert!(stderr.contains("ranks ready") || stderr.contains("ready, 4/4"), "{stderr}");

    let dir = bench.result_dir();
    let run = read_json(&dir.join("run.json"));
    assert_eq!(run["schema_version"], 3);
    assert_eq!(run["status"]["state"], "ok");
    // Every rank's own probe: devices, or why there are none (no RDMA here).
    let probes = run["probes"].as_array().unwrap();
    assert_eq!(probes.iter().map(|p| p["rank"].as_u64().unwrap()).collect::<Vec<_>>(), [0, 1, 2, 3], "{probes:?}");
    for p in probes {
        assert_eq!(p["error"].is_string(), p["devices"].as_array().unwrap().is_empty(), "{p}");
    }
    let phase = &run["phases"][0];
    assert_eq!(phase["complete"], true);
    let flows = phase["flows"].as_array().unwrap();
    assert_eq!(flows.len(), 3);
    let sum: f64 = flows.iter().map(|f| f["gbps"].as_f64().unwrap()).sum();
    let aggregate = phase["aggregate_gbps"].as_f64().unwrap();
    assert!(aggregate > 0.0);
    assert!((sum - aggregate).abs() < 1e-9 * aggregate, "sum {sum} vs aggregate {aggregate}");
    for f in flows {
        assert_eq!(f["dst"], 0);
        assert!(f["rx_bytes"].as_u64().unwrap() > 0, "{f}");
        assert_eq!(f["interval_gbps"].as_array().unwrap().len(), 4, "2 s in 500 ms intervals");
    }
    let window = phase["window_s"].as_f64().unwrap();
    // Boundaries are taken by sleeping threads: on a loaded 2-core machine one may wake late.
    assert!((window - 2.0).abs() < 0.2, "window {window}");
    let receiver = &phase["receivers"][0];
    assert_eq!(receiver["senders"], 3);
    let jain = receiver["jain"].as_f64().unwrap();
    assert!((1.0 / 3.0..=1.0).contains(&jain), "{jain}");

    // The kernel saw what the application counted (lo carries it all), less
    // what sat in the receive buffers as the window opened.
    let app_rx: u64 = flows.iter().map(|f| f["rx_bytes"].as_u64().unwrap()).sum();
    let rank0 = &phase["ranks"][0];
    assert_eq!(rank0["netdevs"][0]["iface"], "lo");
    let lo_rx = rank0["netdevs"][0]["rx_bytes"].as_u64().unwrap();
    let floor = app_rx.saturating_sub(common::receive_buffers(flows.len()));
    assert!(lo_rx >= floor, "lo rx {lo_rx} < application rx {app_rx} less the receive buffers");
    assert!(rank0["cpu"]["worker_pct"].as_f64().unwrap() > 0.0);
    assert!(rank0["cpu"]["host_pct"].as_f64().unwrap() > 0.0);

    // Every file is there and parses.
    let mut flows_csv = csv::Reader::from_path(dir.join("flows.csv")).unwrap();
    assert_eq!(flows_csv.headers().unwrap().iter().filter(|h| *h == "gbps").count(), 1);
    assert_eq!(flows_csv.records().count(), 3);
    assert_eq!(csv::Reader::from_path(dir.join("intervals.csv")).unwrap().records().count(), 4 * 4);
    assert_eq!(csv::Reader::from_path(dir.join("ranks.csv")).unwrap().records().count(), 4);
    let summary = std::fs::read_to_string(dir.join("summary.md")).unwrap();
    assert!(summary.contains("| rank | host | senders | aggregate Gb/s |"), "{summary}");

    assert_eq!(bench.leftovers(Duration::from_secs(2)), []);
}

#[test]
fn export_json_to_stdout_carries_only_json() {
    let _machine = common::busy_machine();
    let bench = Bench::new();
    let hosts = bench.write("hosts", "127.0.0.1\n127.0.0.2\n");
    let scenario = bench.write("pair.toml", "[run]\nduration = \"1s\"\nwarmup = \"0s\"\ninterval = \"500ms\"\n[[group]]\nname = \"p\"\npattern = \"pairwise\"\nstreams = 2\n");
    let out = bench.run(&[
        "run",
        scenario.to_str().unwrap(),
        "-H",
        hosts.to_str().unwrap(),
        "--export-json",
        "-",
        "--no-save",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let run: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stdout is exactly one JSON document");
    assert_eq!(run["scenario"]["run"]["name"], "pair");
    assert_eq!(run["phases"][0]["flows"][0]["streams"], 2);
    assert!(text(&out.stderr).contains("Flows"), "the summary moves to stderr");
    assert!(!bench.results().exists(), "--no-save writes no folder");
}

#[test]
fn bad_inputs_name_file_line_and_field() {
    let _machine = common::busy_machine();
    let bench = Bench::new();
    let hosts = bench.write("hosts", LOCAL_HOSTS);
    let scenario = bench.write("s.toml", &fan_in("1s").replace("senders = \"1-3\"", "senders = \"1-7\""));
    let out = bench.run(&["run", scenario.to_str().unwrap(), "-H", hosts.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.contains("s.toml:12: group \"incast\": field `senders`: rank 7 does not exist: the hostfile has 4 host(s), ranks 0-3"),
        "{err}"
    );

    let bad_hosts = bench.write("bad-hosts", "127.0.0.1\n127.0.0.1\n");
    let out = bench.run(&["run", scenario.to_str().unwrap(), "-H", bad_hosts.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("bad-hosts:2: host `127.0.0.1` is listed twice (first at line 1)"),
        "{}",
        text(&out.stderr)
    );
    assert!(!bench.results().exists());
}

#[test]
fn input_bounds_exit_2_naming_the_limit() {
    let bench = Bench::new();
    let hosts = bench.write("hosts", LOCAL_HOSTS);
    let scenario = bench.write("s.toml", &fan_in("1s"));
    let refused = |args: &[&str]| {
        let out = bench.run(args);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
        text(&out.stderr)
    };
    // Ten million hosts are counted, not expanded (68 s and 3.2 GB before).
    let huge = bench.write("huge", "node[1-10000000]\n");
    let err = refused(&["plan", scenario.to_str().unwrap(), "-H", huge.to_str().unwrap()]);
    assert!(err.contains("huge:1: `node[1-10000000]` names 10000000 hosts; a run takes at most 65536 hosts"), "{err}");
    let big = bench.write("big.toml", &fan_in("1s").replace("\"64K\"", "\"1T\""));
    let err = refused(&["plan", big.to_str().unwrap(), "-H", hosts.to_str().unwrap()]);
    assert!(
        err.contains(
            "big.toml:10: group \"incast\": field `message_size`: 1024G is too large: TCP messages are 1 B to 4 MiB"
        ),
        "{err}"
    );
    let s = scenario.to_str().unwrap();
    let err = refused(&["run", s, "-H", hosts.to_str().unwrap(), "--duration", "30days"]);
    assert!(err.contains("with --duration/--warmup, [run] duration: must be at most 7days"), "{err}");
    let err = refused(&["run", s, "-H", hosts.to_str().unwrap(), "--tree-radix", "1"]);
    assert!(err.contains("invalid value '1' for '--tree-radix <K>': 1 is not in 2..=65535"), "{err}");
    assert!(!bench.results().exists());
}

#[test]
fn killed_worker_ends_the_run_naming_its_rank() {
    let _machine = common::busy_machine();
    let bench = Bench::new();
    let hosts = bench.write("hosts", LOCAL_HOSTS);
    let scenario = bench.write("fan.toml", &fan_in("30s"));
    let child = bench.spawn(&["run", scenario.to_str().unwrap(), "-H", hosts.to_str().unwrap()]);

    // Wait until rank 2's worker runs and traffic has flowed for a while.
    let victim = bench.worker_pid(2, Duration::from_secs(20));
    std::thread::sleep(Duration::from_millis(2500));
    let killed_at = Instant::now();
    common::signal(victim, "-9");

    let out = child.wait_with_output().unwrap();
    let took = killed_at.elapsed();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(took < Duration::from_secs(8), "took {took:?}");
    assert!(err.contains("rank 2 (127.0.0.3)"), "{err}");

    // What was measured before the kill is kept.
    let run = read_json(&bench.result_dir().join("run.json"));
    assert_eq!(run["status"]["state"], "failed");
    assert!(run["status"]["error"].as_str().unwrap().contains("rank 2 (127.0.0.3)"));
    let phase = &run["phases"][0];
    assert_eq!(phase["complete"], false);
    assert!(phase["flows"][0]["bytes"].as_u64().unwrap() > 0, "{phase}");
    assert_eq!(phase["ranks"][2]["reported"], false);

    assert_eq!(bench.leftovers(Duration::from_secs(3)), []);
}

#[test]
fn latency_probe_beside_an_incast() {
    let _machine = common::busy_machine();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let scenario = root.join("scenarios/latency-under-incast.toml");
    let run = common::run_json(&Bench::new(), &scenario, &root.join("hostfiles/local"), &[]);
    let phase = &run["phases"][0];
    let probe = &phase["flows"][0];
    assert_eq!(probe["mode"], "latency");
    let l = &probe["latency"];
    let v = |k: &str| l[k].as_f64().unwrap();
    assert!(l["samples"].as_u64().unwrap() > 100, "{l}");
    assert!(v("min_us") > 0.0);
    assert!(v("min_us") <= v("typical_us") && v("typical_us") <= v("p99_us"), "{l}");
    assert!(v("p99_us") <= v("p999_us") && v("p999_us") <= v("max_us"), "{l}");
    // The probe is not a sender of the incast: it stays out of the receiver's fairness.
    assert_eq!(phase["receivers"][0]["senders"], 2);
    let bandwidth: f64 = phase["flows"].as_array().unwrap()[1..].iter().map(|f| f["gbps"].as_f64().unwrap()).sum();
    assert!((phase["aggregate_gbps"].as_f64().unwrap() - bandwidth).abs() < 1e-9);
}

/// Three 2 s phases (a sweep of the message size): long enough to stop in
/// the middle, short enough for a test.
fn three_phases() -> String {
    FanIn::new("three", "2s")
        .warmup("200ms")
        .interval("250ms")
        .senders("1-3")
        .then("\n[sweep]\nparameter = \"message_size\"\nvalues = [\"16K\", \"32K\", \"64K\"]\n")
        .text()
}

/// Starts three_phases() and waits until its journal holds `phases` phases;
/// the run's results folder with it.
fn stop_after(bench: &Bench, phases: usize) -> (std::process::Child, std::path::PathBuf) {
    stop_after_in(bench, &three_phases(), phases)
}

/// Starts the scenario `text` on LOCAL_HOSTS and waits until its journal
/// holds `phases` phases; the run's results folder with it.
#[allow(clippy::zombie_processes)] // the child is returned: the caller signals and waits for it
pub fn stop_after_in(bench: &Bench, text: &str, phases: usize) -> (std::process::Child, std::path::PathBuf) {
    let hosts = bench.write("hosts", LOCAL_HOSTS);
    let scenario = bench.write("three.toml", text);
    let results = bench.results();
    let args = ["run", scenario.to_str().unwrap(), "-H", hosts.to_str().unwrap(), "--no-progress"];
    let mut child = bench.spawn(&[&args[..], &["--results", results.to_str().unwrap()]].concat());
    let deadline = Instant::now() + Duration::from_secs(60);
    let journaled = |dir: &std::path::Path| {
        let journal = std::fs::read_to_string(dir.join("journal.jsonl")).unwrap_or_default();
        journal.lines().filter(|l| l.starts_with("{\"phase\"")).count() >= phases
    };
    while Instant::now() < deadline {
        let dir = std::fs::read_dir(&results).ok().and_then(|mut d| d.next()).and_then(|e| e.ok()).map(|e| e.path());
        if let Some(dir) = dir.filter(|d| journaled(d)) {
            return (child, dir);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("no {phases} phase(s) journaled in 60 s");
}

/// What a stopped run leaves: its finished phases in run.json (failed,
/// naming why) and a folder `fabricbench report` renders again.
fn assert_kept(bench: &Bench, dir: &std::path::Path, at_least: usize, why: &str) {
    let run = read_json(&dir.join("run.json"));
    let phases = run["phases"].as_array().unwrap();
    assert!(phases.len() >= at_least, "{} phase(s) kept, {at_least} finished", phases.len());
    assert!(phases[..at_least].iter().all(|p| p["complete"] == true && p["aggregate_gbps"].as_f64().unwrap() > 0.0));
    assert_eq!(run["status"]["state"], "failed");
    assert!(run["status"]["error"].as_str().unwrap().contains(why), "{}", run["status"]);
    for file in ["flows.csv", "intervals.csv", "ranks.csv", "summary.md", "report.html", "scenario.toml", "hostfile"] {
        assert!(dir.join(file).is_file(), "{file} missing");
    }
    std::fs::remove_file(dir.join("report.html")).unwrap();
    let out = bench.run(&["report", dir.to_str().unwrap(), "--quiet"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(dir.join("report.html").is_file());
}

#[test]
fn a_stop_signal_keeps_the_finished_phases_and_names_itself() {
    let _machine = common::busy_machine();
    for (signal, code, twice) in [("-TERM", 143, false), ("-HUP", 129, false), ("-INT", 130, true)] {
        let bench = Bench::new();
        let (child, dir) = stop_after(&bench, 1);
        // Into phase 1's window: its setup, 200 ms warm-up, then 2 s.
        std::thread::sleep(Duration::from_millis(1300));
        common::signal(child.id(), signal);
        if twice {
            common::signal(child.id(), signal);
        }
        let out = child.wait_with_output().unwrap();
        let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
        let name = format!("SIG{}", &signal[1..]);
        assert_eq!(out.status.code(), Some(code), "{signal}: {stderr}");
        assert!(stderr.contains(&format!("error: stopped by {name}; what was measured is kept")), "{stderr}");
        assert!(stdout.contains("phase 0 `message_size=16K`"), "the summary still comes out: {stdout}");
        assert_kept(&bench, &dir, 1, &format!("stopped by {name}"));
        if !twice {
            // One signal: rank 0 ends the run and the running phase keeps what it measured.
            let run = read_json(&dir.join("run.json"));
            let cut = &run["phases"][1];
            assert_eq!(cut["complete"], false, "{signal}: {cut}");
            assert!(cut["aggregate_gbps"].as_f64().unwrap() > 0.0, "{signal}: {cut}");
        }
        assert_eq!(bench.leftovers(Duration::from_secs(5)), [], "{signal}: processes left");
    }
}

#[test]
fn a_killed_launcher_leaves_its_journal_and_no_worker() {
    let _machine = common::busy_machine();
    let bench = Bench::new();
    let (mut child, dir) = stop_after(&bench, 1);
    common::signal(child.id(), "-KILL");
    child.wait().unwrap();
    // The workers see their stdin close and stop on their own.
    assert_eq!(bench.leftovers(Duration::from_secs(10)), [], "workers outlived their launcher");
    // run.json was rendered after phase 0; rebuild everything from the journal alone.
    std::fs::remove_file(dir.join("run.json")).unwrap();
    let out = bench.run(&["report", dir.to_str().unwrap(), "--quiet"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_kept(&bench, &dir, 1, "incomplete: 1 of 3 phase(s) recorded");
}

/// A launcher killed while it ends a run after SIGTERM (mpirun sends
/// SIGKILL soon after its SIGTERM) leaves a folder that says the run was
/// stopped, not one that says it is running: the status is written when
/// the signal arrives, before rank 0 — frozen here — winds the run down.
#[test]
fn a_launcher_killed_while_it_stops_leaves_the_stop_on_disk() {
    let _machine = common::busy_machine();
    let bench = Bench::new();
    let (mut child, dir) = stop_after(&bench, 1);
    let rank0 = bench.worker_pid(0, Duration::from_secs(20));
    common::signal(rank0, "-STOP");
    common::signal(child.id(), "-TERM");
    let status = |dir: &std::path::Path| {
        let run: Option<serde_json::Value> =
            std::fs::read_to_string(dir.join("run.json")).ok().and_then(|t| serde_json::from_str(&t).ok());
        run.map(|run| run["status"].clone()).unwrap_or_default()
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while status(&dir)["state"] != "failed" && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    common::signal(child.id(), "-KILL");
    child.wait().unwrap();
    common::signal(rank0, "-CONT");
    let kept = status(&dir);
    assert_eq!(kept["state"], "failed", "{kept}");
    let error = kept["error"].as_str().unwrap();
    assert!(
        error.starts_with("stopped by SIGTERM: 1 of 3 phase(s) recorded; the launcher was ending the run"),
        "{error}"
    );
    let run = read_json(&dir.join("run.json"));
    assert_eq!(run["phases"][0]["complete"], true, "phase 0 is kept");
    assert_eq!(bench.leftovers(Duration::from_secs(10)), [], "workers outlived their launcher");
}

/// A worker whose data path is blocked — rank 1 sends to a receiver that
/// is frozen (SIGSTOP), so its send() waits on a full socket — still ends
/// on its own when its launcher is SIGKILLed and stdin closes; so does the
/// frozen one once it runs again.
#[test]
fn workers_blocked_in_send_end_on_their_own_when_the_launcher_dies() {
    let _machine = common::busy_machine();
    let bench = Bench::new();
    let hosts = bench.write("hosts", "127.0.0.1\n127.0.0.2\n127.0.0.3\n");
    let scenario = bench.write(
        "blocked.toml",
        "[run]\nduration = \"30s\"\nwarmup = \"200ms\"\ninterval = \"500ms\"\n\n\
         [[group]]\nname = \"g\"\npattern = \"explicit\"\nflows = [[1, 2]]\nmessage_size = \"128K\"\n\n\
         [[stress]]\nranks = 1\nthreads = 1\nload = 10\n",
    );
    let mut child = bench.spawn(&["run", scenario.to_str().unwrap(), "-H", hosts.to_str().unwrap(), "--no-progress"]);
    let receiver = bench.worker_pid(2, Duration::from_secs(20));
    // Into the window, then freeze the receiver: the sender's buffers fill.
    std::thread::sleep(Duration::from_millis(2500));
    common::signal(receiver, "-STOP");
    std::thread::sleep(Duration::from_millis(500));
    common::signal(child.id(), "-KILL");
    child.wait().unwrap();
    let left = bench.leftovers(Duration::from_secs(10));
    let others: Vec<_> = left.iter().filter(|(pid, _)| *pid != receiver).collect();
    assert_eq!(others, Vec::<&(u32, String)>::new(), "workers (and rank 1's stress burner) outlived their launcher");
    common::signal(receiver, "-CONT");
    assert_eq!(bench.leftovers(Duration::from_secs(10)), [], "the frozen worker did not end once it ran again");
}

#[test]
fn an_unwritable_results_folder_fails_before_any_worker_starts() {
    let bench = Bench::new();
    let hosts = bench.write("hosts", LOCAL_HOSTS);
    let scenario = bench.write("fan.toml", &fan_in("1s"));
    let blocker = bench.write("not-a-dir", "");
    let results = blocker.join("results");
    let args =
        ["run", scenario.to_str().unwrap(), "-H", hosts.to_str().unwrap(), "--results", results.to_str().unwrap()];
    let started = Instant::now();
    let out = bench.run(&args);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains(&format!("error: cannot write {}", results.display())), "{stderr}");
    assert!(!stderr.contains("joined") && started.elapsed() < Duration::from_secs(5), "{stderr}");
}

/// A results folder on a full disk (a 64 KiB tmpfs): the run still prints
/// its summary and writes its other exports, and the error names the file
/// and the cause.
#[test]
fn a_full_disk_loses_neither_the_summary_nor_the_exports() {
    if !common::root_or_skip("mounting a small tmpfs") {
        return;
    }
    let _machine = common::busy_machine();
    let bench = Bench::new();
    let hosts = bench.write("hosts", LOCAL_HOSTS);
    let scenario = bench.write("fan.toml", &fan_in("1s"));
    let small = bench.dir.path().join("small");
    std::fs::create_dir(&small).unwrap();
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=64k", "tmpfs", small.to_str().unwrap()])
        .status()
        .unwrap();
    assert!(mounted.success(), "mount a tmpfs on {}", small.display());
    let export = bench.dir.path().join("out.json");
    let args = [
        "run",
        scenario.to_str().unwrap(),
        "-H",
        hosts.to_str().unwrap(),
        "--results",
        small.to_str().unwrap(),
        "--export-json",
        export.to_str().unwrap(),
        "--no-progress",
    ];
    let out = bench.run(&args);
    let _ = std::process::Command::new("umount").arg(&small).status();
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains(&format!("cannot write {}", small.display())), "{stderr}");
    assert!(stderr.contains("No space left on device"), "{stderr}");
    assert!(stdout.contains("Receivers"), "the summary still comes out: {stdout}");
    let run = read_json(&export);
    assert_eq!(run["phases"][0]["complete"], true, "the export is whole");
}

#[test]
fn two_runs_started_together_get_two_folders() {
    let _machine = common::busy_machine();
    let bench = Bench::new();
    let hosts = bench.write("hosts", "127.0.0.1\n127.0.0.2\n");
    let scenario = bench.write(
        "pair.toml",
        "[run]\nname = \"same\"\nduration = \"500ms\"\nwarmup = \"100ms\"\ninterval = \"250ms\"\n\n\
         [[group]]\nname = \"p\"\npattern = \"pairwise\"\n",
    );
    let args = ["run", scenario.to_str().unwrap(), "-H", hosts.to_str().unwrap(), "--quiet"];
    let runs: Vec<_> = (0..2).map(|_| bench.spawn(&args)).collect();
    for run in runs {
        let out = run.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", text(&out.stderr));
    }
    let dirs: Vec<_> = std::fs::read_dir(bench.results()).unwrap().flatten().collect();
    assert_eq!(dirs.len(), 2, "{dirs:?}");
}

/// A long TCP latency phase: every round trip of the 45 s window is a
/// sample, no cap (the RDMA loop once kept 2^20; on loopback even a debug
/// build on a loaded 2-core host makes ~24 k a second, over 2^20 in 45 s, a
/// release build ~36 k): the histogram's count equals the
/// round trips the client's counter moved by between the sampler's reads at
/// the window's edges (up to what the reads' wake-up slack lets in or out),
/// and the echo side's own count (another process, offset by its clock).
#[test]
fn a_long_tcp_latency_phase_keeps_every_round_trip() {
    let _machine = common::busy_machine();
    let bench = Bench::new();
    let hosts = bench.write("hosts", "127.0.0.1\n127.0.0.2\n");
    let scenario = bench.write(
        "lat.toml",
        "[run]\nduration = \"45s\"\nwarmup = \"500ms\"\ninterval = \"1s\"\n[[group]]\nname = \"lat\"\n\
         pattern = \"explicit\"\nmode = \"latency\"\nflows = [[1, 0]]\nmessage_size = \"64\"\n",
    );
    let run = common::run_json(&bench, &scenario, &hosts, &[]);
    let phase = &run["phases"][0];
    let flow = &phase["flows"][0];
    let samples = flow["latency"]["samples"].as_u64().unwrap();
    let (sent, echoed) = (flow["tx_bytes"].as_u64().unwrap() / 64, flow["rx_bytes"].as_u64().unwrap() / 64);
    let rate = flow["msgs_per_s"].as_f64().unwrap();
    let rtt_s =
        phase["ranks"].as_array().unwrap().iter().map(|r| r["rtt_us"].as_f64().unwrap()).fold(0.0, f64::max) / 1e6;
    println!(
        "{samples} samples ({} 2^20), {sent} round trips counted, {echoed} echoed, {rate:.0}/s",
        if samples > 1 << 20 { "above" } else { "below" }
    );
    // The reads' slack: 20 ms, a few scheduler quanta; a loaded 2-core CI
    // host woke them 7.8 ms apart (58 round trips at 7.4 k/s).
    let slack = rate * 0.02;
    assert!((samples as f64 - sent as f64).abs() <= 2.0 + slack, "{samples} samples of {sent} round trips");
    assert!((samples as f64 - echoed as f64).abs() <= 2.0 + slack + rate * rtt_s, "{samples} vs {echoed} echoed");
    assert!(samples as f64 >= rate * 44.0, "the whole window: {flow}");
}

/// The shipped fan-in scenario, less its `interval` line: a scenario that
/// leaves the interval to its default.
fn fan_in_without_interval() -> String {
    let shipped = std::fs::read_to_string(repo("scenarios/fan-in.toml")).unwrap();
    assert!(shipped.lines().any(|l| l.starts_with("interval = ")), "{shipped}");
    shipped.lines().filter(|l| !l.starts_with("interval = ")).map(|l| format!("{l}\n")).collect()
}

/// A smoke run shorter than the default 1 s interval: an interval the file
/// does not give follows --duration (one sample of the whole window). A
/// loaded machine may cut a rank's window short (degraded, exit 4); the run
/// was still accepted and sampled once.
#[test]
fn a_short_duration_runs_when_the_scenario_gives_no_interval() {
    let _machine = common::busy_machine();
    let bench = Bench::new();
    let hosts = repo("hostfiles/local");
    let scenario = bench.write("fan-in.toml", &fan_in_without_interval());
    let args = ["run", scenario.to_str().unwrap(), "-H", hosts.to_str().unwrap(), "--duration", "500ms"];
    let out = bench.run(&[&args[..], &["--warmup", "200ms"]].concat());
    let said = format!("stdout:\n{}\nstderr:\n{}", text(&out.stdout), text(&out.stderr));
    assert!(matches!(out.status.code(), Some(0 | 4)), "{said}");
    let run = read_json(&bench.result_dir().join("run.json"));
    assert_eq!(run["scenario"]["run"]["duration"], "500ms", "{}", run["scenario"]);
    assert_eq!(run["scenario"]["run"]["interval"], "500ms", "{}", run["scenario"]);
    let flows = run["phases"][0]["flows"].as_array().unwrap();
    assert_eq!(flows.len(), 3);
    assert!(flows.iter().all(|f| f["interval_gbps"].as_array().unwrap().len() == 1), "{flows:?}");
}

/// An interval the file does give is kept, and one longer than --duration
/// is refused naming the file, the line, the field and what would do.
#[test]
fn a_duration_shorter_than_the_scenarios_own_interval_is_refused() {
    let bench = Bench::new();
    let scenario = repo("scenarios/fan-in.toml");
    let hosts = repo("hostfiles/local");
    let out = bench.run(&["run", scenario.to_str().unwrap(), "-H", hosts.to_str().unwrap(), "--duration", "200ms"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let text_of = std::fs::read_to_string(&scenario).unwrap();
    let line = 1 + text_of.lines().position(|l| l.starts_with("interval =")).expect("fan-in.toml sets an interval");
    let said = format!(
        "{}:{line}: [run]: field `interval`: 500ms is longer than --duration 200ms: give a --duration of at least \
         500ms, or a shorter interval",
        scenario.display()
    );
    assert!(text(&out.stderr).contains(&said), "{}", text(&out.stderr));
    assert_eq!(bench.leftovers(Duration::from_secs(1)), []);
}

/// `hosts` reaches local ranks as `run` starts them: here, not over ssh
/// (an ssh config that does not exist would fail every ssh connect).
#[test]
fn hosts_checks_local_ranks_here() {
    let bench = Bench::new();
    let hosts = repo("hostfiles/local");
    let args = ["hosts", "-H", hosts.to_str().unwrap(), "--ssh-config", "/nonexistent/ssh_config", "--json"];
    let out = bench.run(&args);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{}", text(&out.stderr));
    let checks: Vec<serde_json::Value> = serde_json::from_str(&stdout).unwrap();
    let names: Vec<&str> = checks.iter().map(|c| c["host"].as_str().unwrap()).collect();
    assert_eq!(names, ["127.0.0.1", "127.0.0.2", "127.0.0.3", "127.0.0.4"]);
    let ours = format!("fabricbench {}", env!("CARGO_PKG_VERSION"));
    for check in &checks {
        assert_eq!(check["reachable"], true, "{check}");
        assert!(check["problem"].is_null(), "{check}");
        assert_eq!(check["version"], ours.as_str(), "{check}");
        assert!(check["facts"].is_object() && check["clock_offset_ms"].is_number(), "{check}");
    }
}

/// A file of this repository (a shipped scenario or hostfile).
fn repo(path: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

/// `plan` tells how many engines each local rank's TCP streams would use
/// at most: one per core of this machine.
#[test]
fn plan_shows_the_engines_of_each_local_ranks_streams() {
    let bench = Bench::new();
    let hosts = bench.write("hosts", LOCAL_HOSTS);
    let scenario = bench.write("all.toml", "[[group]]\nname = \"all\"\npattern = \"all-to-all\"\nstreams = 3\n");
    let out = bench.run(&["plan", scenario.to_str().unwrap(), "-H", hosts.to_str().unwrap()]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    // Each rank: 3 flows out and 3 in, of 3 streams each.
    let cores = fabricbench::load::topology::online_cpus().len();
    for rank in 0..4 {
        let line = format!(
            "  rank {rank:>4} (127.0.0.{})  18 TCP stream(s) on at most {} engine(s) ({cores} core(s) here)\n",
            rank + 1,
            cores.min(18)
        );
        assert!(stdout.contains(&line), "{line:?} in\n{stdout}");
    }
}

/// All to all among 32 local ranks: 992 flows, 62 flow ends on each rank,
/// each flow paced to 2 Mb/s. Unpaced, 32 ranks on 2 cores begin their
/// window as far apart as whatever else runs makes them (here 0.11–0.34 s
/// of a 1 s window beside other builds: degraded), which is not what this
/// test is about.
const ALL_TO_ALL: &str =
    "[run]\nname = \"all-to-all\"\nduration = \"1s\"\nwarmup = \"200ms\"\ninterval = \"500ms\"\n\n\
    [[group]]\nname = \"all\"\npattern = \"all-to-all\"\nmessage_size = \"16K\"\nrate = \"2 Mb/s\"\n";

/// A 32-rank TCP all-to-all completes, valid, with every flow moving bytes,
/// and each rank runs its 62 flow ends' streams on engines, no more than
/// it has cores: no rank's data path takes a thread per stream. Alone on
/// the machine: "not degraded" includes the 10 % start-skew rule, and 64
/// processes starting beside another test's load once began 0.33 s apart.
#[test]
fn thirty_two_rank_all_to_all_runs_each_ranks_streams_on_at_most_its_cores() {
    let _machine = common::quiet_machine();
    let ranks = 32;
    let bench = Bench::new();
    let hosts: String = (1..=ranks).map(|k| format!("127.0.0.{k}\n")).collect();
    let hosts = bench.write("hosts", &hosts);
    let scenario = bench.write("all-to-all.toml", ALL_TO_ALL);
    let out = bench.run(&["run", scenario.to_str().unwrap(), "-H", hosts.to_str().unwrap(), "--quiet"]);
    assert!(out.status.success(), "stdout:\n{}\nstderr:\n{}", text(&out.stdout), text(&out.stderr));

    let run = read_json(&bench.result_dir().join("run.json"));
    assert_eq!(run["status"]["state"], "ok", "complete and not degraded: {}", run["status"]);
    let phase = &run["phases"][0];
    assert_eq!(phase["complete"], true);
    assert!(phase["degraded"].is_null(), "{}", phase["degraded"]);
    let flows = phase["flows"].as_array().unwrap();
    assert_eq!(flows.len(), ranks * (ranks - 1));
    let cores = fabricbench::load::placement::allowed_cores().len() as u64;
    for f in flows {
        assert!(f["tx_bytes"].as_u64().unwrap() > 0 && f["rx_bytes"].as_u64().unwrap() > 0, "{f}");
        for end in ["sender", "receiver"] {
            let seats = f["engines"][end].as_array().unwrap_or_else(|| panic!("the {end}'s engines: {f}"));
            let numbers: Vec<u64> = seats.iter().map(|s| s["engine"].as_u64().unwrap()).collect();
            assert!(!numbers.is_empty() && numbers.iter().all(|&e| e < cores), "{end} on {cores} cores: {f}");
        }
    }
    let reports = phase["ranks"].as_array().unwrap();
    assert_eq!(reports.len(), ranks);
    for r in reports {
        let threads = r["cpu"]["data"]["threads"].as_u64().unwrap();
        assert!((1..=cores).contains(&threads), "rank {}: {threads} data-path threads on {cores} cores", r["rank"]);
    }
    assert_eq!(bench.leftovers(Duration::from_secs(2)), []);
}
