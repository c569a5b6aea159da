//! What the rules look for that a flow's hosts do not have: a NIC without
//! congestion counters (Soft-RoCE), a kernel older than a `TCP_INFO`
//! field. Said as unavailable beside the verdict, never read as 0.

use crate::result::{FlowResult, RankResult};
use crate::scenario::Transport;
use crate::transport::rdma::counters::{CONGESTION, LOSS};

/// The evidence `flow`'s ends lack, `sender` first.
pub(super) fn lacking(flow: &FlowResult, transport: Transport, ends: [Option<&RankResult>; 2]) -> Vec<String> {
    match transport {
        Transport::Rdma => {
            ["sender", "receiver"].into_iter().zip(ends).flat_map(|(end, rank)| counters(end, rank)).collect()
        }
        Transport::Tcp => tcp(flow),
    }
}

/// An RDMA end's ports that lack every loss or every congestion counter.
fn counters(end: &str, rank: Option<&RankResult>) -> Vec<String> {
    let Some(rank) = rank else { return Vec::new() };
    if rank.rdma_counters.is_empty() {
        return vec![format!("{end} RDMA port counters")];
    }
    let mut lacking = Vec::new();
    for port in &rank.rdma_counters {
        // Runs made before the port's signals were kept say nothing either way.
        let Some(has) = &port.signals else { continue };
        for (what, names) in [("loss", LOSS), ("congestion", CONGESTION)] {
            if !has.iter().any(|n| names.contains(&n.as_str())) {
                lacking.push(format!("{end} {}:{} {what} counters", port.device, port.port));
            }
        }
    }
    lacking
}

/// The sender's `TCP_INFO` fields its kernel does not fill.
fn tcp(flow: &FlowResult) -> Vec<String> {
    let Some(tcp) = &flow.tcp else { return vec!["sender TCP_INFO".into()] };
    let fields = [
        (tcp.busy_pct.is_none(), "sender TCP busy and limited times (Linux 4.10)"),
        (tcp.min_rtt_us.is_none(), "sender TCP lowest round trip (Linux 4.6)"),
        (tcp.ce_marked.is_none(), "sender TCP ECN marks (Linux 4.18)"),
    ];
    fields.into_iter().filter(|(missing, _)| *missing).map(|(_, what)| what.to_string()).collect()
}
