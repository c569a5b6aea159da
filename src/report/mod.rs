//! Presenting results: the terminal summary, exports (JSON, CSV, Markdown)
//! behind one trait, and the results folder. Nothing here measures.

mod charts;
pub mod compare;
mod congestion;
mod csv_files;
mod datagrams;
mod fit;
mod flaps;
mod gate;
mod gpu_memory;
mod html;
pub mod journal;
mod junit;
mod labels;
mod lanes;
mod leaf_pairs;
mod live;
mod load_latency;
mod offered;
pub mod perftest;
mod rdma_counters;
mod refused;
mod repeats;
pub mod results_dir;
pub mod stdout;
mod summary_tables;
mod sweeps;
mod table;
mod terminal;
mod tree;
mod validation;

use std::path::Path;

use crate::result::RunResult;

pub use gate::verdict_line as gate_verdict_line;
pub use html::HtmlExporter;
pub use junit::JunitExporter;
pub use summary_tables::{status_line, verdict_line};
pub use terminal::{render as render_terminal, render_host_checks, table_text, terminal_width};

#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("cannot write {path}: {cause}")]
    Write { path: String, cause: std::io::Error },
    #[error("cannot encode {what}: {reason}")]
    Encode { what: &'static str, reason: String },
    #[error("cannot read {path}: {reason}")]
    Read { path: String, reason: String },
}

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

/// The summary tables as Markdown: `summary.md`.
pub struct MarkdownExporter;

impl Exporter for MarkdownExporter {
    fn render(&self, run: &RunResult) -> Result<Vec<u8>, ReportError> {
        let mut out = format!("# fabricbench: {}\n\n", run.scenario.run.name);
        out += &format!(
            "Started {} on {} rank(s), scenario `{}`, fabricbench {}.\n\n",
            run.started_at,
            run.plan.ranks.len(),
            run.scenario_file,
            run.tool_version
        );
        // The hosts the gate left out, then suspects and failed checks: what
        // a reader of an acceptance run wants first.
        if let Some(g) = &run.gate {
            out += &format!("## {}\n\n", gate::verdict_line(g));
            out += &markdown_table(&gate::table(g));
        }
        if let Some(a) = &run.acceptance {
            out += &format!("## {}\n\n", summary_tables::verdict_line(a));
            for table in summary_tables::acceptance(run, a) {
                out += &markdown_table(&table);
            }
        }
        if let Some(m) = &run.matrix {
            out += &markdown_table(&summary_tables::matrix(m));
        }
        if let Some(leaves) = run.leaf_pairs.as_ref().filter(|l| !l.rows.is_empty()) {
            out += &markdown_table(&leaf_pairs::table(leaves));
        }
        for phase in summary_tables::summarize(run) {
            out += &format!("## {}\n\n", phase.headline);
            for warning in &phase.warnings {
                out += &format!("{warning}\n\n");
            }
            for table in &phase.tables {
                out += &markdown_table(table);
            }
        }
        for table in sweeps::tables(run).into_iter().chain(congestion::tables(run)).chain(repeats::tables(run)) {
            out += &markdown_table(&table);
        }
        if let Some(ports) = summary_tables::ports(run) {
            out += &markdown_table(&ports);
        }
        if let Some(live) = live::line(run) {
            out += &format!("{live}\n\n");
        }
        out += &format!("{}\n", status_line(run));
        Ok(out.into_bytes())
    }
}

/// `### title` and the table; nothing for a table without rows.
fn markdown_table(table: &table::Table) -> String {
    if table.rows.is_empty() {
        return String::new();
    }
    let mut out =
        format!("### {}\n\n| {} |\n|{}\n", table.title, table.header.join(" | "), "---|".repeat(table.header.len()));
    for row in &table.rows {
        let cells: Vec<String> = row.iter().map(|c| c.replace('|', "\\|")).collect();
        out += &format!("| {} |\n", cells.join(" | "));
    }
    out.push('\n');
    out
}

/// Text for XML and HTML, attributes included.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// Writes an export to `target`, `-` meaning stdout.
pub fn export_to(exporter: &dyn Exporter, run: &RunResult, target: &Path) -> Result<(), ReportError> {
    let bytes = exporter.render(run)?;
    let shown = target.display().to_string();
    let result = if shown == "-" { stdout::write(&bytes) } else { std::fs::write(target, &bytes) };
    result.map_err(|cause| ReportError::Write { path: shown, cause })
}
