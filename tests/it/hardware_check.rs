//! scripts/hardware-check: its shortened run on Soft-RoCE (the VM; skipped
//! elsewhere unless FABRICBENCH_REQUIRE_RDMA=1) writes one report with both
//! tools' tables, numeric ratios and what it could not test; bad usage and
//! a host it cannot probe are said plainly.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::common::bin;

fn hardware_check(out: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts/hardware-check");
    let mut cmd = Command::new(script);
    cmd.args(["--bin", bin(), "--out"]).arg(out).args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("scripts/hardware-check runs")
}

/// The rows of the Markdown table under `## {title}`, cells trimmed.
fn table(report: &str, title: &str) -> Vec<Vec<String>> {
    let section = report.split(&format!("## {title}")).nth(1).unwrap_or_else(|| panic!("no `## {title}`:\n{report}"));
    let section = section.split("\n## ").next().unwrap();
    section
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| ---"))
        .skip(1)
        .map(|l| l.trim_matches('|').split('|').map(|c| c.trim().to_string()).collect())
        .collect()
}

fn number(cell: &str, what: &str) -> f64 {
    cell.parse().unwrap_or_else(|_| panic!("{what}: `{cell}` is not a number"))
}

#[test]
fn quick_run_reports_both_tools_and_what_it_could_not_test() {
    let Some(device) = crate::rdma::rdma_device("hardware_check::quick_run") else { return };
    check_quick_run(&["--quick", "-d", &device]);
}

/// The two-VM run (scripts/test-rdma sets FB_RDMA_PEER_HOST): this host
/// against the peer over ssh, perftest's servers there, within a budget
/// that ends the check after its first tests (the whole quick matrix runs
/// on one VM above; across two under emulation it took three minutes):
/// both tools' first bandwidth row, what the budget left out listed, and
/// nothing of either tool left on either host, also of a test the budget
/// stopped half-way.
#[test]
fn quick_run_across_two_hosts_within_a_budget() {
    let Ok(peer) = std::env::var("FB_RDMA_PEER_HOST") else {
        eprintln!("SKIP: FB_RDMA_PEER_HOST is not set (only the two-VM run has a peer host)");
        return;
    };
    let Some(device) = crate::rdma::rdma_device("hardware_check::quick_run_across_two_hosts") else { return };
    let out = tempfile::tempdir().unwrap();
    let run = hardware_check(out.path(), &["--quick", "-d", &device, "--peer", &peer, "--budget", "60"], &[]);
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let report = std::fs::read_to_string(out.path().join("report.md")).expect("report.md");
    println!("{report}");
    let could_not = report.split("## Could not test").nth(1).expect("a could-not-test section");
    let bw = table(&report, "Bandwidth");
    match bw.iter().find(|r| r[0] == "write" && r[2] == "1") {
        Some(write) => {
            assert!(number(&write[3], "fabricbench Gb/s") > 0.0, "{write:?}");
            // perftest's write is measured, or left out for the budget:
            // never started to fail on a server its timeout ended.
            if perftest_installed() {
                match could_not.lines().find(|l| l.contains("perftest write-q1")) {
                    Some(line) => assert!(line.contains("budget was spent"), "{line}\n{report}"),
                    None => assert!(number(&write[4], "perftest Gb/s") > 0.0 && number(&write[5], "ratio") > 0.0),
                }
            }
        }
        // On a loaded host fabricbench's first run can take the whole
        // budget (CI once saw 100 s): stopped, it keeps what it measured.
        None => {
            let line = could_not.lines().find(|l| l.contains("fabricbench write-q1")).expect("the write, or why not");
            assert!(line.contains("stopped at the end of the check's 60 s budget"), "{line}\n{report}");
            let folders = std::fs::read_dir(out.path().join("fabricbench/write-q1")).expect("its results folder");
            let kept = folders.flatten().any(|d| d.path().join("run.json").is_file());
            assert!(kept, "the stopped write kept no run.json:\n{report}");
        }
    }
    assert!(could_not.contains("budget (--budget)") || could_not.contains("budget was spent"), "{report}");
    assert_eq!(left_here(), Vec::<String>::new(), "left running here");
    let ps = Command::new("ssh").args([peer.as_str(), "ps -eo args="]).output().expect("ssh to the peer");
    assert!(ps.status.success(), "ps on {peer}: {}", String::from_utf8_lossy(&ps.stderr));
    let left: Vec<String> = String::from_utf8_lossy(&ps.stdout)
        .lines()
        .filter(|c| {
            c.starts_with("ib_") || c.contains("hwcheck") || (c.contains("fabricbench") && c.contains(" worker"))
        })
        .map(str::to_string)
        .collect();
    assert!(left.is_empty(), "left running on {peer}: {left:?}");
}

fn perftest_installed() -> bool {
    Command::new("sh").args(["-c", "command -v ib_write_bw"]).output().unwrap().status.success()
}

/// Our perftest and fabricbench workers still running on this host.
fn left_here() -> Vec<String> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|p| std::fs::read_to_string(p.path().join("cmdline")).ok())
        .filter(|c| c.starts_with("ib_") || (c.contains("fabricbench") && c.contains("\0worker")))
        .collect()
}

/// Runs the quick matrix with `args` and checks its report, its results
/// folders and that nothing is left running here.
fn check_quick_run(args: &[&str]) {
    let out = tempfile::tempdir().unwrap();
    let t0 = std::time::Instant::now();
    let run = hardware_check(out.path(), args, &[]);
    let took = t0.elapsed();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    let report = std::fs::read_to_string(out.path().join("report.md")).expect("report.md");
    println!("{report}\n(took {took:?})");
    let perftest = perftest_installed();

    let could_not = report.split("## Could not test").nth(1).expect("a could-not-test section");
    // perftest's column and the ratio are numbers, or perftest's failure is named.
    let compared = |row: &[String], name: &str, perftest_col: usize| {
        if !perftest || row[perftest_col] == "-" && could_not.contains(&format!("not tested: perftest {name} (")) {
            return;
        }
        assert!(number(&row[perftest_col], "perftest") > 0.0, "{row:?}");
        assert!(number(&row[perftest_col + 1], "ratio") > 0.0, "{row:?}");
    };
    // Every test of the quick matrix has its row, or the report says why not.
    let accounted = |rows: &[Vec<String>], test: &str, name: &str| {
        assert!(
            rows.iter().any(|r| r[0] == test) || could_not.contains(&format!("not tested: fabricbench {name}")),
            "{test}: neither a row nor a reason:\n{report}"
        );
    };
    let bw = table(&report, "Bandwidth");
    for test in ["write", "read", "send", "write-postlist16"] {
        accounted(&bw, test, &format!("{test}-q1"));
    }
    for row in &bw {
        assert!(number(&row[3], "fabricbench Gb/s") > 0.0, "{row:?}");
        compared(row, &format!("{}-q{}", row[0], row[2]), 4);
    }
    let lat = table(&report, "Latency");
    for test in ["write_lat", "send_lat"] {
        accounted(&lat, test, test);
    }
    for row in &lat {
        assert!(number(&row[2], "fabricbench µs") > 0.0, "{row:?}");
        compared(row, &row[0], 3);
    }
    if perftest {
        let ratios = bw.iter().filter(|r| r[5] != "-").count() + lat.iter().filter(|r| r[4] != "-").count();
        assert!(ratios > 0, "perftest is installed but no ratio was computed:\n{report}");
    }
    let cpu = table(&report, "CPU");
    assert_eq!(cpu.iter().map(|r| r[0].as_str()).collect::<Vec<_>>(), ["busy", "event"], "{report}");
    for row in &cpu {
        assert!(number(&row[1], "Gb/s") > 0.0 && number(&row[2], "CPU %") >= 0.0, "{row:?}");
    }
    // Atomic latency: measured, or refused by fabricbench in its own words.
    assert!(
        lat.iter().any(|r| r[0] == "atomic_lat")
            || could_not.contains("not tested: fabricbench atomic_lat (pair atomic --lat): error:"),
        "{report}"
    );
    // Every fabricbench test left its results folder.
    for name in ["write-q1", "read-q1", "send-q1", "write-postlist16-q1", "write_lat", "cpu-busy", "cpu-event"] {
        let dir = out.path().join("fabricbench").join(name);
        let runs: Vec<_> =
            std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())).flatten().collect();
        assert!(runs.iter().any(|r| r.path().join("run.json").is_file()), "{} holds no run", dir.display());
    }
    // Nothing left running: no perftest and no fabricbench worker of ours.
    assert_eq!(left_here(), Vec::<String>::new(), "left running");
}

#[test]
fn a_host_it_cannot_probe_is_said_and_nothing_runs() {
    let out = tempfile::tempdir().unwrap();
    let run = hardware_check(out.path(), &["--quick"], &[("FABRICBENCH_SYSFS_ROOT", "/no/such/tree")]);
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let report = std::fs::read_to_string(out.path().join("report.md")).unwrap();
    assert!(
        report.contains(
            "* not tested: every test: fabricbench probe failed: FABRICBENCH_SYSFS_ROOT=/no/such/tree: no such folder"
        ),
        "{report}"
    );
    assert!(table(&report, "Bandwidth").is_empty() && table(&report, "Latency").is_empty(), "{report}");
    assert_eq!(std::fs::read_dir(out.path().join("fabricbench")).unwrap().count(), 0, "no test was started");
}

#[test]
fn bad_usage_names_the_option() {
    let out = tempfile::tempdir().unwrap();
    let run = hardware_check(out.path(), &["--qick"], &[]);
    assert_eq!(run.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&run.stderr).contains("hardware-check: unknown option '--qick' (see --help)"));
    let run = hardware_check(out.path(), &["--peer"], &[]);
    assert_eq!(run.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&run.stderr).contains("--peer needs a host"), "{run:?}");
    for bad in ["15m", "-1", "99999"] {
        let run = hardware_check(out.path(), &["--budget", bad], &[]);
        assert_eq!(run.status.code(), Some(2), "--budget {bad}");
        let said = format!("hardware-check: --budget takes whole seconds from 0 to 9999, not '{bad}'");
        assert!(String::from_utf8_lossy(&run.stderr).contains(&said), "{run:?}");
    }
}

/// A spent budget starts no test and says so for each one: the check's
/// time is bounded whatever the hardware does.
#[test]
fn a_spent_budget_runs_nothing_and_says_what_it_left_out() {
    let Some(device) = crate::rdma::rdma_device("hardware_check::a_spent_budget") else { return };
    let out = tempfile::tempdir().unwrap();
    let run = hardware_check(out.path(), &["--quick", "-d", &device, "--budget", "0"], &[]);
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let report = std::fs::read_to_string(out.path().join("report.md")).unwrap();
    for test in
        ["fabricbench write-q1 (pair write -s 64K -q 1)", "perftest write-q1 (ib_write_bw", "fabricbench cpu-event"]
    {
        let said = format!("* not tested: {test}");
        let line = report.lines().find(|l| l.starts_with(&said)).unwrap_or_else(|| panic!("{said}:\n{report}"));
        assert!(line.ends_with("the check's 0 s budget was spent before it (--budget)"), "{line}");
    }
    assert!(table(&report, "Bandwidth").is_empty() && table(&report, "Latency").is_empty(), "{report}");
    assert_eq!(std::fs::read_dir(out.path().join("fabricbench")).unwrap().count(), 0, "no test was started");
}

#[test]
fn help_prints_the_usage_and_exits_0() {
    let out = tempfile::tempdir().unwrap();
    for flag in ["--help", "-h"] {
        let run = hardware_check(out.path(), &[flag], &[]);
        assert_eq!(run.status.code(), Some(0), "{flag}: {run:?}");
        let usage = String::from_utf8_lossy(&run.stdout);
        assert!(usage.starts_with("hardware-check — "), "{flag}: {usage}");
        assert!(usage.contains("--budget SECONDS") && usage.contains("2 on\nbad usage"), "{flag}: {usage}");
        assert!(!usage.contains("set -uo"), "{flag}: the usage stops before the script: {usage}");
    }
}

/// The GPU rows come from `fabricbench facts` on recorded trees (with the
/// budget spent, so no test runs wherever this runs): the DGX-like host's
/// GPUs, peer memory, dma-buf and the device's nearest GPU; a host with an
/// old driver and no module; a host without GPUs.
#[test]
fn gpu_rows_say_what_each_host_offers_gpudirect() {
    let tree = |name: &str| format!("{}/tests/fixtures/hosts/{name}/sys", env!("CARGO_MANIFEST_DIR"));
    let gpu_rows = |name: &str| {
        let out = tempfile::tempdir().unwrap();
        let args = ["--quick", "-d", "mlx5_3", "--budget", "0"];
        let run = hardware_check(out.path(), &args, &[("FABRICBENCH_SYSFS_ROOT", &tree(name))]);
        assert!(run.status.success(), "{name}: {}", String::from_utf8_lossy(&run.stderr));
        let report = std::fs::read_to_string(out.path().join("report.md")).unwrap();
        assert!(!report.contains("GPU memory was measured"), "{name}: nothing ran:\n{report}");
        let rows = table(&report, "GPUs");
        rows.into_iter().map(|r| (r[0].clone(), r[1].clone())).collect::<Vec<_>>()
    };
    let cell = |rows: &[(String, String)], check: &str| {
        rows.iter().find(|(c, _)| c.starts_with(check)).unwrap_or_else(|| panic!("no {check} row: {rows:?}")).1.clone()
    };
    let dgx = gpu_rows("gpu-dgx");
    assert_eq!(cell(&dgx, "NVIDIA GPUs"), "8 (driver 550.54.15)");
    assert_eq!(cell(&dgx, "peer memory module"), "nvidia_peermem");
    assert_eq!(cell(&dgx, "dma-buf"), "possible");
    assert_eq!(cell(&dgx, "each NIC's nearest GPU"), "mlx5_3: GPU4 (PIX)", "-d mlx5_3's row of the facts' table");
    assert!(["in probe.txt", "nvidia-smi is not installed"].contains(&cell(&dgx, "nvidia-smi topo -m").as_str()));
    let across = gpu_rows("gpu-across");
    assert_eq!(cell(&across, "peer memory module"), "no module loaded");
    assert_eq!(cell(&across, "dma-buf"), "no (needs kernel ≥ 5.12 and driver ≥ 515)");
    assert_eq!(cell(&across, "each NIC's nearest GPU"), "no RDMA NIC named mlx5_3 on this host");
    let none = gpu_rows("rxe");
    assert_eq!(cell(&none, "NVIDIA GPUs"), "none");
    assert_eq!(cell(&none, "dma-buf"), "-");
}
