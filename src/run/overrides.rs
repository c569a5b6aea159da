//! Command-line values that replace the scenario's own (`--duration`,
//! `--warmup`, `--repeat`, `--topology`), held to the bounds the file is held to.

use std::time::Duration;

use anyhow::{anyhow, bail};

use crate::scenario::{self, Field, RunSpec, Source};

/// Command-line values that replace the scenario's own.
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    pub duration: Option<Duration>,
    pub warmup: Option<Duration>,
    /// `--repeat`: clap has bounded it.
    pub repeat: Option<u32>,
    /// `--topology` (and `--topology-format`), in place of `[topology]`.
    pub topology: Option<scenario::topology::TopologyTable>,
    /// `--topology lldp`: each worker gathers its host's LLDP neighbours.
    pub lldp: bool,
}

impl Overrides {
    /// Puts the flags into the scenario's `[run]`; `source` tells whether
    /// its file gave an interval.
    pub fn apply(&self, run: &mut RunSpec, source: &Source) -> anyhow::Result<()> {
        if let Some(duration) = self.duration {
            run.interval = interval_for(duration, run, source)?;
            run.duration = duration;
        }
        if let Some(warmup) = self.warmup {
            run.warmup = warmup;
        }
        if let Some(repeat) = self.repeat {
            run.repeat = repeat;
        }
        if self.duration.is_some() || self.warmup.is_some() {
            // The window the flags make is held to the file's bounds (samples, overflow).
            scenario::check_run(run).map_err(|e| anyhow!("with --duration/--warmup, [run] {e}"))?;
        }
        Ok(())
    }
}

/// The interval of a run shortened or lengthened by `--duration`: the
/// scenario's own when its file gives one (refused when longer than the
/// duration), else the default interval of the new duration.
fn interval_for(duration: Duration, run: &RunSpec, source: &Source) -> anyhow::Result<Duration> {
    let format = humantime::format_duration;
    if duration.is_zero() {
        bail!("--duration must be longer than 0s, e.g. --duration 500ms");
    }
    let field = Field::run("interval");
    if !source.sets(&field) {
        return Ok(RunSpec::default_interval(duration));
    }
    if duration < run.interval {
        let message = format!(
            "{} is longer than --duration {}: give a --duration of at least {}, or a shorter interval",
            format(run.interval),
            format(duration),
            format(run.interval)
        );
        bail!("{}", source.describe(&field, &message));
    }
    Ok(run.interval)
}
