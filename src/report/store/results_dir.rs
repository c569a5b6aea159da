//! The results folder of a run: `results/<UTC time>-<name>/`, made before
//! anything is launched, holding the run's inputs (scenario, hostfile,
//! command line), its journal (the record of authority), and the renderings
//! of it: run.json, flows.csv, intervals.csv, ranks.csv, summary.md,
//! report.html and, when the run had checks, junit.xml. Every rendering is
//! rewritten after each phase through a temporary file and a rename, so a
//! reader never sees half a file.

use std::fs::{File, OpenOptions};
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::report::export::junit::JunitExporter;
use crate::report::export::{csv_files, CsvExporter, Exporter, JsonExporter, MarkdownExporter};
use crate::report::html::HtmlExporter;
use crate::report::store::journal::{self, Entry};
use crate::report::ReportError;
use crate::result::{RunResult, RunStatus, SCHEMA_VERSION};
use crate::run::record::{Recorded, Recorder};

/// The longest name a folder takes from `run.name`.
const NAME_CHARS: usize = 64;
/// Folders of one name in one millisecond before giving up.
const SUFFIXES: usize = 100;

/// One of the run's input files, kept in its folder as given.
pub struct Input {
    /// The file's name in the folder, e.g. "scenario.toml".
    pub name: &'static str,
    pub bytes: Vec<u8>,
}

/// A run's folder, open for its journal.
pub struct ResultsDir {
    path: PathBuf,
    journal: File,
    /// The first error met while recording; the run goes on without it.
    failed: Option<ReportError>,
}

impl ResultsDir {
    /// Makes a new folder under `parent` (never an existing one: two runs
    /// started in the same millisecond get `…-2`), writes `inputs` into it
    /// and opens the journal. An error names the path and the cause.
    pub fn create(parent: &Path, name: &str, inputs: &[Input]) -> Result<ResultsDir, ReportError> {
        let fail = |path: &Path, cause| ReportError::Write { path: path.display().to_string(), cause };
        let path = new_folder(parent, name)?;
        for Input { name: file, bytes } in inputs {
            replace(&path.join(file), bytes)?;
        }
        let journal_path = path.join(journal::FILE);
        let journal =
            OpenOptions::new().create_new(true).append(true).open(&journal_path).map_err(|e| fail(&journal_path, e))?;
        // Held while the launcher lives (the kernel lets go when it dies):
        // how a reader tells a run still going from one whose launcher was
        // stopped. A filesystem without locks only loses that distinction.
        if let Err(e) = journal.try_lock() {
            tracing::warn!(
                "{}: cannot lock the journal ({e}); `fabricbench report` will not see this run as live",
                journal_path.display()
            );
        }
        Ok(ResultsDir { path, journal, failed: None })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn append(&mut self, entry: &Entry) -> Result<(), ReportError> {
        journal::append(&mut self.journal, entry, &self.path.join(journal::FILE))
    }

    /// The end of the run: journaled, then every file written from `run`.
    /// The first error met while recording comes out here, if nothing else
    /// failed.
    pub fn finish(&mut self, run: &RunResult) -> Result<(), ReportError> {
        self.append(&Entry::ended(run))?;
        write_into(run, &self.path, true)?;
        self.failed.take().map_or(Ok(()), Err)
    }

    /// Journals what changed; the start is rendered at once too.
    fn try_record(&mut self, run: &RunResult, what: Recorded<'_>) -> Result<(), ReportError> {
        match what {
            Recorded::Started => {
                self.append(&Entry::Started(Box::new(run.clone())))?;
                self.try_render(run)
            }
            Recorded::Probe(probe) => self.append(&Entry::Probe(probe.clone())),
            Recorded::Phase(phase) => self.append(&Entry::Phase(Box::new(phase.clone()))),
            Recorded::Interval { phase, interval, gbps, .. } => self.append(&Entry::Interval { phase, interval, gbps }),
            // Live only: the journal's phases and intervals say as much.
            Recorded::Joined { .. } | Recorded::PhaseStarted { .. } => Ok(()),
            // Not journaled: a journal with no end already replays as a
            // failure; the rendered files are what a reader opens first.
            Recorded::Stopping { reason } => {
                self.render_as(run, RunStatus::Failed { error: journal::stopping(run, reason) })
            }
        }
    }

    /// Renders the folder anew as the run stands (its status says it has
    /// not ended).
    fn try_render(&mut self, run: &RunResult) -> Result<(), ReportError> {
        self.render_as(run, journal::running(run))
    }

    fn render_as(&self, run: &RunResult, status: RunStatus) -> Result<(), ReportError> {
        let mut now = run.clone();
        now.status = status;
        now.summarize_phases();
        write_into(&now, &self.path, true)
    }

    fn keep(&mut self, outcome: Result<(), ReportError>) {
        if let Err(e) = outcome {
            tracing::warn!("results folder: {e}; the run goes on");
            self.failed.get_or_insert(e);
        }
    }
}

impl Recorder for ResultsDir {
    fn record(&mut self, run: &RunResult, what: Recorded<'_>) {
        let outcome = self.try_record(run, what);
        self.keep(outcome);
    }

    fn render(&mut self, run: &RunResult) {
        let outcome = self.try_render(run);
        self.keep(outcome);
    }
}

/// `2026-11-30T08-12-29.123Z-fan-in`: sortable, and safe on every
/// filesystem.
/// Makes `parent/<UTC time>-<name>/` (`…-2` and so on where it exists).
pub fn new_folder(parent: &Path, name: &str) -> Result<PathBuf, ReportError> {
    let fail = |path: &Path, cause| ReportError::Write { path: path.display().to_string(), cause };
    std::fs::create_dir_all(parent).map_err(|e| fail(parent, e))?;
    let base = folder_name(SystemTime::now(), name);
    for n in 1..=SUFFIXES {
        let path = match n {
            1 => parent.join(&base),
            n => parent.join(format!("{base}-{n}")),
        };
        match std::fs::create_dir(&path) {
            Ok(()) => return Ok(path),
            Err(e) if e.kind() == ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(fail(&path, e)),
        }
    }
    Err(fail(&parent.join(&base), ErrorKind::AlreadyExists.into()))
}

fn folder_name(at: SystemTime, name: &str) -> String {
    let time = humantime::format_rfc3339_millis(at).to_string().replace(':', "-");
    let name: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' { c } else { '_' })
        .take(NAME_CHARS)
        .collect();
    format!("{time}-{name}")
}

/// Writes every rendering into `dir`; run.json too unless it is the source
/// being re-rendered.
pub fn write_into(run: &RunResult, dir: &Path, with_json: bool) -> Result<(), ReportError> {
    let mut files: Vec<(&str, Vec<u8>)> = vec![
        ("flows.csv", CsvExporter.render(run)?),
        ("intervals.csv", csv_files::intervals(run)?),
        ("ranks.csv", csv_files::ranks(run)?),
        ("summary.md", MarkdownExporter.render(run)?),
        ("report.html", HtmlExporter.render(run)?),
    ];
    if with_json {
        files.push(("run.json", JsonExporter.render(run)?));
    }
    if run.acceptance.is_some() || run.gate.is_some() {
        files.push(("junit.xml", JunitExporter.render(run)?));
    }
    if run.repeats.is_some() {
        files.push(("repeats.csv", csv_files::repeats(run)?));
    }
    for (name, bytes) in files {
        replace(&dir.join(name), &bytes)?;
    }
    Ok(())
}

/// Puts `bytes` at `path` whole or not at all: a temporary file beside it,
/// flushed, then renamed over it.
fn replace(path: &Path, bytes: &[u8]) -> Result<(), ReportError> {
    let fail = |cause| ReportError::Write { path: path.display().to_string(), cause };
    let mut temporary = path.as_os_str().to_owned();
    temporary.push(".tmp");
    let temporary = PathBuf::from(temporary);
    let mut file = File::create(&temporary).map_err(fail)?;
    std::io::Write::write_all(&mut file, bytes).and_then(|()| file.sync_data()).map_err(fail)?;
    std::fs::rename(&temporary, path).map_err(fail)
}

/// Where a run is read from: its folder's journal when there is one (the
/// record of authority), else its run.json (older folders, or a run.json
/// given by name).
pub fn source_of(path: &Path) -> PathBuf {
    match path.is_dir() {
        true if path.join(journal::FILE).is_file() => path.join(journal::FILE),
        true => path.join("run.json"),
        false => path.to_path_buf(),
    }
}

/// Whether a launcher still holds the journal `file`: its run is going.
fn still_going(file: &Path) -> bool {
    let Ok(journal) = File::open(file) else { return false };
    matches!(journal.try_lock_shared(), Err(std::fs::TryLockError::WouldBlock))
}

/// Reads a run back from its folder, its journal or its run.json.
pub fn read(path: &Path) -> Result<RunResult, ReportError> {
    let file = source_of(path);
    let read = |reason: String| ReportError::Read { path: file.display().to_string(), reason };
    let text =
        std::fs::read_to_string(&file).map_err(|e| read(format!("{e} (give a results folder or its run.json)")))?;
    if file.file_name().is_some_and(|n| n == journal::FILE) {
        let mut run = journal::replay(&text, &file)?;
        if matches!(run.status, RunStatus::Failed { .. }) && still_going(&file) {
            run.status = journal::running(&run);
        }
        return Ok(run);
    }
    let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| read(e.to_string()))?;
    let version = value.get("schema_version").and_then(serde_json::Value::as_u64).unwrap_or(0);
    if version == 0 || version > u64::from(SCHEMA_VERSION) {
        return Err(read(format!(
            "schema_version {version}: this fabricbench reads schema versions 1 to {SCHEMA_VERSION}"
        )));
    }
    serde_json::from_value(value).map_err(|e| read(format!("not a fabricbench run.json: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folder_names_are_sortable_and_safe() {
        let at = SystemTime::UNIX_EPOCH + std::time::Duration::from_millis(1_764_577_949_123);
        assert_eq!(folder_name(at, "fan in/../x"), "2025-12-01T08-32-29.123Z-fan_in_.._x");
        assert_eq!(folder_name(at, &"n".repeat(500)).len(), "2025-12-01T08-32-29.123Z-".len() + NAME_CHARS);
    }

    #[test]
    fn two_runs_in_one_millisecond_get_two_folders() {
        let parent = tempfile::tempdir().unwrap();
        let inputs = [Input { name: "scenario.toml", bytes: b"[run]\n".to_vec() }];
        let dirs: Vec<PathBuf> =
            (0..3).map(|_| ResultsDir::create(parent.path(), "same", &inputs).unwrap().path().to_path_buf()).collect();
        assert_eq!(std::fs::read_dir(parent.path()).unwrap().count(), 3, "{dirs:?}");
        for dir in &dirs {
            assert_eq!(std::fs::read(dir.join("scenario.toml")).unwrap(), b"[run]\n");
            assert!(dir.join(journal::FILE).is_file());
        }
    }

    #[test]
    fn an_unwritable_parent_is_named() {
        let parent = tempfile::tempdir().unwrap();
        let blocker = parent.path().join("file");
        std::fs::write(&blocker, "").unwrap();
        let Err(e) = ResultsDir::create(&blocker.join("results"), "x", &[]) else { panic!("created under a file") };
        assert!(e.to_string().starts_with(&format!("cannot write {}", blocker.join("results").display())), "{e}");
    }
}
