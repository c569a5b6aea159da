//! An ibnetdiscover dump whose HCA node descriptions name no host (the
//! firmware's `MT4123 ConnectX6 Mellanox Technologies`, as on a fabric where
//! nothing set them): `run` probes the hosts first and places each HCA on
//! the host that reports its node GUID, as that device. No InfiniBand port
//! is at hand, so the hosts' devices are recorded sysfs trees
//! (FABRICBENCH_SYSFS_ROOT): `two-nics` holds node03's two HCAs of
//! tests/fixtures/topology/rails.ibnetdiscover, `mlx5-ib` an HCA the dump
//! does not have. The ranks are local (127.0.0.x) and move TCP.

use std::path::{Path, PathBuf};
use std::time::Duration;

use fabricbench::result::RunResult;

use crate::common::{text, Bench};

/// Two ranks of one host, rank 1 sending to rank 0.
const PAIR: &str = "[run]\nname = \"by-guid\"\nduration = \"300ms\"\nwarmup = \"0s\"\n\n[[group]]\n\
                    name = \"rail-to-rail\"\npattern = \"fan-in\"\ntransport = \"tcp\"\nmessage_size = \"64K\"\n\
                    receivers = 0\nsenders = \"1\"\n";

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// The two-rail dump with every HCA's description the firmware's default.
fn nameless_dump(bench: &Bench) -> PathBuf {
    let text = std::fs::read_to_string(fixtures().join("topology/rails.ibnetdiscover")).unwrap();
    let text = (1..=4).fold(text, |text, n| {
        (0..2).fold(text, |t, k| t.replace(&format!("node0{n} mlx5_{k}"), "MT4123 ConnectX6 Mellanox Technologies"))
    });
    bench.write("fabric.ibnetdiscover", &text)
}

/// `fabricbench COMMAND` of PAIR on `hostfile`, the hosts' devices those of
/// the recorded tree `tree`.
fn on_tree(bench: &Bench, command: &str, hostfile: &str, tree: &str) -> std::process::Output {
    let scenario = bench.write("pair.toml", PAIR);
    let hosts = bench.write("hosts", hostfile);
    let dump = nameless_dump(bench);
    let mut args = vec![command, scenario.to_str().unwrap(), "-H", hosts.to_str().unwrap()];
    args.extend(["--topology", dump.to_str().unwrap()]);
    if command == "run" {
        args.extend(["--no-save", "--export-json", "-"]);
    }
    let tree = fixtures().join("hosts").join(tree).join("sys");
    bench.command(&args).env("FABRICBENCH_SYSFS_ROOT", tree).output().expect("run fabricbench")
}

#[test]
fn each_rank_is_placed_on_the_rail_of_the_hca_its_host_reports() {
    let bench = Bench::new();
    let out = on_tree(&bench, "run", "127.0.0.1 slots=2 devices=mlx5_0,mlx5_1\n", "two-nics");
    let stderr = text(&out.stderr);
    assert!(matches!(out.status.code(), Some(0 | 4)), "{stderr}");
    assert!(
        stderr.contains("fabric.ibnetdiscover: 2 HCA(s) placed by the node GUIDs their hosts reported"),
        "{stderr}"
    );
    // node03's ports on both rail leaves, now named as the host's devices.
    assert!(stderr.contains("127.0.0.1:mlx5_0 port 3") && stderr.contains("127.0.0.1:mlx5_1 port 3"), "{stderr}");
    // The HCAs no host of the run reported, by their ids: their one description names no host.
    assert!(
        stderr.contains("leaf rail0 (4 host(s), ×2 cables): 127.0.0.1:mlx5_0 port 3, H-0002c90300c00100,"),
        "{stderr}"
    );
    let run: RunResult = serde_json::from_slice(&out.stdout).expect("run.json on stdout");
    let leaves = &run.leaf_pairs.as_ref().expect("leaf pairs").rank_leaves;
    assert_eq!(leaves, &["rail0", "rail1"], "rank k on the leaf of its NIC k");
    let guids: Vec<String> =
        run.probes[0].facts.as_ref().unwrap().rdma_devices.iter().map(|d| d.node_guid.unwrap().to_string()).collect();
    assert_eq!(guids, ["0x0002c90300c00300", "0x0002c90300c10300"], "run.json keeps what placed them");
    assert_eq!(bench.leftovers(Duration::from_secs(5)), [], "no worker of either launch is left");
}

#[test]
fn one_guid_reported_by_two_hosts_is_refused_naming_both() {
    let bench = Bench::new();
    // Both hosts read the same tree: the same GUIDs.
    let hostfile = "127.0.0.1 devices=mlx5_0\n127.0.0.2 devices=mlx5_0\n";
    let out = on_tree(&bench, "run", hostfile, "two-nics");
    refused(
        &bench,
        &out,
        &["node GUID 0x0002c90300c00300 is reported by host 127.0.0.1's mlx5_0 and by host 127.0.0.2's mlx5_0"],
    );
}

/// The run ended as bad input (exit 2), saying each of `said`, before
/// anything was measured and with no worker of the gathering launch left.
fn refused(bench: &Bench, out: &std::process::Output, said: &[&str]) {
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    for words in said {
        assert!(stderr.contains(words), "`{words}` in: {stderr}");
    }
    assert!(out.stdout.is_empty(), "nothing was measured");
    assert_eq!(bench.leftovers(Duration::from_secs(5)), [], "every worker of the gathering launch ended");
}

#[test]
fn a_host_whose_hcas_the_dump_lacks_is_named_with_its_guids() {
    let bench = Bench::new();
    let out = on_tree(&bench, "run", "127.0.0.1 slots=2\n", "mlx5-ib");
    refused(
        &bench,
        &out,
        &[
            "host `127.0.0.1` of the hostfile is not placed by the topology",
            "; nor by node GUID: the devices 127.0.0.1 reported with theirs: mlx5_0 0xb8cef60300f12a3c",
        ],
    );
}

#[test]
fn plan_says_that_only_run_places_by_guid() {
    let bench = Bench::new();
    let out = on_tree(&bench, "plan", "127.0.0.1 slots=2 devices=mlx5_0,mlx5_1\n", "two-nics");
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("`run` places the HCAs of such a topology by the node GUIDs the hosts report, and `plan`"),
        "{stderr}"
    );
}
