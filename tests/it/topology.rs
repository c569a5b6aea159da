//! The topology input: one fat tree recorded in all three forms reads as
//! one model, a two-rail fabric places each NIC on its rail's leaf, and
//! `plan --topology` prints it or names the unplaced host or NIC.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use fabricbench::topology::{self, Format, Level, SwitchName, Topology, Uplink};

use crate::common::Bench;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/topology").join(name)
}

/// Each host's leaves: NICs aside (TOML names none, and LLDP's node01
/// has two on one leaf), what the forms share.
fn placement(t: &Topology) -> BTreeMap<String, BTreeSet<SwitchName>> {
    t.hosts.iter().map(|(h, a)| (h.clone(), a.iter().map(|a| a.leaf.clone()).collect())).collect()
}

/// The tree's lines without what is cabled to each leaf.
fn heads(tree: &str) -> Vec<&str> {
    tree.lines().map(|line| line.split_once("): ").map_or(line, |(head, _)| head)).collect()
}

fn name(s: &str) -> SwitchName {
    SwitchName(s.to_string())
}

#[test]
fn the_three_forms_of_one_fat_tree_read_as_one_topology() {
    let toml = topology::read(&fixture("fat-tree.toml"), None).unwrap();
    let ib = topology::read(&fixture("fat-tree.ibnetdiscover"), None).unwrap();
    let lldp = topology::read(&fixture("fat-tree-lldp"), None).unwrap();
    let levels: Vec<(&str, Level)> = toml.switches.iter().map(|(n, l)| (n.0.as_str(), *l)).collect();
    assert_eq!(
        levels,
        [("leaf1", Level::Leaf), ("leaf2", Level::Leaf), ("spine1", Level::Spine), ("spine2", Level::Spine)]
    );
    let up = |leaf: &str, spine: &str| Uplink { leaf: name(leaf), spine: name(spine) };
    let counts: Vec<u32> =
        ["spine1", "spine2"].iter().flat_map(|s| ["leaf1", "leaf2"].map(|l| toml.uplinks[&up(l, s)])).collect();
    assert_eq!(counts, [2, 1, 1, 1], "leaf1 has two links to spine1");
    assert_eq!(toml.hosts.len(), 8);
    for (form, other) in [("ibnetdiscover", &ib), ("LLDP", &lldp)] {
        assert_eq!(other.switches, toml.switches, "{form}");
        assert_eq!(other.uplinks, toml.uplinks, "{form}");
        assert_eq!(placement(other), placement(&toml), "{form}");
        assert_eq!(heads(&other.render()), heads(&toml.render()), "{form}");
    }
    // Each leaf lists the NICs where the form names them, with their ports.
    assert!(toml.render().contains("): node01, node02, node03, node04\n"), "{}", toml.render());
    assert!(ib.render().contains("): node01:mlx5_0 port 1, node02:mlx5_0 port 2,"), "{}", ib.render());
    assert!(lldp.render().contains("): node01:eth0, node01:eth1, node02:eth0,"), "{}", lldp.render());
    // The NICs the discovered forms name.
    let nics =
        |t: &Topology, host: &str| -> Vec<Option<String>> { t.hosts[host].iter().map(|a| a.nic.clone()).collect() };
    assert_eq!(nics(&ib, "node05"), [Some("mlx5_0".to_string())]);
    assert_eq!(nics(&lldp, "node01"), [Some("eth0".to_string()), Some("eth1".to_string())]);
    assert_eq!(nics(&toml, "node01"), [None]);
}

#[test]
fn paths_cross_no_uplink_within_a_leaf_and_every_spine_between_leaves() {
    let t = topology::read(&fixture("fat-tree.ibnetdiscover"), Some(Format::Ibnetdiscover)).unwrap();
    let within = t.route("node01", "node04").unwrap();
    assert_eq!((within.hops, within.uplinks.len()), (2, 0));
    let across = t.route("node02", "node07").unwrap();
    assert_eq!(across.hops, 4);
    let crossed: Vec<(&str, &str)> = across.uplinks.iter().map(|u| (u.leaf.0.as_str(), u.spine.0.as_str())).collect();
    assert_eq!(crossed, [("leaf1", "spine1"), ("leaf1", "spine2"), ("leaf2", "spine1"), ("leaf2", "spine2")]);
}

#[test]
fn an_explicit_format_overrides_the_extension() {
    let e = topology::read(&fixture("fat-tree.toml"), Some(Format::Ibnetdiscover)).unwrap_err().to_string();
    assert!(e.ends_with("fat-tree.toml: places no host on a leaf switch; a two-level tree: hosts on leaf switches, each leaf linked to one or more spines"), "{e}");
}

const LOCAL: &str = "[switch.leaf1]\nhosts = \"127.0.0.[1-2]\"\n[switch.leaf2]\nhosts = \"127.0.0.3\"\n\
                     [switch.spine1]\nlinks = [\"leaf1\", \"leaf1\", \"leaf2\"]\n";

fn plan(topology_text: &str) -> std::process::Output {
    let bench = Bench::new();
    let path = bench.write("fabric.toml", topology_text);
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let (scenario, hosts) = (root.join("scenarios/all-to-all.toml"), root.join("hostfiles/local"));
    let args = [scenario.to_str().unwrap(), "-H", hosts.to_str().unwrap(), "--topology", path.to_str().unwrap()];
    bench.run(&[&["plan"], &args[..]].concat())
}

#[test]
fn plan_prints_the_tree_when_every_host_is_placed() {
    let out = plan(&format!("{LOCAL}[switch.leaf3]\nhosts = \"127.0.0.4\"\n"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let tree = stdout.split_once("fabric.toml:\n").map(|(_, t)| t).unwrap_or_default();
    assert!(
        tree.starts_with(
            "spine spine1\n  leaf leaf1 (2 host(s), ×2 cables): 127.0.0.1, 127.0.0.2\n  leaf leaf2 (1 host(s), ×1 cable): 127.0.0.3\nno spine\n  leaf leaf3 (1 host(s)): 127.0.0.4\nphase 0"
        ),
        "{stdout}"
    );
}

#[test]
fn plan_refuses_a_host_the_topology_does_not_place_with_exit_2() {
    let out = plan(LOCAL);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("error: host `127.0.0.4` of the hostfile is not placed by the topology "), "{stderr}");
    assert!(out.stdout.is_empty(), "nothing is printed before the check");
}

#[test]
fn a_two_rail_fabric_places_each_nic_on_its_rails_leaf_and_port() {
    let ib = topology::read(&fixture("rails.ibnetdiscover"), None).unwrap();
    let toml = topology::read(&fixture("rails.toml"), None).unwrap();
    assert_eq!((ib.switches.clone(), ib.uplinks.clone()), (toml.switches.clone(), toml.uplinks.clone()));
    for t in [&ib, &toml] {
        assert_eq!(t.hosts.len(), 4);
        for attached in t.hosts.values() {
            let nics: Vec<(&str, Option<&str>)> =
                attached.iter().map(|a| (a.leaf.0.as_str(), a.nic.as_deref())).collect();
            assert_eq!(nics, [("rail0", Some("mlx5_0")), ("rail1", Some("mlx5_1"))]);
        }
    }
    // ibnetdiscover says which leaf port each HCA is cabled to; TOML does not.
    let ports = |t: &Topology| -> Vec<Option<u32>> { t.hosts["node03"].iter().map(|a| a.port).collect() };
    assert_eq!((ports(&ib), ports(&toml)), (vec![Some(3), Some(3)], vec![None, None]));
    assert_eq!(ib.hosts["node03"][1].cable_end(), "rail1 port 3");
}

/// `plan` of the two-rail fixture on a hostfile of `devices=` lines.
fn plan_rails(hostfile: &str) -> std::process::Output {
    let bench = Bench::new();
    let hosts = bench.write("hosts", hostfile);
    let scenario = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/all-to-all.toml");
    let topology = fixture("rails.ibnetdiscover");
    let args = ["plan", scenario.to_str().unwrap(), "-H", hosts.to_str().unwrap(), "--topology"];
    bench.run(&[&args[..], &[topology.to_str().unwrap()]].concat())
}

#[test]
fn plan_prints_each_rails_nics_and_refuses_a_nic_the_topology_does_not_place() {
    let out = plan_rails("node[01-02] devices=mlx5_0,mlx5_1\n");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        stdout.contains(
            "spine spine1\n  leaf rail0 (4 host(s), ×2 cables): node01:mlx5_0 port 1, node02:mlx5_0 port 2, \
             node03:mlx5_0 port 3, node04:mlx5_0 port 4\n  leaf rail1 (4 host(s), ×2 cables): node01:mlx5_1 port 1,"
        ),
        "{stdout}"
    );
    let out = plan_rails("node01 devices=mlx5_0,mlx5_3\n");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("error: NIC `mlx5_3` of host `node01` (its rank 1's `devices=`) is not placed"),
        "{stderr}"
    );
}
