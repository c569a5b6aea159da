//! CSV files: flows, intervals and ranks, one row per item and phase, with
//! units in every header.

use serde::Serialize;

use crate::report::ReportError;
use crate::result::RunResult;

/// The rows under a header; a run that measured nothing still gets the
/// header, so scripts reading the file find their columns.
fn write_rows<T: Serialize + Default>(
    what: &'static str,
    mut rows: impl Iterator<Item = T>,
) -> Result<Vec<u8>, ReportError> {
    let encode = |e: csv::Error| ReportError::Encode { what, reason: e.to_string() };
    let mut w = csv::Writer::from_writer(Vec::new());
    let first = rows.next();
    let empty = first.is_none();
    // The csv writer names the columns from the first row it serializes.
    w.serialize(first.unwrap_or_default()).map_err(encode)?;
    for row in rows {
        w.serialize(row).map_err(encode)?;
    }
    let mut bytes = w.into_inner().map_err(|e| ReportError::Encode { what, reason: e.to_string() })?;
    if empty {
        let header_end = bytes.iter().position(|&b| b == b'\n').map_or(bytes.len(), |i| i + 1);
        bytes.truncate(header_end);
    }
    Ok(bytes)
}

#[derive(Serialize, Default)]
struct FlowRow<'a> {
    phase: usize,
    flow: u32,
    group: &'a str,
    src: usize,
    src_host: &'a str,
    dst: usize,
    dst_host: &'a str,
    streams: u32,
    message_size_bytes: u64,
    bytes: u64,
    tx_bytes: Option<u64>,
    rx_bytes: Option<u64>,
    window_s: f64,
    gbps: f64,
    msgs_per_s: f64,
    error: Option<&'a str>,
    /// Paced flows only (empty otherwise); after the older columns.
    offered_gbps: Option<f64>,
    offered_msgs_per_s: Option<f64>,
    delivered_ratio: Option<f64>,
    /// Bandwidth flows: what held it (docs/METRICS.md, "Why this number") and the rule.
    limited_by: Option<String>,
    limit_rule: Option<&'a str>,
}

pub fn flows(run: &RunResult) -> Result<Vec<u8>, ReportError> {
    let rows = run.phases.iter().flat_map(|p| {
        p.flows.iter().map(move |f| FlowRow {
            phase: p.index,
            flow: f.id,
            group: &f.group,
            src: f.src,
            src_host: &f.src_host,
            dst: f.dst,
            dst_host: &f.dst_host,
            streams: f.streams,
            message_size_bytes: f.message_size,
            bytes: f.bytes,
            tx_bytes: f.tx_bytes,
            rx_bytes: f.rx_bytes,
            window_s: p.window_s,
            gbps: f.gbps,
            msgs_per_s: f.msgs_per_s,
            error: f.error.as_deref(),
            offered_gbps: f.offered.map(|o| o.gbps),
            offered_msgs_per_s: f.offered.map(|o| o.msgs_per_s),
            delivered_ratio: f.offered.map(|o| o.delivered_ratio),
            limited_by: f.limit.as_ref().map(|l| l.kind.to_string()),
            limit_rule: f.limit.as_ref().map(|l| l.rule.as_str()),
        })
    });
    write_rows("flows.csv", rows)
}

#[derive(Serialize, Default)]
struct IntervalRow {
    phase: usize,
    /// A flow id, or `all` for the phase aggregate.
    flow: String,
    interval: usize,
    gbps: f64,
}

pub fn intervals(run: &RunResult) -> Result<Vec<u8>, ReportError> {
    let rows = run.phases.iter().flat_map(|p| {
        let aggregate = p.interval_gbps.iter().enumerate().map(move |(k, &gbps)| IntervalRow {
            phase: p.index,
            flow: "all".into(),
            interval: k,
            gbps,
        });
        let flows = p.flows.iter().flat_map(move |f| {
            f.interval_gbps.iter().enumerate().map(move |(k, &gbps)| IntervalRow {
                phase: p.index,
                flow: f.id.to_string(),
                interval: k,
                gbps,
            })
        });
        aggregate.chain(flows)
    });
    write_rows("intervals.csv", rows)
}

#[derive(Serialize, Default)]
struct RankRow<'a> {
    phase: usize,
    rank: usize,
    host: &'a str,
    slot: u32,
    devices: String,
    reported: bool,
    tx_gbps: f64,
    rx_gbps: f64,
    worker_cpu_pct_of_core: f64,
    worker_user_pct_of_core: f64,
    worker_system_pct_of_core: f64,
    data_cpu_pct_of_core: Option<f64>,
    data_busiest_thread_pct_of_core: Option<f64>,
    control_cpu_pct_of_core: Option<f64>,
    burner_cpu_pct_of_core: Option<f64>,
    process_cpu_pct_of_core: Option<f64>,
    host_cpu_pct_of_all_cores: f64,
    host_cores: usize,
    iface: String,
    iface_rx_bytes: u64,
    iface_tx_bytes: u64,
    clock_offset_us: f64,
    rtt_us: f64,
}

pub fn ranks(run: &RunResult) -> Result<Vec<u8>, ReportError> {
    let rows = run.phases.iter().flat_map(|p| {
        p.ranks.iter().map(move |r| RankRow {
            phase: p.index,
            rank: r.rank,
            host: &r.host,
            slot: r.slot,
            devices: r.devices.join(";"),
            reported: r.reported,
            tx_gbps: r.tx_gbps,
            rx_gbps: r.rx_gbps,
            worker_cpu_pct_of_core: r.cpu.worker_pct,
            worker_user_pct_of_core: r.cpu.worker_user_pct,
            worker_system_pct_of_core: r.cpu.worker_system_pct,
            data_cpu_pct_of_core: r.cpu.data.map(|d| d.pct),
            data_busiest_thread_pct_of_core: r.cpu.data.map(|d| d.busiest_thread_pct),
            control_cpu_pct_of_core: r.cpu.control.map(|c| c.pct),
            burner_cpu_pct_of_core: r.cpu.burners.map(|b| b.pct),
            process_cpu_pct_of_core: r.cpu.process_pct,
            host_cpu_pct_of_all_cores: r.cpu.host_pct,
            host_cores: r.cpu.host_cores,
            iface: r.netdevs.iter().map(|n| n.iface.as_str()).collect::<Vec<_>>().join(";"),
            iface_rx_bytes: r.netdevs.iter().map(|n| n.rx_bytes).sum(),
            iface_tx_bytes: r.netdevs.iter().map(|n| n.tx_bytes).sum(),
            clock_offset_us: r.clock_offset_us,
            rtt_us: r.rtt_us,
        })
    });
    write_rows("ranks.csv", rows)
}

#[derive(Serialize, Default)]
struct RepeatRow<'a> {
    phase: &'a str,
    item: &'a str,
    metric: &'static str,
    unit: &'a str,
    repeats: usize,
    mean: Option<f64>,
    stdev: Option<f64>,
    min: Option<f64>,
    max: Option<f64>,
    ci95_low: Option<f64>,
    ci95_high: Option<f64>,
    ci95_half: Option<f64>,
    /// Each counted repeat's value, in run order, `;` between them.
    values: String,
}

/// One row per aggregate of each repeated phase (run.json `repeats`): its
/// statistics over the repeats, in the row's `unit`; `repeats.csv`.
pub fn repeats(run: &RunResult) -> Result<Vec<u8>, ReportError> {
    let rows = run.repeats.iter().flatten().flat_map(|p| {
        p.numbers.iter().map(move |n| {
            let s = n.spread;
            RepeatRow {
                phase: &p.phase,
                item: &n.item,
                metric: n.metric.name(),
                unit: &n.unit,
                repeats: n.values.len(),
                mean: s.map(|s| s.mean),
                stdev: s.map(|s| s.stdev),
                min: s.map(|s| s.min),
                max: s.map(|s| s.max),
                ci95_low: s.map(|s| s.ci95_low),
                ci95_high: s.map(|s| s.ci95_high),
                ci95_half: s.map(|s| s.ci95_half),
                values: n.values.iter().map(|v| v.value.to_string()).collect::<Vec<_>>().join(";"),
            }
        })
    });
    write_rows("repeats.csv", rows)
}
