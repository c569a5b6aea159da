//! Synthetic all-pairs runs for tests: every flow at a rate the test gives.

use std::path::Path;

use crate::result::{FlowResult, PhaseResult, RunResult};
use crate::{hostfile, plan, scenario};

/// An all-pairs run on `n` hosts (h1, h2, …) where each flow ran at `rate(src, dst)` Gb/s.
pub(crate) fn all_pairs(n: usize, rate: impl Fn(usize, usize) -> f64) -> RunResult {
    let hosts: Vec<String> = (1..=n).map(|i| format!("h{i}")).collect();
    all_pairs_on(&hosts, rate)
}

/// An all-pairs run on `hosts`, each flow at `rate(src, dst)` Gb/s.
pub(crate) fn all_pairs_on(hosts: &[String], rate: impl Fn(usize, usize) -> f64) -> RunResult {
    run_of(&hosts.join("\n"), "", rate)
}

/// A rail all-pairs run (`rails = "same"`) on node01, node02, … of `nics`
/// NICs each (`devices=mlx5_0,…`, rank `nics * h + k` is NIC k of host h),
/// each flow at `rate(src, dst)` Gb/s.
pub(crate) fn rails(hosts: usize, nics: usize, rate: impl Fn(usize, usize) -> f64) -> RunResult {
    let devices: Vec<String> = (0..nics).map(|k| format!("mlx5_{k}")).collect();
    let lines: Vec<String> = (1..=hosts).map(|h| format!("node{h:02} devices={}", devices.join(","))).collect();
    run_of(&lines.join("\n"), "rails = \"same\"\n", rate)
}

/// An all-pairs run of a hostfile's text, its group given `keys` too.
fn run_of(hostfile: &str, keys: &str, rate: impl Fn(usize, usize) -> f64) -> RunResult {
    let hosts = hostfile::parse(hostfile, Path::new("hosts")).unwrap();
    let text = format!("[[group]]\nname = \"pairs\"\npattern = \"all-pairs\"\nbidirectional = true\n{keys}");
    let (scenario, _) = scenario::parse(&text, Path::new("s.toml")).unwrap();
    let plan = plan::build(&hosts, &scenario).unwrap();
    let phases = plan.phases.iter().map(|p| phase(p, &rate)).collect();
    let mut run = RunResult::new("s.toml".into(), scenario, hosts, plan);
    run.tool_version = "test".into();
    run.started_at = "2026-01-01T00:00:00Z".into();
    run.phases = phases;
    for f in run.phases.iter_mut().flat_map(|p| &mut p.flows) {
        f.src_host.clone_from(&run.plan.ranks[f.src].host);
        f.dst_host.clone_from(&run.plan.ranks[f.dst].host);
    }
    run
}

/// One phase of `p`'s flows at `rate(src, dst)` Gb/s.
pub(crate) fn phase(p: &crate::plan::Phase, rate: &impl Fn(usize, usize) -> f64) -> PhaseResult {
    let flows: Vec<FlowResult> = p
        .flows
        .iter()
        .map(|f| FlowResult {
            id: f.id,
            group: "pairs".into(),
            mode: crate::scenario::Mode::Bandwidth,
            src: f.src,
            dst: f.dst,
            src_host: String::new(),
            dst_host: String::new(),
            streams: 1,
            message_size: 131072,
            tx_bytes: None,
            rx_bytes: None,
            bytes: 0,
            gbps: rate(f.src, f.dst),
            msgs_per_s: 0.0,
            interval_gbps: Vec::new(),
            latency: None,
            error: None,
            refused: 0,
            lanes: Vec::new(),
            offered: None,
            datagrams: None,
            probes: None,
            engines: None,
            gpu_memory: None,
            dv_checked: None,
            dv_errors: None,
            dv_first_bad: None,
            tcp: None,
            limit: None,
        })
        .collect();
    PhaseResult { index: p.index, name: p.name.clone(), ..crate::result::testing::phase(flows, Vec::new()) }
}
