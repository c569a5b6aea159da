//! The results folder of a run: `results/<UTC time>-<scenario>/` with
//! run.json, flows.csv, intervals.csv, ranks.csv and summary.md.

use std::path::{Path, PathBuf};

use crate::report::{csv_files, CsvExporter, Exporter, JsonExporter, MarkdownExporter, ReportError};
use crate::result::RunResult;

/// `2026-11-30T08-12-29Z-fan-in`: sortable, and safe on every filesystem.
pub fn folder_name(run: &RunResult) -> String {
    let time = run.started_at.replace(':', "-");
    let name: String = run
        .scenario
        .run
        .name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' })
        .collect();
    format!("{time}-{name}")
}

/// Writes every file; returns the folder.
pub fn write(run: &RunResult, parent: &Path) -> Result<PathBuf, ReportError> {
    let dir = parent.join(folder_name(run));
    let io = |path: &Path| {
        let path = path.display().to_string();
        move |cause| ReportError::Write { path, cause }
    };
    std::fs::create_dir_all(&dir).map_err(io(&dir))?;
    let files: [(&str, Vec<u8>); 5] = [
        ("run.json", JsonExporter.render(run)?),
        ("flows.csv", CsvExporter.render(run)?),
        ("intervals.csv", csv_files::intervals(run)?),
        ("ranks.csv", csv_files::ranks(run)?),
        ("summary.md", MarkdownExporter.render(run)?),
    ];
    for (name, bytes) in files {
        let path = dir.join(name);
        std::fs::write(&path, bytes).map_err(io(&path))?;
    }
    Ok(dir)
}
