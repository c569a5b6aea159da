//! What a run tells the keeper of its results as it goes, so that every
//! finished phase is on disk long before the run ends (the results folder
//! journals each one) and a run stopped half-way keeps what it measured.

use crate::result::{PhaseResult, RankProbe, RunResult};

/// A change to the result; `run` passed beside it already holds it.
#[derive(Clone, Copy)]
pub enum Recorded<'a> {
    /// The run is about to launch: the plan, hosts and scenario are known.
    Started,
    /// `joined` of the job's `total` ranks are connected to rank 0.
    Joined { joined: usize, total: usize },
    /// Phase `phase` started its warm-up.
    PhaseStarted { phase: usize },
    /// A rank's RDMA probe arrived.
    Probe(&'a RankProbe),
    /// A phase finished (or was cut short by a failure).
    Phase(&'a PhaseResult),
    /// Every rank reported interval `interval` of the running phase: its
    /// aggregate Gb/s, kept so the folder shows a long phase as it goes,
    /// and each flow's, in the phase's flow order.
    Interval { phase: usize, interval: u32, gbps: f64, flows: &'a [f64] },
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

/// Records a finished run that went unrecorded while it ran, once it is
/// what the command delivers: the node gate's own run (with `--gate-only`,
/// or when nothing runs after it), kept off the record as it went because a
/// second gate run may take its place. Its start, each probe, each phase;
/// the end is the keeper's to write.
pub fn record_whole(recorder: &mut dyn Recorder, run: &RunResult) {
    let start = RunResult { probes: Vec::new(), phases: Vec::new(), ..run.clone() };
    recorder.record(&start, Recorded::Started);
    for probe in &run.probes {
        recorder.record(run, Recorded::Probe(probe));
    }
    for phase in &run.phases {
        recorder.record(run, Recorded::Phase(phase));
    }
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
