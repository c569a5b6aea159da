//! Turning every rank's report and the intervals every rank sent into one
//! phase result over the common window (the intervals every rank took):
//! the same boundaries for all flows, so the aggregate is exactly the sum
//! of the flows. Linear in flows and ranks: a 65 536-rank fan-in puts every
//! flow's end in one report, and rank 0 aggregates it while its heartbeats
//! wait. The per-interval series are not here: rank 0 handed each interval
//! on as it closed (`intervals`), and the launcher puts them back.

use std::collections::HashMap;

use crate::histogram::Histogram;
use crate::metrics::{stats, FlowEngines, FlowSamples, RankReport};
use crate::plan::{Flow, GroupPlan, Phase, RankInfo};
use crate::result::degraded::{self, AskedWindow, Degradation, Observed, ObservedFlow};
use crate::result::gpu_memory::FlowGpuMemory;
use crate::result::intervals::PhaseIntervals;
use crate::result::{
    Datagrams, FlowResult, GroupResult, LaneResult, Offered, PhaseResult, Probes, RankResult, ReceiverResult,
};
use crate::scenario::rdma::Connection;
use crate::scenario::{Mode, Op, Transport};
use crate::transport::{Counts, Side};
use crate::units::gbps;

/// Builds the phase result from the reports that arrived (`None` for a rank
/// that never reported) and the intervals closed (`finish`ed with the ranks
/// that reported). `complete` is false for a phase cut short; `asked` is
/// the window the phase asked for, against which it may be degraded.
pub fn aggregate_phase(
    phase: &Phase,
    ranks: &[RankInfo],
    reports: &[Option<RankReport>],
    intervals: &PhaseIntervals,
    complete: bool,
    asked: AskedWindow,
) -> PhaseResult {
    let arrived: Vec<&RankReport> = reports.iter().flatten().collect();
    let spans = rank_windows(&arrived, intervals);
    let window_s = stats::mean(&spans.iter().map(|s| s.1).collect::<Vec<_>>()).unwrap_or(0.0);
    let ends = Ends::new(reports, intervals);
    let (flows, round_trips) = flow_results(phase, ranks, &ends, window_s, asked.duration.as_secs_f64());
    let aggregate_gbps = stats::total(flows.iter().filter(|f| f.mode == Mode::Bandwidth).map(|f| f.gbps));
    let flow_starts = flow_starts(&arrived);
    let starts: Vec<f64> = flow_starts.iter().map(|&(_, ns)| ns as f64 / 1e3).collect();
    let start_skew_us = match (stats::min(&starts), stats::max(&starts)) {
        (Some(lo), Some(hi)) => hi - lo,
        _ => 0.0,
    };
    let degraded = judge(&flows, spans, flow_starts, start_skew_us, asked);

    PhaseResult {
        index: phase.index,
        name: phase.name.clone(),
        complete,
        window_s,
        start_skew_us,
        degraded,
        aggregate_gbps,
        interval_gbps: Vec::new(),
        groups: groups(phase, &flows, &round_trips),
        receivers: receivers(ranks, &flows),
        ranks: rank_results(ranks, reports, &flows, window_s),
        flows,
        limit: None,
    }
}

/// Each reporting rank's span of the common window (the intervals every
/// reporting rank took); none when no interval closed.
fn rank_windows(arrived: &[&RankReport], intervals: &PhaseIntervals) -> Vec<(usize, f64)> {
    match intervals.closed() {
        0 => Vec::new(),
        _ => arrived.iter().map(|r| (r.rank, intervals.span_s(r.rank))).collect(),
    }
}

/// One end of a flow that reported: its rank's report, its samples, and
/// what it moved in the common window.
type End<'a> = (&'a RankReport, &'a FlowSamples, Counts);

/// Every rank's samples by flow and side, with the intervals that say what
/// each end moved in the common window.
struct Ends<'a> {
    by_end: HashMap<(usize, u32, Side), (&'a RankReport, &'a FlowSamples)>,
    intervals: &'a PhaseIntervals,
    taken: u32,
}

impl<'a> Ends<'a> {
    fn new(reports: &'a [Option<RankReport>], intervals: &'a PhaseIntervals) -> Self {
        // The first samples of a flow's side, should one come twice.
        let mut by_end = HashMap::new();
        for (rank, report) in reports.iter().enumerate() {
            let Some(report) = report else { continue };
            for s in &report.flows {
                by_end.entry((rank, s.flow, s.side)).or_insert((report, s));
            }
        }
        Ends { by_end, intervals, taken: intervals.closed() }
    }

    /// The end of flow `flow` (the `i`th of the phase) on `rank`, if it reported.
    fn get(&self, rank: usize, i: usize, flow: &Flow, side: Side) -> Option<End<'a>> {
        let (report, s) = self.by_end.get(&(rank, flow.id, side)).copied()?;
        Some((report, s, self.intervals.moved(i, side).filter(|_| self.taken > 0)?))
    }
}

/// Every flow's result, and each group's round trips with every flow's
/// merged: its latency over all of them.
fn flow_results(
    phase: &Phase,
    ranks: &[RankInfo],
    ends: &Ends,
    window_s: f64,
    asked_s: f64,
) -> (Vec<FlowResult>, Vec<Option<Histogram>>) {
    let mut flows = Vec::with_capacity(phase.flows.len());
    let mut round_trips: Vec<Option<Histogram>> = vec![None; phase.groups.len()];
    for (i, flow) in phase.flows.iter().enumerate() {
        let group = &phase.groups[flow.group];
        let tx = ends.get(flow.src, i, flow, Side::Sender);
        if let (Some(h), Some(merged)) = (tx.and_then(|(_, s, _)| s.rtts.as_ref()), round_trips.get_mut(flow.group)) {
            merged.get_or_insert_with(Histogram::default).merge(h);
        }
        let rx = ends.get(flow.dst, i, flow, Side::Receiver);
        let mut result = flow_result(flow, group, ranks, tx, rx, ends.taken, window_s);
        // Due in the window asked for, which the senders keep to (the common window may run longer).
        result.probes = Probes::of(group, asked_s, result.latency.map_or(0, |l| l.samples));
        flows.push(result);
    }
    (flows, round_trips)
}

/// One flow's result from its two ends (either may be missing): counted
/// where its group counts, over the common window.
fn flow_result(
    flow: &Flow,
    group: &GroupPlan,
    ranks: &[RankInfo],
    tx: Option<End>,
    rx: Option<End>,
    taken: u32,
    window_s: f64,
) -> FlowResult {
    let counted = if group.counted_at_receiver() { rx.or(tx) } else { tx.or(rx) };
    let Counts { bytes, messages } = counted.map_or(Counts::default(), |c| c.2);
    let checker = if group.validation_checked_by_sender() { tx } else { rx };
    let dv = checker.and_then(|(_, s, _)| s.validation);
    let error = [tx, rx].into_iter().flatten().find_map(|(_, s, _)| s.error.clone());
    let mut result = FlowResult {
        id: flow.id,
        group: group.name.clone(),
        mode: group.mode,
        src: flow.src,
        dst: flow.dst,
        src_host: ranks[flow.src].label(),
        dst_host: ranks[flow.dst].label(),
        streams: group.streams,
        message_size: group.message_size.bytes(),
        tx_bytes: tx.map(|(_, _, moved)| moved.bytes),
        rx_bytes: rx.map(|(_, _, moved)| moved.bytes),
        bytes,
        gbps: gbps(bytes, window_s),
        msgs_per_s: if window_s > 0.0 { messages as f64 / window_s } else { 0.0 },
        interval_gbps: Vec::new(),
        latency: tx.and_then(|(_, s, _)| s.rtts.as_ref()).and_then(|h| h.summary(reported_share(group))),
        error: error.or_else(|| counted.is_none().then(|| "no report from either end".to_string())),
        refused: rx.map_or(0, |(_, s, _)| s.refused),
        lanes: counted.map_or_else(Vec::new, |(r, s, _)| lanes(r, s, taken, window_s)),
        offered: None,
        probes: None,
        datagrams: match (tx, rx) {
            (Some((_, _, t)), Some((_, _, r))) if is_ud(group) => Some(Datagrams::new(t.messages, r.messages)),
            _ => None,
        },
        engines: engines(tx, rx),
        gpu_memory: FlowGpuMemory::of_ends(tx.map(|(_, s, _)| s), rx.map(|(_, s, _)| s)),
        dv_checked: dv.map(|d| d.checked),
        dv_errors: dv.map(|d| d.errors),
        dv_first_bad: dv.and_then(|d| d.first_bad),
        tcp: tx.and_then(|(_, s, _)| s.tcp),
        limit: None,
    };
    result.offered = Offered::of(group, &[(result.gbps, result.msgs_per_s)]);
    result
}

/// Where a TCP flow's ends ran, where either said.
fn engines(tx: Option<End>, rx: Option<End>) -> Option<FlowEngines> {
    let seats = |end: Option<End>| end.map_or_else(Vec::new, |(_, s, _)| s.engines.clone());
    let engines = FlowEngines { sender: seats(tx), receiver: seats(rx) };
    (!engines.sender.is_empty() || !engines.receiver.is_empty()).then_some(engines)
}

/// When each flow's sender started (flow id, ns from t0), where it said.
fn flow_starts(arrived: &[&RankReport]) -> Vec<(u32, i64)> {
    arrived
        .iter()
        .flat_map(|r| r.flows.iter())
        .filter(|s| s.side == Side::Sender)
        .filter_map(|s| Some((s.flow, s.start_ns?)))
        .collect()
}

/// Whether the phase's window can be trusted, from what was observed.
fn judge(
    flows: &[FlowResult],
    rank_windows: Vec<(usize, f64)>,
    flow_starts: Vec<(u32, i64)>,
    start_skew_us: f64,
    asked: AskedWindow,
) -> Vec<Degradation> {
    let observed = Observed {
        flows: flows
            .iter()
            .map(|f| ObservedFlow {
                id: f.id,
                bandwidth: f.mode == Mode::Bandwidth,
                bytes: f.bytes,
                error: f.error.as_deref(),
            })
            .collect(),
        rank_windows,
        starts: flow_starts.into_iter().map(|(flow, ns)| (flow, ns as f64 / 1e9)).collect(),
        start_skew_s: start_skew_us / 1e6,
    };
    degraded::judge(&observed, asked)
}

/// Each lane's bytes over the common window: only when the end's last
/// boundary is the window's (a rank that took more boundaries than the
/// others in a cut-short phase has no reading at the common close).
fn lanes(report: &RankReport, s: &FlowSamples, taken: u32, window_s: f64) -> Vec<LaneResult> {
    if report.boundaries != taken + 1 {
        return Vec::new();
    }
    s.lanes
        .iter()
        .enumerate()
        .map(|(lane, l)| {
            let bytes = l.closed.saturating_sub(l.opened);
            LaneResult { lane, device: l.device.clone(), bytes, gbps: gbps(bytes, window_s) }
        })
        .collect()
}

/// Whether the group's flows are unreliable datagrams (which may be lost).
fn is_ud(group: &GroupPlan) -> bool {
    group.rdma.as_ref().is_some_and(|r| r.knobs.connection == Connection::Ud)
}

/// What part of a round trip latency reports: half (ping-pong), or all of it
/// for RDMA read and atomics (one WR is one round trip), as perftest does.
fn reported_share(group: &GroupPlan) -> f64 {
    if group.transport == Transport::Rdma && (group.op == Op::Read || group.op.is_atomic()) {
        1.0
    } else {
        0.5
    }
}

fn groups(phase: &Phase, flows: &[FlowResult], round_trips: &[Option<Histogram>]) -> Vec<GroupResult> {
    phase
        .groups
        .iter()
        .zip(round_trips)
        .map(|(g, round_trips)| {
            let rates: Vec<f64> = flows.iter().filter(|f| f.group == g.name).map(|f| f.gbps).collect();
            let delivered: Vec<(f64, f64)> =
                flows.iter().filter(|f| f.group == g.name).map(|f| (f.gbps, f.msgs_per_s)).collect();
            GroupResult {
                name: g.name.clone(),
                mode: g.mode,
                pattern: g.pattern,
                transport: g.transport,
                op: g.op,
                flows: rates.len(),
                aggregate_gbps: stats::total(rates.iter().copied()),
                min_flow_gbps: stats::min(&rates).unwrap_or(0.0),
                max_flow_gbps: stats::max(&rates).unwrap_or(0.0),
                jain: stats::jain(&rates).unwrap_or(0.0),
                latency: round_trips.as_ref().and_then(|h| h.summary(reported_share(g))),
                offered: Offered::of(g, &delivered),
                limit: None,
            }
        })
        .collect()
}

fn receivers(ranks: &[RankInfo], flows: &[FlowResult]) -> Vec<ReceiverResult> {
    let mut into: Vec<Vec<f64>> = vec![Vec::new(); ranks.len()];
    for f in flows.iter().filter(|f| f.mode == Mode::Bandwidth) {
        if let Some(rates) = into.get_mut(f.dst) {
            rates.push(f.gbps);
        }
    }
    ranks
        .iter()
        .zip(into)
        .filter_map(|(r, rates)| {
            if rates.is_empty() {
                return None;
            }
            let total = stats::total(rates.iter().copied());
            let share = |x: Option<f64>| if total > 0.0 { x.unwrap_or(0.0) / total } else { 0.0 };
            Some(ReceiverResult {
                rank: r.rank,
                host: r.label(),
                senders: rates.len(),
                aggregate_gbps: total,
                min_share: share(stats::min(&rates)),
                max_share: share(stats::max(&rates)),
                jain: stats::jain(&rates).unwrap_or(0.0),
                cov: stats::cov(&rates).unwrap_or(0.0),
            })
        })
        .collect()
}

fn rank_results(
    ranks: &[RankInfo],
    reports: &[Option<RankReport>],
    flows: &[FlowResult],
    window_s: f64,
) -> Vec<RankResult> {
    let (mut tx, mut rx) = (vec![0u64; ranks.len()], vec![0u64; ranks.len()]);
    for f in flows {
        if let (Some(sum), Some(bytes)) = (tx.get_mut(f.src), f.tx_bytes) {
            *sum += bytes;
        }
        if let (Some(sum), Some(bytes)) = (rx.get_mut(f.dst), f.rx_bytes) {
            *sum += bytes;
        }
    }
    ranks
        .iter()
        .map(|r| {
            let report = reports.get(r.rank).and_then(Option::as_ref);
            let (tx, rx) = (tx.get(r.rank).copied().unwrap_or(0), rx.get(r.rank).copied().unwrap_or(0));
            RankResult {
                rank: r.rank,
                host: r.host.clone(),
                slot: r.slot,
                devices: r.devices.clone(),
                data_addr: r.data_addr.clone(),
                reported: report.is_some(),
                tx_gbps: gbps(tx, window_s),
                rx_gbps: gbps(rx, window_s),
                cpu: report.map(|r| r.cpu).unwrap_or_default(),
                netdevs: report.map(|r| r.netdevs.clone()).unwrap_or_default(),
                rdma_counters: report.map(|r| r.rdma_counters.clone()).unwrap_or_default(),
                stress: report.and_then(|r| r.stress.clone()),
                placements: report.map(|r| r.placements.clone()).unwrap_or_default(),
                clock_offset_us: report.map_or(0.0, |r| r.clock_offset_ns as f64 / 1e3),
                rtt_us: report.map_or(0.0, |r| r.rtt_ns as f64 / 1e3),
                error: match report {
                    Some(rep) => rep.error.clone(),
                    None => Some("no report (the rank was lost)".to_string()),
                },
                link_events: report.map(|r| r.link_events.clone()).unwrap_or_default(),
                link_events_dropped: report.map_or(0, |r| r.link_events_dropped),
            }
        })
        .collect()
}
