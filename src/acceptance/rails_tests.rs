//! Suspects on hosts of several NICs (`rails = "same"`): one NIC failing
//! is that NIC (with its cable where the topology knows the port), or its
//! cable where its own link went down in the run; every NIC of a host the
//! host once; each retested with partners on its rails.

use std::path::Path;

use serde_json::json;

use super::synthetic::rails;
use super::{judge, retest_plan, Paths, RetestPlan};
use crate::metrics::links::LinkEvent;
use crate::plan::Fabric;
use crate::result::{testing, Acceptance, NicEnd, RankResult, RunResult, SuspectKind};
use crate::scenario::{CheckSpec, Rule};

fn checked(run: &RunResult, paths: Option<&dyn Paths>) -> Acceptance {
    let mut spec = CheckSpec::default();
    spec.push(Rule::parse("flow >= 90% of best").unwrap());
    judge(run, &spec, paths).unwrap()
}

/// Rank `2h + k` is NIC k of node0{h+1}; 4 hosts of 2 NICs.
fn slow(bad: &[usize]) -> RunResult {
    rails(4, 2, |a, b| if bad.contains(&a) || bad.contains(&b) { 2.0 } else { 10.0 })
}

#[test]
fn one_nic_failing_is_that_nic_retested_on_its_rail() {
    let run = slow(&[5]);
    let mut a = checked(&run, None);
    let nic = SuspectKind::Nic(NicEnd { rank: 5, host: "node03".into(), nic: Some("mlx5_1".into()), cable: None });
    assert_eq!(a.suspects.iter().map(|s| &s.kind).collect::<Vec<_>>(), [&nic]);
    let json = serde_json::to_value(&a.suspects[0]).unwrap();
    let keys = ["suspect", "rank", "host", "nic"].map(|k| json[k].clone());
    assert_eq!(keys, [json!("nic"), json!(5), json!("node03"), json!("mlx5_1")], "{json}");
    assert_eq!(serde_json::from_value::<crate::result::Suspect>(json).unwrap(), a.suspects[0]);
    assert!(
        a.suspects[0]
            .evidence
            .starts_with("all 3 of its links failed flow >= 90% of best while its host's other NICs passed"),
        "{}",
        a.suspects[0].evidence
    );
    let RetestPlan { plan, .. } = retest_plan(&run, &mut a, None).unwrap();
    let flows = &plan.phases[0].flows;
    assert!(flows.iter().all(|f| (f.src == 5) != (f.dst == 5) && (f.src + f.dst) % 2 == 0), "rail 1 only: {flows:?}");
    assert!(plan.phases[0].name.starts_with("retest NIC node03 mlx5_1 with node"), "{}", plan.phases[0].name);
}

/// `rank`'s report in the first phase of `run`, its link down once (eth2 of
/// the rail bed, or an RDMA port) with its carrier changes.
fn link_went_down(run: &mut RunResult, rank: usize, device: &str) {
    let host = run.plan.ranks[rank].host.clone();
    run.phases[0].ranks.push(RankResult {
        slot: 1,
        tx_gbps: 2.0,
        rx_gbps: 2.0,
        link_events: vec![LinkEvent {
            device: device.into(),
            from_ns: 100_000_000,
            until_ns: Some(600_000_000),
            states: vec!["down".into()],
            counters: [("carrier_changes".to_string(), 2), ("rx_crc_errors".to_string(), 0)].into(),
        }],
        ..testing::rank(rank, &host)
    });
}

#[test]
fn a_failing_nic_whose_own_link_went_down_is_its_cable() {
    let mut run = slow(&[5]);
    link_went_down(&mut run, 5, "eth2");
    // Another host's link event is no evidence against rank 5.
    link_went_down(&mut run, 0, "eth1");
    let mut a = checked(&run, None);
    let cable = SuspectKind::Cable {
        end: NicEnd { rank: 5, host: "node03".into(), nic: Some("mlx5_1".into()), cable: None },
        link_events: 1,
    };
    assert_eq!(a.suspects.iter().map(|s| &s.kind).collect::<Vec<_>>(), [&cable]);
    // run.json keeps a NIC's keys flat beside `suspect`, and reads them back.
    let json = serde_json::to_value(&a.suspects[0]).unwrap();
    let keys = ["suspect", "rank", "host", "nic", "link_events"].map(|k| json[k].clone());
    assert_eq!(keys, [json!("cable"), json!(5), json!("node03"), json!("mlx5_1"), json!(1)], "{json}");
    assert_eq!(serde_json::from_value::<crate::result::Suspect>(json).unwrap(), a.suspects[0]);
    let evidence = &a.suspects[0].evidence;
    assert!(
        evidence.contains(
            "while its host's other NICs passed, and its own link went down or recovered from errors 1 time(s) in \
             the run (eth2: down, carrier_changes +2): the cable or optic, not the NIC"
        ),
        "{evidence}"
    );
    let RetestPlan { plan, .. } = retest_plan(&run, &mut a, None).unwrap();
    let name = &plan.phases[0].name;
    assert!(name.starts_with("retest the cable of NIC node03 mlx5_1 with node"), "{name}");
    assert!(plan.phases[0].flows.iter().all(|f| (f.src == 5) != (f.dst == 5) && (f.src + f.dst) % 2 == 0), "its rail");
}

#[test]
fn every_nic_of_a_host_failing_is_the_host_once_retested_on_each_rail() {
    let run = slow(&[2, 3]);
    let mut a = checked(&run, None);
    let host = SuspectKind::Host { rank: 2, host: "node02".into(), ranks: vec![2, 3] };
    assert_eq!(a.suspects.iter().map(|s| &s.kind).collect::<Vec<_>>(), [&host]);
    let RetestPlan { plan, .. } = retest_plan(&run, &mut a, None).unwrap();
    let mut links: Vec<(usize, usize)> =
        plan.phases[0].flows.iter().map(|f| (f.src.min(f.dst), f.src.max(f.dst))).collect();
    links.sort_unstable();
    links.dedup();
    assert_eq!(links.len(), 2, "one partner per NIC: {links:?}");
    for (x, y) in links {
        assert!([x, y].iter().any(|r| [2, 3].contains(r)), "{x}-{y}");
        assert_eq!(x % 2, y % 2, "a partner on the NIC's own rail: {x}-{y}");
    }
}

#[test]
fn with_the_fabrics_ports_a_nic_is_named_with_its_cable() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/topology/rails.ibnetdiscover");
    let topology = crate::topology::read(&path, None).unwrap();
    let run = slow(&[5]);
    let fabric = Fabric::new(&topology, &run.hosts);
    let a = checked(&run, Some(&fabric));
    let [suspect] = &a.suspects[..] else { panic!("one suspect: {:?}", a.suspects) };
    assert_eq!(
        suspect.kind,
        SuspectKind::Nic(NicEnd {
            rank: 5,
            host: "node03".into(),
            nic: Some("mlx5_1".into()),
            cable: Some("rail1 port 3".into())
        })
    );
    // A whole rail leaf failing is the leaf, not each of its NICs.
    let run = slow(&[1, 3, 5, 7]);
    let fabric = Fabric::new(&topology, &run.hosts);
    let a = checked(&run, Some(&fabric));
    let kinds: Vec<&SuspectKind> = a.suspects.iter().map(|s| &s.kind).collect();
    assert!(
        matches!(kinds[..], [SuspectKind::Leaf { leaf, ranks }] if leaf.0 == "rail1" && ranks == &[1, 3, 5, 7]),
        "{kinds:?}"
    );
}

#[test]
fn a_suspects_evidence_says_what_held_its_failing_flows() {
    use crate::result::limit::{Limit, LimitKind};
    let mut run = slow(&[5]);
    // One of rank 5's flows is held by its sender's CPU, every other flow by congestion.
    let mut failing = 0;
    for flow in run.phases.iter_mut().flat_map(|p| &mut p.flows) {
        let touches = flow.src == 5 || flow.dst == 5;
        let kind = if touches && failing == 0 { LimitKind::SenderCpu } else { LimitKind::Congestion };
        failing += usize::from(touches);
        flow.limit = Some(Limit { kind, rule: "r".into(), evidence: Vec::new(), unavailable: Vec::new() });
    }
    let a = checked(&run, None);
    let evidence = &a.suspects[0].evidence;
    let said = format!("; its failing flows were limited by congestion ({} of {failing})", failing - 1);
    assert!(evidence.ends_with(&said), "{evidence}");
    // A run whose flows were not judged says nothing of it.
    assert!(!checked(&slow(&[5]), None).suspects[0].evidence.contains("limited by"));
}
