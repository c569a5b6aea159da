//! Acceptance: checking a run against its rules (`[check]`, `--check`),
//! localising failing links to suspect hosts and links, and retesting the
//! suspects alone. Pure: the retest run itself is started by `run`.

mod evaluate;
mod localise;
mod retest;

use std::collections::BTreeMap;

pub use localise::{localise, Finding, Link};
pub use retest::{apply as apply_retest, plan as retest_plan};

use crate::result::{Acceptance, CheckOutcome, Checked, Retest, RunResult, Suspect, SuspectKind, Verdict};
use crate::scenario::{CheckSpec, Pattern, Subject};

/// Checks every rule; `None` when there are no rules.
pub fn judge(run: &RunResult, spec: &CheckSpec) -> Option<Acceptance> {
    let rules = spec.rules();
    if rules.is_empty() {
        return None;
    }
    let checks: Vec<CheckOutcome> =
        rules.iter().flat_map(|&rule| evaluate::evaluate(run, rule, spec.line_rate)).collect();
    let suspects = suspects(run, &checks);
    let passed = checks.iter().all(|c| c.verdict == Verdict::Pass);
    Some(Acceptance { passed, rules, line_rate_gbps: spec.line_rate, checks, suspects, retest_phases: Vec::new() })
}

/// Suspects from the flow checks of patterns that measure links alone
/// (all-pairs, pairwise): hosts first, then links, each worst first.
fn suspects(run: &RunResult, checks: &[CheckOutcome]) -> Vec<Suspect> {
    let isolating = |phase: usize, flow: u32| -> bool {
        run.plan.phases.get(phase).is_some_and(|p| {
            p.flows.iter().find(|f| f.id == flow).is_some_and(|f| {
                matches!(p.groups[f.group].pattern, Pattern::AllPairs | Pattern::Pairwise)
            })
        })
    };
    // link -> (failed, slowest Gb/s of its failing flows, rules failed)
    let mut links: BTreeMap<(usize, usize), (bool, f64, Vec<String>)> = BTreeMap::new();
    for c in checks.iter().filter(|c| c.rule.subject == Subject::Flow) {
        let Checked::Flow { phase, flow, src, dst } = c.item else { continue };
        if !isolating(phase, flow) {
            continue;
        }
        let entry = links.entry(retest::link_of(src, dst)).or_insert((false, f64::INFINITY, Vec::new()));
        if c.verdict == Verdict::Fail {
            entry.0 = true;
            entry.1 = entry.1.min(c.value.unwrap_or(0.0));
            let rule = c.rule.to_string();
            if !entry.2.contains(&rule) {
                entry.2.push(rule);
            }
        }
    }
    let measured: Vec<Link> = links.iter().map(|(&(a, b), &(failed, ..))| Link { a, b, failed }).collect();
    let host = |r: usize| run.plan.ranks.get(r).map_or_else(|| format!("rank {r}"), |i| i.host.clone());
    let slowest = |pred: &dyn Fn(usize, usize) -> bool| {
        links.iter().filter(|(&(a, b), v)| v.0 && pred(a, b)).map(|(_, v)| v.1).fold(f64::INFINITY, f64::min)
    };
    let rules_of = |pred: &dyn Fn(usize, usize) -> bool| {
        let mut all: Vec<String> = links.iter().filter(|(&(a, b), v)| v.0 && pred(a, b)).flat_map(|(_, v)| v.2.clone()).collect();
        all.sort();
        all.dedup();
        all.join(", ")
    };
    let not_run = || Retest::NotRun { reason: "not retested".into() };
    // (fabric, then hosts, then links; each slowest first)
    let mut found: Vec<((u8, f64), Suspect)> = localise(&measured)
        .into_iter()
        .map(|finding| match finding {
            Finding::Host(rank) => {
                let on = |a: usize, b: usize| a == rank || b == rank;
                let count = measured.iter().filter(|l| l.a == rank || l.b == rank).count();
                let worst = slowest(&on);
                let evidence =
                    format!("all {count} of its links failed {}; slowest {worst:.3} Gb/s", rules_of(&on));
                ((1, worst), Suspect { kind: SuspectKind::Host { rank, host: host(rank) }, evidence, retest: not_run() })
            }
            Finding::Link(a, b) => {
                let on = |x: usize, y: usize| (x, y) == (a, b);
                let worst = slowest(&on);
                let evidence = format!(
                    "this link failed {} at {worst:.3} Gb/s while both hosts passed on other links",
                    rules_of(&on)
                );
                let kind = SuspectKind::Link { a, b, a_host: host(a), b_host: host(b) };
                ((2, worst), Suspect { kind, evidence, retest: not_run() })
            }
            Finding::Fabric => {
                let evidence = format!(
                    "all {} links failed {}: no single host or link stands out (check the threshold, or the fabric as a whole)",
                    measured.len(),
                    rules_of(&|_, _| true)
                );
                ((0, 0.0), Suspect { kind: SuspectKind::Fabric, evidence, retest: not_run() })
            }
        })
        .collect();
    found.sort_by(|x, y| x.0 .0.cmp(&y.0 .0).then(x.0 .1.total_cmp(&y.0 .1)));
    found.into_iter().map(|(_, s)| s).collect()
}
