//! The results folder of a run: `results/<UTC time>-<scenario>/` with
//! run.json, flows.csv, intervals.csv, ranks.csv, summary.md, report.html
//! and, when the run had checks, junit.xml.

use std::path::{Path, PathBuf};

use crate::report::{
    csv_files, CsvExporter, Exporter, HtmlExporter, JsonExporter, JunitExporter, MarkdownExporter, ReportError,
};
use crate::result::{RunResult, SCHEMA_VERSION};

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

/// Makes the run's folder under `parent` and writes every file; returns the folder.
pub fn write(run: &RunResult, parent: &Path) -> Result<PathBuf, ReportError> {
    let dir = parent.join(folder_name(run));
    std::fs::create_dir_all(&dir).map_err(|cause| ReportError::Write { path: dir.display().to_string(), cause })?;
    write_into(run, &dir, true)?;
    Ok(dir)
}

/// Writes every file into `dir`; run.json too unless it is the source
/// being re-rendered (`fabricbench report`).
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
    if run.acceptance.is_some() {
        files.push(("junit.xml", JunitExporter.render(run)?));
    }
    for (name, bytes) in files {
        let path = dir.join(name);
        std::fs::write(&path, bytes).map_err(|cause| ReportError::Write { path: path.display().to_string(), cause })?;
    }
    Ok(())
}

/// Reads a run back from its folder (or its run.json).
pub fn read(path: &Path) -> Result<RunResult, ReportError> {
    let file = if path.is_dir() { path.join("run.json") } else { path.to_path_buf() };
    let read = |reason: String| ReportError::Read { path: file.display().to_string(), reason };
    let text =
        std::fs::read_to_string(&file).map_err(|e| read(format!("{e} (give a results folder or its run.json)")))?;
    let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| read(e.to_string()))?;
    let version = value.get("schema_version").and_then(serde_json::Value::as_u64).unwrap_or(0);
    if version == 0 || version > u64::from(SCHEMA_VERSION) {
        return Err(read(format!(
            "schema_version {version}: this fabricbench reads schema versions 1 to {SCHEMA_VERSION}"
        )));
    }
    serde_json::from_value(value).map_err(|e| read(format!("not a fabricbench run.json: {e}")))
}
