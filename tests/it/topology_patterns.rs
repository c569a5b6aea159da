//! Pairs chosen by the topology: `within`, `across` and `hops` on the fat
//! tree of tests/fixtures/topology (leaf1: node01-04 = ranks 0-3, leaf2:
//! node05-08 = ranks 4-7), `bisection`, the errors of each key,
//! `plan`/`run` reading `[topology]` or `--topology`, and the results by
//! leaf pair.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use fabricbench::hostfile::Host;
use fabricbench::plan::{self, Fabric, Plan};
use fabricbench::result::leaf_pairs::LeafPairs;
use fabricbench::result::RunResult;
use fabricbench::scenario;
use fabricbench::topology::{self, Topology};

use crate::common::{run_json, text, Bench};

fn fat_tree() -> Topology {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/topology/fat-tree.toml");
    topology::read(&path, None).unwrap()
}

fn nodes(n: usize) -> Vec<Host> {
    (1..=n).map(|i| Host::named(&format!("node{i:02}"))).collect()
}

/// A scenario of one group with `keys` added to it.
fn group(pattern: &str, keys: &str) -> String {
    format!("[run]\nduration = \"1s\"\n\n[[group]]\nname = \"g\"\npattern = \"{pattern}\"\n{keys}\n")
}

fn planned(text: &str, topology: Option<&Topology>, hosts: &[Host]) -> Result<Plan, String> {
    let (s, source) = scenario::parse(text, Path::new("s.toml")).map_err(|e| e.to_string())?;
    let fabric = topology.map(|t| Fabric::new(t, hosts));
    plan::build_on(hosts, &s, fabric.as_ref()).map_err(|bad| source.explain(&bad))
}

/// Every flow of every phase as (src, dst).
fn flows(text: &str, topology: &Topology) -> Vec<(usize, usize)> {
    let plan = planned(text, Some(topology), &nodes(8)).unwrap();
    plan.phases.iter().flat_map(|p| p.flows.iter().map(|f| (f.src, f.dst))).collect()
}

/// The pairs as unordered sets, each pair once.
fn unordered(pairs: &[(usize, usize)]) -> BTreeSet<(usize, usize)> {
    pairs.iter().map(|&(a, b)| (a.min(b), a.max(b))).collect()
}

fn every_pair(of: impl Fn(usize, usize) -> bool) -> BTreeSet<(usize, usize)> {
    (0..8).flat_map(|a| (a + 1..8).map(move |b| (a, b))).filter(|&(a, b)| of(a, b)).collect()
}

fn leaf(rank: usize) -> usize {
    rank / 4
}

#[test]
fn all_pairs_within_a_leaf_keeps_the_pairs_under_one_leaf_once_each() {
    let pairs = flows(&group("all-pairs", "within = \"leaf\""), &fat_tree());
    assert_eq!(pairs.len(), 12, "{pairs:?}");
    assert_eq!(unordered(&pairs), every_pair(|a, b| leaf(a) == leaf(b)));
}

#[test]
fn all_pairs_across_leaves_keeps_the_pairs_under_two_leaves_in_disjoint_rounds() {
    let plan = planned(&group("all-pairs", "across = \"leaf\""), Some(&fat_tree()), &nodes(8)).unwrap();
    let pairs: Vec<(usize, usize)> = plan.phases.iter().flat_map(|p| p.flows.iter().map(|f| (f.src, f.dst))).collect();
    assert_eq!(pairs.len(), 16, "{pairs:?}");
    assert_eq!(unordered(&pairs), every_pair(|a, b| leaf(a) != leaf(b)));
    for phase in &plan.phases {
        let ranks: Vec<usize> = phase.flows.iter().flat_map(|f| [f.src, f.dst]).collect();
        assert_eq!(ranks.iter().collect::<BTreeSet<_>>().len(), ranks.len(), "{}: a rank twice", phase.name);
    }
    let count = plan.phases.len();
    assert_eq!(plan.phases.last().unwrap().name, format!("round {count}/{count}"), "rounds renumbered");
}

#[test]
fn hops_keep_the_pairs_whose_route_has_that_many() {
    let t = fat_tree();
    let same = unordered(&flows(&group("all-pairs", "hops = \"2\""), &t));
    assert_eq!(same, every_pair(|a, b| leaf(a) == leaf(b)));
    let spine = unordered(&flows(&group("all-pairs", "hops = \"3..4\""), &t));
    assert_eq!(spine, every_pair(|a, b| leaf(a) != leaf(b)));
    assert_eq!(unordered(&flows(&group("all-pairs", "hops = \"2..4\""), &t)), every_pair(|_, _| true));
}

#[test]
fn pairwise_keeps_its_pairs_that_meet_the_key() {
    let t = fat_tree();
    assert_eq!(flows(&group("pairwise", "across = \"leaf\""), &t), [(0, 4), (1, 5), (2, 6), (3, 7)]);
    assert_eq!(flows(&group("pairwise", "ranks = \"0-3\"\nwithin = \"leaf\""), &t), [(0, 2), (1, 3)]);
    let e = planned(&group("pairwise", "within = \"leaf\""), Some(&t), &nodes(8)).unwrap_err();
    assert_eq!(e, "s.toml:6: group \"g\": field `pattern`: `pairwise` gives no flows with 8 rank(s)");
}

#[test]
fn bisection_loads_each_uplink_once_where_the_hosts_allow() {
    // leaf1 has 3 uplinks (two to spine1), leaf2 2: two pairs, leaf2's
    // uplinks loaded once each, one of leaf1's idle.
    let pairs = flows(&group("bisection", ""), &fat_tree());
    assert_eq!(pairs, [(0, 4), (1, 5)]);
    // Three leaves of two uplinks each (one to each spine): each leaf in
    // exactly two pairs, every host in one pair at most.
    let bench = Bench::new();
    let fabric = "[switch.l1]\nhosts = \"node[01-03]\"\n[switch.l2]\nhosts = \"node[04-06]\"\n\
                  [switch.l3]\nhosts = \"node[07-08]\"\n[switch.s1]\nlinks = [\"l1\", \"l2\", \"l3\"]\n\
                  [switch.s2]\nlinks = [\"l1\", \"l2\", \"l3\"]\n";
    let even = topology::read(&bench.write("even.toml", fabric), None).unwrap();
    let pairs = flows(&group("bisection", ""), &even);
    let leaf_of = |rank: usize| [0, 0, 0, 1, 1, 1, 2, 2][rank];
    let mut per_leaf = BTreeMap::new();
    for &(a, b) in &pairs {
        assert_ne!(leaf_of(a), leaf_of(b), "{pairs:?}: a pair under one leaf");
        [a, b].into_iter().for_each(|r| *per_leaf.entry(leaf_of(r)).or_insert(0) += 1);
    }
    assert_eq!(per_leaf, BTreeMap::from([(0, 2), (1, 2), (2, 2)]), "{pairs:?}");
    let ranks: Vec<usize> = pairs.iter().flat_map(|&(a, b)| [a, b]).collect();
    assert_eq!(ranks.iter().collect::<BTreeSet<_>>().len(), ranks.len(), "{pairs:?}: a host twice");
    let both = flows(&group("bisection", "bidirectional = true"), &fat_tree());
    assert_eq!(both, [(0, 4), (1, 5), (4, 0), (5, 1)]);
}

#[test]
fn mesh_probes_every_pair_under_a_leaf_and_each_two_leaves_across_the_spine() {
    let pairs = flows(&group("mesh", ""), &fat_tree());
    let within = every_pair(|a, b| leaf(a) == leaf(b));
    assert_eq!(pairs.len(), within.len() + 2, "{pairs:?}");
    assert_eq!(unordered(&pairs), within.into_iter().chain([(0, 4), (1, 5)]).collect());
    assert!(pairs.iter().all(|&(a, b)| a < b || leaf(a) != leaf(b)), "within a leaf, the lower rank sends");
    // No topology: every pair once.
    let plan = planned(&group("mesh", ""), None, &nodes(8)).unwrap();
    let all: Vec<(usize, usize)> = plan.phases[0].flows.iter().map(|f| (f.src, f.dst)).collect();
    assert_eq!(all.len(), 28);
    assert_eq!(unordered(&all), every_pair(|_, _| true));
    // Three leaves of two uplinks each: two pairs for each two leaves,
    // each leaf's hosts in turn, so that every uplink is crossed by paths
    // to both other leaves.
    let bench = Bench::new();
    let fabric = "[switch.l1]\nhosts = \"node[01-03]\"\n[switch.l2]\nhosts = \"node[04-06]\"\n\
                  [switch.l3]\nhosts = \"node[07-08]\"\n[switch.s1]\nlinks = [\"l1\", \"l2\", \"l3\"]\n\
                  [switch.s2]\nlinks = [\"l1\", \"l2\", \"l3\"]\n";
    let three = topology::read(&bench.write("three.toml", fabric), None).unwrap();
    let leaf_of = |rank: usize| [0, 0, 0, 1, 1, 1, 2, 2][rank];
    let across: Vec<(usize, usize)> =
        flows(&group("mesh", ""), &three).into_iter().filter(|&(a, b)| leaf_of(a) != leaf_of(b)).collect();
    assert_eq!(across, [(0, 3), (1, 4), (2, 6), (0, 7), (5, 6), (3, 7)]);
    let e = planned(&group("mesh", "flows = [[0, 1]]"), None, &nodes(8)).unwrap_err();
    assert!(e.contains("field `flows`: does not apply to pattern `mesh` (it takes: ranks)"), "{e}");
}

#[test]
fn each_key_without_a_topology_names_itself_and_what_to_add() {
    for (pattern, key, value) in
        [("all-pairs", "within", "\"leaf\""), ("pairwise", "across", "\"leaf\""), ("all-pairs", "hops", "\"4\"")]
    {
        let e = planned(&group(pattern, &format!("{key} = {value}")), None, &nodes(8)).unwrap_err();
        assert!(
            e.starts_with(&format!("s.toml:7: group \"g\": field `{key}`: `{key}` needs the fabric's topology")),
            "{e}"
        );
        assert!(
            e.contains("add a [topology] table with file = \"fabric.toml\"") && e.contains("--topology FILE"),
            "{e}"
        );
    }
    let e = planned(&group("bisection", ""), None, &nodes(8)).unwrap_err();
    assert!(e.contains("field `pattern`: `bisection` needs the fabric's topology"), "{e}");
}

#[test]
fn bad_values_and_misplaced_keys_are_refused_by_the_file() {
    let err = |text: &str| scenario::parse(text, Path::new("s.toml")).unwrap_err().to_string();
    let e = err(&group("all-pairs", "within = \"spine\""));
    assert!(e.starts_with("s.toml:7:") && e.contains("unknown variant `spine`, expected `leaf`"), "{e}");
    let e = err(&group("all-pairs", "hops = \"4..2\""));
    assert!(e.starts_with("s.toml:7:") && e.contains("the first end is above the second; give \"MIN..MAX\""), "{e}");
    let e = err(&group("all-pairs", "hops = \"0..\""));
    assert!(e.contains("hops = \"0..\": both ends are needed"), "{e}");
    let e = err(&group("fan-in", "within = \"leaf\""));
    assert!(e.contains("field `within`: does not apply to pattern `fan-in`"), "{e}");
    let e = err(&group("all-pairs", "within = \"leaf\"\nacross = \"leaf\""));
    assert!(e.contains("field `across`: give either `within`"), "{e}");
    let e = err(&format!("{}[topology]\nfile = \"f.toml\"\nformat = \"dot\"\n", group("ring", "")));
    assert!(e.contains("unknown variant `dot`, expected one of `toml`, `lldp`, `ibnetdiscover`"), "{e}");
}

/// The local hostfile's four ranks under two leaves.
const LOCAL: &str = "[switch.leaf1]\nhosts = \"127.0.0.[1-2]\"\n[switch.leaf2]\nhosts = \"127.0.0.[3-4]\"\n\
                     [switch.spine1]\nlinks = [\"leaf1\", \"leaf2\"]\n";

fn local_hosts() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("hostfiles/local")
}

/// `plan` on the local hostfile; each flow as (src, dst).
fn plan_flows(bench: &Bench, scenario: &Path, extra: &[&str]) -> Result<Vec<(usize, usize)>, String> {
    let hosts = local_hosts();
    let mut args = vec!["plan", scenario.to_str().unwrap(), "-H", hosts.to_str().unwrap()];
    args.extend_from_slice(extra);
    let out = bench.run(&args);
    if !out.status.success() {
        return Err(format!("exit {:?}: {}", out.status.code(), text(&out.stderr)));
    }
    // `  flow    0  g            0 (127.0.0.1) -> 3 (127.0.0.4)  1 x 131072 B`
    let flow = |line: &str| {
        let words: Vec<&str> = line.split_once("  g ")?.1.split_whitespace().collect();
        Some((words.first()?.parse().ok()?, words.get(3)?.parse().ok()?))
    };
    Ok(text(&out.stdout).lines().filter_map(flow).collect())
}

#[test]
fn plan_reads_the_scenario_topology_beside_it_and_the_flag_replaces_it() {
    let bench = Bench::new();
    bench.write("fabric.toml", LOCAL);
    let scenario = bench
        .write("s.toml", &format!("[topology]\nfile = \"fabric.toml\"\n\n{}", group("all-pairs", "across = \"leaf\"")));
    let flows = plan_flows(&bench, &scenario, &[]).unwrap();
    assert_eq!(flows.len(), 4, "{flows:?}");
    assert_eq!(unordered(&flows), BTreeSet::from([(0, 2), (0, 3), (1, 2), (1, 3)]));
    // One leaf for all: across leaves there is no pair left.
    let one = bench.write("one.toml", "[switch.leaf1]\nhosts = \"127.0.0.[1-4]\"\n");
    let e = plan_flows(&bench, &scenario, &["--topology", one.to_str().unwrap()]).unwrap_err();
    assert!(e.starts_with("exit Some(2)") && e.contains("`all-pairs` gives no flows with 4 rank(s)"), "{e}");
}

#[test]
fn a_missing_topology_file_is_bad_input_named_with_the_file() {
    let bench = Bench::new();
    let scenario = bench.write("s.toml", &format!("[topology]\nfile = \"nowhere.toml\"\n\n{}", group("ring", "")));
    let e = plan_flows(&bench, &scenario, &[]).unwrap_err();
    assert!(e.starts_with("exit Some(2)") && e.contains("cannot read topology ") && e.contains("nowhere.toml"), "{e}");
    let scenario = bench.write("t.toml", &group("all-pairs", "within = \"leaf\""));
    let e = plan_flows(&bench, &scenario, &[]).unwrap_err();
    assert!(e.starts_with("exit Some(2)") && e.contains("field `within`: `within` needs the fabric's topology"), "{e}");
}

/// The v2 all-pairs fixture (ranks 127.0.0.1-3) with 127.0.0.3 under a
/// leaf of its own: the table's rows, and the terminal summary with it.
#[test]
fn the_leaf_pair_table_groups_an_all_pairs_run() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/v2-all-pairs.json");
    let mut run: RunResult = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    assert_eq!(run.leaf_pairs, None, "a run.json from before leaf pairs loads without them");
    let bench = Bench::new();
    let fabric = "[switch.leaf1]\nhosts = \"127.0.0.[1-2]\"\n[switch.leaf2]\nhosts = \"127.0.0.3\"\n";
    let file = bench.write("fabric.toml", fabric);
    let t = topology::read(&file, None).unwrap();
    run.leaf_pairs = Some(LeafPairs::new(Path::new("fabric.toml"), &run.plan, &t));
    run.summarize_phases();
    let leaves = run.leaf_pairs.as_ref().unwrap();
    assert_eq!(leaves.rank_leaves, ["leaf1", "leaf1", "leaf2"]);
    let rows: Vec<(&str, &str, usize)> =
        leaves.rows.iter().map(|r| (r.leaf_a.as_str(), r.leaf_b.as_str(), r.flows)).collect();
    assert_eq!(rows, [("leaf1", "leaf1", 1), ("leaf1", "leaf2", 2)]);
    let cross = &leaves.rows[1];
    assert!(cross.min_gbps < cross.median_gbps && cross.median_gbps < cross.max_gbps, "{cross:?}");
    assert_eq!(cross.median_gbps, (cross.min_gbps + cross.max_gbps) / 2.0, "the median of two");
    let summary = fabricbench::report::terminal::render(&run, None);
    let table = summary.split_once("Leaf pairs").map(|(_, t)| format!("Leaf pairs{t}")).unwrap_or_default();
    let table = table.split("\n\n").next().unwrap_or_default().to_string();
    insta::assert_snapshot!("leaf_pairs.v2-all-pairs.terminal", table);
}

/// A real run of all-pairs on the four local ranks, two under each leaf:
/// run.json groups its six pairs by leaf pair.
#[test]
fn a_local_run_with_a_topology_groups_its_flows_by_leaf_pair() {
    let bench = Bench::new();
    bench.write("fabric.toml", LOCAL);
    let text = format!("[topology]\nfile = \"fabric.toml\"\n\n{}", group("all-pairs", "message_size = \"64K\""));
    let scenario = bench.write("s.toml", &text);
    let run = run_json(&bench, &scenario, &local_hosts(), &["--warmup", "300ms"]);
    let leaves = &run["leaf_pairs"];
    assert_eq!(leaves["rank_leaves"], serde_json::json!(["leaf1", "leaf1", "leaf2", "leaf2"]), "{leaves}");
    let rows: Vec<(String, String, u64)> = leaves["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (r["leaf_a"].as_str().unwrap().into(), r["leaf_b"].as_str().unwrap().into(), r["flows"].as_u64().unwrap())
        })
        .collect();
    let expected = [("leaf1", "leaf1", 1), ("leaf1", "leaf2", 4), ("leaf2", "leaf2", 1)];
    assert_eq!(rows, expected.map(|(a, b, n)| (a.to_string(), b.to_string(), n)));
    for row in leaves["rows"].as_array().unwrap() {
        let gbps = |key: &str| row[key].as_f64().unwrap();
        assert!(0.0 < gbps("min_gbps") && gbps("min_gbps") <= gbps("median_gbps"), "{row}");
        assert!(gbps("median_gbps") <= gbps("max_gbps"), "{row}");
    }
}
