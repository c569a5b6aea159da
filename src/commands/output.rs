//! Where a run goes, the same for `run` and `pair`: its results folder
//! (made before anything is launched, journaled as the run goes), the
//! exports, and the summary (on stderr when an export took stdout). A step
//! that fails does not stop the others: the summary and every other export
//! still come out, and the error names the path and the cause.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use crate::cli::SaveArgs;
use crate::commands::Failure;
use crate::report::export::{self, Exporter};
use crate::report::openmetrics::Live;
use crate::report::scrape::Endpoint;
use crate::report::store::results_dir::{Input, ResultsDir};
use crate::report::tables::{gate, summary};
use crate::report::terminal::stdout;
use crate::result::{RunResult, RunStatus};
use crate::run::record::{Recorded, Recorder};
use crate::run::signals::Signals;

pub struct Output<'a> {
    /// None with --no-save.
    pub folder: Option<ResultsDir>,
    /// Each `--export-…` given, with its writer; `-` is stdout.
    pub exports: Vec<(&'a Path, &'a dyn Exporter)>,
    /// Print the summary (and where the results went).
    pub summary: bool,
    /// `--metrics`: the run as it goes, and the endpoint serving it.
    pub scraped: Option<Scraped>,
}

/// What `--metrics` serves, kept up to date as the run records.
pub struct Scraped {
    pub live: Arc<Live>,
    /// Serves until dropped.
    endpoint: Endpoint,
}

impl Scraped {
    /// Serves the run `name` of `scenario` at `addr` from now on; an address
    /// that cannot be had is bad input: nothing has run.
    pub fn serve(addr: SocketAddr, name: &str, scenario: &Path) -> Result<Scraped, Failure> {
        let live = Arc::new(Live::new(name, &scenario.display().to_string()));
        let endpoint = Endpoint::serve(addr, live.clone()).map_err(Failure::bad_input)?;
        Ok(Scraped { live, endpoint })
    }

    /// Where it serves (the port chosen, where 0 was asked for).
    pub fn url(&self) -> String {
        format!("http://{}/metrics", self.endpoint.addr())
    }
}

/// The results folder of a run about to start, with its inputs in it
/// (`name`: the run's name); none with --no-save. A folder that cannot be
/// made is bad input: nothing has run.
pub fn folder(save: &SaveArgs, name: &str, inputs: &[Input]) -> Result<Option<ResultsDir>, Failure> {
    match save.no_save {
        true => Ok(None),
        false => ResultsDir::create(&save.results, name, inputs).map(Some).map_err(Failure::bad_input),
    }
}

/// The command line that started this run, as the results folder keeps it.
pub fn command_line() -> Vec<u8> {
    let words: Vec<String> = std::iter::once("fabricbench".to_string()).chain(std::env::args().skip(1)).collect();
    format!("{}\n", words.join(" ")).into_bytes()
}

impl Output<'_> {
    /// What records the run as it goes.
    pub fn recorder(&mut self) -> &mut dyn Recorder {
        self
    }

    /// Whether some export claims stdout, so the summary must go elsewhere.
    fn stdout_taken(&self) -> bool {
        self.exports.iter().any(|(target, _)| target.as_os_str() == "-")
    }

    /// Finishes the folder, exports and prints `summary`; then every error.
    pub fn deliver(&mut self, result: &RunResult, summary: &str) -> Result<(), Failure> {
        let saved = self.folder.as_mut().map(|folder| folder.finish(result));
        let mut errors: Vec<String> = saved.iter().filter_map(|s| s.as_ref().err()).map(|e| e.to_string()).collect();
        for (target, exporter) in &self.exports {
            if let Err(e) = export::export_to(*exporter, result, target) {
                errors.push(e.to_string());
            }
        }
        if self.summary {
            match self.stdout_taken() {
                true => crate::diag::text(summary),
                false => errors.extend(stdout::print(summary).err().map(|e| e.to_string())),
            }
            if let Some(folder) = &self.folder {
                crate::diag!("results: {}", folder.path().display());
            }
        }
        match errors.is_empty() {
            true => Ok(()),
            false => Err(Failure::RunFailed(anyhow::anyhow!(errors.join("; ")))),
        }
    }
}

/// The folder journals every change; `--metrics` serves it too.
impl Recorder for Output<'_> {
    fn record(&mut self, run: &RunResult, what: Recorded<'_>) {
        if let Some(scraped) = &self.scraped {
            scraped.live.record(run, what);
        }
        self.folder.record(run, what);
    }

    fn render(&mut self, run: &RunResult) {
        self.folder.render(run);
    }
}

/// How the run ended: stopped by a signal, failed, a check did not pass, or
/// fine.
pub fn verdict(result: &RunResult, signals: &Signals) -> Result<(), Failure> {
    if let Some(stop) = signals.first() {
        return Err(Failure::Stopped(stop));
    }
    match (&result.status, &result.acceptance) {
        (RunStatus::Failed { error }, _) if result.refused => Err(Failure::BadInput(anyhow::anyhow!(error.clone()))),
        (RunStatus::Failed { error }, _) => Err(Failure::RunFailed(anyhow::anyhow!(error.clone()))),
        (RunStatus::Degraded { reasons }, _) => Err(Failure::Degraded(format!(
            "degraded: {} phase(s) are not a valid measurement: {}",
            reasons.len(),
            reasons.join(" | ")
        ))),
        (RunStatus::Ok, _) if result.gate.as_ref().is_some_and(|g| g.failed().next().is_some()) => {
            let gate = result.gate.as_ref().expect("guarded");
            let checks = result.acceptance.as_ref().filter(|a| !a.passed).map(summary::verdict_line);
            let line = gate::verdict_line(gate);
            Err(Failure::CheckFailed(checks.map_or(line.clone(), |c| format!("{line}; {c}"))))
        }
        (RunStatus::Ok, Some(a)) if !a.passed => Err(Failure::CheckFailed(summary::verdict_line(a))),
        (RunStatus::Ok, _) => Ok(()),
        // Only a folder read back while its run goes says so, never a run that ended.
        (RunStatus::Running { note }, _) => Err(Failure::RunFailed(anyhow::anyhow!("still going: {note}"))),
    }
}
