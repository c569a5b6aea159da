//! `fabricbench watch` on local ranks (127.0.0.1-4): its windows and events
//! as files, a worker killed and the workers started again, SIGTERM ending
//! it with everything kept, its memory flat over windows, the probe budget,
//! and each bad input refused by name. The fault localised on a fabric,
//! and the scrape by a real Prometheus, are in watch_bed.rs and
//! metrics_scrape.rs.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::common::{text, Bench, Running};

const FOUR: &str = "127.0.0.1\n127.0.0.2\n127.0.0.3\n127.0.0.4\n";

/// `watch` on four local ranks with 1 s windows and limits no loopback path
/// misses (a debug build's p99 is some ms on a busy 2-core host).
fn args<'a>(hosts: &'a Path, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["watch", "-H", hosts.to_str().unwrap(), "--window", "1s", "--p99", "2s", "--rate", "20"];
    args.extend(extra);
    args
}

/// The watch's folder under results/ (the only one).
fn folder(bench: &Bench) -> PathBuf {
    let dirs: Vec<PathBuf> = std::fs::read_dir(bench.results()).unwrap().flatten().map(|e| e.path()).collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    dirs[0].clone()
}

/// Each line of a JSON-lines file (none where it is not there yet).
fn lines(path: &Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"))).collect()
}

fn events(bench: &Bench) -> Vec<String> {
    lines(&folder(bench).join("events.jsonl")).iter().map(|e| e["event"].as_str().unwrap().to_string()).collect()
}

/// Waits (bounded) until `done` holds of the watch's folder.
fn wait_for(bench: &Bench, what: &str, within: Duration, done: impl Fn(&Path) -> bool) {
    let deadline = Instant::now() + within;
    while !std::fs::read_dir(bench.results()).is_ok_and(|mut d| d.next().is_some()) || !done(&folder(bench)) {
        assert!(Instant::now() < deadline, "{what} not within {within:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn windows_judged(folder: &Path) -> usize {
    lines(&folder.join("windows.jsonl")).len()
}

#[test]
fn a_watch_judges_every_path_each_window_and_ends_after_its_windows() {
    let bench = Bench::new();
    let hosts = bench.write("hosts", FOUR);
    let out = bench.run(&args(&hosts, &["--windows", "3"]));
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("watch: window 3: 6 path(s), 0 failing, suspects: none"), "{stderr}");
    let folder = folder(&bench);
    let scenario = std::fs::read_to_string(folder.join("watch.toml")).unwrap();
    assert!(scenario.contains("pattern = \"mesh\"") && scenario.contains("rate = \"20 msg/s\""), "{scenario}");
    let windows = lines(&folder.join("windows.jsonl"));
    assert_eq!(windows.iter().map(|w| w["window"].as_u64().unwrap()).collect::<Vec<_>>(), [1, 2, 3]);
    for window in &windows {
        let flows = window["flows"].as_array().unwrap();
        let mut pairs: Vec<(u64, u64)> =
            flows.iter().map(|f| (f["src_rank"].as_u64().unwrap(), f["dst_rank"].as_u64().unwrap())).collect();
        pairs.sort();
        assert_eq!(pairs, [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)], "every pair once: {window}");
        for f in flows {
            // 20 a second for 1 s: 20 due (a 21st may fall on the window's edge), all echoed.
            let probes = f["probes"].as_u64().unwrap();
            assert!((20..=21).contains(&probes), "{f}");
            assert_eq!(f["lost_pct"], 0.0, "{f}");
            assert!(f["p50_us"].as_f64().unwrap() <= f["p99_us"].as_f64().unwrap(), "{f}");
        }
        assert_eq!((window["failing"].as_u64(), window["suspects"].as_array().map(Vec::len)), (Some(0), Some(0)));
    }
    assert_eq!(events(&bench), ["started", "finished"]);
    assert!(bench.leftovers(Duration::from_secs(3)).is_empty(), "processes left");
}

#[test]
fn a_killed_worker_is_an_event_and_the_workers_rejoin_and_sigterm_keeps_every_file() {
    let bench = Bench::new();
    let hosts = bench.write("hosts", FOUR);
    let watching = Running::new(bench.spawn(&args(&hosts, &[])));
    wait_for(&bench, "a first window", Duration::from_secs(60), |f| windows_judged(f) >= 1);
    let worker = bench.worker_pid(2, Duration::from_secs(5));
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(worker as i32), nix::sys::signal::Signal::SIGKILL).unwrap();
    wait_for(&bench, "the workers rejoining", Duration::from_secs(60), |f| {
        let seen = lines(&f.join("events.jsonl"));
        seen.iter().any(|e| e["event"] == "rejoined")
    });
    let judged = windows_judged(&folder(&bench));
    wait_for(&bench, "a window after rejoining", Duration::from_secs(30), |f| windows_judged(f) > judged);
    let out = watching.stop(nix::sys::signal::Signal::SIGTERM);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("stopped by SIGTERM"), "{stderr}");
    let logged = lines(&folder(&bench).join("events.jsonl"));
    let names: Vec<&str> = logged.iter().map(|e| e["event"].as_str().unwrap()).collect();
    let failed = logged.iter().find(|e| e["event"] == "run-failed").expect("the kill is an event");
    assert!(failed["error"].as_str().unwrap().contains("rank 2"), "{failed}");
    assert_eq!(failed["retry_in_s"], 5.0, "{failed}");
    assert_eq!(logged.iter().find(|e| e["event"] == "rejoined").unwrap()["ranks"], 4);
    assert_eq!((names.first(), names.last()), (Some(&"started"), Some(&"stopped")), "{names:?}");
    assert!(bench.leftovers(Duration::from_secs(5)).is_empty(), "processes left");
}

#[test]
fn a_mesh_over_the_probe_budget_and_bad_flags_are_refused_by_name() {
    let bench = Bench::new();
    let hosts = bench.write("hosts", FOUR);
    let out = bench.run(&args(&hosts, &["--max-probes", "50", "--windows", "1"]));
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    // Each host is an end of 3 paths: 20 probes or echoes a second on each.
    assert!(stderr.contains("the mesh has host 127.0.0.1 send 60 probes a second"), "{stderr}");
    assert!(stderr.contains("over --max-probes 50"), "{stderr}");
    for (flag, value, says) in [
        ("--window", "0s", "a window is 1s to 1h"),
        ("--window", "2h", "a window is 1s to 1h"),
        ("--rate", "0", "0 is not in 1..=1000"),
        ("--size", "1M", "a probe is 2 B to 4 KiB"),
        ("--p99", "2%", "is not a time"),
        ("--loss", "5us", "is not a share"),
        ("--loss", "100%", "a loss share must be at least 0% and below 100%"),
        ("--log-max", "1K", "a log rotates at 64K to 1G"),
        ("--windows", "0", "0 is not in 1.."),
    ] {
        let out = bench.run(&["watch", "-H", hosts.to_str().unwrap(), flag, value]);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flag} {value}: {stderr}");
        assert!(stderr.contains(&format!("for '{flag} ")) && stderr.contains(says), "{flag} {value}: {stderr}");
    }
    let out = bench.run(&["watch", "-H", "no-such-hostfile"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("no-such-hostfile"), "{}", text(&out.stderr));
    assert!(bench.leftovers(Duration::from_secs(2)).is_empty(), "processes left");
}

/// The shipped systemd unit and sbatch script start watches the CLI takes.
#[test]
fn the_shipped_service_files_run_commands_the_cli_takes() {
    use clap::Parser;
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    for (file, prefix) in
        [("deploy/systemd/fabricbench-watch.service", "ExecStart="), ("deploy/slurm/fabricbench-watch.sbatch", "")]
    {
        let text = std::fs::read_to_string(repo.join(file)).unwrap();
        let commands: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix(prefix))
            .map(|l| l.strip_prefix("exec ").unwrap_or(l))
            .filter(|l| l.split_whitespace().nth(1) == Some("watch"))
            .collect();
        assert!(!commands.is_empty(), "{file} starts no watch");
        for command in commands {
            let words = command.split_whitespace().map(|w| w.trim_start_matches("/usr/bin/"));
            if let Err(e) = fabricbench::cli::Cli::try_parse_from(words) {
                panic!("{file}: `{command}` does not parse: {e}");
            }
        }
    }
}
