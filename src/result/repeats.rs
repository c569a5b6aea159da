//! `[run] repeat`: each phase's aggregates over its repeats, with their
//! mean, spread and 95 % confidence interval (`metrics::confidence`). Only
//! repeats that are a valid measurement count: complete and not degraded.

use serde::{Deserialize, Serialize};

use crate::metrics::confidence::Spread;
use crate::plan::Plan;
use crate::result::{Metric, PhaseResult};
use crate::scenario::{Mode, Transport};

/// One repeated phase of the plan.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RepeatedPhase {
    /// The phase's name without the repeat (its repeats are named
    /// `NAME (repeat K/N)`).
    pub phase: String,
    /// Repeats asked.
    pub count: u32,
    /// Repeats that count (complete, not degraded).
    pub counted: usize,
    pub numbers: Vec<RepeatedNumber>,
}

/// One aggregate of the phase over its repeats.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RepeatedNumber {
    /// What it is of: `aggregate`, `into HOST` (a receiver of several
    /// senders), `group NAME`, `GROUP SRC → DST` (a latency flow),
    /// `busiest worker`.
    pub item: String,
    /// `aggregate_gbps`, `receiver_gbps`, `mpps`, `latency_typical_us`,
    /// `latency_p99_us` or `max_worker_cpu_pct`.
    pub metric: Metric,
    /// The metric's unit, as written when measured.
    pub unit: String,
    /// Each counted repeat's value, in run order.
    pub values: Vec<RepeatValue>,
    /// Over `values`; absent with fewer than two.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spread: Option<Spread>,
}

#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct RepeatValue {
    /// From 1.
    pub repeat: u32,
    /// The repeat's `phases[].index`.
    pub phase: usize,
    pub value: f64,
}

/// Whether a measured phase counts: every phase that runs once, and of a
/// repeated phase the repeats that are a valid measurement (complete, not
/// degraded).
pub fn counts(plan: &Plan, phase: &PhaseResult) -> bool {
    let repeated = plan.phases.iter().any(|p| p.index == phase.index && p.repeat.is_some());
    !repeated || (phase.complete && phase.degraded.is_empty())
}

/// Every repeated phase of the plan with what its counted repeats measured
/// so far (`None` when the plan repeats nothing).
pub fn summarize(plan: &Plan, phases: &[PhaseResult]) -> Option<Vec<RepeatedPhase>> {
    let mut out: Vec<RepeatedPhase> = Vec::new();
    for planned in plan.phases.iter() {
        let Some(repeat) = &planned.repeat else { continue };
        let at = match out.iter().position(|r| r.phase == repeat.of) {
            Some(at) => at,
            None => {
                out.push(RepeatedPhase {
                    phase: repeat.of.clone(),
                    count: repeat.count,
                    counted: 0,
                    numbers: Vec::new(),
                });
                out.len() - 1
            }
        };
        let Some(measured) = phases.iter().find(|p| p.index == planned.index && counts(plan, p)) else {
            continue;
        };
        let entry = &mut out[at];
        entry.counted += 1;
        for Number { item, metric, value } in numbers(measured) {
            let value = RepeatValue { repeat: repeat.number, phase: measured.index, value };
            match entry.numbers.iter_mut().find(|n| n.item == item && n.metric == metric) {
                Some(n) => n.values.push(value),
                None => entry.numbers.push(RepeatedNumber {
                    item,
                    metric,
                    unit: metric.unit().to_string(),
                    values: vec![value],
                    spread: None,
                }),
            }
        }
    }
    for n in out.iter_mut().flat_map(|r| &mut r.numbers) {
        n.spread = Spread::of(&n.values.iter().map(|v| v.value).collect::<Vec<_>>());
    }
    (!out.is_empty()).then_some(out)
}

/// One aggregate of one phase.
struct Number {
    item: String,
    metric: Metric,
    value: f64,
}

/// The aggregates of one phase.
fn numbers(p: &PhaseResult) -> Vec<Number> {
    let mut out = Vec::new();
    let mut push = |item: String, metric, value| out.push(Number { item, metric, value });
    if p.flows.iter().any(|f| f.mode == Mode::Bandwidth) {
        push("aggregate".to_string(), Metric::AggregateGbps, p.aggregate_gbps);
    }
    for r in p.receivers.iter().filter(|r| r.senders > 1) {
        push(format!("into {}", r.host), Metric::ReceiverGbps, r.aggregate_gbps);
    }
    for g in p.groups.iter().filter(|g| g.mode == Mode::Bandwidth && g.transport == Transport::Rdma) {
        let rate: f64 = p.flows.iter().filter(|f| f.group == g.name).map(|f| f.msgs_per_s).sum();
        push(format!("group {}", g.name), Metric::Mpps, rate / 1e6);
    }
    for f in &p.flows {
        if let Some(l) = &f.latency {
            let item = format!("{} {} → {}", f.group, f.src_host, f.dst_host);
            push(item.clone(), Metric::LatencyTypical, l.typical_us);
            push(item, Metric::LatencyP99, l.p99_us);
        }
    }
    if let Some(cpu) = p.ranks.iter().filter(|r| r.reported).map(|r| r.cpu.worker_pct).reduce(f64::max) {
        push("busiest worker".to_string(), Metric::MaxWorkerCpu, cpu);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Repeat;
    use crate::result::RunResult;

    fn fixture(name: &str) -> RunResult {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name);
        serde_json::from_str(&std::fs::read_to_string(&path).expect("fixture")).expect("a run.json")
    }

    /// The RDMA fan-in's one phase as three repeats, the aggregate of each
    /// scaled by `scale`, the third cut short.
    fn three_repeats(scale: [f64; 3]) -> RunResult {
        let mut run = fixture("v3-rdma-fan-in.json");
        let (planned, measured) = (run.plan.phases[0].clone(), run.phases[0].clone());
        run.plan.phases.clear();
        run.phases.clear();
        for (k, s) in scale.into_iter().enumerate() {
            let mut p = planned.clone();
            p.index = k;
            p.repeat = Some(Repeat { number: k as u32 + 1, count: 3, of: planned.name.clone() });
            run.plan.phases.push(p);
            let mut m = measured.clone();
            m.index = k;
            m.aggregate_gbps *= s;
            m.complete = k < 2;
            run.phases.push(m);
        }
        run
    }

    #[test]
    fn counted_repeats_give_every_aggregate_with_its_spread() {
        let run = three_repeats([1.0, 0.5, 2.0]);
        let summary = summarize(&run.plan, &run.phases).expect("a repeated plan");
        let [phase] = &summary[..] else { panic!("{summary:?}") };
        assert_eq!((phase.count, phase.counted), (3, 2), "the cut-short repeat is not counted");
        let find =
            |metric: Metric| phase.numbers.iter().find(|n| n.metric == metric).unwrap_or_else(|| panic!("{metric:?}"));
        let aggregate = find(Metric::AggregateGbps);
        let base = run.phases[0].aggregate_gbps;
        let values: Vec<f64> = aggregate.values.iter().map(|v| v.value).collect();
        assert_eq!(values, [base, base * 0.5]);
        assert_eq!(aggregate.values.iter().map(|v| (v.repeat, v.phase)).collect::<Vec<_>>(), [(1, 0), (2, 1)]);
        let s = aggregate.spread.expect("two values");
        assert!((s.mean - base * 0.75).abs() < 1e-9 && s.min == base * 0.5 && s.max == base);
        // RDMA bandwidth: the group's message rate, Σ msgs/s of its flows in millions.
        let mpps = phase.numbers.iter().find(|n| n.metric == Metric::Mpps).expect("an RDMA group's Mpps");
        let rate: f64 =
            run.phases[0].flows.iter().filter(|f| f.group == mpps.item["group ".len()..]).map(|f| f.msgs_per_s).sum();
        assert!(rate > 0.0);
        assert_eq!(mpps.values[0].value, rate / 1e6);
        assert_eq!(find(Metric::MaxWorkerCpu).unit, "% of one core");
    }

    #[test]
    fn a_plan_without_repeats_has_no_summary() {
        let run = fixture("v3-fan-in.json");
        assert_eq!(summarize(&run.plan, &run.phases), None);
    }
}
