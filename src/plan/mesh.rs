//! `mesh`: the probe mesh `fabricbench watch` runs (docs/WATCH.md). Every
//! pair of ranks of one rail on two hosts, once, the lower rank sending.
//! With a topology: the pairs that share a leaf, and across the spine, for
//! each two leaves a spine joins, as many pairs as the fewer uplinks of
//! the two (one at least), their hosts taken in turn. Each uplink is then
//! crossed by paths to every other leaf, so that a bad one fails its own
//! leaf's paths and not the others' (which uplink of several each path
//! takes is the fabric's routing). Pure.

use std::collections::{BTreeMap, HashSet};

use super::patterns::{select, Pairs};
use super::topology::Fabric;
use super::{rails, RankInfo};
use crate::scenario::{BadKey, GroupSpec, RankSet};
use crate::topology::SwitchName;

pub(super) fn mesh(g: &GroupSpec, ranks: &[RankInfo], fabric: Option<&Fabric>) -> Result<Pairs, BadKey> {
    let members = select("ranks", &g.ranks, RankSet::All, ranks.len())?;
    let mut pairs = Pairs::new();
    for (i, &a) in members.iter().enumerate() {
        for &b in &members[i + 1..] {
            if rails::one_rail(ranks, (a, b)) && fabric.is_none_or(|f| f.share_leaf(a, b)) {
                pairs.push((a, b));
            }
        }
    }
    if let Some(fabric) = fabric {
        let mut seen: HashSet<(usize, usize)> = pairs.iter().copied().collect();
        let across = rails::widen(g, across(&members, ranks, fabric), ranks)?;
        pairs.extend(across.into_iter().filter(|&(a, b)| seen.insert((a.min(b), a.max(b)))));
    }
    Ok(pairs)
}

/// Pairs of hosts (each by its first rank of `members`) under two leaves a
/// spine joins: for each two leaves, as many as the fewer uplinks of the
/// two, each leaf's hosts taken in turn.
fn across(members: &[usize], ranks: &[RankInfo], fabric: &Fabric) -> Pairs {
    let mut leaves: BTreeMap<&SwitchName, Vec<usize>> = BTreeMap::new();
    let mut hosts = HashSet::new();
    for &rank in members {
        let Some(leaf) = fabric.leaves(rank).next() else { continue };
        if hosts.insert(ranks[rank].host.as_str()) {
            leaves.entry(leaf).or_default().push(rank);
        }
    }
    // Each leaf's hosts, and how many of its pairs are made (whose host is next).
    let mut sides: Vec<(&SwitchName, Vec<usize>, usize)> = leaves.into_iter().map(|(l, r)| (l, r, 0)).collect();
    let mut pairs = Pairs::new();
    for i in 0..sides.len() {
        for j in i + 1..sides.len() {
            let (a, b) = (&sides[i], &sides[j]);
            if fabric.hops(a.1[0], b.1[0]) != Some(4) {
                continue;
            }
            let count = fabric.uplinks_of(a.0).min(fabric.uplinks_of(b.0)).max(1);
            for _ in 0..count {
                pairs.push((take(&mut sides[i]), take(&mut sides[j])));
            }
        }
    }
    pairs
}

/// A leaf's next host in turn.
fn take((_, hosts, made): &mut (&SwitchName, Vec<usize>, usize)) -> usize {
    *made += 1;
    hosts[(*made - 1) % hosts.len()]
}
