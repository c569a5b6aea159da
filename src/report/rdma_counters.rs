//! The NIC's own view of a phase: per rank and RDMA port, the sysfs counter
//! deltas that matter at a glance (data, packets, xmit_wait) and every
//! moved counter that means trouble (errors, retries, congestion). The
//! full set stays in run.json (`ranks[].rdma_counters`).

use std::collections::BTreeMap;

use crate::report::table::Table;
use crate::result::PhaseResult;
use crate::transport::rdma::counters::bytes_per_unit;

/// Name parts of counters that mean retransmission, loss, errors or
/// congestion signals (CNP/ECN), on mlx5, rxe and others.
const TROUBLE: &[&str] = &[
    "err",
    "retr",
    "retry",
    "dup",
    "seq",
    "out_of",
    "nak",
    "rnr",
    "timeout",
    "discard",
    "drop",
    "cnp",
    "ecn",
    "link_down",
    "symbol",
];

pub fn table(p: &PhaseResult) -> Table {
    let mut t = Table::new(
        "RDMA port counters over the window (NIC view)".into(),
        &["rank", "host", "port", "tx MB", "rx MB", "tx pkts", "rx pkts", "xmit_wait", "errors / retries / congestion"],
    );
    for r in &p.ranks {
        for d in &r.rdma_counters {
            let c = &d.counters;
            let mb = |name: &str| {
                let per = bytes_per_unit(name).unwrap_or(1);
                shown(c, &[name], |v| format!("{:.1}", (v * per) as f64 / 1e6))
            };
            let count = |names: &[&str]| shown(c, names, |v| v.to_string());
            let trouble: Vec<String> = c
                .iter()
                .filter(|(k, _)| *k != "counters/port_xmit_wait" && TROUBLE.iter().any(|part| k.contains(part)))
                .map(|(k, v)| format!("{}={v}", k.rsplit('/').next().unwrap_or(k)))
                .collect();
            t.rows.push(vec![
                r.rank.to_string(),
                r.host.clone(),
                format!("{}:{}", d.device, d.port),
                mb("counters/port_xmit_data"),
                mb("counters/port_rcv_data"),
                count(&["counters/port_xmit_packets", "hw_counters/sent_pkts"]),
                count(&["counters/port_rcv_packets", "hw_counters/rcvd_pkts"]),
                count(&["counters/port_xmit_wait"]),
                if trouble.is_empty() { "none".into() } else { trouble.join(", ") },
            ]);
        }
    }
    t
}

/// The first of `names` that moved, formatted; "0" when none did (only
/// moved counters are kept).
fn shown(counters: &BTreeMap<String, u64>, names: &[&str], fmt: impl Fn(u64) -> String) -> String {
    names.iter().find_map(|n| counters.get(*n)).map_or_else(|| "0".into(), |&v| fmt(v))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::cpu::CpuUsage;
    use crate::result::RankResult;
    use crate::transport::rdma::CounterDelta;

    #[test]
    fn data_words_become_bytes_and_trouble_is_named() {
        let counters = [
            ("counters/port_xmit_data", 250_000),
            ("counters/port_xmit_wait", 9),
            ("hw_counters/sent_pkts", 12),
            ("hw_counters/duplicate_request", 3),
            ("hw_counters/np_cnp_sent", 4),
            ("hw_counters/rdma_sends", 5),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        let rank = RankResult {
            rank: 1,
            host: "h2".into(),
            slot: 0,
            devices: Vec::new(),
            reported: true,
            tx_gbps: 0.0,
            rx_gbps: 0.0,
            cpu: CpuUsage::default(),
            netdevs: Vec::new(),
            rdma_counters: vec![CounterDelta { device: "rxe0".into(), port: 1, counters }],
            stress: None,
            placements: Vec::new(),
            clock_offset_us: 0.0,
            rtt_us: 0.0,
            error: None,
            link_events: Vec::new(),
            link_events_dropped: 0,
        };
        let phase = PhaseResult {
            index: 0,
            name: "p".into(),
            complete: true,
            window_s: 1.0,
            start_skew_us: 0.0,
            degraded: Vec::new(),
            aggregate_gbps: 0.0,
            interval_gbps: Vec::new(),
            groups: Vec::new(),
            flows: Vec::new(),
            receivers: Vec::new(),
            ranks: vec![rank],
        };
        let row = &table(&phase).rows[0];
        assert_eq!(row[2..], ["rxe0:1", "1.0", "0", "12", "0", "9", "duplicate_request=3, np_cnp_sent=4"]);
    }
}
