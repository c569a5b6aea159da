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

/// `run --topology lldp` of `scenario` on eight local ranks with the double first on PATH.
fn gathered(bench: &Bench, scenario: &str, fail_rank: Option<usize>, save: &[&str]) -> std::process::Output {
    let scenario = bench.write("gathered.toml", scenario);
    let hosts = root().join("hostfiles/local8");
    let path = format!("{}:{}", root().join("tests/doubles/lldp").display(), std::env::var("PATH").unwrap_or_default());
    let args = ["run", scenario.to_str().unwrap(), "-H", hosts.to_str().unwrap(), "--topology", "lldp"];
    let mut command = bench.command(&[&args[..], &["--export-json", "-", "--quiet"], save].concat());
    command.env("PATH", path).env("FAKE_LLDPCTL_DIR", fixtures());
    if let Some(rank) = fail_rank {
        command.env("FAKE_LLDPCTL_FAIL_RANK", rank.to_string());
    }
    command.output().expect("run fabricbench")
}

#[test]
fn the_topology_the_workers_gather_is_the_one_their_files_give() {
    let bench = Bench::new();
    let out = gathered(&bench, SCENARIO, None, &["--no-save"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let run: RunResult = serde_json::from_slice(&out.stdout).expect("run.json on stdout");
    let from_files = from_files(&bench);
    let mut expected = LeafPairs::new(Path::new("lldp"), &run.plan, &from_files);
    expected.summarize(&run.plan, &run.phases);
    assert_eq!(run.leaf_pairs, Some(expected), "the leaves of every rank, and the rates between them");
    let leaves = &run.leaf_pairs.as_ref().unwrap().rank_leaves;
    assert_eq!(leaves, &["leaf1", "leaf1", "leaf1", "leaf1", "leaf2", "leaf2", "leaf2", "leaf2"]);
}

#[test]
fn a_host_whose_lldpctl_fails_is_named_with_its_error() {
    let bench = Bench::new();
    let out = gathered(&bench, SCENARIO, Some(5), &["--no-save"]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "the hosts' setup, before any measurement: {stderr}");
    assert!(out.stdout.is_empty(), "nothing was measured: {}", text(&out.stdout));
    assert!(
        stderr.contains("--topology lldp: host 127.0.0.6: `lldpctl -f json` failed (exit status: 1): lldpctl: unable to connect to socket"),
        "{stderr}"
    );
    assert!(stderr.contains("is lldpd running"), "{stderr}");
    assert_eq!(bench.leftovers(Duration::from_secs(5)), [], "every worker of the gathering launch ended");
}

#[test]
fn hosts_without_lldpctl_are_named_with_what_to_install() {
    let bench = Bench::new();
    let scenario = bench.write("gathered.toml", ACROSS);
    let hosts = root().join("hostfiles/local8");
    let args = ["run", scenario.to_str().unwrap(), "-H", hosts.to_str().unwrap(), "--topology", "lldp", "--no-save"];
    // No lldpctl anywhere on PATH (the workers are started by their full path).
    let out = bench.command(&args).env("PATH", "/nonexistent").output().expect("run fabricbench");
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--topology lldp: host 127.0.0.1: cannot run `lldpctl -f json`: "), "{stderr}");
    assert!(stderr.contains("install lldpd"), "{stderr}");
    assert_eq!(bench.leftovers(Duration::from_secs(5)), [], "every worker of the gathering launch ended");
}

#[test]
fn pairs_are_chosen_by_the_gathered_topology_as_by_its_files() {
    let bench = Bench::new();
    let out = gathered(&bench, ACROSS, None, &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let run: RunResult = serde_json::from_slice(&out.stdout).expect("run.json on stdout");
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
