//! The load→latency curve: for a run whose phases pace a background at
//! different rates (a sweep over `rate`) beside a latency probe, each
//! latency group's percentiles against the offered load of the phase.

use std::collections::BTreeMap;

use crate::histogram::LatencySummary;
use crate::metrics::confidence::Spread;
use crate::report::html::charts::{self, Series};
use crate::report::ReportError;
use crate::result::RunResult;
use crate::scenario::Mode;

/// Reads one percentile of a flow's latency summary, µs.
type Percentile = fn(&LatencySummary) -> f64;

/// The percentiles drawn, by name.
const PERCENTILES: [(&str, Percentile); 3] =
    [("p50", |l| l.typical_us), ("p99", |l| l.p99_us), ("p99.9", |l| l.p999_us)];

/// The chart, when at least two phases have both a paced bandwidth group
/// and a measured latency flow; x is the phase's offered bandwidth (the sum
/// of its paced bandwidth groups' `offered.gbps`), y each latency group's
/// worst flow at each percentile, µs. Phases at the same load (the repeats
/// of a point) give one point, their mean, with its 95 % confidence
/// interval as an error bar.
pub fn chart(run: &RunResult) -> Result<Option<String>, ReportError> {
    // Line → offered load (its f64 bits: the same rate is the same number) → values.
    let mut lines: BTreeMap<String, BTreeMap<u64, Vec<f64>>> = BTreeMap::new();
    let mut phases = 0;
    for p in &run.phases {
        let paced = p.groups.iter().filter(|g| g.mode == Mode::Bandwidth).filter_map(|g| g.offered);
        let load: f64 = paced.clone().map(|o| o.gbps).sum();
        if paced.count() == 0 {
            continue;
        }
        let mut any = false;
        for g in p.groups.iter().filter(|g| g.mode == Mode::Latency) {
            let flows: Vec<_> = p.flows.iter().filter(|f| f.group == g.name).filter_map(|f| f.latency).collect();
            if flows.is_empty() {
                continue;
            }
            any = true;
            for (name, of) in PERCENTILES {
                let worst = flows.iter().map(of).fold(0.0, f64::max);
                let line = lines.entry(format!("{} {name}", g.name)).or_default();
                line.entry(load.to_bits()).or_default().push(worst);
            }
        }
        phases += usize::from(any);
    }
    if phases < 2 {
        return Ok(None);
    }
    let series: Vec<Series> = lines
        .into_iter()
        .map(|(name, by_load)| {
            let mut at: Vec<(f64, Vec<f64>)> = by_load.into_iter().map(|(x, ys)| (f64::from_bits(x), ys)).collect();
            at.sort_by(|a, b| a.0.total_cmp(&b.0));
            let spreads: Vec<Option<Spread>> = at.iter().map(|(_, ys)| Spread::of(ys)).collect();
            let points = at.iter().zip(&spreads).map(|((x, ys), s)| (*x, s.map_or(ys[0], |s| s.mean))).collect();
            let errors = spreads.iter().map(|s| s.map(|s| (s.ci95_low, s.ci95_high))).collect();
            Series { name, points, errors }
        })
        .collect();
    let title = "Latency (half round trip) vs offered load";
    charts::lines(title, "offered background load (Gb/s)", "µs", &series, false).map(Some)
}
