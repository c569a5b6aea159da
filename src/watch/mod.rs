//! `fabricbench watch`: the probe mesh measured window after window for as
//! long as it is left running. Each launch of the workers runs up to
//! [`WINDOWS_PER_LAUNCH`] windows, a phase each of open-loop latency probes
//! on every path of the `mesh` pattern. Each window's paths are judged
//! against the p99 and loss limits as acceptance judges a run, its
//! suspects followed from window to window ([`tracker`]), and every change
//! logged ([`events`]). A launch that fails (a worker died, a host could
//! not be reached) is an event, and the workers start again after a pause.

mod events;
mod log;
mod tracker;

use std::sync::Arc;
use std::time::Duration;

use crate::launch::Launch;
use crate::plan::Plan;
use crate::report::openmetrics::Live;
use crate::result::RunStatus;
use crate::run::signals::Stop;
use crate::run::{self, Prepared, RunOptions};
use crate::scenario::limits::MAX_REPEATS;
use crate::scenario::CheckSpec;
pub use events::Files;
use events::{Judge, What};
pub use log::{Log, LogError};

/// Windows one launch of the workers runs: what one run holds in memory
/// (its phases) stays bounded, and they are started afresh now and then.
pub const WINDOWS_PER_LAUNCH: u32 = MAX_REPEATS;
/// The pause before the workers start again after a failed launch or
/// run, doubled at each failure in a row up to [`LAST_RETRY`].
const FIRST_RETRY: Duration = Duration::from_secs(5);
const LAST_RETRY: Duration = Duration::from_secs(60);

pub struct WatchOptions {
    /// Stop after this many windows (`None`: when stopped).
    pub windows: Option<u64>,
    /// The limits every path is held to in each window (p99, loss).
    pub checks: CheckSpec,
    /// A line on stderr per window and per event.
    pub progress: bool,
}

/// How a watch ended: after its windows, or stopped by a signal.
#[derive(Debug)]
pub enum Ended {
    Windows(u64),
    Stopped { stop: Stop, windows: u64 },
}

/// Watches until `options.windows` are judged or a signal stops it;
/// `prepared` plans [`WINDOWS_PER_LAUNCH`] windows (or fewer, when the
/// watch has fewer). Only files that cannot be written end it early.
pub async fn watch(
    prepared: Prepared,
    launch: &Launch,
    opts: &RunOptions,
    options: &WatchOptions,
    files: Files,
    live: Option<Arc<Live>>,
) -> anyhow::Result<Ended> {
    let mut judge = Judge::new(&prepared, options, files, live);
    let paths = prepared.plan.phases.first().map_or(0, |p| p.flows.len());
    judge.log(What::Started {
        hosts: prepared.hosts.len(),
        paths,
        window_s: prepared.scenario.run.duration.as_secs_f64(),
    })?;
    let mut retry = FIRST_RETRY;
    loop {
        let left = options.windows.map_or(u64::MAX, |n| n.saturating_sub(judge.windows()));
        if left == 0 {
            judge.log(What::Finished)?;
            return Ok(Ended::Windows(judge.windows()));
        }
        let mut launched = prepared.clone();
        launched.plan.phases.truncate(usize::try_from(left).unwrap_or(usize::MAX));
        let judged = judge.windows();
        let outcome = run::run(launched, launch, opts, &mut judge).await;
        judge.written()?;
        // A launch that judged windows before it failed starts the pauses afresh.
        if judge.windows() > judged {
            retry = FIRST_RETRY;
        }
        if let Some(stop) = opts.signals.first() {
            judge.log(What::Stopped { reason: format!("stopped by {stop}") })?;
            return Ok(Ended::Stopped { stop, windows: judge.windows() });
        }
        let error = match outcome {
            Ok(result) => match result.status {
                RunStatus::Failed { error } => error,
                _ => continue,
            },
            Err(e) => format!("{e:#}"),
        };
        judge.log(What::RunFailed { error, retry_in_s: retry.as_secs_f64() })?;
        judge.relaunching();
        let signals = &opts.signals;
        tokio::select! {
            () = tokio::time::sleep(retry) => {}
            stop = signals.reach(signals.received() + 1) => {
                judge.log(What::Stopped { reason: format!("stopped by {stop}") })?;
                return Ok(Ended::Stopped { stop, windows: judge.windows() });
            }
        }
        retry = (retry * 2).min(LAST_RETRY);
    }
}

/// The host that sends the most probes a second in `plan`'s first phase
/// (each path's `rate` from its sender, and as many echoes from its
/// receiver), with that count; `None` for a plan without flows.
pub fn busiest_host(plan: &Plan, rate: u32) -> Option<(&str, u64)> {
    let mut per_host: std::collections::BTreeMap<&str, u64> = Default::default();
    for flow in plan.phases.first().map(|p| p.flows.as_slice()).unwrap_or_default() {
        for rank in [flow.src, flow.dst] {
            *per_host.entry(plan.ranks[rank].host.as_str()).or_default() += u64::from(rate);
        }
    }
    per_host.into_iter().max_by_key(|&(host, n)| (n, std::cmp::Reverse(host)))
}
