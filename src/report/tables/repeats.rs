//! A repeated run's tables: per phase, every aggregate's mean ± its 95 %
//! confidence interval over the counted repeats, with stdev, min and max
//! (run.json `repeats`), each in the unit its metric names.

use crate::metrics::confidence::Spread;
use crate::report::tables::table::Table;
use crate::result::repeats::RepeatedNumber;
use crate::result::RunResult;
use crate::units::number;

/// One table per repeated phase (none without repeats).
pub fn tables(run: &RunResult) -> Vec<Table> {
    let Some(phases) = &run.repeats else { return Vec::new() };
    phases
        .iter()
        .map(|p| {
            let mut t = Table::new(
                format!(
                    "Repeats of `{}`: {} of {} counted (complete, not degraded); 95 % interval from Student's t",
                    p.phase, p.counted, p.count
                ),
                &["item", "metric (unit)", "repeats", "mean ± 95 % CI", "stdev", "min", "max"],
            );
            for n in &p.numbers {
                t.rows.push(row(n));
            }
            t
        })
        .collect()
}

fn row(n: &RepeatedNumber) -> Vec<String> {
    let metric = format!("{} ({})", n.metric.label(), n.unit);
    let count = n.values.len().to_string();
    match &n.spread {
        Some(s) => {
            vec![n.item.clone(), metric, count, mean_ci(s), number(s.stdev, 3), number(s.min, 3), number(s.max, 3)]
        }
        // One counted repeat: its value, no spread.
        None => {
            let one = n.values.first().map_or_else(|| "-".to_string(), |v| number(v.value, 3));
            vec![n.item.clone(), metric, count, one.clone(), "-".into(), one.clone(), one]
        }
    }
}

/// `12.345 ± 0.210`.
pub fn mean_ci(s: &Spread) -> String {
    format!("{} ± {}", number(s.mean, 3), number(s.ci95_half, 3))
}
