//! Runs with `[run] repeat`: each phase's repeats pooled into one number
//! per item (their mean) with its 95 % interval, and which rule judges a
//! change. Both runs repeated: a change counts only beyond the tolerance
//! *and* with the two intervals apart; one run repeated: the tolerance
//! alone, as without repeats (one run's interval says nothing of the
//! other's noise), and the comparison says so.

use crate::metrics::confidence::Spread;
use crate::result::{repeats, PhaseResult, RunResult};

/// One number of one run: a value, or the mean of a phase's repeats.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Measured {
    pub value: f64,
    /// Over the repeats; `None` for a phase that ran once.
    pub spread: Option<Spread>,
}

/// How changes were judged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    /// Neither run repeats: the tolerance.
    Tolerance,
    /// Both repeat: the tolerance and the intervals.
    Intervals,
    /// Only one run repeats: the tolerance alone.
    OnlyBaseRepeats,
    OnlyNewRepeats,
}

impl Rule {
    pub fn of(base: &RunResult, new: &RunResult) -> Rule {
        match (repeats(base), repeats(new)) {
            (false, false) => Rule::Tolerance,
            (true, true) => Rule::Intervals,
            (true, false) => Rule::OnlyBaseRepeats,
            (false, true) => Rule::OnlyNewRepeats,
        }
    }

    /// What the comparison's title adds; nothing without repeats.
    pub fn note(self) -> Option<&'static str> {
        match self {
            Rule::Tolerance => None,
            Rule::Intervals => {
                Some("both runs repeat: a change counts only beyond the tolerance and with the 95 % intervals apart")
            }
            Rule::OnlyBaseRepeats => {
                Some("only the baseline repeats: judged by the tolerance alone, on the mean of its repeats")
            }
            Rule::OnlyNewRepeats => {
                Some("only the new run repeats: judged by the tolerance alone, on the mean of its repeats")
            }
        }
    }
}

fn repeats(run: &RunResult) -> bool {
    run.plan.phases.iter().any(|p| p.repeat.is_some())
}

/// A phase by its name (without the repeat), and the phases that count for
/// it: the phase itself when it ran once; of a repeated phase, the repeats
/// that are a valid measurement (complete, not degraded; as
/// `result::repeats`).
pub struct Counted<'a> {
    pub name: String,
    pub phases: Vec<&'a PhaseResult>,
}

/// Each phase of the run, in order, with the phases that count for it.
pub fn phases_by_name(run: &RunResult) -> Vec<Counted<'_>> {
    let mut out: Vec<Counted> = Vec::new();
    for p in &run.phases {
        if !repeats::counts(&run.plan, p) {
            continue;
        }
        let repeat = run.plan.phases.iter().find(|q| q.index == p.index).and_then(|q| q.repeat.as_ref());
        let name = repeat.map_or(&p.name, |r| &r.of);
        match out.iter_mut().find(|c| c.name == *name) {
            Some(counted) => counted.phases.push(p),
            None => out.push(Counted { name: name.clone(), phases: vec![p] }),
        }
    }
    out
}

/// The pooled number of one item's values (one per counted phase).
pub fn pooled(values: &[f64]) -> Measured {
    let value = values.iter().sum::<f64>() / values.len().max(1) as f64;
    Measured { value, spread: Spread::of(values) }
}

/// Whether the intervals of both numbers exist and overlap: then no change
/// between them is told apart from the noise of the repeats.
pub fn overlapping(base: &Measured, new: &Measured) -> bool {
    base.spread.zip(new.spread).is_some_and(|(b, n)| b.overlaps(&n))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::compare::{compare, Delta, Tolerances};
    use crate::result::Metric;

    fn fixture(name: &str) -> RunResult {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name);
        serde_json::from_str(&std::fs::read_to_string(&path).expect("fixture")).expect("a run.json")
    }

    /// A real sweep of 2 points × 3 repeats with the 16K point's repeats'
    /// aggregate set to `values` (what a synthetic baseline or new run needs).
    fn with_aggregates(values: [f64; 3]) -> RunResult {
        let mut run = fixture("v3-repeats-sweep.json");
        let of = |index: usize| run.plan.phases[index].repeat.as_ref().map(|r| r.of.clone()).unwrap_or_default();
        let at: Vec<usize> = (0..run.phases.len()).filter(|&i| of(run.phases[i].index) == "message_size=16K").collect();
        assert_eq!(at.len(), 3);
        for (i, v) in at.into_iter().zip(values) {
            run.phases[i].aggregate_gbps = v;
        }
        run
    }

    fn aggregate(base: &RunResult, new: &RunResult) -> (Delta, Option<f64>) {
        let c = compare(base, new, Tolerances::default());
        let row = c.rows.iter().find(|r| r.item == "message_size=16K: aggregate" && r.metric == Metric::Gbps);
        row.map(|r| (r.delta, r.change_pct())).expect("the aggregate row")
    }

    #[test]
    fn a_change_inside_the_intervals_is_not_a_regression() {
        // 10 ± 0.50 Gb/s against 9.13 ± 2.98: −8.7 %, beyond 5 %, but the intervals overlap.
        let base = with_aggregates([10.0, 10.2, 9.8]);
        let (delta, pct) = aggregate(&base, &with_aggregates([9.0, 10.4, 8.0]));
        assert_eq!(delta, Delta::WithinIntervals, "{pct:?}");
        assert!(pct.unwrap() < -5.0);
        let c = compare(&base, &with_aggregates([9.0, 10.4, 8.0]), Tolerances::default());
        assert_eq!(c.rule, Rule::Intervals);
        assert!(c.regressions().iter().all(|r| r.item != "message_size=16K: aggregate"));
        assert!(c.table().title.contains("with the 95 % intervals apart"), "{}", c.table().title);
    }

    #[test]
    fn a_change_outside_the_intervals_is_a_regression() {
        // 10 ± 0.50 against 8.9 ± 0.50: apart, and −11 %.
        let base = with_aggregates([10.0, 10.2, 9.8]);
        let new = with_aggregates([8.9, 9.1, 8.7]);
        assert_eq!(aggregate(&base, &new).0, Delta::Regression);
        assert_eq!(aggregate(&new, &base).0, Delta::Better);
        // Apart but within the tolerance is still the same.
        let (steady, near) = ([10.0, 10.01, 9.99], [9.7, 9.71, 9.69]);
        assert!(!Spread::of(&steady).unwrap().overlaps(&Spread::of(&near).unwrap()));
        assert_eq!(aggregate(&with_aggregates(steady), &with_aggregates(near)).0, Delta::Same, "−3 % < 5 %");
        // Each side's mean ± half interval is in the table.
        let c = compare(&base, &new, Tolerances::default());
        let row = c.table().rows.into_iter().find(|r| r[0] == "message_size=16K: aggregate").unwrap();
        assert_eq!(
            (row[2].as_str(), row[3].as_str(), row[6].as_str()),
            ("10.000 ± 0.497", "8.900 ± 0.497", "REGRESSION")
        );
    }

    /// Only one side repeats: today's rule on the repeats' mean, said so.
    #[test]
    fn one_repeated_side_falls_back_to_the_tolerance() {
        let repeated = with_aggregates([10.0, 10.2, 9.8]);
        let mut once = with_aggregates([8.0, 0.0, 0.0]);
        once.phases.retain(|p| p.index < 2);
        once.plan.phases.truncate(2);
        for p in &mut once.plan.phases {
            let of = p.repeat.take().expect("a repeat").of;
            p.name.clone_from(&of);
            once.phases[p.index].name = of;
        }
        // 10 → 8 with an interval on one side only: a regression by the tolerance.
        let c = compare(&repeated, &once, Tolerances::default());
        assert_eq!(c.rule, Rule::OnlyBaseRepeats);
        assert_eq!(aggregate(&repeated, &once).0, Delta::Regression);
        assert!(c.table().title.contains("only the baseline repeats: judged by the tolerance alone"));
        let back = compare(&once, &repeated, Tolerances::default());
        assert_eq!(back.rule, Rule::OnlyNewRepeats);
        assert_eq!(aggregate(&once, &repeated).0, Delta::Better);
        // No repeats anywhere: the title as before.
        let plain = compare(&once, &once, Tolerances::default());
        assert_eq!((plain.rule, plain.table().title.contains("repeat")), (Rule::Tolerance, false));
    }

    #[test]
    fn incomplete_or_degraded_repeats_do_not_count() {
        let run = fixture("v3-repeats-fan-in.json");
        let by_name = phases_by_name(&run);
        assert_eq!(by_name.len(), 1);
        let Counted { name, phases } = &by_name[0];
        assert_eq!(name, "fan-in");
        let degraded = run.phases.iter().filter(|p| !p.degraded.is_empty()).count();
        assert!(degraded > 0, "the fixture has a degraded repeat");
        assert_eq!(phases.len(), run.phases.len() - degraded);
    }
}
