//! CPU stress and sweeps through the real CLI on local ranks: the load is
//! measured, not assumed, and every sweep point is compared with its baseline.

use crate::common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::{read_json, run_json, text, Bench};

fn run_shipped(bench: &Bench, name: &str) -> serde_json::Value {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    run_json(bench, &root.join("scenarios").join(name), &root.join("hostfiles/local"), &[])
}

#[test]
fn stressed_receiver_carries_the_asked_load() {
    let _machine = common::busy_machine();
    let run = run_shipped(&Bench::new(), "receiver-stress.toml");
    let rank0 = &run["phases"][0]["ranks"][0];
    let stress = &rank0["stress"];
    assert_eq!(stress["asked_load_pct"], 100.0);
    assert_eq!(stress["threads"].as_u64().unwrap() as usize, std::thread::available_parallelism().unwrap().get());
    let measured = stress["measured_load_pct"].as_f64().unwrap();
    assert!(measured >= 90.0, "asked 100 %, measured {measured} %");
    assert!(rank0["cpu"]["host_pct"].as_f64().unwrap() >= 90.0);
    // Only rank 0 was stressed.
    assert!(run["phases"][0]["ranks"][1].get("stress").is_none());
    assert!(run["phases"][0]["aggregate_gbps"].as_f64().unwrap() > 0.0);
}

/// The run time (ns) of `pid`'s threads whose name starts with `prefix`,
/// and how many there are, read by this test from /proc (not by the tool).
fn threads_ns(pid: u32, prefix: &str) -> (usize, u64) {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).into_iter().flatten().flatten();
    let mut found = (0, 0);
    for task in tasks {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        let ns = std::fs::read_to_string(task.path().join("schedstat")).unwrap_or_default();
        if let (true, Some(ns)) = (comm.starts_with(prefix), ns.split_whitespace().next()) {
            found = (found.0 + 1, found.1 + ns.parse::<u64>().unwrap());
        }
    }
    found
}

/// Busy and total ticks of the host's cores (the `cpu` line of /proc/stat).
fn host_ticks() -> (u64, u64) {
    let stat = std::fs::read_to_string("/proc/stat").unwrap();
    let v: Vec<u64> =
        stat.lines().next().unwrap().split_whitespace().skip(1).take(8).map(|x| x.parse().unwrap()).collect();
    let total: u64 = v.iter().sum();
    (total - v[3] - v[4], total)
}

/// receiver-stress on local ranks: rank 0's burners run inside its worker,
/// on every core at 100 %. Their CPU is theirs alone: the threads' own time,
/// at most threads × load, as this test reads the same threads and the
/// host's /proc/stat over the same run; the worker's CPU (data path and
/// control) is the process without them, a data path that is mostly kernel
/// time (a TCP receiver) and at most a core per thread, where before the
/// burners' spinning made the worker's figure 122.7 % "user".
#[test]
fn a_stressed_receivers_cpu_is_told_apart_from_its_burners() {
    let _machine = common::quiet_machine();
    let bench = Bench::new();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let hosts = root.join("hostfiles/local");
    let scenario = std::fs::read_to_string(root.join("scenarios/receiver-stress.toml")).unwrap();
    let unstressed = bench.write("unstressed.toml", &scenario[..scenario.find("[[stress]]").unwrap()]);
    let base = run_json(&bench, &unstressed, &hosts, &[]);
    let base_worker = base["phases"][0]["ranks"][0]["cpu"]["worker_pct"].as_f64().unwrap();

    let cores = std::thread::available_parallelism().unwrap().get();
    let stressed = root.join("scenarios/receiver-stress.toml");
    let child = bench.spawn(&["run", stressed.to_str().unwrap(), "-H", hosts.to_str().unwrap(), "--quiet"]);
    // Rank 0's burners start just before t0 (warmup 500 ms, then a 3 s
    // window): watch them over [appearance + 1 s, appearance + 2.5 s].
    let pid = bench.worker_pid(0, Duration::from_secs(30));
    let deadline = Instant::now() + Duration::from_secs(30);
    while threads_ns(pid, "fb-burn").0 < cores {
        assert!(Instant::now() < deadline, "rank 0's burners never appeared");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_secs(1));
    let (a, host_a, at_a) = (threads_ns(pid, "fb-burn"), host_ticks(), Instant::now());
    std::thread::sleep(Duration::from_millis(1500));
    let (b, host_b, at_b) = (threads_ns(pid, "fb-burn"), host_ticks(), Instant::now());
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let seen_burners = (b.1 - a.1) as f64 / 1e9 / (at_b - at_a).as_secs_f64() * 100.0;
    let seen_host = (host_b.0 - host_a.0) as f64 / (host_b.1 - host_a.1) as f64 * 100.0;

    let dir = bench.result_dir();
    let run = read_json(&dir.join("run.json"));
    let rank0 = &run["phases"][0]["ranks"][0];
    let (cpu, stress) = (&rank0["cpu"], &rank0["stress"]);
    let f = |v: &serde_json::Value| v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"));
    let burners = f(&cpu["burners"]["pct"]);
    let threads = stress["threads"].as_u64().unwrap() as f64;
    println!(
        "rank 0: worker {:.1} % (unstressed {base_worker:.1} %), data {}, control {}, burners {burners:.1} % \
         (this test saw {seen_burners:.1} %), host {:.1} % (this test saw {seen_host:.1} %)",
        f(&cpu["worker_pct"]),
        cpu["data"],
        cpu["control"],
        f(&cpu["host_pct"])
    );
    // The burners: as many as asked, at most threads × load, and what the
    // threads really ran (the test's own reading of them, and never more
    // than the host's cores were busy).
    assert_eq!(cpu["burners"]["threads"].as_u64(), stress["threads"].as_u64(), "{cpu}");
    assert!(burners <= threads * f(&stress["asked_load_pct"]) + 3.0, "{cpu}");
    assert!((burners - seen_burners).abs() <= (0.15 * seen_burners).max(10.0), "{burners} vs {seen_burners}");
    assert!(burners <= f(&cpu["host_pct"]) * cores as f64 + 3.0, "{cpu}");
    // The CPU stress table's /proc/stat figures against the test's own.
    assert!((f(&cpu["host_pct"]) - seen_host).abs() <= 15.0, "{cpu} vs {seen_host}");
    assert!((f(&stress["measured_load_pct"]) - seen_host).abs() <= 15.0, "{stress} vs {seen_host}");
    // The worker is the process without its burners, and its data path no
    // more than a core per thread (two TCP receive streams).
    let data = &cpu["data"];
    assert_eq!(data["threads"], 2, "{cpu}");
    assert!((f(&cpu["process_pct"]) - f(&cpu["worker_pct"]) - burners).abs() < 1.0, "{cpu}");
    assert!((f(&cpu["worker_pct"]) - f(&data["pct"]) - f(&cpu["control"]["pct"])).abs() < 1.0, "{cpu}");
    assert!(f(&cpu["worker_pct"]) <= 100.0 * 2.0 + 10.0, "{cpu}");
    assert!(f(&data["busiest_thread_pct"]) <= 100.0 + 3.0, "{cpu}");
    assert!(f(&data["system_pct"]) > f(&data["user_pct"]), "a TCP receiver is kernel time: {cpu}");
    assert!(f(&cpu["control"]["pct"]) < 10.0, "{cpu}");
    // The CPU stress table shows the burners' own figure beside the measured load.
    let summary = std::fs::read_to_string(dir.join("summary.md")).unwrap();
    let row = summary
        .lines()
        .skip_while(|l| !l.contains("burners' CPU %"))
        .nth(2)
        .unwrap_or_else(|| panic!("no CPU stress table:\n{summary}"));
    let cells: Vec<&str> = row.split('|').map(str::trim).collect();
    assert_eq!(cells[6], format!("{burners:.1}"), "{row}");
    assert_eq!(cells[7], format!("{:.1}", f(&stress["measured_load_pct"])), "{row}");
}

#[test]
fn stress_sweep_reports_impact_ratios() {
    // The unloaded baseline must be unloaded: nothing else heavy runs now.
    let _machine = common::quiet_machine();
    let bench = Bench::new();
    let run = run_shipped(&bench, "stress-sweep.toml");
    let phases = run["phases"].as_array().unwrap();
    assert_eq!(phases.len(), 3);
    assert!(phases[0]["ranks"][0].get("stress").is_none(), "0 threads = unloaded");
    for (i, threads) in [(1, 1), (2, 2)] {
        let stress = &phases[i]["ranks"][0]["stress"];
        assert_eq!(stress["threads"], threads);
        let asked = f64::from(threads) * 100.0 / std::thread::available_parallelism().unwrap().get() as f64;
        let measured = stress["measured_load_pct"].as_f64().unwrap();
        assert!(measured >= asked.min(100.0) - 10.0, "{threads} burners: measured {measured} %, asked ≥ {asked} %");
    }
    let sweep = &run["sweep"];
    assert_eq!(sweep["parameter"], "stress.threads");
    assert_eq!(sweep["baseline"], "0");
    let points = sweep["points"].as_array().unwrap();
    assert_eq!(points.len(), 3);
    assert_eq!(points[0]["groups"][0]["ratio"], 1.0);
    for p in points {
        // A ratio, not a rate: positive and not absurd. One burner has made this loopback fan-in
        // faster on 2 cores, alone on the machine (CI measured 1.55× and 1.58×): where the
        // scheduler puts 4 ranks' threads beside it moves their rate more than the burner takes.
        let ratio = p["groups"][0]["ratio"].as_f64().unwrap();
        assert!(ratio > 0.0 && ratio <= 2.0, "{p}");
        let value = p["groups"][0]["value"].as_f64().unwrap();
        let phase = &phases[p["phase"].as_u64().unwrap() as usize];
        assert_eq!(value, phase["aggregate_gbps"].as_f64().unwrap());
        // The busiest worker without its burners: rank 0's burners never count.
        let workers = phase["ranks"].as_array().unwrap().iter().map(|r| r["cpu"]["worker_pct"].as_f64().unwrap());
        assert_eq!(p["groups"][0]["max_worker_cpu_pct"].as_f64(), workers.reduce(f64::max), "{p}");
        let rank0 = &phase["ranks"][0]["cpu"];
        let burners = rank0["burners"]["pct"].as_f64().unwrap();
        let worker = rank0["worker_pct"].as_f64().unwrap();
        assert!((rank0["process_pct"].as_f64().unwrap() - worker - burners).abs() < 1.0, "{rank0}");
    }

    // The report page carries the sweep: its ratio chart and its table.
    let dir = bench.results().join("sweep");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("run.json"), run.to_string()).unwrap();
    let out = bench.run(&["report", dir.to_str().unwrap(), "--quiet"]);
    assert!(out.status.success(), "{}", common::text(&out.stderr));
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    let sweep_at = html.find("<h2>Sweep of stress.threads</h2>").expect("a sweep section");
    assert!(sweep_at < html.find("<h2>Phases</h2>").unwrap(), "the sweep's answer comes before the phases");
    assert!(html.contains("× baseline per stress.threads"), "the impact chart");
    assert!(html.contains("<h4>Sweep of stress.threads (baseline 0)</h4>"), "the sweep table");
}

#[test]
fn two_parameter_sweep_compares_each_column_with_its_baseline() {
    let _machine = common::busy_machine();
    let bench = Bench::new();
    let scenario = bench.write(
        "matrix.toml",
        "[run]\nduration = \"500ms\"\nwarmup = \"100ms\"\ninterval = \"250ms\"\n\
         [[group]]\nname = \"in\"\npattern = \"fan-in\"\nsenders = \"1-2\"\n\
         [sweep]\nparameter = \"streams\"\nvalues = [1, 2]\n\
         [sweep.by]\nparameter = \"message_size\"\nvalues = [\"4K\", \"64K\"]\n",
    );
    let json = bench.dir.path().join("run.json");
    let hosts = Path::new(env!("CARGO_MANIFEST_DIR")).join("hostfiles/local");
    let args = [scenario.to_str().unwrap(), "-H", hosts.to_str().unwrap(), "--export-json", json.to_str().unwrap()];
    let out = bench.run(&[&["run", "--no-save"][..], &args].concat());
    assert!(out.status.success(), "{}", common::text(&out.stderr));
    let run = common::read_json(&json);
    let sweep = &run["sweep"];
    assert_eq!(sweep["by_parameter"], "message_size");
    let points = sweep["points"].as_array().unwrap();
    let cells: Vec<(&str, &str, bool)> = points
        .iter()
        .map(|p| (p["value"].as_str().unwrap(), p["by_value"].as_str().unwrap(), p["baseline"] == true))
        .collect();
    assert_eq!(cells, [("1", "4K", true), ("1", "64K", true), ("2", "4K", false), ("2", "64K", false)]);
    for (p, base) in points[2..].iter().zip(&points[..2]) {
        let (cell, base) = (&p["groups"][0], &base["groups"][0]);
        let want = cell["value"].as_f64().unwrap() / base["value"].as_f64().unwrap();
        assert!((cell["ratio"].as_f64().unwrap() - want).abs() < 1e-9, "against its own column: {p}");
        assert!(cell["mpps"].as_f64().unwrap() > 0.0 && cell["max_worker_cpu_pct"].as_f64().unwrap() > 0.0);
    }
    let summary = common::text(&out.stdout);
    assert!(summary.contains("in: Gb/s by streams × message_size"), "{summary}");
}
