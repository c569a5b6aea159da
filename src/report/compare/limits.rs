//! What held each flow in both runs, where it changed: a flow of the new
//! run held by its sender's CPU where the baseline's was at line rate says
//! why its number moved.

use crate::report::compare::flow_item;
use crate::report::compare::repeats::phases_by_name;
use crate::report::tables::table::Table;
use crate::result::limit::{most_often, LimitKind};
use crate::result::RunResult;

/// One flow whose limit differs between the runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LimitChange {
    /// As the comparison's rows name it: `phase: group SRC → DST`.
    pub item: String,
    pub base: LimitKind,
    pub new: LimitKind,
}

impl LimitChange {
    /// `line rate → sender CPU`.
    pub fn moved(&self) -> String {
        format!("{} → {}", self.base, self.new)
    }
}

/// Each judged flow's limit by item: over a phase's counted repeats, the
/// kind that held it most often.
fn limits(run: &RunResult) -> Vec<(String, LimitKind)> {
    let mut out = Vec::new();
    for counted in phases_by_name(run) {
        let mut seen: Vec<(String, Vec<LimitKind>)> = Vec::new();
        for f in counted.phases.iter().flat_map(|p| &p.flows) {
            let (Some(limit), item) = (&f.limit, flow_item(&counted.name, f)) else { continue };
            match seen.iter_mut().find(|(i, _)| *i == item) {
                Some((_, kinds)) => kinds.push(limit.kind),
                None => seen.push((item, vec![limit.kind])),
            }
        }
        out.extend(seen.into_iter().filter_map(|(item, kinds)| Some((item, most_often(kinds.into_iter())?.kind))));
    }
    out
}

/// The flows judged in both runs whose limit differs, in the new run's order.
pub fn changes(base: &RunResult, new: &RunResult) -> Vec<LimitChange> {
    let before = limits(base);
    limits(new)
        .into_iter()
        .filter_map(|(item, new)| {
            let &(_, base) = before.iter().find(|(i, _)| *i == item)?;
            (base != new).then_some(LimitChange { item, base, new })
        })
        .collect()
}

/// The changes as a table; `None` when no flow's limit changed.
pub fn table(changes: &[LimitChange]) -> Option<Table> {
    if changes.is_empty() {
        return None;
    }
    let mut t = Table::new("What held each flow, where it changed".into(), &["item", "limited by (base → new)"]);
    t.rows.extend(changes.iter().map(|c| vec![c.item.clone(), c.moved()]));
    Some(t)
}
