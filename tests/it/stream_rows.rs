//! Per-stream rows on local ranks (127.0.0.x): a TCP flow of several
//! streams reports each stream's bytes in run.json (`flows[].lanes`) and
//! prints iperf's line per stream and `[SUM]`, in the summary and in `pair`.
//! (Per-rail rows of a multi-rail RDMA flow run in the Soft-RoCE VM:
//! tests/it/rdma_run.rs.)

use crate::common;

use std::time::Duration;

use common::{perftest_rows, text, Bench};

const FOUR_STREAMS: &str = "[run]\nname = \"streams\"\nduration = \"1s\"\nwarmup = \"200ms\"\ninterval = \"250ms\"\n\n\
    [[group]]\nname = \"pair\"\npattern = \"explicit\"\nflows = [[1, 0]]\nstreams = 4\n";

#[test]
fn four_tcp_streams_sum_to_their_flow_exactly() {
    let _machine = common::busy_machine();
    let bench = Bench::new();
    let scenario = bench.write("streams.toml", FOUR_STREAMS);
    let hosts = bench.write("hosts", "127.0.0.1\n127.0.0.2\n");
    let args = ["run", scenario.to_str().unwrap(), "-H", hosts.to_str().unwrap(), "--export-json", "-", "--no-save"];
    let out = bench.run(&args);
    let (stdout, summary) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{summary}");
    assert!(bench.leftovers(Duration::from_secs(2)).is_empty(), "processes left");
    let run: serde_json::Value = serde_json::from_str(&stdout).expect("stdout is one JSON document");
    let phase = &run["phases"][0];
    let flow = &phase["flows"][0];
    let lanes = flow["lanes"].as_array().expect("a 4-stream flow has lanes");
    assert_eq!(lanes.iter().map(|l| l["lane"].as_u64().unwrap()).collect::<Vec<_>>(), [0, 1, 2, 3]);
    let bytes: Vec<u64> = lanes.iter().map(|l| l["bytes"].as_u64().unwrap()).collect();
    assert!(bytes.iter().all(|&b| b > 0), "every stream moved data: {bytes:?}");
    // Read together with the flow's counter at the same boundaries: the same bytes, to the byte.
    assert_eq!(bytes.iter().sum::<u64>(), flow["bytes"].as_u64().unwrap(), "{flow}");
    assert_eq!(flow["rx_bytes"], flow["bytes"], "counted where the receiver is");
    let window = phase["window_s"].as_f64().unwrap();
    for (lane, b) in lanes.iter().zip(&bytes) {
        let gbps = lane["gbps"].as_f64().unwrap();
        assert!((gbps - *b as f64 * 8.0 / window / 1e9).abs() <= 1e-9 * gbps, "{lane}");
        assert!(lane.get("device").is_none(), "a TCP stream has no device: {lane}");
    }
    let sum: f64 = lanes.iter().map(|l| l["gbps"].as_f64().unwrap()).sum();
    let flow_gbps = flow["gbps"].as_f64().unwrap();
    assert!((sum - flow_gbps).abs() <= 1e-9 * flow_gbps, "{sum} vs {flow_gbps}");

    // The summary: a row per stream, then the [SUM], which is the flow's bytes.
    assert!(summary.contains("Streams and rails (in the window; [SUM] is the flow)"), "{summary}");
    for id in ["[  0]", "[  1]", "[  2]", "[  3]"] {
        assert!(summary.contains(id), "{id} missing:\n{summary}");
    }
    let sum_row = summary.lines().find(|l| l.contains("[SUM] ┆")).expect("a [SUM] row");
    assert!(sum_row.contains(&format!(" {} ", flow["bytes"])), "{sum_row}");
}

#[test]
fn pair_over_tcp_prints_a_line_per_stream_and_the_sum() {
    let _machine = common::busy_machine();
    let bench = Bench::new();
    let out = bench.run(&[
        "pair",
        "localhost",
        "localhost",
        "send",
        "--transport",
        "tcp",
        "-q",
        "4",
        "-s",
        "64K",
        "-D",
        "0.5",
        "--report-gbits",
        "--no-progress",
    ]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(bench.leftovers(Duration::from_secs(2)).is_empty(), "processes left");
    let rows =
        perftest_rows(&stdout, " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]");
    assert_eq!(rows.len(), 1, "{stdout}");
    assert!(stdout.contains(" 65536 B, 127.0.0.1 -> 127.0.0.2, 4 lanes:\n"), "{stdout}");
    // iperf's shape: `[  k]  0.00-W sec  N GBytes  R Gbits/sec`.
    let rate = |id: &str| -> f64 {
        let line = stdout.lines().find(|l| l.trim_start().starts_with(id)).unwrap_or_else(|| panic!("{id}:\n{stdout}"));
        let words: Vec<&str> = line.trim_start()[id.len()..].split_whitespace().collect();
        assert_eq!(words[1], "sec", "{line}");
        assert_eq!(words.last(), Some(&"Gbits/sec"), "{line}");
        words[words.len() - 2].parse().unwrap()
    };
    let streams: f64 = ["[  0]", "[  1]", "[  2]", "[  3]"].iter().map(|id| rate(id)).sum();
    let total = rate("[SUM]");
    // Each printed with 3 or more significant digits: the sum agrees within their rounding.
    assert!((streams - total).abs() <= 0.01 * total, "streams {streams} vs [SUM] {total}");
    assert!((total - rows[0][3]).abs() <= 0.01 * total, "[SUM] {total} vs the table's average {}", rows[0][3]);
}
