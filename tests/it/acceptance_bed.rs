//! Cluster acceptance on the test bed: all-pairs rounds over real sshd hosts
//! with links shaped by tc, checks with exit codes, the blamed host or link
//! retested alone, and the HTML report. Every port runs at 1 Gbit/s (tbf);
//! the fault under test is one host or one pair at 300 Mbit/s, or on the bed
//! as a two-level fabric (`--leaves`) one leaf's uplink at 250 Mbit/s. The
//! healthy cluster passes the node gate (TCP loopback on each host) first.

use crate::common;

use std::process::Command;

use common::testbed::Bed;
use common::{read_json, text, Bench};

const HEALTHY: &str = "1gbit";
const SLOW: &str = "300mbit";

/// Every host of `n` shaped to 1 Gbit/s both ways, but `slow` at 300 Mbit/s.
fn shapes(n: usize, slow: Option<usize>) -> Vec<String> {
    (1..=n)
        .flat_map(|i| ["--shape".to_string(), format!("h{i}={}", if Some(i) == slow { SLOW } else { HEALTHY })])
        .collect()
}

const ALL_PAIRS: &str = "[run]\nname = \"accept\"\nduration = \"1s\"\nwarmup = \"300ms\"\ninterval = \"250ms\"\n\n\
     [[group]]\nname = \"pairs\"\npattern = \"all-pairs\"\nbidirectional = true\n\n\
     [check]\nflow = \"70% of best\"\n";

/// Runs the all-pairs acceptance on the bed with `extra` arguments; returns
/// the exit code, stderr and run.json. A degraded run (exit 4) runs once
/// more: on a loaded 2-core CI host a round's flows once started 0.245 s
/// apart in its 1 s window, and that round measured nothing of the fault
/// under test.
fn accept(bed: &Bed, bench: &Bench, extra: &[&str]) -> (Option<i32>, String, serde_json::Value) {
    let (mut code, mut output, mut xml) = accept_unchecked(bed, bench, extra);
    if code == Some(4) {
        eprintln!("degraded (exit 4), running the acceptance once more:\n{output}");
        std::fs::remove_dir_all(bench.results()).expect("the degraded run's results folder");
        (code, output, xml) = accept_unchecked(bed, bench, extra);
    }
    check_junit(&xml);
    (code, output, read_json(&bench.result_dir().join("run.json")))
}

fn check_junit(xml: &str) {
    assert!(xml.starts_with("<?xml") && pairs_ran(xml), "{xml}");
}

/// Whether the JUnit file has the pairs' check: the run went past the gate.
fn pairs_ran(xml: &str) -> bool {
    xml.contains("<testsuite name=\"flow &gt;= 70% of best\"")
}

/// As `accept`, its JUnit file not yet checked: the exit code, stderr and
/// stdout, and the JUnit XML.
fn accept_unchecked(bed: &Bed, bench: &Bench, extra: &[&str]) -> (Option<i32>, String, String) {
    let scenario = bench.write("accept.toml", ALL_PAIRS);
    let junit = bench.dir.path().join("junit.xml");
    let mut args =
        vec!["run".to_string(), scenario.display().to_string(), "-H".into(), bed.hostfile.display().to_string()];
    args.extend(bed.ssh_args());
    args.extend(["--no-progress".into(), "--export-junit".into(), junit.display().to_string()]);
    args.extend(extra.iter().map(|a| a.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = bench.run(&args);
    let xml = std::fs::read_to_string(&junit).expect("--export-junit wrote its file");
    (out.status.code(), text(&out.stderr) + &text(&out.stdout), xml)
}

/// The suspects still blamed after their retest. Others may have been
/// suspected in the run (a busy 2-core machine slows a flow now and then)
/// but must have passed when retested alone.
fn blamed(run: &serde_json::Value) -> Vec<serde_json::Value> {
    blamed_at(run, 0.7)
}

/// [`blamed`] on a bed whose healthy links run above `healthy_gbps`.
pub(crate) fn blamed_at(run: &serde_json::Value, healthy_gbps: f64) -> Vec<serde_json::Value> {
    let all = run["acceptance"]["suspects"].as_array().expect("suspects").clone();
    let (cleared, blamed): (Vec<_>, Vec<_>) = all.into_iter().partition(|s| s["retest"]["state"] == "cleared");
    for s in &cleared {
        assert!(s["retest"]["gbps"].as_f64().unwrap() > healthy_gbps, "cleared at the healthy rate: {s}");
    }
    blamed
}

/// Flows that failed and stayed failed, as (src, dst) ranks.
pub(crate) fn failed_flows(run: &serde_json::Value) -> Vec<(u64, u64)> {
    let mut failed: Vec<(u64, u64)> = run["acceptance"]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["verdict"] == "fail")
        .map(|c| (c["src"].as_u64().unwrap(), c["dst"].as_u64().unwrap()))
        .collect();
    failed.sort();
    failed
}

#[test]
fn a_slow_host_is_named_and_confirmed_alone() {
    let shaped = shapes(6, Some(4));
    let Some(bed) = Bed::up(6, &shaped.iter().map(String::as_str).collect::<Vec<_>>()) else { return };
    let bench = Bench::new();
    let (code, output, run) = accept(&bed, &bench, &[]);
    assert_eq!(code, Some(3), "a failed check exits with 3:\n{output}");
    let found = blamed(&run);
    assert_eq!(found.len(), 1, "exactly one suspect: {found:?}\n{output}");
    assert_eq!(found[0]["suspect"], "host");
    assert_eq!(found[0]["host"], "h4");
    assert_eq!(found[0]["retest"]["state"], "confirmed", "{found:?}");
    // At its link's rate, not the others' 1 Gbit/s: at most the 300 Mbit/s
    // tbf allows, and a short retest window on a CPU shared with other
    // tests has come in at 0.236 (79 %) once.
    let retest_gbps = found[0]["retest"]["gbps"].as_f64().unwrap();
    assert!((0.21..=0.315).contains(&retest_gbps), "h4 alone ran at {retest_gbps} Gb/s, its link is 300 Mbit/s");
    assert!(output.contains("suspect(s): host h4 (rank 3)"), "{output}");

    // Every flow of h4 failed, and nothing else.
    assert_eq!(run["acceptance"]["checks"].as_array().unwrap().len(), 30, "6 hosts: 15 pairs, both directions");
    let of_h4: Vec<(u64, u64)> = [0, 1, 2, 4, 5]
        .iter()
        .flat_map(|&o| [(3, o), (o, 3)])
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    assert_eq!(failed_flows(&run), of_h4);
    // The matrix: h4's row and column at the slow link's rate.
    let m = &run["matrix"]["values"];
    for other in [0usize, 1, 2, 4, 5] {
        for (a, b) in [(3, other), (other, 3)] {
            let g = m[a][b].as_f64().unwrap();
            assert!(g < 0.32, "{a} -> {b}: {g} Gb/s");
        }
    }
}

#[test]
fn a_slow_pair_is_named_as_the_link() {
    let shaped = shapes(6, None);
    let Some(bed) = Bed::up(6, &shaped.iter().map(String::as_str).collect::<Vec<_>>()) else { return };
    // h2 <-> h5 only: on each one's switch port, an htb class at 300 Mbit/s for
    // packets from the other, everything else at the healthy 1 Gbit/s.
    for (port, peer) in [("h2", "10.199.0.5"), ("h5", "10.199.0.2")] {
        let tc = |args: &str| {
            let out = Command::new("ip")
                .args(["netns", "exec", "fbtb-sw", "tc"])
                .args(args.split_whitespace())
                .output()
                .expect("run tc");
            assert!(out.status.success(), "tc {args}: {}", text(&out.stderr));
        };
        tc(&format!("qdisc replace dev {port} root handle 1: htb default 10"));
        tc(&format!("class add dev {port} parent 1: classid 1:10 htb rate {HEALTHY}"));
        tc(&format!("class add dev {port} parent 1: classid 1:20 htb rate {SLOW} ceil {SLOW}"));
        tc(&format!("filter add dev {port} parent 1: protocol ip prio 1 u32 match ip src {peer}/32 flowid 1:20"));
    }
    let bench = Bench::new();
    let (code, output, run) = accept(&bed, &bench, &[]);
    assert_eq!(code, Some(3), "{output}");
    let found = blamed(&run);
    assert_eq!(found.len(), 1, "exactly one suspect: {found:?}\n{output}");
    assert_eq!(found[0]["suspect"], "link");
    assert_eq!((&found[0]["a_host"], &found[0]["b_host"]), (&"h2".into(), &"h5".into()));
    assert_eq!(found[0]["retest"]["state"], "confirmed", "{found:?}");
    assert!(output.contains("suspect(s): link h2 – h5"), "{output}");
    assert_eq!(failed_flows(&run), [(1, 4), (4, 1)], "only h2 <-> h5, both directions");
}

#[test]
fn a_healthy_cluster_passes_and_the_report_shows_it() {
    let shaped = shapes(4, None);
    let Some(bed) = Bed::up(4, &shaped.iter().map(String::as_str).collect::<Vec<_>>()) else { return };
    // The node gate first, on every host at once: each one's TCP loopback to
    // its own data address, inside its namespace. Its rate is not compared
    // with the shaped link's: four loopbacks at once beside the other tests
    // on 2 cores measured 0.25 Gb/s on one host in CI.
    let gated = |bench: &Bench| {
        let gate = bench.write("gate.toml", "loopback_min = \"0.01 Gb/s\"\nduration = \"1s\"\n");
        accept_unchecked(&bed, bench, &["--gate", gate.to_str().unwrap()])
    };
    // Once more on a fresh bench when the run stopped at the gate: as the
    // first bed test after the bed's start, CI saw the gate's 1 s loopbacks
    // come out degraded (which stops the run, exit 4) and once h1's below
    // 0.01 Gb/s (cause not found). The first attempt is printed.
    let mut bench = Bench::new();
    let mut attempt = gated(&bench);
    if !pairs_ran(&attempt.2) {
        println!("first attempt, stopped at the gate:\n{}\n{}", attempt.1, attempt.2);
        bench = Bench::new();
        attempt = gated(&bench);
    }
    let (code, output, xml) = attempt;
    check_junit(&xml);
    let run = read_json(&bench.result_dir().join("run.json"));
    assert_eq!(code, Some(0), "{output}");
    let gated = run["gate"]["hosts"].as_array().unwrap();
    let names: Vec<&str> = gated.iter().map(|h| h["host"].as_str().unwrap()).collect();
    assert_eq!(names, ["h1", "h2", "h3", "h4"], "{}", run["gate"]);
    for host in gated {
        assert_eq!(host["passed"], true, "{host}");
        assert!(host["loopback_gbps"].as_f64().unwrap() >= 0.01, "at least the profile's minimum: {host}");
    }
    assert_eq!(run["schema_version"], 3);
    assert_eq!(run["acceptance"]["passed"], true);
    assert_eq!(blamed(&run), Vec::<serde_json::Value>::new());
    assert_eq!(run["phases"].as_array().unwrap().len(), 3, "4 hosts: 3 rounds");
    for row in run["matrix"]["values"].as_array().unwrap() {
        let measured: Vec<f64> = row.as_array().unwrap().iter().filter_map(serde_json::Value::as_f64).collect();
        assert_eq!(measured.len(), 3, "each host sends to the 3 others: {row}");
        // At most the link's goodput (99.3 % of 1 Gbit/s at the bed's 9000 B
        // MTU) plus what tbf's bucket (1.25 MB at 1 Gbit/s) can add to a 1 s
        // window (10 Mbit/s): 1.003 Gb/s. One CI run measured 1.00016.
        assert!(measured.iter().all(|&g| g > 0.3 && g < 1.01), "1 Gbit/s links: {row}");
    }

    let html = std::fs::read_to_string(bench.result_dir().join("report.html")).unwrap();
    assert!(html.contains("<div class=\"banner pass\">checks PASSED"), "verdict banner");
    assert!(html.contains("All pairs `pairs`: Gb/s, row sends → column receives"), "heatmap title");
    // The heatmap: one cell per measured pair, the hosts as labels.
    assert_eq!(html.matches("<svg").count(), 1 + 3 * 2, "heatmap + per round aggregate and per-flow charts");
    for host in ["h1", "h2", "h3", "h4"] {
        assert!(html.contains(&format!(">\n{host}\n</text>")), "host label {host}");
    }
    assert!(html.contains("Per flow") && html.contains("Aggregate per interval"));
    // Self-contained: no scripts, styles or images from anywhere (the SVG namespace is a name, not a fetch).
    let fetches = html.replace("xmlns=\"http://www.w3.org/2000/svg\"", "");
    for needle in ["http", "<script", "<link", "src="] {
        assert!(!fetches.contains(needle), "report.html refers to `{needle}`");
    }
}

/// The bed of `Bed::up_fabric(6, 3, …)` as fabricbench's topology: two hosts
/// per leaf, every leaf on the one spine, so a path between two leaves has
/// one way through and a passing pair between leaf2 and leaf3 clears their
/// uplinks, leaving leaf1's the only one its failing pairs can blame.
const THREE_LEAVES: &str = "[switch.leaf1]\nhosts = \"h[1-2]\"\n\n[switch.leaf2]\nhosts = \"h[3-4]\"\n\n\
     [switch.leaf3]\nhosts = \"h[5-6]\"\n\n[switch.spine1]\nlinks = [\"leaf1\", \"leaf2\", \"leaf3\"]\n";

/// The `uplinks` test suite of the JUnit file `accept` wrote.
fn junit_uplinks(bench: &Bench) -> String {
    let xml = std::fs::read_to_string(bench.dir.path().join("junit.xml")).expect("junit.xml");
    let start = xml.find("<testsuite name=\"uplinks\"").unwrap_or_else(|| panic!("no uplinks suite: {xml}"));
    let suite = &xml[start..];
    suite[..suite.find("</testsuite>").expect("the suite ends")].to_string()
}

/// The acceptance.uplinks entry of `leaf`'s uplink to spine1.
fn uplink_outcome<'a>(run: &'a serde_json::Value, leaf: &str) -> &'a serde_json::Value {
    let all = run["acceptance"]["uplinks"].as_array().expect("acceptance.uplinks");
    all.iter().find(|u| u["leaf"] == leaf && u["spine"] == "spine1").unwrap_or_else(|| panic!("{leaf}: {all:?}"))
}

#[test]
fn a_slow_uplink_on_a_two_level_bed_is_named_and_confirmed() {
    let shaped = shapes(6, None);
    let Some(bed) = Bed::up_fabric(6, 3, &shaped.iter().map(String::as_str).collect::<Vec<_>>()) else { return };
    let healthy = Bench::new();
    let topology = healthy.write("fabric.toml", THREE_LEAVES);
    let with_topology = ["--topology", topology.to_str().unwrap()];

    // Unshaped uplinks: nothing named, every uplink's case passes.
    let (code, output, run) = accept(&bed, &healthy, &with_topology);
    assert_eq!(code, Some(0), "{output}");
    assert_eq!(blamed(&run), Vec::<serde_json::Value>::new(), "{output}");
    for leaf in ["leaf1", "leaf2", "leaf3"] {
        let outcome = uplink_outcome(&run, leaf);
        assert_eq!(outcome["links"], 8, "2 hosts on it with the 4 on the other leaves: {outcome}");
        assert_eq!(outcome["failed"], serde_json::json!([]), "{outcome}");
    }
    let suite = junit_uplinks(&healthy);
    assert!(suite.starts_with("<testsuite name=\"uplinks\" tests=\"3\" failures=\"0\""), "{suite}");

    // leaf1's uplink at a quarter of the hosts' rate, both ways.
    bed.shape_uplink("leaf1", "250mbit");
    let bench = Bench::new();
    let (code, output, run) = accept(&bed, &bench, &with_topology);
    assert_eq!(code, Some(3), "a failed check exits with 3:\n{output}");
    let found = blamed(&run);
    assert_eq!(found.len(), 1, "exactly one suspect: {found:?}\n{output}");
    assert_eq!(found[0]["suspect"], "uplink", "the uplink, not a host: {found:?}");
    assert_eq!(found[0]["uplinks"], serde_json::json!([{"leaf": "leaf1", "spine": "spine1"}]), "{found:?}");
    let leaf1_to_others: Vec<[u64; 2]> = (0..2).flat_map(|a| (2..6).map(move |b| [a, b])).collect();
    assert_eq!(found[0]["pairs"], serde_json::json!(leaf1_to_others), "{found:?}");
    assert_eq!(found[0]["retest"]["state"], "confirmed", "{found:?}");
    // Two pairs crossing it share its 250 Mbit/s each way in the retest.
    let retest_gbps = found[0]["retest"]["gbps"].as_f64().unwrap();
    assert!(retest_gbps < 0.26, "the uplink's pairs retested at {retest_gbps} Gb/s, it runs at 250 Mbit/s");
    assert!(output.contains("suspect(s): uplink leaf1 ↔ spine1"), "{output}");

    // Every flow between leaf1 and the other leaves failed, and nothing else.
    let crossing: Vec<(u64, u64)> = {
        let mut flows: Vec<(u64, u64)> = leaf1_to_others.iter().flat_map(|&[a, b]| [(a, b), (b, a)]).collect();
        flows.sort();
        flows
    };
    assert_eq!(failed_flows(&run), crossing);
    let slow = uplink_outcome(&run, "leaf1");
    assert_eq!((&slow["links"], slow["failed"].as_array().unwrap().len()), (&8.into(), 8), "{slow}");
    assert!(slow["min_gbps"].as_f64().unwrap() < 0.26, "{slow}");

    let suite = junit_uplinks(&bench);
    assert!(suite.starts_with("<testsuite name=\"uplinks\" tests=\"3\" failures=\"1\""), "{suite}");
    let case = &suite[suite.find("name=\"uplink leaf1 ↔ spine1\"").expect("leaf1's case")..];
    assert!(
        case[..case.find("</testcase>").unwrap()].contains("<failure message=\"suspect: 8 of the 8 links"),
        "{suite}"
    );
    for other in ["leaf2", "leaf3"] {
        let case = &suite[suite.find(&format!("name=\"uplink {other} ↔ spine1\"")).expect("its case")..];
        assert!(!case[..case.find("</testcase>").unwrap()].contains("<failure"), "{other} passes: {suite}");
    }
    assert!(found[0].get("one_way").is_none(), "slow both ways names no way: {found:?}");

    // Slow only from the spine into leaf1, as a bad optic fails: the same
    // uplink, and the way the failing flows went (flows out of leaf1 pass).
    bed.shape_uplink("leaf1", "250mbit/down");
    let bench = Bench::new();
    let (code, output, run) = accept(&bed, &bench, &with_topology);
    assert_eq!(code, Some(3), "a failed check exits with 3:\n{output}");
    let found = blamed(&run);
    assert_eq!(found.len(), 1, "exactly one suspect: {found:?}\n{output}");
    assert_eq!(found[0]["uplinks"], serde_json::json!([{"leaf": "leaf1", "spine": "spine1"}]), "{found:?}");
    let into_leaf1: Vec<(u64, u64)> = {
        let mut flows: Vec<(u64, u64)> = leaf1_to_others.iter().map(|&[a, b]| (b, a)).collect();
        flows.sort();
        flows
    };
    assert_eq!(failed_flows(&run), into_leaf1, "only the flows into leaf1: {}", run["matrix"]);
    assert_eq!(found[0]["one_way"], serde_json::json!([{"from": "spine1", "to": "leaf1"}]), "{found:?}");
    assert!(output.contains("only flows going spine1 → leaf1 failed"), "{output}");
}
