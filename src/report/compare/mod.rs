//! `fabricbench compare`: a new run against a baseline, phase by phase and
//! item by item (matched by phase name, group and hosts, not by ids), on
//! every number that says how fast: the aggregate's, each receiver's and
//! each flow's Gb/s, RDMA flows' message rate, latency flows' min, typical,
//! p99 and p99.9, and each rank's worker CPU. Worse than the baseline by
//! more than its kind's tolerance is a regression: lower for Gb/s and Mpps,
//! higher for latency and CPU. Runs that repeat their phases are compared
//! on the repeats' means and, when both repeat, their intervals
//! (`repeats`).

mod limits;
mod repeats;
mod tolerance;

pub use limits::LimitChange;
pub use repeats::{Measured, Rule};
pub use tolerance::{Kind, ToleranceError, Tolerances};

use crate::metrics::confidence::Spread;
use crate::report::tables::table::Table;
use crate::result::{FlowResult, Metric, PhaseResult, RankResult, RunResult};
use crate::scenario::{Mode, Transport};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delta {
    /// Within the tolerance.
    Same,
    /// Beyond the tolerance, but the two runs' 95 % intervals overlap: not
    /// told apart from the repeats' noise.
    WithinIntervals,
    /// Better than the baseline by more than the tolerance.
    Better,
    Regression,
    /// Measured in one run only (the scenario or hostfile changed).
    OnlyBase,
    OnlyNew,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// `phase: what`, e.g. `fan-in: incast h2 → h1`.
    pub item: String,
    pub metric: Metric,
    /// In the metric's unit, in the baseline and in the new run (the mean
    /// of a phase's repeats).
    pub base: Option<f64>,
    pub new: Option<f64>,
    /// Over the repeats, where the run repeated the phase.
    pub base_spread: Option<Spread>,
    pub new_spread: Option<Spread>,
    pub delta: Delta,
}

impl Row {
    /// (new − base) / base in %, when both exist and base is not 0.
    pub fn change_pct(&self) -> Option<f64> {
        match (self.base, self.new) {
            (Some(b), Some(n)) if b != 0.0 => Some((n - b) / b * 100.0),
            _ => None,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Comparison {
    pub tolerances: Tolerances,
    /// Whether repeats' intervals took part.
    pub rule: Rule,
    pub rows: Vec<Row>,
    /// Flows whose limit (docs/METRICS.md, "Why this number") differs.
    pub limits: Vec<LimitChange>,
}

/// A phase's numbers: item, metric, value.
type Values = Vec<(String, Metric, f64)>;

/// A phase's numbers pooled over its counted repeats: item, metric, number.
type Pooled = Vec<(String, Metric, Measured)>;

/// Each phase's numbers (by name without the repeat), pooled over its
/// counted repeats.
fn measured(run: &RunResult) -> Vec<(String, Pooled)> {
    repeats::phases_by_name(run)
        .into_iter()
        .map(|repeats::Counted { name, phases }| {
            let mut items: Vec<(String, Metric, Vec<f64>)> = Vec::new();
            for (item, metric, v) in phases.iter().flat_map(|p| values(&name, p)) {
                match items.iter_mut().find(|(i, m, _)| *i == item && *m == metric) {
                    Some((_, _, list)) => list.push(v),
                    None => items.push((item, metric, vec![v])),
                }
            }
            let pooled = items.into_iter().map(|(i, m, list)| (i, m, repeats::pooled(&list))).collect();
            (name, pooled)
        })
        .collect()
}

pub fn compare(base: &RunResult, new: &RunResult, tolerances: Tolerances) -> Comparison {
    let (b_all, n_all) = (measured(base), measured(new));
    let mut names: Vec<&str> = b_all.iter().map(|(n, _)| n.as_str()).collect();
    names.extend(n_all.iter().map(|(n, _)| n.as_str()).filter(|n| !b_all.iter().any(|(b, _)| b == n)));
    let of = |all: &[(String, Pooled)], name: &str| {
        all.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone()).unwrap_or_default()
    };
    let rule = Rule::of(base, new);
    let mut rows = Vec::new();
    for name in names {
        let (b, n) = (of(&b_all, name), of(&n_all, name));
        let find = |list: &[(String, Metric, Measured)], item: &str, metric: Metric| {
            list.iter().find(|(i, m, _)| i == item && *m == metric).map(|(_, _, v)| *v)
        };
        let mut keys: Vec<(String, Metric)> = Vec::new();
        for (item, metric, _) in b.iter().chain(&n) {
            if !keys.iter().any(|(i, m)| i == item && m == metric) {
                keys.push((item.clone(), *metric));
            }
        }
        for (item, metric) in keys {
            let (bv, nv) = (find(&b, &item, metric), find(&n, &item, metric));
            let delta = judge(metric, bv, nv, tolerances.of(Kind::of(metric)));
            rows.push(Row {
                item,
                metric,
                base: bv.map(|m| m.value),
                new: nv.map(|m| m.value),
                base_spread: bv.and_then(|m| m.spread),
                new_spread: nv.and_then(|m| m.spread),
                delta,
            });
        }
    }
    Comparison { tolerances, rule, rows, limits: limits::changes(base, new) }
}

/// Worse by more than `tolerance_pct` is a regression, better by more is
/// better; which way is worse depends on the metric. When both numbers have
/// intervals (repeats) and they overlap, neither: the change is within
/// the noise.
fn judge(metric: Metric, base: Option<Measured>, new: Option<Measured>, tolerance_pct: f64) -> Delta {
    let (bm, nm) = match (base, new) {
        (Some(b), Some(n)) => (b, n),
        (Some(_), None) => return Delta::OnlyBase,
        _ => return Delta::OnlyNew,
    };
    let (b, n) = (bm.value, nm.value);
    let t = tolerance_pct / 100.0;
    let (worse, better) = match metric.higher_is_better() {
        true => (n < b * (1.0 - t), n > b * (1.0 + t)),
        false => (n > b * (1.0 + t), n < b * (1.0 - t)),
    };
    match (worse, better) {
        (true, _) | (_, true) if repeats::overlapping(&bm, &nm) => Delta::WithinIntervals,
        (true, _) => Delta::Regression,
        (_, true) => Delta::Better,
        _ => Delta::Same,
    }
}

/// Every number of a phase that compare judges, its items named after
/// `name` (the phase's, without a repeat). Receivers with one sender
/// repeat their flow and are left out; message rates only for RDMA flows
/// (TCP has none); latency flows by their latency, not their Gb/s.
fn values(name: &str, p: &PhaseResult) -> Values {
    let mut out = Values::new();
    if p.flows.iter().any(|f| f.mode == Mode::Bandwidth) {
        out.push((format!("{name}: aggregate"), Metric::Gbps, p.aggregate_gbps));
    }
    for r in p.receivers.iter().filter(|r| r.senders > 1) {
        out.push((format!("{name}: into {}", r.host), Metric::Gbps, r.aggregate_gbps));
    }
    let rdma = |group: &str| p.groups.iter().any(|g| g.name == group && g.transport == Transport::Rdma);
    for f in &p.flows {
        let item = flow_item(name, f);
        match (&f.latency, f.mode) {
            (Some(l), _) => out.extend(
                [
                    (Metric::LatencyMin, l.min_us),
                    (Metric::LatencyTypical, l.typical_us),
                    (Metric::LatencyP99, l.p99_us),
                    (Metric::LatencyP999, l.p999_us),
                ]
                .map(|(metric, v)| (item.clone(), metric, v)),
            ),
            (None, Mode::Latency) => {}
            (None, Mode::Bandwidth) => {
                out.push((item.clone(), Metric::Gbps, f.gbps));
                if rdma(&f.group) {
                    out.push((item, Metric::Mpps, f.msgs_per_s / 1e6));
                }
            }
        }
    }
    // A stressed rank of a run made before the threads were told apart
    // (no `process_pct`) counted its burners in: another quantity, left out.
    let comparable = |r: &&RankResult| r.reported && (r.cpu.process_pct.is_some() || r.stress.is_none());
    for r in p.ranks.iter().filter(comparable) {
        out.push((format!("{name}: rank {} {}", r.rank, r.host), Metric::WorkerCpu, r.cpu.worker_pct));
    }
    out
}

/// A flow's item in both runs: `phase: group SRC → DST`.
fn flow_item(name: &str, f: &FlowResult) -> String {
    format!("{name}: {} {} → {}", f.group, f.src_host, f.dst_host)
}

fn number(x: Option<f64>) -> String {
    x.map_or_else(|| "–".to_string(), |x| format!("{x:.3}"))
}

/// `12.345`, or `12.345 ± 0.210` (the 95 % interval's half) for repeats.
fn with_interval(x: Option<f64>, spread: Option<Spread>) -> String {
    match spread {
        Some(s) => format!("{} ± {:.3}", number(x), s.ci95_half),
        None => number(x),
    }
}

fn signed(x: Option<f64>, decimals: usize) -> String {
    x.map_or_else(|| "–".to_string(), |x| format!("{x:+.decimals$}"))
}

impl Comparison {
    /// `what (tolerance …)`, and with repeats which rule judged.
    fn title(&self, what: &str) -> String {
        match self.rule.note() {
            Some(note) => format!("{what} (tolerance {}; {note})", self.tolerances),
            None => format!("{what} (tolerance {})", self.tolerances),
        }
    }

    /// The flows whose limit changed; `None` when none did.
    pub fn limits_table(&self) -> Option<Table> {
        limits::table(&self.limits)
    }

    /// A regressed item's limit change, when its flow's limit changed.
    pub fn limit_change_of(&self, row: &Row) -> Option<&LimitChange> {
        self.limits.iter().find(|c| c.item == row.item)
    }

    pub fn regressions(&self) -> Vec<&Row> {
        self.rows.iter().filter(|r| r.delta == Delta::Regression).collect()
    }

    /// Every item and metric of both runs, side by side.
    pub fn table(&self) -> Table {
        let mut t = Table::new(
            self.title("Compared with the baseline"),
            &["item", "metric", "base", "new", "unit", "change %", "verdict"],
        );
        for r in &self.rows {
            let verdict = match r.delta {
                Delta::Same => "same",
                Delta::WithinIntervals => "same (intervals overlap)",
                Delta::Better => "better",
                Delta::Regression => "REGRESSION",
                Delta::OnlyBase => "only in base",
                Delta::OnlyNew => "only in new",
            };
            t.rows.push(vec![
                r.item.clone(),
                r.metric.label().to_string(),
                with_interval(r.base, r.base_spread),
                with_interval(r.new, r.new_spread),
                r.metric.unit().to_string(),
                signed(r.change_pct(), 1),
                verdict.to_string(),
            ]);
        }
        t
    }

    /// The regressions only, each with how far it moved (in its unit and in
    /// %) and the tolerance it broke.
    pub fn regressions_table(&self) -> Table {
        let mut t = Table::new(
            match self.rule.note() {
                Some(note) => format!("Regressions ({note})"),
                None => "Regressions".to_string(),
            },
            &["item", "metric", "base", "new", "change", "change %", "tolerance %"],
        );
        for r in self.regressions() {
            let unit = r.metric.unit();
            let moved = r.base.zip(r.new).map(|(b, n)| n - b);
            t.rows.push(vec![
                r.item.clone(),
                r.metric.label().to_string(),
                format!("{} {unit}", with_interval(r.base, r.base_spread)),
                format!("{} {unit}", with_interval(r.new, r.new_spread)),
                format!("{} {unit}", signed(moved, 3)),
                signed(r.change_pct(), 1),
                format!("{}", self.tolerances.of(Kind::of(r.metric))),
            ]);
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> RunResult {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name);
        serde_json::from_str(&std::fs::read_to_string(&path).expect("fixture")).expect("a run.json")
    }

    fn delta(c: &Comparison, item: &str, metric: Metric) -> Delta {
        c.rows.iter().find(|r| r.item == item && r.metric == metric).map(|r| r.delta).expect("the row")
    }

    /// Two real runs of fan-in.toml (schema 1 and 3): the v3 run's probe
    /// had lower p99 and p99.9, incast 2 → 1 fewer Gb/s.
    #[test]
    fn lower_latency_is_better_and_higher_a_regression() {
        let (v1, v3) = (fixture("v1-fan-in.json"), fixture("v3-fan-in.json"));
        let probe = "fan-in: probe 127.0.0.3 → 127.0.0.1";
        let forward = compare(&v1, &v3, Tolerances::default());
        assert_eq!(delta(&forward, probe, Metric::LatencyP99), Delta::Better);
        assert_eq!(delta(&forward, probe, Metric::LatencyP999), Delta::Better);
        assert_eq!(delta(&forward, "fan-in: incast 127.0.0.2 → 127.0.0.1", Metric::Gbps), Delta::Regression);
        let back = compare(&v3, &v1, Tolerances::default());
        assert_eq!(delta(&back, probe, Metric::LatencyP99), Delta::Regression);
        assert_eq!(delta(&back, probe, Metric::LatencyP999), Delta::Regression);
        assert_eq!(delta(&back, "fan-in: incast 127.0.0.2 → 127.0.0.1", Metric::Gbps), Delta::Better);
        // A latency flow is judged by its latency only.
        assert!(!forward.rows.iter().any(|r| r.item == probe && r.metric == Metric::Gbps));
    }

    #[test]
    fn each_kind_has_its_own_tolerance() {
        let (v1, v3) = (fixture("v1-fan-in.json"), fixture("v3-fan-in.json"));
        let incast = "fan-in: incast 127.0.0.2 → 127.0.0.1"; // −41 %
        let wide_gbps: Tolerances = "gbps=50%".parse().unwrap();
        assert_eq!(delta(&compare(&v1, &v3, wide_gbps), incast, Metric::Gbps), Delta::Same);
        let wide_latency: Tolerances = "latency=100%".parse().unwrap();
        let c = compare(&v3, &v1, wide_latency);
        assert_eq!(delta(&c, "fan-in: probe 127.0.0.3 → 127.0.0.1", Metric::LatencyP99), Delta::Same, "+20 % < 100 %");
        assert_eq!(delta(&c, incast, Metric::Gbps), Delta::Better, "Gb/s keeps its 5 %");
    }

    #[test]
    fn a_flow_whose_limit_changed_is_told_with_both_kinds() {
        use crate::result::limit::{Limit, LimitKind};
        let verdict = |kind| Some(Limit { kind, rule: "r".into(), evidence: Vec::new(), unavailable: Vec::new() });
        let mut base = fixture("v3-fan-in.json");
        for f in &mut base.phases[0].flows {
            f.limit = verdict(LimitKind::LineRate);
        }
        let mut new = base.clone();
        new.phases[0].flows[0].limit = verdict(LimitKind::SenderCpu);
        let c = compare(&base, &new, Tolerances::default());
        let item = flow_item("fan-in", &new.phases[0].flows[0]);
        assert_eq!(
            c.limits,
            [LimitChange { item: item.clone(), base: LimitKind::LineRate, new: LimitKind::SenderCpu }]
        );
        assert_eq!(c.limits_table().unwrap().rows, [[item, "line rate → sender CPU".to_string()]]);
        assert!(compare(&base, &base, Tolerances::default()).limits_table().is_none());
        // A run made before verdicts has none to change from.
        assert!(compare(&fixture("v3-fan-in.json"), &new, Tolerances::default()).limits.is_empty());
    }

    #[test]
    fn rdma_flows_are_judged_on_message_rate_too() {
        let run = fixture("v3-rdma-fan-in.json");
        let c = compare(&run, &run, Tolerances::default());
        let mpps: Vec<&Row> = c.rows.iter().filter(|r| r.metric == Metric::Mpps).collect();
        let rdma_flows = run.phases.iter().flat_map(|p| &p.flows).filter(|f| f.mode == Mode::Bandwidth).count();
        assert_eq!(mpps.len(), rdma_flows, "{:?}", c.rows);
        assert!(mpps.iter().all(|r| r.delta == Delta::Same && r.base.is_some_and(|v| v > 0.0)));
        let tcp = compare(&fixture("v3-fan-in.json"), &fixture("v3-fan-in.json"), Tolerances::default());
        assert!(!tcp.rows.iter().any(|r| r.metric == Metric::Mpps), "TCP has no message rate");
    }
}
