//! The coordinator state machine driven by simulated ranks: no sockets, no
//! clock but the simulated one (`control::sim::Sim`).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

use fabricbench::control::coordinator::{ConnId, Coordinator, Event, Output, Timeouts};
use fabricbench::control::sim::{self, hello, make_plan, samples, window, Said, JOB, TOKEN};
use fabricbench::control::wire::{Endpoint, FlowEndpoint, Hello, ToCoordinator, ToWorker, PROTOCOL_VERSION};
use fabricbench::histogram::Histogram;
use fabricbench::hostfacts::HostFacts;
use fabricbench::metrics::{FlowSamples, RankReport};
use fabricbench::plan::Plan;
use fabricbench::result::intervals::{ends_by_rank, End};
use fabricbench::transport::rdma::RdmaInventory;
use fabricbench::transport::{Counts, Side};

const MS: i64 = 1_000_000;

const FAN_IN: &str = "[[group]]\nname = \"g\"\npattern = \"fan-in\"\n";
const ALL_TO_ALL: &str = "[[group]]\nname = \"g\"\npattern = \"all-to-all\"\n";

/// What the simulated ranks were given, kept for the test to look at.
#[derive(Default)]
struct Seen {
    inbox: HashMap<ConnId, Vec<ToWorker>>,
    closed: Vec<ConnId>,
    admitted: Vec<ConnId>,
    events: Vec<Event>,
}

impl Seen {
    /// Keeps one output of the coordinator; no rank answers by itself.
    fn keep(&mut self, out: Output) -> Option<Said> {
        match out {
            Output::Send(conn, msg) => self.inbox.entry(conn).or_default().push(msg),
            Output::Close(conn) => self.closed.push(conn),
            Output::Admit(conn) => self.admitted.push(conn),
            Output::Event(e) => self.events.push(e),
        }
        None
    }
}

/// A coordinator and the simulated ranks around it, which answer as each
/// test says; connection id = rank.
struct Sim {
    s: sim::Sim,
    seen: Seen,
}

impl Sim {
    fn new(plan: Plan) -> Sim {
        Sim { s: sim::Sim::new(plan, Timeouts::default()), seen: Seen::default() }
    }

    /// What the coordinator has to give out, after a call on it.
    fn pump(&mut self) {
        self.s.pump(|out| self.seen.keep(out));
    }

    fn send(&mut self, conn: ConnId, msg: ToCoordinator) {
        self.s.send(conn, msg, |out| self.seen.keep(out));
    }

    fn join(&mut self, conn: ConnId, h: Hello) {
        self.s.connect(conn);
        self.send(conn, ToCoordinator::Hello(h));
    }

    fn join_all(&mut self, n: usize) {
        for r in 0..n {
            self.join(r as ConnId, hello(r));
        }
    }

    fn take(&mut self, conn: ConnId) -> Vec<ToWorker> {
        self.seen.inbox.remove(&conn).unwrap_or_default()
    }

    fn advance(&mut self, by_ms: u64) {
        self.s.advance(Duration::from_millis(by_ms), |out| self.seen.keep(out));
    }

    fn failure(&self) -> Option<String> {
        self.seen.events.iter().find_map(|e| match e {
            Event::Failed(f) => Some(f.to_string()),
            _ => None,
        })
    }

    fn rejections(&self) -> Vec<String> {
        self.seen
            .events
            .iter()
            .filter_map(|e| match e {
                Event::Rejected { reason, .. } => Some(reason.clone()),
                _ => None,
            })
            .collect()
    }
}

fn tcp(port: u16) -> Endpoint {
    Endpoint::Tcp { addr: SocketAddr::from(([127, 0, 0, 1], port)) }
}

/// Every rank of `ranks` answers its Setup with a TCP endpoint per receiving end.
/// Each rank answers its Setup with its receivers' endpoints; Peers that
/// came with it (or before the answer) stay in its inbox.
fn answer_setups(sim: &mut Sim, ranks: impl IntoIterator<Item = usize>) {
    for r in ranks {
        let (peers, others): (Vec<_>, Vec<_>) =
            sim.take(r as ConnId).into_iter().partition(|m| matches!(m, ToWorker::Peers { .. }));
        if !peers.is_empty() {
            sim.seen.inbox.insert(r as ConnId, peers);
        }
        let Some(ToWorker::Setup { phase, flows, .. }) =
            others.into_iter().find(|m| matches!(m, ToWorker::Setup { .. }))
        else {
            panic!("rank {r} got no Setup");
        };
        let endpoints = flows
            .iter()
            .filter(|f| f.side == Side::Receiver)
            .map(|f| FlowEndpoint { flow: f.flow.id, side: Side::Receiver, endpoint: tcp(1000 + f.flow.id as u16) })
            .collect();
        sim.send(r as ConnId, ToCoordinator::Endpoints { phase, endpoints });
    }
}

/// A fan-in of `n` ranks, joined, connected and started.
fn running_fan_in(n: usize) -> Sim {
    let mut sim = Sim::new(make_plan(n, FAN_IN));
    sim.join_all(n);
    answer_setups(&mut sim, 0..n);
    for r in 0..n as ConnId {
        sim.send(r, ToCoordinator::Ready { phase: 0 });
    }
    sim
}

fn report(rank: usize, flows: Vec<FlowSamples>, boundaries: u32) -> RankReport {
    RankReport { phase: 0, rank, boundaries, flows, ..Default::default() }
}

/// `rank` sends intervals 1 … `boundaries - 1` of phase 0, each 1 s long,
/// in which its ends moved `per_second` bytes (and 10 messages) each.
fn intervals(sim: &mut Sim, rank: ConnId, per_second: &[u64], boundaries: u32) {
    let ends: Vec<Counts> = per_second.iter().map(|&bytes| Counts { bytes, messages: 10 }).collect();
    for interval in 1..boundaries {
        sim.send(rank, ToCoordinator::Interval { phase: 0, interval, span_ns: 1_000 * MS, ends: ends.clone() });
    }
}

#[test]
fn happy_path_fan_in() {
    let n = 4;
    let mut sim = Sim::new(make_plan(n, FAN_IN));
    sim.join_all(n);
    assert!(matches!(sim.seen.events.last(), Some(Event::Joined { joined: 4, total: 4, .. })));
    for r in 0..n {
        let first = &sim.seen.inbox[&(r as ConnId)][0];
        assert!(matches!(first, ToWorker::Welcome { .. }), "rank {r} first got {first:?}");
    }
    // Setup: rank 0 receives three flows, each sender sends one.
    let setups: Vec<usize> = (0..n)
        .map(|r| match sim.seen.inbox[&(r as ConnId)].last() {
            Some(ToWorker::Setup { flows, .. }) => flows.len(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(setups, [3, 1, 1, 1]);
    answer_setups(&mut sim, 0..n);

    // Peers: each sender gets exactly its own receiver's endpoint.
    for r in 1..n {
        let msgs = sim.take(r as ConnId);
        let Some(ToWorker::Peers { peers, .. }) = msgs.last() else { panic!("rank {r}: {msgs:?}") };
        assert_eq!(peers.len(), 1);
        assert_eq!(peers[0].flow, (r - 1) as u32);
        assert_eq!(peers[0].endpoint, tcp(1000 + (r - 1) as u16));
        sim.send(r as ConnId, ToCoordinator::Ready { phase: 0 });
    }
    assert!(matches!(sim.take(0).last(), Some(ToWorker::Peers { peers, .. }) if peers.is_empty()));
    sim.advance(10);
    sim.send(0, ToCoordinator::Ready { phase: 0 });
    let Some(ToWorker::Start { t0_ns, .. }) = sim.take(2).pop() else { panic!("no Start") };
    assert_eq!(t0_ns, (sim.s.elapsed() + Timeouts::default().start_delay).as_nanos() as i64);

    // Rank 0 receives 1, 2 and 3 GB/s; its senders count 5 B/s each. An
    // interval closes once every rank has sent it, each flow counted at
    // its receiver: 8, 16 and 24 Gb/s.
    let b = 3;
    intervals(&mut sim, 0, &[1_000_000_000, 2_000_000_000, 3_000_000_000], b);
    assert!(!sim.seen.events.iter().any(|e| matches!(e, Event::Progress { .. })), "not before every rank sent it");
    for r in 1..n {
        intervals(&mut sim, r as ConnId, &[5], b);
    }
    let closed: Vec<(u32, f64, Vec<f64>)> = sim
        .seen
        .events
        .iter()
        .filter_map(|e| match e {
            Event::Progress { interval, gbps, flows, .. } => Some((*interval, *gbps, flows.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(closed, [(1, 48.0, vec![8.0, 16.0, 24.0]), (2, 48.0, vec![8.0, 16.0, 24.0])]);

    sim.send(0, ToCoordinator::Report(Box::new(report(0, (0..3).map(|f| samples(f, Side::Receiver)).collect(), b))));
    for r in 1..n {
        let f = (r - 1) as u32;
        sim.send(r as ConnId, ToCoordinator::Report(Box::new(report(r, vec![samples(f, Side::Sender)], b))));
    }
    let done = sim.seen.events.iter().find_map(|e| match e {
        Event::PhaseDone(p) => Some(p.clone()),
        _ => None,
    });
    let p = done.expect("phase result");
    assert!(p.complete);
    assert_eq!(p.window_s, 2.0);
    // Receiver counts win: 1, 2 and 3 GB/s = 8, 16, 24 Gb/s.
    let rates: Vec<f64> = p.flows.iter().map(|f| f.gbps).collect();
    assert_eq!(rates, [8.0, 16.0, 24.0]);
    assert_eq!(p.aggregate_gbps, 48.0);
    assert_eq!(p.flows[0].tx_bytes, Some(10), "the sender's count of 5 B/s over 2 s");
    assert!(p.interval_gbps.is_empty() && p.flows[0].interval_gbps.is_empty(), "went as they closed");
    assert_eq!(p.receivers.len(), 1);
    assert_eq!(p.receivers[0].senders, 3);
    assert!((p.receivers[0].jain - 48.0 * 48.0 / (3.0 * (64.0 + 256.0 + 576.0))).abs() < 1e-12);
    assert!(matches!(sim.seen.events.last(), Some(Event::Finished)));
    for r in 0..n {
        assert_eq!(sim.take(r as ConnId).last(), Some(&ToWorker::Bye), "rank {r}");
    }
    assert!(sim.s.c.is_done());
}

/// Runs a fan-in on 4 ranks to the reports; `rank0` sends rank 0's (three
/// receiver ends, 1, 2 and 3 GB/s) its own way.
fn fan_in_to_reports(rank0: impl FnOnce(&mut Sim, Vec<FlowSamples>)) -> Sim {
    let (n, b) = (4, 3);
    let mut sim = Sim::new(make_plan(n, FAN_IN));
    sim.join_all(n);
    answer_setups(&mut sim, 0..n);
    for r in 0..n {
        sim.send(r as ConnId, ToCoordinator::Ready { phase: 0 });
    }
    intervals(&mut sim, 0, &[1_000_000_000, 2_000_000_000, 3_000_000_000], b);
    for r in 1..n {
        let f = (r - 1) as u32;
        intervals(&mut sim, r as ConnId, &[5], b);
        sim.send(r as ConnId, ToCoordinator::Report(Box::new(report(r, vec![samples(f, Side::Sender)], b))));
    }
    rank0(&mut sim, (0..3).map(|f| samples(f, Side::Receiver)).collect());
    sim
}

#[test]
fn a_report_in_parts_arrives_whole() {
    let sim = fan_in_to_reports(|sim, mut flows| {
        let last = flows.split_off(2);
        let part = RankReport { flows, ..report(0, Vec::new(), 0) };
        sim.send(0, ToCoordinator::ReportPart(Box::new(part)));
        sim.send(0, ToCoordinator::Report(Box::new(report(0, last, 3))));
    });
    let rates: Vec<f64> = sim
        .seen
        .events
        .iter()
        .find_map(|e| match e {
            Event::PhaseDone(p) => Some(p.flows.iter().map(|f| f.gbps).collect()),
            _ => None,
        })
        .expect("phase result");
    assert_eq!(rates, [8.0, 16.0, 24.0]);
    assert!(matches!(sim.seen.events.last(), Some(Event::Finished)));
}

#[test]
fn more_parts_than_flow_ends_fail_the_rank() {
    let mut sim = fan_in_to_reports(|sim, flows| {
        let part = RankReport { flows: [flows.clone(), flows].concat(), ..report(0, Vec::new(), 0) };
        sim.send(0, ToCoordinator::ReportPart(Box::new(part)));
    });
    // The other ranks' reports are in: the abort's grace ends the run.
    sim.advance(3_000);
    let failure = sim.failure().expect("the run failed");
    assert!(failure.contains("sent 6 flow reports in parts for phase 0, but has 3 flow ends"), "{failure}");
}

/// Each decoded histogram is 108 KiB: a rank's report may carry one per
/// latency flow it sends on (`histogram_budget`, enforced in the frame's
/// decode; the real-socket test is in coordinator_scale.rs), and its parts
/// together no more.
#[test]
fn latency_histograms_are_held_to_the_plan() {
    let text = "[[group]]\nname = \"bw\"\npattern = \"fan-in\"\n\
                [[group]]\nname = \"lat\"\npattern = \"explicit\"\nmode = \"latency\"\nflows = [[1, 0], [1, 2], [2, 0]]\n";
    let mut sim = Sim::new(make_plan(3, text));
    sim.join_all(3);
    // Rank 1 sends on two latency flows, rank 2 on one, rank 0 on none.
    assert_eq!((0..3).map(|conn| sim.s.c.histogram_budget(conn)).collect::<Vec<_>>(), [0, 2, 1]);
    assert_eq!(sim.s.c.histogram_budget(99), 0, "no rank, no histograms");
    answer_setups(&mut sim, 0..3);
    for r in 0..3 {
        sim.send(r, ToCoordinator::Ready { phase: 0 });
    }
    // Rank 1's flows: 0 (fan-in, to 0), 2 (1 -> 0) and 3 (1 -> 2); three histograms in parts.
    let mut h = Histogram::default();
    h.record(10_000);
    let timed = |flow| FlowSamples { rtts: Some(h.clone()), ..samples(flow, Side::Sender) };
    let part = RankReport { flows: vec![timed(0), timed(2), timed(3)], ..report(1, Vec::new(), 0) };
    sim.send(1, ToCoordinator::ReportPart(Box::new(part)));
    sim.advance(3_000);
    let failure = sim.failure().expect("the run failed");
    assert!(
        failure.contains("rank 1")
            && failure.contains("sent 3 latency histograms in parts for phase 0, but measures latency on 2 flows"),
        "{failure}"
    );
}

#[test]
fn an_inconsistent_report_fails_its_rank_and_the_coordinator_survives() {
    type Spoil = fn(&mut RankReport);
    let bad: [(&str, Spoil); 3] = [
        ("reported flow 7 (Receiver), which is not its own", |r| r.flows[0].flow = 7),
        ("sent a report for rank 3", |r| r.rank = 3),
        // A bandwidth flow's receiver measures no round trips.
        ("reported round trips for flow 1 (Receiver), which measures none there", |r| {
            r.flows[1].rtts = Some(Histogram::default())
        }),
    ];
    for (expected, spoil) in bad {
        let mut sim = fan_in_to_reports(|sim, flows| {
            let mut report = report(0, flows, 3);
            spoil(&mut report);
            sim.send(0, ToCoordinator::Report(Box::new(report)));
        });
        sim.advance(3_000);
        let failure = sim.failure().expect("the run failed");
        assert!(failure.contains("rank 0") && failure.contains(expected), "{expected}: {failure}");
        assert!(failure.contains("its report is left out"), "{failure}");
        assert!(sim.s.c.is_done(), "{expected}");
    }
}

/// Rank 0 of a fan-in on 4 ranks has three receiver ends; the window has
/// two intervals.
#[test]
fn an_inconsistent_interval_fails_its_rank_and_the_coordinator_survives() {
    let interval = |interval, span_ns, ends: usize| ToCoordinator::Interval {
        phase: 0,
        interval,
        span_ns,
        ends: vec![Counts { bytes: 1_000, messages: 1 }; ends],
    };
    let bad = [
        ("sent interval 2 where 1 was next", vec![interval(2, 1_000 * MS, 3)]),
        ("sent 1 readings for interval 1, but has 3 flow ends", vec![interval(1, 1_000 * MS, 1)]),
        ("sent interval 1 lasting -5 ns", vec![interval(1, -5, 3)]),
        ("sent interval 3 of a window of 2", (1..=3).map(|k| interval(k, 1_000 * MS, 3)).collect()),
    ];
    for (expected, said) in bad {
        let mut sim = running_fan_in(4);
        for message in said {
            sim.send(0, message);
        }
        sim.advance(3_000);
        let failure = sim.failure().expect("the run failed");
        assert!(failure.starts_with("rank 0 (h1): ") && failure.contains(expected), "{expected}: {failure}");
        assert!(sim.s.c.is_done(), "{expected}");
    }
}

#[test]
fn an_endpoint_for_another_ranks_flow_fails_the_rank() {
    let mut sim = Sim::new(make_plan(4, FAN_IN));
    sim.join_all(4);
    // Rank 1 sends flow 0; it claims rank 2's flow 1 too.
    let endpoints = vec![
        FlowEndpoint { flow: 0, side: Side::Sender, endpoint: tcp(2000) },
        FlowEndpoint { flow: 1, side: Side::Sender, endpoint: tcp(2001) },
    ];
    sim.send(1, ToCoordinator::Endpoints { phase: 0, endpoints });
    let failure = sim.failure().expect("the run failed");
    assert!(
        failure.contains("rank 1") && failure.contains("endpoint for flow 1 (Sender) that is not its own"),
        "{failure}"
    );
}

#[test]
fn a_valid_hello_admits_and_a_second_one_fails_the_rank() {
    let mut sim = Sim::new(make_plan(2, FAN_IN));
    sim.join_all(2);
    assert_eq!(sim.seen.admitted, [0, 1], "each joined connection may now send full-sized frames");
    sim.send(1, ToCoordinator::Hello(hello(1)));
    sim.advance(3_000);
    let failure = sim.failure().expect("the run failed");
    assert!(
        failure.contains("rank 1") && failure.contains("sent a second Hello on its joined connection"),
        "{failure}"
    );
}

#[test]
fn strangers_are_rejected_and_the_run_goes_on() {
    let mut sim = Sim::new(make_plan(2, FAN_IN));
    sim.join(0, hello(0));
    let mut bad_token = hello(1);
    bad_token.token = "guess".into();
    sim.join(10, bad_token);
    let mut old = hello(1);
    old.version = PROTOCOL_VERSION - 1;
    old.token = "guess".into();
    sim.join(11, old);
    let mut magic = hello(1);
    magic.magic = 0xdead_beef;
    sim.join(12, magic);
    sim.s.connect(13);
    sim.s.c.protocol_error(13, "garbage", sim.s.now);
    sim.pump();
    sim.join(14, hello(0));
    sim.s.connect(15);
    sim.send(15, ToCoordinator::Heartbeat);

    let reasons = sim.rejections();
    assert_eq!(reasons.len(), 6, "{reasons:?}");
    assert_eq!(reasons[0], "wrong job token from `h2` claiming rank 1");
    assert_eq!(reasons[1], "wrong job token from `h2` claiming rank 1");
    assert_eq!(reasons[2], "not a fabricbench worker (bad magic)");
    assert_eq!(reasons[3], "undecodable first frame: garbage");
    assert_eq!(reasons[4], "rank 0 joined twice (second Hello from h1)");
    assert_eq!(reasons[5], "first frame was not a Hello");
    assert_eq!(sim.seen.closed, [10, 11, 12, 13, 14, 15]);
    // None of them got anything; the real rank 1 still joins and the run starts.
    assert!(sim.seen.inbox.keys().all(|&c| c < 10));
    sim.join(1, hello(1));
    assert!(matches!(sim.take(1).last(), Some(ToWorker::Setup { .. })));
    assert_eq!(sim.failure(), None);
}

#[test]
fn strangers_hold_at_most_a_quarter_of_the_open_files_limit() {
    use fabricbench::control::coordinator::{PENDING_STRANGERS, STRANGERS_FD_SHARE};
    let n = 3;
    let mut sim = Sim::new(make_plan(n, FAN_IN));
    sim.join(0, hello(0));
    // 40 descriptors: 10 strangers beside the 2 ranks still to come.
    let limit = 40;
    let share = (limit / STRANGERS_FD_SHARE) as usize;
    for conn in 0..share + n - 1 {
        assert!(sim.s.c.accepts_more(limit), "refused at {conn}");
        sim.s.connect(100 + conn as ConnId);
    }
    assert!(!sim.s.c.accepts_more(limit));
    // One stranger leaves: one more may come.
    sim.s.c.closed(100, sim.s.now);
    assert!(sim.s.c.accepts_more(limit));
    sim.s.connect(100);
    assert!(!sim.s.c.accepts_more(limit));
    // With a generous limit the fixed cap holds.
    assert!(sim.s.c.accepts_more(u64::MAX));
    let mut sim = Sim::new(make_plan(n, FAN_IN));
    for conn in 0..PENDING_STRANGERS + n {
        sim.s.connect(conn as ConnId);
    }
    assert!(!sim.s.c.accepts_more(u64::MAX));
}

#[test]
fn rank_that_never_sends_endpoints_is_named() {
    let n = 3;
    let mut sim = Sim::new(make_plan(n, FAN_IN));
    sim.join_all(n);
    for r in [0, 1] {
        sim.send(r, ToCoordinator::Endpoints { phase: 0, endpoints: Vec::new() });
    }
    // Heartbeats keep it alive, but endpoints never come.
    for _ in 0..70 {
        for r in 0..n as ConnId {
            sim.send(r, ToCoordinator::Heartbeat);
        }
        sim.advance(500);
    }
    assert_eq!(
        sim.failure().as_deref(),
        Some("rank 2 (h3): no answer while creating endpoints of phase 0 within 30 s")
    );
    for r in 0..n as ConnId {
        let msgs = sim.take(r);
        assert!(msgs.iter().any(|m| matches!(m, ToWorker::Abort { .. })), "rank {r}");
        assert_eq!(msgs.last(), Some(&ToWorker::Bye));
    }
}

#[test]
fn silent_rank_times_out() {
    let mut sim = Sim::new(make_plan(2, FAN_IN));
    sim.join_all(2);
    for _ in 0..8 {
        sim.send(0, ToCoordinator::Heartbeat);
        sim.advance(500);
    }
    let failure = sim.failure().expect("failure");
    assert!(failure.starts_with("rank 1 (h2): silent for 3."), "{failure}");
    assert!(
        failure.ends_with("s while creating endpoints of phase 0 (heartbeat timeout); its flows: 0 (1->0)"),
        "{failure}"
    );
}

/// Phase 0's Setup goes out with each Welcome (one write), so ranks make
/// their endpoints while the others are still joining; a rank's Peers go as
/// soon as the far ends of its flows are published (with its Welcome and
/// Setup, when they already are), so it connects while others still join;
/// Start waits for every rank's Ready.
#[test]
fn phase_zero_is_set_up_while_the_others_join() {
    let n = 3;
    let mut sim = Sim::new(make_plan(n, FAN_IN));
    sim.join(1, hello(1));
    answer_setups(&mut sim, 1..2);
    assert!(sim.seen.inbox.is_empty(), "rank 1's receiver has published nothing yet: {:?}", sim.seen.inbox);
    sim.join(0, hello(0));
    answer_setups(&mut sim, 0..1);
    let early = sim.take(1);
    let [ToWorker::Peers { phase: 0, peers }] = &early[..] else { panic!("rank 1: {early:?}") };
    assert_eq!(peers.iter().map(|p| p.flow).collect::<Vec<_>>(), [0], "its one flow's receiver");
    sim.send(1, ToCoordinator::Ready { phase: 0 });
    sim.join(2, hello(2));
    let last = sim.take(2);
    assert!(
        matches!(
            last[..],
            [ToWorker::Welcome { .. }, ToWorker::Setup { phase: 0, .. }, ToWorker::Peers { phase: 0, .. }]
        ),
        "{last:?}"
    );
    assert!(sim.seen.inbox.is_empty(), "rank 0 waits for its last sender's endpoints: {:?}", sim.seen.inbox);
    sim.seen.inbox.insert(2, last);
    answer_setups(&mut sim, 2..3);
    assert!(matches!(sim.take(0)[..], [ToWorker::Peers { phase: 0, .. }]), "rank 0, once every sender published");
    assert!(matches!(sim.take(2)[..], [ToWorker::Peers { phase: 0, .. }]), "rank 2's, kept by its answer");
    sim.send(2, ToCoordinator::Ready { phase: 0 });
    assert!(sim.seen.inbox.is_empty(), "no Start before every rank is Ready: {:?}", sim.seen.inbox);
    sim.send(0, ToCoordinator::Ready { phase: 0 });
    for r in 0..n as ConnId {
        assert!(matches!(sim.take(r)[..], [ToWorker::Start { phase: 0, .. }]), "rank {r}");
    }
    assert!(sim.failure().is_none());
}

/// With rdma_cm flows every rank's Peers wait for every rank's endpoints:
/// an active end's handshake starts when it has its peers (10 s), and its
/// passive end answers only once it has its own.
#[test]
fn rdma_cm_peers_wait_for_every_endpoint() {
    let n = 3;
    let scenario = "[[group]]\nname = \"g\"\npattern = \"fan-in\"\ntransport = \"rdma\"\n\
                    [group.rdma]\nconnect = \"rdma_cm\"\n";
    let mut sim = Sim::new(make_plan(n, scenario));
    sim.join_all(n);
    answer_setups(&mut sim, 0..2);
    assert!(sim.take(0).is_empty() && sim.take(1).is_empty(), "rank 2 has not published");
    answer_setups(&mut sim, 2..3);
    for r in 0..n as ConnId {
        assert!(matches!(sim.take(r)[..], [ToWorker::Peers { phase: 0, .. }]), "rank {r}");
    }
    assert!(sim.failure().is_none());
}

/// Ready from a rank that was never sent its peers is a broken rank; so is
/// a second Endpoints.
#[test]
fn ready_before_peers_and_endpoints_twice_end_the_run() {
    let mut sim = Sim::new(make_plan(3, FAN_IN));
    sim.join_all(3);
    sim.send(1, ToCoordinator::Ready { phase: 0 });
    assert_eq!(sim.failure().as_deref(), Some("rank 1 (h2): said Ready before it was sent its peers (phase 0)"));
    let mut sim = Sim::new(make_plan(3, FAN_IN));
    sim.join_all(3);
    answer_setups(&mut sim, 0..1);
    sim.send(0, ToCoordinator::Endpoints { phase: 0, endpoints: Vec::new() });
    assert_eq!(sim.failure().as_deref(), Some("rank 0 (h1): published its endpoints twice (phase 0)"));
}

#[test]
fn join_timeout_lists_missing_ranks() {
    let mut sim = Sim::new(make_plan(4, FAN_IN));
    sim.join(0, hello(0));
    sim.join(1, hello(1));
    for _ in 0..61 {
        sim.send(0, ToCoordinator::Heartbeat);
        sim.send(1, ToCoordinator::Heartbeat);
        sim.advance(500);
    }
    assert_eq!(sim.failure().as_deref(), Some("rank 2 (h3): no answer while joining within 30 s (also ranks 3)"));
}

#[test]
fn lost_rank_mid_run_keeps_partial_results() {
    let n = 3;
    let mut sim = running_fan_in(n);
    // Rank 2 dies; the others are told to stop and send what they have.
    sim.s.c.closed(2, sim.s.now);
    sim.pump();
    for r in [0, 1] {
        assert!(
            matches!(sim.take(r).last(), Some(ToWorker::Abort { reason }) if reason.starts_with("rank 2 (h3): connection lost during phase 0"))
        );
    }
    assert_eq!(sim.failure(), None, "waits for partial reports first");
    // Interval 1 came from the two ranks left: it closes without rank 2.
    intervals(&mut sim, 0, &[100, 50], 2);
    intervals(&mut sim, 1, &[100], 2);
    assert!(!sim.seen.events.iter().any(|e| matches!(e, Event::Progress { .. })), "rank 2 may still send it");
    sim.send(
        0,
        ToCoordinator::Report(Box::new(report(0, vec![samples(0, Side::Receiver), samples(1, Side::Receiver)], 2))),
    );
    sim.send(1, ToCoordinator::Report(Box::new(report(1, vec![samples(0, Side::Sender)], 2))));
    let partial = sim.seen.events.iter().find_map(|e| match e {
        Event::PhaseDone(p) => Some(p.clone()),
        _ => None,
    });
    let p = partial.expect("partial phase kept");
    assert!(!p.complete);
    assert_eq!(p.flows[0].bytes, 100);
    assert_eq!(p.window_s, 1.0);
    let closed = sim.seen.events.iter().find_map(|e| match e {
        Event::Progress { interval: 1, flows, .. } => Some(flows.clone()),
        _ => None,
    });
    // Both flows count at their receiver, rank 0; rank 2's readings never came.
    assert_eq!(closed, Some(vec![100.0 * 8.0 / 1e9, 50.0 * 8.0 / 1e9]));
    assert!(!p.ranks[2].reported);
    assert_eq!(sim.failure().as_deref(), Some("rank 2 (h3): connection lost during phase 0; its flows: 1 (2->0)"));
    assert!(matches!(sim.seen.events.last(), Some(Event::Failed(_))));
    assert_eq!(sim.take(0).last(), Some(&ToWorker::Bye));
}

#[test]
fn abort_without_reports_ends_after_grace() {
    let n = 2;
    let mut sim = running_fan_in(n);
    sim.send(1, ToCoordinator::Failed { phase: 0, error: "stream broke".into() });
    assert_eq!(sim.failure(), None);
    sim.advance(2_100);
    assert_eq!(sim.failure().as_deref(), Some("rank 1 (h2): failed in phase 0: stream broke"));
}

/// A rank the GPU preflight refuses ends the run before any phase runs,
/// naming it, and the failure says nothing ran (the launcher exits 2);
/// a rank that failed otherwise is not marked so.
#[test]
fn a_refusal_before_any_end_ends_the_run_as_refused() {
    let refused = |msg: ToCoordinator| {
        let mut sim = Sim::new(make_plan(2, FAN_IN));
        sim.join_all(2);
        sim.send(1, msg);
        let failure = sim.seen.events.iter().find_map(|e| match e {
            Event::Failed(f) => Some(f.clone()),
            _ => None,
        });
        let failure = failure.expect("the run ended");
        assert_eq!(sim.take(0).last(), Some(&ToWorker::Bye));
        (failure.to_string(), failure.refused)
    };
    let (text, was) = refused(ToCoordinator::Refused { phase: 0, error: "GPU preflight: gpu = 5".into() });
    assert_eq!((text.as_str(), was), ("rank 1 (h2): failed in phase 0: GPU preflight: gpu = 5", true));
    let (text, was) = refused(ToCoordinator::Failed { phase: 0, error: "no RDMA devices".into() });
    assert_eq!((text.as_str(), was), ("rank 1 (h2): failed in phase 0: no RDMA devices", false));
}

/// When the coordinator's own process did not run (a loaded host, an
/// emulated CPU), it heard no one: the gap is not the ranks' silence.
/// A rank that stays silent once the coordinator runs again still is.
#[test]
fn a_stalled_coordinator_does_not_blame_the_ranks() {
    let mut sim = Sim::new(make_plan(2, FAN_IN));
    sim.join_all(2);
    sim.advance(100);
    sim.advance(5_000);
    assert_eq!(sim.failure(), None, "a 5 s stall of the coordinator itself");
    for _ in 0..8 {
        sim.send(0, ToCoordinator::Heartbeat);
        sim.advance(500);
    }
    let failure = sim.failure().expect("rank 1 stayed silent after the stall");
    assert!(failure.starts_with("rank 1 (h2): silent for 3."), "{failure}");
}

/// A rank that stays connected but says nothing (a frozen process) cannot
/// hold an abort open: its silence is past the limit at every tick, and the
/// run still ends once the grace for partial reports is over.
#[test]
fn a_frozen_rank_does_not_hold_the_abort_open() {
    let n = 2;
    let mut sim = running_fan_in(n);
    // Rank 1 freezes; much later rank 0's flow fails (a stall) and it reports.
    for _ in 0..40 {
        sim.send(0, ToCoordinator::Heartbeat);
        sim.advance(100);
    }
    sim.send(0, ToCoordinator::Failed { phase: 0, error: "flow 0 1->0: QP 0: no progress".into() });
    sim.send(0, ToCoordinator::Report(Box::new(report(0, vec![samples(0, Side::Receiver)], 2))));
    for _ in 0..25 {
        sim.send(0, ToCoordinator::Heartbeat);
        sim.advance(100);
    }
    assert_eq!(
        sim.failure().as_deref(),
        Some("rank 1 (h2): silent for 3.1 s during phase 0 (heartbeat timeout); its flows: 0 (1->0)")
    );
    assert!(matches!(sim.seen.events.last(), Some(Event::Failed(_))));
}

/// A rank's interval readings come in the order of its Setup's flows;
/// rank 0 reads them in the order of `ends_by_rank`: the two agree.
#[test]
fn each_ranks_setup_lists_its_ends_in_the_order_its_intervals_are_read() {
    let n = 5;
    let plan = make_plan(n, ALL_TO_ALL);
    let expected = ends_by_rank(&plan.phases[0], n);
    let mut sim = Sim::new(plan);
    sim.join_all(n);
    for (r, expected) in expected.iter().enumerate() {
        let Some(ToWorker::Setup { flows, .. }) = sim.take(r as ConnId).pop() else { panic!("rank {r}") };
        let ends: Vec<End> = flows.iter().map(|f| End { flow: f.flow.id as usize, side: f.side }).collect();
        assert_eq!(&ends, expected, "rank {r}");
    }
}

#[test]
fn peers_per_rank_are_its_own_flows_only() {
    let n = 64;
    let mut sim = Sim::new(make_plan(n, ALL_TO_ALL));
    sim.join_all(n);
    answer_setups(&mut sim, 0..n);
    for r in 0..n {
        let Some(ToWorker::Peers { peers, .. }) = sim.take(r as ConnId).pop() else { panic!("rank {r}") };
        // A rank sends to n-1 others; TCP senders publish no endpoint of their own.
        assert_eq!(peers.len(), n - 1, "rank {r}");
        assert!(peers.iter().all(|p| p.side == Side::Receiver));
    }
}

#[test]
fn a_rank_of_another_version_ends_the_run_naming_both() {
    let mut sim = Sim::new(make_plan(3, FAN_IN));
    sim.join(0, hello(0));
    let mut other = hello(2);
    other.tool_version = "0.0.1".into();
    sim.join(2, other);
    let failure = sim.failure().expect("the run ends");
    assert_eq!(
        failure,
        format!(
            "rank 2 (h3): runs fabricbench 0.0.1 (protocol {PROTOCOL_VERSION}) but rank 0 runs fabricbench {} (protocol {PROTOCOL_VERSION}); install one version everywhere",
            env!("CARGO_PKG_VERSION")
        )
    );
    assert!(sim.s.c.is_done());
    assert_eq!(sim.take(0).last(), Some(&ToWorker::Bye));
}

#[test]
fn heartbeats_go_only_to_ranks_sent_nothing_else() {
    let mut sim = Sim::new(make_plan(2, FAN_IN));
    sim.join(0, hello(0));
    assert!(matches!(sim.take(0)[..], [ToWorker::Welcome { .. }, ToWorker::Setup { phase: 0, .. }]));
    // The Welcome was this round's sign of life.
    sim.advance(500);
    assert_eq!(sim.take(0), []);
    sim.advance(500);
    assert_eq!(sim.take(0), [ToWorker::Heartbeat]);
    sim.advance(500);
    assert_eq!(sim.take(0), [ToWorker::Heartbeat]);
}

#[test]
fn each_ranks_probe_becomes_an_event_naming_its_host() {
    let mut sim = Sim::new(make_plan(2, FAN_IN));
    sim.join_all(2);
    let inventory = RdmaInventory { devices: Vec::new(), error: Some("no RDMA devices".into()) };
    let facts = HostFacts { kernel: Some("6.1.0-18-amd64".into()), ..HostFacts::default() };
    sim.send(1, ToCoordinator::Probe(inventory, Box::new(facts.clone()), None));
    let probe = sim.seen.events.iter().find_map(|e| match e {
        Event::Probed(p) => Some(p.clone()),
        _ => None,
    });
    let probe = probe.expect("a Probed event");
    assert_eq!((probe.rank, probe.host.as_str(), probe.error.as_deref()), (1, "h2", Some("no RDMA devices")));
    assert_eq!(probe.facts, Some(Box::new(facts)), "the host's facts go into run.json with its probe");
    assert!(sim.failure().is_none());
}

/// The driver sleeps until `poll_timeout`: the next heartbeat round, or
/// sooner the first moment a limit is passed (a stranger's Hello deadline
/// here); nothing once the run is over.
#[test]
fn the_coordinator_says_when_it_is_next_due() {
    let t = Timeouts { hello: Duration::from_millis(1_200), ..Timeouts::default() };
    let mut sim = Sim { s: sim::Sim::new(make_plan(2, FAN_IN), t), seen: Seen::default() };
    let start = sim.s.now;
    assert_eq!(sim.s.c.poll_timeout(), Some(start + t.heartbeat));
    sim.s.connect(9);
    sim.advance(1_000);
    let passed = start + t.hello + Duration::from_nanos(1);
    assert_eq!(sim.s.c.poll_timeout(), Some(passed), "the Hello deadline comes before the round at 1.5 s");
    sim.s.advance(passed - sim.s.now, |out| sim.seen.keep(out));
    assert_eq!(sim.rejections(), ["no Hello within 1.2s"]);
    assert_eq!(sim.s.c.poll_timeout(), Some(start + Duration::from_millis(1_500)), "then the next round");
    sim.s.c.stop("stopped", sim.s.now);
    assert_eq!(sim.s.c.poll_timeout(), None);
}

/// A plan of no phases: the launch that gathers the hosts' LLDP neighbours
/// before the run is planned (`run --topology lldp`).
fn probing_only(ranks: usize) -> Sim {
    let mut plan = make_plan(ranks, FAN_IN);
    plan.phases.clear();
    let start = sim::Sim::start();
    let c = Coordinator::new(JOB, TOKEN.into(), plan, window(), Timeouts::default(), start).gathering_lldp();
    Sim { s: sim::Sim::around(c, start), seen: Seen::default() }
}

fn probe(text: Result<String, fabricbench::hostfacts::lldp::LldpError>) -> ToCoordinator {
    let inventory = RdmaInventory { devices: Vec::new(), error: None };
    ToCoordinator::Probe(inventory, Box::default(), Some(text))
}

#[test]
fn a_plan_of_no_phases_ends_once_every_rank_has_probed() {
    let mut sim = probing_only(3);
    sim.join_all(3);
    for rank in 0..3 {
        let welcome = sim.take(rank);
        assert!(matches!(welcome.as_slice(), [ToWorker::Welcome { lldp: true, .. }]), "no Setup: {welcome:?}");
    }
    sim.send(0, probe(Ok("{}".into())));
    sim.send(2, probe(Err(fabricbench::hostfacts::lldp::LldpError::TimedOut)));
    assert!(!sim.s.c.is_done(), "rank 1 has not probed");
    sim.send(1, probe(Ok("{}".into())));
    assert!(sim.s.c.is_done());
    let neighbours = sim.seen.events.iter().filter(|e| matches!(e, Event::Neighbours { .. })).count();
    assert_eq!(neighbours, 3, "every rank's text, or why it has none, goes to the launcher");
    assert!(matches!(sim.seen.events.last(), Some(Event::Finished)), "{:?}", sim.seen.events.last());
    assert_eq!(sim.take(1), [ToWorker::Bye]);
}

#[test]
fn a_rank_that_never_probes_ends_a_plan_of_no_phases_named() {
    let mut sim = probing_only(2);
    sim.join_all(2);
    sim.send(0, probe(Ok("{}".into())));
    // Rank 1 keeps its lease but never probes; its endpoints are ignored (there is no Setup).
    sim.send(1, ToCoordinator::Endpoints { phase: 0, endpoints: Vec::new() });
    assert!(sim.failure().is_none(), "endpoints outside a Setup are ignored");
    for _ in 0..62 {
        sim.send(0, ToCoordinator::Heartbeat);
        sim.send(1, ToCoordinator::Heartbeat);
        sim.advance(500);
    }
    let failure = sim.failure().expect("the run ends");
    assert!(failure.contains("rank 1") && failure.contains("no answer while probing its host"), "{failure}");
}

#[test]
fn endpoints_while_joining_a_plan_of_no_phases_are_refused() {
    let mut sim = probing_only(2);
    sim.join(0, hello(0));
    sim.send(0, ToCoordinator::Endpoints { phase: 0, endpoints: Vec::new() });
    let failure = sim.failure().expect("the run ends");
    assert!(failure.contains("rank 0") && failure.contains("sent endpoints, but the run has 0 phase(s)"), "{failure}");
}

/// Two ranks of a fan-in swept over two stream counts, phase 0 reported:
/// the coordinator waits for the launcher to save it.
fn first_of_two_phases_done() -> Sim {
    let sweep = "[[group]]\nname = \"g\"\npattern = \"fan-in\"\n[sweep]\nparameter = \"streams\"\nvalues = [1, 2]\n";
    let mut sim = Sim::new(make_plan(2, sweep));
    sim.join_all(2);
    answer_setups(&mut sim, 0..2);
    for r in 0..2 {
        sim.send(r, ToCoordinator::Ready { phase: 0 });
    }
    let b = 3;
    intervals(&mut sim, 0, &[1_000], b);
    intervals(&mut sim, 1, &[1_000], b);
    sim.send(0, ToCoordinator::Report(Box::new(report(0, vec![samples(0, Side::Receiver)], b))));
    sim.send(1, ToCoordinator::Report(Box::new(report(1, vec![samples(0, Side::Sender)], b))));
    assert!(sim.seen.events.iter().any(|e| matches!(e, Event::PhaseDone(p) if p.index == 0 && p.complete)));
    sim
}

/// Whether a rank was sent the Setup of `phase`.
fn set_up(sim: &mut Sim, rank: ConnId, phase: usize) -> bool {
    sim.take(rank).iter().any(|m| matches!(m, ToWorker::Setup { phase: p, .. } if *p == phase))
}

/// `seconds` go by; both ranks heartbeat every second.
fn alive_for(sim: &mut Sim, seconds: usize) {
    for _ in 0..seconds {
        sim.advance(1_000);
        for r in 0..2 {
            sim.send(r, ToCoordinator::Heartbeat);
        }
    }
}

#[test]
fn the_next_phase_starts_only_once_the_launcher_saved_the_last() {
    let mut sim = first_of_two_phases_done();
    // Saving takes its time: heartbeats go on, the ranks stay, no Setup yet.
    alive_for(&mut sim, 10);
    assert!(!set_up(&mut sim, 0, 1) && !set_up(&mut sim, 1, 1));
    // Word of another phase changes nothing; word of this one starts the next.
    sim.s.c.saved(1, sim.s.now);
    sim.pump();
    assert!(!set_up(&mut sim, 0, 1));
    sim.s.c.saved(0, sim.s.now);
    sim.pump();
    assert!(set_up(&mut sim, 0, 1) && set_up(&mut sim, 1, 1));
    assert_eq!(sim.failure(), None);
}

#[test]
fn a_launcher_that_never_saves_ends_the_run_by_name() {
    let mut sim = first_of_two_phases_done();
    alive_for(&mut sim, 31);
    assert_eq!(sim.failure().as_deref(), Some("the launcher did not say within 30 s that phase 0 is on disk"));
    assert!(sim.s.c.is_done());
    assert_eq!(sim.take(1).last(), Some(&ToWorker::Bye));
}
