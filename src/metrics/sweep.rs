//! A sweep's table: one row per point, each group's headline number, and
//! its ratio to the baseline point (the impact of the swept parameter).

use serde::{Deserialize, Serialize};

use crate::plan::Plan;
use crate::result::PhaseResult;
use crate::scenario::Mode;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SweepResult {
    pub parameter: String,
    pub baseline: String,
    pub points: Vec<SweepRow>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SweepRow {
    pub value: String,
    pub phase: usize,
    pub baseline: bool,
    pub groups: Vec<SweepCell>,
}

/// A group's number at one point: aggregate Gb/s for bandwidth groups,
/// p99 half-round-trip µs for latency groups.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SweepCell {
    pub group: String,
    pub metric: String,
    pub value: f64,
    /// value / the baseline point's value (e.g. 0.54 = 54 % of unloaded).
    pub ratio: Option<f64>,
}

/// The sweep table of the phases measured so far (`None` without a sweep).
pub fn summarize(plan: &Plan, phases: &[PhaseResult]) -> Option<SweepResult> {
    let points: Vec<_> = plan.phases.iter().filter_map(|p| Some((p.index, p.sweep.as_ref()?))).collect();
    let (_, first) = points.first()?;
    let baseline = points.iter().find(|(_, s)| s.baseline).map(|(i, _)| *i);
    let cells_of = |phase: &PhaseResult| -> Vec<(String, String, f64)> {
        phase
            .groups
            .iter()
            .map(|g| match g.mode {
                Mode::Bandwidth => (g.name.clone(), "aggregate_gbps".to_string(), g.aggregate_gbps),
                Mode::Latency => {
                    let p99 =
                        phase.flows.iter().filter(|f| f.group == g.name).filter_map(|f| f.latency.map(|l| l.p99_us));
                    (g.name.clone(), "p99_us".to_string(), p99.fold(0.0, f64::max))
                }
            })
            .collect()
    };
    let base_cells = baseline.and_then(|b| phases.iter().find(|p| p.index == b)).map(cells_of);
    let rows = points
        .iter()
        .filter_map(|(index, point)| {
            let phase = phases.iter().find(|p| p.index == *index)?;
            let groups = cells_of(phase)
                .into_iter()
                .map(|(group, metric, value)| {
                    let base = base_cells.as_ref().and_then(|b| b.iter().find(|(g, _, _)| *g == group)).map(|c| c.2);
                    let ratio = base.filter(|&b| b > 0.0).map(|b| value / b);
                    SweepCell { group, metric, value, ratio }
                })
                .collect();
            Some(SweepRow { value: point.value.clone(), phase: *index, baseline: point.baseline, groups })
        })
        .collect();
    let baseline_value = points.iter().find(|(_, s)| s.baseline).map_or_else(String::new, |(_, s)| s.value.clone());
    Some(SweepResult { parameter: first.parameter.clone(), baseline: baseline_value, points: rows })
}
