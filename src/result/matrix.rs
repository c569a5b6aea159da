//! The all-pairs matrix: every round's flows in one N×N table, of Gb/s or,
//! for a latency group, of the typical half round trip in µs.

use crate::plan::Plan;
use crate::result::{PairMatrix, PhaseResult};
use crate::scenario::{Mode, Pattern};

/// The matrix when the plan is all-pairs; `None` otherwise.
pub fn pair_matrix(plan: &Plan, phases: &[PhaseResult]) -> Option<PairMatrix> {
    let group = plan.phases.first()?.groups.iter().find(|g| g.pattern == Pattern::AllPairs)?;
    let n = plan.ranks.len();
    let mut values = vec![vec![None; n]; n];
    for flow in phases.iter().flat_map(|p| &p.flows).filter(|f| f.group == group.name) {
        values[flow.src][flow.dst] = match group.mode {
            Mode::Bandwidth => Some(flow.gbps),
            Mode::Latency => flow.latency.as_ref().map(|l| l.typical_us),
        };
    }
    Some(PairMatrix {
        group: group.name.clone(),
        hosts: plan.ranks.iter().map(|r| r.host.clone()).collect(),
        mode: group.mode,
        values,
    })
}
