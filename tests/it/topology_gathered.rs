//! `run --topology lldp`: a launch of the run's workers gathers each host's
//! `lldpctl -f json` in its probe before the run is planned, and the run is
//! planned and reported on the topology built from them. lldpd
//! itself is not run (loopback carries no LLDP frames): a double stands at
//! lldpctl's interface (tests/doubles/lldp/lldpctl, first on PATH), printing
//! the recorded neighbours of tests/fixtures/topology/fat-tree-lldp, rank N
//! those of node0<N+1>, on eight local ranks (127.0.0.1-8).

use std::path::{Path, PathBuf};

use std::time::Duration;

use fabricbench::plan::{self, Fabric};
use fabricbench::result::leaf_pairs::LeafPairs;
use fabricbench::result::RunResult;
use fabricbench::{hostfile, scenario, topology};

use crate::common::{text, Bench};

const SCENARIO: &str = "[run]\nname = \"gathered\"\nduration = \"500ms\"\nwarmup = \"0s\"\n\n[[group]]\n\
                        name = \"incast\"\npattern = \"fan-in\"\ntransport = \"tcp\"\nmessage_size = \"64K\"\n\
                        receivers = 0\nsenders = \"1-7\"\n";
/// Pairs chosen by the topology: only those whose hosts are under different leaves.
const ACROSS: &str = "[run]\nname = \"across\"\nduration = \"500ms\"\nwarmup = \"0s\"\n\n[[group]]\n\
                      name = \"across\"\npattern = \"pairwise\"\ntransport = \"tcp\"\nmessage_size = \"64K\"\n\
                      across = \"leaf\"\n";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn fixtures() -> PathBuf {
    root().join("tests/fixtures/topology/fat-tree-lldp")
}

/// The same texts as files named after the local hosts, read as a folder (without links.toml:
/// hosts' LLDP says nothing of the links between switches).
fn from_files(bench: &Bench) -> topology::Topology {
    let files = bench.dir.path().join("lldp-files");
    std::fs::create_dir(&files).unwrap();
    for rank in 0..8 {
        let from = fixtures().join(format!("node0{}.json", rank + 1));
        std::fs::copy(from, files.join(format!("127.0.0.{}.json", rank + 1))).unwrap();
    }
    topology::read(&files, None).unwrap()
}

/// `run --topology lldp` of `scenario` on eight local ranks with the double first on PATH,
/// and `env` set after that.
fn gathered(bench: &Bench, scenario: &str, env: &[(&str, &str)], save: &[&str]) -> std::process::Output {
    let scenario = bench.write("gathered.toml", scenario);
    let hosts = root().join("hostfiles/local8");
    let path = format!("{}:{}", root().join("tests/doubles/lldp").display(), std::env::var("PATH").unwrap_or_default());
    let args = ["run", scenario.to_str().unwrap(), "-H", hosts.to_str().unwrap(), "--topology", "lldp"];
    let mut command = bench.command(&[&args[..], &["--export-json", "-", "--quiet"], save].concat());
    command.env("PATH", path).env("FAKE_LLDPCTL_DIR", fixtures());
    command.envs(env.iter().copied());
    command.output().expect("run fabricbench")
}

#[test]
fn the_topology_the_workers_gather_is_the_one_their_files_give() {
    let bench = Bench::new();
    let out = gathered(&bench, SCENARIO, &[], &["--no-save"]);
    let run = measured(&out);
    let from_files = from_files(&bench);
    let mut expected = LeafPairs::new(Path::new("lldp"), &run.plan, &from_files);
    expected.summarize(&run.plan, &run.phases);
    let got = run.leaf_pairs.as_ref().expect("leaf pairs");
    assert_eq!((&got.topology, &got.rank_leaves), (&expected.topology, &expected.rank_leaves), "every rank's leaf");
    // The rates between them, from the flows as run.json's text gave them back (to the last bit or so).
    assert_eq!(got.rows.len(), expected.rows.len(), "{got:?}");
    for (row, want) in got.rows.iter().zip(&expected.rows) {
        assert_eq!((&row.leaf_a, &row.leaf_b, row.flows), (&want.leaf_a, &want.leaf_b, want.flows));
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.abs();
        let rates = [(row.min_gbps, want.min_gbps), (row.median_gbps, want.median_gbps), (row.max_gbps, want.max_gbps)];
        assert!(rates.iter().all(|&(a, b)| close(a, b)), "{row:?} against {want:?}");
    }
    let leaves = &got.rank_leaves;
    assert_eq!(leaves, &["leaf1", "leaf1", "leaf1", "leaf1", "leaf2", "leaf2", "leaf2", "leaf2"]);
}

#[test]
fn a_host_whose_lldpctl_fails_is_named_with_its_error() {
    let bench = Bench::new();
    let out = gathered(&bench, SCENARIO, &[("FAKE_LLDPCTL_FAIL_RANK", "5")], &["--no-save"]);
    let failed = "--topology lldp: host 127.0.0.6: `lldpctl -f json` failed (exit status: 1): lldpctl: unable to \
                  connect to socket";
    refused_before_measuring(&bench, &out, [failed, "is lldpd running"]);
}

/// The run's result: it ran to its end, its window trusted or not (eight ranks on a
/// loaded machine may start further apart than a short window allows: exit 4, degraded).
fn measured(out: &std::process::Output) -> RunResult {
    assert!(matches!(out.status.code(), Some(0 | 4)), "{}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("run.json on stdout")
}

/// The command ended as the hosts' setup (exit 2), saying both `said`,
/// before anything was measured and with no worker left.
fn refused_before_measuring(bench: &Bench, out: &std::process::Output, said: [&str; 2]) {
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "the hosts' setup, before any measurement: {stderr}");
    assert!(out.stdout.is_empty(), "nothing was measured: {}", text(&out.stdout));
    for words in said {
        assert!(stderr.contains(words), "`{words}` in: {stderr}");
    }
    assert_eq!(bench.leftovers(Duration::from_secs(5)), [], "every worker of the gathering launch ended");
}

#[test]
fn hosts_without_lldpctl_are_named_with_what_to_install() {
    let bench = Bench::new();
    // No lldpctl anywhere on PATH (the workers are started by their full path).
    let out = gathered(&bench, ACROSS, &[("PATH", "/nonexistent")], &["--no-save"]);
    let missing = "--topology lldp: host 127.0.0.1: cannot run `lldpctl -f json`: ";
    refused_before_measuring(&bench, &out, [missing, "install lldpd"]);
}

#[test]
fn pairs_are_chosen_by_the_gathered_topology_as_by_its_files() {
    let bench = Bench::new();
    let out = gathered(&bench, ACROSS, &[], &[]);
    let run = measured(&out);
    // The plan a folder of the same texts gives, pair for pair.
    let hosts = hostfile::read(&root().join("hostfiles/local8")).unwrap();
    let (scenario, _) = scenario::read(&bench.dir.path().join("gathered.toml")).unwrap();
    let files = from_files(&bench);
    let expected = plan::build_on(&hosts, &scenario, Some(&Fabric::new(&files, &hosts))).unwrap();
    assert_eq!(run.plan, expected);
    let leaves = &run.leaf_pairs.as_ref().expect("leaf pairs").rank_leaves;
    let flows: Vec<_> = run.plan.phases.iter().flat_map(|p| &p.flows).collect();
    assert_eq!(flows.len(), 4, "pairwise: each host in one pair");
    assert!(flows.iter().all(|f| leaves[f.src] != leaves[f.dst]), "every pair crosses leaves: {leaves:?}");
    // The report draws the fabric tree of the gathered leaves.
    let html = std::fs::read_to_string(bench.result_dir().join("report.html")).unwrap();
    let tree = &html[html.find("<h2>Fabric tree</h2>").expect("the fabric tree")..];
    assert!(tree.contains(">leaf1<") && tree.contains(">leaf2<") && tree.contains("127.0.0.8"), "{tree}");
    assert_eq!(bench.leftovers(Duration::from_secs(5)), [], "no worker of either launch is left");
}

#[test]
fn plan_cannot_gather_and_says_so_with_exit_2() {
    let bench = Bench::new();
    let scenario = bench.write("gathered.toml", SCENARIO);
    let hosts = root().join("hostfiles/local8");
    let out = bench.run(&["plan", scenario.to_str().unwrap(), "-H", hosts.to_str().unwrap(), "--topology", "lldp"]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("`plan` starts no workers: give a folder of `lldpctl -f json` files"), "{stderr}");
}
