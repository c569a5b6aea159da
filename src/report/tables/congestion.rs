//! The "Congestion impact" table: each canary group's mean and tail alone
//! and beside the congestors, and their ratio (GPCNeT's impact factor).

use crate::metrics::confidence::Spread;
use crate::report::tables::repeats::mean_ci;
use crate::report::tables::table::Table;
use crate::result::congestion::{CanaryImpact, CanaryNumbers};
use crate::result::RunResult;
use crate::scenario::Mode;
use crate::units::number;

/// The table of a congestion run (none without `[congestion]`).
pub fn tables(run: &RunResult) -> Vec<Table> {
    let Some(canaries) = &run.congestion else { return Vec::new() };
    let mut t = Table::new(
        "Congestion impact (GPCNeT's method: congested vs isolated; impact 1.00× = unharmed, above 1 = hurt)".into(),
        &[
            "canary",
            "measured (unit; tail)",
            "isolated mean",
            "congested mean",
            "impact mean (×)",
            "isolated tail",
            "congested tail",
            "impact tail (×)",
        ],
    );
    t.rows = canaries.iter().map(row).collect();
    let mut out = vec![t];
    if let Some(groups) = &run.congestion_repeats {
        let mut t = Table::new(
            "Congestion impact over the repeats (×; mean ± 95 % interval from Student's t)".into(),
            &["canary", "repeats", "impact mean (×)", "min – max", "impact tail (×)", "min – max"],
        );
        let cells = |s: &Option<Spread>| match s {
            Some(s) => [mean_ci(s), format!("{} – {}", number(s.min, 3), number(s.max, 3))],
            None => ["-".into(), "-".into()],
        };
        for g in groups {
            let n = g.impact_mean.or(g.impact_tail).map_or(0, |s| s.n);
            let [mean, mean_range] = cells(&g.impact_mean);
            let [tail, tail_range] = cells(&g.impact_tail);
            t.rows.push(vec![g.group.clone(), n.to_string(), mean, mean_range, tail, tail_range]);
        }
        out.push(t);
    }
    out
}

/// The canary group, and which repeat when the run repeats.
pub fn label(c: &CanaryImpact) -> String {
    match c.repeat {
        Some(k) => format!("{} (repeat {k})", c.group),
        None => c.group.clone(),
    }
}

fn row(c: &CanaryImpact) -> Vec<String> {
    let measured = match c.mode {
        Mode::Latency => "latency, half round trip (µs; p99)",
        Mode::Bandwidth => "bandwidth per flow (Gb/s; 1st percentile)",
    };
    let value = |n: Option<CanaryNumbers>, pick: fn(CanaryNumbers) -> f64| n.map_or("-".into(), |n| number(pick(n), 2));
    let ratio = |r: Option<f64>| r.map_or("-".into(), |r| format!("{r:.2}×"));
    vec![
        label(c),
        measured.to_string(),
        value(c.isolated, |n| n.mean),
        value(c.congested, |n| n.mean),
        ratio(c.impact_mean),
        value(c.isolated, |n| n.tail),
        value(c.congested, |n| n.tail),
        ratio(c.impact_tail),
    ]
}
