//! The NIC's own view of a phase: per rank and RDMA port, the sysfs counter
//! deltas that matter at a glance (data, packets, xmit_wait) and every
//! moved counter that means trouble (errors, retries, congestion). The
//! full set stays in run.json (`ranks[].rdma_counters`).

use std::collections::BTreeMap;

use crate::report::tables::table::{shown, Shown, Table, ROWS_SHOWN};
use crate::result::{PhaseResult, RankResult};
use crate::transport::rdma::counters::bytes_per_unit;
use crate::transport::rdma::CounterDelta;

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

/// The counter that says a port waited to send (credits, pause): the
/// congestion signal, shown in its own column.
const XMIT_WAIT: &str = "counters/port_xmit_wait";

/// Every rank's RDMA ports; past `ROWS_SHOWN`, the ports in most trouble.
pub fn table(p: &PhaseResult) -> Table {
    // Each port's worry once, not in every comparison of the selection.
    let ports: Vec<((u64, u64), &RankResult, &CounterDelta)> =
        p.ranks.iter().flat_map(|r| r.rdma_counters.iter().map(move |d| (worry(d), r, d))).collect();
    let Shown { title, items: shown } = shown(
        "RDMA port counters over the window (NIC view)",
        ports.iter(),
        ROWS_SHOWN,
        |a, b| b.0.cmp(&a.0),
        "ports most in trouble (every port is in run.json)",
    );
    let mut t = Table::new(
        title,
        &["rank", "host", "port", "tx MB", "rx MB", "tx pkts", "rx pkts", "xmit_wait", "errors / retries / congestion"],
    );
    for &(_, r, d) in shown {
        let c = &d.counters;
        let mb = |name: &str| {
            let per = bytes_per_unit(name).unwrap_or(1);
            moved(c, &[name], |v| format!("{:.1}", (v * per) as f64 / 1e6))
        };
        let count = |names: &[&str]| moved(c, names, |v| v.to_string());
        let trouble: Vec<String> =
            trouble(c).map(|(k, v)| format!("{}={v}", k.rsplit('/').next().unwrap_or(k))).collect();
        t.rows.push(vec![
            r.rank.to_string(),
            r.host.clone(),
            format!("{}:{}", d.device, d.port),
            mb("counters/port_xmit_data"),
            mb("counters/port_rcv_data"),
            count(&["counters/port_xmit_packets", "hw_counters/sent_pkts"]),
            count(&["counters/port_rcv_packets", "hw_counters/rcvd_pkts"]),
            count(&[XMIT_WAIT]),
            if trouble.is_empty() { "none".into() } else { trouble.join(", ") },
        ]);
    }
    t
}

/// How much a port is in trouble: its trouble counters' sum, then its
/// xmit_wait.
fn worry(d: &CounterDelta) -> (u64, u64) {
    let sum = trouble(&d.counters).fold(0u64, |sum, (_, v)| sum.saturating_add(*v));
    (sum, d.counters.get(XMIT_WAIT).copied().unwrap_or(0))
}

/// The moved counters that mean trouble (xmit_wait has its own column).
fn trouble(counters: &BTreeMap<String, u64>) -> impl Iterator<Item = (&String, &u64)> {
    counters.iter().filter(|(k, _)| *k != XMIT_WAIT && TROUBLE.iter().any(|part| k.contains(part)))
}

/// The first of `names` that moved, formatted; "0" when none did (only
/// moved counters are kept).
fn moved(counters: &BTreeMap<String, u64>, names: &[&str], fmt: impl Fn(u64) -> String) -> String {
    names.iter().find_map(|n| counters.get(*n)).map_or_else(|| "0".into(), |&v| fmt(v))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result::testing;

    fn rank(rank: usize, counters: &[(&str, u64)]) -> RankResult {
        let counters = counters.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        RankResult {
            rdma_counters: vec![CounterDelta { device: "rxe0".into(), port: 1, counters, signals: None }],
            ..testing::rank(rank, &format!("h{rank}"))
        }
    }

    fn phase(ranks: Vec<RankResult>) -> PhaseResult {
        testing::phase(Vec::new(), ranks)
    }

    #[test]
    fn data_words_become_bytes_and_trouble_is_named() {
        let counters = [
            ("counters/port_xmit_data", 250_000),
            ("counters/port_xmit_wait", 9),
            ("hw_counters/sent_pkts", 12),
            ("hw_counters/duplicate_request", 3),
            ("hw_counters/np_cnp_sent", 4),
            ("hw_counters/rdma_sends", 5),
        ];
        let t = table(&phase(vec![rank(1, &counters)]));
        assert_eq!(t.title, "RDMA port counters over the window (NIC view)");
        assert_eq!(t.rows[0][2..], ["rxe0:1", "1.0", "0", "12", "0", "9", "duplicate_request=3, np_cnp_sent=4"]);
    }

    #[test]
    fn a_wide_phase_shows_the_ports_in_trouble_first() {
        let mut ranks: Vec<RankResult> = (0..300).map(|k| rank(k, &[("counters/port_xmit_wait", k as u64)])).collect();
        ranks[7] = rank(7, &[("hw_counters/rnr_nak_retry_err", 2), ("hw_counters/out_of_sequence", 5)]);
        ranks[5] = rank(5, &[("hw_counters/duplicate_request", 1)]);
        let t = table(&phase(ranks));
        assert_eq!(
            t.title,
            "RDMA port counters over the window (NIC view): the 256 ports most in trouble (every port is in run.json) of 300, worst first"
        );
        assert_eq!(t.rows.len(), ROWS_SHOWN);
        let first: Vec<&str> = t.rows.iter().take(4).map(|r| r[0].as_str()).collect();
        assert_eq!(first, ["7", "5", "299", "298"], "errors first, then the longest xmit_wait");
    }
}
