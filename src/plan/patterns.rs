//! Each pattern's `(src, dst)` pairs in a job of `n` ranks: fan-in,
//! one-to-all, all-to-all, rings, pairwise and explicit lists. Pure; the
//! phases they go into are built in `plan`.

use crate::scenario::{BadKey, GroupSpec, Pattern, RankSet};

use super::shuffle;

/// A selector's ranks, or its default's, in a job of `n`.
pub(super) fn select(
    key: &'static str,
    set: &Option<RankSet>,
    default: RankSet,
    n: usize,
) -> Result<Vec<usize>, BadKey> {
    set.as_ref().unwrap_or(&default).resolve(n).map_err(|e| BadKey::new(key, e.to_string()))
}

/// `(src, dst)` pairs of ranks.
pub(super) type Pairs = Vec<(usize, usize)>;

/// A pattern's `(src, dst)` pairs; errors carry the offending field.
pub(super) fn expand(g: &GroupSpec, n: usize) -> Result<Pairs, BadKey> {
    let select = |key, set, default| select(key, set, default, n);
    let pairs = match g.pattern {
        Pattern::FanIn => {
            let receivers = select("receivers", &g.receivers, RankSet::one(0))?;
            let senders = select("senders", &g.senders, RankSet::All)?;
            cross(&senders, &receivers, g.allow_self)
        }
        Pattern::OneToAll => {
            let senders = select("senders", &g.senders, RankSet::one(0))?;
            let receivers = select("receivers", &g.receivers, RankSet::All)?;
            cross(&senders, &receivers, g.allow_self)
        }
        Pattern::AllToAll => {
            let ranks = select("ranks", &g.ranks, RankSet::All)?;
            cross(&ranks, &ranks, g.allow_self)
        }
        Pattern::Ring => {
            let ranks = select("ranks", &g.ranks, RankSet::All)?;
            with_reverse(dedup(ring_of(&ranks)), g.bidirectional)
        }
        Pattern::RandomRing => {
            let ranks = shuffle::permutation(&select("ranks", &g.ranks, RankSet::All)?, g.seed.unwrap_or(0));
            with_reverse(dedup(ring_of(&ranks)), g.bidirectional)
        }
        Pattern::Pairwise => {
            let pairs = match &g.flows {
                Some(list) => explicit(list, n, g.allow_self)?,
                None => {
                    let ranks = select("ranks", &g.ranks, RankSet::All)?;
                    if ranks.len() % 2 == 1 {
                        return Err(BadKey::new(
                            "ranks",
                            format!("pairwise needs an even number of ranks, got {}", ranks.len()),
                        ));
                    }
                    let half = ranks.len() / 2;
                    (0..half).map(|i| (ranks[i], ranks[i + half])).collect()
                }
            };
            with_reverse(pairs, g.bidirectional)
        }
        Pattern::Explicit => explicit(g.flows.as_deref().unwrap_or_default(), n, g.allow_self)?,
        // Scenario validation keeps all-pairs alone in its scenario, where `build` makes its rounds.
        Pattern::AllPairs => {
            return Err(BadKey::new("pattern", "`all-pairs` cannot share a phase with other groups".into()))
        }
        // `plan` asks the topology for these (plan::topology::bisection).
        Pattern::Bisection => return Err(BadKey::new("pattern", "`bisection` is chosen from the topology".into())),
        // `plan` pairs these by rail and topology (plan::mesh).
        Pattern::Mesh => return Err(BadKey::new("pattern", "`mesh` is chosen by rail and topology".into())),
    };
    Ok(pairs)
}

/// Each rank to the next in `ranks`, the last back to the first (none for fewer than 2).
fn ring_of(ranks: &[usize]) -> Pairs {
    if ranks.len() < 2 {
        return Vec::new();
    }
    (0..ranks.len()).map(|i| (ranks[i], ranks[(i + 1) % ranks.len()])).collect()
}

pub(super) fn cross(srcs: &[usize], dsts: &[usize], allow_self: bool) -> Pairs {
    let mut out = Vec::new();
    for &dst in dsts {
        for &src in srcs {
            if src != dst || allow_self {
                out.push((src, dst));
            }
        }
    }
    out
}

fn explicit(list: &[[usize; 2]], n: usize, allow_self: bool) -> Result<Pairs, BadKey> {
    let mut out = Vec::new();
    for (i, &[src, dst]) in list.iter().enumerate() {
        for rank in [src, dst] {
            RankSet::one(rank).resolve(n).map_err(|e| BadKey::new("flows", format!("flow {i} [{src}, {dst}]: {e}")))?;
        }
        if src == dst && !allow_self {
            return Err(BadKey::new(
                "flows",
                format!(
                    "flow {i} [{src}, {dst}] goes from a rank to itself; set allow_self = true to measure loopback"
                ),
            ));
        }
        if out.contains(&(src, dst)) {
            return Err(BadKey::new("flows", format!("flow {i} [{src}, {dst}] is listed twice")));
        }
        out.push((src, dst));
    }
    Ok(out)
}

pub(super) fn with_reverse(pairs: Pairs, bidirectional: bool) -> Pairs {
    if !bidirectional {
        return pairs;
    }
    let reversed: Pairs = pairs.iter().map(|&(a, b)| (b, a)).collect();
    dedup(pairs.into_iter().chain(reversed).collect())
}

/// Drops repeated pairs (a 2-rank ring is one pair each way), keeping order.
fn dedup(pairs: Pairs) -> Pairs {
    let mut seen = std::collections::HashSet::with_capacity(pairs.len());
    pairs.into_iter().filter(|p| seen.insert(*p)).collect()
}
