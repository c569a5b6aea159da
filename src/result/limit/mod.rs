//! Why a flow moved what it moved (`flows[].limit`, and per group and
//! phase): the first rule, in a fixed order, that the same run's evidence
//! holds, with the numbers that decided it. A rule with no evidence never
//! fires: a wrong verdict is worse than `unexplained`. The rules and their
//! thresholds are in docs/METRICS.md, "Why this number".

mod numa;
mod pcie;
mod tcp;
mod unavailable;

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::metrics::cpu::ThreadsCpu;
use crate::result::line_rate::port_rate;
use crate::result::{FlowResult, PhaseResult, RankResult, RunResult};
use crate::scenario::{Mode, Transport};
use crate::transport::rdma::counters::{short_name, CONGESTION, LOSS};

/// What held a flow (or most flows of a group or phase), in rule order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LimitKind {
    /// The scenario's own `rate`: it delivered what it offered.
    Paced,
    /// At the narrowest link of its path.
    LineRate,
    /// At its NIC's PCIe link, which carries less than the NIC's port.
    Pcie,
    /// One of several flows into a receiver that is at its line rate.
    SharedLink,
    /// Its NICs counted lost or out-of-order packets and retries.
    Loss,
    /// Its NICs counted congestion signals (CNP, ECN, waits to send).
    Congestion,
    /// A sending data thread ran, or wanted to run, the whole window.
    SenderCpu,
    ReceiverCpu,
    /// An end's data threads pinned away from its NIC's NUMA node.
    FarNuma,
    /// The receiver's advertised TCP window kept its sender waiting.
    ReceiverWindow,
    /// No rule held.
    Unexplained,
}

impl fmt::Display for LimitKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LimitKind::Paced => "paced",
            LimitKind::LineRate => "line rate",
            LimitKind::Pcie => "PCIe",
            LimitKind::SharedLink => "shared link",
            LimitKind::Loss => "loss",
            LimitKind::Congestion => "congestion",
            LimitKind::SenderCpu => "sender CPU",
            LimitKind::ReceiverCpu => "receiver CPU",
            LimitKind::FarNuma => "far NUMA",
            LimitKind::ReceiverWindow => "receiver window",
            LimitKind::Unexplained => "unexplained",
        })
    }
}

/// One number a verdict rests on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Evidence {
    pub what: String,
    pub value: f64,
    pub unit: String,
}

/// A verdict: its kind, the rule that fired (with its threshold), and the
/// evidence that decided it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Limit {
    pub kind: LimitKind,
    pub rule: String,
    pub evidence: Vec<Evidence>,
    /// Evidence the rules look for that these hosts do not have (`sender
    /// rxe0:1 congestion counters`): unavailable, never read as 0.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unavailable: Vec<String>,
}

impl fmt::Display for Limit {
    /// `sender CPU (sender data thread ran 34 % of a core, …)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.kind)?;
        let shown: Vec<String> =
            self.evidence.iter().map(|e| format!("{} {:.3} {}", e.what, e.value, e.unit)).collect();
        if !shown.is_empty() {
            write!(f, " ({})", shown.join(", "))?;
        }
        Ok(())
    }
}

/// What held the bandwidth flows of a group or phase: the kind that held
/// most of them (ties: the first in rule order), and how many each held.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MostHeld {
    pub kind: LimitKind,
    /// Flows it held, of `of` judged.
    pub flows: usize,
    pub of: usize,
    pub kinds: BTreeMap<LimitKind, usize>,
}

impl fmt::Display for MostHeld {
    /// `sender CPU (3 of 4)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({} of {})", self.kind, self.flows, self.of)
    }
}

/// A rate is its line's at 90 % of it: TCP over Ethernet carries about 94 %
/// of the line as payload at 1500 B, RoCE about 97 % at 4096 B.
pub const LINE_SHARE: f64 = 0.90;
/// A rate above 105 % of its "line" shows the line's speed is no limit: a
/// virtual interface's (veth says 10 Gb/s and carries more; Soft-RoCE's
/// port says 2).
pub const LINE_OVER: f64 = 1.05;
/// A paced flow that delivered 90 % of its offer was held by its pacing.
pub const PACED_SHARE: f64 = 0.90;
/// A data thread that ran (or ran and waited to run) 95 % of the window had
/// no time to spare.
pub const CPU_BUSY_PCT: f64 = 95.0;
/// A data thread runnable but without a core for 20 % of the window lost at
/// least that share of it to the CPU…
pub const CPU_WAITED_PCT: f64 = 20.0;
/// …when it was runnable (running or waiting to run) 80 % of the window: a
/// thread that mostly slept, waiting for its socket, was held by the
/// network, however long each wake-up waited for a core.
pub const CPU_RUNNABLE_PCT: f64 = 80.0;

/// Every phase's verdicts, written into its flows, groups and the phase.
pub fn judge_run(run: &mut RunResult) {
    let judged: Vec<Vec<Option<Limit>>> =
        run.phases.iter().map(|p| p.flows.iter().map(|f| judge_flow(run, p, f)).collect()).collect();
    for (phase, limits) in run.phases.iter_mut().zip(judged) {
        for (flow, limit) in phase.flows.iter_mut().zip(limits) {
            flow.limit = limit;
        }
        for group in &mut phase.groups {
            group.limit = most_held(phase.flows.iter().filter(|f| f.group == group.name));
        }
        phase.limit = most_held(phase.flows.iter());
    }
}

/// The verdicts of `flows` counted (those without one left out).
fn most_held<'a>(flows: impl Iterator<Item = &'a FlowResult>) -> Option<MostHeld> {
    most_often(flows.filter_map(|f| f.limit.as_ref().map(|l| l.kind)))
}

/// The kind most of `held` are (ties: the first in rule order), with each
/// kind's count; `None` when there are none.
pub fn most_often(held: impl Iterator<Item = LimitKind>) -> Option<MostHeld> {
    let mut kinds: BTreeMap<LimitKind, usize> = BTreeMap::new();
    for kind in held {
        *kinds.entry(kind).or_default() += 1;
    }
    let (&kind, &held) = kinds.iter().max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))?;
    Some(MostHeld { kind, flows: held, of: kinds.values().sum(), kinds })
}

/// A flow end's line rate, Gb/s, and what it is.
struct EndRate {
    gbps: f64,
    source: String,
}

fn judge_flow(run: &RunResult, phase: &PhaseResult, flow: &FlowResult) -> Option<Limit> {
    if flow.mode != Mode::Bandwidth || flow.error.is_some() {
        return None;
    }
    let transport = phase.groups.iter().find(|g| g.name == flow.group)?.transport;
    let rank = |r: usize| phase.ranks.iter().find(|x| x.rank == r);
    let (src, dst) = (rank(flow.src), rank(flow.dst));
    let line = [flow.src, flow.dst]
        .iter()
        .map(|&r| end_rate(run, phase, transport, r, &flow.group, r == flow.src))
        .collect::<Option<Vec<EndRate>>>()
        .and_then(|ends| ends.into_iter().min_by(|a, b| a.gbps.total_cmp(&b.gbps)));
    let verdict = paced(flow)
        .or_else(|| line.as_ref().and_then(|l| at_line(flow, l)))
        .or_else(|| pcie::narrower_than_the_port(run, phase, flow))
        .or_else(|| shared(run, phase, transport, flow))
        .or_else(|| counted([src, dst], LOSS, LimitKind::Loss))
        .or_else(|| counted([src, dst], CONGESTION, LimitKind::Congestion))
        .or_else(|| cpu(src, dst, polls(transport)))
        .or_else(|| loopback(src, dst))
        .or_else(|| tcp::congestion(phase, flow))
        .or_else(|| tcp::loss(flow))
        .or_else(|| numa::far(phase, flow))
        .or_else(|| tcp::receiver_window(flow))
        .unwrap_or_else(|| unexplained(flow, line.as_ref()));
    Some(Limit { unavailable: unavailable::lacking(flow, transport, [src, dst]), ..verdict })
}

fn gbps(what: &str, value: f64) -> Evidence {
    Evidence { what: what.into(), value, unit: "Gb/s".into() }
}

fn pct(what: String, value: f64, unit: &str) -> Evidence {
    Evidence { what, value, unit: unit.into() }
}

/// The line rate of `rank`'s end of a flow of `group`: its RDMA port(s) as
/// probed, or its TCP interface's speed, or, at the end that `sends`, the
/// interface's egress rate limiter where that is narrower; `None` when
/// unknown (loopback).
fn end_rate(
    run: &RunResult,
    phase: &PhaseResult,
    transport: Transport,
    rank: usize,
    group: &str,
    sends: bool,
) -> Option<EndRate> {
    if transport == Transport::Rdma {
        let rate = port_rate(run, phase, rank, group).ok()?;
        return Some(EndRate { gbps: rate.gbps, source: rate.source });
    }
    let rank = phase.ranks.iter().find(|r| r.rank == rank)?;
    let netdev = rank.netdevs.first()?;
    let (iface, host) = (&netdev.iface, &rank.host);
    let speed = netdev.speed_mbps.map(|mbps| {
        let gbps = mbps as f64 / 1000.0;
        EndRate { gbps, source: format!("{iface} of {host} at {gbps} Gb/s") }
    });
    let limiter = netdev.limiter.as_ref().filter(|_| sends).map(|l| {
        let gbps = l.rate_bps as f64 / 1e9;
        EndRate { gbps, source: format!("{} on {iface} of {host} at {gbps} Gb/s, an egress rate limiter", l.qdisc) }
    });
    speed.into_iter().chain(limiter).min_by(|a, b| a.gbps.total_cmp(&b.gbps))
}

fn paced(flow: &FlowResult) -> Option<Limit> {
    let offered = flow.offered?;
    (offered.delivered_ratio >= PACED_SHARE).then(|| Limit {
        kind: LimitKind::Paced,
        rule: format!("delivered ≥ {:.0} % of the group's `rate`", PACED_SHARE * 100.0),
        evidence: vec![
            gbps("offered", offered.gbps),
            pct("delivered / offered".into(), offered.delivered_ratio * 100.0, "%"),
        ],
        unavailable: Vec::new(),
    })
}

fn at_or_near(gbps: f64, line: f64) -> bool {
    (LINE_SHARE * line..=LINE_OVER * line).contains(&gbps)
}

fn at_line(flow: &FlowResult, line: &EndRate) -> Option<Limit> {
    at_or_near(flow.gbps, line.gbps).then(|| Limit {
        kind: LimitKind::LineRate,
        rule: format!("≥ {:.0} % of the narrower end's line rate ({})", LINE_SHARE * 100.0, line.source),
        evidence: vec![gbps("flow", flow.gbps), gbps("line rate", line.gbps)],
        unavailable: Vec::new(),
    })
}

/// A flow into a receiver that several senders fill to its line rate.
fn shared(run: &RunResult, phase: &PhaseResult, transport: Transport, flow: &FlowResult) -> Option<Limit> {
    let receiver = phase.receivers.iter().find(|r| r.rank == flow.dst && r.senders > 1)?;
    let line = end_rate(run, phase, transport, flow.dst, &flow.group, false)?;
    at_or_near(receiver.aggregate_gbps, line.gbps).then(|| Limit {
        kind: LimitKind::SharedLink,
        rule: format!(
            "{} senders into rank {} fill ≥ {:.0} % of its line rate ({})",
            receiver.senders,
            receiver.rank,
            LINE_SHARE * 100.0,
            line.source
        ),
        evidence: vec![
            gbps("receiver aggregate", receiver.aggregate_gbps),
            gbps("line rate", line.gbps),
            pct("this flow's share".into(), flow.gbps / receiver.aggregate_gbps.max(f64::MIN_POSITIVE) * 100.0, "%"),
        ],
        unavailable: Vec::new(),
    })
}

/// The counters of `names` that moved on either end's RDMA ports.
fn counted(ends: [Option<&RankResult>; 2], names: &[&str], kind: LimitKind) -> Option<Limit> {
    let mut evidence = Vec::new();
    for (end, rank) in ["sender", "receiver"].into_iter().zip(ends) {
        for delta in rank.map_or(&[][..], |r| &r.rdma_counters[..]) {
            for (name, moved) in &delta.counters {
                let short = short_name(name);
                if names.contains(&short) && *moved > 0 {
                    let what = format!("{end} {}:{} {short}", delta.device, delta.port);
                    evidence.push(Evidence { what, value: *moved as f64, unit: "counted".into() });
                }
            }
        }
    }
    (!evidence.is_empty()).then(|| Limit {
        kind,
        rule: format!("a {kind} counter of either end's RDMA ports moved in the window"),
        evidence,
        unavailable: Vec::new(),
    })
}

/// An RDMA flow's data threads may poll their completion queues without
/// sleeping: a core they fill says nothing of what they needed.
fn polls(transport: Transport) -> bool {
    transport == Transport::Rdma
}

/// The end whose data thread wanted a core most, when it ran (or ran and
/// waited to run) at least `CPU_BUSY_PCT` of the window, or was runnable
/// `CPU_RUNNABLE_PCT` of it and waited for a core `CPU_WAITED_PCT`;
/// threads that `poll` are runnable all the time, so only their wait counts.
fn cpu(src: Option<&RankResult>, dst: Option<&RankResult>, poll: bool) -> Option<Limit> {
    let starved = |t: &ThreadsCpu| {
        t.wanting_thread.is_some_and(|w| w.demand_pct >= CPU_RUNNABLE_PCT && w.waited_pct >= CPU_WAITED_PCT)
    };
    let busy = |t: &ThreadsCpu| {
        !poll
            && (t.busiest_thread_pct >= CPU_BUSY_PCT || t.wanting_thread.is_some_and(|w| w.demand_pct >= CPU_BUSY_PCT))
    };
    let bound = |t: &ThreadsCpu| busy(t) || starved(t);
    let demand = |t: &ThreadsCpu| match t.wanting_thread {
        Some(w) if poll => w.waited_pct,
        Some(w) => w.demand_pct,
        None => t.busiest_thread_pct,
    };
    let ends = [(LimitKind::SenderCpu, "sender", src), (LimitKind::ReceiverCpu, "receiver", dst)];
    let (kind, end, data) = ends
        .into_iter()
        .filter_map(|(kind, end, rank)| Some((kind, end, rank?.cpu.data?)))
        .filter(|(_, _, data)| bound(data))
        .max_by(|a, b| demand(&a.2).total_cmp(&demand(&b.2)))?;
    let mut evidence = vec![pct(format!("{end} busiest data thread ran"), data.busiest_thread_pct, "% of a core")];
    if let Some(w) = data.wanting_thread {
        evidence.push(pct(format!("{end} data thread was runnable"), w.demand_pct, "% of the window"));
        evidence.push(pct(format!("{end} data thread waited for a core"), w.waited_pct, "% of the window"));
    }
    let why = match data.wanting_thread {
        _ if !busy(&data) => format!(
            "was runnable ≥ {CPU_RUNNABLE_PCT} % of the window and waited for a core ≥ {CPU_WAITED_PCT} % of it"
        ),
        _ if data.busiest_thread_pct >= CPU_BUSY_PCT => format!("ran ≥ {CPU_BUSY_PCT} % of a core"),
        _ => format!("ran or waited to run ≥ {CPU_BUSY_PCT} % of the window"),
    };
    Some(Limit { kind, rule: format!("a data thread of the {end} {why}"), evidence, unavailable: Vec::new() })
}

/// A flow between two ends on loopback crossed no link: its ends' CPUs
/// (the kernel copying every byte out and in) are all that hold it.
fn loopback(src: Option<&RankResult>, dst: Option<&RankResult>) -> Option<Limit> {
    let on_lo =
        |r: Option<&RankResult>| r.is_some_and(|r| !r.netdevs.is_empty() && r.netdevs.iter().all(|n| n.iface == "lo"));
    if !(on_lo(src) && on_lo(dst)) {
        return None;
    }
    let data = |r: Option<&RankResult>| r.and_then(|r| r.cpu.data).unwrap_or_default();
    let demand = |t: ThreadsCpu| t.wanting_thread.map_or(t.busiest_thread_pct, |w| w.demand_pct);
    let (s, d) = (data(src), data(dst));
    let kind = if demand(d) > demand(s) { LimitKind::ReceiverCpu } else { LimitKind::SenderCpu };
    Some(Limit {
        kind,
        rule: "loopback: the flow crossed no link, so the CPUs of its ends (the kernel's copies) hold it; \
               the busier end is named"
            .into(),
        evidence: vec![
            pct("sender busiest data thread ran".into(), s.busiest_thread_pct, "% of a core"),
            pct("receiver busiest data thread ran".into(), d.busiest_thread_pct, "% of a core"),
        ],
        unavailable: Vec::new(),
    })
}

fn unexplained(flow: &FlowResult, line: Option<&EndRate>) -> Limit {
    let (rule, evidence) = match line {
        Some(l) => (
            format!("no rule held; line rate {}", l.source),
            vec![gbps("flow", flow.gbps), pct("share of line rate".into(), flow.gbps / l.gbps * 100.0, "%")],
        ),
        None => {
            ("no rule held, and no line rate is known (loopback, or no probe)".into(), vec![gbps("flow", flow.gbps)])
        }
    };
    Limit { kind: LimitKind::Unexplained, rule, evidence, unavailable: Vec::new() }
}

#[cfg(test)]
mod tests;
