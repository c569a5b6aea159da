//! Localising failing links to a switch when the run has a topology
//! (docs/ACCEPTANCE.md, "Switch suspects"). Pure, on the links measured and
//! the paths between their ends.
//!
//! - A leaf: every measured host on it (two at least) is a suspect host,
//!   its same-leaf links failing too, so the switch, not each host, is named.
//! - An uplink: the failing links no host explains, between hosts on
//!   different leaves, that all may cross one leaf–spine uplink. A path
//!   between two leaves may take every spine that joins them (ECMP), so a
//!   passing link clears the uplinks of its path only when that path has one
//!   way through (one spine); the uplinks every failing link may cross that
//!   no such link cleared are named together when more than one remains
//!   ("one of"). Failing links that share one host are that host's, not an
//!   uplink's, and stay links. Two bad uplinks are found one after the
//!   other: the uplink that explains the most failing links first.
//! - One way: where every failing flow of an uplink suspect may have gone
//!   one way along it (into a leaf, or out of it) and passing flows cleared
//!   the other way, that way is named: a bad optic usually fails one way.

use std::collections::BTreeSet;

use crate::acceptance::localise::{localise, Finding, Link, RankPair};
use crate::acceptance::paths::Paths;
use crate::topology::{SwitchName, Uplink, Way};

/// [`localise`], then hosts filling a leaf become the leaf and links an
/// uplink explains become the uplink (one, or the several it is one of).
pub fn localise_on(links: &[Link], paths: &dyn Paths) -> Vec<Finding> {
    let findings = localise(links);
    if findings.contains(&Finding::Fabric) {
        return findings;
    }
    let mut out = leaves(&findings, links, paths);
    let failing: Vec<Link> = findings
        .iter()
        .filter_map(|f| match *f {
            Finding::Link(pair) => links.iter().find(|l| l.pair() == pair).copied(),
            _ => None,
        })
        .collect();
    let (uplinks, rest) = uplinks(links, failing, paths);
    out.extend(uplinks);
    out.extend(rest.iter().map(|l| Finding::Link(l.pair())));
    out
}

/// The host findings, those that fill a leaf replaced by the leaf.
fn leaves(findings: &[Finding], links: &[Link], paths: &dyn Paths) -> Vec<Finding> {
    let hosts: BTreeSet<usize> = findings
        .iter()
        .filter_map(|f| if let Finding::Host(r) = f { Some(r) } else { None })
        .flatten()
        .copied()
        .collect();
    let measured: BTreeSet<usize> = links.iter().flat_map(|l| [l.a, l.b]).collect();
    let on = |leaf: &SwitchName| measured.iter().copied().filter(|&r| paths.leaf(r) == Some(leaf)).collect::<Vec<_>>();
    let mut out = Vec::new();
    let mut named = BTreeSet::new();
    for &rank in &hosts {
        let Some(leaf) = paths.leaf(rank) else {
            out.push(Finding::Host(vec![rank]));
            continue;
        };
        let ranks = on(leaf);
        if ranks.len() >= 2 && ranks.iter().all(|r| hosts.contains(r)) {
            if named.insert(leaf.clone()) {
                out.push(Finding::Leaf { leaf: leaf.clone(), ranks });
            }
        } else {
            out.push(Finding::Host(vec![rank]));
        }
    }
    out
}

/// The uplinks that explain failing links, and the failing links left.
fn uplinks(links: &[Link], mut failing: Vec<Link>, paths: &dyn Paths) -> (Vec<Finding>, Vec<Link>) {
    // A passing link with one way through clears both of its uplinks.
    let cleared: BTreeSet<Uplink> = links
        .iter()
        .filter(|l| !l.failed)
        .map(|l| paths.uplinks(l.a, l.b))
        .filter(|u| u.len() == 2)
        .flatten()
        .collect();
    let mut found = Vec::new();
    loop {
        let crossing: Vec<(Link, Vec<Uplink>)> = failing.iter().map(|l| (*l, paths.uplinks(l.a, l.b))).collect();
        let candidates: BTreeSet<&Uplink> =
            crossing.iter().flat_map(|(_, u)| u).filter(|u| !cleared.contains(*u)).collect();
        let cover =
            |u: &Uplink| -> Vec<Link> { crossing.iter().filter(|(_, on)| on.contains(u)).map(|(l, _)| *l).collect() };
        // The uplink explaining the most failing links (the first by name on a tie).
        let Some(best) = candidates.iter().max_by_key(|u| (cover(u).len(), std::cmp::Reverse(**u))) else { break };
        let covered = cover(best);
        if covered.len() < 2 || one_host(&covered) {
            break;
        }
        let same: Vec<Uplink> = candidates.iter().filter(|u| cover(u) == covered).map(|u| (*u).clone()).collect();
        failing.retain(|l| !covered.contains(l));
        let links = covered.iter().map(Link::pair).collect();
        found.push(Finding::Uplinks { uplinks: same, links });
    }
    (found, failing)
}

/// One measured direction of a link: a flow of all-pairs or pairwise.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Flow {
    pub src: usize,
    pub dst: usize,
    pub failed: bool,
}

/// The ways along `uplinks` that every failing flow of the `explained`
/// links may have taken and no passing flow with one way through took
/// (several: the paths cannot tell them apart). Empty where the flows do
/// not single out one way: failing both ways, or nothing failed.
pub fn one_way(uplinks: &[Uplink], explained: &[RankPair], flows: &[Flow], paths: &dyn Paths) -> Vec<Way> {
    let suspected: BTreeSet<Way> = uplinks.iter().flat_map(Way::both).collect();
    let cleared: BTreeSet<Way> = flows
        .iter()
        .filter(|f| !f.failed && paths.uplinks(f.src, f.dst).len() == 2)
        .flat_map(|f| ways(f, paths))
        .collect();
    let failing = flows.iter().filter(|f| f.failed && explained.contains(&RankPair::of(f.src, f.dst)));
    let mut common: Option<BTreeSet<Way>> = None;
    for flow in failing {
        let taken: BTreeSet<Way> = ways(flow, paths).into_iter().collect();
        common = Some(match common {
            None => taken,
            Some(so_far) => so_far.intersection(&taken).cloned().collect(),
        });
    }
    let common = common.unwrap_or_default();
    common.intersection(&suspected).filter(|way| !cleared.contains(*way)).cloned().collect()
}

/// The ways a flow may take along the uplinks of its path: up from its
/// sender's leaf, down into its receiver's.
fn ways(flow: &Flow, paths: &dyn Paths) -> Vec<Way> {
    let (from, to) = (paths.leaf(flow.src), paths.leaf(flow.dst));
    let mut out = Vec::new();
    for uplink in paths.uplinks(flow.src, flow.dst) {
        let [up, down] = Way::both(&uplink);
        if from == Some(&uplink.leaf) {
            out.push(up);
        }
        if to == Some(&uplink.leaf) {
            out.push(down);
        }
    }
    out
}

/// How many pairs of each kind an uplink's retest measures.
const RETEST_PAIRS: usize = 2;

/// The links, by rank, that retest an uplink suspect.
#[derive(Debug)]
pub struct RetestLinks {
    /// Failing links it explains: they should fail again.
    pub crossing: Vec<RankPair>,
    /// Passing links whose paths avoid it: they should pass again.
    pub avoiding: Vec<RankPair>,
}

/// The links that retest an uplink suspect: some of the failing links it
/// explains (`explained`), and passing links whose paths avoid every uplink
/// of the suspect (those with the most ends on the crossing links' leaves
/// first, so the same leaves where possible); no host in two links.
pub fn retest_links(uplinks: &[Uplink], explained: &[RankPair], measured: &[Link], paths: &dyn Paths) -> RetestLinks {
    // Each host in one link at most, as in an all-pairs round: a host
    // shared by two links would slow both.
    let fresh = |chosen: &[RankPair], link: &RankPair| chosen.iter().all(|c| !c.has(link.low) && !c.has(link.high));
    let mut crossing: Vec<RankPair> = Vec::new();
    for link in explained {
        if crossing.len() < RETEST_PAIRS && fresh(&crossing, link) {
            crossing.push(*link);
        }
    }
    let leaves: BTreeSet<&SwitchName> = crossing.iter().flat_map(|l| l.ends()).filter_map(|r| paths.leaf(r)).collect();
    let near = |r: usize| usize::from(paths.leaf(r).is_some_and(|l| leaves.contains(l)));
    let mut passing: Vec<RankPair> = measured
        .iter()
        .filter(|l| !l.failed && paths.uplinks(l.a, l.b).iter().all(|u| !uplinks.contains(u)))
        .map(Link::pair)
        .collect();
    passing.sort_by_key(|l| std::cmp::Reverse(near(l.low) + near(l.high)));
    let mut avoiding: Vec<RankPair> = Vec::new();
    for link in &passing {
        let chosen: Vec<RankPair> = crossing.iter().chain(&avoiding).copied().collect();
        if avoiding.len() < RETEST_PAIRS && fresh(&chosen, link) {
            avoiding.push(*link);
        }
    }
    RetestLinks { crossing, avoiding }
}

/// Whether one rank is an end of every link.
fn one_host(links: &[Link]) -> bool {
    let Some(first) = links.first() else { return false };
    [first.a, first.b].iter().any(|&r| links.iter().all(|l| l.a == r || l.b == r))
}

#[cfg(test)]
pub(crate) mod tests {
    use std::path::Path;

    use super::*;
    use crate::topology::{self, Topology};

    /// A fixture of tests/fixtures/topology.
    pub(crate) fn fixture(name: &str) -> Topology {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/topology").join(name);
        topology::read(&path, None).unwrap()
    }

    /// Rank r is node0{r+1}.
    pub(crate) struct Nodes(pub Topology, pub Vec<String>);

    impl Nodes {
        pub(crate) fn new(name: &str) -> Nodes {
            let t = fixture(name);
            let hosts = t.hosts.keys().cloned().collect();
            Nodes(t, hosts)
        }
    }

    impl Paths for Nodes {
        fn leaf(&self, rank: usize) -> Option<&SwitchName> {
            self.0.hosts.get(self.1.get(rank)?)?.first().map(|a| &a.leaf)
        }
        fn cable(&self, _: usize) -> Option<String> {
            None
        }
        fn uplinks(&self, a: usize, b: usize) -> Vec<Uplink> {
            self.0.route(&self.1[a], &self.1[b]).map(|r| r.uplinks).unwrap_or_default()
        }
        fn cables(&self, uplink: &Uplink) -> Option<u32> {
            self.0.uplinks.get(uplink).copied()
        }
        fn cable_ports(&self, uplink: &Uplink) -> Vec<crate::topology::UplinkCable> {
            self.0.cables_of(uplink).cloned().collect()
        }
    }

    pub(crate) fn up(leaf: &str, spine: &str) -> Uplink {
        Uplink { leaf: SwitchName(leaf.into()), spine: SwitchName(spine.into()) }
    }

    /// Every pair of 8 ranks that has a path, failed where `bad` says so.
    fn all_pairs(nodes: &Nodes, bad: impl Fn(usize, usize) -> bool) -> Vec<Link> {
        let mut links = Vec::new();
        for a in 0..8 {
            for b in a + 1..8 {
                if nodes.0.route(&nodes.1[a], &nodes.1[b]).is_some() {
                    links.push(Link { a, b, failed: bad(a, b) });
                }
            }
        }
        links
    }

    /// The uplinks of each uplink finding; any other finding fails the test.
    fn named(found: &[Finding]) -> Vec<Vec<Uplink>> {
        found
            .iter()
            .map(|f| match f {
                Finding::Uplinks { uplinks, .. } => uplinks.clone(),
                other => panic!("not an uplink: {other:?}"),
            })
            .collect()
    }

    fn leaf_of(nodes: &Nodes, r: usize) -> String {
        nodes.leaf(r).unwrap().0.clone()
    }

    #[test]
    fn an_uplink_with_one_way_through_is_named() {
        let nodes = Nodes::new("uneven.toml");
        // leaf3 (ranks 4, 5) reaches every other leaf through leaf3 ↔ spine1 only.
        let on3 = |r| leaf_of(&nodes, r) == "leaf3";
        let links = all_pairs(&nodes, |a, b| on3(a) != on3(b));
        let found = localise_on(&links, &nodes);
        assert_eq!(named(&found), [vec![up("leaf3", "spine1")]]);
        let Finding::Uplinks { links: explained, .. } = &found[0] else { unreachable!() };
        assert_eq!(explained.len(), 12, "leaf3's 2 hosts with the 6 off it");
        assert!(explained.iter().all(|l| on3(l.low) != on3(l.high)));
    }

    #[test]
    fn two_bad_uplinks_are_both_named() {
        let nodes = Nodes::new("uneven.toml");
        let on = |r, leaf: &str| leaf_of(&nodes, r) == leaf;
        let links = all_pairs(&nodes, |a, b| on(a, "leaf3") != on(b, "leaf3") || on(a, "leaf4") != on(b, "leaf4"));
        assert_eq!(named(&localise_on(&links, &nodes)), [vec![up("leaf3", "spine1")], vec![up("leaf4", "spine1")]]);
    }

    #[test]
    fn on_the_fat_tree_every_uplink_between_the_leaves_is_one_of_the_suspects() {
        let nodes = Nodes::new("fat-tree.toml");
        // Half the pairs across leaf1–leaf2 fail (those hashed onto the bad uplink).
        let links = all_pairs(&nodes, |a, b| a < 4 && b >= 4 && (a + b) % 2 == 0);
        let all = vec![up("leaf1", "spine1"), up("leaf1", "spine2"), up("leaf2", "spine1"), up("leaf2", "spine2")];
        assert_eq!(named(&localise_on(&links, &nodes)), [all]);
    }

    #[test]
    fn a_bad_host_is_the_host_not_an_uplink() {
        let nodes = Nodes::new("fat-tree.toml");
        let links = all_pairs(&nodes, |a, b| a == 1 || b == 1);
        assert_eq!(localise_on(&links, &nodes), [Finding::Host(vec![1])]);
        // A host failing only its links off its leaf: that host's links, no uplink.
        let links = all_pairs(&nodes, |a, b| (a == 1 && b >= 4) || (b == 1 && a >= 4));
        assert_eq!(localise_on(&links, &nodes).len(), 4);
        assert!(localise_on(&links, &nodes).iter().all(|f| matches!(f, Finding::Link(RankPair { low: 1, .. }))));
    }

    #[test]
    fn a_leaf_whose_hosts_all_fail_is_the_switch() {
        let nodes = Nodes::new("uneven.toml");
        let on3 = |r| leaf_of(&nodes, r) == "leaf3";
        let links = all_pairs(&nodes, |a, b| on3(a) || on3(b));
        assert_eq!(
            localise_on(&links, &nodes),
            [Finding::Leaf { leaf: SwitchName("leaf3".into()), ranks: vec![4, 5] }]
        );
    }

    #[test]
    fn an_uplink_is_retested_on_links_crossing_it_and_links_avoiding_it() {
        let nodes = Nodes::new("uneven.toml");
        let on3 = |r| leaf_of(&nodes, r) == "leaf3";
        let links = all_pairs(&nodes, |a, b| on3(a) != on3(b));
        let found = localise_on(&links, &nodes);
        let Finding::Uplinks { uplinks, links: explained } = &found[0] else { panic!("{found:?}") };
        let RetestLinks { crossing, avoiding } = retest_links(uplinks, explained, &links, &nodes);
        assert_eq!(crossing.len(), 2);
        assert!(crossing.iter().all(|l| nodes.uplinks(l.low, l.high).contains(&up("leaf3", "spine1"))));
        assert_eq!(avoiding.len(), 2);
        for &RankPair { low: a, high: b } in &avoiding {
            assert!(!nodes.uplinks(a, b).contains(&up("leaf3", "spine1")), "{a}-{b} crosses it");
            assert!(links.iter().any(|l| (l.a, l.b) == (a, b) && !l.failed));
        }
        let mut ends: Vec<usize> = crossing.iter().chain(&avoiding).flat_map(|l| l.ends()).collect();
        ends.sort();
        ends.dedup();
        assert_eq!(ends.len(), 8, "no host in two links: {crossing:?} {avoiding:?}");
        // The same leaves first: retesting node03–node05 alone, leaf2's free
        // host (node04) is in the first avoiding link, before node01–node02.
        let one = retest_links(uplinks, &[RankPair::of(2, 4)], &links, &nodes);
        assert_eq!(one.crossing, [RankPair::of(2, 4)]);
        assert!(one.avoiding[0].has(3), "{one:?}");
    }

    /// Every flow (both ways of every pair) of 8 ranks that has a path,
    /// failed where `bad` says so, and the links they make (failed when a
    /// way did).
    fn directed(nodes: &Nodes, bad: impl Fn(usize, usize) -> bool) -> (Vec<Flow>, Vec<Link>) {
        let mut flows = Vec::new();
        for src in 0..8 {
            for dst in (0..8).filter(|&d| d != src) {
                if nodes.0.route(&nodes.1[src], &nodes.1[dst]).is_some() {
                    flows.push(Flow { src, dst, failed: bad(src, dst) });
                }
            }
        }
        let links = all_pairs(nodes, |a, b| bad(a, b) || bad(b, a));
        (flows, links)
    }

    fn way(from: &str, to: &str) -> Way {
        Way { from: SwitchName(from.into()), to: SwitchName(to.into()) }
    }

    /// The uplink finding's ways, as named.
    fn ways_named(nodes: &Nodes, flows: &[Flow], links: &[Link]) -> Vec<Way> {
        let found = localise_on(links, nodes);
        let [Finding::Uplinks { uplinks, links: explained }] = &found[..] else { panic!("one uplink: {found:?}") };
        one_way(uplinks, explained, flows, nodes)
    }

    #[test]
    fn an_uplink_failing_into_its_leaf_only_is_named_with_that_way() {
        let nodes = Nodes::new("uneven.toml");
        let on3 = |r| leaf_of(&nodes, r) == "leaf3";
        // Into leaf3 from every other leaf fails; out of it passes.
        let (flows, links) = directed(&nodes, |src, dst| !on3(src) && on3(dst));
        assert_eq!(ways_named(&nodes, &flows, &links), [way("spine1", "leaf3")]);
        // Out of it only: the other way.
        let (flows, links) = directed(&nodes, |src, dst| on3(src) && !on3(dst));
        assert_eq!(ways_named(&nodes, &flows, &links), [way("leaf3", "spine1")]);
    }

    #[test]
    fn an_uplink_failing_both_ways_names_no_way() {
        let nodes = Nodes::new("uneven.toml");
        let on3 = |r| leaf_of(&nodes, r) == "leaf3";
        let (flows, links) = directed(&nodes, |src, dst| on3(src) != on3(dst));
        assert_eq!(ways_named(&nodes, &flows, &links), []);
    }

    #[test]
    fn between_two_leaves_one_way_is_one_of_the_sender_leafs_up_and_the_receiver_leafs_down() {
        let nodes = Nodes::new("fat-tree.toml");
        // Every flow from leaf1 (ranks 0-3) into leaf2 (4-7) fails, the other
        // way passes: up from leaf1 or down into leaf2, on either spine.
        let (flows, links) = directed(&nodes, |src, dst| src < 4 && dst >= 4);
        let found = localise_on(&links, &nodes);
        let [Finding::Uplinks { uplinks, links: explained }] = &found[..] else { panic!("{found:?}") };
        let named = one_way(uplinks, explained, &flows, &nodes);
        let expected = [way("leaf1", "spine1"), way("leaf1", "spine2"), way("spine1", "leaf2"), way("spine2", "leaf2")];
        assert_eq!(named, expected);
    }

    #[test]
    fn healthy_runs_and_lone_links_are_as_without_a_topology() {
        let nodes = Nodes::new("fat-tree.toml");
        assert_eq!(localise_on(&all_pairs(&nodes, |_, _| false), &nodes), []);
        assert_eq!(localise_on(&all_pairs(&nodes, |_, _| true), &nodes), [Finding::Fabric]);
        let links = all_pairs(&nodes, |a, b| (a, b) == (0, 5));
        assert_eq!(localise_on(&links, &nodes), [Finding::Link(RankPair::of(0, 5))]);
    }
}
