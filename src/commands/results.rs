//! `fabricbench report` and `fabricbench compare`: results folders read back.

use crate::cli::{CompareArgs, ReportArgs};
use crate::commands::Failure;
use crate::report::compare;
use crate::report::store::{journal, results_dir};
use crate::report::terminal::{self, stdout, table_text, terminal_width};
use crate::result::RunStatus;

/// Every file of a results folder again, from its journal (run.json too),
/// or from its run.json.
pub fn report(args: &ReportArgs) -> Result<(), Failure> {
    let run = results_dir::read(&args.dir).map_err(Failure::bad_input)?;
    let dir = if args.dir.is_dir() { args.dir.clone() } else { args.dir.parent().unwrap_or(&args.dir).to_path_buf() };
    let from_journal = results_dir::source_of(&args.dir).ends_with(journal::FILE);
    results_dir::write_into(&run, &dir, from_journal).map_err(Failure::run_failed)?;
    if !args.quiet {
        stdout::print(terminal::render(&run, terminal_width()))?;
    }
    crate::diag!("report: {}", dir.join("report.html").display());
    Ok(())
}

pub fn compare(args: &CompareArgs) -> Result<(), Failure> {
    let base = results_dir::read(&args.base).map_err(Failure::bad_input)?;
    let new = results_dir::read(&args.new).map_err(Failure::bad_input)?;
    for (which, run) in [("baseline", &base), ("new run", &new)] {
        match &run.status {
            RunStatus::Failed { error } => {
                crate::diag!("warning: the {which} failed ({error}); its numbers cover what ran")
            }
            RunStatus::Degraded { reasons } => {
                crate::diag!("warning: the {which} is degraded, not a valid measurement: {}", reasons.join(" | "));
            }
            RunStatus::Running { note } => crate::diag!("warning: the {which} is still going ({note})"),
            RunStatus::Ok => {}
        }
    }
    let comparison = compare::compare(&base, &new, args.tolerance);
    stdout::print(table_text(&comparison.table(), terminal_width()))?;
    if let Some(limits) = comparison.limits_table() {
        stdout::print(format_args!("\n{}", table_text(&limits, terminal_width())))?;
    }
    let regressions = comparison.regressions();
    if regressions.is_empty() {
        stdout::print(format_args!("no regressions beyond the tolerance ({})\n", args.tolerance))?;
        return Ok(());
    }
    stdout::print(format_args!("\n{}", table_text(&comparison.regressions_table(), terminal_width())))?;
    let names: Vec<String> = regressions
        .iter()
        .map(|r| {
            let (b, n) = (r.base.unwrap_or_default(), r.new.unwrap_or_default());
            let pct = r.change_pct().map_or_else(String::new, |p| format!(" ({p:+.1}%)"));
            let held =
                comparison.limit_change_of(r).map_or_else(String::new, |c| format!(", limited by {}", c.moved()));
            format!("{} {} {b:.3} → {n:.3} {}{pct}{held}", r.item, r.metric.label(), r.metric.unit())
        })
        .collect();
    Err(Failure::CheckFailed(format!(
        "{} regression(s) beyond the tolerance ({}): {}",
        regressions.len(),
        args.tolerance,
        names.join("; ")
    )))
}
