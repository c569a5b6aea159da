//! The all-pairs matrix: every round's flows in one N×N table, of Gb/s or,
//! for a latency group, of the typical half round trip in µs. With
//! repeats, each cell is the mean over the pair's counted repeats.

use serde::{Deserialize, Serialize};

use crate::plan::{Plan, RankInfo};
use crate::result::{repeats, PhaseResult};
use crate::scenario::{Mode, Pattern};

/// The all-pairs matrix over every rank of the plan.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PairMatrix {
    pub group: String,
    /// Host of each rank: the row and column labels.
    pub hosts: Vec<String>,
    /// What the cells hold: Gb/s (bandwidth) or µs (latency: the typical
    /// half round trip).
    pub mode: Mode,
    /// `values[src][dst]`: the flow src → dst; `null` where none ran (the
    /// diagonal, the direction not measured, ranks left out).
    pub values: Vec<Vec<Option<f64>>>,
}

/// The matrix when the plan is all-pairs; `None` otherwise.
pub fn pair_matrix(plan: &Plan, phases: &[PhaseResult]) -> Option<PairMatrix> {
    let group = plan.phases.first()?.groups.iter().find(|g| g.pattern == Pattern::AllPairs)?;
    let n = plan.ranks.len();
    let mut sums = vec![vec![(0.0, 0u32); n]; n];
    let counted = phases.iter().filter(|p| repeats::counts(plan, p));
    for flow in counted.flat_map(|p| &p.flows).filter(|f| f.group == group.name) {
        let value = match group.mode {
            Mode::Bandwidth => Some(flow.gbps),
            Mode::Latency => flow.latency.as_ref().map(|l| l.typical_us),
        };
        if let Some(v) = value {
            let cell = &mut sums[flow.src][flow.dst];
            *cell = (cell.0 + v, cell.1 + 1);
        }
    }
    let values = sums
        .into_iter()
        .map(|row| row.into_iter().map(|(sum, k)| (k > 0).then(|| sum / f64::from(k))).collect())
        .collect();
    Some(PairMatrix {
        group: group.name.clone(),
        hosts: plan.ranks.iter().map(RankInfo::label).collect(),
        mode: group.mode,
        values,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Repeat;
    use crate::result::RunResult;

    /// The all-pairs rounds twice, the second time at 3× the Gb/s with its
    /// last round cut short: counted cells are the mean of both repeats.
    #[test]
    fn a_repeated_pair_is_the_mean_of_its_counted_repeats() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/v2-all-pairs.json");
        let mut run: RunResult = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let once = run.matrix.clone().expect("an all-pairs run");
        let rounds = run.plan.phases.len();
        for number in 1..=2u32 {
            for k in 0..rounds {
                let index = (number as usize - 1) * rounds + k;
                if number == 1 {
                    let p = &mut run.plan.phases[k];
                    p.repeat = Some(Repeat { number, count: 2, of: p.name.clone() });
                    continue;
                }
                let mut p = run.plan.phases[k].clone();
                p.index = index;
                p.repeat = Some(Repeat { number, count: 2, of: p.name.clone() });
                run.plan.phases.push(p);
                let mut m = run.phases[k].clone();
                m.index = index;
                m.flows.iter_mut().for_each(|f| f.gbps *= 3.0);
                m.complete = k + 1 < rounds;
                run.phases.push(m);
            }
        }
        let twice = pair_matrix(&run.plan, &run.phases).unwrap();
        let last: Vec<(usize, usize)> = run.phases[rounds - 1].flows.iter().map(|f| (f.src, f.dst)).collect();
        let mut checked = 0;
        for (src, row) in once.values.iter().enumerate() {
            for (dst, cell) in row.iter().enumerate() {
                let Some(v) = cell else { continue };
                let expected = if last.contains(&(src, dst)) { *v } else { (v + 3.0 * v) / 2.0 };
                assert!((twice.values[src][dst].unwrap() - expected).abs() < 1e-9, "[{src}][{dst}]");
                checked += 1;
            }
        }
        assert!(checked > last.len(), "{checked} cells");
    }
}
