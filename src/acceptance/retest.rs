//! Retesting suspects alone: one phase per suspect with only its own flows,
//! after the run, so a failure caused by the rest of the traffic (or a
//! moment's noise) clears and a bad host or link fails again.

use std::collections::BTreeSet;

use crate::acceptance::evaluate;
use crate::plan::{Flow, Phase, Plan};
use crate::result::{Acceptance, Checked, PhaseResult, Retest, RunResult, Suspect, SuspectKind, Verdict};
use crate::scenario::{Rule, Subject};

/// The retest plan and, per phase, the index of the suspect it retests.
/// Suspects that cannot be retested get a reason in their `retest`.
pub fn plan(run: &RunResult, acceptance: &mut Acceptance) -> Option<(Plan, Vec<usize>)> {
    let first = run.plan.phases.first()?;
    let (groups, stress) = (first.groups.clone(), first.stress.clone());
    let measured: Vec<(usize, Flow)> =
        run.plan.phases.iter().flat_map(|p| p.flows.iter().map(move |f| (p.index, *f))).collect();
    let suspect_hosts: BTreeSet<usize> = acceptance
        .suspects
        .iter()
        .filter_map(|s| match s.kind {
            SuspectKind::Host { rank, .. } => Some(rank),
            _ => None,
        })
        .collect();
    let failed = failed_links(acceptance);
    let mut phases = Vec::new();
    let mut owners = Vec::new();
    for (index, suspect) in acceptance.suspects.iter_mut().enumerate() {
        let (a, b, name) = match &suspect.kind {
            SuspectKind::Host { rank, host } => {
                // A partner whose own links passed (apart from those to suspect hosts).
                let partner = run.plan.ranks.iter().map(|r| r.rank).find(|&r| {
                    r != *rank
                        && !suspect_hosts.contains(&r)
                        && measured.iter().any(|(_, f)| link(f) == link_of(*rank, r))
                        && failed.iter().all(|&(x, y)| (x != r && y != r) || suspect_hosts.contains(&(x + y - r)))
                });
                let Some(partner) = partner else {
                    suspect.retest = Retest::NotRun { reason: "no healthy partner to retest it with".into() };
                    continue;
                };
                (*rank, partner, format!("retest host {host} with {}", run.plan.ranks[partner].host))
            }
            SuspectKind::Link { a, b, a_host, b_host } => (*a, *b, format!("retest link {a_host} - {b_host}")),
            SuspectKind::Fabric => {
                suspect.retest = Retest::NotRun { reason: "every link failed: nothing to retest alone".into() };
                continue;
            }
        };
        let mut flows: Vec<Flow> = Vec::new();
        for (_, f) in measured.iter().filter(|(_, f)| link(f) == link_of(a, b)) {
            if !flows.iter().any(|g| (g.src, g.dst) == (f.src, f.dst)) {
                flows.push(Flow { id: flows.len() as u32, ..*f });
            }
        }
        // Alone, but under the same CPU stress as in the run.
        phases.push(Phase {
            index: phases.len(),
            name,
            groups: groups.clone(),
            flows,
            stress: stress.clone(),
            sweep: None,
            congestion: None,
            repeat: None,
        });
        owners.push(index);
    }
    (!phases.is_empty()).then(|| (Plan { ranks: run.plan.ranks.clone(), phases }, owners))
}

/// Records the retest phases and clears what passed alone.
pub fn apply(acceptance: &mut Acceptance, owners: &[usize], phases: Vec<PhaseResult>, failure: Option<&str>) {
    for (k, &index) in owners.iter().enumerate() {
        let Some(phase) = phases.get(k).filter(|p| p.complete) else {
            let reason = match failure {
                Some(e) => format!("the retest run failed: {e}"),
                None => "the retest phase did not complete".into(),
            };
            acceptance.suspects[index].retest = Retest::NotRun { reason };
            continue;
        };
        let ends = ends(&acceptance.suspects[index]);
        // The rules the suspect's flows failed in the run, with their limits
        // (the same for every flow of a rule and group).
        let failed: Vec<(Rule, f64)> = acceptance
            .checks
            .iter()
            .filter(|c| c.verdict == Verdict::Fail && is_flow_rule(c.rule) && touches(&c.item, &ends))
            .filter_map(|c| Some((c.rule, c.limit?)))
            .collect();
        let gbps = phase.flows.iter().map(|f| f.gbps).fold(f64::INFINITY, f64::min);
        let passed = phase.flows.iter().all(|f| {
            f.error.is_none()
                && failed.iter().all(|&(rule, limit)| {
                    evaluate::flow_value(rule.subject, f).is_none_or(|v| evaluate::passes(rule, v, limit))
                })
        });
        acceptance.suspects[index].retest =
            if passed { Retest::Cleared { phase: k, gbps } } else { Retest::Confirmed { phase: k, gbps } };
        if passed {
            for c in acceptance.checks.iter_mut().filter(|c| c.verdict == Verdict::Fail) {
                if is_flow_rule(c.rule) && touches(&c.item, &ends) {
                    c.verdict = Verdict::Cleared;
                    c.note = Some(format!("passed when retested alone: {gbps:.3} Gb/s"));
                }
            }
        }
    }
    acceptance.retest_phases = phases;
    acceptance.passed = acceptance.checks.iter().all(|c| matches!(c.verdict, Verdict::Pass | Verdict::Cleared));
}

/// Rules checked flow by flow, which localise to hosts and links.
pub(crate) fn is_flow_rule(rule: Rule) -> bool {
    matches!(rule.subject, Subject::Flow | Subject::Latency)
}

pub(crate) fn is_latency(rule: Rule) -> bool {
    rule.subject == Subject::Latency
}

/// The ranks a suspect stands for: a host (any of its flows), or a link's two ends.
fn ends(suspect: &Suspect) -> Vec<usize> {
    match suspect.kind {
        SuspectKind::Host { rank, .. } => vec![rank],
        SuspectKind::Link { a, b, .. } => vec![a, b],
        SuspectKind::Fabric => Vec::new(),
    }
}

/// Whether a flow outcome is on the suspect: one end for a host, both for a link.
fn touches(item: &Checked, ends: &[usize]) -> bool {
    let Checked::Flow { src, dst, .. } = item else { return false };
    match ends {
        [host] => src == host || dst == host,
        [a, b] => link_of(*src, *dst) == link_of(*a, *b),
        _ => false,
    }
}

fn failed_links(acceptance: &Acceptance) -> BTreeSet<(usize, usize)> {
    acceptance
        .checks
        .iter()
        .filter(|c| c.verdict == Verdict::Fail)
        .filter_map(|c| match c.item {
            Checked::Flow { src, dst, .. } => Some(link_of(src, dst)),
            _ => None,
        })
        .collect()
}

fn link(f: &Flow) -> (usize, usize) {
    link_of(f.src, f.dst)
}

pub(crate) fn link_of(a: usize, b: usize) -> (usize, usize) {
    (a.min(b), a.max(b))
}
