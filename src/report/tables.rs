//! The summary as plain tables (title, header, rows of text), built once
//! from the result and rendered by the terminal and Markdown writers alike.

use crate::load::placement;
use crate::result::{PhaseResult, RunResult, RunStatus};

pub struct Table {
    pub title: String,
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    fn new(title: String, header: &[&str]) -> Table {
        Table { title, header: header.iter().map(|h| h.to_string()).collect(), rows: Vec::new() }
    }
}

/// One headline per phase, then its flows, receivers and ranks.
pub struct PhaseSummary {
    pub headline: String,
    pub tables: Vec<Table>,
}

pub fn summarize(run: &RunResult) -> Vec<PhaseSummary> {
    run.phases.iter().map(|p| phase_summary(run, p)).collect()
}

/// The sweep table: one row per point, each group's number and its ratio
/// to the baseline point.
pub fn sweep_table(run: &RunResult) -> Option<Table> {
    let sweep = run.sweep.as_ref()?;
    let groups: Vec<(String, String)> =
        sweep.points.first()?.groups.iter().map(|c| (c.group.clone(), c.metric.clone())).collect();
    let mut header = vec![sweep.parameter.clone()];
    for (group, metric) in &groups {
        let unit = if metric == "p99_us" { "p99 µs" } else { "Gb/s" };
        header.push(format!("{group} {unit}"));
        header.push(format!("{group} × baseline"));
    }
    let mut t = Table {
        title: format!("Sweep of {} (baseline {})", sweep.parameter, sweep.baseline),
        header,
        rows: Vec::new(),
    };
    for point in &sweep.points {
        let mut row = vec![if point.baseline { format!("{} (baseline)", point.value) } else { point.value.clone() }];
        for (group, _) in &groups {
            match point.groups.iter().find(|c| &c.group == group) {
                Some(cell) => {
                    row.push(format!("{:.3}", cell.value));
                    row.push(cell.ratio.map_or_else(|| "-".into(), |r| format!("{r:.2}×")));
                }
                None => row.extend(["-".to_string(), "-".to_string()]),
            }
        }
        t.rows.push(row);
    }
    Some(t)
}

/// The closing line: how the run ended.
pub fn status_line(run: &RunResult) -> String {
    match &run.status {
        RunStatus::Ok => format!("run `{}` completed: {} phase(s)", run.scenario.run.name, run.phases.len()),
        RunStatus::Failed { error } => format!("run `{}` FAILED: {error}", run.scenario.run.name),
    }
}

fn phase_summary(run: &RunResult, p: &PhaseResult) -> PhaseSummary {
    let cut = if p.complete { "" } else { " (INCOMPLETE: cut short, numbers cover what ran)" };
    let headline = format!(
        "phase {} `{}`{cut}: aggregate {:.3} Gb/s over a {:.3} s window, start skew {:.0} µs, {} flow(s) on {} rank(s)",
        p.index,
        p.name,
        p.aggregate_gbps,
        p.window_s,
        p.start_skew_us,
        p.flows.len(),
        run.plan.ranks.len()
    );
    PhaseSummary { headline, tables: vec![flows(p), latency(p), receivers(p), groups(p), ranks(p), stress(p)] }
}

fn flows(p: &PhaseResult) -> Table {
    let mut t = Table::new(
        "Flows".into(),
        &["flow", "group", "src → dst", "streams", "msg size (B)", "Gb/s", "msgs/s", "note"],
    );
    for f in &p.flows {
        t.rows.push(vec![
            f.id.to_string(),
            f.group.clone(),
            format!("{} ({}) → {} ({})", f.src, f.src_host, f.dst, f.dst_host),
            f.streams.to_string(),
            f.message_size.to_string(),
            format!("{:.3}", f.gbps),
            format!("{:.0}", f.msgs_per_s),
            f.error.clone().unwrap_or_default(),
        ]);
    }
    t
}

fn latency(p: &PhaseResult) -> Table {
    let mut t = Table::new(
        "Latency (half round trip, µs, as perftest reports ping-pong)".into(),
        &["flow", "src → dst", "msg size (B)", "samples", "min", "typical", "mean", "stdev", "p99", "p99.9", "max"],
    );
    for f in &p.flows {
        let Some(l) = &f.latency else { continue };
        let us = |v: f64| format!("{v:.2}");
        t.rows.push(vec![
            f.id.to_string(),
            format!("{} ({}) → {} ({})", f.src, f.src_host, f.dst, f.dst_host),
            f.message_size.to_string(),
            l.samples.to_string(),
            us(l.min_us),
            us(l.typical_us),
            us(l.mean_us),
            us(l.stdev_us),
            us(l.p99_us),
            us(l.p999_us),
            us(l.max_us),
        ]);
    }
    t
}

fn receivers(p: &PhaseResult) -> Table {
    let mut t = Table::new(
        "Receivers".into(),
        &["rank", "host", "senders", "aggregate Gb/s", "min share %", "max share %", "Jain index", "CoV"],
    );
    for r in &p.receivers {
        t.rows.push(vec![
            r.rank.to_string(),
            r.host.clone(),
            r.senders.to_string(),
            format!("{:.3}", r.aggregate_gbps),
            format!("{:.1}", r.min_share * 100.0),
            format!("{:.1}", r.max_share * 100.0),
            format!("{:.4}", r.jain),
            format!("{:.4}", r.cov),
        ]);
    }
    t
}

fn groups(p: &PhaseResult) -> Table {
    let mut t = Table::new(
        "Groups".into(),
        &["group", "pattern", "transport", "flows", "aggregate Gb/s", "min flow Gb/s", "max flow Gb/s", "Jain index"],
    );
    for g in &p.groups {
        t.rows.push(vec![
            g.name.clone(),
            g.pattern.name().to_string(),
            format!("{:?}", g.transport).to_lowercase(),
            g.flows.to_string(),
            format!("{:.3}", g.aggregate_gbps),
            format!("{:.3}", g.min_flow_gbps),
            format!("{:.3}", g.max_flow_gbps),
            format!("{:.4}", g.jain),
        ]);
    }
    t
}

fn ranks(p: &PhaseResult) -> Table {
    let mut t = Table::new(
        "Ranks".into(),
        &[
            "rank",
            "host",
            "tx Gb/s",
            "rx Gb/s",
            "worker CPU % (user+sys, of 1 core)",
            "host CPU % (of all cores)",
            "iface rx/tx MB (kernel)",
            "clock offset µs",
            "note",
        ],
    );
    for r in &p.ranks {
        let ifaces: Vec<String> = r
            .netdevs
            .iter()
            .map(|n| format!("{} {:.1}/{:.1}", n.iface, n.rx_bytes as f64 / 1e6, n.tx_bytes as f64 / 1e6))
            .collect();
        t.rows.push(vec![
            r.rank.to_string(),
            r.host.clone(),
            format!("{:.3}", r.tx_gbps),
            format!("{:.3}", r.rx_gbps),
            format!("{:.1}", r.cpu.worker_pct),
            format!("{:.1} of {}", r.cpu.host_pct, r.cpu.host_cores),
            ifaces.join(", "),
            format!("{:.0} ± {:.0}", r.clock_offset_us, r.rtt_us / 2.0),
            r.error.clone().unwrap_or_default(),
        ]);
    }
    t
}

fn stress(p: &PhaseResult) -> Table {
    let mut t = Table::new(
        "CPU stress".into(),
        &["rank", "host", "threads", "cores", "asked load %", "measured load % (of those cores)", "host CPU %", "note"],
    );
    for r in &p.ranks {
        let Some(s) = &r.stress else { continue };
        let cores = if s.cores.is_empty() { "any (all cores measured)".to_string() } else { placement::list(&s.cores) };
        t.rows.push(vec![
            r.rank.to_string(),
            r.host.clone(),
            s.threads.to_string(),
            cores,
            format!("{:.0}", s.asked_load_pct),
            format!("{:.1}", s.measured_load_pct),
            format!("{:.1}", r.cpu.host_pct),
            s.note.clone().unwrap_or_default(),
        ]);
    }
    t
}
