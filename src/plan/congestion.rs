//! A `[congestion]` scenario's phases: for each canary group, one phase
//! with that group alone ("isolated") and one with it beside every
//! congestor group ("congested"), in that order, as GPCNeT measures each
//! canary test alone and then under load. With `split`, a seeded random
//! draw gives the congestors their ranks and the canaries the rest.
//!
//! The congestors' lead-in is the phase's warm-up: every flow of a phase
//! starts at its t0 and the window opens after the warm-up, so the
//! congestors have loaded the fabric for a whole warm-up when the canaries'
//! first counted message goes; every stream of a rank stops only after its
//! sampler has read the window's closing boundary, so the congestors are
//! still sending when the canaries' window closes.

use serde::{Deserialize, Serialize};

use super::shuffle::permutation;
use super::topology::Job;
use super::{phases_of, Phase};
use crate::scenario::congestion::{CongestionSpec, Role};
use crate::scenario::{BadField, Field, GroupSpec, Pattern, RankSet, Scenario, Section};

/// Which measurement of which canary group a phase is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CongestionPoint {
    /// The canary group measured.
    pub canary: String,
    /// False: the canary alone; true: beside every congestor group.
    pub congested: bool,
}

/// The ranks a split gives each role, both in the draw's order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Split {
    pub congestors: Vec<usize>,
    pub canaries: Vec<usize>,
}

/// Splits ranks 0..n: the first round(`fraction` × n) of the seed's
/// permutation congest, the rest are canaries.
pub fn split(n: usize, fraction: f64, seed: u64) -> Result<Split, ShortRole> {
    let order = permutation(&(0..n).collect::<Vec<_>>(), seed);
    let k = (fraction * n as f64).round() as usize;
    let (congestors, canaries) = order.split_at(k.min(n));
    // Every pattern needs two ranks to make a flow: a role of one rank would measure nothing.
    let short = [("congestors", congestors.len()), ("canaries", canaries.len())].into_iter().find(|&(_, k)| k < 2);
    if let Some((roles, _)) = short {
        return Err(ShortRole { fraction, ranks: n, congestors: congestors.len(), canaries: canaries.len(), roles });
    }
    Ok(Split { congestors: congestors.to_vec(), canaries: canaries.to_vec() })
}

/// A split that leaves one role (`roles`: "congestors" or "canaries") fewer
/// than the two ranks a flow needs.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error(
    "split = {fraction} of {ranks} rank(s) makes {congestors} congestor(s) and {canaries} canary rank(s): the {roles} \
     need at least 2 ranks; give more ranks or a split nearer 0.5"
)]
pub struct ShortRole {
    pub fraction: f64,
    pub ranks: usize,
    pub congestors: usize,
    pub canaries: usize,
    pub roles: &'static str,
}

/// The phases of a congestion scenario of `job.n` ranks, numbered from 0.
pub(super) fn phases(scenario: &Scenario, spec: &CongestionSpec, job: Job) -> Result<Vec<Phase>, BadField> {
    let n = job.n;
    let mut whole = scenario.clone();
    if let Some(fraction) = spec.split {
        let split =
            split(n, fraction, spec.seed).map_err(|e| BadField::new(Field::congestion("split"), e.to_string()))?;
        for g in &mut whole.groups {
            let ranks = if g.role == Some(Role::Canary) { &split.canaries } else { &split.congestors };
            assign(g, ranks);
        }
    }
    for g in whole.groups.iter_mut().filter(|g| g.pattern == Pattern::RandomRing) {
        g.seed = g.seed.or(Some(spec.seed));
    }
    let canaries: Vec<usize> =
        (0..whole.groups.len()).filter(|&i| whole.groups[i].role == Some(Role::Canary)).collect();
    let mut out = Vec::new();
    for canary in canaries {
        for congested in [false, true] {
            // The groups of this phase, by their index in the scenario (for errors).
            let kept: Vec<usize> = (0..whole.groups.len())
                .filter(|&i| i == canary || (congested && whole.groups[i].role == Some(Role::Congestor)))
                .collect();
            let mut part = whole.clone();
            part.groups = kept.iter().map(|&i| whole.groups[i].clone()).collect();
            let name = whole.groups[canary].name.clone();
            let title = format!("{name} {}", if congested { "congested" } else { "isolated" });
            let mut phase = phases_of(&part, &title, job, None, out.len())
                .map_err(|bad| BadField { field: renumber(bad.field, &kept), ..bad })?;
            phase.iter_mut().for_each(|p| p.congestion = Some(CongestionPoint { canary: name.clone(), congested }));
            out.extend(phase);
        }
    }
    Ok(out)
}

/// A role group's selectors from the split: rooted patterns (fan-in,
/// one-to-all) are rooted at the first rank of the draw.
fn assign(g: &mut GroupSpec, ranks: &[usize]) {
    let set = RankSet::Ranges(ranks.iter().map(|&r| (r, r)).collect());
    match g.pattern {
        Pattern::FanIn => {
            g.receivers = Some(RankSet::one(ranks[0]));
            g.senders = Some(set);
        }
        Pattern::OneToAll => {
            g.senders = Some(RankSet::one(ranks[0]));
            g.receivers = Some(set);
        }
        _ => g.ranks = Some(set),
    }
}

/// A field of the phase's own group list, renamed to the scenario's group.
fn renumber(field: Field, kept: &[usize]) -> Field {
    match field.section {
        Section::Group(i) => Field::group(kept.get(i).copied().unwrap_or(i), field.key),
        _ => field,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_gives_one_split() {
        let a = split(50, 0.8, 42).unwrap();
        assert_eq!((a.congestors.len(), a.canaries.len()), (40, 10), "80/20 of 50 ranks");
        assert_eq!(a, split(50, 0.8, 42).unwrap(), "the same seed, the same split");
        let b = split(50, 0.8, 43).unwrap();
        assert_ne!(a.canaries, b.canaries, "another seed, other canaries (of C(50, 10) draws)");
        let mut all: Vec<usize> = a.congestors.iter().chain(&a.canaries).copied().collect();
        all.sort_unstable();
        assert_eq!(all, (0..50).collect::<Vec<_>>(), "every rank has one role");
    }

    #[test]
    fn a_split_that_leaves_a_role_empty_says_so() {
        let e = split(4, 0.9, 1).unwrap_err().to_string();
        assert!(
            e.contains("makes 4 congestor(s) and 0 canary") && e.contains("the canaries need at least 2 ranks"),
            "{e}"
        );
        let e = split(5, 0.8, 1).unwrap_err().to_string();
        assert!(e.contains("makes 4 congestor(s) and 1 canary rank(s): the canaries need at least 2 ranks"), "{e}");
        let e = split(4, 0.3, 1).unwrap_err().to_string();
        assert!(e.contains("makes 1 congestor(s) and 3 canary rank(s): the congestors need at least 2 ranks"), "{e}");
        assert!(split(4, 0.5, 1).is_ok(), "two of each");
    }
}
