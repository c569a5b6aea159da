//! Suspects from the flow checks of patterns that measure links alone
//! (all-pairs, pairwise): the findings of [`localise`] (or, with a
//! topology, [`localise_on`]) with their evidence in words.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use crate::acceptance::localise::{by_host, localise, Finding, Link, OnLink, RankPair};
use crate::acceptance::paths::Paths;
use crate::acceptance::retest;
use crate::acceptance::switches::{localise_on, one_way, Flow};
use crate::result::limit::{most_often, MostHeld};
use crate::result::{CheckOutcome, Checked, NicEnd, Retest, RunResult, Suspect, SuspectKind, UplinkOutcome, Verdict};
use crate::scenario::{Mode, Pattern};
use crate::topology::{Uplink, UplinkCable};

/// One measured link's failures.
struct Tally {
    failed: bool,
    /// Each way measured (sender, receiver) and whether it failed.
    ways: BTreeMap<(usize, usize), bool>,
    /// The worst failing flow's share of its limit.
    worst: f64,
    /// The rules it failed.
    rules: Vec<String>,
}

/// Fabric, then leaves and hosts, then uplinks, then links; each slowest first.
pub(super) fn suspects(run: &RunResult, checks: &[CheckOutcome], paths: Option<&dyn Paths>) -> Vec<Suspect> {
    let links = tally(run, checks);
    let measured: Vec<Link> = links.iter().map(|(p, t)| Link { a: p.low, b: p.high, failed: t.failed }).collect();
    let findings = match paths {
        Some(paths) => localise_on(&measured, paths),
        None => localise(&measured),
    };
    let host_of = |r: usize| run.plan.ranks.get(r).map(|i| i.host.clone());
    let findings = by_host(findings, &measured, &host_of);
    let words = Evidence { run, links: &links, measured: &measured, paths };
    let mut found: Vec<((u8, f64), Suspect)> = findings.into_iter().map(|f| words.suspect(f)).collect();
    found.sort_by(|x, y| x.0 .0.cmp(&y.0 .0).then(x.0 .1.total_cmp(&y.0 .1)));
    found.into_iter().map(|(_, s)| s).collect()
}

/// Each uplink the measured links may cross: how many, which failed, the
/// lowest Gb/s among their bandwidth flows.
pub(super) fn uplinks(run: &RunResult, checks: &[CheckOutcome], paths: &dyn Paths) -> Vec<UplinkOutcome> {
    let mut lowest: BTreeMap<RankPair, f64> = BTreeMap::new();
    for f in run.phases.iter().flat_map(|p| &p.flows).filter(|f| f.mode == Mode::Bandwidth) {
        let gbps = lowest.entry(RankPair::of(f.src, f.dst)).or_insert(f.gbps);
        *gbps = gbps.min(f.gbps);
    }
    let mut by_uplink: BTreeMap<Uplink, UplinkOutcome> = BTreeMap::new();
    for (&pair, t) in &tally(run, checks) {
        let gbps = lowest.get(&pair).copied();
        for uplink in paths.uplinks(pair.low, pair.high) {
            let outcome = by_uplink.entry(uplink.clone()).or_insert_with(|| UplinkOutcome {
                cables: paths.cables(&uplink),
                uplink,
                links: 0,
                failed: Vec::new(),
                min_gbps: None,
            });
            outcome.links += 1;
            if t.failed {
                outcome.failed.push(pair.ends());
            }
            outcome.min_gbps = match (outcome.min_gbps, gbps) {
                (Some(x), Some(y)) => Some(x.min(y)),
                (x, y) => x.or(y),
            };
        }
    }
    by_uplink.into_values().collect()
}

/// Each link measured by an isolating pattern, and how it failed: pairs
/// alone (all-pairs, pairwise), or a mesh of probes, which at a few a
/// second on each path load none of them.
fn tally(run: &RunResult, checks: &[CheckOutcome]) -> BTreeMap<RankPair, Tally> {
    let isolating = |phase: usize, flow: u32| -> bool {
        run.plan.phases.get(phase).is_some_and(|p| {
            p.flows.iter().find(|f| f.id == flow).is_some_and(|f| {
                matches!(p.groups[f.group].pattern, Pattern::AllPairs | Pattern::Pairwise | Pattern::Mesh)
            })
        })
    };
    let mut links: BTreeMap<RankPair, Tally> = BTreeMap::new();
    for c in checks.iter().filter(|c| retest::is_flow_rule(c.rule)) {
        let Checked::Flow { phase, flow, src, dst } = c.item else { continue };
        if !isolating(phase, flow) {
            continue;
        }
        let entry = links.entry(RankPair::of(src, dst)).or_insert(Tally {
            failed: false,
            ways: BTreeMap::new(),
            worst: f64::INFINITY,
            rules: Vec::new(),
        });
        let way = entry.ways.entry((src, dst)).or_insert(false);
        *way |= c.verdict == Verdict::Fail;
        if c.verdict == Verdict::Fail {
            entry.failed = true;
            entry.worst = entry.worst.min(share_of_limit(c));
            let rule = c.rule.to_string();
            if !entry.rules.contains(&rule) {
                entry.rules.push(rule);
            }
        }
    }
    links
}

/// What the suspects' evidence is drawn from.
struct Evidence<'a> {
    run: &'a RunResult,
    links: &'a BTreeMap<RankPair, Tally>,
    measured: &'a [Link],
    paths: Option<&'a dyn Paths>,
}

impl Evidence<'_> {
    fn host_of(&self, r: usize) -> String {
        self.run.plan.ranks.get(r).map_or_else(|| format!("rank {r}"), |i| i.host.clone())
    }

    fn failing<'s>(&'s self, on: &'s dyn Fn(usize, usize) -> bool) -> impl Iterator<Item = &'s Tally> + 's {
        self.links.iter().filter(move |(p, t)| t.failed && on(p.low, p.high)).map(|(_, t)| t)
    }

    /// Every way of every measured link.
    fn flows(&self) -> Vec<Flow> {
        let ways = self.links.values().flat_map(|t| &t.ways);
        ways.map(|(&(src, dst), &failed)| Flow { src, dst, failed }).collect()
    }

    fn worst_share(&self, on: &dyn Fn(usize, usize) -> bool) -> f64 {
        self.failing(on).map(|t| t.worst).fold(f64::INFINITY, f64::min)
    }

    /// What held the flows that failed on `on`, where their phases judged
    /// them ("Why this number").
    fn held(&self, on: &dyn Fn(usize, usize) -> bool) -> Option<MostHeld> {
        let ways: BTreeSet<(usize, usize)> =
            self.failing(on).flat_map(|t| t.ways.iter().filter(|(_, &failed)| failed).map(|(&way, _)| way)).collect();
        let flows = self.run.phases.iter().flat_map(|p| &p.flows);
        most_often(flows.filter(|f| ways.contains(&(f.src, f.dst))).filter_map(|f| f.limit.as_ref().map(|l| l.kind)))
    }

    fn rules_of(&self, on: &dyn Fn(usize, usize) -> bool) -> String {
        let mut all: Vec<String> = self.failing(on).flat_map(|t| t.rules.clone()).collect();
        all.sort();
        all.dedup();
        all.join(", ")
    }

    /// A host whose every link failed, those of each of its NICs' ranks
    /// where it has several.
    fn host(&self, ranks: Vec<usize>) -> (u8, OnLink, SuspectKind, String) {
        let of = match ranks.len() {
            1 => String::new(),
            n => format!(", those of each of its {n} NICs (ranks),"),
        };
        let (rank, host) = (ranks[0], self.host_of(ranks[0]));
        let kind = SuspectKind::Host { rank, host, ranks: if ranks.len() > 1 { ranks } else { Vec::new() } };
        let own = kind.own_ranks();
        let count = self.measured.iter().filter(|l| own.contains(&l.a) || own.contains(&l.b)).count();
        let on = move |a: usize, b: usize| own.contains(&a) || own.contains(&b);
        let evidence = format!("all {count} of its links{of} failed {}", self.rules_of(&on));
        (1, Box::new(on), kind, evidence)
    }

    /// A NIC whose every link failed while its host's other NICs passed;
    /// its cable where its own link went down or recovered from errors in
    /// the run (the physical link's counters moved, not just its rate).
    fn nic(&self, rank: usize) -> (u8, OnLink, SuspectKind, String) {
        let count = self.measured.iter().filter(|l| l.a == rank || l.b == rank).count();
        let on = move |a: usize, b: usize| a == rank || b == rank;
        let mut evidence =
            format!("all {count} of its links failed {} while its host's other NICs passed", self.rules_of(&on));
        let end = NicEnd {
            rank,
            host: self.host_of(rank),
            nic: self.run.plan.ranks.get(rank).and_then(|r| r.own_nic()).map(str::to_string),
            cable: self.paths.and_then(|p| p.cable(rank)),
        };
        let events = link_events(self.run, rank);
        let kind = match events.len() {
            0 => SuspectKind::Nic(end),
            n => {
                let listed: Vec<&str> = events.iter().take(EVENTS_TOLD).map(String::as_str).collect();
                let more = if n > EVENTS_TOLD { format!(" and {} more", n - EVENTS_TOLD) } else { String::new() };
                let _ = write!(
                    evidence,
                    ", and its own link went down or recovered from errors {n} time(s) in the run ({}{more}): \
                     the cable or optic, not the NIC",
                    listed.join("; ")
                );
                SuspectKind::Cable { end, link_events: n }
            }
        };
        (1, Box::new(on), kind, evidence)
    }

    /// An uplink suspect (or one of several): the failing links it
    /// explains, the way they failed where one way did, and its cables
    /// where the topology names their ports.
    fn uplink(&self, uplinks: Vec<Uplink>, links: Vec<RankPair>) -> (u8, OnLink, SuspectKind, String) {
        let pairs: Vec<[usize; 2]> = links.iter().map(|l| l.ends()).collect();
        let one_way = self.paths.map(|p| one_way(&uplinks, &links, &self.flows(), p)).unwrap_or_default();
        let cables: Vec<UplinkCable> =
            self.paths.map(|p| uplinks.iter().flat_map(|u| p.cable_ports(u)).collect()).unwrap_or_default();
        let on = move |a: usize, b: usize| links.contains(&RankPair::of(a, b));
        let which = match uplinks.len() {
            1 => "all may cross this uplink and no host explains them".to_string(),
            n => format!("all may cross any of these {n} uplinks, which their paths cannot tell apart"),
        };
        let mut evidence = format!("{} links between leaves failed {}: {which}", pairs.len(), self.rules_of(&on));
        if !one_way.is_empty() {
            let named: Vec<String> = one_way.iter().map(ToString::to_string).collect();
            let _ = write!(evidence, "; only flows going {} failed, the other way passed", named.join(" or "));
        }
        match &cables[..] {
            [] => {}
            [one] => {
                let _ = write!(evidence, "; it is one cable, {one}");
            }
            several => {
                let named: Vec<String> = several.iter().map(ToString::to_string).collect();
                let _ = write!(
                    evidence,
                    "; its {} cables ({}) each carry some of the flows, which the paths cannot tell apart: their \
                     switch ports' counters can",
                    several.len(),
                    named.join(", ")
                );
            }
        }
        (2, Box::new(on), SuspectKind::Uplink { uplinks, pairs, one_way, cables }, evidence)
    }

    /// The suspect of a finding and its sort key.
    fn suspect(&self, finding: Finding) -> ((u8, f64), Suspect) {
        let (order, on, kind, evidence): (u8, OnLink, SuspectKind, String) = match finding {
            Finding::Fabric => {
                let evidence = format!(
                    "all {} links failed {}: no single host or link stands out (check the threshold, or the fabric as a whole)",
                    self.measured.len(),
                    self.rules_of(&|_, _| true)
                );
                return ((0, 0.0), Suspect { kind: SuspectKind::Fabric, evidence, retest: not_run() });
            }
            Finding::Host(ranks) => self.host(ranks),
            Finding::Nic(rank) => self.nic(rank),
            Finding::Leaf { leaf, ranks } => {
                let hosts: Vec<String> = ranks.iter().map(|&r| self.host_of(r)).collect();
                let kind = SuspectKind::Leaf { leaf, ranks: ranks.clone() };
                let on = move |a: usize, b: usize| ranks.contains(&a) || ranks.contains(&b);
                let evidence = format!(
                    "every link of its {} hosts ({}) failed {}, those under the leaf alone too",
                    hosts.len(),
                    hosts.join(", "),
                    self.rules_of(&on)
                );
                (1, Box::new(on), kind, evidence)
            }
            Finding::Uplinks { uplinks, links } => self.uplink(uplinks, links),
            Finding::Link(RankPair { low: a, high: b }) => {
                let on = move |x: usize, y: usize| (x, y) == (a, b);
                let evidence = format!("this link failed {}", self.rules_of(&on));
                (
                    3,
                    Box::new(on),
                    SuspectKind::Link { a, b, a_host: self.host_of(a), b_host: self.host_of(b) },
                    evidence,
                )
            }
        };
        let worst = self.worst_share(&*on);
        let evidence = match kind {
            SuspectKind::Link { .. } => {
                format!("{evidence} (at {:.0}% of its limit) while both hosts passed on other links", worst * 100.0)
            }
            _ => format!("{evidence}; the worst reached {:.0}% of its limit", worst * 100.0),
        };
        let evidence = match self.held(&*on) {
            Some(held) => format!("{evidence}; its failing flows were limited by {held}"),
            None => evidence,
        };
        ((order, worst), Suspect { kind, evidence, retest: not_run() })
    }
}

/// Link events a cable suspect's evidence lists; it counts them all.
const EVENTS_TOLD: usize = 3;

/// Each link event of `rank`'s interface and RDMA ports in the run, in
/// words: `eth2: down, carrier_changes +2`.
fn link_events(run: &RunResult, rank: usize) -> Vec<String> {
    let events = run.phases.iter().flat_map(|p| &p.ranks).filter(|r| r.rank == rank).flat_map(|r| &r.link_events);
    events
        .map(|e| {
            let moved = e.counters.iter().filter(|(_, &n)| n > 0).map(|(c, n)| format!("{c} +{n}"));
            let told: Vec<String> = e.states.iter().cloned().chain(moved).collect();
            format!("{}: {}", e.device, told.join(", "))
        })
        .collect()
}

fn not_run() -> Retest {
    Retest::NotRun { reason: "not retested".into() }
}

/// How much of its limit an outcome reached: below 1 when it failed
/// (bandwidth under its floor, latency over its ceiling).
fn share_of_limit(c: &CheckOutcome) -> f64 {
    match (c.value, c.limit) {
        (Some(v), Some(l)) if c.rule.subject.is_ceiling() => {
            if v > 0.0 {
                l / v
            } else {
                1.0
            }
        }
        (Some(v), Some(l)) if l > 0.0 => v / l,
        _ => 0.0,
    }
}
