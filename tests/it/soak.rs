//! Soak runs: a results folder read while its run goes, and the flap
//! detector on the bed — a link taken down and a rate halved, each found
//! at its time — with rank 0's memory flat through a minute at 100 ms.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::common;

use common::testbed::Bed;
use common::{read_json, text, Bench};

/// Waits (bounded) for the run's results folder and its journal's first
/// interval line; returns the folder and when the line was seen.
fn first_interval(bench: &Bench, within: Duration) -> (PathBuf, Instant) {
    let deadline = Instant::now() + within;
    loop {
        let dirs: Vec<PathBuf> =
            std::fs::read_dir(bench.results()).into_iter().flatten().flatten().map(|e| e.path()).collect();
        if let [dir] = &dirs[..] {
            let journal = std::fs::read_to_string(dir.join("journal.jsonl")).unwrap_or_default();
            if journal.contains("{\"interval\":") {
                return (dir.clone(), Instant::now());
            }
        }
        assert!(Instant::now() < deadline, "no interval journaled within {within:?}: {dirs:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn report(bench: &Bench, dir: &Path) -> String {
    let out = bench.run(&["report", dir.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    text(&out.stdout)
}

#[test]
fn a_live_results_folder_reports_what_it_has_and_that_the_run_goes_on() {
    let _machine = common::busy_machine();
    let bench = Bench::new();
    let hosts = bench.write("hosts", "127.0.0.1\n127.0.0.2\n");
    let scenario = bench.write(
        "soak.toml",
        "[run]\nname = \"live\"\nduration = \"4s\"\nwarmup = \"200ms\"\ninterval = \"200ms\"\n\n\
         [[group]]\nname = \"p\"\npattern = \"pairwise\"\n",
    );
    let args = ["run", scenario.to_str().unwrap(), "-H", hosts.to_str().unwrap(), "--quiet", "--flap", "60%"];
    let child = bench.spawn(&args);
    let (dir, _) = first_interval(&bench, Duration::from_secs(30));
    let live = report(&bench, &dir);
    assert!(live.contains("run `live` STILL GOING: 0 of 1 phase(s) recorded; phase 0 under way"), "{live}");
    assert!(live.contains("phase 0 `live` under way:") && live.contains("of 20 interval(s) so far"), "{live}");
    let json = read_json(&dir.join("run.json"));
    assert_eq!(json["status"]["state"], "running", "{}", json["status"]);
    let so_far = json["live"]["interval_gbps"].as_array().expect("live intervals");
    assert!(!so_far.is_empty() && so_far.len() < 20, "{so_far:?}");
    assert!(so_far.iter().all(|g| g.as_f64().unwrap() > 0.0), "{so_far:?}");

    let out = child.wait_with_output().expect("the run ends");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let done = report(&bench, &dir);
    assert!(done.contains("run `live` completed: 1 phase(s)") && !done.contains("under way"), "{done}");
    let json = read_json(&dir.join("run.json"));
    assert!(json.get("live").is_none(), "{json}");
    assert_eq!(json["scenario"]["soak"]["flap"], "60%", "--flap stands in for [soak] flap");
    assert_eq!(json["flaps"][0]["threshold_pct"], 60.0, "{}", json["flaps"]);
}

/// VmRSS of a process in a bed host, bytes.
fn rss(bed: &Bed, host: &str, pid: &str) -> u64 {
    let status = text(&bed.exec(host, &["cat", &format!("/proc/{pid}/status")]).stdout);
    let kib = status.lines().find_map(|l| l.strip_prefix("VmRSS:")).and_then(|v| v.trim().strip_suffix("kB"));
    kib.and_then(|k| k.trim().parse::<u64>().ok()).map(|k| k * 1024).unwrap_or_else(|| panic!("{status}"))
}

/// Rank 0's worker on h1: the fabricbench process (not the shell that started it).
fn rank0(bed: &Bed) -> String {
    let pids = bed.workers("h1");
    pids.iter()
        .find(|pid| {
            let exe = bed.exec("h1", &["readlink", &format!("/proc/{pid}/exe")]);
            text(&exe.stdout).trim().ends_with("fabricbench")
        })
        .unwrap_or_else(|| panic!("no fabricbench worker on h1: {pids:?}"))
        .clone()
}

/// Seconds from the window's opening, given when the first interval
/// (the window's first 100 ms) was seen journaled.
fn in_window(first: Instant, at: Instant) -> f64 {
    at.duration_since(first).as_secs_f64() + 0.1
}

#[test]
fn forty_seconds_on_the_bed_mark_a_link_down_and_a_halved_rate_at_their_times() {
    let Some(bed) = Bed::up_quiet(4, &["--shape", "h2=200mbit/in", "--shape", "h4=200mbit/in"]) else { return };
    let bench = Bench::new();
    let scenario = bench.write(
        "soak.toml",
        "[run]\nname = \"soak\"\nduration = \"40s\"\nwarmup = \"1s\"\ninterval = \"100ms\"\n\n\
         [soak]\nflap = \"70%\"\n\n\
         [[group]]\nname = \"pairs\"\npattern = \"pairwise\"\nflows = [[0, 1], [2, 3]]\n",
    );
    let ssh = bed.ssh_args();
    let mut args = vec!["run", scenario.to_str().unwrap(), "-H", bed.hostfile.to_str().unwrap(), "--quiet"];
    args.extend(ssh.iter().map(String::as_str));
    let child = bench.spawn(&args);
    let (dir, first) = first_interval(&bench, Duration::from_secs(60));
    let pid = rank0(&bed);
    let wait_until = |s: f64| {
        std::thread::sleep((first + Duration::from_secs_f64(s - 0.1)).saturating_duration_since(Instant::now()))
    };

    // Each change is timed before and after the command that makes it.
    let at = |change: &dyn Fn()| {
        let before = in_window(first, Instant::now());
        change();
        (before, in_window(first, Instant::now()))
    };
    let ok = |out: std::process::Output| assert!(out.status.success(), "{}", text(&out.stderr));

    wait_until(8.0);
    let rss_8s = rss(&bed, "h1", &pid);
    wait_until(12.0);
    let down = at(&|| ok(bed.exec("h2", &["ip", "link", "set", "eth0", "down"])));
    wait_until(down.1 + 2.0);
    let up = at(&|| ok(bed.exec("h2", &["ip", "link", "set", "eth0", "up"])));
    wait_until(22.0);
    let halved = at(&|| bed.shape("h4=100mbit/in"));
    wait_until(halved.1 + 5.0);
    let restored = at(&|| bed.shape("h4=200mbit/in"));
    wait_until(38.0);
    let rss_38s = rss(&bed, "h1", &pid);
    println!("rank 0 VmRSS: {rss_8s} B at 8 s, {rss_38s} B at 38 s; down {down:?}, up {up:?}, halved {halved:?}, restored {restored:?}");

    let out = child.wait_with_output().expect("the run ends");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let summary = report(&bench, &dir);
    println!("{summary}"); // what a user reads, kept in the test's log
    let run = read_json(&dir.join("run.json"));
    let flaps = &run["flaps"][0];
    assert_eq!(flaps["threshold_pct"], 70.0);
    // An interval or two either side of when the command ran.
    let slack = 0.2;
    let within = |what: &str, got: f64, (from, to): (f64, f64)| {
        assert!(
            got >= from - slack && got <= to + slack,
            "{what}: {got:.2} s, expected {from:.2}..{to:.2} s ± {slack} s\n{flaps:#}"
        );
    };

    // The link: one event on h2's eth0, from its cut for as long as it was down.
    let links = flaps["links"].as_array().unwrap();
    let link = links.iter().find(|l| l["host"] == "h2" && l["device"] == "eth0").expect("h2's link event");
    assert_eq!(link["rank"], 1, "{link}");
    let start = link["start_s"].as_f64().unwrap();
    within("link down", start, down);
    within("link up", start + link["duration_s"].as_f64().unwrap(), up);
    assert!(link["states"].as_array().unwrap().contains(&"down".into()), "{link}");
    assert!(link["counters"]["carrier_changes"].as_u64().unwrap() >= 1, "{link}");
    assert!(links.iter().all(|l| l["host"] == "h2"), "only h2's link moved: {links:?}");

    let flow = |id: u64| flaps["flows"].as_array().unwrap().iter().find(|f| f["flow"] == id).unwrap().clone();
    let spans = |f: &serde_json::Value| -> Vec<(f64, f64)> {
        let spans = f["spans"].as_array().unwrap().iter();
        spans.map(|d| (d["start_s"].as_f64().unwrap(), d["duration_s"].as_f64().unwrap())).collect()
    };
    // The dips of a flow that start in [from, to], and their total length.
    let dips_in = |f: &serde_json::Value, from: f64, to: f64| -> (Vec<(f64, f64)>, f64) {
        let inside: Vec<(f64, f64)> =
            spans(f).into_iter().filter(|d| d.0 >= from - slack && d.0 <= to + slack).collect();
        let total = inside.iter().map(|d| d.1).sum();
        (inside, total)
    };
    // h1 → h2 stopped with the link: a dip from its cut, at least as long
    // (TCP resends after its backoff, so it may end later).
    let cut = flow(0);
    let (inside, _) = dips_in(&cut, down.0, up.1);
    let first_dip = inside.first().unwrap_or_else(|| panic!("no dip at the cut: {cut}"));
    within("flow 0 dips", first_dip.0, down);
    assert!(first_dip.1 >= up.0 - down.1 - slack && first_dip.1 <= 8.0, "{cut}");
    assert!(cut["min_gbps"].as_f64().unwrap() < 0.05, "{cut}");
    // h3 → h4 at half its rate for five seconds: dips from the halving to
    // the restoring, covering most of it (a replaced tbf starts with a full
    // bucket: an interval may burst above the threshold).
    let slow = flow(1);
    let (inside, total) = dips_in(&slow, halved.0, restored.1);
    let (first_dip, last_dip) = (inside.first().expect("a dip at the halving"), inside.last().unwrap());
    within("flow 1 halved", first_dip.0, halved);
    within("flow 1 restored", last_dip.0 + last_dip.1, restored);
    assert!(total >= 0.8 * (restored.0 - halved.1), "{total} s of dips in the halving: {slow}");
    let median = slow["median_gbps"].as_f64().unwrap();
    assert!((0.17..=0.21).contains(&median), "the unhalved rate is the median: {slow}");
    // A busy 2-core machine stalls a flow for an interval now and then; not for seconds.
    let elsewhere = slow["dip_s"].as_f64().unwrap() - total;
    assert!(elsewhere <= 3.0, "{elsewhere} s of dips outside the halving: {slow}");
    assert!(
        summary.contains("Flaps: flows below 70% of their median") && summary.contains("Flaps: link events"),
        "{summary}"
    );

    // Rank 0 kept its memory flat: 300 more intervals of two flows cost
    // next to nothing (docs/PERFORMANCE.md has the figure per flow-hour).
    let grown = rss_38s.saturating_sub(rss_8s);
    assert!(grown <= 2 << 20, "rank 0 grew by {grown} B from 8 s ({rss_8s} B) to 38 s ({rss_38s} B)");
}

#[test]
fn a_bad_flap_share_names_the_flag_and_what_is_valid() {
    let bench = Bench::new();
    let hosts = bench.write("hosts", "127.0.0.1\n127.0.0.2\n");
    let scenario = bench.write("s.toml", &common::fan_in("1s"));
    for bad in ["150%", "0%", "half", "50"] {
        let out = bench.run(&["run", scenario.to_str().unwrap(), "-H", hosts.to_str().unwrap(), "--flap", bad]);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{bad}: {err}");
        assert!(err.contains(&format!("invalid value '{bad}' for '--flap <SHARE>'")), "{bad}: {err}");
        assert!(err.contains("write a share of the flow's median between 1% and 99%, e.g. \"50%\""), "{bad}: {err}");
    }
    assert!(!bench.results().exists(), "nothing ran");
}
