//! The summary printed at the end of a run.

use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{CellAlignment, ContentArrangement, Table as Comfy};

use crate::hostcheck::HostCheck;
use crate::hostfacts::{self, HostFacts};
use crate::report::table::Table;
use crate::report::tables::{self, status_line, summarize};
use crate::report::{congestion, live, repeats, sweeps};
use crate::result::RunResult;

/// Matrices wider than this many hosts are left to report.html.
const MATRIX_MAX_HOSTS: usize = 16;

pub fn render(run: &RunResult) -> String {
    let mut out = String::new();
    for phase in summarize(run) {
        out += &format!("\n{}\n", phase.headline);
        for warning in &phase.warnings {
            out += &format!("{warning}\n");
        }
        for table in phase.tables.iter().filter(|t| !t.rows.is_empty()) {
            out += &table_text(table);
        }
    }
    for table in sweeps::tables(run).into_iter().chain(congestion::tables(run)).chain(repeats::tables(run)) {
        out += &format!("\n{}", table_text(&table));
    }
    if let Some(m) = &run.matrix {
        if m.hosts.len() <= MATRIX_MAX_HOSTS {
            out += &format!("\n{}", table_text(&tables::matrix(m)));
        } else {
            out += &format!("\nAll pairs: {} hosts, the matrix is in report.html\n", m.hosts.len());
        }
    }
    if let Some(a) = &run.acceptance {
        out.push('\n');
        for table in tables::acceptance(run, a).iter().filter(|t| !t.rows.is_empty()) {
            out += &table_text(table);
        }
        out += &format!("{}\n", tables::verdict_line(a));
    }
    if let Some(live) = live::line(run) {
        out += &format!("\n{live}\n");
    }
    out += &format!("{}\n", status_line(run));
    out
}

/// One table, titled, as the terminal shows it.
pub fn table_text(table: &Table) -> String {
    let mut comfy = Comfy::new();
    comfy.load_preset(UTF8_FULL_CONDENSED).set_content_arrangement(ContentArrangement::Dynamic);
    comfy.set_header(&table.header);
    for row in &table.rows {
        comfy.add_row(row);
    }
    for column in comfy.column_iter_mut().skip(2) {
        column.set_cell_alignment(CellAlignment::Right);
    }
    format!("{}\n{comfy}\n", table.title)
}

/// The table of `fabricbench hosts`.
pub fn render_host_checks(checks: &[HostCheck]) -> String {
    let mut comfy = Comfy::new();
    comfy.load_preset(UTF8_FULL_CONDENSED).set_content_arrangement(ContentArrangement::Dynamic);
    comfy.set_header(["host", "ok", "fabricbench", "RDMA ports", "clock offset ms", "check ms", "problem"]);
    let mut facts = String::new();
    for c in checks {
        let offset = match (c.clock_offset_ms, c.rtt_ms) {
            (Some(o), Some(rtt)) => format!("{o:+.1} ± {:.1}", rtt / 2.0),
            _ => String::new(),
        };
        comfy.add_row([
            c.host.clone(),
            if c.ok() { "yes".into() } else { "NO".into() },
            c.version.clone().unwrap_or_default(),
            c.rdma.as_ref().map_or_else(|| "none".to_string(), |ports| ports.join("\n")),
            offset,
            format!("{:.0}", c.elapsed_ms),
            c.problem.clone().unwrap_or_default(),
        ]);
        if let Some(f) = &c.facts {
            facts.push_str(&format!("{}: {f}", c.host));
        }
    }
    let read: Vec<(&str, &HostFacts)> =
        checks.iter().filter_map(|c| Some((c.host.as_str(), c.facts.as_ref()?))).collect();
    let differ = hostfacts::differences(&read);
    let warning = match differ.len() {
        0 => String::new(),
        n => format!("WARNING: {n} fact(s) differ between the hosts:\n  {}\n", differ.join("\n  ")),
    };
    format!("{comfy}\n{facts}{warning}")
}
