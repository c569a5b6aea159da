//! The all-pairs matrix: every round's flows in one N×N table of Gb/s.

use crate::plan::Plan;
use crate::result::{PairMatrix, PhaseResult};
use crate::scenario::Pattern;

/// The matrix when the plan is all-pairs; `None` otherwise.
pub fn pair_matrix(plan: &Plan, phases: &[PhaseResult]) -> Option<PairMatrix> {
    let group = plan.phases.first()?.groups.iter().find(|g| g.pattern == Pattern::AllPairs)?;
    let n = plan.ranks.len();
    let mut gbps = vec![vec![None; n]; n];
    for flow in phases.iter().flat_map(|p| &p.flows).filter(|f| f.group == group.name) {
        gbps[flow.src][flow.dst] = Some(flow.gbps);
    }
    Some(PairMatrix { group: group.name.clone(), hosts: plan.ranks.iter().map(|r| r.host.clone()).collect(), gbps })
}
