//! `run --topology lldp`: each worker runs `lldpctl -f json` in its probe
//! and rank 0's launcher builds the topology from what they sent. lldpd
//! itself is not run (loopback carries no LLDP frames): a double stands at
//! lldpctl's interface (tests/doubles/lldp/lldpctl, first on PATH), printing
//! the recorded neighbours of tests/fixtures/topology/fat-tree-lldp, rank N
//! those of node0<N+1>, on eight local ranks (127.0.0.1-8).

use std::path::{Path, PathBuf};

use fabricbench::result::leaf_pairs::LeafPairs;
use fabricbench::result::RunResult;
use fabricbench::topology;

use crate::common::{text, Bench};

const SCENARIO: &str = "[run]\nname = \"gathered\"\nduration = \"500ms\"\nwarmup = \"0s\"\n\n[[group]]\n\
                        name = \"incast\"\npattern = \"fan-in\"\ntransport = \"tcp\"\nmessage_size = \"64K\"\n\
                        receivers = 0\nsenders = \"1-7\"\n";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn fixtures() -> PathBuf {
    root().join("tests/fixtures/topology/fat-tree-lldp")
}

/// `run --topology lldp` on eight local ranks with the double first on PATH.
fn gathered(bench: &Bench, fail_rank: Option<usize>) -> std::process::Output {
    let scenario = bench.write("gathered.toml", SCENARIO);
    let hosts = root().join("hostfiles/local8");
    let path = format!("{}:{}", root().join("tests/doubles/lldp").display(), std::env::var("PATH").unwrap_or_default());
    let args = ["run", scenario.to_str().unwrap(), "-H", hosts.to_str().unwrap(), "--topology", "lldp"];
    let mut command = bench.command(&[&args[..], &["--export-json", "-", "--no-save", "--quiet"]].concat());
    command.env("PATH", path).env("FAKE_LLDPCTL_DIR", fixtures());
    if let Some(rank) = fail_rank {
        command.env("FAKE_LLDPCTL_FAIL_RANK", rank.to_string());
    }
    command.output().expect("run fabricbench")
}

#[test]
fn the_topology_the_workers_gather_is_the_one_their_files_give() {
    let bench = Bench::new();
    let out = gathered(&bench, None);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let run: RunResult = serde_json::from_slice(&out.stdout).expect("run.json on stdout");
    // The same texts as files named after the local hosts, read as a folder (without links.toml:
    // hosts' LLDP says nothing of the links between switches).
    let files = bench.dir.path().join("lldp-files");
    std::fs::create_dir(&files).unwrap();
    for rank in 0..8 {
        let from = fixtures().join(format!("node0{}.json", rank + 1));
        std::fs::copy(from, files.join(format!("127.0.0.{}.json", rank + 1))).unwrap();
    }
    let from_files = topology::read(&files, None).unwrap();
    let mut expected = LeafPairs::new(Path::new("lldp"), &run.plan, &from_files);
    expected.summarize(&run.plan, &run.phases);
    assert_eq!(run.leaf_pairs, Some(expected), "the leaves of every rank, and the rates between them");
    let leaves = &run.leaf_pairs.as_ref().unwrap().rank_leaves;
    assert_eq!(leaves, &["leaf1", "leaf1", "leaf1", "leaf1", "leaf2", "leaf2", "leaf2", "leaf2"]);
}

#[test]
fn a_host_whose_lldpctl_fails_is_named_with_its_error() {
    let bench = Bench::new();
    let out = gathered(&bench, Some(5));
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "the run failed: {stderr}");
    assert!(
        stderr.contains("--topology lldp: host 127.0.0.6: `lldpctl -f json` failed (exit status: 1): lldpctl: unable to connect to socket"),
        "{stderr}"
    );
    assert!(stderr.contains("is lldpd running"), "{stderr}");
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
