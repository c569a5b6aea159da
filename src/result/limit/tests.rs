//! Each rule on the evidence that fires it, and on the evidence that must
//! not: a fan-in of four hosts (h1 receives from h2, h3, h4), its flows and
//! ranks written as a run would report them.

use std::path::Path;

use super::*;
use crate::metrics::cpu::{CpuUsage, ThreadDemand, ThreadsCpu};
use crate::metrics::netdev::NetdevDelta;
use crate::metrics::qdisc::Limiter;
use crate::metrics::GroupPlacement;
use crate::result::testing::{self, flow};
use crate::result::{Offered, RankProbe, ReceiverResult};
use crate::transport::rdma::{CounterDelta, InventoryDevice, InventoryPort};
use crate::transport::tcp::info::TcpView;
use crate::{hostfile, plan, scenario};

/// A run of one fan-in phase, `transport` its group's, each sender at `gbps`.
fn fan_in(transport: &str, gbps: [f64; 3]) -> RunResult {
    let hosts = hostfile::parse("h1\nh2\nh3\nh4", Path::new("hosts")).unwrap();
    let text = format!(
        "[[group]]\nname = \"in\"\npattern = \"fan-in\"\nreceivers = 0\nsenders = \"1-3\"\ntransport = \"{transport}\"\n"
    );
    let (scenario, _) = scenario::parse(&text, Path::new("s.toml")).unwrap();
    let plan = plan::build(&hosts, &scenario).unwrap();
    let mut run = RunResult::new("s.toml".into(), scenario, hosts, plan);
    let flows: Vec<FlowResult> = (0..3).map(|k| flow(k, k as usize + 1, 0, gbps[k as usize])).collect();
    let transport = if transport == "rdma" { Transport::Rdma } else { Transport::Tcp };
    let group = testing::group("in", crate::scenario::Pattern::FanIn, transport, crate::scenario::Op::Send, &flows);
    let receiver = ReceiverResult {
        rank: 0,
        host: "h1".into(),
        senders: 3,
        aggregate_gbps: gbps.iter().sum(),
        min_share: 0.0,
        max_share: 0.0,
        jain: 1.0,
        cov: 0.0,
    };
    let ranks = (0..4).map(rank).collect();
    run.phases = vec![PhaseResult { groups: vec![group], receivers: vec![receiver], ..testing::phase(flows, ranks) }];
    run
}

/// A rank on a 10 Gb/s eth0 whose data thread ran a tenth of the window.
fn rank(rank: usize) -> RankResult {
    let data = ThreadsCpu {
        pct: 10.0,
        busiest_thread_pct: 10.0,
        threads: 1,
        wanting_thread: Some(ThreadDemand { demand_pct: 11.0, waited_pct: 1.0 }),
        ..ThreadsCpu::default()
    };
    RankResult {
        cpu: CpuUsage { data: Some(data), ..CpuUsage::default() },
        netdevs: vec![NetdevDelta {
            iface: "eth0".into(),
            rx_bytes: 0,
            tx_bytes: 0,
            speed_mbps: Some(10_000),
            limiter: None,
            pcie: None,
        }],
        ..testing::rank(rank, &format!("h{}", rank + 1))
    }
}

fn judged(mut run: RunResult) -> RunResult {
    judge_run(&mut run);
    run
}

fn kinds(run: &RunResult) -> Vec<Option<LimitKind>> {
    run.phases[0].flows.iter().map(|f| f.limit.as_ref().map(|l| l.kind)).collect()
}

fn evidence(limit: &Limit, what: &str) -> f64 {
    limit.evidence.iter().find(|e| e.what == what).unwrap_or_else(|| panic!("no `{what}` in {limit:?}")).value
}

#[test]
fn a_flow_near_its_interface_speed_is_at_line_rate_and_one_far_below_is_unexplained() {
    // The receiver has a 100 Gb/s port: each flow is held to its sender's 10.
    let mut run = fan_in("tcp", [9.5, 3.0, 0.5]);
    run.phases[0].ranks[0].netdevs[0].speed_mbps = Some(100_000);
    let run = judged(run);
    assert_eq!(kinds(&run), [Some(LimitKind::LineRate), Some(LimitKind::Unexplained), Some(LimitKind::Unexplained)]);
    let line = run.phases[0].flows[0].limit.as_ref().unwrap();
    assert_eq!(evidence(line, "line rate"), 10.0);
    assert!(line.rule.contains("eth0 of h"), "{}", line.rule);
    let below = run.phases[0].flows[1].limit.as_ref().unwrap();
    assert!((evidence(below, "share of line rate") - 30.0).abs() < 1e-9, "{below:?}");
    let phase = run.phases[0].limit.as_ref().unwrap();
    assert_eq!((phase.kind, phase.flows, phase.of), (LimitKind::Unexplained, 2, 3));
    assert_eq!(phase.to_string(), "unexplained (2 of 3)");
}

#[test]
fn senders_that_fill_the_receivers_line_share_it_and_each_shows_its_share() {
    let run = judged(fan_in("tcp", [4.6, 2.3, 2.3]));
    assert_eq!(kinds(&run), [Some(LimitKind::SharedLink); 3]);
    let first = run.phases[0].flows[0].limit.as_ref().unwrap();
    assert!((evidence(first, "this flow's share") - 50.0).abs() < 1e-9, "{first:?}");
    assert_eq!(evidence(first, "receiver aggregate"), 9.2);
    // Under 90 % of the receiver's line, the same senders are not said to share it.
    let under = judged(fan_in("tcp", [4.0, 2.0, 2.0]));
    assert!(!kinds(&under).contains(&Some(LimitKind::SharedLink)), "{:?}", kinds(&under));
}

#[test]
fn a_paced_flow_that_delivered_its_offer_is_paced_and_one_that_fell_short_is_judged_on() {
    let mut run = fan_in("tcp", [1.0, 0.5, 3.0]);
    run.phases[0].flows[0].offered = Some(Offered { gbps: 1.0, msgs_per_s: 1.0, delivered_ratio: 1.0 });
    run.phases[0].flows[1].offered = Some(Offered { gbps: 1.0, msgs_per_s: 1.0, delivered_ratio: 0.5 });
    let run = judged(run);
    assert_eq!(kinds(&run)[..2], [Some(LimitKind::Paced), Some(LimitKind::Unexplained)]);
}

#[test]
fn moved_loss_counters_outrank_congestion_counters_and_name_the_port() {
    let mut run = fan_in("tcp", [1.0, 1.0, 1.0]);
    let counters = |names: &[(&str, u64)]| {
        let counters = names.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        vec![CounterDelta { device: "mlx5_0".into(), port: 1, counters, signals: None }]
    };
    run.phases[0].ranks[1].rdma_counters =
        counters(&[("hw_counters/out_of_sequence", 7), ("hw_counters/np_cnp_sent", 2)]);
    run.phases[0].ranks[2].rdma_counters =
        counters(&[("hw_counters/rp_cnp_handled", 40), ("counters/port_rcv_data", 9)]);
    let run = judged(run);
    assert_eq!(kinds(&run)[..2], [Some(LimitKind::Loss), Some(LimitKind::Congestion)]);
    let loss = run.phases[0].flows[0].limit.as_ref().unwrap();
    assert_eq!(evidence(loss, "sender mlx5_0:1 out_of_sequence"), 7.0);
    let congestion = run.phases[0].flows[1].limit.as_ref().unwrap();
    assert_eq!(congestion.evidence.len(), 1, "only congestion counters: {congestion:?}");
}

#[test]
fn the_end_whose_data_thread_wanted_a_core_most_is_named() {
    let mut run = fan_in("tcp", [1.0, 1.0, 1.0]);
    let busy = |ran: f64, waited: f64| ThreadsCpu {
        busiest_thread_pct: ran,
        wanting_thread: Some(ThreadDemand { demand_pct: ran + waited, waited_pct: waited }),
        ..ThreadsCpu::default()
    };
    // h2 ran its whole core; h3 ran a third and waited half the window for
    // one; h4 is idle, but the receiver waited a quarter of the window.
    run.phases[0].ranks[1].cpu.data = Some(busy(97.0, 0.0));
    run.phases[0].ranks[2].cpu.data = Some(busy(33.0, 50.0));
    run.phases[0].ranks[0].cpu.data = Some(busy(56.0, 25.0));
    let run = judged(run);
    assert_eq!(kinds(&run), [Some(LimitKind::SenderCpu), Some(LimitKind::SenderCpu), Some(LimitKind::ReceiverCpu)]);
    let starved = run.phases[0].flows[1].limit.as_ref().unwrap();
    assert_eq!(evidence(starved, "sender data thread waited for a core"), 50.0);
    assert!(starved.rule.contains("runnable ≥ 80 % of the window and waited for a core ≥ 20 %"), "{}", starved.rule);
    assert!(run.phases[0].flows[0].limit.as_ref().unwrap().rule.contains("ran ≥ 95 % of a core"));
    // A thread that mostly slept on its socket (a shaped link on a busy
    // host: ran 2 %, waited 20 % over its wake-ups) was held by the network.
    let mut asleep = fan_in("tcp", [0.1, 0.1, 0.1]);
    asleep.phases[0].ranks[1].cpu.data = Some(busy(2.0, 20.0));
    assert_eq!(kinds(&judged(asleep))[0], Some(LimitKind::Unexplained));
    // Without schedstat, the time it ran alone decides.
    let mut bare = fan_in("tcp", [1.0, 1.0, 1.0]);
    bare.phases[0].ranks[1].cpu.data = Some(ThreadsCpu { busiest_thread_pct: 96.0, ..ThreadsCpu::default() });
    bare.phases[0].ranks[2].cpu.data = Some(ThreadsCpu { busiest_thread_pct: 90.0, ..ThreadsCpu::default() });
    assert_eq!(kinds(&judged(bare))[..2], [Some(LimitKind::SenderCpu), Some(LimitKind::Unexplained)]);
}

#[test]
fn a_polling_rdma_thread_that_fills_its_core_is_no_cpu_verdict_but_one_that_waited_is() {
    let mut run = fan_in("rdma", [1.0, 1.0, 1.0]);
    let polling = |waited: f64| ThreadsCpu {
        busiest_thread_pct: 100.0 - waited,
        wanting_thread: Some(ThreadDemand { demand_pct: 100.0, waited_pct: waited }),
        ..ThreadsCpu::default()
    };
    for r in &mut run.phases[0].ranks {
        r.cpu.data = Some(polling(0.0));
    }
    run.phases[0].ranks[3].cpu.data = Some(polling(40.0));
    let run = judged(run);
    assert_eq!(kinds(&run), [Some(LimitKind::Unexplained), Some(LimitKind::Unexplained), Some(LimitKind::SenderCpu)]);
}

#[test]
fn loopback_flows_are_held_by_their_ends_cpus_never_by_a_line() {
    let mut run = fan_in("tcp", [20.0, 20.0, 20.0]);
    for (k, r) in run.phases[0].ranks.iter_mut().enumerate() {
        r.netdevs = vec![NetdevDelta {
            iface: "lo".into(),
            rx_bytes: 0,
            tx_bytes: 0,
            speed_mbps: None,
            limiter: None,
            pcie: None,
        }];
        r.cpu.data = Some(ThreadsCpu { busiest_thread_pct: if k == 0 { 80.0 } else { 40.0 }, ..ThreadsCpu::default() });
    }
    let run = judged(run);
    assert_eq!(kinds(&run), [Some(LimitKind::ReceiverCpu); 3]);
    assert!(run.phases[0].flows[0].limit.as_ref().unwrap().rule.starts_with("loopback"));
}

#[test]
fn an_rdma_flow_is_held_to_its_probed_port() {
    let mut run = fan_in("rdma", [30.0, 30.0, 33.0]);
    let port = InventoryPort {
        port: 1,
        state: "ACTIVE".into(),
        link_layer: "InfiniBand".into(),
        rate_gbps: Some(100.0),
        mtu: 4096,
    };
    let device = InventoryDevice { name: "mlx5_0".into(), numa_node: None, error: None, ports: vec![port] };
    run.probes = (0..4)
        .map(|rank| RankProbe {
            rank,
            host: format!("h{}", rank + 1),
            devices: vec![device.clone()],
            error: None,
            facts: None,
        })
        .collect();
    let run = judged(run);
    assert_eq!(kinds(&run), [Some(LimitKind::SharedLink); 3]);
    let shared = run.phases[0].flows[2].limit.as_ref().unwrap();
    assert!(shared.rule.contains("mlx5_0 port 1 of h1 at 100 Gb/s"), "{}", shared.rule);
}

#[test]
fn a_line_its_flows_outrun_is_no_limit() {
    // veth says 10 Gb/s and carries 20; Soft-RoCE's port says 2 Gb/s.
    let run = judged(fan_in("tcp", [20.0, 1.0, 1.0]));
    assert_eq!(kinds(&run), [Some(LimitKind::Unexplained); 3]);
    let fast = run.phases[0].flows[0].limit.as_ref().unwrap();
    assert!((evidence(fast, "share of line rate") - 200.0).abs() < 1e-9, "{fast:?}");
}

#[test]
fn latency_and_failed_flows_get_no_verdict_and_groups_count_theirs() {
    let mut run = fan_in("tcp", [9.5, 9.5, 1.0]);
    run.phases[0].flows[1].error = Some("peer lost".into());
    run.phases[0].flows[2].mode = Mode::Latency;
    let run = judged(run);
    assert_eq!(kinds(&run), [Some(LimitKind::LineRate), None, None]);
    let group = run.phases[0].groups[0].limit.as_ref().unwrap();
    assert_eq!((group.kind, group.flows, group.of), (LimitKind::LineRate, 1, 1));
}

#[test]
fn a_tie_goes_to_the_first_kind_in_rule_order() {
    let mut run = fan_in("tcp", [9.5, 1.0, 1.0]);
    run.phases[0].flows[1].offered = Some(Offered { gbps: 1.0, msgs_per_s: 1.0, delivered_ratio: 1.0 });
    run.phases[0].flows[2].error = Some("lost".into());
    let phase = judged(run).phases[0].limit.clone().unwrap();
    assert_eq!((phase.kind, phase.flows, phase.of), (LimitKind::Paced, 1, 2));
}

/// TCP's view of a sender as the bed's runs reported it (`flows[].tcp`).
fn tcp(busy: f64, rwnd: f64, srtt: f64, min_rtt: f64, retrans_pct: f64) -> Option<TcpView> {
    Some(TcpView {
        streams: 1,
        data_segs_out: Some(100_000),
        retrans_segs: (retrans_pct * 1000.0) as u64,
        retrans_pct: Some(retrans_pct),
        srtt_us: srtt,
        min_rtt_us: Some(min_rtt),
        cwnd_segs: 20,
        delivery_gbps: Some(0.1),
        busy_pct: Some(busy),
        rwnd_limited_pct: Some(rwnd),
        sndbuf_limited_pct: Some(0.0),
        ce_marked: Some(0),
    })
}

fn with_tcp(mut run: RunResult, views: [Option<TcpView>; 3]) -> RunResult {
    for (flow, view) in run.phases[0].flows.iter_mut().zip(views) {
        flow.tcp = view;
    }
    judged(run)
}

#[test]
fn senders_queued_behind_a_switch_port_the_hosts_cannot_see_are_held_by_congestion() {
    // A receiver's switch port shaped to 200 Mb/s: each sender had data the whole window that only its
    // congestion window held, 13 ms behind a path of 19 µs; the hosts see 10 Gb/s links far from full.
    let queued = tcp(100.0, 0.0, 13_400.0, 19.0, 0.0);
    let run = with_tcp(fan_in("tcp", [0.1, 0.1, 0.05]), [queued; 3]);
    assert_eq!(kinds(&run), [Some(LimitKind::Congestion); 3]);
    let first = run.phases[0].flows[0].limit.as_ref().unwrap();
    assert_eq!(evidence(first, "waited on its congestion window"), 100.0);
    assert_eq!((evidence(first, "round trip"), evidence(first, "lowest round trip")), (13_400.0, 19.0));
    assert!((evidence(first, "share of rank 0's 3 senders") - 40.0).abs() < 1e-9, "{first:?}");
    assert!(first.rule.contains("2× its lowest"), "{}", first.rule);
    // Without a queue (a round trip under twice its lowest) the same wait is no congestion.
    let unqueued = with_tcp(fan_in("tcp", [0.1, 0.1, 0.05]), [tcp(100.0, 0.0, 30.0, 19.0, 0.0); 3]);
    assert_eq!(kinds(&unqueued), [Some(LimitKind::Unexplained); 3]);
}

#[test]
fn a_sender_that_retransmits_without_a_queue_is_held_by_loss_and_its_clean_peers_are_not() {
    // The bed's 1 % drop on one sender's port: it retransmitted 1.04 %, the other 0.004 %; both were held
    // by the receiver's window half the time (not by their congestion windows), their round trips long
    // only from a busy CPU.
    let run = with_tcp(
        fan_in("tcp", [3.1, 4.0, 0.0]),
        [tcp(97.1, 44.0, 397.0, 8.0, 1.04), tcp(99.6, 49.0, 91.0, 8.0, 0.004), None],
    );
    let kinds = kinds(&run);
    assert_eq!(kinds[0], Some(LimitKind::Loss));
    assert_eq!(kinds[1], Some(LimitKind::Unexplained), "0.004 % is no loss");
    let lossy = run.phases[0].flows[0].limit.as_ref().unwrap();
    assert_eq!(evidence(lossy, "retransmitted"), 1040.0);
    assert!(lossy.evidence.iter().any(|e| e.unit == "% of data segments" && e.value == 1.04), "{lossy:?}");
}

#[test]
fn ecn_marks_are_congestion_and_a_receivers_window_holds_an_idle_pair() {
    let marked = tcp(40.0, 0.0, 50.0, 40.0, 0.0).map(|t| TcpView { ce_marked: Some(12), ..t });
    let run = with_tcp(fan_in("tcp", [1.0, 1.0, 1.0]), [marked, tcp(80.0, 70.0, 50.0, 40.0, 0.0), None]);
    assert_eq!(kinds(&run)[..2], [Some(LimitKind::Congestion), Some(LimitKind::ReceiverWindow)]);
    let ecn = run.phases[0].flows[0].limit.as_ref().unwrap();
    assert_eq!(evidence(ecn, "ECN-marked"), 12.0);
    let window = run.phases[0].flows[1].limit.as_ref().unwrap();
    assert_eq!(evidence(window, "held by the receiver's window"), 70.0);
    assert_eq!(window.kind.to_string(), "receiver window");
    // A receiver whose data thread ran the whole window is its CPU, not its window.
    let mut busy = fan_in("tcp", [1.0, 1.0, 1.0]);
    busy.phases[0].ranks[0].cpu.data.as_mut().unwrap().busiest_thread_pct = 99.0;
    let busy = with_tcp(busy, [None, tcp(80.0, 70.0, 50.0, 40.0, 0.0), None]);
    assert_eq!(kinds(&busy)[1], Some(LimitKind::ReceiverCpu));
}

#[test]
fn a_kernel_without_the_limited_times_gives_no_tcp_verdict_but_what_it_has() {
    let old = tcp(0.0, 0.0, 13_400.0, 19.0, 0.0).map(|t| TcpView { busy_pct: None, rwnd_limited_pct: None, ..t });
    let run = with_tcp(fan_in("tcp", [0.1, 0.1, 0.1]), [old; 3]);
    assert_eq!(kinds(&run), [Some(LimitKind::Unexplained); 3], "no busy time: no congestion window to blame");
}

#[test]
fn a_senders_egress_limiter_is_its_line_and_a_receivers_is_not() {
    let tbf = |rank: &mut RankResult| {
        rank.netdevs[0].limiter = Some(Limiter { qdisc: "tbf".into(), rate_bps: 200_000_000 });
    };
    let mut run = fan_in("tcp", [0.19, 0.05, 0.05]);
    tbf(&mut run.phases[0].ranks[1]);
    let run = judged(run);
    let line = run.phases[0].flows[0].limit.as_ref().unwrap();
    assert_eq!(line.kind, LimitKind::LineRate, "{line:?}");
    assert_eq!(evidence(line, "line rate"), 0.2);
    assert!(line.rule.contains("tbf on eth0 of h2 at 0.2 Gb/s, an egress rate limiter"), "{}", line.rule);
    // The receiver's limiter holds what it sends (acknowledgements), not what it receives.
    let mut run = fan_in("tcp", [0.19, 0.05, 0.05]);
    tbf(&mut run.phases[0].ranks[0]);
    assert_eq!(kinds(&judged(run))[0], Some(LimitKind::Unexplained));
}

/// The two-nics host tree: its mlx5_0 trained PCIe at x8 of x16, 252 Gb/s under a 400 Gb/s port.
fn downtrained_probe(rank: usize) -> RankProbe {
    let tree = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hosts/two-nics");
    let port = InventoryPort {
        port: 1,
        state: "ACTIVE".into(),
        link_layer: "InfiniBand".into(),
        rate_gbps: Some(400.0),
        mtu: 4096,
    };
    let device = InventoryDevice { name: "mlx5_0".into(), numa_node: Some(0), error: None, ports: vec![port] };
    let facts = Some(Box::new(crate::hostfacts::HostFacts::under(&tree)));
    RankProbe { rank, host: format!("h{}", rank + 1), devices: vec![device], error: None, facts }
}

#[test]
fn a_nic_whose_pcie_link_carries_less_than_its_port_holds_a_flow_near_that_link() {
    let mut run = fan_in("rdma", [200.0, 100.0, 50.0]);
    run.probes = (0..4).map(downtrained_probe).collect();
    // Only the first sender's facts are read from the tree; the others' NICs have no known link.
    for probe in &mut run.probes[2..] {
        probe.facts = None;
    }
    let run = judged(run);
    assert_eq!(kinds(&run)[0], Some(LimitKind::Pcie));
    let held = run.phases[0].flows[0].limit.as_ref().unwrap();
    assert!((evidence(held, "sender PCIe link") - 252.06).abs() < 0.01, "{held:?}");
    assert_eq!(evidence(held, "sender port rate"), 400.0);
    assert!(held.rule.contains("mlx5_0 at 32 GT/s x8 (of 32 GT/s x16)"), "{}", held.rule);
    assert_eq!(held.kind.to_string(), "PCIe");
    // The receiver (rank 0) has the same downtrained NIC, but 100 and 50 Gb/s are far below its link.
    assert_eq!(kinds(&run)[1..], [Some(LimitKind::Unexplained); 2]);
}

#[test]
fn an_end_pinned_away_from_its_nics_numa_node_is_far_and_one_near_it_or_unpinned_is_not() {
    let placed = |cores: Vec<usize>, core_nodes: Vec<usize>, device_node| GroupPlacement {
        group: "in".into(),
        cores,
        note: None,
        core_nodes,
        device_node,
    };
    let mut run = fan_in("tcp", [2.0, 2.0, 2.0]);
    let ranks = &mut run.phases[0].ranks;
    // The two-nics layout: NIC on node 0; cores 30-31 are node 1's.
    ranks[1].placements = vec![placed(vec![30, 31], vec![1], Some(0))];
    ranks[2].placements = vec![placed(vec![0, 1], vec![0], Some(0))];
    ranks[3].placements = vec![placed(Vec::new(), Vec::new(), Some(0))];
    let run = judged(run);
    assert_eq!(kinds(&run), [Some(LimitKind::FarNuma), Some(LimitKind::Unexplained), Some(LimitKind::Unexplained)]);
    let far = run.phases[0].flows[0].limit.as_ref().unwrap();
    assert_eq!((evidence(far, "sender NIC's NUMA node"), evidence(far, "sender data threads' NUMA node")), (0.0, 1.0));
    assert!(far.rule.contains("NUMA node 1 of h2, its NIC on node 0"), "{}", far.rule);
    assert_eq!(far.kind.to_string(), "far NUMA");
}

#[test]
fn counters_and_tcp_fields_a_host_lacks_are_said_unavailable_never_zero() {
    // Soft-RoCE: loss counters, no congestion counters; nothing moved.
    let mut run = fan_in("rdma", [1.0, 1.0, 1.0]);
    let rxe = || CounterDelta {
        device: "rxe0".into(),
        port: 1,
        counters: Default::default(),
        signals: Some(vec!["rcvd_seq_err".into(), "completer_retry_err".into()]),
    };
    for rank in &mut run.phases[0].ranks {
        rank.rdma_counters = vec![rxe()];
    }
    run.phases[0].ranks[2].rdma_counters.clear();
    let run = judged(run);
    let first = run.phases[0].flows[0].limit.as_ref().unwrap();
    assert_eq!(first.unavailable, ["sender rxe0:1 congestion counters", "receiver rxe0:1 congestion counters"]);
    let second = run.phases[0].flows[1].limit.as_ref().unwrap();
    assert_eq!(second.unavailable[0], "sender RDMA port counters", "rank 2 read no port: {second:?}");
    // A kernel without the limited times (before 4.10) or lowest round trip (4.6).
    let old = tcp(90.0, 0.0, 100.0, 50.0, 0.0).map(|t| TcpView { busy_pct: None, min_rtt_us: None, ..t });
    let run = with_tcp(fan_in("tcp", [1.0, 1.0, 1.0]), [old, tcp(90.0, 0.0, 100.0, 50.0, 0.0), None]);
    let [a, b, c] = [0, 1, 2].map(|k| run.phases[0].flows[k].limit.clone().unwrap().unavailable);
    assert_eq!(a, ["sender TCP busy and limited times (Linux 4.10)", "sender TCP lowest round trip (Linux 4.6)"]);
    assert!(b.is_empty(), "{b:?}");
    assert_eq!(c, ["sender TCP_INFO"]);
    let json = serde_json::to_value(run.phases[0].flows[1].limit.as_ref().unwrap()).unwrap();
    assert!(json.get("unavailable").is_none(), "written only where something is: {json}");
}

#[test]
fn a_gpu_whose_pcie_link_carries_less_than_the_nics_port_holds_a_flow_in_its_memory() {
    let tree = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hosts/gpu-dgx");
    let facts = crate::hostfacts::HostFacts::under(&tree);
    let from_gpu = |gpu: usize| {
        let json = serde_json::json!({"sender": [{"memory": "cuda", "gpu": gpu, "chosen": "1", "provider": "p",
            "registration": "dmabuf", "why": "w"}], "receiver": []});
        Some(serde_json::from_value(json).unwrap())
    };
    let judge = |gpu: usize| {
        let mut run = fan_in("rdma", [200.0, 50.0, 50.0]);
        run.probes = (0..4).map(downtrained_probe).collect();
        for probe in &mut run.probes {
            probe.facts = Some(Box::new(facts.clone()));
        }
        run.phases[0].flows[0].gpu_memory = from_gpu(gpu);
        judged(run).phases[0].flows[0].limit.clone().unwrap()
    };
    // GPU 1 trained at 16 GT/s x16: 252 Gb/s under mlx5_0's 400 Gb/s port (whose own link, 32 x16, is wide).
    let held = judge(1);
    assert_eq!(held.kind, LimitKind::Pcie, "{held:?}");
    assert!(held.rule.contains("GPU 1 at 16 GT/s x16 (of 32 GT/s x16)"), "{}", held.rule);
    assert!((evidence(&held, "sender PCIe link") - 252.06).abs() < 0.01, "{held:?}");
    // GPU 0 trained at its best: 504 Gb/s, no limit to a 400 Gb/s port.
    assert_ne!(judge(0).kind, LimitKind::Pcie);
}

#[test]
fn a_tcp_senders_nic_on_a_narrow_pcie_link_holds_its_flow() {
    let mut run = fan_in("tcp", [55.0, 1.0, 1.0]);
    for rank in &mut run.phases[0].ranks {
        rank.netdevs[0].speed_mbps = Some(100_000);
    }
    // A 100 GbE NIC in a Gen3 x8 slot: 63 Gb/s.
    let gen3_x8 = crate::hostfacts::PcieLink { speed_gts: 8.0, max_speed_gts: 8.0, width: 8, max_width: 16 };
    run.phases[0].ranks[1].netdevs[0].pcie = Some(gen3_x8);
    let run = judged(run);
    let held = run.phases[0].flows[0].limit.as_ref().unwrap();
    assert_eq!(held.kind, LimitKind::Pcie, "{held:?}");
    assert!(held.rule.contains("eth0 at 8 GT/s x8 (of 8 GT/s x16)") && held.rule.contains("eth0 of h2 at 100 Gb/s"));
    assert!((evidence(held, "sender PCIe link") - 63.01).abs() < 0.01, "{held:?}");
}
