//! Where a finished run goes, the same for `run` and `pair`: its results
//! folder, the exports, and the summary (on stderr when an export took
//! stdout). A step that fails does not stop the others: the summary and
//! every other export still come out, and the error names the path.

use std::path::{Path, PathBuf};

use crate::cli::SaveArgs;
use crate::commands::Failure;
use crate::report::{self, Exporter};
use crate::result::{RunResult, RunStatus};

pub struct Output<'a> {
    pub save: &'a SaveArgs,
    /// Each `--export-…` given, with its writer; `-` is stdout.
    pub exports: Vec<(&'a Path, &'a dyn Exporter)>,
    /// Print the summary (and where the results went).
    pub summary: bool,
}

impl Output<'_> {
    /// Whether some export claims stdout, so the summary must go elsewhere.
    fn stdout_taken(&self) -> bool {
        self.exports.iter().any(|(target, _)| target.as_os_str() == "-")
    }

    /// Saves, exports and prints `summary`; then the first error, if any.
    pub fn deliver(&self, result: &RunResult, summary: &str) -> Result<(), Failure> {
        let saved = self.save(result);
        let mut errors: Vec<String> = saved.as_ref().err().into_iter().map(|e| e.to_string()).collect();
        for (target, exporter) in &self.exports {
            if let Err(e) = report::export_to(*exporter, result, target) {
                errors.push(e.to_string());
            }
        }
        if self.summary {
            match self.stdout_taken() {
                true => eprint!("{summary}"),
                false => print!("{summary}"),
            }
            if let Ok(Some(dir)) = &saved {
                eprintln!("results: {}", dir.display());
            }
        }
        match errors.is_empty() {
            true => Ok(()),
            false => Err(Failure::RunFailed(anyhow::anyhow!(errors.join("; ")))),
        }
    }

    /// Writes the results folder unless --no-save; its path when written.
    fn save(&self, result: &RunResult) -> Result<Option<PathBuf>, report::ReportError> {
        match self.save.no_save {
            true => Ok(None),
            false => report::results_dir::write(result, &self.save.results).map(Some),
        }
    }
}

/// How the run ended: failed, a check did not pass, or fine.
pub fn verdict(result: &RunResult) -> Result<(), Failure> {
    match (&result.status, &result.acceptance) {
        (RunStatus::Failed { error }, _) => Err(Failure::RunFailed(anyhow::anyhow!(error.clone()))),
        (RunStatus::Ok, Some(a)) if !a.passed => Err(Failure::CheckFailed(report::verdict_line(a))),
        (RunStatus::Ok, _) => Ok(()),
    }
}
