//! Flaps: every interval where a bandwidth flow fell below a share of its
//! own median (`[soak] flap`, 50 % unless set), run together into dips,
//! and every link event a rank's counters showed, on one time axis —
//! seconds after its phase's window opened. Derived from the phases, so a
//! results folder read back (or still running) gets them again.

use serde::{Deserialize, Serialize};

use crate::metrics::stats;
use crate::plan::FlowId;
use crate::result::{PhaseResult, RunResult};
use crate::scenario::Mode;

/// Dips one flow keeps in run.json (the first ones); `dips` and `dip_s`
/// count them all.
pub const MAX_DIPS_KEPT: usize = 100;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PhaseFlaps {
    pub phase: usize,
    /// An interval below this share of its flow's median Gb/s is a dip, %.
    pub threshold_pct: f64,
    /// Length of one interval, seconds.
    pub interval_s: f64,
    /// Every bandwidth flow with intervals, in flow order.
    pub flows: Vec<FlowFlaps>,
    /// Every link event of every rank, by start.
    pub links: Vec<LinkFlap>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FlowFlaps {
    pub flow: FlowId,
    pub group: String,
    pub src_host: String,
    pub dst_host: String,
    /// Median of the flow's interval Gb/s.
    pub median_gbps: f64,
    /// Its lowest interval, Gb/s, and when that interval began, s.
    pub min_gbps: f64,
    pub min_at_s: f64,
    /// Runs of consecutive intervals below the threshold.
    pub dips: usize,
    /// Their total length, s.
    pub dip_s: f64,
    /// The first `MAX_DIPS_KEPT` of them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub spans: Vec<Dip>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Dip {
    /// When its first interval began, s after the window opened.
    pub start_s: f64,
    pub duration_s: f64,
    /// Its lowest interval, Gb/s.
    pub min_gbps: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LinkFlap {
    pub rank: usize,
    pub host: String,
    /// `eth0`, or `mlx5_0/1` for an RDMA port.
    pub device: String,
    /// The last boundary that read it healthy, s after the window opened
    /// (negative: before it opened).
    pub start_s: f64,
    /// Until the first boundary that read it healthy again, s; `null`:
    /// still not healthy when the window closed.
    pub duration_s: Option<f64>,
    /// States other than up it was read in (`down`, `DOWN`, `INIT`…).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub states: Vec<String>,
    /// How far its event counters moved (`carrier_changes`,
    /// `counters/link_downed`, `counters/link_error_recovery`).
    pub counters: std::collections::BTreeMap<String, u64>,
}

/// The dips of one series of intervals `interval_s` long: runs of
/// intervals below `threshold_pct` % of the series' median. A series whose
/// median is 0 has none (there is nothing to fall from).
pub fn dips(intervals: &[f64], interval_s: f64, threshold_pct: f64) -> Vec<Dip> {
    let median = stats::median(intervals).unwrap_or(0.0);
    let limit = median * threshold_pct / 100.0;
    let mut out: Vec<Dip> = Vec::new();
    let mut open: Option<(usize, f64)> = None;
    for (k, &g) in intervals.iter().chain(std::iter::once(&f64::INFINITY)).enumerate() {
        match (g < limit, open) {
            (true, None) => open = Some((k, g)),
            (true, Some((start, low))) => open = Some((start, low.min(g))),
            (false, Some((start, low))) => {
                out.push(Dip {
                    start_s: start as f64 * interval_s,
                    duration_s: (k - start) as f64 * interval_s,
                    min_gbps: low,
                });
                open = None;
            }
            (false, None) => {}
        }
    }
    out
}

/// The flaps of every phase of `run` with intervals or link events; none
/// at all where no flow dipped, no link moved and `[soak]` is not set
/// (a run that did not ask shows flaps only when there are some).
pub fn of_run(run: &RunResult) -> Vec<PhaseFlaps> {
    let phases: Vec<PhaseFlaps> =
        run.phases.iter().map(|p| of_phase(run, p)).filter(|f| !f.flows.is_empty() || !f.links.is_empty()).collect();
    let seen = phases.iter().any(|p| !p.links.is_empty() || p.flows.iter().any(|f| f.dips > 0));
    if seen || !run.scenario.soak.is_default() {
        phases
    } else {
        Vec::new()
    }
}

/// The flaps of one phase of `run` (its `[soak]` threshold and window),
/// whether or not any flow dipped.
pub fn of_phase(run: &RunResult, phase: &PhaseResult) -> PhaseFlaps {
    let threshold_pct = run.scenario.soak.flap_pct();
    let interval_s = run.scenario.run.interval.as_secs_f64();
    let opened_ns = run.scenario.run.warmup.as_nanos() as f64;
    let flows = phase
        .flows
        .iter()
        .filter(|f| f.mode == Mode::Bandwidth && !f.interval_gbps.is_empty())
        .map(|f| {
            let all = dips(&f.interval_gbps, interval_s, threshold_pct);
            let (min_k, min_gbps) =
                f.interval_gbps.iter().copied().enumerate().min_by(|a, b| a.1.total_cmp(&b.1)).unwrap_or((0, 0.0));
            FlowFlaps {
                flow: f.id,
                group: f.group.clone(),
                src_host: f.src_host.clone(),
                dst_host: f.dst_host.clone(),
                median_gbps: stats::median(&f.interval_gbps).unwrap_or(0.0),
                min_gbps,
                min_at_s: min_k as f64 * interval_s,
                dips: all.len(),
                dip_s: stats::total(all.iter().map(|d| d.duration_s)),
                spans: all.into_iter().take(MAX_DIPS_KEPT).collect(),
            }
        })
        .collect();
    let seconds = |ns: i64| (ns as f64 - opened_ns) / 1e9;
    let mut links: Vec<LinkFlap> = phase
        .ranks
        .iter()
        .flat_map(|r| {
            r.link_events.iter().map(|e| LinkFlap {
                rank: r.rank,
                host: r.host.clone(),
                device: e.device.clone(),
                start_s: seconds(e.from_ns),
                duration_s: e.until_ns.map(|u| (u - e.from_ns) as f64 / 1e9),
                states: e.states.clone(),
                counters: e.counters.clone(),
            })
        })
        .collect();
    links.sort_by(|a, b| a.start_s.total_cmp(&b.start_s));
    PhaseFlaps { phase: phase.index, threshold_pct, interval_s, flows, links }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spans(intervals: &[f64]) -> Vec<(f64, f64, f64)> {
        dips(intervals, 0.5, 50.0).into_iter().map(|d| (d.start_s, d.duration_s, d.min_gbps)).collect()
    }

    #[test]
    fn a_flat_flow_has_no_dips() {
        assert_eq!(spans(&[10.0; 20]), []);
        assert_eq!(spans(&[]), []);
    }

    #[test]
    fn dips_at_the_start_and_at_the_end_are_closed_by_the_window() {
        let mut series = vec![10.0; 10];
        series[0] = 1.0;
        series[1] = 2.0;
        series[9] = 0.0;
        assert_eq!(spans(&series), [(0.0, 1.0, 1.0), (4.5, 0.5, 0.0)]);
    }

    #[test]
    fn several_dips_each_with_its_span_and_lowest_interval() {
        let series = [10.0, 4.0, 10.0, 10.0, 3.0, 2.0, 4.9, 10.0, 5.0, 10.0, 10.0, 10.0, 10.0];
        // 5.0 is exactly half the median: at the threshold is not below it.
        assert_eq!(spans(&series), [(0.5, 0.5, 4.0), (2.0, 1.5, 2.0)]);
    }

    #[test]
    fn a_zero_median_has_nothing_to_fall_from() {
        assert_eq!(spans(&[0.0, 0.0, 0.0, 5.0]), []);
        assert_eq!(spans(&[0.0; 4]), []);
    }

    #[test]
    fn the_threshold_is_a_share_of_the_median() {
        let series = [10.0, 10.0, 6.0, 10.0];
        assert_eq!(dips(&series, 1.0, 50.0), []);
        assert_eq!(dips(&series, 1.0, 70.0), [Dip { start_s: 2.0, duration_s: 1.0, min_gbps: 6.0 }]);
    }
}
