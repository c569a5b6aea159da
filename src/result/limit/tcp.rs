//! The rules that read TCP's own view of a flow (`flows[].tcp`, its
//! sending streams' `TCP_INFO` over the window): a queue on the path that
//! only the congestion window held it behind, segments it had to send
//! again, a receiver whose advertised window kept it waiting.

use super::{Evidence, Limit, LimitKind};
use crate::result::{FlowResult, PhaseResult};
use crate::transport::tcp::info::TcpView;

/// A sender with data waiting ≥ 90 % of the window that neither the
/// receiver's window nor its own send buffer held was held by the network
/// (its congestion window)…
pub const TCP_CWND_LIMITED_PCT: f64 = 90.0;
/// …and a round trip at least twice its lowest says a queue on the path
/// was at least as long as the path itself.
pub const TCP_QUEUED_RTT: f64 = 2.0;
/// Retransmitting ≥ 0.1 % of its data segments without such a queue is
/// loss: a clean path retransmits next to nothing (a veth pair here: under
/// 0.01 %), and CUBIC's rate falls as 1/√(loss).
pub const TCP_LOSS_PCT: f64 = 0.1;
/// The receiver's advertised window held the sender half the window.
pub const TCP_RWND_LIMITED_PCT: f64 = 50.0;

fn said(what: &str, value: f64, unit: &str) -> Evidence {
    Evidence { what: what.into(), value, unit: unit.into() }
}

/// The round trips and retransmits every TCP verdict shows.
fn path(tcp: &TcpView) -> Vec<Evidence> {
    let mut shown = vec![said("round trip", tcp.srtt_us, "µs")];
    shown.extend(tcp.min_rtt_us.map(|m| said("lowest round trip", m, "µs")));
    shown.push(said("retransmitted", tcp.retrans_segs as f64, "segments"));
    shown.extend(tcp.retrans_pct.map(|p| said("retransmitted", p, "% of data segments")));
    shown
}

/// Time its streams had data waiting that only the congestion window held,
/// % of the window.
fn cwnd_limited(tcp: &TcpView) -> Option<f64> {
    Some(tcp.busy_pct? - tcp.rwnd_limited_pct? - tcp.sndbuf_limited_pct?)
}

fn queued(tcp: &TcpView) -> bool {
    tcp.min_rtt_us.is_some_and(|m| m > 0.0 && tcp.srtt_us >= TCP_QUEUED_RTT * m)
}

/// Congestion: the network held the sender behind a queue (or marked it).
pub(super) fn congestion(phase: &PhaseResult, flow: &FlowResult) -> Option<Limit> {
    let tcp = flow.tcp.as_ref()?;
    let marked = tcp.ce_marked.filter(|&n| n > 0);
    let held = cwnd_limited(tcp).filter(|&pct| pct >= TCP_CWND_LIMITED_PCT && queued(tcp));
    let rule = match (marked, held) {
        (Some(_), _) => "its TCP streams had segments acknowledged with an ECN congestion mark".to_string(),
        (None, Some(_)) => format!(
            "its TCP sender had data waiting that only its congestion window held ≥ {TCP_CWND_LIMITED_PCT:.0} % \
             of the window, behind a round trip ≥ {TCP_QUEUED_RTT}× its lowest (a queue on the path)"
        ),
        (None, None) => return None,
    };
    let mut evidence = Vec::new();
    evidence.extend(marked.map(|n| said("ECN-marked", n as f64, "segments")));
    evidence.extend(cwnd_limited(tcp).map(|p| said("waited on its congestion window", p, "% of the window")));
    evidence.extend(path(tcp));
    evidence.extend(share(phase, flow));
    Some(Limit { kind: LimitKind::Congestion, rule, evidence, unavailable: Vec::new() })
}

/// This flow's share of what its receiver got, where it has several senders.
fn share(phase: &PhaseResult, flow: &FlowResult) -> Option<Evidence> {
    let receiver = phase.receivers.iter().find(|r| r.rank == flow.dst && r.senders > 1)?;
    let pct = flow.gbps / receiver.aggregate_gbps.max(f64::MIN_POSITIVE) * 100.0;
    Some(said(&format!("share of rank {}'s {} senders", receiver.rank, receiver.senders), pct, "%"))
}

/// Loss: segments sent again, with no queue to have dropped them.
pub(super) fn loss(flow: &FlowResult) -> Option<Limit> {
    let tcp = flow.tcp.as_ref()?;
    (tcp.retrans_pct? >= TCP_LOSS_PCT).then(|| Limit {
        kind: LimitKind::Loss,
        rule: format!(
            "its TCP sender retransmitted ≥ {TCP_LOSS_PCT} % of its data segments, with no queue on the path"
        ),
        evidence: path(tcp),
        unavailable: Vec::new(),
    })
}

/// The receiver's advertised window kept the sender waiting: its reads did
/// not keep up, or its buffer is smaller than the path's bandwidth × delay.
pub(super) fn receiver_window(flow: &FlowResult) -> Option<Limit> {
    let tcp = flow.tcp.as_ref()?;
    let pct = tcp.rwnd_limited_pct?;
    (pct >= TCP_RWND_LIMITED_PCT).then(|| Limit {
        kind: LimitKind::ReceiverWindow,
        rule: format!(
            "the receiver's advertised TCP window held its sender ≥ {TCP_RWND_LIMITED_PCT:.0} % of the window"
        ),
        evidence: [said("held by the receiver's window", pct, "% of the window")]
            .into_iter()
            .chain(path(tcp))
            .collect(),
        unavailable: Vec::new(),
    })
}
