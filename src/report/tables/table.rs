//! A table as plain text cells: a title, a header and rows, built once from
//! the result and drawn by the terminal, Markdown and HTML writers alike.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use crate::result::FlowResult;

pub struct Table {
    pub title: String,
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
    /// What report.html shows on hovering a cell, by (row, column): the
    /// numbers behind it (a flow's limit, its rule and evidence).
    pub hints: BTreeMap<(usize, usize), String>,
}

impl Table {
    pub fn new(title: String, header: &[&str]) -> Table {
        Table::with(title, header.iter().map(|h| h.to_string()).collect())
    }

    /// A table of these headers, no rows yet.
    pub fn with(title: String, header: Vec<String>) -> Table {
        Table { title, header, rows: Vec::new(), hints: BTreeMap::new() }
    }

    /// Adds a row whose cell `column` carries `hint` on hover.
    pub fn push_hinted(&mut self, row: Vec<String>, column: usize, hint: Option<String>) {
        if let Some(hint) = hint {
            self.hints.insert((self.rows.len(), column), hint);
        }
        self.rows.push(row);
    }
}

/// Rows a per-flow, per-receiver or per-rank table shows. A phase of
/// thousands of ranks would otherwise print a table no one reads (and
/// spend most of its rendering on it); the CSVs hold every row.
pub const ROWS_SHOWN: usize = 256;

/// What a table shows of its items, and its title, which says when some
/// are left out.
pub struct Shown<'a, T> {
    pub title: String,
    pub items: Vec<&'a T>,
}

/// The items a table shows: all of them when they fit, else the `limit`
/// that `worse` puts first (worst first).
pub fn shown<'a, T>(
    title: &str,
    items: impl Iterator<Item = &'a T>,
    limit: usize,
    worse: impl Fn(&T, &T) -> Ordering,
    which: &str,
) -> Shown<'a, T> {
    let mut items: Vec<&T> = items.collect();
    let all = items.len();
    if all <= limit {
        return Shown { title: title.to_string(), items };
    }
    items.select_nth_unstable_by(limit - 1, |a, b| worse(a, b));
    items.truncate(limit);
    items.sort_by(|a, b| worse(a, b));
    Shown { title: format!("{title}: the {limit} {which} of {all}, worst first"), items }
}

/// What a flow or rank is ranked by in a table: whether it failed, and the
/// rate it reached.
#[derive(Clone, Copy, Debug)]
pub struct Reached {
    pub failed: bool,
    pub gbps: f64,
}

/// Failed first, then the lower rate.
pub fn failed_then_lower(a: Reached, b: Reached) -> Ordering {
    b.failed.cmp(&a.failed).then(a.gbps.total_cmp(&b.gbps))
}

/// Failed flows first, then the slower.
pub fn slower_flow(a: &FlowResult, b: &FlowResult) -> Ordering {
    let reached = |f: &FlowResult| Reached { failed: f.error.is_some(), gbps: f.gbps };
    failed_then_lower(reached(a), reached(b))
}
