//! Retesting suspects alone: one phase per suspect with only its own flows,
//! after the run, so a failure caused by the rest of the traffic (or a
//! moment's noise) clears and a bad host or link fails again.

use std::collections::BTreeSet;

use crate::acceptance::evaluate;
use crate::acceptance::localise::{Link, OnLink, RankPair};
use crate::acceptance::paths::Paths;
use crate::acceptance::switches;
use crate::plan::{Flow, Phase, Plan};
use crate::result::{Acceptance, Checked, FlowResult, PhaseResult, Retest, RunResult, Suspect, SuspectKind, Verdict};
use crate::scenario::{Rule, Subject};

/// A plan that retests suspects, one phase each.
pub struct RetestPlan {
    pub plan: Plan,
    /// Per phase, the index of the suspect it retests.
    pub owners: Vec<usize>,
}

/// The retest of the suspects that can be retested; the others get a
/// reason in their `retest`. `paths` (the run's topology) chooses the
/// links that retest an uplink.
pub fn plan(run: &RunResult, acceptance: &mut Acceptance, paths: Option<&dyn Paths>) -> Option<RetestPlan> {
    let first = run.plan.phases.first()?;
    let (groups, stress) = (first.groups.clone(), first.stress.clone());
    let measured: Vec<Flow> = run.plan.phases.iter().flat_map(|p| p.flows.iter().copied()).collect();
    let failed = failed_links(acceptance);
    let mut phases = Vec::new();
    let mut owners = Vec::new();
    let suspects = acceptance.suspects.clone();
    for (index, suspect) in acceptance.suspects.iter_mut().enumerate() {
        let Retesting { name, links } = match links_of(run, &suspects, suspect, &measured, &failed, paths) {
            Ok(chosen) => chosen,
            Err(why) => {
                suspect.retest = Retest::NotRun { reason: why.to_string() };
                continue;
            }
        };
        let mut flows: Vec<Flow> = Vec::new();
        for f in measured.iter().filter(|f| links.contains(&link(f))) {
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
    (!phases.is_empty()).then(|| RetestPlan { plan: Plan { ranks: run.plan.ranks.clone(), phases }, owners })
}

/// Why a suspect is not retested; its text is the reason run.json keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
enum NotRetested {
    #[error("no healthy partner to retest it with")]
    NoPartner,
    #[error("the retest has no topology")]
    NoTopology,
    #[error("no passing pair avoids it to retest it against")]
    NothingAvoids,
    #[error("a leaf switch is not retested alone: every link of its hosts failed")]
    Leaf,
    #[error("every link failed: nothing to retest alone")]
    Fabric,
}

/// A suspect's retest phase: its name and the links it measures.
struct Retesting {
    name: String,
    links: Vec<RankPair>,
}

/// The retest phase of `suspect`, or why there is none.
fn links_of(
    run: &RunResult,
    suspects: &[Suspect],
    suspect: &Suspect,
    measured: &[Flow],
    failed: &BTreeSet<RankPair>,
    paths: Option<&dyn Paths>,
) -> Result<Retesting, NotRetested> {
    let suspect_ranks: BTreeSet<usize> = suspects.iter().flat_map(|s| s.kind.own_ranks()).collect();
    // A partner whose own links passed (apart from those to suspect ranks),
    // one per rank retested.
    let mut taken = BTreeSet::new();
    let mut partner = |rank: usize| {
        let found = run.plan.ranks.iter().map(|r| r.rank).find(|&r| {
            r != rank
                && !suspect_ranks.contains(&r)
                && !taken.contains(&r)
                && measured.iter().any(|f| link(f) == RankPair::of(rank, r))
                && failed.iter().all(|l| !l.has(r) || suspect_ranks.contains(&l.other(r)))
        });
        taken.extend(found);
        found.map(|p| RankPair::of(rank, p)).ok_or(NotRetested::NoPartner)
    };
    let hosts_of = |links: &[RankPair], own: &[usize]| {
        let mut hosts: Vec<&str> = links
            .iter()
            .map(|l| if own.contains(&l.low) { l.high } else { l.low })
            .map(|p| run.plan.ranks[p].host.as_str())
            .collect();
        hosts.dedup();
        hosts.join(", ")
    };
    match &suspect.kind {
        SuspectKind::Host { host, .. } => {
            let own = suspect.kind.own_ranks();
            let links = own.iter().map(|&r| partner(r)).collect::<Result<Vec<_>, _>>()?;
            Ok(Retesting { name: format!("retest host {host} with {}", hosts_of(&links, &own)), links })
        }
        SuspectKind::Nic(end) | SuspectKind::Cable { end, .. } => {
            let links = vec![partner(end.rank)?];
            let what = if matches!(suspect.kind, SuspectKind::Cable { .. }) { "the cable of NIC" } else { "NIC" };
            let nic = end.nic.clone().unwrap_or_else(|| format!("rank {}", end.rank));
            let name = format!("retest {what} {} {nic} with {}", end.host, hosts_of(&links, &[end.rank]));
            Ok(Retesting { name, links })
        }
        SuspectKind::Link { a, b, a_host, b_host } => {
            Ok(Retesting { name: format!("retest link {a_host} - {b_host}"), links: vec![RankPair::of(*a, *b)] })
        }
        SuspectKind::Uplink { uplinks, pairs, .. } => {
            let paths = paths.ok_or(NotRetested::NoTopology)?;
            let explained: Vec<RankPair> = pairs.iter().map(|&[a, b]| RankPair::of(a, b)).collect();
            let mut links: Vec<Link> = Vec::new();
            for l in measured.iter().map(link) {
                if !links.iter().any(|m| m.pair() == l) {
                    links.push(Link { a: l.low, b: l.high, failed: failed.contains(&l) });
                }
            }
            let switches::RetestLinks { crossing, avoiding } =
                switches::retest_links(uplinks, &explained, &links, paths);
            if avoiding.is_empty() {
                return Err(NotRetested::NothingAvoids);
            }
            let names: Vec<String> = uplinks.iter().map(ToString::to_string).collect();
            let links = crossing.into_iter().chain(avoiding).collect();
            Ok(Retesting { name: format!("retest uplink {}", names.join(" / ")), links })
        }
        SuspectKind::Leaf { .. } => Err(NotRetested::Leaf),
        SuspectKind::Fabric => Err(NotRetested::Fabric),
    }
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
        let on = on(&acceptance.suspects[index]);
        let touches = |item: &Checked| matches!(*item, Checked::Flow { src, dst, .. } if on(src, dst));
        // The rules the suspect's flows failed in the run, with their limits
        // (the same for every flow of a rule and group).
        let failed: Vec<(Rule, f64)> = acceptance
            .checks
            .iter()
            .filter(|c| c.verdict == Verdict::Fail && is_flow_rule(c.rule) && touches(&c.item))
            .filter_map(|c| Some((c.rule, c.limit?)))
            .collect();
        let passes = |f: &&FlowResult| {
            f.error.is_none()
                && failed.iter().all(|&(rule, limit)| {
                    evaluate::flow_value(rule.subject, f).is_none_or(|v| evaluate::passes(rule, v, limit))
                })
        };
        // An uplink's retest also measures links avoiding it, which should pass.
        let (own, avoiding): (Vec<&FlowResult>, Vec<&FlowResult>) = phase.flows.iter().partition(|f| on(f.src, f.dst));
        let gbps = own.iter().map(|f| f.gbps).fold(f64::INFINITY, f64::min);
        let passed = own.iter().all(passes);
        acceptance.suspects[index].retest = match (passed, avoiding.iter().all(passes)) {
            (true, _) => Retest::Cleared { phase: k, gbps },
            (false, true) => Retest::Confirmed { phase: k, gbps },
            (false, false) => Retest::Inconclusive {
                phase: k,
                reason: "the pairs avoiding it failed too: it does not explain the failures alone".into(),
            },
        };
        if passed {
            for c in acceptance.checks.iter_mut().filter(|c| c.verdict == Verdict::Fail) {
                if is_flow_rule(c.rule) && touches(&c.item) {
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
    matches!(rule.subject, Subject::Flow | Subject::Latency | Subject::P99 | Subject::Loss)
}

/// Whether a flow between two ranks is on the suspect: any of a host's
/// or a leaf's hosts' flows, a link's, the links an uplink explains.
fn on(suspect: &Suspect) -> OnLink {
    match suspect.kind.clone() {
        kind @ (SuspectKind::Host { .. } | SuspectKind::Nic { .. } | SuspectKind::Cable { .. }) => {
            let ranks = kind.own_ranks();
            Box::new(move |a, b| ranks.contains(&a) || ranks.contains(&b))
        }
        SuspectKind::Link { a, b, .. } => Box::new(move |x, y| RankPair::of(x, y) == RankPair::of(a, b)),
        SuspectKind::Uplink { pairs, .. } => Box::new(move |x, y| pairs.contains(&[x.min(y), x.max(y)])),
        SuspectKind::Leaf { ranks, .. } => Box::new(move |a, b| ranks.contains(&a) || ranks.contains(&b)),
        SuspectKind::Fabric => Box::new(|_, _| false),
    }
}

fn failed_links(acceptance: &Acceptance) -> BTreeSet<RankPair> {
    acceptance
        .checks
        .iter()
        .filter(|c| c.verdict == Verdict::Fail)
        .filter_map(|c| match c.item {
            Checked::Flow { src, dst, .. } => Some(RankPair::of(src, dst)),
            _ => None,
        })
        .collect()
}

fn link(f: &Flow) -> RankPair {
    RankPair::of(f.src, f.dst)
}
