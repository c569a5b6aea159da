//! A congestion run's impact per canary group (GPCNeT's method,
//! docs/CONGESTION.md): the canary's number congested over isolated for
//! latency, isolated over congested for bandwidth, for the mean and the
//! tail, so that 1 is unharmed and 2 is twice as bad either way.

use serde::{Deserialize, Serialize};

use crate::metrics::confidence::Spread;
use crate::metrics::stats;
use crate::plan::Plan;
use crate::result::PhaseResult;
use crate::scenario::Mode;

/// GPCNeT's tail of bandwidth: its 1st percentile (the tail of latency is
/// the group's p99, from its merged round trips).
const BANDWIDTH_TAIL: f64 = 1.0;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CanaryImpact {
    /// The canary group.
    pub group: String,
    pub mode: Mode,
    /// With `[run] repeat`: which repeat these two phases are (from 1); each
    /// repeat pairs its own isolated and congested measurement.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeat: Option<u32>,
    /// `run.phases[].index` of its two measurements (absent: not measured).
    pub isolated_phase: Option<usize>,
    pub congested_phase: Option<usize>,
    pub isolated: Option<CanaryNumbers>,
    pub congested: Option<CanaryNumbers>,
    /// Latency: congested mean / isolated mean; bandwidth: isolated /
    /// congested. 1 = unharmed, above 1 = hurt by the congestors.
    pub impact_mean: Option<f64>,
    /// The same ratio of the tails (p99 latency; 1st-percentile bandwidth).
    pub impact_tail: Option<f64>,
}

/// A canary group's numbers in one phase. Latency: µs (half round trip);
/// bandwidth: Gb/s per flow.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct CanaryNumbers {
    /// Latency: the mean over every round trip of the group's flows.
    /// Bandwidth: the mean of the flows' Gb/s over the window.
    pub mean: f64,
    /// Latency: the 99th percentile of every round trip of the group's
    /// flows. Bandwidth: the 1st percentile (nearest rank) of every flow's
    /// Gb/s in every interval of the window.
    pub tail: f64,
    pub flows: usize,
}

/// Each canary group's impact from the phases measured so far; `None` for
/// a run without `[congestion]`.
pub fn summarize(plan: &Plan, phases: &[PhaseResult]) -> Option<Vec<CanaryImpact>> {
    let points: Vec<_> = plan.phases.iter().filter_map(|p| Some((p.index, p.congestion.as_ref()?))).collect();
    if points.is_empty() {
        return None;
    }
    // A canary's congested phase comes right after its isolated one, in
    // every repeat: each congested phase pairs with the latest isolated
    // phase of its canary before it.
    let out = points
        .iter()
        .filter(|(_, c)| c.congested)
        .map(|&(congested_at, point)| {
            let group = point.canary.as_str();
            let isolated_phase = points
                .iter()
                .rev()
                .find(|(i, c)| *i < congested_at && c.canary == group && !c.congested)
                .map(|(i, _)| *i);
            let congested_phase = Some(congested_at);
            let repeat = plan.phases.iter().find(|p| p.index == congested_at).and_then(|p| p.repeat.as_ref());
            let mode =
                plan.phases.iter().flat_map(|p| &p.groups).find(|g| g.name == group).map_or(Mode::Latency, |g| g.mode);
            let measured = |index: Option<usize>| {
                let phase = phases.iter().find(|p| Some(p.index) == index)?;
                numbers(phase, group, mode)
            };
            let (isolated, congested) = (measured(isolated_phase), measured(congested_phase));
            let ratio = |pick: fn(&CanaryNumbers) -> f64| {
                let (i, c) = (pick(isolated.as_ref()?), pick(congested.as_ref()?));
                let (top, bottom) = if mode == Mode::Latency { (c, i) } else { (i, c) };
                (bottom > 0.0).then(|| top / bottom)
            };
            CanaryImpact {
                group: group.to_string(),
                mode,
                repeat: repeat.map(|r| r.number),
                isolated_phase,
                congested_phase,
                impact_mean: ratio(|n| n.mean),
                impact_tail: ratio(|n| n.tail),
                isolated,
                congested,
            }
        })
        .collect();
    Some(out)
}

/// A canary group's impacts over the repeats of a repeated run: how far
/// one repeat's impact can be trusted.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ImpactOverRepeats {
    pub group: String,
    pub mode: Mode,
    /// `impact_mean` of every repeat that has one (dimensionless), with its
    /// mean, stdev, min/max and 95 % interval; `None` below two repeats.
    pub impact_mean: Option<Spread>,
    /// The same of `impact_tail`.
    pub impact_tail: Option<Spread>,
}

/// Each canary group's impacts over its repeats, in the groups' order;
/// `None` when the impacts are not repeated.
pub fn over_repeats(impacts: &[CanaryImpact]) -> Option<Vec<ImpactOverRepeats>> {
    let repeated: Vec<&CanaryImpact> = impacts.iter().filter(|c| c.repeat.is_some()).collect();
    let mut groups: Vec<(&str, Mode)> = Vec::new();
    for c in &repeated {
        if !groups.iter().any(|(g, _)| *g == c.group) {
            groups.push((c.group.as_str(), c.mode));
        }
    }
    let spread = |group: &str, pick: fn(&CanaryImpact) -> Option<f64>| {
        let values: Vec<f64> = repeated.iter().filter(|c| c.group == group).filter_map(|c| pick(c)).collect();
        Spread::of(&values)
    };
    let out: Vec<ImpactOverRepeats> = groups
        .into_iter()
        .map(|(group, mode)| ImpactOverRepeats {
            group: group.to_string(),
            mode,
            impact_mean: spread(group, |c| c.impact_mean),
            impact_tail: spread(group, |c| c.impact_tail),
        })
        .collect();
    (!out.is_empty()).then_some(out)
}

/// The canary group's mean and tail in one phase (`None`: nothing measured).
fn numbers(phase: &PhaseResult, group: &str, mode: Mode) -> Option<CanaryNumbers> {
    let flows: Vec<_> = phase.flows.iter().filter(|f| f.group == group).collect();
    match mode {
        Mode::Latency => {
            let l = phase.groups.iter().find(|g| g.name == group)?.latency?;
            Some(CanaryNumbers { mean: l.mean_us, tail: l.p99_us, flows: flows.len() })
        }
        Mode::Bandwidth => {
            let rates: Vec<f64> = flows.iter().map(|f| f.gbps).collect();
            let samples: Vec<f64> = flows.iter().flat_map(|f| f.interval_gbps.iter().copied()).collect();
            Some(CanaryNumbers {
                mean: stats::mean(&rates)?,
                tail: stats::percentile(&samples, BANDWIDTH_TAIL)?,
                flows: flows.len(),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn impact(group: &str, repeat: Option<u32>, mean: Option<f64>, tail: f64) -> CanaryImpact {
        CanaryImpact {
            group: group.into(),
            mode: Mode::Latency,
            repeat,
            isolated_phase: None,
            congested_phase: None,
            isolated: None,
            congested: None,
            impact_mean: mean,
            impact_tail: Some(tail),
        }
    }

    #[test]
    fn repeated_impacts_get_their_spread_per_group() {
        let impacts = [
            impact("ring", Some(1), Some(2.0), 3.0),
            impact("bw", Some(1), Some(1.0), 1.0),
            impact("ring", Some(2), Some(4.0), 5.0),
            impact("bw", Some(2), None, 1.5),
            impact("ring", Some(3), Some(3.0), 4.0),
        ];
        let over = over_repeats(&impacts).unwrap();
        assert_eq!(over.iter().map(|o| o.group.as_str()).collect::<Vec<_>>(), ["ring", "bw"], "file order");
        let ring = over[0].impact_mean.unwrap();
        assert_eq!((ring.n, ring.mean, ring.min, ring.max), (3, 3.0, 2.0, 4.0));
        // stdev 1, t(0.975, 2) = 4.303: the interval is 3 ± 4.303 / √3.
        assert!((ring.ci95_half - 4.302_652_7 / 3f64.sqrt()).abs() < 1e-6, "{ring:?}");
        assert_eq!(over[0].impact_tail.unwrap().mean, 4.0);
        assert_eq!(over[1].impact_mean, None, "one repeat had no impact: one value is no spread");
        assert_eq!(over[1].impact_tail.unwrap().n, 2);
        assert_eq!(over_repeats(&[impact("ring", None, Some(2.0), 3.0)]), None, "not repeated");
    }
}
