//! `compare` on real runs of the test bed whose links differ: a flow into
//! h2 at 200 Mbit/s, then at 100 Mbit/s (tc tbf on h2's switch port), is
//! named with its drop; a ping-pong h1 → h2 that then shares that port
//! with a bandwidth flow (its requests wait in the tbf queue: this kernel
//! has no netem) is a latency regression, and the other way round better.

use crate::common;

use std::path::{Path, PathBuf};

use common::testbed::Bed;
use common::{text, Bench};
use fabricbench::report::compare::{compare, Delta, Row, Tolerances};
use fabricbench::report::store::results_dir;
use fabricbench::result::Metric;

const BANDWIDTH: &str = "[run]\nname = \"bw\"\nduration = \"2s\"\nwarmup = \"500ms\"\ninterval = \"500ms\"\n\n\
     [[group]]\nname = \"into-h2\"\npattern = \"explicit\"\nflows = [[0, 1]]\nmessage_size = \"128K\"\n";
const LATENCY: &str = "[run]\nname = \"lat\"\nduration = \"2s\"\nwarmup = \"500ms\"\ninterval = \"500ms\"\n\n\
     [[group]]\nname = \"ping\"\npattern = \"explicit\"\nmode = \"latency\"\nflows = [[0, 1]]\nmessage_size = 64\n";
/// The same ping beside a flow that fills h2's link: same phase, group and hosts.
const LOADED: &str = "[run]\nname = \"lat\"\nduration = \"2s\"\nwarmup = \"500ms\"\ninterval = \"500ms\"\n\n\
     [[group]]\nname = \"ping\"\npattern = \"explicit\"\nmode = \"latency\"\nflows = [[0, 1]]\nmessage_size = 64\n\n\
     [[group]]\nname = \"load\"\npattern = \"explicit\"\nflows = [[0, 1]]\nmessage_size = \"128K\"\n";

/// Runs `scenario` on the bed; its run.json goes to `name`.json.
fn run(bed: &Bed, bench: &Bench, scenario: &Path, name: &str) -> PathBuf {
    let json = bench.dir.path().join(format!("{name}.json"));
    let mut args =
        vec!["run".to_string(), scenario.display().to_string(), "-H".into(), bed.hostfile.display().to_string()];
    args.extend(bed.ssh_args());
    args.extend(["--no-save".into(), "--quiet".into(), "--export-json".into(), json.display().to_string()]);
    let out = bench.run(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(out.status.success(), "{name}: {}", text(&out.stderr));
    json
}

/// `fabricbench compare`: exit code and stdout + stderr.
fn cli(bench: &Bench, base: &Path, new: &Path, tolerance: &str) -> (Option<i32>, String) {
    let out = bench.run(&["compare", base.to_str().unwrap(), new.to_str().unwrap(), "--tolerance", tolerance]);
    (out.status.code(), text(&out.stdout) + &text(&out.stderr))
}

fn rows(base: &Path, new: &Path, tolerance: &str) -> Vec<Row> {
    let (base, new) = (results_dir::read(base).expect("base"), results_dir::read(new).expect("new"));
    compare(&base, &new, tolerance.parse::<Tolerances>().expect("tolerance")).rows
}

fn row<'a>(rows: &'a [Row], item: &str, metric: Metric) -> &'a Row {
    rows.iter().find(|r| r.item == item && r.metric == metric).unwrap_or_else(|| panic!("{item} {metric:?}: {rows:?}"))
}

#[test]
fn a_halved_link_and_a_queue_behind_a_flow_are_named_regressions() {
    let Some(bed) = Bed::up(2, &["--shape", "h2=200mbit/in"]) else { return };
    let bench = Bench::new();
    let (bandwidth, latency) = (bench.write("bw.toml", BANDWIDTH), bench.write("lat.toml", LATENCY));
    let base_bw = run(&bed, &bench, &bandwidth, "base-bw");
    let base_lat = run(&bed, &bench, &latency, "base-lat");
    bed.shape("h2=100mbit/in");
    let new_bw = run(&bed, &bench, &bandwidth, "new-bw");
    let loaded = bench.write("loaded.toml", LOADED);
    let new_lat = run(&bed, &bench, &loaded, "new-lat");

    // 200 → 100 Mbit/s: the flow and the aggregate regressed by about half, named with their drop.
    let (code, output) = cli(&bench, &base_bw, &new_bw, "gbps=5%,cpu=1000%");
    println!("{output}"); // what a user reads, kept in the test's log
    assert_eq!(code, Some(3), "{output}");
    assert!(output.contains("Regressions") && output.contains("bw: into-h2 h1 → h2 bandwidth"), "{output}");
    let bw = rows(&base_bw, &new_bw, "gbps=5%,cpu=1000%");
    for item in ["bw: into-h2 h1 → h2", "bw: aggregate"] {
        let r = row(&bw, item, Metric::Gbps);
        assert_eq!(r.delta, Delta::Regression, "{r:?}");
        let drop = r.change_pct().unwrap();
        assert!((-60.0..=-40.0).contains(&drop), "half the link, about half the Gb/s: {r:?}");
        assert!(output.contains(&format!("({drop:+.1}%)")), "the drop is in the message: {output}");
    }
    // The other way round the flow got better, and nothing regressed.
    let (code, output) = cli(&bench, &new_bw, &base_bw, "gbps=5%,cpu=1000%");
    assert_eq!(code, Some(0), "{output}");
    assert_eq!(row(&rows(&new_bw, &base_bw, "5%"), "bw: into-h2 h1 → h2", Metric::Gbps).delta, Delta::Better);

    // Behind a full queue: the tail of the half round trip is worse. (Not
    // the typical: TCP's sawtooth leaves tbf's queue empty much of the
    // time, and on a VM's idle vCPUs the unloaded ping pays a wake-up the
    // loaded one does not: 34 µs alone, 3.6 µs beside the load, once.)
    let (code, output) = cli(&bench, &base_lat, &new_lat, "latency=10%,cpu=1000%");
    println!("{output}");
    assert_eq!(code, Some(3), "{output}");
    assert!(output.contains("lat: ping h1 → h2 latency p99"), "{output}");
    let lat = rows(&base_lat, &new_lat, "latency=10%,cpu=1000%");
    for metric in [Metric::LatencyP99, Metric::LatencyP999] {
        let r = row(&lat, "lat: ping h1 → h2", metric);
        assert_eq!(r.delta, Delta::Regression, "{r:?}");
        assert!(r.new.unwrap() > r.base.unwrap(), "{r:?}");
    }
    assert_eq!(row(&lat, "lat: load h1 → h2", Metric::Gbps).delta, Delta::OnlyNew);
    assert!(
        !lat.iter().any(|r| r.item == "lat: ping h1 → h2" && r.metric == Metric::Gbps),
        "a latency flow has no Gb/s row"
    );
    // Less latency is better, not a regression.
    let back = rows(&new_lat, &base_lat, "latency=10%,cpu=1000%");
    let p99 = row(&back, "lat: ping h1 → h2", Metric::LatencyP99);
    assert_eq!(p99.delta, Delta::Better, "{p99:?}");
}
