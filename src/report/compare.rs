//! `fabricbench compare`: a new run against a baseline, phase by phase and
//! flow by flow (matched by phase name, group and hosts, not by ids). What
//! got slower than the baseline by more than the tolerance is a regression.

use crate::report::table::Table;
use crate::result::{PhaseResult, RunResult};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delta {
    /// Within the tolerance.
    Same,
    Faster,
    Regression,
    /// Measured in one run only (the scenario or hostfile changed).
    OnlyBase,
    OnlyNew,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub item: String,
    /// Gb/s in the baseline and in the new run.
    pub base: Option<f64>,
    pub new: Option<f64>,
    pub delta: Delta,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Comparison {
    pub tolerance_pct: f64,
    pub rows: Vec<Row>,
}

pub fn compare(base: &RunResult, new: &RunResult, tolerance_pct: f64) -> Comparison {
    let mut rows = Vec::new();
    let mut add = |item: String, b: Option<f64>, n: Option<f64>| {
        let delta = match (b, n) {
            (Some(b), Some(n)) if n < b * (1.0 - tolerance_pct / 100.0) => Delta::Regression,
            (Some(b), Some(n)) if n > b * (1.0 + tolerance_pct / 100.0) => Delta::Faster,
            (Some(_), Some(_)) => Delta::Same,
            (Some(_), None) => Delta::OnlyBase,
            _ => Delta::OnlyNew,
        };
        rows.push(Row { item, base: b, new: n, delta });
    };
    let find = |run: &RunResult, name: &str| run.phases.iter().find(|p| p.name == name).cloned();
    let mut names: Vec<String> = base.phases.iter().map(|p| p.name.clone()).collect();
    names.extend(new.phases.iter().map(|p| p.name.clone()).filter(|n| !base.phases.iter().any(|p| &p.name == n)));
    for name in names {
        let (b, n) = (find(base, &name), find(new, &name));
        let aggregate = |p: &PhaseResult| p.aggregate_gbps;
        let mut items = vec![("aggregate".to_string(), b.as_ref().map(aggregate), n.as_ref().map(aggregate))];
        for by in [receivers as Keyed, flows] {
            let mut keys: Vec<String> = Vec::new();
            for (key, _) in keyed(b.as_ref(), by).into_iter().chain(keyed(n.as_ref(), by)) {
                if !keys.contains(&key) {
                    keys.push(key);
                }
            }
            items.extend(keys.into_iter().map(|k| {
                let (bv, nv) = (lookup(b.as_ref(), by, &k), lookup(n.as_ref(), by, &k));
                (k, bv, nv)
            }));
        }
        for (key, bv, nv) in items {
            add(format!("{name}: {key}"), bv, nv);
        }
    }
    Comparison { tolerance_pct, rows }
}

type Keyed = fn(&PhaseResult) -> Vec<(String, f64)>;

fn receivers(p: &PhaseResult) -> Vec<(String, f64)> {
    p.receivers.iter().filter(|r| r.senders > 1).map(|r| (format!("into {}", r.host), r.aggregate_gbps)).collect()
}

fn flows(p: &PhaseResult) -> Vec<(String, f64)> {
    p.flows.iter().map(|f| (format!("{} {} → {}", f.group, f.src_host, f.dst_host), f.gbps)).collect()
}

fn keyed(p: Option<&PhaseResult>, by: Keyed) -> Vec<(String, f64)> {
    p.map(by).unwrap_or_default()
}

fn lookup(p: Option<&PhaseResult>, by: Keyed, key: &str) -> Option<f64> {
    keyed(p, by).into_iter().find(|(k, _)| k == key).map(|(_, v)| v)
}

impl Comparison {
    pub fn regressions(&self) -> Vec<&Row> {
        self.rows.iter().filter(|r| r.delta == Delta::Regression).collect()
    }

    pub fn table(&self) -> Table {
        let mut t = Table::new(
            format!("Compared with the baseline (tolerance {}%)", self.tolerance_pct),
            &["item", "base Gb/s", "new Gb/s", "change %", "verdict"],
        );
        let number = |x: Option<f64>| x.map_or_else(|| "–".to_string(), |x| format!("{x:.3}"));
        for r in &self.rows {
            let change = match (r.base, r.new) {
                (Some(b), Some(n)) if b > 0.0 => format!("{:+.1}", (n - b) / b * 100.0),
                _ => "–".to_string(),
            };
            let verdict = match r.delta {
                Delta::Same => "same",
                Delta::Faster => "faster",
                Delta::Regression => "REGRESSION",
                Delta::OnlyBase => "only in base",
                Delta::OnlyNew => "only in new",
            };
            t.rows.push(vec![r.item.clone(), number(r.base), number(r.new), change, verdict.to_string()]);
        }
        t
    }
}
