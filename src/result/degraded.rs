//! When a phase's numbers are not a valid measurement of the fabric: a flow
//! failed or moved nothing, a rank's window came out shorter than asked,
//! or the flows did not start together. Each rule and its threshold is in
//! docs/METRICS.md ("Degraded phases").

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::plan::FlowId;
use crate::result::PhaseResult;

/// A rank's window may come out this much shorter than asked (its share of
/// the asked duration) before the phase is degraded: sampling a boundary a
/// few milliseconds late is noise, a Start that arrived after the window
/// opened is not.
pub const WINDOW_TOLERANCE: f64 = 0.10;
/// The flows' start skew, and how late a flow may begin after the window
/// opened, as a share of the asked duration.
pub const SKEW_FRACTION: f64 = 0.10;

/// The window a phase asked for.
#[derive(Clone, Copy, Debug)]
pub struct AskedWindow {
    pub warmup: Duration,
    pub duration: Duration,
}

/// One reason a phase is degraded.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum Degradation {
    /// `count` flows ended with an error; `flow` is the first, with its error.
    FailedFlows { count: usize, flow: FlowId, error: String },
    /// `count` bandwidth flows moved no byte in the window, without an error.
    IdleFlows { count: usize, flow: FlowId },
    /// The shortest rank window (`rank`'s, `window_s`) fell short of the
    /// asked `asked_s` by more than `WINDOW_TOLERANCE`.
    ShortWindow { rank: usize, window_s: f64, asked_s: f64 },
    /// The flows' sending streams began `skew_s` apart, more than
    /// `limit_s` (`SKEW_FRACTION` of the asked duration).
    StartSkew { skew_s: f64, limit_s: f64 },
    /// `count` flows began sending more than `limit_s` after the window
    /// opened; `flow` the latest, `late_s` after the opening.
    LateStart { count: usize, flow: FlowId, late_s: f64, limit_s: f64 },
}

impl fmt::Display for Degradation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Degradation::FailedFlows { count, flow, error } => {
                write!(f, "{count} flow(s) failed (flow {flow}: {error})")
            }
            Degradation::IdleFlows { count, flow } => {
                write!(f, "{count} flow(s) moved no byte in the window (e.g. flow {flow})")
            }
            Degradation::ShortWindow { rank, window_s, asked_s } => write!(
                f,
                "rank {rank}'s window was {window_s:.3} s of the {asked_s:.3} s asked (more than {:.0} % short)",
                WINDOW_TOLERANCE * 100.0
            ),
            Degradation::StartSkew { skew_s, limit_s } => write!(
                f,
                "the flows started {skew_s:.3} s apart, over {limit_s:.3} s ({:.0} % of the window)",
                SKEW_FRACTION * 100.0
            ),
            Degradation::LateStart { count, flow, late_s, limit_s } => write!(
                f,
                "{count} flow(s) began sending over {limit_s:.3} s after the window opened (flow {flow}: {late_s:.3} s late)"
            ),
        }
    }
}

/// One line for a degraded phase: its index, name and every reason.
pub fn line(phase: &PhaseResult) -> String {
    let reasons: Vec<String> = phase.degraded.iter().map(ToString::to_string).collect();
    format!("phase {} `{}`: {}", phase.index, phase.name, reasons.join("; "))
}

/// One flow as the rules see it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ObservedFlow<'a> {
    pub id: FlowId,
    /// A bandwidth flow (a latency flow may move nothing and be fine).
    pub bandwidth: bool,
    pub bytes: u64,
    pub error: Option<&'a str>,
}

/// What the rules look at, gathered by `aggregate`.
pub struct Observed<'a> {
    pub flows: Vec<ObservedFlow<'a>>,
    /// Each reporting rank's window, seconds.
    pub rank_windows: Vec<(usize, f64)>,
    /// Each sending flow's start, seconds after t0 (the latest of its streams).
    pub starts: Vec<(FlowId, f64)>,
    pub start_skew_s: f64,
}

/// Every reason the observed phase is degraded; empty when it is valid.
pub fn judge(seen: &Observed, asked: AskedWindow) -> Vec<Degradation> {
    let mut reasons = Vec::new();
    let failed: Vec<_> = seen.flows.iter().filter_map(|f| Some((f.id, f.error?))).collect();
    if let Some(&(flow, error)) = failed.first() {
        reasons.push(Degradation::FailedFlows { count: failed.len(), flow, error: error.to_string() });
    }
    let idle: Vec<FlowId> =
        seen.flows.iter().filter(|f| f.bandwidth && f.bytes == 0 && f.error.is_none()).map(|f| f.id).collect();
    if let Some(&flow) = idle.first() {
        reasons.push(Degradation::IdleFlows { count: idle.len(), flow });
    }
    let asked_s = asked.duration.as_secs_f64();
    let shortest = seen.rank_windows.iter().copied().min_by(|a, b| a.1.total_cmp(&b.1));
    if let Some((rank, window_s)) = shortest.filter(|&(_, w)| w < asked_s * (1.0 - WINDOW_TOLERANCE)) {
        reasons.push(Degradation::ShortWindow { rank, window_s, asked_s });
    }
    let limit_s = asked_s * SKEW_FRACTION;
    if seen.start_skew_s > limit_s {
        reasons.push(Degradation::StartSkew { skew_s: seen.start_skew_s, limit_s });
    }
    let opens = asked.warmup.as_secs_f64();
    let late: Vec<(FlowId, f64)> =
        seen.starts.iter().map(|&(id, at)| (id, at - opens)).filter(|&(_, l)| l > limit_s).collect();
    if let Some(&(flow, late_s)) = late.iter().max_by(|a, b| a.1.total_cmp(&b.1)) {
        reasons.push(Degradation::LateStart { count: late.len(), flow, late_s, limit_s });
    }
    reasons
}

#[cfg(test)]
mod tests {
    use super::*;

    const ASKED: AskedWindow = AskedWindow { warmup: Duration::from_millis(500), duration: Duration::from_secs(2) };

    fn healthy() -> Observed<'static> {
        Observed {
            flows: [(0, true, 1000), (1, true, 2000), (2, false, 0)]
                .map(|(id, bandwidth, bytes)| ObservedFlow { id, bandwidth, bytes, error: None })
                .to_vec(),
            rank_windows: vec![(0, 2.0), (1, 2.001)],
            starts: vec![(0, 0.01), (1, 0.02)],
            start_skew_s: 0.01,
        }
    }

    #[test]
    fn a_healthy_phase_has_no_reason() {
        assert_eq!(judge(&healthy(), ASKED), Vec::new());
    }

    #[test]
    fn a_failed_flow_is_named_with_its_error() {
        let mut seen = healthy();
        seen.flows[1].error = Some("Broken pipe");
        seen.flows[0].error = Some("reset");
        let got = judge(&seen, ASKED);
        assert_eq!(got, vec![Degradation::FailedFlows { count: 2, flow: 0, error: "reset".into() }]);
        assert_eq!(got[0].to_string(), "2 flow(s) failed (flow 0: reset)");
    }

    #[test]
    fn a_bandwidth_flow_that_moved_nothing_is_idle_but_a_latency_flow_is_not() {
        let mut seen = healthy();
        seen.flows[1].bytes = 0;
        assert_eq!(judge(&seen, ASKED), vec![Degradation::IdleFlows { count: 1, flow: 1 }]);
    }

    #[test]
    fn the_window_may_be_short_by_the_tolerance_and_no_more() {
        let edge = 2.0 * (1.0 - WINDOW_TOLERANCE);
        let mut seen = healthy();
        seen.rank_windows[1].1 = edge;
        assert_eq!(judge(&seen, ASKED), Vec::new(), "exactly at the tolerance is valid");
        seen.rank_windows[1].1 = edge - 1e-6;
        assert_eq!(
            judge(&seen, ASKED),
            vec![Degradation::ShortWindow { rank: 1, window_s: edge - 1e-6, asked_s: 2.0 }]
        );
        seen.rank_windows[1].1 = 3.0;
        assert_eq!(judge(&seen, ASKED), Vec::new(), "a longer window is not short");
    }

    #[test]
    fn the_start_skew_may_reach_its_fraction_and_no_more() {
        let limit = 2.0 * SKEW_FRACTION;
        let mut seen = healthy();
        seen.start_skew_s = limit;
        assert_eq!(judge(&seen, ASKED), Vec::new());
        seen.start_skew_s = limit + 1e-6;
        assert_eq!(judge(&seen, ASKED), vec![Degradation::StartSkew { skew_s: limit + 1e-6, limit_s: limit }]);
    }

    #[test]
    fn a_flow_may_begin_late_by_the_fraction_and_no_more() {
        let limit = 2.0 * SKEW_FRACTION;
        let opens = ASKED.warmup.as_secs_f64();
        let mut seen = healthy();
        seen.starts = vec![(0, 0.0), (1, opens + limit)];
        assert_eq!(judge(&seen, ASKED), Vec::new(), "late by exactly the limit is valid");
        seen.starts = vec![(0, opens + limit + 0.5), (1, opens + limit + 0.1), (2, 0.0)];
        let got = judge(&seen, ASKED);
        assert_eq!(got.len(), 1, "{got:?}");
        let Degradation::LateStart { count, flow, late_s, limit_s } = got[0] else { panic!("{got:?}") };
        assert_eq!((count, flow), (2, 0), "both late flows counted, the latest named");
        assert!((late_s - (limit + 0.5)).abs() < 1e-9 && (limit_s - limit).abs() < 1e-12);
    }

    #[test]
    fn every_reason_is_given_at_once() {
        let mut seen = healthy();
        seen.flows[0].error = Some("Broken pipe");
        seen.flows[1].bytes = 0;
        seen.rank_windows[0].1 = 0.0;
        seen.start_skew_s = 3.0;
        seen.starts[1].1 = 3.0;
        let kinds: Vec<String> =
            judge(&seen, ASKED).iter().map(|d| serde_json::to_value(d).unwrap()["reason"].to_string()).collect();
        assert_eq!(
            kinds,
            ["\"failed_flows\"", "\"idle_flows\"", "\"short_window\"", "\"start_skew\"", "\"late_start\""]
        );
    }
}
