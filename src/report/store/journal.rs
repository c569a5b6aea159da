//! The journal of a run: one JSON line per change, appended and flushed to
//! disk as the run goes — its start (scenario, hosts, plan), each rank's
//! probe, each phase, and its end (status, launch time, checks). It is the
//! results folder's record of authority: run.json and every other file are
//! renderings of it, so a run whose launcher was killed, or whose host lost
//! power, still has everything up to its last finished phase. A phase
//! under way adds one line per interval (its aggregate Gb/s), so a soak of
//! hours can be read while it runs.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::report::ReportError;
use crate::result::{Acceptance, LivePhase, PhaseResult, RankProbe, RunResult, RunStatus};

pub const FILE: &str = "journal.jsonl";

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Entry {
    /// The result as it stands before launch: no phases yet.
    Started(Box<RunResult>),
    Probe(RankProbe),
    Phase(Box<PhaseResult>),
    /// One interval of the phase under way, every rank counted: Gb/s.
    Interval {
        phase: usize,
        interval: u32,
        gbps: f64,
    },
    Ended {
        status: RunStatus,
        launch_s: Option<f64>,
        acceptance: Option<Box<Acceptance>>,
    },
}

impl Entry {
    pub fn ended(run: &RunResult) -> Entry {
        Entry::Ended {
            status: run.status.clone(),
            launch_s: run.launch_s,
            acceptance: run.acceptance.clone().map(Box::new),
        }
    }
}

/// Appends one entry and flushes it to the disk before returning.
pub fn append(file: &mut File, entry: &Entry, path: &Path) -> Result<(), ReportError> {
    let write = |cause| ReportError::Write { path: path.display().to_string(), cause };
    let mut line =
        serde_json::to_vec(entry).map_err(|e| ReportError::Encode { what: "journal", reason: e.to_string() })?;
    line.push(b'\n');
    file.write_all(&line).map_err(write)?;
    // An interval line lost to a power cut is a live view lost, not a
    // measurement: the phase's entry has it again. Not worth a disk flush
    // ten times a second.
    if matches!(entry, Entry::Interval { .. }) {
        return Ok(());
    }
    file.sync_data().map_err(write)
}

/// The status of a run whose journal has no end: what it says is all there is.
pub fn unfinished(run: &RunResult) -> RunStatus {
    RunStatus::Failed {
        error: format!(
            "incomplete: {} of {} phase(s) recorded and the run had not ended (still going, or its launcher was stopped before it could finish)",
            run.phases.len(),
            run.plan.phases.len()
        ),
    }
}

/// The status of a run a stop signal is ending, written before the
/// workers wind down: if the launcher is killed meanwhile, this stays.
pub fn stopping(run: &RunResult, reason: &str) -> String {
    format!(
        "{reason}: {} of {} phase(s) recorded; the launcher was ending the run (a later status replaces this one \
         when it could finish)",
        run.phases.len(),
        run.plan.phases.len()
    )
}

/// The status of a run whose launcher still holds its journal.
pub fn running(run: &RunResult) -> RunStatus {
    let live = run.live.as_ref().map_or_else(String::new, |l| {
        format!("; phase {} under way, {} interval(s) so far", l.phase, l.interval_gbps.len())
    });
    RunStatus::Running {
        note: format!(
            "{} of {} phase(s) recorded{live}; this is what the results folder holds so far",
            run.phases.len(),
            run.plan.phases.len()
        ),
    }
}

/// The run a journal describes. A last line cut short (the disk filled,
/// the power went) is left out; any other unreadable line is an error.
pub fn replay(text: &str, path: &Path) -> Result<RunResult, ReportError> {
    let bad = |line: usize, reason: String| ReportError::Read { path: format!("{}:{line}", path.display()), reason };
    let lines: Vec<&str> = text.lines().collect();
    let mut run: Option<RunResult> = None;
    let mut ended = false;
    // The phase under way and its intervals: the last phase with interval
    // lines and no entry of its own yet.
    let mut live: Option<(usize, BTreeMap<u32, f64>)> = None;
    for (i, line) in lines.iter().enumerate() {
        let entry = match serde_json::from_str::<Entry>(line) {
            Ok(entry) => entry,
            Err(_) if i + 1 == lines.len() && !text.ends_with('\n') => break,
            Err(e) => return Err(bad(i + 1, format!("not a journal entry: {e}"))),
        };
        match (entry, run.as_mut()) {
            (Entry::Started(start), None) => run = Some(*start),
            (Entry::Started(_), Some(_)) => return Err(bad(i + 1, "a second start".into())),
            (_, None) => return Err(bad(i + 1, "an entry before the run's start".into())),
            (Entry::Probe(probe), Some(run)) => {
                let at = run.probes.partition_point(|p| p.rank < probe.rank);
                run.probes.insert(at, probe);
            }
            (Entry::Phase(phase), Some(run)) => {
                if live.as_ref().is_some_and(|(p, _)| *p == phase.index) {
                    live = None;
                }
                run.phases.push(*phase);
            }
            (Entry::Interval { phase, interval, gbps }, Some(_)) => {
                if live.as_ref().is_none_or(|(p, _)| *p != phase) {
                    live = Some((phase, BTreeMap::new()));
                }
                if let Some((_, intervals)) = live.as_mut() {
                    intervals.insert(interval, gbps);
                }
            }
            (Entry::Ended { status, launch_s, acceptance }, Some(run)) => {
                (run.status, run.launch_s, run.acceptance) = (status, launch_s, acceptance.map(|a| *a));
                ended = true;
            }
        }
    }
    let mut run = run.ok_or_else(|| bad(1, "the journal is empty: the run never started".into()))?;
    if !ended {
        run.live = live.map(|(phase, intervals)| LivePhase { phase, interval_gbps: intervals.into_values().collect() });
        run.status = unfinished(&run);
    }
    run.summarize_phases();
    Ok(run)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result::RunResult;

    fn line(entry: &Entry) -> String {
        serde_json::to_string(entry).unwrap() + "\n"
    }

    /// A recorded run.json's start, and its first phase.
    fn started() -> (RunResult, PhaseResult) {
        let fixture = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/v3-fan-in.json");
        let mut run: RunResult = serde_json::from_str(&std::fs::read_to_string(fixture).unwrap()).unwrap();
        let phase = run.phases.remove(0);
        run.phases.clear();
        (run, phase)
    }

    #[test]
    fn interval_lines_are_the_phase_under_way_until_its_entry() {
        let (run, phase) = started();
        let path = Path::new("journal.jsonl");
        let mut text = line(&Entry::Started(Box::new(run.clone())));
        for (interval, gbps) in [(2, 8.0), (1, 9.0), (3, 7.0)] {
            text += &line(&Entry::Interval { phase: 0, interval, gbps });
        }
        let live = replay(&text, path).unwrap();
        assert_eq!(live.live, Some(LivePhase { phase: 0, interval_gbps: vec![9.0, 8.0, 7.0] }));
        assert!(matches!(&live.status, RunStatus::Failed { error } if error.starts_with("incomplete")));
        let note = |run: &RunResult| match running(run) {
            RunStatus::Running { note } => note,
            other => panic!("{other:?}"),
        };
        assert!(note(&live).contains("phase 0 under way, 3 interval(s) so far"), "{}", note(&live));
        text += &line(&Entry::Phase(Box::new(phase)));
        let recorded = replay(&text, path).unwrap();
        assert_eq!(recorded.live, None, "the phase's entry has it all");
        assert!(note(&recorded).starts_with("1 of "), "{}", note(&recorded));
    }
}
