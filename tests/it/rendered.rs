//! Snapshots (insta) of every text fabricbench renders from a run.json, from
//! the fixed runs in tests/fixtures/ (schema versions 1, 2 and 3; how each
//! was made: tests/fixtures/README.md): the terminal summary, summary.md,
//! the CSVs, junit.xml, perftest's tables and `compare`. The terminal text
//! comes from the binary with its output piped, as a script sees it (no
//! terminal, so no width to wrap to). A changed rendering fails here until
//! its snapshot is reviewed (`cargo insta review`, or rerun with
//! INSTA_UPDATE=always and read `git diff`); with CI=true a missing snapshot
//! fails too.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::common::bin;
use fabricbench::report::store::results_dir;
use fabricbench::report::terminal::perftest;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(format!("{name}.json"))
}

/// Everything `fabricbench report` prints and writes for the fixture `name`
/// (in a copy of it: report writes beside its run.json), snapshotted as
/// `name.<file>`. Returns the names of the files it wrote.
fn report(name: &str) -> Vec<String> {
    report_and_page(name).0
}

/// [`report`], and the report.html it wrote.
fn report_and_page(name: &str) -> (Vec<String>, String) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(fixture(name), dir.path().join("run.json")).unwrap();
    let out = Command::new(bin()).arg("report").arg(dir.path()).output().unwrap();
    assert!(out.status.success(), "report {name}: {}", String::from_utf8_lossy(&out.stderr));
    insta::assert_snapshot!(format!("{name}.terminal"), String::from_utf8(out.stdout).unwrap());
    let mut written = Vec::new();
    for file in ["summary.md", "flows.csv", "intervals.csv", "ranks.csv", "junit.xml", "repeats.csv"] {
        let Ok(text) = std::fs::read_to_string(dir.path().join(file)) else { continue };
        insta::assert_snapshot!(format!("{name}.{file}"), text);
        written.push(file.to_string());
    }
    let html = std::fs::read_to_string(dir.path().join("report.html"));
    (written, html.unwrap_or_else(|e| panic!("report {name} wrote no report.html: {e}")))
}

const WITHOUT_CHECKS: [&str; 4] = ["summary.md", "flows.csv", "intervals.csv", "ranks.csv"];
const WITH_CHECKS: [&str; 5] = ["summary.md", "flows.csv", "intervals.csv", "ranks.csv", "junit.xml"];

#[test]
fn v1_fan_in_with_a_latency_probe() {
    assert_eq!(report("v1-fan-in"), WITHOUT_CHECKS);
}

#[test]
fn v2_sweep() {
    assert_eq!(report("v2-sweep"), WITHOUT_CHECKS);
}

#[test]
fn v2_all_pairs_with_checks_and_suspects() {
    assert_eq!(report("v2-all-pairs"), WITH_CHECKS);
}

#[test]
fn v3_fan_in_with_a_latency_probe() {
    assert_eq!(report("v3-fan-in"), WITHOUT_CHECKS);
}

#[test]
fn v3_sweep() {
    assert_eq!(report("v3-sweep"), WITHOUT_CHECKS);
}

/// CPU per thread: the ranks table's data-path and control columns, the
/// stress table's burners beside the measured load.
#[test]
fn v3_sweep_with_cpu_per_thread() {
    assert_eq!(report("v3-cpu-sweep"), WITHOUT_CHECKS);
}

/// A congestion run: each canary isolated then congested, and the
/// Congestion impact table (terminal, summary.md) and section (report.html).
#[test]
fn v3_congestion_impact() {
    let (written, html) = report_and_page("v3-congestion");
    assert_eq!(written, WITHOUT_CHECKS);
    assert!(html.contains("<h2>Congestion impact</h2>") && html.contains("impact tail (×)"), "report.html");
    assert!(html.contains("Congestion impact, mean (× isolated)"), "the chart of the impacts");
}

/// A repeated congestion run: an impact per canary and repeat, then each
/// canary's impacts over the repeats (mean ± 95 % CI), drawn as bars with
/// their intervals.
#[test]
fn v3_repeated_congestion_impact_with_intervals() {
    let mut with_repeats = WITHOUT_CHECKS.to_vec();
    with_repeats.push("repeats.csv");
    let (written, html) = report_and_page("v3-repeats-congestion");
    assert_eq!(written, with_repeats);
    for what in ["mean", "tail"] {
        let title = format!("Congestion impact, {what} (× isolated), mean ± 95 % CI over the repeats");
        assert!(html.contains(&title), "{title}");
    }
    assert!(html.contains("Congestion impact over the repeats"), "the table of the spreads");
}

/// Offered load: a paced background swept over its `rate` beside an
/// open-loop probe: the offered-vs-delivered table, flows.csv's offered
/// columns, and report.html's latency-against-load chart.
#[test]
fn v3_load_latency_sweep_with_offered_load() {
    let (written, html) = report_and_page("v3-load-latency");
    assert_eq!(written, WITHOUT_CHECKS);
    assert!(html.contains("Latency (half round trip) vs offered load"), "the load→latency chart");
    assert!(html.contains("offered background load (Gb/s)") && html.contains("probe p99.9"), "its axis and lines");
    assert!(html.contains("Offered load (rate) vs delivered"), "the table");
}

#[test]
fn v3_rdma_fan_in_with_probes_and_counters() {
    assert_eq!(report("v3-rdma-fan-in"), WITHOUT_CHECKS);
}

/// Three repeats of v3-fan-in's scenario, one of them degraded (not
/// counted): the repeats table, repeats.csv.
#[test]
fn v3_repeats_of_a_fan_in() {
    let mut with_repeats = WITHOUT_CHECKS.to_vec();
    with_repeats.push("repeats.csv");
    assert_eq!(report("v3-repeats-fan-in"), with_repeats);
}

/// A sweep of two points, three interleaved repeats each: the sweep's
/// mean ± interval.
#[test]
fn v3_repeats_of_a_sweep() {
    let mut with_repeats = WITHOUT_CHECKS.to_vec();
    with_repeats.push("repeats.csv");
    assert_eq!(report("v3-repeats-sweep"), with_repeats);
}

/// A soak: the Flaps tables (per flow its median, lowest interval, dips
/// and their time; per link event its host, device, start and length).
#[test]
fn v3_soak_with_its_flaps() {
    assert_eq!(report("v3-soak"), WITHOUT_CHECKS);
}

/// A phase with rank 2 frozen across its window's opening: degraded, each
/// reason a line, its checks unknown.
#[test]
fn v3_degraded_with_its_checks_unknown() {
    assert_eq!(report("v3-degraded"), WITH_CHECKS);
}

/// A run behind the node gate, one host left out for a device it lacks:
/// the gate's verdict line and table (profile, each host PASS or EXCLUDED
/// with its reasons, its loopback and the minimum in Gb/s) in the
/// terminal summary, summary.md, junit.xml, and at the top of report.html.
#[test]
fn v3_gate_with_a_host_left_out() {
    let (written, html) = report_and_page("v3-gate");
    assert_eq!(written, WITH_CHECKS);
    // The gate comes before the phases: the page from its first banner to them.
    let start = html.find("<div class=\"banner").expect("a verdict banner");
    let end = html.find("<h2>Phases</h2>").expect("the phases");
    insta::assert_snapshot!("v3-gate.report.html-gate", &html[start..end]);
}

/// An all-pairs run on two leaves of one spine (`--topology`) whose links
/// between the leaves ran slow: the uplinks are one suspect, and
/// report.html draws the tree with both uplinks marked (red, dashed) and a
/// tooltip per uplink naming its pairs crossed, failed and the worst Gb/s.
#[test]
fn v3_topology_with_a_suspect_uplink() {
    let (written, html) = report_and_page("v3-topology");
    assert_eq!(written, WITH_CHECKS);
    let start = html.find("<h2>Fabric tree</h2>").expect("the tree");
    let end = start + html[start..].find("</figure>").expect("its end");
    let tree = &html[start..end];
    assert_eq!(tree.matches("stroke-dasharray").count(), 2, "both uplinks are the suspect: {tree}");
    insta::assert_snapshot!("v3-topology.report.html-tree", tree);
    // Each uplink's cables, written since (this file has none): leaf1's four labelled "×4", and
    // the count in both tooltips.
    let mut run: serde_json::Value = serde_json::from_slice(&std::fs::read(fixture("v3-topology")).unwrap()).unwrap();
    run["acceptance"]["uplinks"][0]["cables"] = 4.into();
    run["acceptance"]["uplinks"][1]["cables"] = 1.into();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("run.json"), run.to_string()).unwrap();
    let out = Command::new(bin()).arg("report").arg(dir.path()).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let html = std::fs::read_to_string(dir.path().join("report.html")).unwrap();
    let start = html.find("<h2>Fabric tree</h2>").expect("the tree");
    let end = start + html[start..].find("</figure>").expect("its end");
    insta::assert_snapshot!("v3-topology-cables.report.html-tree", &html[start..end]);
    // Without a topology there is no tree.
    let (_, plain) = report_and_page("v3-fan-in");
    assert!(!plain.contains("Fabric tree"));
}

/// The TCP pairs, and the RDMA run for the header perftest prints from a
/// probed port (device, link type, MTU).
#[test]
fn v3_runs_as_perftest_tables() {
    for name in ["v3-pair-bw", "v3-pair-lat", "v3-rdma-fan-in"] {
        let run = results_dir::read(&fixture(name)).unwrap();
        insta::assert_snapshot!(format!("{name}.perftest-MBps"), perftest::render(&run, false));
        insta::assert_snapshot!(format!("{name}.perftest-Gbps"), perftest::render(&run, true));
    }
}

/// `compare`'s stdout, stderr (paths left out) and exit code.
fn compare(base: &str, new: &str, tolerance: &str) -> String {
    let out: Output = Command::new(bin())
        .args(["compare", "--tolerance", tolerance])
        .arg(fixture(base))
        .arg(fixture(new))
        .output()
        .unwrap();
    // 0: no regression, 3: a regression; anything else (2: a fixture it cannot read) is a failure.
    assert!(matches!(out.status.code(), Some(0 | 3)), "compare {base} {new}: {}", String::from_utf8_lossy(&out.stderr));
    format!(
        "exit code {:?}\n--- stdout\n{}--- stderr\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn compare_a_v1_baseline_with_a_v3_run() {
    insta::assert_snapshot!("compare.v1-fan-in.v3-fan-in", compare("v1-fan-in", "v3-fan-in", "5%"));
}

#[test]
fn compare_a_v3_run_with_a_v1_baseline_within_a_wide_tolerance() {
    insta::assert_snapshot!(
        "compare.v3-fan-in.v1-fan-in.wide",
        compare("v3-fan-in", "v1-fan-in", "90%,latency=300%,cpu=400%")
    );
}

#[test]
fn compare_runs_of_different_scenarios() {
    insta::assert_snapshot!("compare.v2-all-pairs.v3-sweep", compare("v2-all-pairs", "v3-sweep", "5%"));
}

/// One run repeated, the other not: today's rule, and the output says so.
#[test]
fn compare_a_run_once_with_its_repeats() {
    insta::assert_snapshot!("compare.v3-fan-in.v3-repeats-fan-in", compare("v3-fan-in", "v3-repeats-fan-in", "5%"));
}

/// Both repeated: intervals beside each mean, and the rule in the title.
#[test]
fn compare_repeated_runs() {
    insta::assert_snapshot!(
        "compare.v3-repeats-sweep.v3-repeats-sweep",
        compare("v3-repeats-sweep", "v3-repeats-sweep", "5%")
    );
}

/// The terminal summary on a terminal 80 and 120 columns wide (what
/// `run` and `report` print to one): snapshots of the fan-in run, and for
/// every fixture, lines that fit and numbers that are never split.
#[test]
fn the_terminal_summary_fits_80_and_120_columns() {
    for width in [80, 120] {
        let fan_in = fitted("v3-fan-in", width);
        insta::assert_snapshot!(format!("v3-fan-in.terminal.{width}"), fan_in);
    }
    let fixtures = std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")).unwrap();
    let names: Vec<String> =
        fixtures.filter_map(|e| e.unwrap().file_name().to_str()?.strip_suffix(".json").map(str::to_string)).collect();
    assert!(names.len() >= 10, "{names:?}");
    for name in names {
        for width in [80, 120] {
            fitted(&name, width);
        }
    }
}

/// `name`'s summary at `width`, checked against the summary drawn
/// unfitted: no line is wider than `width`, no word (so no number) is
/// split, and a cell that holds a digit is a whole cell unless it is a line
/// of longer text (over 3 words: a note, `1 (a) → 0 (b)`) wrapped between
/// words.
fn fitted(name: &str, width: u16) -> String {
    let run = results_dir::read(&fixture(name)).unwrap();
    let text = fabricbench::report::terminal::render(&run, Some(width));
    for line in text.lines() {
        assert!(line.chars().count() <= usize::from(width), "{name} at {width}: a wider line\n{line}\n{text}");
    }
    let whole = body_cells(&fabricbench::report::terminal::render(&run, None));
    let words: std::collections::HashSet<&str> = whole.iter().flat_map(|c| c.split_whitespace()).collect();
    for cell in body_cells(&text) {
        for word in cell.split_whitespace() {
            assert!(words.contains(word), "{name} at {width}: `{word}` is part of a word\n{text}");
        }
        let wrapped_text = || whole.iter().any(|w| w.split_whitespace().count() > 3 && w.contains(&cell));
        if cell.chars().any(|c| c.is_ascii_digit()) && !whole.contains(&cell) {
            assert!(wrapped_text(), "{name} at {width}: `{cell}` is part of a value\n{text}");
        }
    }
    text
}

/// The trimmed cells of every table body line (`│ a ┆ b │`) of a summary.
fn body_cells(text: &str) -> std::collections::HashSet<String> {
    let mut in_body = false;
    let mut cells = std::collections::HashSet::new();
    for line in text.lines() {
        in_body = match line.chars().next() {
            Some('╞') => true,
            Some('│') => in_body,
            _ => false,
        };
        if in_body && line.starts_with('│') {
            cells.extend(line.trim_matches('│').split('┆').map(|c| c.trim().to_string()));
        }
    }
    cells
}
