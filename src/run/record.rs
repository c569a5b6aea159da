//! What a run tells the keeper of its results as it goes, so that every
//! finished phase is on disk long before the run ends (the results folder
//! journals each one) and a run stopped half-way keeps what it measured.

use crate::result::{PhaseResult, RankProbe, RunResult};

/// A change to the result; `run` passed beside it already holds it.
pub enum Recorded<'a> {
    /// The run is about to launch: the plan, hosts and scenario are known.
    Started,
    /// A rank's RDMA probe arrived.
    Probe(&'a RankProbe),
    /// A phase finished (or was cut short by a failure).
    Phase(&'a PhaseResult),
    /// Every rank reported interval `interval` of the running phase: its
    /// aggregate Gb/s, kept so the folder shows a long phase as it goes.
    Interval { phase: usize, interval: u32, gbps: f64 },
    /// A stop signal arrived and the run is ending for `reason`: the folder
    /// says so at once, before the workers wind down, in case the launcher
    /// is killed while they do (mpirun sends SIGKILL soon after SIGTERM).
    Stopping { reason: &'a str },
}

pub trait Recorder {
    /// Keeps what changed, on disk before it returns: the next phase waits
    /// for this.
    fn record(&mut self, run: &RunResult, what: Recorded<'_>);
    /// Renders the run as it stands, after a phase was recorded (while the
    /// next one sets up).
    fn render(&mut self, run: &RunResult);
}

/// Keeps nothing: the retest run (its verdicts are kept with the checks).
impl Recorder for () {
    fn record(&mut self, _: &RunResult, _: Recorded<'_>) {}
    fn render(&mut self, _: &RunResult) {}
}

/// None keeps nothing (`--no-save`).
impl<R: Recorder> Recorder for Option<R> {
    fn record(&mut self, run: &RunResult, what: Recorded<'_>) {
        if let Some(recorder) = self {
            recorder.record(run, what);
        }
    }

    fn render(&mut self, run: &RunResult) {
        if let Some(recorder) = self {
            recorder.render(run);
        }
    }
}
