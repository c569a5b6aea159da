//! Presenting results; nothing here measures. Its parts, by what they are:
//! `tables`, the summary's tables and lines built once from a run for every
//! writer; `terminal`, the text a command prints; `export`, the documents
//! behind one trait (run.json, CSV, Markdown, JUnit); `html`, report.html
//! and its charts; `store`, the results folder and its journal; `compare`,
//! two runs side by side; `openmetrics` and `scrape`, a run as it goes for
//! Prometheus and the endpoint that serves it.

pub mod compare;
pub(crate) mod export;
pub(crate) mod html;
mod markup;
pub mod openmetrics;
pub mod scrape;
pub mod store;
pub(crate) mod tables;
pub mod terminal;

#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("cannot write {path}: {cause}")]
    Write { path: String, cause: std::io::Error },
    #[error("cannot encode {what}: {reason}")]
    Encode { what: &'static str, reason: String },
    #[error("cannot read {path}: {reason}")]
    Read { path: String, reason: String },
}
