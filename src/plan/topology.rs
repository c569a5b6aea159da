//! Pairs chosen by the fabric's shape: the group keys `within`, `across`
//! and `hops` keep the pairs of all-pairs and pairwise that meet them, and
//! `bisection` pairs hosts across the spine so that every leaf–spine
//! uplink carries one flow (docs/SCENARIOS.md, "Pairs by topology").

use std::collections::BTreeMap;

use super::patterns::{select, with_reverse, Pairs};
use super::RankInfo;
use crate::hostfile::Host;
use crate::scenario::topology::restriction;
use crate::scenario::{BadKey, GroupSpec, RankSet};
use crate::topology::{Attachment, Route, SwitchName, Topology};

/// What a key that chooses pairs by the topology asks for when there is none.
const NEEDS: &str = "needs the fabric's topology: add a [topology] table with file = \"fabric.toml\" to the \
                     scenario, or give --topology FILE (docs/TOPOLOGY.md), or `run --topology lldp` to gather it \
                     from the hosts' LLDP neighbours";

/// The ranks a scenario is planned on: how many, their hosts and slots
/// (rails), and where they are cabled when the run has a topology.
#[derive(Clone, Copy)]
pub(crate) struct Job<'a> {
    pub n: usize,
    pub ranks: &'a [RankInfo],
    pub fabric: Option<&'a Fabric<'a>>,
}

/// The job's ranks on the topology, which places every rank's host (and
/// on a rail fabric, its NIC).
pub struct Fabric<'a> {
    topology: &'a Topology,
    /// Each rank's host, by rank.
    hosts: Vec<&'a str>,
    /// Where each rank is cabled, by rank: its own NIC, or all its host's.
    attached: Vec<Vec<&'a Attachment>>,
}

impl<'a> Fabric<'a> {
    pub fn new(topology: &'a Topology, hosts: &'a [Host]) -> Fabric<'a> {
        Fabric {
            topology,
            hosts: hosts.iter().map(|h| h.name.as_str()).collect(),
            attached: hosts.iter().map(|h| topology.attachments_of(&h.name, &h.devices)).collect(),
        }
    }

    pub(crate) fn topology(&self) -> &Topology {
        self.topology
    }

    pub(crate) fn leaves(&self, rank: usize) -> impl Iterator<Item = &SwitchName> {
        self.attached.get(rank).into_iter().flatten().map(|a| &a.leaf)
    }

    /// The one attachment a rank is placed by (its own NIC, or its host's
    /// only one); `None` where it may use several.
    pub(crate) fn attachment(&self, rank: usize) -> Option<&Attachment> {
        match self.attached.get(rank)?.as_slice() {
            [one] => Some(one),
            _ => None,
        }
    }

    /// Whether two ranks have a NIC on one leaf.
    pub(super) fn share_leaf(&self, a: usize, b: usize) -> bool {
        self.leaves(a).any(|leaf| self.leaves(b).any(|other| other == leaf))
    }

    pub(super) fn hops(&self, a: usize, b: usize) -> Option<u32> {
        self.route(a, b).map(|route| route.hops)
    }

    /// The path between two ranks' NICs (`None`: no spine joins their leaves).
    pub(crate) fn route(&self, a: usize, b: usize) -> Option<Route> {
        self.topology.route_between(self.attached.get(a)?, self.attached.get(b)?)
    }

    /// Whether the pair meets the group's `within`, `across` and `hops`.
    fn allows(&self, g: &GroupSpec, (a, b): (usize, usize)) -> bool {
        let shared = self.share_leaf(a, b);
        g.within.is_none_or(|_| shared)
            && g.across.is_none_or(|_| !shared)
            && g.hops.is_none_or(|range| self.hops(a, b).is_some_and(|hops| range.contains(hops)))
    }

    /// The links from `leaf` to any spine, each counted.
    pub(super) fn uplinks_of(&self, leaf: &SwitchName) -> usize {
        self.topology.uplinks.iter().filter(|(u, _)| &u.leaf == leaf).map(|(_, &count)| count as usize).sum()
    }
}

/// The pairs of `pairs` that the group's `within`, `across` and `hops`
/// allow; all of them when it gives none of these keys.
pub(super) fn restrict(g: &GroupSpec, pairs: Pairs, fabric: Option<&Fabric>) -> Result<Pairs, BadKey> {
    let Some(key) = restriction(g) else { return Ok(pairs) };
    let fabric = fabric.ok_or_else(|| BadKey::new(key, format!("`{key}` {NEEDS}")))?;
    Ok(pairs.into_iter().filter(|&pair| fabric.allows(g, pair)).collect())
}

/// All-pairs' rounds with only the allowed pairs; rounds left empty go.
pub(super) fn restrict_rounds(
    g: &GroupSpec,
    rounds: Vec<Pairs>,
    fabric: Option<&Fabric>,
) -> Result<Vec<Pairs>, BadKey> {
    let mut kept = Vec::with_capacity(rounds.len());
    for round in rounds {
        kept.push(restrict(g, round, fabric)?);
    }
    kept.retain(|round| !round.is_empty());
    Ok(kept)
}

/// One leaf's part in a bisection: its free ranks (one per host) and how
/// many of its uplinks no pair loads yet.
struct Side {
    ranks: std::collections::VecDeque<usize>,
    uplinks: usize,
}

impl Side {
    /// How many more pairs this leaf can be in.
    fn room(&self) -> usize {
        self.uplinks.min(self.ranks.len())
    }

    /// The next free rank, loading one more uplink.
    fn take(&mut self) -> Option<usize> {
        self.uplinks = self.uplinks.checked_sub(1)?;
        self.ranks.pop_front()
    }
}

/// Bisection: pairs across the spine, each host in one pair at most, each
/// leaf in as many pairs as it has uplinks where hosts and the other
/// leaves allow. Again and again the leaf with the most room is paired
/// with the next leaf by room that a spine joins it to (ties by name),
/// each giving its lowest free rank; a leaf that no other can take goes.
pub(super) fn bisection(g: &GroupSpec, n: usize, fabric: Option<&Fabric>) -> Result<Pairs, BadKey> {
    let fabric = fabric.ok_or_else(|| BadKey::new("pattern", format!("`bisection` {NEEDS}")))?;
    let mut sides: BTreeMap<&SwitchName, Side> = BTreeMap::new();
    let mut seen = std::collections::HashSet::new();
    for rank in select("ranks", &g.ranks, RankSet::All, n)? {
        let Some(leaf) = fabric.leaves(rank).next() else { continue };
        if seen.insert(fabric.hosts[rank]) {
            let uplinks = fabric.uplinks_of(leaf);
            sides.entry(leaf).or_insert_with(|| Side { ranks: Default::default(), uplinks }).ranks.push_back(rank);
        }
    }
    let mut pairs = Pairs::new();
    loop {
        let mut order: Vec<&SwitchName> = sides.iter().filter(|(_, s)| s.room() > 0).map(|(&l, _)| l).collect();
        order.sort_by_key(|leaf| std::cmp::Reverse(sides[leaf].room()));
        let Some((&first, rest)) = order.split_first() else { break };
        let joined = |other: &&SwitchName| fabric.hops(sides[first].ranks[0], sides[*other].ranks[0]) == Some(4);
        let Some(second) = rest.iter().copied().find(joined) else {
            sides.remove(first);
            continue;
        };
        let mut take = |leaf| sides.get_mut(leaf).and_then(Side::take);
        match (take(first), take(second)) {
            (Some(a), Some(b)) => pairs.push((a, b)),
            _ => break, // both had room: not reached
        }
    }
    Ok(with_reverse(pairs, g.bidirectional))
}
