//! A sweep's table: one row per point, each group's headline number, its
//! message rate and busiest worker CPU, and its ratio to the baseline point
//! (the impact of the swept parameter). Two-parameter sweeps compare each
//! point with the baseline row of its own column.

use serde::{Deserialize, Serialize};

use crate::plan::Plan;
use crate::result::PhaseResult;
use crate::scenario::Mode;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SweepResult {
    pub parameter: String,
    pub baseline: String,
    /// Two-parameter sweeps: the columns' parameter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by_parameter: Option<String>,
    pub points: Vec<SweepRow>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SweepRow {
    pub value: String,
    /// Two-parameter sweeps: the point's column value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by_value: Option<String>,
    pub phase: usize,
    /// The point its column (a one-parameter sweep: every point) is compared with.
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
    /// Bandwidth groups: messages per second of all the group's flows, millions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mpps: Option<f64>,
    /// Whether the group ran over RDMA at this point.
    #[serde(default)]
    pub rdma: bool,
    /// The busiest worker process among the ranks of the group's flows,
    /// user + system in % of one core (100 = one core pegged).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_worker_cpu_pct: Option<f64>,
}

impl SweepResult {
    /// The cell `point`'s `group` is compared with: the same group at the
    /// baseline point of the point's column.
    pub fn baseline_of(&self, point: &SweepRow, group: &str) -> Option<&SweepCell> {
        self.points
            .iter()
            .find(|p| p.baseline && p.by_value == point.by_value)
            .and_then(|p| p.groups.iter().find(|c| c.group == group))
    }
}

/// The sweep table of the phases measured so far (`None` without a sweep).
pub fn summarize(plan: &Plan, phases: &[PhaseResult]) -> Option<SweepResult> {
    let points: Vec<_> = plan.phases.iter().filter_map(|p| Some((p.index, p.sweep.as_ref()?))).collect();
    let (_, first) = points.first()?;
    let column = |s: &crate::plan::SweepPoint| s.by.as_ref().map(|b| b.value.clone());
    let measured = |index: usize| phases.iter().find(|p| p.index == index).map(cells_of);
    let rows = points
        .iter()
        .filter_map(|(index, point)| {
            let base =
                points.iter().find(|(_, s)| s.baseline && column(s) == column(point)).and_then(|(b, _)| measured(*b));
            let groups = measured(*index)?
                .into_iter()
                .map(|mut cell| {
                    let base = base.as_ref().and_then(|b| b.iter().find(|c| c.group == cell.group)).map(|c| c.value);
                    cell.ratio = base.filter(|&b| b > 0.0).map(|b| cell.value / b);
                    cell
                })
                .collect();
            Some(SweepRow {
                value: point.value.clone(),
                by_value: column(point),
                phase: *index,
                baseline: point.baseline,
                groups,
            })
        })
        .collect();
    let baseline_value = points.iter().find(|(_, s)| s.baseline).map_or_else(String::new, |(_, s)| s.value.clone());
    Some(SweepResult {
        parameter: first.parameter.clone(),
        baseline: baseline_value,
        by_parameter: first.by.as_ref().map(|b| b.parameter.clone()),
        points: rows,
    })
}

/// Each group's numbers in one phase, without ratios.
fn cells_of(phase: &PhaseResult) -> Vec<SweepCell> {
    phase
        .groups
        .iter()
        .map(|g| {
            let flows: Vec<_> = phase.flows.iter().filter(|f| f.group == g.name).collect();
            let ranks: Vec<usize> = flows.iter().flat_map(|f| [f.src, f.dst]).collect();
            let max_worker_cpu_pct = phase
                .ranks
                .iter()
                .filter(|r| r.reported && ranks.contains(&r.rank))
                .map(|r| r.cpu.worker_pct)
                .reduce(f64::max);
            let (metric, value, mpps) = match g.mode {
                Mode::Bandwidth => {
                    let rate: f64 = flows.iter().map(|f| f.msgs_per_s).sum();
                    ("aggregate_gbps", g.aggregate_gbps, Some(rate / 1e6))
                }
                Mode::Latency => {
                    let p99 = flows.iter().filter_map(|f| f.latency.map(|l| l.p99_us));
                    ("p99_us", p99.fold(0.0, f64::max), None)
                }
            };
            SweepCell {
                group: g.name.clone(),
                metric: metric.to_string(),
                value,
                ratio: None,
                mpps,
                rdma: g.transport == crate::scenario::Transport::Rdma,
                max_worker_cpu_pct,
            }
        })
        .collect()
}
