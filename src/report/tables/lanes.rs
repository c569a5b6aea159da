//! A flow's streams (TCP) and rails (RDMA) as iperf shows parallel
//! streams: a line per stream, then `[SUM]`, the flow itself. The summary
//! gets them as a table, `pair` as iperf's text lines.

use crate::report::tables::table::{shown, slower_flow, Shown, Table, ROWS_SHOWN};
use crate::result::{FlowResult, PhaseResult};
use crate::units::number;

/// Binary byte units, as iperf scales its transfer column.
const BYTE_UNITS: [&str; 5] = ["Bytes", "KBytes", "MBytes", "GBytes", "TBytes"];

/// Every flow of several lanes: one row per lane, then its `[SUM]`; past
/// `ROWS_SHOWN` rows, the slowest or failed flows whose rows fit.
pub fn table(p: &PhaseResult) -> Table {
    let laned = || p.flows.iter().filter(|f| !f.lanes.is_empty());
    let rows_per_flow = laned().map(|f| f.lanes.len() + 1).max().unwrap_or(1);
    let Shown { title, items: shown } = shown(
        "Streams and rails (in the window; [SUM] is the flow)",
        laned(),
        (ROWS_SHOWN / rows_per_flow).max(1),
        slower_flow,
        "slowest or failed flows (every flow is in flows.csv)",
    );
    let mut t = Table::new(title, &["flow", "src → dst", "stream", "device", "bytes", "transfer", "Gb/s"]);
    for f in shown {
        let route = format!("{} ({}) → {} ({})", f.src, f.src_host, f.dst, f.dst_host);
        for (id, device, bytes, gbps) in rows(f) {
            t.rows.push(vec![
                f.id.to_string(),
                route.clone(),
                id,
                device.unwrap_or("-").to_string(),
                bytes.to_string(),
                transfer(bytes),
                number(gbps, 3),
            ]);
        }
    }
    t
}

/// iperf's lines for every flow of several lanes, e.g.
/// `[  0]  0.00-10.00 sec  1.15 GBytes  0.988 Gbits/sec`, each flow's
/// block headed by `heading(flow)`.
pub fn iperf_lines(p: &PhaseResult, heading: impl Fn(&FlowResult) -> String) -> Vec<String> {
    let mut lines = Vec::new();
    for f in p.flows.iter().filter(|f| !f.lanes.is_empty()) {
        lines.push(heading(f));
        for (id, device, bytes, gbps) in rows(f) {
            let device = device.map(|d| format!("  {d}")).unwrap_or_default();
            lines.push(format!(
                "{id}  0.00-{:.2} sec  {}  {} Gbits/sec{device}",
                p.window_s,
                transfer(bytes),
                number(gbps, 3)
            ));
        }
    }
    lines
}

/// The lanes' rows then the flow's: (iperf's id column, device, bytes, Gb/s).
fn rows(f: &FlowResult) -> impl Iterator<Item = (String, Option<&str>, u64, f64)> + '_ {
    let lanes = f.lanes.iter().map(|l| (format!("[{:>3}]", l.lane), l.device.as_deref(), l.bytes, l.gbps));
    lanes.chain(std::iter::once(("[SUM]".to_string(), None, f.bytes, f.gbps)))
}

/// Bytes in iperf's binary units, 3 significant digits: `45.0 GBytes`.
fn transfer(bytes: u64) -> String {
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < BYTE_UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{} {}", number(value, 0), BYTE_UNITS[unit])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::FlowId;
    use crate::result::LaneResult;

    #[test]
    fn transfer_scales_like_iperf() {
        assert_eq!(transfer(0), "0 Bytes");
        assert_eq!(transfer(1000), "1000 Bytes");
        assert_eq!(transfer(45 << 30), "45.0 GBytes");
        assert_eq!(transfer(244 << 30), "244 GBytes");
        assert_eq!(transfer(1536), "1.50 KBytes");
    }

    fn lane(lane: usize, bytes: u64) -> LaneResult {
        LaneResult { lane, device: None, bytes, gbps: bytes as f64 * 8.0 / 10.0 / 1e9 }
    }

    /// A flow of two streams, 1 and 2 MB in a 10 s window.
    fn flow(id: FlowId) -> FlowResult {
        let json = r#"{"id": 3, "group": "g", "mode": "bandwidth", "src": 1, "dst": 0, "src_host": "b",
            "dst_host": "a", "streams": 2, "message_size": 65536, "tx_bytes": null, "rx_bytes": 3000000,
            "bytes": 3000000, "gbps": 0.0024, "msgs_per_s": 4.5, "interval_gbps": []}"#;
        let mut flow: FlowResult = serde_json::from_str(json).unwrap();
        flow.id = id;
        flow.lanes = vec![lane(0, 1_000_000), lane(1, 2_000_000)];
        flow
    }

    fn phase(flows: Vec<FlowResult>) -> PhaseResult {
        PhaseResult { window_s: 10.0, ..crate::result::testing::phase(flows, Vec::new()) }
    }

    #[test]
    fn a_line_per_stream_then_the_sum() {
        let phase = phase(vec![flow(3)]);
        let lines = iperf_lines(&phase, |f| format!("flow {}:", f.id));
        assert_eq!(
            lines,
            [
                "flow 3:",
                "[  0]  0.00-10.00 sec  977 KBytes  0.000800 Gbits/sec",
                "[  1]  0.00-10.00 sec  1.91 MBytes  0.00160 Gbits/sec",
                "[SUM]  0.00-10.00 sec  2.86 MBytes  0.00240 Gbits/sec",
            ]
        );
        let t = table(&phase);
        assert_eq!(t.title, "Streams and rails (in the window; [SUM] is the flow)");
        assert_eq!(t.rows.len(), 3);
        assert_eq!(t.rows[2][2..], ["[SUM]", "-", "3000000", "2.86 MBytes", "0.00240"]);
    }

    #[test]
    fn a_wide_phase_shows_the_streams_of_its_slowest_flows() {
        let mut flows: Vec<FlowResult> =
            (0..200).map(|k| FlowResult { gbps: 1.0 + k as f64, ..flow(k as FlowId) }).collect();
        flows[150].error = Some("connection reset".into());
        let t = table(&phase(flows));
        assert_eq!(
            t.title,
            "Streams and rails (in the window; [SUM] is the flow): the 85 slowest or failed flows (every flow is in flows.csv) of 200, worst first"
        );
        assert_eq!(t.rows.len(), 85 * 3, "every shown flow keeps all its rows");
        let sums: Vec<&str> = t.rows.iter().filter(|r| r[2] == "[SUM]").take(3).map(|r| r[0].as_str()).collect();
        assert_eq!(sums, ["150", "0", "1"], "the failed flow, then the slowest");
    }
}
