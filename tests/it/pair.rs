//! `fabricbench pair` through the real CLI on two local ranks over TCP
//! (RDMA pairs run in the Soft-RoCE VM: tests/it/rdma_run.rs).

use crate::common;

use std::time::Duration;

use common::{perftest_rows as rows, read_json, text, Bench};

#[test]
fn tcp_size_sweep_prints_perftest_rows_and_saves_the_run() {
    let _machine = common::busy_machine();
    let bench = Bench::new();
    let out = bench.run(&[
        "pair",
        "localhost",
        "localhost",
        "send",
        "--transport",
        "tcp",
        "-s",
        "1K,16K,64K",
        "-D",
        "0.3",
        "--report-gbits",
        "--no-progress",
    ]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(stdout.contains(" Hosts           : 127.0.0.1 -> 127.0.0.2\n"), "{stdout}");
    let rows = rows(&stdout, " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]");
    assert_eq!(rows.iter().map(|r| r[0]).collect::<Vec<_>>(), [1024.0, 16384.0, 65536.0], "{stdout}");
    for r in &rows {
        assert_eq!(r.len(), 5, "{r:?}");
        assert!(r[1] > 0.0 && r[3] > 0.0 && r[4] > 0.0, "iterations, average and rate: {r:?}");
        assert!(r[2] >= r[3] - 0.01, "peak {} below average {}", r[2], r[3]);
    }
    assert!(bench.leftovers(Duration::from_secs(2)).is_empty(), "processes left");

    // The same results folder as any run: one phase per size, and the row is its numbers.
    let dir = bench.result_dir();
    assert!(stderr.contains(&format!("results: results/{}", dir.file_name().unwrap().to_string_lossy())), "{stderr}");
    let run = read_json(&dir.join("run.json"));
    assert_eq!(run["status"]["state"], "ok");
    assert!(run["scenario_file"].as_str().unwrap().starts_with("fabricbench pair localhost localhost send"));
    let phases = run["phases"].as_array().unwrap();
    assert_eq!(phases.len(), 3);
    for (phase, row) in phases.iter().zip(&rows) {
        assert_eq!(phase["flows"][0]["message_size"].as_f64().unwrap(), row[0]);
        let average = phase["aggregate_gbps"].as_f64().unwrap();
        assert!((average - row[3]).abs() < 0.006, "{average} vs {}", row[3]);
    }
    assert!(dir.join("report.html").exists() && dir.join("flows.csv").exists());
}

#[test]
fn tcp_latency_row_and_perftest_flags_that_do_not_apply() {
    let _machine = common::busy_machine();
    let bench = Bench::new();
    let out =
        bench.run(&["pair", "localhost", "localhost", "send_lat", "--transport", "tcp", "-D", "0.3", "--no-save"]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    assert!(stdout.contains(" Latency         : half round trip (ping-pong)\n"), "{stdout}");
    let rows = rows(&stdout, " #bytes #iterations    t_min[usec]");
    assert_eq!(rows.len(), 1, "{stdout}");
    let r = &rows[0];
    assert_eq!((r.len(), r[0]), (9, 2.0), "perftest's 2-byte default: {r:?}");
    assert!(r[1] > 0.0 && r[2] > 0.0 && r[2] <= r[4] && r[4] <= r[3], "min <= typical <= max: {r:?}");
    assert!(!bench.results().exists(), "--no-save");

    // perftest habits that do not apply are named, exit 2, nothing runs.
    let out = bench.run(&["pair", "localhost", "localhost", "write", "-n", "5000"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("-n/--iters: fabricbench runs each size for a time window"),
        "{}",
        text(&out.stderr)
    );
    let out = bench.run(&["pair", "localhost", "localhost", "send", "--transport", "tcp", "-l", "16"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("-l/--post_list: is an RDMA knob"), "{}", text(&out.stderr));
}

/// Two hosts of the test bed over ssh (namespaces with real sshd): the
/// workers start there, and the table's hosts are the names given. The
/// run may come out degraded (exit 4, its table printed): bed tests run
/// beside the tests that load both cores with stress burners, and CI saw
/// a Start reach h2 at the end of this half-second window once.
#[test]
fn tcp_pair_across_two_ssh_hosts() {
    let Some(bed) = common::testbed::Bed::up(2, &[]) else { return };
    let bench = Bench::new();
    let ssh_config = bed.ssh_config.to_str().unwrap();
    let out = bench.run(&[
        "pair",
        "h1",
        "h2",
        "send",
        "--transport",
        "tcp",
        "-s",
        "64K",
        "-D",
        "0.5",
        "--report-gbits",
        "--ssh-config",
        ssh_config,
        "--no-save",
        "--no-progress",
    ]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    let degraded = out.status.code() == Some(4) && stderr.contains("error: degraded: ");
    assert!(out.status.success() || degraded, "{stdout}\n{stderr}");
    assert!(stdout.contains(" Hosts           : h1 -> h2\n"), "{stdout}");
    let rows = rows(&stdout, " #bytes     #iterations    BW peak[Gb/sec]");
    assert!(rows.len() == 1 && rows[0][0] == 65536.0 && rows[0][1] > 0.0 && rows[0][3] > 0.0, "{stdout}");
}
