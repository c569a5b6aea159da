//! Results for unit tests to start from.

use crate::result::{FlowResult, GroupResult, PhaseResult, RankResult};
use crate::scenario::{Mode, Op, Pattern, Transport};

/// A rank that reported and measured nothing; a test sets what it needs
/// (`RankResult { cpu, ..rank(3, "h4") }`).
pub(crate) fn rank(rank: usize, host: &str) -> RankResult {
    RankResult {
        rank,
        host: host.into(),
        slot: 0,
        devices: Vec::new(),
        data_addr: None,
        reported: true,
        tx_gbps: 0.0,
        rx_gbps: 0.0,
        cpu: Default::default(),
        netdevs: Vec::new(),
        rdma_counters: Vec::new(),
        stress: None,
        placements: Vec::new(),
        clock_offset_us: 0.0,
        rtt_us: 0.0,
        error: None,
        link_events: Vec::new(),
        link_events_dropped: 0,
    }
}

/// A bandwidth flow of group `in` from rank `src` (on host h`src+1`) to
/// `dst`, at `gbps`, with no intervals.
pub(crate) fn flow(id: u32, src: usize, dst: usize, gbps: f64) -> FlowResult {
    let json = serde_json::json!({"id": id, "group": "in", "mode": "bandwidth", "src": src, "dst": dst,
        "src_host": format!("h{}", src + 1), "dst_host": format!("h{}", dst + 1), "streams": 1,
        "message_size": 65536, "tx_bytes": null, "rx_bytes": null, "bytes": 1, "gbps": gbps,
        "msgs_per_s": 1.0, "interval_gbps": []});
    serde_json::from_value(json).expect("a complete flow")
}

/// A complete phase of one second with these flows and ranks, its aggregate
/// their sum; groups and receivers empty.
pub(crate) fn phase(flows: Vec<FlowResult>, ranks: Vec<RankResult>) -> PhaseResult {
    PhaseResult {
        index: 0,
        name: "p".into(),
        complete: true,
        window_s: 1.0,
        start_skew_us: 0.0,
        degraded: Vec::new(),
        aggregate_gbps: flows.iter().map(|f| f.gbps).sum(),
        interval_gbps: Vec::new(),
        groups: Vec::new(),
        flows,
        receivers: Vec::new(),
        ranks,
        limit: None,
    }
}

/// A bandwidth group of these flows, its aggregate their sum.
pub(crate) fn group(name: &str, pattern: Pattern, transport: Transport, op: Op, flows: &[FlowResult]) -> GroupResult {
    GroupResult {
        name: name.into(),
        mode: Mode::Bandwidth,
        pattern,
        transport,
        op,
        flows: flows.len(),
        aggregate_gbps: flows.iter().map(|f| f.gbps).sum(),
        min_flow_gbps: 0.0,
        max_flow_gbps: 0.0,
        jain: 1.0,
        latency: None,
        offered: None,
        limit: None,
    }
}
