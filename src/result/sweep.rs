//! A sweep's table: one row per point, each group's headline number, its
//! message rate and busiest worker CPU, and its ratio to the baseline point
//! (the impact of the swept parameter). Two-parameter sweeps compare each
//! point with the baseline row of its own column.

use serde::{Deserialize, Serialize};

use crate::metrics::confidence::Spread;
use crate::plan::{Plan, SweepPoint};
use crate::result::metric::{self, Metric};
use crate::result::{repeats, PhaseResult};
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
    #[serde(with = "metric::sweep_name")]
    pub metric: Metric,
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
    /// A repeated point: `value` over its counted repeats (`value` and the
    /// other numbers are then the repeats' means).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spread: Option<Spread>,
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
/// A repeated point's numbers are the means of its counted repeats
/// (`result::repeats`), with their spread.
pub fn summarize(plan: &Plan, phases: &[PhaseResult]) -> Option<SweepResult> {
    // Each point once (by its name without the repeat), with the plan
    // indices of all its repeats.
    let mut points: Vec<(&str, Vec<usize>, &SweepPoint)> = Vec::new();
    for p in &plan.phases {
        let Some(at) = &p.sweep else { continue };
        let key = p.repeat.as_ref().map_or(p.name.as_str(), |r| r.of.as_str());
        match points.iter_mut().find(|(k, ..)| *k == key) {
            Some((_, indices, _)) => indices.push(p.index),
            None => points.push((key, vec![p.index], at)),
        }
    }
    let (_, _, first) = points.first()?;
    let column = |s: &SweepPoint| s.by.as_ref().map(|b| b.value.clone());
    let measured = |indices: &[usize]| {
        let counted: Vec<Vec<SweepCell>> =
            phases.iter().filter(|p| indices.contains(&p.index) && repeats::counts(plan, p)).map(cells_of).collect();
        merged(counted)
    };
    let rows = points
        .iter()
        .filter_map(|(_, indices, point)| {
            let base = points
                .iter()
                .find(|(_, _, s)| s.baseline && column(s) == column(point))
                .and_then(|(_, b, _)| measured(b));
            let groups = measured(indices)?
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
                phase: indices[0],
                baseline: point.baseline,
                groups,
            })
        })
        .collect();
    let baseline_value =
        points.iter().find(|(_, _, s)| s.baseline).map_or_else(String::new, |(_, _, s)| s.value.clone());
    Some(SweepResult {
        parameter: first.parameter.clone(),
        baseline: baseline_value,
        by_parameter: first.by.as_ref().map(|b| b.parameter.clone()),
        points: rows,
    })
}

/// One point's cells from its repeats' cells: each number's mean, and the
/// spread of `value` when there are several; `None` when none counted.
fn merged(mut repeats: Vec<Vec<SweepCell>>) -> Option<Vec<SweepCell>> {
    if repeats.len() < 2 {
        return repeats.pop();
    }
    let first = repeats[0].clone();
    let mean = |values: Vec<f64>| (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64);
    Some(
        first
            .into_iter()
            .map(|mut cell| {
                let same: Vec<&SweepCell> =
                    repeats.iter().filter_map(|r| r.iter().find(|c| c.group == cell.group)).collect();
                let values: Vec<f64> = same.iter().map(|c| c.value).collect();
                cell.spread = Spread::of(&values);
                cell.value = mean(values).unwrap_or(cell.value);
                cell.mpps = mean(same.iter().filter_map(|c| c.mpps).collect());
                cell.max_worker_cpu_pct = mean(same.iter().filter_map(|c| c.max_worker_cpu_pct).collect());
                cell
            })
            .collect(),
    )
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
                    (Metric::AggregateGbps, g.aggregate_gbps, Some(rate / 1e6))
                }
                Mode::Latency => {
                    let p99 = flows.iter().filter_map(|f| f.latency.map(|l| l.p99_us));
                    (Metric::LatencyP99, p99.fold(0.0, f64::max), None)
                }
            };
            SweepCell {
                group: g.name.clone(),
                metric,
                value,
                ratio: None,
                mpps,
                rdma: g.transport == crate::scenario::Transport::Rdma,
                max_worker_cpu_pct,
                spread: None,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result::RunResult;

    /// Two points × three interleaved repeats (a real run): one row per
    /// point, its value the mean of its repeats, the ratio of the means.
    #[test]
    fn a_repeated_point_is_the_mean_of_its_repeats() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/v3-repeats-sweep.json");
        let run: RunResult = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let sweep = summarize(&run.plan, &run.phases).unwrap();
        assert_eq!(
            sweep.points.iter().map(|p| (p.value.as_str(), p.phase)).collect::<Vec<_>>(),
            [("16K", 0), ("128K", 1)]
        );
        let mean = |first: usize| {
            [first, first + 2, first + 4].map(|i| run.phases[i].aggregate_gbps).iter().sum::<f64>() / 3.0
        };
        let (small, large) = (&sweep.points[0].groups[0], &sweep.points[1].groups[0]);
        assert!((small.value - mean(0)).abs() < 1e-9 && (large.value - mean(1)).abs() < 1e-9);
        assert!((large.ratio.unwrap() - mean(1) / mean(0)).abs() < 1e-12);
        let s = small.spread.expect("three repeats");
        assert_eq!(s.n, 3);
        assert!((s.mean - small.value).abs() < 1e-12);
    }
}
