//! The node gate end to end on local TCP ranks: each host's loopback to its
//! own address before the pairs, held to the profile's TCP floor (never to
//! an RDMA line rate); a host that fails is named with its reason
//! (summary, run.json, JUnit) and the run exits 3; bad profiles are bad
//! input (exit 2) named with their file and key.

use std::time::Duration;

use crate::common::{self, fan_in, read_json, run_json, text, Bench, FanIn, LOCAL_HOSTS};

const QUICK: &str = "loopback_min = \"0.1 Gb/s\"\ntcp_loopback_min = \"0.1 Gb/s\"\nduration = \"1s\"\n";

/// An InfiniBand profile (NDR's rate, width and share of line rate) on a
/// TCP run: no RDMA port is held, and each host's TCP loopback is held to
/// the profile's `tcp_loopback_min`, not to 94 % of 400 Gb/s.
const NDR_ON_TCP: &str = "rate = \"400 Gb/s\"\nwidth = 4\nloopback_min = \"94% of line rate\"\n\
                          tcp_loopback_min = \"0.1 Gb/s\"\nduration = \"1s\"\n";

#[test]
fn local_hosts_pass_the_gate_and_the_pairs_run() {
    let bench = Bench::new();
    let (hosts, scenario) = (bench.write("hosts", LOCAL_HOSTS), bench.write("fan.toml", &fan_in("1s")));
    let profile = bench.write("ndr.toml", NDR_ON_TCP);
    let run = run_json(&bench, &scenario, &hosts, &["--gate", profile.to_str().unwrap()]);
    let gate = &run["gate"];
    assert_eq!(gate["profile"], profile.to_str().unwrap());
    let hosts = gate["hosts"].as_array().unwrap();
    assert_eq!(hosts.len(), 4, "{gate}");
    for h in hosts {
        assert_eq!(h["passed"], true, "{h}");
        assert!(h["loopback_gbps"].as_f64().unwrap() > 0.1, "{h}");
        assert_eq!(h["loopback_min_gbps"], 0.1);
        // Only the TCP loopback was judged, by the TCP floor, and it says so.
        let judged = h["judged"].as_array().unwrap();
        assert_eq!(judged.len(), 1, "{h}");
        let line = judged[0]["text"].as_str().unwrap();
        assert!(line.starts_with("TCP loopback ") && line.ends_with(" ≥ 0.1 Gb/s (tcp_loopback_min)"), "{h}");
        assert!(h.get("ports").is_none(), "a TCP run holds no RDMA port: {h}");
    }
    let phases = run["phases"].as_array().unwrap();
    assert_eq!(phases.iter().map(|p| p["name"].as_str().unwrap()).collect::<Vec<_>>(), ["fan"]);
    assert_eq!(phases[0]["flows"].as_array().unwrap().len(), 3, "the pairs kept every host");
}

#[test]
fn a_failing_gate_names_every_host_and_exits_3() {
    let bench = Bench::new();
    let (hosts, scenario) = (bench.write("hosts", LOCAL_HOSTS), bench.write("fan.toml", &fan_in("1s")));
    bench.write("fast.toml", "loopback_min = \"10 Tb/s\"\nduration = \"1s\"\n");
    let junit = bench.dir.path().join("gate.xml");
    let args = ["run", scenario.to_str().unwrap(), "-H", hosts.to_str().unwrap(), "--gate", "fast.toml"];
    let out =
        bench.run(&[&args[..], &["--no-save", "--no-progress", "--export-junit", junit.to_str().unwrap()]].concat());
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(
        err.contains("gate (fast.toml): 4 of 4 host(s) failed and were left out: 127.0.0.1 (TCP loopback at "),
        "{err}"
    );
    // A profile without `tcp_loopback_min` holds TCP to its `loopback_min` rate, and says which.
    assert!(err.contains("Gb/s, below 10000 Gb/s (loopback_min))"), "{err}");
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.contains("<testsuite name=\"gate fast.toml\" tests=\"4\" failures=\"4\""), "{xml}");
    assert_eq!(xml.matches("<failure message=\"excluded by the gate: TCP loopback at ").count(), 4, "{xml}");
    assert_eq!(xml.matches("<system-out>FAIL TCP loopback at ").count(), 4, "{xml}");
}

#[test]
fn gate_only_runs_just_the_gate_from_the_scenario() {
    let bench = Bench::new();
    bench.write("quick.toml", QUICK);
    let (hosts, scenario) = (
        bench.write("hosts", LOCAL_HOSTS),
        bench.write("fan.toml", &(fan_in("1s") + "\n[gate]\nprofile = \"quick.toml\"\n")),
    );
    let run = run_json(&bench, &scenario, &hosts, &["--gate-only"]);
    let phases: Vec<&str> = run["phases"].as_array().unwrap().iter().map(|p| p["name"].as_str().unwrap()).collect();
    assert_eq!(phases, ["gate-tcp loopback"]);
    let flows = run["phases"][0]["flows"].as_array().unwrap();
    assert!(flows.iter().all(|f| f["src"] == f["dst"]), "every flow loops back: {flows:?}");
    assert_eq!(run["gate"]["hosts"].as_array().unwrap().len(), 4);
}

#[test]
fn bad_gates_are_input_errors() {
    let bench = Bench::new();
    let (hosts, scenario) = (bench.write("hosts", LOCAL_HOSTS), bench.write("fan.toml", &fan_in("1s")));
    let (s, h) = (scenario.to_str().unwrap(), hosts.to_str().unwrap());
    bench.write("typo.toml", "loopback_min = \"1 Gb/s\"\nwidht = 4\n");
    bench.write("share.toml", "loopback_min = \"94% of best\"\n");
    let cases: [(&[&str], &str); 4] = [
        (&["--gate", "no-such-fabric"], "gate profile `no-such-fabric` not found: it is neither a file nor one of"),
        (&["--gate", "typo.toml"], "typo.toml:2: unknown field `widht`, expected one of"),
        (&["--gate", "share.toml"], "share.toml: `loopback_min`: `94% of best`: use a rate"),
        (&["--gate-only"], "--gate-only needs a gate: --gate PROFILE or [gate] in the scenario"),
    ];
    for (extra, message) in cases {
        let out = bench.run(&[&["run", s, "-H", h, "--no-save"][..], extra].concat());
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {}", text(&out.stderr));
        assert!(text(&out.stderr).contains(message), "{extra:?}: {}", text(&out.stderr));
    }
    assert!(!bench.results().exists(), "nothing ran");
}

/// A host whose own devices fail the gate (here: `devices=` names one its
/// recorded sysfs tree lacks, so its worker refuses the loopback and fails
/// the whole gate run) is left out; the gate runs again without it, the
/// others pass on their own loopback, and the pairs run over them.
#[test]
fn a_host_that_fails_alone_is_left_out_and_the_rest_run() {
    let bench = Bench::new();
    let hosts = bench.write("hosts", "127.0.0.1\n127.0.0.2 devices=mlx5_9\n127.0.0.3\n127.0.0.4\n");
    let scenario = bench.write("fan.toml", &FanIn::new("fan", "1s").warmup("300ms").message_size("64K").text());
    bench.write("quick.toml", QUICK);
    let tree = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hosts/mlx5-ib/sys");
    let args = ["run", scenario.to_str().unwrap(), "-H", hosts.to_str().unwrap(), "--gate", "quick.toml"];
    let out = bench
        .command(&[&args[..], &["--no-save", "--quiet", "--export-json", "-"]].concat())
        .env("FABRICBENCH_SYSFS_ROOT", &tree)
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(
        err.contains("gate (quick.toml): 1 of 4 host(s) failed and were left out: 127.0.0.2 (no RDMA device mlx5_9"),
        "{err}"
    );
    let run: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let verdicts: Vec<(&str, bool)> = run["gate"]["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| (h["host"].as_str().unwrap(), h["passed"] == true))
        .collect();
    assert_eq!(verdicts, [("127.0.0.1", true), ("127.0.0.2", false), ("127.0.0.3", true), ("127.0.0.4", true)]);
    let mut senders: Vec<&str> =
        run["phases"][0]["flows"].as_array().unwrap().iter().map(|f| f["src_host"].as_str().unwrap()).collect();
    senders.sort();
    assert_eq!(senders, ["127.0.0.3", "127.0.0.4"], "the fan-in ran without 127.0.0.2");
    assert!(bench.leftovers(Duration::from_secs(2)).is_empty(), "processes left");
}

/// A gate run whose window cannot be trusted judges no host: rank 2's
/// worker frozen (SIGSTOP) across the opening of the gate's first window
/// degrades that run (as tests/it/degraded.rs degrades a fan-in); the gate
/// runs once more, every host passes, the pairs follow (exit 0), and
/// run.json and the summary say the gate was retried and why.
#[test]
fn a_degraded_gate_runs_once_more_and_the_pairs_follow() {
    let _machine = common::busy_machine();
    let bench = Bench::new();
    let hosts = bench.write("hosts", LOCAL_HOSTS);
    // The gate's run takes the scenario's 1 s warm-up and the profile's 2 s
    // window: time to freeze a rank before the window opens.
    let scenario = bench.write("fan.toml", &FanIn::new("fan", "1s").warmup("1s").senders("1-3").text());
    bench.write("steady.toml", "loopback_min = \"0.1 Gb/s\"\nduration = \"2s\"\n");
    let args = ["run", scenario.to_str().unwrap(), "-H", hosts.to_str().unwrap(), "--gate", "steady.toml"];
    let mut child = bench.spawn(&args);
    let (heard, reader) = common::follow_stderr(&mut child);
    let victim = bench.worker_pid(2, Duration::from_secs(20));
    let started = heard.iter().find(|l| l.contains("`gate-tcp loopback` started"));
    assert!(started.is_some(), "the gate's phase never started");
    common::signal(victim, "-STOP");
    std::thread::sleep(Duration::from_secs(2));
    common::signal(victim, "-CONT");
    let out = child.wait_with_output().unwrap();
    let said = reader.join().unwrap();
    assert_eq!(out.status.code(), Some(0), "{said}");
    assert!(said.contains("the gate's run was degraded ("), "{said}");
    assert!(said.contains("): running it once more"), "{said}");
    let run = read_json(&bench.result_dir().join("run.json"));
    let gate = &run["gate"]["hosts"];
    assert_eq!(gate.as_array().unwrap().len(), 4, "{gate}");
    assert!(gate.as_array().unwrap().iter().all(|h| h["passed"] == true), "the second run judged them: {gate}");
    assert!(run["gate"]["retried"].as_str().is_some_and(|why| !why.is_empty()), "{}", run["gate"]);
    let summary = text(&out.stdout);
    assert!(summary.contains("; retried once, its run was degraded ("), "{summary}");
    let phases: Vec<&str> = run["phases"].as_array().unwrap().iter().map(|p| p["name"].as_str().unwrap()).collect();
    assert_eq!(phases, ["fan"], "the pairs ran after the gate");
    assert_eq!(bench.leftovers(Duration::from_secs(3)), []);
}

/// The journal keeps the gate: with the pairs, in the run's first line (a
/// run stopped later still has it); with `--gate-only`, the gate's own run,
/// recorded whole once it ends. `fabricbench report` rebuilds the folder
/// from the journal alone, the gate in summary.md and report.html.
#[test]
fn the_journal_keeps_the_gate_for_report_to_render() {
    let bench = Bench::new();
    let (hosts, scenario) = (bench.write("hosts", LOCAL_HOSTS), bench.write("fan.toml", &fan_in("1s")));
    bench.write("quick.toml", QUICK);
    for (results, only, phase) in [("pairs", false, "fan"), ("only", true, "gate-tcp loopback")] {
        let args = ["run", scenario.to_str().unwrap(), "-H", hosts.to_str().unwrap(), "--gate", "quick.toml"];
        let only_flag: &[&str] = if only { &["--gate-only"] } else { &[] };
        let out = bench.run(&[&args[..], only_flag, &["--results", results, "--quiet"]].concat());
        assert!(out.status.success(), "{results}: {}", text(&out.stderr));
        let dir = std::fs::read_dir(bench.dir.path().join(results)).unwrap().next().unwrap().unwrap().path();
        let journal = std::fs::read_to_string(dir.join("journal.jsonl")).unwrap();
        let first: serde_json::Value = serde_json::from_str(journal.lines().next().unwrap()).unwrap();
        assert_eq!(first["started"]["gate"]["profile"], "quick.toml", "{results}: {first}");
        for file in ["run.json", "summary.md", "report.html"] {
            std::fs::remove_file(dir.join(file)).unwrap();
        }
        let out = bench.run(&["report", dir.to_str().unwrap()]);
        assert!(out.status.success(), "{results}: {}", text(&out.stderr));
        let run = fabricbench::report::store::results_dir::read(&dir).unwrap();
        let gate = run.gate.unwrap_or_else(|| panic!("{results}: no gate in the journal"));
        assert_eq!((gate.hosts.len(), gate.failed().count()), (4, 0), "{results}: {gate:?}");
        let names: Vec<&str> = run.phases.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, [phase], "{results}");
        let summary = std::fs::read_to_string(dir.join("summary.md")).unwrap();
        assert!(summary.contains("## gate (quick.toml): all 4 host(s) passed\n"), "{results}: {summary}");
        assert!(summary.contains("| host | verdict | ports | loopback Gb/s | min Gb/s | reasons |"), "{summary}");
        let page = std::fs::read_to_string(dir.join("report.html")).unwrap();
        assert!(page.contains("<div class=\"banner pass\">gate (quick.toml): all 4 host(s) passed</div>"), "{results}");
    }
    assert!(bench.leftovers(Duration::from_secs(2)).is_empty(), "processes left");
}

/// Started by mpirun for one run (`mpirun … fabricbench run --gate`), the
/// ranks cannot take part in the gate's run and then the pairs': every
/// rank refuses it as bad input (exit 2) before any joins, pointing to
/// `--launcher mpirun`, as the other launchers refuse what cannot run.
#[test]
fn under_mpirun_every_rank_refuses_the_gate_as_bad_input() {
    let bench = Bench::new();
    bench.write("quick.toml", QUICK);
    let hosts = bench.write("hosts", LOCAL_HOSTS);
    let plain = bench.write("fan.toml", &fan_in("1s"));
    let gated = bench.write("gated.toml", &(fan_in("1s") + "\n[gate]\nprofile = \"quick.toml\"\n"));
    let cases: [(&str, &std::path::Path, &[&str]); 4] = [
        ("0", &plain, &["--gate", "quick.toml"]),
        ("3", &plain, &["--gate", "quick.toml"]),
        ("0", &gated, &[]),
        ("2", &gated, &["--gate-only"]),
    ];
    for (rank, scenario, extra) in cases {
        let args = ["run", scenario.to_str().unwrap(), "-H", hosts.to_str().unwrap(), "--results", "results"];
        let out = bench
            .command(&[&args[..], extra].concat())
            .env("OMPI_COMM_WORLD_RANK", rank)
            .env("OMPI_COMM_WORLD_SIZE", "4")
            .env("FABRICBENCH_MPI_SECRET", "0123456789abcdef0123456789abcdef")
            .output()
            .unwrap();
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "rank {rank} {extra:?}: {err}");
        assert!(err.contains(&format!("this is rank {rank} of an MPI job")), "{err}");
        assert!(err.contains("the node gate (--gate, --gate-only, [gate]) is a run of its own"), "{err}");
        assert!(err.contains("run `fabricbench run … --launcher mpirun` instead"), "{err}");
    }
    assert!(!bench.results().exists(), "nothing ran");
}
