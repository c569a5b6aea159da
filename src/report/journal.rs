//! The journal of a run: one JSON line per change, appended and flushed to
//! disk as the run goes — its start (scenario, hosts, plan), each rank's
//! probe, each phase, and its end (status, launch time, checks). It is the
//! results folder's record of authority: run.json and every other file are
//! renderings of it, so a run whose launcher was killed, or whose host lost
//! power, still has everything up to its last finished phase.

use std::fs::File;
use std::io::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::report::ReportError;
use crate::result::{Acceptance, PhaseResult, RankProbe, RunResult, RunStatus};

pub const FILE: &str = "journal.jsonl";

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Entry {
    /// The result as it stands before launch: no phases yet.
    Started(Box<RunResult>),
    Probe(RankProbe),
    Phase(Box<PhaseResult>),
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

/// The run a journal describes. A last line cut short (the disk filled,
/// the power went) is left out; any other unreadable line is an error.
pub fn replay(text: &str, path: &Path) -> Result<RunResult, ReportError> {
    let bad = |line: usize, reason: String| ReportError::Read { path: format!("{}:{line}", path.display()), reason };
    let lines: Vec<&str> = text.lines().collect();
    let mut run: Option<RunResult> = None;
    let mut ended = false;
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
            (Entry::Phase(phase), Some(run)) => run.phases.push(*phase),
            (Entry::Ended { status, launch_s, acceptance }, Some(run)) => {
                (run.status, run.launch_s, run.acceptance) = (status, launch_s, acceptance.map(|a| *a));
                ended = true;
            }
        }
    }
    let mut run = run.ok_or_else(|| bad(1, "the journal is empty: the run never started".into()))?;
    if !ended {
        run.status = unfinished(&run);
    }
    run.summarize_phases();
    Ok(run)
}
