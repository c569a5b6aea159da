//! The control plane's time limits, and how they grow with the job.

use std::time::Duration;

/// Time limits of the control plane.
#[derive(Clone, Copy, Debug)]
pub struct Timeouts {
    /// How often the coordinator sends heartbeats.
    pub heartbeat: Duration,
    /// A rank not heard from for this long is declared lost.
    pub silence: Duration,
    /// All ranks must have said Hello within this.
    pub join: Duration,
    /// Endpoints, connect and the final report must each arrive within this.
    pub stage: Duration,
    /// t0 is this far after the barrier, so Start reaches every rank first.
    pub start_delay: Duration,
    /// After an abort, how long to wait for the partial reports.
    pub abort_grace: Duration,
    /// A connection that has not said a valid Hello within this is closed.
    pub hello: Duration,
}

/// Heartbeats per second the coordinator sends (and, from the workers,
/// hears) at most, all ranks together. Beyond this many ranks at the usual
/// interval the interval grows with the job: at 16 384 ranks, 500 ms
/// heartbeats both ways were 80 % of the frames of a bootstrap, and a
/// slower bootstrap paid more of them (docs/SCALING.md).
const HEARTBEATS_PER_SECOND: u32 = 8192;
/// A rank is lost after this many heartbeat intervals of silence.
const SILENT_INTERVALS: u32 = 6;

impl Timeouts {
    /// The defaults for a job of `ranks`: heartbeats within
    /// [`HEARTBEATS_PER_SECOND`], and a silence limit of at least
    /// [`SILENT_INTERVALS`] of them.
    pub fn for_ranks(ranks: usize) -> Timeouts {
        let usual = Timeouts::default();
        let spread = Duration::from_secs(1) * u32::try_from(ranks).unwrap_or(u32::MAX) / HEARTBEATS_PER_SECOND;
        let heartbeat = usual.heartbeat.max(spread);
        Timeouts { heartbeat, silence: usual.silence.max(heartbeat * SILENT_INTERVALS), ..usual }
    }
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            heartbeat: Duration::from_millis(500),
            silence: Duration::from_secs(3),
            join: Duration::from_secs(30),
            stage: Duration::from_secs(30),
            start_delay: Duration::from_millis(200),
            abort_grace: Duration::from_secs(2),
            hello: Duration::from_secs(5),
        }
    }
}
