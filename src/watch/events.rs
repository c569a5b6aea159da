//! What a watch keeps of each window and each event: `windows.jsonl` (every
//! path's p50, p99 and loss), `events.jsonl` (suspects appearing,
//! persisting and clearing, the workers failing and rejoining), the
//! metrics, and a line on stderr for each. [`Judge`] records the runs of a
//! watch as they go and judges each window as it ends.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::SystemTime;

use serde::Serialize;

use super::log::{Log, LogError};
use super::tracker::{Change, Named, Tracker};
use super::WatchOptions;
use crate::acceptance;
use crate::hostfile::Host;
use crate::plan::Fabric;
use crate::report::openmetrics::Live;
use crate::report::tables::labels;
use crate::result::{Checked, PhaseResult, RunResult, Suspect, SuspectKind, Verdict};
use crate::run::record::{Recorded, Recorder};
use crate::run::Prepared;
use crate::scenario::topology::RunTopology;
use crate::scenario::CheckSpec;

/// The two files a watch appends to.
pub struct Files {
    pub events: Log,
    pub windows: Log,
}

/// One event of `events.jsonl`, after its time and window.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "event", rename_all = "kebab-case")]
pub enum What {
    /// The watch began: its hosts, paths and window.
    Started {
        hosts: usize,
        paths: usize,
        window_s: f64,
    },
    Appeared(Seen),
    Persists(Seen),
    Cleared(Seen),
    /// A launch or a run of the workers failed; they start again in `retry_in_s`.
    RunFailed {
        error: String,
        retry_in_s: f64,
    },
    /// After a failure, every rank joined again.
    Rejoined {
        ranks: usize,
    },
    Stopped {
        reason: String,
    },
    /// The watch measured the windows it was asked for.
    Finished,
}

/// A suspect as an event names it: `windows` in a row it was suspected.
#[derive(Clone, Debug, Serialize)]
pub struct Seen {
    pub suspect: String,
    pub evidence: String,
    pub windows: u64,
}

impl What {
    /// The event's name, as the file and the metrics' `event` label say it.
    pub fn name(&self) -> &'static str {
        match self {
            What::Started { .. } => "started",
            What::Appeared(_) => "appeared",
            What::Persists(_) => "persists",
            What::Cleared(_) => "cleared",
            What::RunFailed { .. } => "run-failed",
            What::Rejoined { .. } => "rejoined",
            What::Stopped { .. } => "stopped",
            What::Finished => "finished",
        }
    }
}

#[derive(Serialize)]
struct EventLine<'a> {
    at: String,
    /// Windows judged before this event.
    window: u64,
    #[serde(flatten)]
    what: &'a What,
}

/// One line of `windows.jsonl`.
#[derive(Serialize)]
struct WindowLine<'a> {
    at: String,
    window: u64,
    paths: usize,
    failing: usize,
    suspects: Vec<&'a str>,
    flows: Vec<PathLine<'a>>,
}

/// One path in one window: µs, % of probes lost.
#[derive(Serialize)]
struct PathLine<'a> {
    src: &'a str,
    dst: &'a str,
    src_rank: usize,
    dst_rank: usize,
    probes: u64,
    p50_us: Option<f64>,
    p99_us: Option<f64>,
    lost_pct: Option<f64>,
    error: Option<&'a str>,
}

/// Follows the runs of a watch (as their [`Recorder`]) and judges each window.
pub(super) struct Judge {
    checks: CheckSpec,
    topology: Option<RunTopology>,
    hosts: Vec<Host>,
    tracker: Tracker,
    files: Files,
    live: Option<Arc<Live>>,
    progress: bool,
    /// Windows judged so far, over every launch.
    windows: u64,
    /// The running launch's result without phases, to judge one window on.
    shell: Option<RunResult>,
    /// A failure was logged and no launch has joined since.
    failed: bool,
    /// The first file that could not be written: it ends the watch.
    unwritten: Option<LogError>,
}

impl Judge {
    pub(super) fn new(prepared: &Prepared, options: &WatchOptions, files: Files, live: Option<Arc<Live>>) -> Judge {
        Judge {
            checks: options.checks.clone(),
            topology: prepared.topology.clone(),
            hosts: prepared.hosts.clone(),
            tracker: Tracker::default(),
            files,
            live,
            progress: options.progress,
            windows: 0,
            shell: None,
            failed: false,
            unwritten: None,
        }
    }

    pub(super) fn windows(&self) -> u64 {
        self.windows
    }

    /// Appends the event, counts it in the metrics and says it.
    pub(super) fn log(&mut self, what: What) -> Result<(), LogError> {
        let line = EventLine { at: now(), window: self.windows, what: &what };
        if let Some(live) = &self.live {
            live.event(what.name());
        }
        let detail = serde_json::to_string(&what).unwrap_or_default();
        crate::diag!("watch: window {}: {} {detail}", self.windows, what.name());
        self.files.events.append(&line)
    }

    /// The launch that follows a failure: its joining is an event.
    pub(super) fn relaunching(&mut self) {
        self.failed = true;
    }

    /// The first write that failed while a run recorded.
    pub(super) fn written(&mut self) -> Result<(), LogError> {
        self.unwritten.take().map_or(Ok(()), Err)
    }

    fn window_ended(&mut self, run: &RunResult, phase: &PhaseResult) -> Result<(), LogError> {
        let Some(shell) = &mut self.shell else { return Ok(()) };
        shell.phases = vec![phase.clone()];
        shell.probes.clone_from(&run.probes);
        let fabric = self.topology.as_ref().map(|t| Fabric::new(&t.topology, &self.hosts));
        let paths = fabric.as_ref().map(|f| f as &dyn acceptance::Paths);
        let judged = acceptance::judge(shell, &self.checks, paths);
        let suspects = judged.as_ref().map_or_else(Vec::new, |a| a.suspects.iter().map(named).collect());
        let failing = judged.as_ref().map_or(0, |a| {
            let failed = a.checks.iter().filter(|c| c.verdict == Verdict::Fail);
            let flows = failed.filter_map(|c| match c.item {
                Checked::Flow { flow, .. } => Some(flow),
                _ => None,
            });
            flows.collect::<BTreeSet<_>>().len()
        });
        self.windows += 1;
        let changes = self.tracker.window(suspects);
        let open: Vec<&str> = self.tracker.open().collect();
        let line = WindowLine {
            at: now(),
            window: self.windows,
            paths: phase.flows.len(),
            failing,
            suspects: open.clone(),
            flows: phase.flows.iter().map(path_line).collect(),
        };
        self.files.windows.append(&line)?;
        if self.progress {
            crate::diag!(
                "watch: window {}: {} path(s), {failing} failing, suspects: {}",
                self.windows,
                line.paths,
                if open.is_empty() { "none".to_string() } else { open.join("; ") }
            );
        }
        if let Some(live) = &self.live {
            live.judged(&open);
        }
        for changed in changes {
            let seen =
                Seen { suspect: changed.suspect.label, evidence: changed.suspect.evidence, windows: changed.windows };
            self.log(match changed.change {
                Change::Appeared => What::Appeared(seen),
                Change::Persists => What::Persists(seen),
                Change::Cleared => What::Cleared(seen),
            })?;
        }
        Ok(())
    }
}

/// A suspect as it is known from one window to the next: by its label,
/// without the way an uplink failed (the evidence keeps it), which one
/// window's few probes may tell and the next not.
fn named(suspect: &Suspect) -> Named {
    let mut both_ways = suspect.clone();
    let one_way = match &mut both_ways.kind {
        SuspectKind::Uplink { one_way, .. } => std::mem::take(one_way),
        _ => Vec::new(),
    };
    let evidence = match one_way.is_empty() {
        true => suspect.evidence.clone(),
        false => format!("{} ({})", suspect.evidence, labels::suspect(suspect)),
    };
    Named { label: labels::suspect(&both_ways), evidence }
}

fn path_line(f: &crate::result::FlowResult) -> PathLine<'_> {
    PathLine {
        src: &f.src_host,
        dst: &f.dst_host,
        src_rank: f.src,
        dst_rank: f.dst,
        probes: f.latency.map_or(0, |l| l.samples),
        p50_us: f.latency.map(|l| l.typical_us),
        p99_us: f.latency.map(|l| l.p99_us),
        lost_pct: f.probes.map(|p| p.lost_ratio * 100.0),
        error: f.error.as_deref(),
    }
}

fn now() -> String {
    humantime::format_rfc3339_seconds(SystemTime::now()).to_string()
}

impl Recorder for Judge {
    fn record(&mut self, run: &RunResult, what: Recorded<'_>) {
        if let Some(live) = &self.live {
            live.record(run, what);
        }
        let written = match what {
            Recorded::Started => {
                self.shell = Some(RunResult { phases: Vec::new(), probes: Vec::new(), ..run.clone() });
                Ok(())
            }
            Recorded::Joined { joined, total } if joined == total && self.failed => {
                self.failed = false;
                self.log(What::Rejoined { ranks: total })
            }
            Recorded::Phase(phase) => self.window_ended(run, phase),
            _ => Ok(()),
        };
        if let Err(e) = written {
            self.unwritten.get_or_insert(e);
        }
    }

    fn render(&mut self, _: &RunResult) {}
}
