//! `summary.md`: the summary's tables as Markdown, the hosts the gate left
//! out and the checks first.

use crate::report::export::Exporter;
use crate::report::tables::table::Table;
use crate::report::tables::{congestion, gate, leaf_pairs, live, repeats, summary, sweeps};
use crate::report::ReportError;
use crate::result::RunResult;

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
            out += &format!("## {}\n\n", summary::verdict_line(a));
            for table in summary::acceptance(run, a) {
                out += &markdown_table(&table);
            }
        }
        if let Some(m) = &run.matrix {
            out += &markdown_table(&summary::matrix(m));
        }
        if let Some(leaves) = run.leaf_pairs.as_ref().filter(|l| !l.rows.is_empty()) {
            out += &markdown_table(&leaf_pairs::table(leaves));
        }
        for phase in summary::summarize(run) {
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
        if let Some(ports) = summary::ports(run) {
            out += &markdown_table(&ports);
        }
        if let Some(live) = live::line(run) {
            out += &format!("{live}\n\n");
        }
        out += &format!("{}\n", summary::status_line(run));
        Ok(out.into_bytes())
    }
}

/// `### title` and the table; nothing for a table without rows.
fn markdown_table(table: &Table) -> String {
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
