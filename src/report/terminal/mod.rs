//! The summary printed at the end of a run. On a terminal it fits the
//! terminal's width (`fit`); piped, nothing is wrapped.

pub(crate) mod fit;
pub mod perftest;
pub(crate) mod stdout;

use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{CellAlignment, ContentArrangement, Table as Comfy};

use crate::hostcheck::HostCheck;
use crate::hostfacts::{self, HostFacts};
use crate::report::tables::summary::{self, status_line, summarize};
use crate::report::tables::table::Table;
use crate::report::tables::{congestion, gate, leaf_pairs, live, repeats, sweeps};
use crate::report::terminal::fit::{fit, wrap};
use crate::result::RunResult;

/// Matrices wider than this many hosts are left to report.html.
const MATRIX_MAX_HOSTS: usize = 16;

/// The terminal's width in columns, when stdout is one.
pub fn terminal_width() -> Option<u16> {
    Comfy::new().width()
}

/// The summary; with a `width`, every line fits it (numbers whole).
pub fn render(run: &RunResult, width: Option<u16>) -> String {
    let line = |text: &str| match width {
        Some(width) => wrap(text, width),
        None => format!("{text}\n"),
    };
    let mut out = String::new();
    for phase in summarize(run) {
        out += &format!("\n{}", line(&phase.headline));
        for warning in &phase.warnings {
            out += &line(warning);
        }
        for table in phase.tables.iter().filter(|t| !t.rows.is_empty()) {
            out += &table_text(table, width);
        }
    }
    for table in sweeps::tables(run).into_iter().chain(congestion::tables(run)).chain(repeats::tables(run)) {
        out += &format!("\n{}", table_text(&table, width));
    }
    if let Some(m) = &run.matrix {
        if m.hosts.len() <= MATRIX_MAX_HOSTS {
            out += &format!("\n{}", table_text(&summary::matrix(m), width));
        } else {
            out += &format!("\n{}", line(&format!("All pairs: {} hosts, the matrix is in report.html", m.hosts.len())));
        }
    }
    if let Some(leaves) = run.leaf_pairs.as_ref().filter(|l| !l.rows.is_empty()) {
        out += &format!("\n{}", table_text(&leaf_pairs::table(leaves), width));
    }
    if let Some(g) = &run.gate {
        out += &format!("\n{}", table_text(&gate::table(g), width));
        out += &line(&gate::verdict_line(g));
    }
    if let Some(a) = &run.acceptance {
        out.push('\n');
        for table in summary::acceptance(run, a).iter().filter(|t| !t.rows.is_empty()) {
            out += &table_text(table, width);
        }
        out += &line(&summary::verdict_line(a));
    }
    if let Some(live) = live::line(run) {
        out += &format!("\n{}", line(&live));
    }
    out += &line(&status_line(run));
    out
}

/// One table, titled, as the terminal shows it: with a `width`, fitted to
/// it (short headers and a legend, columns left out from the right rather
/// than a number split), else every column at full width.
pub fn table_text(table: &Table, width: Option<u16>) -> String {
    let mut comfy = Comfy::new();
    comfy.load_preset(UTF8_FULL_CONDENSED).set_content_arrangement(ContentArrangement::Dynamic);
    let Some(width) = width else {
        comfy.force_no_tty();
        fill(&mut comfy, &table.header, table.rows.iter().cloned());
        return format!("{}\n{comfy}\n", table.title);
    };
    let fitted = fit(table, width);
    let kept = |row: &Vec<String>| fitted.columns.iter().map(|&c| row.get(c).cloned().unwrap_or_default()).collect();
    fill(&mut comfy, &fitted.header, table.rows.iter().map(kept));
    // After the columns exist: comfy-table gives a constraint to each column it has.
    comfy.set_width(width).set_constraints(fitted.constraints());
    format!("{}{comfy}\n{}", wrap(&table.title, width), fitted.notes(width))
}

/// The header and rows, numbers and values right-aligned after the first two columns.
fn fill(comfy: &mut Comfy, header: &[String], rows: impl Iterator<Item = Vec<String>>) {
    comfy.set_header(header);
    for row in rows {
        comfy.add_row(row);
    }
    for column in comfy.column_iter_mut().skip(2) {
        column.set_cell_alignment(CellAlignment::Right);
    }
}

/// The table of `fabricbench hosts`.
pub fn render_host_checks(checks: &[HostCheck]) -> String {
    let mut comfy = Comfy::new();
    comfy.load_preset(UTF8_FULL_CONDENSED).set_content_arrangement(ContentArrangement::Dynamic);
    comfy.set_header([
        "host",
        "ok",
        "arch · kernel · glibc",
        "starts",
        "fabricbench",
        "RDMA ports",
        "clock offset ms",
        "check ms",
        "problem",
    ]);
    let mut facts = String::new();
    for c in checks {
        let offset = match (c.clock_offset_ms, c.rtt_ms) {
            (Some(o), Some(rtt)) => format!("{o:+.1} ± {:.1}", rtt / 2.0),
            _ => String::new(),
        };
        comfy.add_row([
            c.host.clone(),
            if c.ok() { "yes".into() } else { "NO".into() },
            c.platform.as_ref().map(ToString::to_string).unwrap_or_default(),
            match c.starts {
                Some(true) => "yes".into(),
                Some(false) => "NO".into(),
                None => String::new(),
            },
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
    let warning = warnings(&read);
    format!("{comfy}\n{facts}{warning}")
}

/// What `hosts` warns of: facts that differ, limited locked memory, a
/// clock slow to read.
fn warnings(read: &[(&str, &HostFacts)]) -> String {
    let differ = hostfacts::differences(read);
    let mut warning = match differ.len() {
        0 => String::new(),
        n => format!("WARNING: {n} fact(s) differ between the hosts:\n  {}\n", differ.join("\n  ")),
    };
    let limited = hostfacts::limited_locked_memory(read);
    if !limited.is_empty() {
        let each: Vec<String> = limited.iter().map(|(host, m)| format!("{host}: {m}")).collect();
        warning.push_str(&format!(
            "WARNING: locked memory is limited on {} RDMA host(s) ({}): verbs pin each flow's buffers against it, \
             and a run whose flows need more fails to set up there; raise it where the workers start — {}\n",
            limited.len(),
            each.join("; "),
            crate::transport::rdma::HOW_TO_RAISE_MEMLOCK
        ));
    }
    let slow: Vec<String> = read
        .iter()
        .filter(|(_, f)| f.clock.is_slow())
        .map(|(host, f)| format!("{host}: {:.0} ns", f.clock.read_ns.unwrap_or_default()))
        .collect();
    if !slow.is_empty() {
        warning.push_str(&format!(
            "WARNING: a clock read is slow on {} host(s) ({}): every latency sample pays one (check the \
             clocksource: `tsc` reads in tens of ns, `hpet` in microseconds)\n",
            slow.len(),
            slow.join("; ")
        ));
    }
    warning
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::hostfacts::LockedMemory;

    fn checked(host: &str, facts: HostFacts) -> HostCheck {
        HostCheck {
            host: host.into(),
            reachable: true,
            platform: None,
            starts: Some(true),
            version: None,
            rdma: None,
            facts: Some(facts),
            clock_offset_ms: None,
            rtt_ms: None,
            elapsed_ms: 1.0,
            problem: None,
        }
    }

    #[test]
    fn a_host_whose_clock_is_slow_to_read_is_warned_of() {
        let tree = HostFacts::under(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hosts/mlx5-ib"));
        let clock = |source: &str, read_ns: f64| crate::hostfacts::ClockFacts {
            source: Some(source.into()),
            constant_counter: Some(true),
            read_ns: Some(read_ns),
        };
        let hpet = HostFacts { clock: clock("hpet", 2612.0), ..tree.clone() };
        let tsc = HostFacts { clock: clock("tsc", 19.6), ..tree };
        let text = render_host_checks(&[checked("h1", hpet), checked("h2", tsc)]);
        assert!(
            text.contains("clocksource hpet (2612 ns a read) ·") && text.contains("clocksource tsc (20 ns a read) ·"),
            "{text}"
        );
        let warning = text.lines().find(|l| l.starts_with("WARNING: a clock read is slow")).expect(&text);
        assert!(warning.contains("on 1 host(s) (h1: 2612 ns)"), "{warning}");
    }

    #[test]
    fn rdma_hosts_with_limited_locked_memory_are_warned_of() {
        let hca = HostFacts::under(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hosts/mlx5-ib"));
        let open = HostFacts { locked_memory: Some(LockedMemory::Unlimited), ..hca.clone() };
        let text = render_host_checks(&[checked("h1", hca), checked("h2", open)]);
        assert!(
            text.contains("h1: Rocky Linux 9.3 (Blue Onyx) ·") && text.contains("locked memory 64 KiB ·"),
            "{text}"
        );
        assert!(text.contains("locked memory: 64 KiB on h1; unlimited on h2"), "{text}");
        let warning = text.lines().find(|l| l.starts_with("WARNING: locked memory is limited")).expect(&text);
        assert!(
            warning.contains("on 1 RDMA host(s) (h1: 64 KiB)") && warning.contains("`ulimit -l unlimited`"),
            "{warning}"
        );
    }
}
