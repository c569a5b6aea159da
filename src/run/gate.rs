//! The node gate before the pairs: a short run of its own in which every
//! host loops back alone (all hosts at once), judged per host against the
//! profile; the hosts that fail are left out of the run that follows.

use std::collections::BTreeSet;
use std::future::Future;
use std::time::Duration;

use anyhow::anyhow;

use crate::acceptance::gate::{self, Profile};
use crate::hostfile::Host;
use crate::launch::Launch;
use crate::result::gate::GateResult;
use crate::result::{RunResult, RunStatus};
use crate::run::{plan_on, run, Prepared, RunOptions};
use crate::scenario::RunSpec;

/// `--gate PROFILE` / `[gate]`, and `--gate-only`.
pub struct GateOptions {
    pub profile: Profile,
    /// Run the gate and stop: no pairs.
    pub only: bool,
}

/// What follows the gate.
pub enum Gated {
    /// The run goes on with the hosts that passed (the gate's verdict rides along in it).
    Go(Box<Prepared>),
    /// Nothing more runs: `--gate-only`, no host passed, or the gate run failed.
    Stop(Box<RunResult>),
}

/// Runs the gate over the prepared run's hosts and decides what follows.
pub async fn gate(
    prepared: Prepared,
    launch: &Launch,
    opts: &RunOptions,
    gate_opts: &GateOptions,
) -> anyhow::Result<Gated> {
    if matches!(launch, Launch::Joined { .. }) {
        // `fabricbench run` refuses this on every rank first (bad input); here for any other caller.
        anyhow::bail!(
            "the node gate needs runs of its own, and mpirun started the ranks for one: use --launcher mpirun"
        );
    }
    let run_on = |on: Prepared| async move { run(on, launch, opts, &mut ()).await };
    let (mut measured, verdict) = gate_runs(&prepared, &gate_opts.profile, opts.progress, run_on).await?;
    let all_failed = verdict.failed().count() == verdict.hosts.len();
    if gate_opts.only || all_failed || !matches!(measured.status, RunStatus::Ok) {
        measured.gate = Some(verdict);
        return Ok(Gated::Stop(Box::new(measured)));
    }
    let passed = without_failed(prepared, &verdict)?;
    Ok(Gated::Go(Box::new(Prepared { gate: Some(verdict), ..passed })))
}

/// The gate's runs (`run_on` runs one) and the verdict of the last: once
/// more without the hosts that failed alone when the run failed, and once
/// more over the same hosts when it was degraded; no more than that.
async fn gate_runs<R, F>(
    prepared: &Prepared,
    profile: &Profile,
    progress: bool,
    mut run_on: R,
) -> anyhow::Result<(RunResult, GateResult)>
where
    R: FnMut(Prepared) -> F,
    F: Future<Output = anyhow::Result<RunResult>>,
{
    // What the run (not the gate's loopback) registers, for each host's locked-memory limit.
    let pinned = gate::Pinned::of(&prepared.plan);
    let (mut measured, mut verdict) = gate_run(prepared, profile, &pinned, &mut run_on).await?;
    // The hosts that failed alone, and the gate's run without them, when it ran again so.
    let mut left_out: Option<(GateResult, Prepared)> = None;
    if let RunStatus::Failed { .. } = measured.status {
        // A host failing for its own ports (a port down breaks its loopback's
        // connect) fails the whole gate run: once more without those hosts,
        // so that the others are judged on their own loopback.
        let ports_only = Profile { loopback_min: None, tcp_loopback_min: None, ..profile.clone() };
        let alone = gate::judge_run(&ports_only, &measured, &pinned);
        let culprits = alone.failed().count();
        if culprits > 0 && culprits < alone.hosts.len() {
            let without = gate_without(prepared, &alone);
            let (again, second) = gate_run(&without, profile, &pinned, &mut run_on).await?;
            verdict = merged(&alone, &verdict, second);
            measured = again;
            left_out = Some((alone, without));
        }
    }
    if let RunStatus::Degraded { reasons } = &measured.status {
        // A loopback window that cannot be trusted (a host busy as it
        // opened) judges no host: once more over the same hosts; a second
        // degraded run stops the run as before.
        let why = reasons.join(" | ");
        if progress {
            crate::diag!("the gate's run was degraded ({why}): running it once more");
        }
        let on = left_out.as_ref().map_or(prepared, |(_, without)| without);
        let (again, next) = gate_run(on, profile, &pinned, &mut run_on).await?;
        verdict = match &left_out {
            Some((alone, _)) => merged(alone, &verdict, next),
            None => next,
        };
        verdict.retried = Some(why);
        measured = again;
    }
    Ok((measured, verdict))
}

/// One gate run over the prepared run's hosts, and its verdict.
async fn gate_run<R, F>(
    prepared: &Prepared,
    profile: &Profile,
    pinned: &gate::Pinned,
    run_on: &mut R,
) -> anyhow::Result<(RunResult, GateResult)>
where
    R: FnMut(Prepared) -> F,
    F: Future<Output = anyhow::Result<RunResult>>,
{
    let measured = run_on(looping(prepared, profile)?).await?;
    let verdict = gate::judge_run(profile, &measured, pinned);
    Ok((measured, verdict))
}

/// The gate's own run of the prepared run's hosts: its loopback phases
/// over the profile's window, none of the scenario's sweeps or stress.
fn looping(prepared: &Prepared, profile: &Profile) -> anyhow::Result<Prepared> {
    let plan = gate::plan(&prepared.plan).ok_or_else(|| {
        anyhow!("the gate loops back the run's bandwidth groups, and {} has none", prepared.scenario_file.display())
    })?;
    let mut scenario = prepared.scenario.clone();
    scenario.run.duration = profile.duration;
    scenario.run.warmup = scenario.run.warmup.min(Duration::from_secs(1));
    scenario.run.interval = RunSpec::default_interval(profile.duration);
    scenario.run.repeat = 1;
    // The gate's phases are none of these: its result must not be read as a sweep or a congestion run.
    (scenario.sweep, scenario.congestion, scenario.stress) = (None, None, Vec::new());
    // Loopbacks cross no leaf: the gate's result has no leaf pairs.
    Ok(Prepared { scenario, plan, topology: None, gather: None, scenario_plan: false, ..prepared.clone() })
}

/// The gate's run without the hosts that failed: the same ranks less
/// theirs, numbered again (the gate makes its own flows, so only the
/// ranks and the groups matter; the scenario need not fit fewer hosts).
fn gate_without(prepared: &Prepared, verdict: &GateResult) -> Prepared {
    let failed: BTreeSet<&str> = verdict.failed().map(|h| h.host.as_str()).collect();
    let hosts = prepared.hosts.iter().filter(|h| !failed.contains(h.name.as_str())).cloned().collect();
    let mut plan = prepared.plan.clone();
    plan.ranks.retain(|r| !failed.contains(r.host.as_str()));
    for (rank, info) in plan.ranks.iter_mut().enumerate() {
        info.rank = rank;
    }
    for phase in &mut plan.phases {
        phase.flows.clear();
    }
    Prepared { hosts, plan, ..prepared.clone() }
}

/// The verdict after a second gate run: the hosts that failed alone keep
/// their first verdict, the rest take the second run's.
fn merged(alone: &GateResult, first: &GateResult, second: GateResult) -> GateResult {
    let culprits: BTreeSet<&str> = alone.failed().map(|h| h.host.as_str()).collect();
    let hosts = first
        .hosts
        .iter()
        .map(|h| match culprits.contains(h.host.as_str()) {
            true => h.clone(),
            false => second.hosts.iter().find(|s| s.host == h.host).cloned().unwrap_or_else(|| h.clone()),
        })
        .collect();
    GateResult { profile: first.profile.clone(), hosts, retried: None }
}

/// The run without the hosts that failed the gate, planned again over
/// the rest (ranks renumbered in the hostfile's order).
fn without_failed(prepared: Prepared, verdict: &GateResult) -> anyhow::Result<Prepared> {
    let failed: BTreeSet<&str> = verdict.failed().map(|h| h.host.as_str()).collect();
    if failed.is_empty() {
        return Ok(prepared);
    }
    let passed: Vec<Host> = prepared.hosts.iter().filter(|h| !failed.contains(h.name.as_str())).cloned().collect();
    let plan = plan_on(&passed, &prepared.scenario, prepared.topology.as_ref()).map_err(|bad| {
        anyhow!("with the {} host(s) that passed the gate the scenario cannot be planned: {bad}", passed.len())
    })?;
    Ok(Prepared { hosts: passed, plan, ..prepared })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result::gate::HostGate;

    fn host(name: &str, passed: bool) -> HostGate {
        HostGate {
            host: name.into(),
            passed,
            ports: Vec::new(),
            loopback_gbps: None,
            loopback_min_gbps: None,
            reasons: if passed { Vec::new() } else { vec!["mlx5_0 port 1 is DOWN, expected ACTIVE".into()] },
            ..HostGate::default()
        }
    }

    fn four_hosts_node02_failed() -> (Prepared, GateResult) {
        let hosts: Vec<Host> = ["node01", "node02", "node03", "node04"].map(Host::named).to_vec();
        let scenario = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/all-pairs.toml");
        let prepared = crate::run::prepare(&scenario, hosts, "a test", &Default::default()).unwrap();
        let verdict = GateResult {
            profile: "ndr-ib".into(),
            hosts: vec![host("node01", true), host("node02", false), host("node03", true), host("node04", true)],
            retried: None,
        };
        (prepared, verdict)
    }

    #[test]
    fn the_gate_runs_again_without_the_hosts_that_failed_alone() {
        let (prepared, alone) = four_hosts_node02_failed();
        let again = gate_without(&prepared, &alone);
        let ranks: Vec<(usize, &str)> = again.plan.ranks.iter().map(|r| (r.rank, r.host.as_str())).collect();
        assert_eq!(ranks, [(0, "node01"), (1, "node03"), (2, "node04")]);
        assert_eq!(again.hosts.iter().map(|h| h.name.as_str()).collect::<Vec<_>>(), ["node01", "node03", "node04"]);
        let loops = gate::plan(&again.plan).unwrap();
        assert!(loops.phases[0].flows.iter().map(|f| (f.src, f.dst)).eq([(0, 0), (1, 1), (2, 2)]));
        // The second run's verdict for the others; the first one's for node02.
        let hosts = vec![host("node01", true), host("node03", false)];
        let second = GateResult { profile: "ndr-ib".into(), hosts, retried: None };
        let first = GateResult { hosts: alone.hosts.iter().map(|h| host(&h.host, false)).collect(), ..alone.clone() };
        let passed: Vec<bool> = merged(&alone, &first, second).hosts.iter().map(|h| h.passed).collect();
        assert_eq!(passed, [true, false, false, false], "node04 was not in the second run: its first verdict stays");
    }

    #[test]
    fn the_hosts_that_failed_are_left_out_and_the_rest_planned_again() {
        let (prepared, verdict) = four_hosts_node02_failed();
        let kept = without_failed(prepared, &verdict).unwrap();
        let names: Vec<&str> = kept.plan.ranks.iter().map(|r| r.host.as_str()).collect();
        assert_eq!(names, ["node01", "node03", "node04"]);
        assert_eq!(kept.hosts.len(), 3);
        // Three hosts: three rounds of one pair, each host idle in one.
        assert_eq!(kept.plan.phases.len(), 3);
        assert!(kept.plan.phases.iter().flat_map(|p| &p.flows).all(|f| f.src < 3 && f.dst < 3));
    }

    /// The gate's runs as `statuses` say they end, one after the other:
    /// how many ran, and what the gate ended with.
    fn gate_ending(statuses: &[RunStatus]) -> (usize, RunResult, GateResult) {
        let (prepared, _) = four_hosts_node02_failed();
        let profile = gate::load("tcp-loopback", &[std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("profiles")]);
        let mut left = statuses.iter().cloned();
        let ran = std::cell::Cell::new(0);
        let run_on = |on: Prepared| {
            ran.set(ran.get() + 1);
            let status = left.next().expect("no more runs than the statuses");
            async move {
                let file = on.scenario_file.display().to_string();
                Ok(RunResult { status, ..RunResult::new(file, on.scenario, on.hosts, on.plan) })
            }
        };
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let (measured, verdict) = runtime.block_on(gate_runs(&prepared, &profile.unwrap(), false, run_on)).unwrap();
        (ran.get(), measured, verdict)
    }

    /// A degraded gate run judges no host: the gate runs once more, its
    /// verdict says why; a second degraded run ends it degraded, as before
    /// (exit 4), with no third.
    #[test]
    fn a_degraded_gate_run_is_retried_once() {
        let degraded = RunStatus::Degraded { reasons: vec!["rank 2 started late".into()] };
        let (ran, measured, verdict) = gate_ending(&[degraded.clone(), RunStatus::Ok]);
        assert_eq!((ran, &measured.status), (2, &RunStatus::Ok));
        assert_eq!(verdict.retried.as_deref(), Some("rank 2 started late"));
        let (ran, measured, verdict) = gate_ending(&[degraded.clone(), degraded.clone()]);
        assert_eq!((ran, &measured.status), (2, &degraded));
        assert!(verdict.retried.is_some());
        let (ran, _, verdict) = gate_ending(&[RunStatus::Ok]);
        assert_eq!((ran, verdict.retried), (1, None));
    }
}
