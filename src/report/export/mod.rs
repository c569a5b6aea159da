//! The documents a run is exported to, behind one trait: run.json, the
//! CSVs, summary.md and junit.xml (report.html is `report::html`'s).

pub(crate) mod csv_files;
pub mod junit;
mod markdown;

use std::path::Path;

pub use markdown::MarkdownExporter;

use crate::report::terminal::stdout;
use crate::report::ReportError;
use crate::result::RunResult;

/// Renders a run into one document.
pub trait Exporter {
    fn render(&self, run: &RunResult) -> Result<Vec<u8>, ReportError>;
}

/// `run.json`: the result struct itself, the schema of record.
pub struct JsonExporter;

impl Exporter for JsonExporter {
    fn render(&self, run: &RunResult) -> Result<Vec<u8>, ReportError> {
        let mut out = serde_json::to_vec_pretty(run)
            .map_err(|e| ReportError::Encode { what: "run.json", reason: e.to_string() })?;
        out.push(b'\n');
        Ok(out)
    }
}

/// One row per flow and phase: `flows.csv`.
pub struct CsvExporter;

impl Exporter for CsvExporter {
    fn render(&self, run: &RunResult) -> Result<Vec<u8>, ReportError> {
        csv_files::flows(run)
    }
}

/// Writes an export to `target`, `-` meaning stdout.
pub fn export_to(exporter: &dyn Exporter, run: &RunResult, target: &Path) -> Result<(), ReportError> {
    let bytes = exporter.render(run)?;
    let shown = target.display().to_string();
    let result = if shown == "-" { stdout::write(&bytes) } else { std::fs::write(target, &bytes) };
    result.map_err(|cause| ReportError::Write { path: shown, cause })
}
