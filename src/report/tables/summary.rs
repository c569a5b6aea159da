//! The summary's tables, built once from the result and rendered by the
//! terminal, Markdown and HTML writers alike.

use crate::load::placement;
use crate::report::tables::table::{failed_then_lower, shown, slower_flow, Reached, Shown, Table, ROWS_SHOWN};
use crate::report::tables::{
    clock, datagrams, flaps, gpu_memory, labels, lanes, offered, rdma_counters, refused, validation,
};
use crate::result::{
    limit::Limit, Acceptance, FlowResult, PairMatrix, PhaseResult, RankResult, Retest, RunResult, RunStatus, Suspect,
    Verdict,
};
use crate::scenario::Mode;
use crate::units::number;

/// One headline per phase, warnings (why it is degraded, strangers
/// refused, UD losses), then its flows, receivers and ranks.
pub struct PhaseSummary {
    pub headline: String,
    pub warnings: Vec<String>,
    pub tables: Vec<Table>,
}

pub fn summarize(run: &RunResult) -> Vec<PhaseSummary> {
    run.phases.iter().map(|p| phase_summary(run, p)).collect()
}

/// Every rank's RDMA ports as its own probe saw them (run.json `probes`);
/// `None` when no rank found a device (a TCP-only cluster).
pub fn ports(run: &RunResult) -> Option<Table> {
    if run.probes.iter().all(|p| p.devices.is_empty()) {
        return None;
    }
    let mut t = Table::new(
        "RDMA ports (each host's own probe)".into(),
        &["rank", "host", "device", "port", "state", "link layer", "rate (Gb/s)", "MTU (B)", "NUMA node"],
    );
    let dash = || "-".to_string();
    for probe in &run.probes {
        let mut row = |cells: [String; 7]| {
            t.rows.push([probe.rank.to_string(), probe.host.clone()].into_iter().chain(cells).collect());
        };
        if probe.devices.is_empty() {
            let why = probe.error.clone().unwrap_or_else(|| "no RDMA devices".into());
            row([dash(), dash(), why, dash(), dash(), dash(), dash()]);
        }
        for d in &probe.devices {
            let numa = d.numa_node.map_or_else(dash, |n| n.to_string());
            if let Some(error) = &d.error {
                row([d.name.clone(), dash(), error.clone(), dash(), dash(), dash(), numa.clone()]);
            }
            for p in &d.ports {
                let rate = p.rate_gbps.map_or_else(|| "?".into(), |r| r.to_string());
                row([
                    d.name.clone(),
                    p.port.to_string(),
                    p.state.clone(),
                    p.link_layer.clone(),
                    rate,
                    p.mtu.to_string(),
                    numa.clone(),
                ]);
            }
        }
    }
    Some(t)
}

/// The closing line: how the run ended.
pub fn status_line(run: &RunResult) -> String {
    match &run.status {
        RunStatus::Ok => format!("run `{}` completed: {} phase(s)", run.scenario.run.name, run.phases.len()),
        RunStatus::Failed { error } => format!("run `{}` FAILED: {error}", run.scenario.run.name),
        RunStatus::Running { note } => format!("run `{}` STILL GOING: {note}", run.scenario.run.name),
        RunStatus::Degraded { reasons } => format!(
            "run `{}` DEGRADED: completed {} phase(s), {} not a valid measurement (docs/METRICS.md, \"Degraded phases\")\n  {}",
            run.scenario.run.name,
            run.phases.len(),
            reasons.len(),
            reasons.join("\n  ")
        ),
    }
}

pub fn phase_summary(run: &RunResult, p: &PhaseResult) -> PhaseSummary {
    let cut = match (p.complete, p.degraded.is_empty()) {
        (false, _) => " (INCOMPLETE: cut short, numbers cover what ran)",
        (true, false) => " (DEGRADED: not a valid measurement)",
        (true, true) => "",
    };
    // A phase of latency flows alone moves no bandwidth worth a headline.
    let aggregate = if p.flows.iter().any(|f| f.mode == Mode::Bandwidth) {
        let held = p.limit.as_ref().map_or_else(String::new, |l| format!(", flows limited by {l}"));
        format!("aggregate {} Gb/s{held}", number(p.aggregate_gbps, 3))
    } else {
        "latency only".to_string()
    };
    let headline = format!(
        "phase {} `{}`{cut}: {aggregate} over a {:.3} s window, start skew {:.0} µs, {} flow(s) on {} rank(s)",
        p.index,
        p.name,
        p.window_s,
        p.start_skew_us,
        p.flows.len(),
        run.plan.ranks.len()
    );
    let mut tables = vec![
        flows(p),
        lanes::table(p),
        latency(p),
        receivers(p),
        groups(p),
        offered::table(p),
        ranks(p),
        rdma_counters::table(p),
        stress(p),
    ];
    tables.extend(flaps::tables(run, p));
    let degraded = p.degraded.iter().map(|d| format!("DEGRADED: {d}"));
    PhaseSummary {
        headline,
        warnings: degraded
            .chain(refused::warning(p))
            .chain(datagrams::line(p))
            .chain(gpu_memory::line(p))
            .chain(validation::line(p))
            .chain(clock::line(run, p))
            .collect(),
        tables,
    }
}

fn flows(p: &PhaseResult) -> Table {
    let Shown { title, items: shown } =
        shown("Flows", p.flows.iter(), ROWS_SHOWN, slower_flow, "slowest or failed (every flow is in flows.csv)");
    let mut t = Table::new(
        title,
        &["flow", "group", "src → dst", "streams", "msg size (B)", "Gb/s", "msgs/s", "limited by", "note"],
    );
    for f in shown {
        let row = vec![
            f.id.to_string(),
            f.group.clone(),
            format!("{} ({}) → {} ({})", f.src, f.src_host, f.dst, f.dst_host),
            f.streams.to_string(),
            f.message_size.to_string(),
            number(f.gbps, 3),
            number(f.msgs_per_s, 0),
            f.limit.as_ref().map_or_else(|| "-".into(), |l| l.kind.to_string()),
            f.error.clone().unwrap_or_default(),
        ];
        // report.html: the rule that fired and its evidence, on hovering the verdict.
        let unavailable = |l: &Limit| match &l.unavailable[..] {
            [] => String::new(),
            lacking => format!("; unavailable: {}", lacking.join(", ")),
        };
        t.push_hinted(row, 7, f.limit.as_ref().map(|l| format!("{l}; {}{}", l.rule, unavailable(l))));
    }
    t
}

fn latency(p: &PhaseResult) -> Table {
    let p99 = |f: &FlowResult| f.latency.as_ref().map_or(0.0, |l| l.p99_us);
    let Shown { title, items: shown } = shown(
        "Latency (half round trip, µs, as perftest reports ping-pong)",
        p.flows.iter().filter(|f| f.latency.is_some()),
        ROWS_SHOWN,
        |a, b| p99(b).total_cmp(&p99(a)),
        "highest p99 (every flow is in flows.csv)",
    );
    let mut t = Table::new(
        title,
        &["flow", "src → dst", "msg size (B)", "samples", "min", "typical", "mean", "stdev", "p99", "p99.9", "max"],
    );
    for f in shown {
        let Some(l) = &f.latency else { continue };
        let us = |v: f64| number(v, 2);
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
    let Shown { title, items: shown } = shown(
        "Receivers",
        p.receivers.iter(),
        ROWS_SHOWN,
        |a, b| a.jain.total_cmp(&b.jain),
        "least fair (Jain index; every receiver is in run.json)",
    );
    let mut t = Table::new(
        title,
        &["rank", "host", "senders", "aggregate Gb/s", "min share %", "max share %", "Jain index", "CoV"],
    );
    for r in shown {
        t.rows.push(vec![
            r.rank.to_string(),
            r.host.clone(),
            r.senders.to_string(),
            number(r.aggregate_gbps, 3),
            number(r.min_share * 100.0, 1),
            number(r.max_share * 100.0, 1),
            format!("{:.4}", r.jain),
            format!("{:.4}", r.cov),
        ]);
    }
    t
}

fn groups(p: &PhaseResult) -> Table {
    let mut t = Table::new(
        "Groups".into(),
        &[
            "group",
            "pattern",
            "transport",
            "flows",
            "aggregate Gb/s",
            "min flow Gb/s",
            "max flow Gb/s",
            "Jain index",
            "limited by (flows)",
        ],
    );
    for g in &p.groups {
        t.rows.push(vec![
            g.name.clone(),
            g.pattern.name().to_string(),
            format!("{:?}", g.transport).to_lowercase(),
            g.flows.to_string(),
            number(g.aggregate_gbps, 3),
            number(g.min_flow_gbps, 3),
            number(g.max_flow_gbps, 3),
            format!("{:.4}", g.jain),
            g.limit.as_ref().map_or_else(|| "-".into(), ToString::to_string),
        ]);
    }
    t
}

fn ranks(p: &PhaseResult) -> Table {
    let moved = |r: &RankResult| Reached { failed: r.error.is_some(), gbps: r.tx_gbps + r.rx_gbps };
    let Shown { title, items: shown } = shown(
        "Ranks",
        p.ranks.iter(),
        ROWS_SHOWN,
        |a, b| failed_then_lower(moved(a), moved(b)),
        "slowest or failed (every rank is in ranks.csv)",
    );
    let mut t = Table::new(
        title,
        &[
            "rank",
            "host",
            "tx Gb/s",
            "rx Gb/s",
            "worker CPU % (user+sys, of 1 core, no burners)",
            "data path CPU % (busiest thread)",
            "control CPU %",
            "host CPU % (of all cores)",
            "iface rx/tx MB (kernel)",
            "clock offset µs",
            "note",
        ],
    );
    for r in &shown {
        let ifaces: Vec<String> = r
            .netdevs
            .iter()
            .map(|n| format!("{} {:.1}/{:.1}", n.iface, n.rx_bytes as f64 / 1e6, n.tx_bytes as f64 / 1e6))
            .collect();
        t.rows.push(vec![
            r.rank.to_string(),
            r.host.clone(),
            number(r.tx_gbps, 3),
            number(r.rx_gbps, 3),
            // Runs made before threads were told apart counted the burners in.
            match (r.cpu.process_pct, &r.stress) {
                (None, Some(_)) => format!("{} (burners in)", number(r.cpu.worker_pct, 1)),
                _ => number(r.cpu.worker_pct, 1),
            },
            r.cpu
                .data
                .map_or_else(|| "-".into(), |d| format!("{} ({})", number(d.pct, 1), number(d.busiest_thread_pct, 1))),
            r.cpu.control.map_or_else(|| "-".into(), |c| number(c.pct, 1)),
            format!("{} of {}", number(r.cpu.host_pct, 1), r.cpu.host_cores),
            ifaces.join(", "),
            format!("{:.0} ± {:.0}", r.clock_offset_us, r.rtt_us / 2.0),
            r.error.clone().unwrap_or_default(),
        ]);
    }
    // Hosts of several ranks, or ranks bound to devices: which is which.
    if p.ranks.iter().any(|r| r.slot > 0 || !r.devices.is_empty()) {
        t.header.insert(2, "slot / devices".to_string());
        for (row, r) in t.rows.iter_mut().zip(&shown) {
            let devices = if r.devices.is_empty() { "-".to_string() } else { r.devices.join(",") };
            row.insert(2, format!("{} / {devices}", r.slot));
        }
    }
    t
}

/// The verdict of the checks, e.g. `checks FAILED: 5 of 30 failed, 1 suspect`.
pub fn verdict_line(a: &Acceptance) -> String {
    let count = |v: Verdict| a.checks.iter().filter(|c| c.verdict == v).count();
    let (fail, unknown, retested) = (count(Verdict::Fail), count(Verdict::Unknown), count(Verdict::Cleared));
    let mut parts = Vec::new();
    if fail > 0 {
        parts.push(format!("{fail} of {} failed", a.checks.len()));
    }
    if unknown > 0 {
        parts.push(format!("{unknown} could not be evaluated"));
    }
    if retested > 0 {
        parts.push(format!("{retested} failed in the run but passed when retested alone"));
    }
    if parts.is_empty() {
        parts.push(format!("all {} passed", a.checks.len()));
    }
    let (cleared, blamed): (Vec<&Suspect>, Vec<&Suspect>) =
        a.suspects.iter().partition(|s| matches!(s.retest, Retest::Cleared { .. }));
    let names = |list: &[&Suspect]| list.iter().map(|s| labels::suspect(s)).collect::<Vec<_>>().join(", ");
    if !blamed.is_empty() {
        parts.push(format!("suspect(s): {}", names(&blamed)));
    }
    if !cleared.is_empty() {
        parts.push(format!("cleared on retest: {}", names(&cleared)));
    }
    format!("checks {}: {}", if a.passed { "PASSED" } else { "FAILED" }, parts.join("; "))
}

/// Suspects first, then each rule's tally, then every check that did not pass.
pub fn acceptance(run: &RunResult, a: &Acceptance) -> Vec<Table> {
    let mut suspects = Table::new("Suspects".into(), &["suspect", "evidence", "retest alone"]);
    for s in &a.suspects {
        suspects.rows.push(vec![labels::suspect(s), s.evidence.clone(), labels::retest(&s.retest)]);
    }
    let mut rules =
        Table::new("Checks".into(), &["rule", "checked", "passed", "failed", "cleared on retest", "unknown"]);
    for rule in &a.rules {
        let of = |v: Verdict| a.checks.iter().filter(|c| c.rule == *rule && c.verdict == v).count().to_string();
        let checked = a.checks.iter().filter(|c| c.rule == *rule).count();
        rules.rows.push(vec![
            rule.to_string(),
            checked.to_string(),
            of(Verdict::Pass),
            of(Verdict::Fail),
            of(Verdict::Cleared),
            of(Verdict::Unknown),
        ]);
    }
    let mut failed = Table::new(
        "Checks not passed".into(),
        &["rule", "item", "value (Gb/s; µs, % loss)", "limit", "verdict", "note"],
    );
    for c in a.checks.iter().filter(|c| c.verdict != Verdict::Pass) {
        let shown = |x: Option<f64>| x.map_or_else(|| "–".to_string(), |x| number(x, 3));
        failed.rows.push(vec![
            c.rule.to_string(),
            labels::checked(run, &c.item),
            shown(c.value),
            shown(c.limit),
            format!("{:?}", c.verdict).to_uppercase(),
            c.note.clone().unwrap_or_default(),
        ]);
    }
    vec![suspects, rules, failed]
}

/// The unit of a matrix's cells.
pub fn matrix_unit(m: &PairMatrix) -> &'static str {
    match m.mode {
        Mode::Bandwidth => "Gb/s",
        Mode::Latency => "µs, typical half round trip",
    }
}

/// The all-pairs matrix as a table: rows send, columns receive.
pub fn matrix(m: &PairMatrix) -> Table {
    let mut header = vec!["sender ↓ receiver →".to_string()];
    header.extend(m.hosts.iter().cloned());
    let mut t = Table::with(format!("All pairs `{}` ({})", m.group, matrix_unit(m)), header);
    for (src, row) in m.values.iter().enumerate() {
        let mut cells = vec![m.hosts[src].clone()];
        cells.extend(row.iter().map(|v| v.map_or_else(|| "·".to_string(), |g| number(g, 2))));
        t.rows.push(cells);
    }
    t
}

fn stress(p: &PhaseResult) -> Table {
    let mut t = Table::new(
        "CPU stress".into(),
        &[
            "rank",
            "host",
            "threads",
            "cores",
            "asked load %",
            "burners' CPU % (user+sys, of 1 core)",
            "measured load % (of those cores)",
            "host CPU %",
            "note",
        ],
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
            r.cpu.burners.map_or_else(|| "-".into(), |b| number(b.pct, 1)),
            number(s.measured_load_pct, 1),
            number(r.cpu.host_pct, 1),
            s.note.clone().unwrap_or_default(),
        ]);
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::FlowId;
    use crate::result::ReceiverResult;

    /// The v3 fan-in fixture's phase with `n` flows, ranks and receivers
    /// copied from its own: Gb/s and fairness fall and p99 rises with the
    /// index, so the worst is the last.
    fn wide(n: usize) -> (RunResult, PhaseResult) {
        let run: RunResult = serde_json::from_str(include_str!("../../../tests/fixtures/v3-fan-in.json")).unwrap();
        let mut p = run.phases[0].clone();
        let probe = p.flows.iter().find(|f| f.latency.is_some()).unwrap().clone();
        p.flows = (0..n)
            .map(|k| {
                let mut f = probe.clone();
                f.id = k as FlowId;
                f.gbps = (n - k) as f64;
                f.latency.as_mut().unwrap().p99_us = k as f64;
                f
            })
            .collect();
        let (rank, receiver) = (p.ranks[0].clone(), p.receivers[0].clone());
        p.ranks = (0..n).map(|k| RankResult { rank: k, tx_gbps: (n - k) as f64, ..rank.clone() }).collect();
        p.receivers =
            (0..n).map(|k| ReceiverResult { rank: k, jain: 1.0 / (k + 1) as f64, ..receiver.clone() }).collect();
        (run, p)
    }

    fn table<'a>(s: &'a PhaseSummary, title: &str) -> &'a Table {
        s.tables.iter().find(|t| t.title.starts_with(title)).unwrap()
    }

    fn first_cells(t: &Table) -> Vec<&str> {
        t.rows.iter().map(|r| r[0].as_str()).collect()
    }

    #[test]
    fn a_wide_phase_shows_its_worst_rows_first_and_says_how_many_it_left_out() {
        let (run, mut p) = wide(1000);
        p.flows[7].error = Some("connection refused".into());
        p.ranks[3].error = Some("lost".into());
        let s = phase_summary(&run, &p);

        let flows = table(&s, "Flows");
        assert_eq!(flows.title, "Flows: the 256 slowest or failed (every flow is in flows.csv) of 1000, worst first");
        assert_eq!(&first_cells(flows)[..3], ["7", "999", "998"], "the failed flow, then the slowest");
        assert_eq!(flows.rows.len(), ROWS_SHOWN);
        assert_eq!(flows.rows.last().unwrap()[0], (1000 - ROWS_SHOWN + 1).to_string());

        let latency = table(&s, "Latency");
        assert!(latency.title.ends_with("the 256 highest p99 (every flow is in flows.csv) of 1000, worst first"));
        assert_eq!(&first_cells(latency)[..2], ["999", "998"]);

        let receivers = table(&s, "Receivers");
        assert_eq!(receivers.rows.len(), ROWS_SHOWN);
        assert_eq!(&first_cells(receivers)[..2], ["999", "998"], "the least fair first");

        let ranks = table(&s, "Ranks");
        assert_eq!(ranks.rows.len(), ROWS_SHOWN);
        assert_eq!(&first_cells(ranks)[..2], ["3", "999"], "the failed rank, then the one that moved least");
    }

    #[test]
    fn a_phase_that_fits_keeps_every_row_in_its_own_order() {
        let (run, p) = wide(ROWS_SHOWN);
        let s = phase_summary(&run, &p);
        for title in ["Flows", "Latency", "Receivers", "Ranks"] {
            let t = table(&s, title);
            assert!(!t.title.contains("worst first"), "{}", t.title);
            let expected: Vec<String> = (0..ROWS_SHOWN).map(|k| k.to_string()).collect();
            assert_eq!(first_cells(t), expected, "{title}");
        }
    }
}
