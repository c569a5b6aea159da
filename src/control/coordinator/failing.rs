//! Ending a run that went wrong: a failure names the rank, its host and
//! its flows; a phase that was running collects the partial reports first.

use std::time::Instant;

use super::{ConnId, Coordinator, Event, Output, RunFailure, Stage};
use crate::control::wire::ToWorker;
use crate::result::aggregate_phase;

impl Coordinator {
    /// Ends the run: a phase that was running collects partial reports first.
    pub(super) fn fail(&mut self, rank: Option<usize>, message: String, now: Instant) {
        self.end(RunFailure { rank, host: rank.map(|r| self.slots[r].host.clone()), message, refused: false }, now);
    }

    /// Ends the run because `rank` refused before making any end (the GPU
    /// preflight): nothing ran.
    pub(super) fn refuse(&mut self, rank: usize, message: String, now: Instant) {
        let host = Some(self.slots[rank].host.clone());
        self.end(RunFailure { rank: Some(rank), host, message, refused: true }, now);
    }

    fn end(&mut self, failure: RunFailure, now: Instant) {
        match std::mem::replace(&mut self.stage, Stage::Done) {
            Stage::Running { phase, reports, intervals, .. } => {
                let reason = failure.to_string();
                self.broadcast(|| ToWorker::Abort { reason: reason.clone() });
                let deadline = now + self.timeouts.abort_grace;
                self.set_stage(Stage::Aborting { phase, reports, intervals, failure, deadline }, now);
            }
            aborting @ Stage::Aborting { .. } => self.stage = aborting,
            Stage::Done => {}
            _ => {
                let reason = failure.to_string();
                self.broadcast(|| ToWorker::Abort { reason: reason.clone() });
                self.broadcast(|| ToWorker::Bye);
                self.event(Event::Failed(failure));
            }
        }
    }

    pub(super) fn check_abort_complete(&mut self) {
        let Stage::Aborting { reports, .. } = &self.stage else { return };
        let waiting = self.slots.iter().enumerate().any(|(r, s)| s.conn.is_some() && !reports.has(r));
        if !waiting {
            self.finish_abort();
        }
    }

    pub(super) fn finish_abort(&mut self) {
        let Stage::Aborting { phase, reports, mut intervals, failure, .. } =
            std::mem::replace(&mut self.stage, Stage::Done)
        else {
            return;
        };
        if reports.any() {
            // The intervals every rank that reported took; the lost ones' are left out.
            for c in intervals.finish(|rank| reports.has(rank)) {
                self.event(Event::Progress { phase, interval: c.interval, gbps: c.gbps, flows: c.flows });
            }
            let result = aggregate_phase(
                &self.plan.phases[phase],
                &self.plan.ranks,
                reports.answers(),
                &intervals,
                false,
                self.window.asked(),
            );
            self.event(Event::PhaseDone(Box::new(result)));
        }
        self.broadcast(|| ToWorker::Bye);
        self.event(Event::Failed(failure));
    }

    pub(super) fn reject(&mut self, conn: ConnId, reason: String) {
        self.pending.remove(&conn);
        self.event(Event::Rejected { conn, reason });
        self.out.push_back(Output::Close(conn));
    }

    pub(super) fn set_stage(&mut self, stage: Stage, now: Instant) {
        self.stage = stage;
        self.stage_since = now;
    }

    pub(super) fn stage_name(&self) -> String {
        match &self.stage {
            Stage::Joining { .. } => "while joining".to_string(),
            Stage::Probing => "while probing its host".to_string(),
            Stage::Setup { phase, .. } => format!("while creating endpoints of phase {phase}"),
            Stage::Connecting { phase, .. } => format!("while connecting flows of phase {phase}"),
            Stage::Running { phase, .. } | Stage::Aborting { phase, .. } => format!("during phase {phase}"),
            Stage::Saving { phase } => format!("while phase {phase} was saved"),
            Stage::Done => "after the run".to_string(),
        }
    }

    /// The rank's flows in the current phase, for naming what a lost rank
    /// broke: "; its flows: 0 (1->0), 4 (1->2)" (the first few).
    pub(super) fn flows_of(&self, rank: usize) -> String {
        const SHOWN: usize = 4;
        let phase = match &self.stage {
            Stage::Setup { phase, .. }
            | Stage::Connecting { phase, .. }
            | Stage::Running { phase, .. }
            | Stage::Aborting { phase, .. } => *phase,
            Stage::Joining { .. } | Stage::Probing | Stage::Saving { .. } | Stage::Done => return String::new(),
        };
        let mine: Vec<String> = self.plan.phases[phase]
            .flows
            .iter()
            .filter(|f| f.src == rank || f.dst == rank)
            .map(|f| format!("{} ({}->{})", f.id, f.src, f.dst))
            .collect();
        match mine.len() {
            0 => String::new(),
            n if n > SHOWN => format!("; its flows: {} and {} more", mine[..SHOWN].join(", "), n - SHOWN),
            _ => format!("; its flows: {}", mine.join(", ")),
        }
    }
}

/// The first ranks of a list and how many more: a job of thousands that
/// did not answer is one line, not a screenful.
pub(super) fn list(ranks: &[usize]) -> String {
    const SHOWN: usize = 16;
    let shown = ranks.iter().take(SHOWN).map(usize::to_string).collect::<Vec<_>>().join(", ");
    match ranks.len().saturating_sub(SHOWN) {
        0 => shown,
        more => format!("{shown} and {more} more"),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_long_list_of_ranks_is_cut_with_its_count() {
        assert_eq!(super::list(&[3, 4]), "3, 4");
        let ranks: Vec<usize> = (1..=16_383).collect();
        assert_eq!(super::list(&ranks), "1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16 and 16367 more");
    }
}
