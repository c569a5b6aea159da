//! A sweep's tables: one row per point with each group's number, message
//! rate (RDMA points), busiest worker CPU and ratio to the baseline; for a
//! two-parameter sweep also one matrix per group (rows × columns). Every
//! column and matrix cell names its unit, and a ratio is always of the
//! number printed beside it. A repeated sweep shows each point's mean ±
//! its 95 % interval. A point measured once in a degraded phase (not a
//! valid measurement) says so beside its number; a repeated point's mean
//! counts only its valid repeats.

use crate::report::tables::repeats::mean_ci;
use crate::report::tables::table::Table;
use crate::result::sweep::{SweepCell, SweepResult, SweepRow};
use crate::result::{Metric, RunResult};
use crate::units::number;

/// The sweep's table and, with a second parameter, its matrices (none
/// without a sweep).
pub fn tables(run: &RunResult) -> Vec<Table> {
    let degraded: Vec<usize> = run.phases.iter().filter(|p| !p.degraded.is_empty()).map(|p| p.index).collect();
    run.sweep.as_ref().map(|sweep| of(sweep, &degraded)).unwrap_or_default()
}

/// Whether the point is one measurement in a phase of `degraded`.
fn invalid(point: &SweepRow, degraded: &[usize]) -> bool {
    point.groups.iter().all(|c| c.spread.is_none()) && degraded.contains(&point.phase)
}

/// What follows a degraded point's number.
const DEGRADED: &str = " (degraded)";

fn of(sweep: &SweepResult, degraded: &[usize]) -> Vec<Table> {
    let Some(first) = sweep.points.first() else { return Vec::new() };
    let groups: Vec<(&str, Metric, bool)> = first
        .groups
        .iter()
        .map(|c| (c.group.as_str(), c.metric, cells(sweep, &c.group).any(|(_, c)| has_mpps(c))))
        .collect();
    let mut header = vec![sweep.parameter.clone()];
    header.extend(sweep.by_parameter.clone());
    let repeated = sweep.points.iter().flat_map(|p| &p.groups).any(|c| c.spread.is_some());
    for &(group, metric, mpps) in &groups {
        header.push(match repeated {
            true => format!("{group} {} (mean ± 95 % CI)", metric_unit(metric)),
            false => format!("{group} {}", metric_unit(metric)),
        });
        if mpps {
            header.push(format!("{group} Mpps"));
        }
        header.push(format!("{group} max worker CPU %"));
        header.push(format!("{group} × baseline ({})", metric_unit(metric)));
    }
    let mut t = Table::with(format!("Sweep of {} (baseline {})", sweep_axes(sweep), sweep.baseline), header);
    let dash = || "-".to_string();
    for point in &sweep.points {
        let mut row = vec![if point.baseline { format!("{} (baseline)", point.value) } else { point.value.clone() }];
        row.extend(point.by_value.clone());
        for &(group, _, mpps) in &groups {
            let cell = point.groups.iter().find(|c| c.group == group);
            let shown = cell.map_or_else(dash, |c| c.spread.as_ref().map_or_else(|| number(c.value, 3), mean_ci));
            row.push(if cell.is_some() && invalid(point, degraded) { shown + DEGRADED } else { shown });
            if mpps {
                // A TCP point has no message rate: a dash, never a 0.
                row.push(cell.filter(|c| has_mpps(c)).and_then(|c| c.mpps).map_or_else(dash, |v| number(v, 3)));
            }
            row.push(cell.and_then(|c| c.max_worker_cpu_pct).map_or_else(dash, |v| number(v, 0)));
            row.push(cell.and_then(|c| c.ratio).map_or_else(dash, |r| format!("{r:.2}×")));
        }
        t.rows.push(row);
    }
    let mut tables = vec![t];
    if let Some(by) = &sweep.by_parameter {
        tables.extend(groups.iter().map(|&(group, metric, _)| matrix(sweep, by, group, metric, degraded)));
    }
    tables
}

/// Whether a cell's message rate means something: an RDMA bandwidth point.
fn has_mpps(c: &SweepCell) -> bool {
    c.rdma && c.mpps.is_some() && !c.metric.is_latency()
}

/// Every measured cell of `group`, with its point.
fn cells<'a>(sweep: &'a SweepResult, group: &'a str) -> impl Iterator<Item = (&'a SweepRow, &'a SweepCell)> + 'a {
    sweep.points.iter().filter_map(move |p| Some((p, p.groups.iter().find(|c| c.group == group)?)))
}

/// A sweep's number with its unit: Gb/s, or the latency's percentile and µs.
fn metric_unit(metric: Metric) -> &'static str {
    match metric {
        Metric::LatencyP99 => "p99 µs",
        other => other.unit(),
    }
}

fn sweep_axes(sweep: &SweepResult) -> String {
    match &sweep.by_parameter {
        Some(by) => format!("{} × {by}", sweep.parameter),
        None => sweep.parameter.clone(),
    }
}

/// One group's two-parameter sweep as a matrix: a row per value of the
/// first parameter, a column per value of the second. Message rate when
/// every cell has one (all RDMA bandwidth points), else the group's number
/// (Gb/s, or p99 µs): a matrix that mixes TCP and RDMA compares Gb/s. The
/// ratio beside each cell is of the number shown, against its column's
/// baseline.
fn matrix(sweep: &SweepResult, by: &str, group: &str, metric: Metric, degraded: &[usize]) -> Table {
    let mpps = cells(sweep, group).all(|(_, c)| has_mpps(c));
    let unit = if mpps { "Mpps" } else { metric_unit(metric) };
    let shown = |c: &SweepCell| if mpps { c.mpps.unwrap_or_default() } else { c.value };
    let mut rows: Vec<&str> = Vec::new();
    let mut columns: Vec<&str> = Vec::new();
    for p in &sweep.points {
        if !rows.contains(&p.value.as_str()) {
            rows.push(&p.value);
        }
        if let Some(c) = p.by_value.as_deref().filter(|c| !columns.contains(c)) {
            columns.push(c);
        }
    }
    let mut header = vec![format!("{} \\ {by}", sweep.parameter)];
    header.extend(columns.iter().map(|c| c.to_string()));
    let mut t = Table::with(
        format!("{group}: {unit} by {} × {by} (× the baseline row of each column)", sweep.parameter),
        header,
    );
    for row in rows {
        let mut line = vec![row.to_string()];
        for column in &columns {
            let found = cells(sweep, group).find(|(p, _)| p.value == row && p.by_value.as_deref() == Some(column));
            line.push(found.map_or_else(
                || "-".to_string(),
                |(point, c)| {
                    let base = sweep.baseline_of(point, group).map(shown).filter(|&b| b > 0.0);
                    let value = shown(c);
                    let mark = if invalid(point, degraded) { DEGRADED } else { "" };
                    match base {
                        Some(b) => format!("{} {unit} ({:.2}×){mark}", number(value, 3), value / b),
                        None => format!("{} {unit}{mark}", number(value, 3)),
                    }
                },
            ));
        }
        t.rows.push(line);
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `stress.threads` × `transport` as tcp-vs-rdma-stress runs it: TCP
    /// has no message rate (its cells' `mpps` is what TCP flows count).
    fn stress_by_transport(rdma_mpps: [f64; 2]) -> SweepResult {
        let cell = |value: f64, ratio: f64, rdma: bool, mpps: f64| SweepCell {
            group: "incast".into(),
            metric: Metric::AggregateGbps,
            value,
            ratio: Some(ratio),
            mpps: Some(mpps),
            rdma,
            max_worker_cpu_pct: Some(99.5),
            spread: None,
        };
        let point = |value: &str, by: &str, baseline, c| SweepRow {
            value: value.into(),
            by_value: Some(by.into()),
            phase: 0,
            baseline,
            groups: vec![c],
        };
        SweepResult {
            parameter: "stress.threads".into(),
            baseline: "0".into(),
            by_parameter: Some("transport".into()),
            points: vec![
                point("0", "tcp", true, cell(20.0, 1.0, false, 0.0)),
                point("0", "rdma", true, cell(8.0, 1.0, true, rdma_mpps[0])),
                point("all", "tcp", false, cell(10.0, 0.5, false, 0.0)),
                point("all", "rdma", false, cell(7.6, 0.95, true, rdma_mpps[1])),
            ],
        }
    }

    #[test]
    fn a_matrix_mixing_transports_shows_gbps_with_ratios_of_those_numbers() {
        let tables = of(&stress_by_transport([0.0153, 0.0145]), &[]);
        let m = &tables[1];
        assert_eq!(m.title, "incast: Gb/s by stress.threads × transport (× the baseline row of each column)");
        assert_eq!(m.header, ["stress.threads \\ transport", "tcp", "rdma"]);
        assert_eq!(m.rows[0], ["0", "20.000 Gb/s (1.00×)", "8.000 Gb/s (1.00×)"]);
        // 10 / 20 and 7.6 / 8: each ratio is of the two numbers shown.
        assert_eq!(m.rows[1], ["all", "10.000 Gb/s (0.50×)", "7.600 Gb/s (0.95×)"]);
        // The point table: a message rate only where the point has one.
        let t = &tables[0];
        let mpps = t.header.iter().position(|h| h == "incast Mpps").expect("an Mpps column for the RDMA points");
        let column: Vec<&str> = t.rows.iter().map(|r| r[mpps].as_str()).collect();
        assert_eq!(column, ["-", "0.0153", "-", "0.0145"]);
    }

    #[test]
    fn an_all_rdma_matrix_shows_mpps_with_ratios_of_mpps() {
        let mut sweep = stress_by_transport([2.0, 1.5]);
        sweep.points.retain(|p| p.by_value.as_deref() == Some("rdma"));
        let m = &of(&sweep, &[])[1];
        assert!(m.title.starts_with("incast: Mpps by"), "{}", m.title);
        // 1.5 / 2.0, not the Gb/s ratio (0.95) recorded in the cell.
        assert_eq!(m.rows[1], ["all", "1.500 Mpps (0.75×)"]);
    }

    #[test]
    fn a_point_of_a_degraded_phase_says_so_beside_its_number() {
        let mut sweep = stress_by_transport([2.0, 1.5]);
        for (k, p) in sweep.points.iter_mut().enumerate() {
            p.phase = k;
        }
        let tables = of(&sweep, &[2]);
        let column: Vec<&str> = tables[0].rows.iter().map(|r| r[2].as_str()).collect();
        assert_eq!(column, ["20.000", "8.000", "10.000 (degraded)", "7.600"]);
        assert_eq!(tables[1].rows[1], ["all", "10.000 Gb/s (0.50×) (degraded)", "7.600 Gb/s (0.95×)"]);
    }
}
