//! A run judged against its checks: the run, the checks, and then a second,
//! short run that retests the suspects alone (each in its own phase).

use crate::acceptance;
use crate::launch::Launch;
use crate::plan;
use crate::result::{Acceptance, Retest, RunResult, RunStatus};
use crate::run::gate::{gate, GateOptions, Gated};
use crate::run::record::{record_whole, Recorder};
use crate::run::{run, Prepared, RunOptions};
use crate::scenario::CheckSpec;

pub struct JudgeOptions {
    /// The scenario's `[check]` with the command line's rules added.
    pub checks: CheckSpec,
    /// Retest suspects alone before declaring them bad.
    pub retest: bool,
    /// The node gate to run before everything else.
    pub gate: Option<GateOptions>,
}

/// Runs the job and judges it; `acceptance` is set when there are rules.
pub async fn run_and_judge(
    prepared: Prepared,
    launch: &Launch,
    opts: &RunOptions,
    accept: &JudgeOptions,
    recorder: &mut dyn Recorder,
) -> anyhow::Result<RunResult> {
    let prepared = match &accept.gate {
        None => prepared,
        Some(options) => match gate(prepared, launch, opts, options).await? {
            Gated::Go(prepared) => *prepared,
            Gated::Stop(result) => {
                record_whole(recorder, &result);
                return Ok(*result);
            }
        },
    };
    judged(prepared, launch, opts, accept, recorder).await
}

/// The run, its checks and the retest of its suspects.
async fn judged(
    prepared: Prepared,
    launch: &Launch,
    opts: &RunOptions,
    accept: &JudgeOptions,
    recorder: &mut dyn Recorder,
) -> anyhow::Result<RunResult> {
    let (scenario_file, scenario, hosts, topology) =
        (prepared.scenario_file.clone(), prepared.scenario.clone(), prepared.hosts.clone(), prepared.topology.clone());
    let mut result = run(prepared, launch, opts, recorder).await?;
    // With a topology, suspects may be switches (an uplink, a leaf).
    let fabric = topology.as_ref().map(|t| plan::Fabric::new(&t.topology, &hosts));
    let paths = fabric.as_ref().map(|f| f as &dyn acceptance::Paths);
    let Some(mut judged) = acceptance::judge(&result, &accept.checks, paths) else { return Ok(result) };
    if let RunStatus::Failed { .. } = result.status {
        not_retested(&mut judged, "the run failed");
    } else if !accept.retest {
        not_retested(&mut judged, "--no-retest");
    } else if matches!(launch, Launch::Joined { .. }) {
        // The other ranks ended with the run: nothing could start them again.
        not_retested(&mut judged, "mpirun started the ranks for one run (use --launcher mpirun to retest)");
    } else if let Some(acceptance::RetestPlan { plan, owners }) = acceptance::retest_plan(&result, &mut judged, paths) {
        if opts.progress {
            crate::diag!("retesting {} suspect(s) alone", owners.len());
        }
        let retest = run(
            Prepared {
                scenario_file,
                scenario,
                hosts: hosts.clone(),
                plan,
                hostfile_text: None,
                topology: None,
                gather: None,
                gate: None,
                scenario_plan: false,
            },
            launch,
            opts,
            &mut (),
        )
        .await?;
        // A degraded retest measured nothing valid: it clears no one.
        let degraded = match &retest.status {
            RunStatus::Degraded { reasons } => Some(format!("the retest was degraded: {}", reasons.join(" | "))),
            _ => None,
        };
        let failure = match &retest.status {
            RunStatus::Failed { error } => Some(error.as_str()),
            RunStatus::Degraded { .. } => degraded.as_deref(),
            RunStatus::Ok | RunStatus::Running { .. } => None,
        };
        acceptance::apply_retest(&mut judged, &owners, retest.phases, failure);
    }
    result.acceptance = Some(judged);
    Ok(result)
}

fn not_retested(judged: &mut Acceptance, reason: &str) {
    for s in &mut judged.suspects {
        if matches!(&s.retest, Retest::NotRun { .. }) {
            s.retest = Retest::NotRun { reason: reason.to_string() };
        }
    }
}
