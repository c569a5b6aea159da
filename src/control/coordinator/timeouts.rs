//! The control plane's time limits, how they grow with the job, and the
//! coordinator's checks of them: when they are due (`poll_timeout`) and
//! what passing one does (`handle_timeout`).

use std::time::{Duration, Instant};

use super::failing::list;
use super::{ConnId, Coordinator, Stage};

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

/// The first moment a limit counts as passed: limits are exceeded, not
/// merely reached.
pub(super) fn past(limit: Instant) -> Instant {
    limit + Duration::from_nanos(1)
}

/// The least time between two checks: a zero heartbeat interval must not
/// spin the driver.
const LEAST_GAP: Duration = Duration::from_millis(1);

impl Coordinator {
    /// When [`Coordinator::handle_timeout`] is due next: by the next
    /// heartbeat round at the latest, so that a longer gap between two
    /// calls means this process was not running. `None` once done.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.is_done() {
            return None;
        }
        let stage = match &self.stage {
            Stage::Aborting { deadline, .. } => Some(*deadline),
            _ => self.stage_limit().map(|limit| past(self.stage_since + limit)),
        };
        let round = self.last_heartbeat + self.timeouts.heartbeat;
        // A limit that passed without effect (no rank to blame) is looked
        // at again in the next round, not over and over.
        let next =
            [stage, self.watch].into_iter().flatten().filter(|&at| at > self.last_timeout).fold(round, Instant::min);
        Some(next.max(self.last_timeout + LEAST_GAP))
    }

    /// Heartbeats and deadlines, at `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.is_done() {
            return;
        }
        // Calls come at least every heartbeat interval (`poll_timeout`); a
        // longer gap means this process was not running (a loaded host, an
        // emulated CPU) and heard no one: that time does not count as the
        // ranks' silence.
        if let Some(stalled) = now.saturating_duration_since(self.last_timeout).checked_sub(self.timeouts.heartbeat) {
            for slot in &mut self.slots {
                slot.last_heard += stalled;
            }
        }
        self.last_timeout = now;
        if now.saturating_duration_since(self.last_heartbeat) >= self.timeouts.heartbeat {
            self.last_heartbeat = now;
            self.heartbeat();
        }
        let hello_due = self.reject_late(now);
        // Already failing: only the grace for the partial reports counts. (A
        // rank that stays connected but silent, e.g. frozen, must not keep
        // re-failing the run here and hold the abort open forever.)
        if let Stage::Aborting { deadline, .. } = &self.stage {
            self.watch = hello_due;
            if now >= *deadline {
                self.finish_abort();
            }
            return;
        }
        let (silent, quietest) = self.silence(now);
        self.watch = [hello_due, quietest.map(|heard| past(heard + self.timeouts.silence))].into_iter().flatten().min();
        if let Some(rank) = silent {
            let secs = now.saturating_duration_since(self.slots[rank].last_heard).as_secs_f64();
            let stage = self.stage_name();
            let flows = self.flows_of(rank);
            self.fail(Some(rank), format!("silent for {secs:.1} s {stage} (heartbeat timeout){flows}"), now);
            return;
        }
        let Some(limit) = self.stage_limit() else { return };
        if now.saturating_duration_since(self.stage_since) <= limit {
            return;
        }
        let secs = limit.as_secs_f64();
        if let Stage::Saving { phase } = self.stage {
            self.fail(None, format!("the launcher did not say within {secs:.0} s that phase {phase} is on disk"), now);
            return;
        }
        let missing = self.unanswered();
        if !missing.is_empty() {
            let stage = self.stage_name();
            let message = format!("no answer {stage} within {secs:.0} s");
            let first = missing[0];
            let others =
                if missing.len() > 1 { format!(" (also ranks {})", list(&missing[1..])) } else { String::new() };
            self.fail(Some(first), format!("{message}{others}"), now);
        }
    }

    /// Looks again by `at` at the latest.
    pub(super) fn watch_until(&mut self, at: Instant) {
        self.watch = Some(self.watch.map_or(at, |watch| watch.min(at)));
    }

    /// Closes the connections that said no Hello in time; when the
    /// earliest of the others will not have.
    fn reject_late(&mut self, now: Instant) -> Option<Instant> {
        let hello = self.timeouts.hello;
        let late: Vec<ConnId> = self
            .pending
            .iter()
            .filter(|(_, &at)| now.saturating_duration_since(at) > hello)
            .map(|(&conn, _)| conn)
            .collect();
        for conn in late {
            self.reject(conn, format!("no Hello within {hello:?}"));
        }
        self.pending.values().min().map(|&at| past(at + hello))
    }

    /// The first joined rank silent for longer than the limit, and when the
    /// quietest joined rank was last heard.
    fn silence(&self, now: Instant) -> (Option<usize>, Option<Instant>) {
        let (mut silent, mut quietest) = (None, None::<Instant>);
        for (rank, slot) in self.slots.iter().enumerate().filter(|(_, s)| s.conn.is_some() && s.joined) {
            if silent.is_none() && now.saturating_duration_since(slot.last_heard) > self.timeouts.silence {
                silent = Some(rank);
            }
            quietest = Some(quietest.map_or(slot.last_heard, |q| q.min(slot.last_heard)));
        }
        (silent, quietest)
    }

    /// How long the current stage may take: a running phase its window
    /// besides; no limit while aborting (its own deadline) or done.
    fn stage_limit(&self) -> Option<Duration> {
        let t = &self.timeouts;
        match &self.stage {
            Stage::Joining { .. } => Some(t.join),
            Stage::Setup { .. } | Stage::Connecting { .. } | Stage::Probing | Stage::Saving { .. } => Some(t.stage),
            Stage::Running { t0, .. } => Some(
                t0.saturating_duration_since(self.stage_since) + self.window.warmup + self.window.duration + t.stage,
            ),
            Stage::Aborting { .. } | Stage::Done => None,
        }
    }
}
