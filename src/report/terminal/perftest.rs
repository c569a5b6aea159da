//! The table perftest prints (ib_write_bw, ib_write_lat, …), from a run's
//! result: the dashed header block with the test's settings, then one row
//! per message size, in perftest's columns, so scripts and eyes used to
//! perftest read it as they always have.

use std::fmt::Write;

use crate::histogram::LatencySummary;
use crate::plan::GroupPlan;
use crate::report::tables::{datagrams, lanes};
use crate::result::{Datagrams, PhaseResult, RankProbe, RunResult, RunStatus};
use crate::scenario::{Mode, Op};
use crate::transport::rdma::inventory::port_used;
use crate::units::number;

const LINE: &str = "---------------------------------------------------------------------------------------";
const BW_GBITS: &str = " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]";
const BW_MBYTES: &str = " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]";
const BW_COLUMNS: [&str; 5] = ["#bytes", "#iterations", "BW peak", "BW average", "MsgRate"];
const LAT: &str = " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec]";
const LAT_COLUMNS: [&str; 9] =
    ["#bytes", "#iterations", "t_min", "t_max", "t_typical", "t_avg", "t_stdev", "99%", "99.9%"];

/// The test's name and its settings, as perftest's header block shows them.
#[derive(Clone, Debug, PartialEq)]
pub struct Header {
    pub title: String,
    pub mode: Mode,
    pub lines: Vec<(&'static str, String)>,
}

/// One message size's numbers.
#[derive(Clone, Debug, PartialEq)]
pub enum Row {
    Bandwidth { bytes: u64, iterations: u64, peak_gbps: f64, average_gbps: f64, mpps: f64 },
    Latency { bytes: u64, latency: LatencySummary },
}

/// The whole table for a `pair` run; `gbits`: Gb/s, else MB/sec (MiB/s) like perftest.
pub fn render(run: &RunResult, gbits: bool) -> String {
    let Some(group) = run.plan.phases.first().and_then(|p| p.groups.first()) else {
        return String::from("no phase was planned\n");
    };
    let mut notes = Vec::new();
    let mut streams = Vec::new();
    let mut rows = Vec::new();
    for phase in &run.phases {
        let bytes =
            run.plan.phases.get(phase.index).and_then(|p| p.groups.first()).map_or(0, |g| g.message_size.bytes());
        match row(phase, bytes, group.mode) {
            Some(r) => rows.push(r),
            None => notes.push(format!("{bytes} B: no latency was measured")),
        }
        // Several streams (or rails): iperf's lines per stream and [SUM].
        streams.extend(lanes::iperf_lines(phase, |f| {
            format!("{bytes} B, {} -> {}, {} lanes:", f.src_host, f.dst_host, f.lanes.len())
        }));
        notes.extend(phase.flows.iter().filter_map(|f| f.error.as_ref()).map(|e| format!("{bytes} B: {e}")));
        notes.extend(
            phase.flows.iter().filter_map(|f| Some(datagram_note(bytes, &f.src_host, &f.dst_host, &f.datagrams?))),
        );
        if !phase.complete {
            notes.push(format!("{bytes} B: the phase was cut short; its numbers cover what ran"));
        }
    }
    if let RunStatus::Failed { error } = &run.status {
        notes.push(format!("run FAILED: {error}"));
    }
    let window = &run.scenario.run;
    let hosts: Vec<&str> = run.plan.ranks.iter().map(|r| r.host.as_str()).collect();
    let both_ways = run.plan.phases[0].flows.iter().any(|f| f.src == 1 && f.dst == 0);
    let mut h = header(group, &hosts, both_ways, run.probes.iter().find(|p| p.rank == 0));
    h.lines.push((
        "Window",
        format!(
            "{} per size after {} warm-up; peak: best {} interval",
            humantime::format_duration(window.duration),
            humantime::format_duration(window.warmup),
            humantime::format_duration(window.interval)
        ),
    ));
    streams.extend(notes);
    table(&h, &rows, gbits, &streams)
}

/// A phase's row: bandwidth summed over its flows (both directions with
/// -b), latency from its flow's samples; `None` when no latency arrived.
fn row(phase: &PhaseResult, bytes: u64, mode: Mode) -> Option<Row> {
    match mode {
        Mode::Latency => {
            let latency = phase.flows.iter().find_map(|f| f.latency)?;
            Some(Row::Latency { bytes, latency })
        }
        Mode::Bandwidth => {
            let messages: f64 = phase.flows.iter().map(|f| f.msgs_per_s * phase.window_s).sum();
            let average_gbps = phase.aggregate_gbps;
            Some(Row::Bandwidth {
                bytes,
                iterations: messages.round() as u64,
                peak_gbps: phase.interval_gbps.iter().copied().fold(average_gbps, f64::max),
                average_gbps,
                mpps: phase.flows.iter().map(|f| f.msgs_per_s).sum::<f64>() / 1e6,
            })
        }
    }
}

/// perftest's header block for a group; `hosts` in rank order;
/// `both_ways`: traffic also runs from the second host to the first (-b);
/// `probe`: the first host's devices, for the port's link type and MTU.
pub fn header(g: &GroupPlan, hosts: &[&str], both_ways: bool, probe: Option<&RankProbe>) -> Header {
    let test = if g.mode == Mode::Latency { "Latency Test" } else { "BW Test" };
    let arrow = if both_ways { "<->" } else { "->" };
    let mut lines =
        vec![("Hosts", format!("{} {arrow} {}", hosts.first().unwrap_or(&"?"), hosts.get(1).unwrap_or(&"?")))];
    let title = match &g.rdma_request() {
        None => {
            lines.push(("Transport type", "TCP sockets".into()));
            lines.push(("Connections", g.streams.to_string()));
            format!("TCP {test}")
        }
        Some(r) => {
            let used = probe.and_then(|p| port_used(&p.devices, r.knobs.device.as_deref(), r.knobs.port));
            let device = match (&r.knobs.device, used) {
                (Some(asked), _) => asked.clone(),
                (None, Some((d, _))) => format!("{} (first with an ACTIVE port)", d.name),
                (None, None) => "first with an ACTIVE port".into(),
            };
            lines.push(("Device", device));
            if let Some(port) = r.knobs.port.or(used.map(|(_, p)| p.port)) {
                lines.push(("IB port", port.to_string()));
            }
            if let Some((_, port)) = used {
                lines.push(("Link type", port.link_layer.clone()));
                lines.push(("Mtu", format!("{}[B]", port.mtu)));
                if let Some(gbps) = port.rate_gbps {
                    lines.push(("Link rate", format!("{gbps} Gb/s")));
                }
            }
            lines.push(("Number of qps", r.knobs.qps.to_string()));
            lines.push(("Transport type", "IB verbs (InfiniBand or RoCE)".into()));
            lines.push(("Connection type", r.knobs.connection.name().into()));
            lines.push(("TX depth", r.knobs.tx_depth.to_string()));
            if r.op.needs_receives() {
                lines.push(("RX depth", r.knobs.rx_depth.to_string()));
            }
            if g.mode == Mode::Bandwidth {
                lines.push(("Post list", r.knobs.post_list.to_string()));
                lines.push(("CQ Moderation", r.knobs.cq_moderation.to_string()));
            }
            lines.push(("Max inline data", format!("{}[B]", r.effective_inline_size())));
            let gid = r
                .knobs
                .gid_index
                .map_or_else(|| "auto (RoCE v2 + IPv4 first, like perftest)".into(), |i| i.to_string());
            lines.push(("GID index", gid));
            let polling = match r.knobs.completion {
                crate::scenario::rdma::CompletionMode::Busy => "busy polling",
                crate::scenario::rdma::CompletionMode::Event => "completion events (-e)",
            };
            lines.push(("Completions", polling.into()));
            if r.knobs.threads > 1 {
                lines.push(("Threads", r.knobs.threads.to_string()));
            }
            format!("{} {test}", verb(g.op))
        }
    };
    if g.mode == Mode::Latency {
        let trip = match g.op {
            Op::Read => "round trip (one read at a time)",
            Op::FetchAdd | Op::CmpSwap => "round trip (one atomic at a time)",
            _ => "half round trip (ping-pong)",
        };
        lines.push(("Latency", trip.into()));
    }
    lines.push(("Data ex. method", "fabricbench coordinator (TCP)".into()));
    Header { title, mode: g.mode, lines }
}

/// UD's losses of one flow at one size, under the table.
fn datagram_note(bytes: u64, src: &str, dst: &str, d: &Datagrams) -> String {
    format!("{bytes} B, {src} -> {dst}: UD: {}", datagrams::describe(d))
}

/// perftest's names of the verbs.
fn verb(op: Op) -> &'static str {
    match op {
        Op::Write => "RDMA_Write",
        Op::WriteImm => "RDMA_Write with immediate",
        Op::Read => "RDMA_Read",
        Op::Send => "Send",
        Op::SendImm => "Send with immediate",
        Op::FetchAdd => "Atomic FETCH_AND_ADD",
        Op::CmpSwap => "Atomic CMP_AND_SWAP",
    }
}

/// Header block, column titles, rows, closing line, then any lines after
/// it (streams, notes).
pub fn table(h: &Header, rows: &[Row], gbits: bool, notes: &[String]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{LINE}");
    let _ = writeln!(out, "{}", format!("{:^width$}", h.title, width = LINE.len()).trim_end());
    for (key, value) in &h.lines {
        let _ = writeln!(out, " {key:<16}: {value}");
    }
    let _ = writeln!(out, "{LINE}");
    let (titles, columns): (&str, &[&str]) = match (h.mode, gbits) {
        (Mode::Latency, _) => (LAT, &LAT_COLUMNS),
        (Mode::Bandwidth, true) => (BW_GBITS, &BW_COLUMNS),
        (Mode::Bandwidth, false) => (BW_MBYTES, &BW_COLUMNS),
    };
    let _ = writeln!(out, "{titles}");
    let rate = |gbps: f64| if gbits { gbps } else { gbps * 1e9 / 8.0 / f64::from(1 << 20) };
    for r in rows {
        let values: Vec<String> = match r {
            Row::Bandwidth { bytes, iterations, peak_gbps, average_gbps, mpps } => vec![
                bytes.to_string(),
                iterations.to_string(),
                number(rate(*peak_gbps), 2),
                number(rate(*average_gbps), 2),
                number(*mpps, 6),
            ],
            Row::Latency { bytes, latency: l } => {
                let us = [l.min_us, l.max_us, l.typical_us, l.mean_us, l.stdev_us, l.p99_us, l.p999_us];
                [bytes.to_string(), l.samples.to_string()].into_iter().chain(us.iter().map(|&v| number(v, 2))).collect()
            }
        };
        let _ = writeln!(out, "{}", aligned(titles, columns, &values));
    }
    let _ = writeln!(out, "{LINE}");
    for note in notes {
        let _ = writeln!(out, " {note}");
    }
    out
}

/// Each value starts under its column's title (as perftest's printf
/// formats place them), at least one space after the value before it.
fn aligned(titles: &str, columns: &[&str], values: &[String]) -> String {
    let mut line = String::new();
    for (column, value) in columns.iter().zip(values) {
        let start = titles.find(column).unwrap_or(0);
        let pad = start.saturating_sub(line.len()).max(usize::from(!line.is_empty()));
        line.extend(std::iter::repeat_n(' ', pad));
        line.push_str(value);
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bw_header() -> Header {
        Header {
            title: "RDMA_Write BW Test".into(),
            mode: Mode::Bandwidth,
            lines: vec![("Number of qps", "4".into()), ("Connection type", "RC".into())],
        }
    }

    #[test]
    fn bandwidth_table_has_perftest_shape() {
        let rows = [
            Row::Bandwidth { bytes: 2, iterations: 123456, peak_gbps: 0.5, average_gbps: 0.25, mpps: 15.625 },
            Row::Bandwidth { bytes: 8388608, iterations: 1200, peak_gbps: 95.123, average_gbps: 94.5, mpps: 0.0014 },
        ];
        let text = table(&bw_header(), &rows, true, &[]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], LINE);
        assert_eq!(lines[1].trim(), "RDMA_Write BW Test");
        assert_eq!(lines[2], " Number of qps   : 4");
        assert_eq!(lines[3], " Connection type : RC");
        assert_eq!(lines[4], LINE);
        assert_eq!(lines[5], " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]");
        // Below 1 Gb/s two decimals would lose digits: three significant ones stay.
        assert_eq!(lines[6], " 2          123456         0.500              0.250                15.625000");
        assert_eq!(lines[7], " 8388608    1200           95.12              94.50                0.001400");
        assert_eq!(lines[8], LINE);
        assert_eq!(lines.len(), 9);
        // Every value starts under its title.
        for (i, title) in BW_COLUMNS.iter().enumerate().skip(1) {
            let at = BW_GBITS.find(title).unwrap();
            assert_ne!(lines[6].as_bytes()[at], b' ', "{title}");
            assert_eq!(lines[6].as_bytes()[at - 1], b' ', "{title} (column {i})");
        }
    }

    #[test]
    fn small_rates_keep_three_significant_digits() {
        // A 64 B post-list run where perftest prints 0.007095 Gb/s: never `0.01`.
        let rows =
            [Row::Bandwidth { bytes: 64, iterations: 1000, peak_gbps: 0.00712, average_gbps: 0.0071, mpps: 0.0139 }];
        let text = table(&bw_header(), &rows, true, &[]);
        let row = text.lines().nth(6).unwrap();
        assert_eq!(row.split_whitespace().collect::<Vec<_>>(), ["64", "1000", "0.00712", "0.00710", "0.013900"]);
    }

    #[test]
    fn mb_per_sec_is_mebibytes_like_perftest() {
        let rows = [Row::Bandwidth {
            bytes: 65536,
            iterations: 5000,
            peak_gbps: 8.388608,
            average_gbps: 8.388608,
            mpps: 0.016,
        }];
        let text = table(&bw_header(), &rows, false, &["65536 B: flow 0->1: boom".into()]);
        assert!(
            text.contains(" #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n"),
            "{text}"
        );
        // 8.388608 Gb/s = 1.048576e9 B/s = 1000 MiB/s.
        assert!(
            text.contains(" 65536      5000           1000.00            1000.00              0.016000\n"),
            "{text}"
        );
        assert!(text.ends_with(&format!("{LINE}\n 65536 B: flow 0->1: boom\n")), "{text}");
    }

    #[test]
    fn latency_table_has_perftest_columns() {
        let latency = LatencySummary {
            samples: 1000,
            min_us: 1.5,
            max_us: 20.25,
            typical_us: 1.75,
            mean_us: 1.8,
            stdev_us: 0.3,
            p99_us: 3.0,
            p999_us: 10.0,
        };
        let h = Header { title: "RDMA_Write Latency Test".into(), mode: Mode::Latency, lines: Vec::new() };
        let text = table(&h, &[Row::Latency { bytes: 2, latency }], true, &[]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[3], LAT);
        let row = lines[4];
        assert_eq!(
            row.split_whitespace().collect::<Vec<_>>(),
            ["2", "1000", "1.50", "20.25", "1.75", "1.80", "0.300", "3.00", "10.00"]
        );
        for title in LAT_COLUMNS {
            let at = LAT.find(title).unwrap();
            assert!(row.as_bytes()[at] != b' ' && row.as_bytes()[at - 1] == b' ', "{title}: {row}");
        }
    }

    #[test]
    fn ud_losses_are_noted_per_size() {
        let note = datagram_note(1024, "h1", "h2", &Datagrams::new(20_000, 19_000));
        assert_eq!(note, "1024 B, h1 -> h2: UD: 19000 of 20000 messages received, 1000 lost (5.00%)");
    }

    fn get_in<'a>(h: &'a Header, key: &str) -> Option<&'a str> {
        h.lines.iter().find(|(k, _)| *k == key).map(|(_, v)| v.as_str())
    }

    #[test]
    fn header_from_a_pair_group() {
        // What `pair h1 h2 send -q 4 -l 16 -x 3 -d mlx5_0 -b` asks for.
        let toml = r#"
            [[group]]
            name = "pair"
            pattern = "pairwise"
            flows = [[0, 1]]
            bidirectional = true
            transport = "rdma"
            op = "send"
            [group.rdma]
            qps = 4
            post_list = 16
            gid_index = 3
            device = "mlx5_0"
        "#;
        let (scenario, _) = crate::scenario::parse(toml, std::path::Path::new("pair.toml")).unwrap();
        let hosts = [crate::hostfile::Host::named("h1"), crate::hostfile::Host::named("h2")];
        let plan = crate::plan::build(&hosts, &scenario).unwrap();
        let probe: RankProbe = serde_json::from_str(
            r#"{"rank": 0, "host": "h1", "devices": [
                {"name": "mlx5_0", "numa_node": 0, "error": null, "ports": [
                    {"port": 1, "state": "DOWN", "link_layer": "InfiniBand", "rate_gbps": null, "mtu": 4096},
                    {"port": 2, "state": "ACTIVE", "link_layer": "Ethernet", "rate_gbps": 100.0, "mtu": 1024}]}]}"#,
        )
        .unwrap();
        let h = header(&plan.phases[0].groups[0], &["h1", "h2"], true, Some(&probe));
        assert_eq!(h.title, "Send BW Test");
        let get = |k: &str| get_in(&h, k);
        assert_eq!(get("Hosts"), Some("h1 <-> h2"));
        assert_eq!((get("Device"), get("Number of qps"), get("GID index")), (Some("mlx5_0"), Some("4"), Some("3")));
        assert_eq!((get("Post list"), get("RX depth"), get("Connection type")), (Some("16"), Some("512"), Some("RC")));
        // -d given, -i not: the device's first ACTIVE port, as flows pick it.
        assert_eq!((get("IB port"), get("Link type"), get("Mtu")), (Some("2"), Some("Ethernet"), Some("1024[B]")));
        assert_eq!(get("Link rate"), Some("100 Gb/s"));
        let h = header(&plan.phases[0].groups[0], &["h1", "h2"], true, None);
        assert_eq!((get_in(&h, "Device"), get_in(&h, "Mtu")), (Some("mlx5_0"), None), "no probe: only what was asked");
    }
}
