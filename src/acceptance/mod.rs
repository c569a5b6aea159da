//! Acceptance: checking a run against its rules (`[check]`, `--check`),
//! localising failing links to suspect hosts, NICs and links, and retesting the
//! suspects alone. Pure: the retest run itself is started by `run`.

mod evaluate;
pub mod gate;
mod line_rate;
mod localise;
mod paths;
#[cfg(test)]
mod rails_tests;
mod retest;
mod suspects;
mod switches;
#[cfg(test)]
pub(crate) mod synthetic;

use line_rate::LineRates;
pub use paths::Paths;
pub use retest::{apply as apply_retest, plan as retest_plan, RetestPlan};

use crate::result::{Acceptance, CheckOutcome, RunResult, Verdict};
use crate::scenario::CheckSpec;

/// Checks every rule; `None` when there are no rules. With `paths` (the
/// run's topology) suspects may be switches as well as hosts and links.
pub fn judge(run: &RunResult, spec: &CheckSpec, paths: Option<&dyn Paths>) -> Option<Acceptance> {
    let rules = spec.rules();
    if rules.is_empty() {
        return None;
    }
    let line_rates = LineRates::new(run, spec.line_rate);
    let checks: Vec<CheckOutcome> = rules.iter().flat_map(|&rule| evaluate::evaluate(run, rule, &line_rates)).collect();
    let suspects = suspects::suspects(run, &checks, paths);
    let uplinks = paths.map(|paths| suspects::uplinks(run, &checks, paths)).unwrap_or_default();
    let passed = checks.iter().all(|c| c.verdict == Verdict::Pass);
    Some(Acceptance {
        passed,
        rules,
        line_rate_gbps: spec.line_rate,
        checks,
        suspects,
        retest_phases: Vec::new(),
        uplinks,
    })
}

#[cfg(test)]
mod tests {

    use super::synthetic::{all_pairs, phase};
    use super::*;
    use crate::acceptance::localise::RankPair;
    use crate::result::degraded::Degradation;
    use crate::result::{Checked, RankProbe, Retest, Suspect, SuspectKind};
    use crate::scenario::{Rule, Subject};
    use crate::topology::{SwitchName, Way};
    use crate::transport::rdma::{InventoryDevice, InventoryPort};

    fn spec(rules: &[&str], line_rate: Option<f64>) -> CheckSpec {
        let mut spec = CheckSpec { line_rate, ..CheckSpec::default() };
        for r in rules {
            spec.push(Rule::parse(r).unwrap());
        }
        spec
    }

    fn count(a: &Acceptance, v: Verdict) -> usize {
        a.checks.iter().filter(|c| c.verdict == v).count()
    }

    #[test]
    fn share_of_best_blames_the_slow_host() {
        let run = all_pairs(6, |a, b| if a == 2 || b == 2 { 5.0 } else { 10.0 - 0.01 * (a + b) as f64 });
        let a = judge(&run, &spec(&["flow >= 93% of best"], None), None).unwrap();
        assert!(!a.passed);
        assert_eq!(a.checks.len(), 30);
        assert_eq!(count(&a, Verdict::Fail), 10, "h3's 5 links, both ways");
        let best = 10.0 - 0.01;
        assert!(a.checks.iter().all(|c| (c.limit.unwrap() - best * 0.93).abs() < 1e-9));
        assert_eq!(a.suspects.len(), 1);
        assert_eq!(a.suspects[0].kind, SuspectKind::Host { rank: 2, host: "h3".into(), ranks: vec![] });
        assert!(
            a.suspects[0].evidence.starts_with("all 5 of its links failed flow >= 93% of best"),
            "{}",
            a.suspects[0].evidence
        );
    }

    #[test]
    fn absolute_rates_pass_and_fail_at_the_limit() {
        let run = all_pairs(4, |a, b| if (a, b) == (1, 3) { 8.999 } else { 9.0 });
        let a = judge(&run, &spec(&["flow >= 9 Gb/s"], None), None).unwrap();
        assert_eq!((count(&a, Verdict::Pass), count(&a, Verdict::Fail)), (11, 1));
        // One direction of one link: the link is the suspect, not a host.
        assert!(matches!(a.suspects[..], [Suspect { kind: SuspectKind::Link { a: 1, b: 3, .. }, .. }]));
        let a = judge(&run, &spec(&["flow >= 8.5 Gb/s"], None), None).unwrap();
        assert!(a.passed && a.suspects.is_empty());
        assert!(judge(&run, &CheckSpec::default(), None).is_none(), "no rules, no acceptance");
    }

    #[test]
    fn what_cannot_be_evaluated_does_not_pass() {
        let run = all_pairs(2, |_, _| 10.0);
        let a = judge(&run, &spec(&["flow >= 90% of line rate", "latency <= 2x min"], None), None).unwrap();
        assert!(!a.passed);
        assert_eq!(count(&a, Verdict::Unknown), 2);
        assert!(a.checks.iter().all(|c| c.item == Checked::Rule && c.value.is_none()));
        assert!(a.checks[0].note.as_deref().unwrap().contains("line rate is unknown"));
        assert!(a.checks[1].note.as_deref().unwrap().contains("measured no latency"));
        // With the rate known, the same rule is checked flow by flow.
        let a = judge(&run, &spec(&["flow >= 90% of line rate"], Some(12.5)), None).unwrap();
        assert_eq!(count(&a, Verdict::Fail), 2, "10 Gb/s < 90 % of 12.5");
        let a = judge(&run, &spec(&["flow >= 80% of line rate"], Some(12.5)), None).unwrap();
        assert!(a.passed);
    }

    #[test]
    fn a_degraded_phase_is_unknown_and_sets_no_best() {
        let mut run = all_pairs(4, |_, _| 10.0);
        let why = Degradation::StartSkew { skew_s: 2.87, limit_s: 0.2 };
        run.phases[1].degraded = vec![why];
        run.phases[1].flows.iter_mut().for_each(|f| f.gbps = 100.0);
        let a = judge(&run, &spec(&["flow >= 93% of best", "flow >= 1 Gb/s"], None), None).unwrap();
        assert!(!a.passed, "a degraded phase never passes");
        let in_phase = |c: &&CheckOutcome, n: usize| matches!(c.item, Checked::Flow { phase, .. } if phase == n);
        let degraded: Vec<_> = a.checks.iter().filter(|c| in_phase(c, 1)).collect();
        assert_eq!(degraded.len(), 2 * run.phases[1].flows.len(), "every item of both rules");
        for c in degraded {
            assert_eq!((c.verdict, c.limit), (Verdict::Unknown, None), "{c:?}");
            assert!(
                c.note.as_deref().unwrap().contains("phase 1 `round 2/3`: the flows started 2.870 s apart"),
                "{c:?}"
            );
        }
        let healthy: Vec<_> = a.checks.iter().filter(|c| !in_phase(c, 1)).collect();
        assert!(!healthy.is_empty() && healthy.iter().all(|c| c.verdict == Verdict::Pass), "{healthy:?}");
        assert!(a.suspects.is_empty(), "unknown outcomes blame no one");
    }

    /// A port as a probe reports it.
    fn port(state: &str, rate_gbps: f64) -> InventoryPort {
        InventoryPort {
            port: 1,
            state: state.into(),
            link_layer: "InfiniBand".into(),
            rate_gbps: Some(rate_gbps),
            mtu: 4096,
        }
    }

    fn device(name: &str, ports: Vec<InventoryPort>) -> InventoryDevice {
        InventoryDevice { name: name.into(), numa_node: Some(0), ports, error: None }
    }

    #[test]
    fn line_rate_comes_from_each_hosts_probe() {
        let mut run = all_pairs(3, |a, b| if a == 2 || b == 2 { 9.5 } else { 12.0 });
        for p in &mut run.phases {
            use crate::scenario::{Op, Pattern, Transport};
            let group = crate::result::testing::group("pairs", Pattern::AllPairs, Transport::Rdma, Op::Write, &p.flows);
            p.groups.push(group);
        }
        let probe = |rank: usize, devices: Vec<InventoryDevice>| RankProbe {
            rank,
            host: format!("h{}", rank + 1),
            devices,
            error: None,
            facts: None,
        };
        // h3's first device is down: the transport takes the first ACTIVE port, so do its checks.
        run.probes = vec![
            probe(0, vec![device("mlx5_0", vec![port("ACTIVE", 12.5)])]),
            probe(1, vec![device("mlx5_0", vec![port("ACTIVE", 12.5)])]),
            probe(2, vec![device("mlx5_0", vec![port("DOWN", 100.0)]), device("mlx5_1", vec![port("ACTIVE", 10.0)])]),
        ];
        let a = judge(&run, &spec(&["flow >= 90% of line rate"], None), None).unwrap();
        let limit = |src: usize, dst: usize| {
            let c = a
                .checks
                .iter()
                .find(|c| matches!(c.item, Checked::Flow { src: s, dst: d, .. } if (s, d) == (src, dst)));
            (c.unwrap().limit.unwrap(), c.unwrap().note.clone().unwrap())
        };
        assert_eq!(limit(0, 1), (11.25, "mlx5_0 port 1 of h1 at 12.5 Gb/s".into()));
        assert_eq!(limit(0, 2), (9.0, "mlx5_1 port 1 of h3 at 10 Gb/s".into()), "the slower end");
        assert_eq!(count(&a, Verdict::Pass), 6, "every flow reaches 90 % of its slower port");
        assert!(a.passed);

        // Two rails each (the hostfile's `devices=`): a flow's line rate is its rails' sum.
        let mut rails = run.clone();
        for rank in [0, 1] {
            rails.probes[rank].devices =
                vec![device("mlx5_0", vec![port("ACTIVE", 12.5)]), device("mlx5_1", vec![port("ACTIVE", 12.5)])];
            rails.plan.ranks[rank].devices = vec!["mlx5_0".into(), "mlx5_1".into()];
        }
        let a = judge(&rails, &spec(&["flow >= 90% of line rate"], None), None).unwrap();
        let c = a.checks.iter().find(|c| matches!(c.item, Checked::Flow { src: 0, dst: 1, .. })).unwrap();
        assert_eq!(c.limit, Some(22.5));
        assert_eq!(c.note.as_deref(), Some("mlx5_0 port 1 + mlx5_1 port 1 of h1 at 25 Gb/s"));

        // A host whose probe found no RDMA leaves its items unknown, never passed.
        run.probes[1] =
            RankProbe { devices: Vec::new(), error: Some("no RDMA devices".into()), ..probe(1, Vec::new()) };
        let a = judge(&run, &spec(&["flow >= 90% of line rate"], None), None).unwrap();
        assert!(!a.passed);
        let unknown: Vec<&CheckOutcome> = a.checks.iter().filter(|c| c.verdict == Verdict::Unknown).collect();
        assert_eq!(unknown.len(), 4, "the flows to and from h2");
        assert_eq!(unknown[0].note.as_deref(), Some("h2 (rank 1): no RDMA devices"));
        // A rate given in [check] overrides the probes.
        assert!(judge(&run, &spec(&["flow >= 90% of line rate"], Some(10.0)), None).unwrap().passed);
    }

    /// All-pairs latency flows of four hosts, each flow's typical and p99
    /// half round trip (µs) by its ends.
    fn latency_pairs(us: impl Fn(usize, usize) -> (f64, f64)) -> RunResult {
        let mut run = all_pairs(4, |_, _| 0.0);
        for g in run.plan.phases.iter_mut().flat_map(|p| &mut p.groups) {
            g.mode = crate::scenario::Mode::Latency;
        }
        for f in run.phases.iter_mut().flat_map(|p| &mut p.flows) {
            let (typical_us, p99_us) = us(f.src, f.dst);
            f.mode = crate::scenario::Mode::Latency;
            f.latency = Some(crate::histogram::LatencySummary {
                samples: 1000,
                min_us: typical_us,
                max_us: p99_us,
                typical_us,
                mean_us: typical_us,
                stdev_us: 0.0,
                p99_us,
                p999_us: p99_us,
            });
        }
        run
    }

    #[test]
    fn latency_against_the_smallest_blames_the_slow_host() {
        let run = latency_pairs(|src, dst| {
            let typical = if src == 3 || dst == 3 { 40.0 } else { 10.0 + src as f64 };
            (typical, typical)
        });
        let a = judge(&run, &spec(&["latency <= 2x min", "flow >= 1 Gb/s"], None), None).unwrap();
        let latency: Vec<&CheckOutcome> = a.checks.iter().filter(|c| c.rule.subject == Subject::Latency).collect();
        assert_eq!(latency.len(), 12);
        assert!(latency.iter().all(|c| c.limit == Some(20.0)), "2 × the smallest typical latency, 10 µs");
        assert_eq!(latency.iter().filter(|c| c.verdict == Verdict::Fail).count(), 6);
        // Bandwidth rules skip latency flows: nothing to check them on.
        assert_eq!(a.checks.iter().filter(|c| c.verdict == Verdict::Unknown).count(), 1);
        assert_eq!(a.suspects[0].kind, SuspectKind::Host { rank: 3, host: "h4".into(), ranks: vec![] });
        assert_eq!(
            a.suspects[0].evidence,
            "all 3 of its links failed latency <= 2x min; the worst reached 50% of its limit"
        );
        assert_eq!(crate::result::pair_matrix(&run.plan, &run.phases).unwrap().values[3][0], Some(40.0));
    }

    #[test]
    fn a_p99_over_its_time_and_lost_probes_blame_the_link_that_has_them() {
        // The link h1–h3 has a slow tail; h2–h4 loses probes (an open-loop
        // flow's echoes that never came): each is a suspect link.
        let mut run =
            latency_pairs(|src, dst| (10.0, if RankPair::of(src, dst) == RankPair::of(0, 2) { 900.0 } else { 40.0 }));
        for f in run.phases.iter_mut().flat_map(|p| &mut p.flows) {
            let echoed = if RankPair::of(f.src, f.dst) == RankPair::of(1, 3) { 114 } else { 120 };
            f.probes = Some(crate::result::Probes { due: 120, echoed, lost_ratio: (120 - echoed) as f64 / 120.0 });
        }
        let a = judge(&run, &spec(&["p99 <= 500us", "loss <= 2%"], None), None).unwrap();
        let failed = |subject| -> Vec<(f64, f64)> {
            let failing = a.checks.iter().filter(|c| c.rule.subject == subject && c.verdict == Verdict::Fail);
            failing.map(|c| (c.value.unwrap(), c.limit.unwrap())).collect()
        };
        assert_eq!(failed(Subject::P99), [(900.0, 500.0); 2], "h1–h3 both ways, µs");
        let lost = failed(Subject::Loss);
        assert_eq!(lost.len(), 2, "h2–h4 both ways");
        assert!(lost.iter().all(|&(value, limit)| (value - 5.0).abs() < 1e-9 && limit == 2.0), "{lost:?}");
        // Worst first: 5 % lost is 40 % of its limit, 900 µs 56 %.
        let links: Vec<&SuspectKind> = a.suspects.iter().map(|s| &s.kind).collect();
        assert!(
            matches!(links[..], [SuspectKind::Link { a: 1, b: 3, .. }, SuspectKind::Link { a: 0, b: 2, .. }]),
            "{links:?}"
        );
        // A closed-loop run counts no loss: the rule cannot be evaluated.
        let closed = latency_pairs(|_, _| (10.0, 10.0));
        let a = judge(&closed, &spec(&["loss <= 2%"], None), None).unwrap();
        assert_eq!((a.passed, count(&a, Verdict::Unknown)), (false, 1));
        assert!(a.checks[0].note.as_deref().unwrap().contains("counted no lost messages"), "{:?}", a.checks[0]);
    }

    #[test]
    fn retest_pairs_a_host_with_a_healthy_partner_and_clears_or_confirms() {
        let run = all_pairs(4, |a, b| if a == 3 || b == 3 { 2.0 } else { 10.0 });
        let mut a = judge(&run, &spec(&["flow >= 93% of best"], None), None).unwrap();
        let RetestPlan { plan, owners } = retest_plan(&run, &mut a, None).unwrap();
        assert_eq!(owners, [0]);
        assert_eq!(plan.phases.len(), 1);
        assert_eq!(plan.phases[0].name, "retest host h4 with h1");
        let mut pairs: Vec<(usize, usize)> = plan.phases[0].flows.iter().map(|f| (f.src, f.dst)).collect();
        pairs.sort();
        assert_eq!(pairs, [(0, 3), (3, 0)], "the directions measured in the run");

        // Alone it runs at the healthy rate: cleared, and so are its checks.
        let mut cleared = a.clone();
        apply_retest(&mut cleared, &owners, vec![phase(&plan.phases[0], &|_, _| 9.5)], None);
        assert!(matches!(cleared.suspects[0].retest, Retest::Cleared { phase: 0, gbps } if gbps == 9.5));
        assert_eq!(count(&cleared, Verdict::Cleared), 6);
        assert!(cleared.passed);
        assert_eq!(cleared.retest_phases.len(), 1);

        // Alone it is as slow: confirmed, and the run fails.
        apply_retest(&mut a, &owners, vec![phase(&plan.phases[0], &|_, _| 2.0)], None);
        assert!(matches!(a.suspects[0].retest, Retest::Confirmed { gbps, .. } if gbps == 2.0));
        assert_eq!(count(&a, Verdict::Fail), 6);
        assert!(!a.passed);
    }

    #[test]
    fn a_failed_retest_run_leaves_the_suspect_unretested() {
        let run = all_pairs(4, |a, b| if (a, b) == (0, 1) { 1.0 } else { 10.0 });
        let mut a = judge(&run, &spec(&["flow >= 5 Gb/s"], None), None).unwrap();
        let RetestPlan { plan, owners } = retest_plan(&run, &mut a, None).unwrap();
        assert_eq!(plan.phases[0].name, "retest link h1 - h2");
        apply_retest(&mut a, &owners, Vec::new(), Some("rank 1 (h2) exited"));
        assert_eq!(a.suspects[0].retest, Retest::NotRun { reason: "the retest run failed: rank 1 (h2) exited".into() });
        assert!(!a.passed);
    }

    #[test]
    fn each_uplink_carries_the_cables_the_topology_counts() {
        // fat-tree.toml: leaf1 has two cables to spine1, every other uplink one.
        let nodes = switches::tests::Nodes::new("fat-tree.toml");
        let a = judge(&all_pairs(8, |_, _| 10.0), &spec(&["flow >= 9 Gb/s"], None), Some(&nodes)).unwrap();
        let cables: Vec<(String, Option<u32>)> = a.uplinks.iter().map(|u| (u.uplink.to_string(), u.cables)).collect();
        let expected = [("leaf1 ↔ spine1", 2), ("leaf1 ↔ spine2", 1), ("leaf2 ↔ spine1", 1), ("leaf2 ↔ spine2", 1)];
        assert_eq!(cables, expected.map(|(u, n)| (u.to_string(), Some(n))));
        // A run.json written before the count was kept reads as having none.
        let json = serde_json::to_string(&a).unwrap().replace(r#","cables":2"#, "");
        let read: Acceptance = serde_json::from_str(&json).unwrap();
        assert_eq!(read.uplinks[0].cables, None);
    }

    #[test]
    fn an_uplink_slow_only_into_its_leaf_is_named_with_that_way_and_its_cable() {
        // Ranks 4 and 5 are leaf3's hosts; its uplink is slow spine1 → leaf3 only. The TOML
        // form names no port; ibnetdiscover's names the uplink's one cable, leaf3 port 35 ↔ spine1 port 3.
        for (form, cable) in [("uneven.toml", None), ("uneven.ibnetdiscover", Some("leaf3 port 35 ↔ spine1 port 3"))]
        {
            let nodes = switches::tests::Nodes::new(form);
            let on3 = |r: usize| r / 2 == 2;
            let run = all_pairs(8, |src, dst| if !on3(src) && on3(dst) { 4.0 } else { 10.0 });
            let a = judge(&run, &spec(&["flow >= 9 Gb/s"], None), Some(&nodes)).unwrap();
            let [Suspect { kind: SuspectKind::Uplink { uplinks, one_way, cables, .. }, evidence, .. }] =
                &a.suspects[..]
            else {
                panic!("{form}: one uplink suspect: {:?}", a.suspects)
            };
            assert_eq!(uplinks, &[switches::tests::up("leaf3", "spine1")]);
            let spine_to_leaf3 = Way { from: SwitchName("spine1".into()), to: SwitchName("leaf3".into()) };
            assert_eq!(one_way, &[spine_to_leaf3]);
            assert!(evidence.contains("; only flows going spine1 → leaf3 failed, the other way passed;"), "{evidence}");
            assert_eq!(cables.iter().map(ToString::to_string).collect::<Vec<_>>(), Vec::from_iter(cable), "{form}");
            let told = cable.map(|c| format!("; it is one cable, {c};"));
            assert_eq!(told.as_ref().map(|t| evidence.contains(t.as_str())), cable.map(|_| true), "{evidence}");
            let json = serde_json::to_string(&a).unwrap();
            assert!(json.contains(r#""one_way":[{"from":"spine1","to":"leaf3"}]"#), "{json}");
            let ports = r#""cables":[{"leaf":"leaf3","spine":"spine1","leaf_port":35,"spine_port":3}]"#;
            assert_eq!(json.contains(ports), cable.is_some(), "{json}");
            assert_eq!(serde_json::from_str::<Acceptance>(&json).unwrap(), a, "run.json reads back");
        }
    }

    #[test]
    fn with_a_topology_a_slow_uplink_is_named_and_retested_against_links_avoiding_it() {
        // Ranks 4 and 5 are leaf3's hosts, whose one uplink is slow.
        let nodes = switches::tests::Nodes::new("uneven.toml");
        let across = |a: usize, b: usize| (a / 2 == 2) != (b / 2 == 2);
        let rate = |a, b| if across(a, b) { 4.0 } else { 10.0 };
        let run = all_pairs(8, rate);
        let mut a = judge(&run, &spec(&["flow >= 9 Gb/s"], None), Some(&nodes)).unwrap();
        assert_eq!(a.suspects.len(), 1, "{:?}", a.suspects);
        let SuspectKind::Uplink { uplinks, pairs, .. } = &a.suspects[0].kind else { panic!("{:?}", a.suspects) };
        assert_eq!(uplinks, &[switches::tests::up("leaf3", "spine1")]);
        assert_eq!(pairs.len(), 12);
        assert_eq!(
            a.suspects[0].evidence,
            "12 links between leaves failed flow >= 9 Gb/s: all may cross this uplink and no host explains them; \
             the worst reached 44% of its limit"
        );
        let slow = a.uplinks.iter().find(|u| u.uplink == uplinks[0]).unwrap();
        assert_eq!((slow.links, slow.failed.len(), slow.min_gbps), (12, 12, Some(4.0)));
        let fast = a.uplinks.iter().find(|u| u.uplink == switches::tests::up("leaf1", "spine2")).unwrap();
        assert_eq!((fast.links, fast.failed.len(), fast.min_gbps), (4, 0, Some(10.0)), "leaf1–leaf2's 4 links");
        let cables: Vec<Option<u32>> = a.uplinks.iter().map(|u| u.cables).collect();
        let counted: Vec<Option<u32>> = a.uplinks.iter().map(|u| nodes.0.uplinks.get(&u.uplink).copied()).collect();
        assert_eq!(cables, counted, "each uplink's cables as the topology counts them");
        assert_eq!(slow.cables, Some(1), "leaf3's one cable to spine1");
        let json = serde_json::to_string(&a).unwrap();
        assert!(json.contains(r#""suspect":"uplink","uplinks":[{"leaf":"leaf3","spine":"spine1"}]"#), "{json}");
        assert!(json.contains(r#""spine":"spine1","links":12,"#) && json.contains(r#""cables":1}"#), "{json}");
        assert_eq!(serde_json::from_str::<Acceptance>(&json).unwrap(), a, "run.json reads back");
        // Without the topology the same run blames 12 links.
        assert_eq!(judge(&run, &spec(&["flow >= 9 Gb/s"], None), None).unwrap().suspects.len(), 12);

        let RetestPlan { plan, owners } = retest_plan(&run, &mut a, Some(&nodes)).unwrap();
        assert_eq!(plan.phases[0].name, "retest uplink leaf3 ↔ spine1");
        let flows = &plan.phases[0].flows;
        assert_eq!(flows.len(), 8, "2 crossing and 2 avoiding links, both ways");
        assert_eq!(flows.iter().filter(|f| across(f.src, f.dst)).count(), 4);
        let retest = |a: &mut Acceptance, rate: &dyn Fn(usize, usize) -> f64| {
            apply_retest(a, &owners, vec![phase(&plan.phases[0], &rate)], None);
        };
        let mut confirmed = a.clone();
        retest(&mut confirmed, &rate);
        assert!(matches!(confirmed.suspects[0].retest, Retest::Confirmed { gbps, .. } if gbps == 4.0));
        let mut inconclusive = a.clone();
        retest(&mut inconclusive, &|_, _| 4.0);
        assert!(matches!(inconclusive.suspects[0].retest, Retest::Inconclusive { .. }));
        retest(&mut a, &|_, _| 10.0);
        assert!(matches!(a.suspects[0].retest, Retest::Cleared { .. }));
        assert!(a.passed, "its 24 failed checks cleared");
    }
}
