//! Offered load and open-loop latency on real ranks: a paced flow delivers
//! its `rate` (loosely here; the ±1 % goal is scripts/bench pacing's), an
//! open-loop probe counts a stall that ping-pong hides, and its latency
//! rises with a background's rate on a tbf-shaped link of the bed.

use std::time::Duration;

use fabricbench::metrics::stats::median;

use crate::common::testbed::Bed;
use crate::common::{self, read_json, run_json, text, Bench, LOCAL_HOSTS};

/// A window long enough that ±1 message at its edges is far inside the
/// tests' bounds.
const WINDOW: &str = "3s";

fn paced_pair(rate: &str, size: &str, flows: &str) -> String {
    format!("{}rate = \"{rate}\"\n", unpaced_pair(size, flows))
}

fn unpaced_pair(size: &str, flows: &str) -> String {
    format!(
        "[run]\nduration = \"{WINDOW}\"\nwarmup = \"500ms\"\ninterval = \"500ms\"\n\n[[group]]\nname = \"paced\"\n\
         pattern = \"explicit\"\nflows = {flows}\nmessage_size = \"{size}\"\n"
    )
}

/// One flow's offered Gb/s, delivered Gb/s and delivered_ratio.
type FlowLoad = (f64, f64, f64);

/// Each flow's load and the group's (offered Gb/s, delivered_ratio).
fn offered(phase: &serde_json::Value) -> (Vec<FlowLoad>, (f64, f64)) {
    let num = |v: &serde_json::Value| v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"));
    let flows = phase["flows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (num(&f["offered"]["gbps"]), num(&f["gbps"]), num(&f["offered"]["delivered_ratio"])))
        .collect();
    let g = &phase["groups"][0];
    (flows, (num(&g["offered"]["gbps"]), num(&g["offered"]["delivered_ratio"])))
}

#[test]
fn paced_tcp_flows_deliver_their_rate_on_loopback() {
    let _machine = common::quiet_machine();
    let bench = Bench::new();
    let hosts = bench.write("hosts", LOCAL_HOSTS);
    // 1 Gb/s, then a quarter of what one unpaced pair moves here, measured
    // first in the same test: a debug pair moved 12.7-15.1 Gb/s on the
    // development machine and 5.6-7.8 Gb/s on CI ones, so 10 Gb/s is not
    // "well below capacity" on both. Not half of it: on a 2-core CI host
    // the same pair's capacity swung below 2 Gb/s within a run, so 2.7 Gb/s
    // paced fell to 0.55-0.66 of offered, twice, for want of CPU, not of
    // pacing (scripts/bench pacing has the release numbers and the ±1 % goal).
    let unpaced = bench.write("unpaced.toml", &unpaced_pair("64K", "[[0, 1]]"));
    let capacity = offered_free(&run_json(&bench, &unpaced, &hosts, &[])["phases"][0]);
    assert!(capacity > 2.0, "one unpaced loopback pair moved {capacity} Gb/s");
    let mbps = |fraction: f64| (capacity * fraction * 10.0).floor() as u64 * 100;
    for mbps in [1000, mbps(0.25)] {
        // A second try where the first was held up: on a 2-core CI host a
        // sender was held up again and again for over CATCH_UP (100 ms), its
        // 500 ms intervals swinging 1.62-2.33 Gb/s around 2.2, which the
        // pacer forfeits by design. Both tries failing is a pacer's fault.
        let first = paced_once(&bench, &hosts, mbps, capacity);
        if let Err(missed) = first {
            let second = paced_once(&bench, &hosts, mbps, capacity);
            assert!(second.is_ok(), "both tries missed: {missed}; then {second:?}");
        }
    }
}

/// One paced run at `mbps` on a loopback pair: `Err` says how it missed.
fn paced_once(bench: &Bench, hosts: &std::path::Path, mbps: u64, capacity: f64) -> Result<(), String> {
    let rate = format!("{mbps} Mb/s");
    let gbps = mbps as f64 / 1000.0;
    let scenario = bench.write("paced.toml", &paced_pair(&rate, "64K", "[[0, 1]]"));
    let run = run_json(bench, &scenario, hosts, &[]);
    let (flows, group) = offered(&run["phases"][0]);
    let (asked, delivered, ratio) = flows[0];
    assert!((asked - gbps).abs() < 1e-9, "{rate}: offered {asked} Gb/s");
    assert!((ratio - delivered / asked).abs() < 1e-9, "the ratio is delivered / offered");
    assert_eq!(group, (asked, ratio), "one flow: the group is the flow");
    // The pacer's steady rate: the median interval, which one held-up
    // sender cannot move (its interval is short and the next makes up).
    let intervals = interval_gbps(&run["phases"][0]["flows"][0]);
    let said = format!("{rate} of an unpaced {capacity:.2} Gb/s: {ratio} of offered, intervals {intervals:?} Gb/s");
    let typical = median(&intervals).expect("intervals in the window");
    if !(0.97..=1.03).contains(&(typical / gbps)) {
        return Err(format!("median interval {typical} Gb/s; {said}"));
    }
    // The window: a stall within CATCH_UP is made up unless it straddles an
    // edge of the 3 s window, so credit spent or owed at an edge moves it by
    // up to 3.3 %; a longer stall forfeits the rest, by design.
    if !(0.9..=1.04).contains(&ratio) {
        return Err(said);
    }
    Ok(())
}

/// A flow's Gb/s in each interval of the window.
fn interval_gbps(flow: &serde_json::Value) -> Vec<f64> {
    let intervals = flow["interval_gbps"].as_array().unwrap_or_else(|| panic!("no interval_gbps: {flow}"));
    intervals.iter().map(|v| v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))).collect()
}

/// The Gb/s of an unpaced phase's one flow, which has no offered load.
fn offered_free(phase: &serde_json::Value) -> f64 {
    let flow = &phase["flows"][0];
    assert!(flow.get("offered").is_none_or(serde_json::Value::is_null), "unpaced: {flow}");
    flow["gbps"].as_f64().unwrap_or_else(|| panic!("no Gb/s: {flow}"))
}

#[test]
fn every_paced_table_and_file_shows_offered_against_delivered() {
    let _machine = common::busy_machine();
    let bench = Bench::new();
    let hosts = bench.write("hosts", LOCAL_HOSTS);
    let scenario = bench.write("paced.toml", &paced_pair("200 Mb/s", "16K", "[[0, 1], [2, 3]]"));
    let out = bench.run(&["run", scenario.to_str().unwrap(), "-H", hosts.to_str().unwrap()]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    assert!(stdout.contains("Offered load (rate) vs delivered"), "{stdout}");
    let group_row = stdout.lines().find(|l| l.contains("paced (group)")).expect("the group's row");
    assert!(group_row.contains("┆ bandwidth ┆        0.400 ┆           3052 ┆"), "two flows of 200 Mb/s: {group_row}");
    let dir = bench.result_dir();
    let run = read_json(&dir.join("run.json"));
    let (flows, (group_gbps, group_ratio)) = offered(&run["phases"][0]);
    assert_eq!(flows.len(), 2);
    assert!((group_gbps - 0.4).abs() < 1e-9, "{group_gbps}");
    let delivered: f64 = flows.iter().map(|f| f.1).sum();
    assert!((group_ratio - delivered / 0.4).abs() < 1e-9, "{group_ratio} vs {delivered}");
    for f in &flows {
        assert!((0.95..=1.02).contains(&f.2), "{f:?}");
    }
    let csv = std::fs::read_to_string(dir.join("flows.csv")).unwrap();
    let header = ",offered_gbps,offered_msgs_per_s,delivered_ratio,limited_by,limit_rule";
    assert!(csv.lines().next().unwrap().ends_with(header), "{csv}");
    assert!(csv.lines().nth(1).unwrap().contains(",0.2,"), "{csv}");
    assert!(csv.lines().skip(1).all(|l| l.contains(",paced,delivered ≥ 90 % of the group's `rate`")), "{csv}");
    for file in ["summary.md", "report.html"] {
        let page = std::fs::read_to_string(dir.join(file)).unwrap();
        assert!(page.contains("Offered load (rate) vs delivered"), "{file}");
        assert!(page.contains("delivered %"), "{file}");
    }
}

/// The progress lines of a slow flow (5 Mb/s: 0.005 Gb/s) keep 3
/// significant digits, as the tables do: never `0.005`, never `0.000`.
#[test]
fn progress_lines_keep_three_significant_digits() {
    let bench = Bench::new();
    let hosts = bench.write("hosts", LOCAL_HOSTS);
    let scenario = bench.write("slow.toml", &paced_pair("5 Mb/s", "1K", "[[0, 1]]"));
    let out = bench.run(&["run", scenario.to_str().unwrap(), "-H", hosts.to_str().unwrap(), "--no-save"]);
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let numbers: Vec<&str> = stderr
        .lines()
        .filter_map(|l| l.strip_prefix("fabricbench: phase 0 ")?.strip_suffix(" Gb/s aggregate")?.rsplit(' ').next())
        .collect();
    assert!(numbers.len() >= 2, "interval and done lines:\n{stderr}");
    for n in numbers {
        let digits = n.trim_start_matches(['0', '.']).chars().filter(char::is_ascii_digit).count();
        assert!(digits >= 3, "`{n}` keeps 3 significant digits:\n{stderr}");
    }
}

/// What a stalled echo did to two latency probes.
struct Stalled {
    /// The open-loop probe's and the ping-pong probe's (p99, max) in µs.
    latency: [(f64, f64); 2],
    /// The open-loop probe's offered and delivered messages per second.
    probes: (f64, f64),
}

/// Two latency probes into one echoing rank, 1 → 2 open-loop at `rate` and
/// 0 → 2 ping-pong, both groups with `lines` added (a transport); the
/// echoing rank stops for `stall` in the window.
fn probes_across_a_stall(bench: &Bench, stall: Duration, rate: &str, lines: &str) -> Stalled {
    let hosts = bench.write("hosts", LOCAL_HOSTS);
    let scenario = bench.write(
        "stall.toml",
        &format!(
            "[run]\nduration = \"6s\"\nwarmup = \"500ms\"\ninterval = \"1s\"\n\n\
             [[group]]\nname = \"open\"\npattern = \"explicit\"\nflows = [[1, 2]]\nmode = \"latency\"\n\
             rate = \"{rate}\"\n{lines}\n\
             [[group]]\nname = \"closed\"\npattern = \"explicit\"\nflows = [[0, 2]]\nmode = \"latency\"\n{lines}"
        ),
    );
    let args = ["run", scenario.to_str().unwrap(), "-H", hosts.to_str().unwrap(), "--export-json", "-", "--no-save"];
    let mut child = bench.spawn(&args);
    // Progress as plain lines (stderr is a pipe): the phase says when it starts.
    let (heard, reader) = common::follow_stderr(&mut child);
    let echo = bench.worker_pid(2, Duration::from_secs(20));
    assert!(heard.iter().any(|l| l.contains("phase 0 `stall` started")), "the phase never started");
    // Past the warm-up, well inside the 6 s window.
    std::thread::sleep(Duration::from_millis(2500));
    common::signal(echo, "-STOP");
    std::thread::sleep(stall);
    common::signal(echo, "-CONT");
    let out = child.wait_with_output().unwrap();
    let stderr = reader.join().unwrap();
    assert!(out.status.success(), "{stderr}");
    let run: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let flows = &run["phases"][0]["flows"];
    let latency = |flow: usize| {
        let l = &flows[flow]["latency"];
        (l["p99_us"].as_f64().unwrap(), l["max_us"].as_f64().unwrap())
    };
    let offered = &flows[0]["offered"];
    Stalled {
        latency: [latency(0), latency(1)],
        probes: (offered["msgs_per_s"].as_f64().unwrap(), flows[0]["msgs_per_s"].as_f64().unwrap()),
    }
}

#[test]
fn open_loop_p99_shows_a_stall_that_ping_pong_hides() {
    let _machine = common::busy_machine();
    let bench = Bench::new();
    assert_stall_counted(probes_across_a_stall(&bench, STALL, "2k msg/s", ""), 2000.0);
}

/// The stall both probes sit through.
const STALL: Duration = Duration::from_millis(400);

/// Both probes saw the stall, only the open-loop one in its p99, and it
/// sent `rate` probes a second through it.
fn assert_stall_counted(seen: Stalled, rate: f64) {
    let [(open_p99, open_max), (closed_p99, closed_max)] = seen.latency;
    let stall = STALL;
    let (offered, delivered) = seen.probes;
    eprintln!("open-loop p99 {open_p99} max {open_max} µs, ping-pong p99 {closed_p99} max {closed_max} µs, {delivered} echoes/s of {offered}");
    assert_eq!(offered, rate, "offered probes a second");
    // Every probe scheduled in the window was sent and echoed (the stall
    // delays them; the echoes catch up when it ends).
    assert!((0.9..=1.1).contains(&(delivered / offered)), "{delivered} echoes/s of {offered} probes/s");
    let half_stall_us = stall.as_secs_f64() * 1e6 / 2.0;
    // Both saw the stall once (their slowest round trip spans it)...
    assert!(open_max >= half_stall_us * 0.8, "open-loop max {open_max} µs");
    assert!(closed_max >= half_stall_us * 0.8, "ping-pong max {closed_max} µs");
    // ...but only the open-loop probe counts every probe the stall held up:
    // 400 ms of a 6 s window is 6.7 % of its probes, so its p99 is in the
    // stall; ping-pong sent one probe through it, and its p99 is not.
    assert!(open_p99 >= half_stall_us * 0.5, "open-loop p99 {open_p99} µs misses a {stall:?} stall");
    assert!(closed_p99 * 5.0 < open_p99, "ping-pong p99 {closed_p99} µs vs open-loop {open_p99} µs");
}

/// The same over verbs, in the Soft-RoCE VM (scripts/test-rdma): RC sends
/// on a schedule, each echo matched to its probe by order. A lower rate
/// than TCP's: three ranks' spinning threads share the VM's two vCPUs.
#[test]
fn paced_rdma_open_loop_probes_count_a_stall() {
    if !crate::rdma_run::has_rdma() {
        return;
    }
    let bench = Bench::new();
    let seen = probes_across_a_stall(&bench, STALL, "200 msg/s", "transport = \"rdma\"\nop = \"send\"\n");
    assert_stall_counted(seen, 200.0);
}

#[test]
fn paced_flows_keep_50_and_200_mbit_on_the_bed() {
    let Some(bed) = Bed::up_quiet(4, &["--shape", "h2=400mbit/in", "--shape", "h4=400mbit/in"]) else { return };
    let ssh = bed.ssh_args();
    let extra: Vec<&str> = ssh.iter().map(String::as_str).collect();
    let bench = Bench::new();
    for (rate, gbps) in [("50 Mb/s", 0.05), ("200 Mb/s", 0.2)] {
        let scenario = bench.write("paced.toml", &paced_pair(rate, "16K", "[[0, 1], [2, 3]]"));
        let run = run_json(&bench, &scenario, &bed.hostfile, &extra);
        let phase = &run["phases"][0];
        let (flows, _) = offered(phase);
        for (k, &(asked, delivered, ratio)) in flows.iter().enumerate() {
            assert!((asked - gbps).abs() < 1e-9, "{rate}: offered {asked}");
            assert!((0.95..=1.02).contains(&ratio), "{rate} flow {k}: delivered {delivered} Gb/s ({ratio})");
            // Ground truth from the receiver's interface: what arrived,
            // headers and control traffic included, over the same window.
            let receiver = &phase["ranks"][2 * k + 1];
            let iface_rx = receiver["netdevs"][0]["rx_bytes"].as_f64().unwrap();
            let window = phase["window_s"].as_f64().unwrap();
            let wire_gbps = iface_rx * 8.0 / window / 1e9;
            assert!(
                (delivered * 0.98..=delivered * 1.15).contains(&wire_gbps),
                "{rate} flow {k}: interface {wire_gbps} Gb/s vs application {delivered} Gb/s"
            );
        }
    }
}

#[test]
fn open_loop_latency_rises_with_the_background_rate_on_a_shaped_link() {
    let Some(bed) = Bed::up_quiet(3, &["--shape", "h2=100mbit/in"]) else { return };
    let ssh = bed.ssh_args();
    let mut extra: Vec<&str> = ssh.iter().map(String::as_str).collect();
    extra.extend(["--duration", "3s"]);
    let bench = Bench::new();
    let shipped = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/load-latency.toml");
    // The shipped curve, on a 100 Mbit/s link: light load, then past the link.
    let text = std::fs::read_to_string(shipped).unwrap().replace(
        "values = [\"100 Mb/s\", \"300 Mb/s\", \"500 Mb/s\", \"700 Mb/s\", \"900 Mb/s\"]",
        "values = [\"10 Mb/s\", \"60 Mb/s\", \"200 Mb/s\"]",
    );
    assert!(text.contains("\"10 Mb/s\", \"60 Mb/s\""), "the shipped sweep's values changed");
    let scenario = bench.write("load-latency.toml", &text);
    let run = run_json(&bench, &scenario, &bed.hostfile, &extra);
    let latency = |key: &str| -> Vec<f64> {
        let phases = run["phases"].as_array().unwrap().iter();
        phases
            .map(|p| {
                let probe = p["flows"].as_array().unwrap().iter().find(|f| f["group"] == "probe").unwrap();
                probe["latency"][key].as_f64().unwrap()
            })
            .collect()
    };
    let (typical, p99) = (latency("typical_us"), latency("p99_us"));
    assert_eq!(typical.len(), 3);
    // Ordering only: past the link the tbf queue fills, and most probes wait
    // in it. The median, not the tail: on a host shared with builds, a
    // scheduling hiccup at light load can reach a p99 on its own.
    let said = format!("typical {typical:?} µs, p99 {p99:?} µs at 10, 60, 200 Mb/s");
    assert!(typical[2] > typical[0] * 2.0, "{said}");
    assert!(typical[2] > typical[1], "{said}");
    eprintln!("{said}");
}

/// On Soft-RoCE in the VM (scripts/test-rdma): paced RDMA writes (counted
/// at the initiator's completions) and sends (counted by the receiver)
/// deliver near their rate. Loose: emulation is slow and noisy.
#[test]
fn paced_rdma_flows_deliver_near_their_rate() {
    if !crate::rdma_run::has_rdma() {
        return;
    }
    let bench = Bench::new();
    let hosts = bench.write("hosts", LOCAL_HOSTS);
    for op in ["write", "send"] {
        // Light for emulation: rxe's work runs in the posting thread's system
        // calls, about half a core of a TCG vCPU at 100 Mb/s of 16 KiB writes.
        let text = paced_pair("20 Mb/s", "16K", "[[1, 0]]") + &format!("transport = \"rdma\"\nop = \"{op}\"\n");
        let scenario = bench.write("rdma.toml", &text);
        let run = run_json(&bench, &scenario, &hosts, &[]);
        let (flows, _) = offered(&run["phases"][0]);
        let (asked, delivered, ratio) = flows[0];
        assert!((asked - 0.02).abs() < 1e-9, "{op}: offered {asked}");
        let flow = &run["phases"][0]["flows"][0];
        let ends = (&flow["tx_bytes"], &flow["rx_bytes"], &run["phases"][0]["ranks"][1]["cpu"]);
        assert!(
            (0.7..=1.05).contains(&ratio),
            "{op}: delivered {delivered} Gb/s of 0.02 ({ratio}); tx, rx, cpu: {ends:?}"
        );
        eprintln!("{op}: delivered {delivered} Gb/s of 0.02 ({ratio})");
    }
}
