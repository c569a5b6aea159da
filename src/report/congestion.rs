//! The "Congestion impact" table: each canary group's mean and tail alone
//! and beside the congestors, and their ratio (GPCNeT's impact factor).

use crate::report::table::Table;
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
    vec![t]
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
