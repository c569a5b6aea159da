//! The worker session driven by a simulated coordinator: scripted messages,
//! work that "finishes" when the test says so, and a clock that moves only
//! when the test moves it. No sockets, no threads, no processes.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use super::*;
use crate::control::coordinator::{Event, Output, Timeouts};
use crate::control::sim::{self, hello, make_plan, window};
use crate::control::wire::{Endpoint, Window};
use crate::hostfacts::HostFacts;
use crate::metrics::RankReport;
use crate::transport::memory::MemoryError;
use crate::transport::rdma::RdmaInventory;
use crate::transport::tcp::TcpError;
use crate::transport::{Counts, Side};
use crate::worker::gpu::{PreflightError, Unusable};
use crate::worker::phase::PhaseError;

/// Stand-ins for a phase's opened and connected flow ends: the session
/// only carries them, so a tag of the phase they belong to is enough.
#[derive(Debug, PartialEq)]
struct Opened(usize);
#[derive(Debug, PartialEq)]
struct Linked(usize);

type Act = Action<Opened, Linked>;
type Done = Work<Opened, Linked>;

const HELLO_NS: i64 = 1_000_000_000;
const COORDINATOR_NS: i64 = 7_000_000_000;

fn endpoints(phase: usize) -> Vec<FlowEndpoint> {
    let addr = SocketAddr::from(([10, 0, 0, 1], 4000 + phase as u16));
    vec![FlowEndpoint { flow: 0, side: Side::Receiver, endpoint: Endpoint::Tcp { addr } }]
}

fn report(phase: usize) -> Box<RankReport> {
    Box::new(RankReport { phase, rank: 1, ..RankReport::default() })
}

fn failed(phase: usize, error: &str) -> Act {
    Action::Send(ToCoordinator::Failed { phase, error: error.to_string() })
}

/// One rank's session and the coordinator's side of the conversation.
struct Sim {
    s: Session<Opened, Linked>,
    start: Instant,
    now: Instant,
}

impl Sim {
    fn new() -> Sim {
        let start = Instant::now();
        Sim { s: Session::new(hello(1), Epoch { at: start, ns: HELLO_NS }), start, now: start }
    }

    /// A session past Welcome (2 ms after Hello), with Hello and the probe taken.
    fn welcomed() -> Sim {
        let mut sim = Sim::new();
        assert_eq!(sim.actions(), [Action::Send(ToCoordinator::Hello(hello(1)))]);
        sim.now += Duration::from_millis(2);
        assert_eq!(
            sim.recv(ToWorker::Welcome { now_ns: COORDINATOR_NS, heartbeat: HEARTBEAT, gpus: Vec::new(), lldp: false }),
            [Action::Probe { gpus: Vec::new(), lldp: false }]
        );
        let (inventory, facts) = (RdmaInventory::default(), Box::<HostFacts>::default());
        let probe = Action::Send(ToCoordinator::Probe(inventory.clone(), facts.clone(), None));
        assert_eq!(sim.done(Work::Probed(inventory, facts, Ok(()), None)), [probe]);
        sim
    }

    fn actions(&mut self) -> Vec<Act> {
        std::iter::from_fn(|| self.s.poll()).collect()
    }

    fn recv(&mut self, msg: ToWorker) -> Vec<Act> {
        self.s.handle(msg, self.now);
        self.actions()
    }

    fn done(&mut self, work: Done) -> Vec<Act> {
        self.s.finished(work);
        self.actions()
    }

    /// Moves the clock to `ms` after Hello and lets the timers run.
    fn at(&mut self, ms: u64) -> Vec<Act> {
        self.now = self.start + Duration::from_millis(ms);
        self.s.handle_timeout(self.now);
        self.actions()
    }

    fn clock(&self) -> PeerClock {
        // Hello left at 1.000 s, Welcome (read at 7.000 s) came back 2 ms later.
        PeerClock { offset_ns: HELLO_NS + 1_000_000 - COORDINATOR_NS, rtt_ns: 2_000_000 }
    }

    fn setup(&mut self, phase: usize) -> Vec<Act> {
        self.recv(ToWorker::Setup { phase, flows: Vec::new(), stress: None })
    }

    fn peers(&mut self, phase: usize) -> Vec<Act> {
        self.recv(ToWorker::Peers { phase, peers: endpoints(phase) })
    }

    fn start(&mut self, phase: usize) -> Vec<Act> {
        self.recv(ToWorker::Start { phase, t0_ns: 9_000_000_000, window: window() })
    }

    fn reach_prepared(&mut self, phase: usize) {
        assert_eq!(self.setup(phase), [Action::Prepare { phase, flows: Vec::new(), stress: None }]);
        let result = Ok((Opened(phase), endpoints(phase)));
        let sent = ToCoordinator::Endpoints { phase, endpoints: endpoints(phase) };
        assert_eq!(self.done(Work::Prepared { phase, result }), [Action::Send(sent)]);
    }

    fn reach_connected(&mut self, phase: usize) {
        self.reach_prepared(phase);
        assert_eq!(self.peers(phase), [Action::Connect { phase, ends: Opened(phase), peers: endpoints(phase) }]);
        let ready = Action::Send(ToCoordinator::Ready { phase });
        assert_eq!(self.done(Work::Connected { phase, result: Ok(Linked(phase)) }), [ready]);
    }

    fn reach_running(&mut self, phase: usize) {
        self.reach_connected(phase);
        let (t0_ns, window, clock) = (9_000_000_000, window(), self.clock());
        assert_eq!(self.start(phase), [Action::Start { phase, links: Linked(phase), t0_ns, window, clock }]);
    }
}

#[test]
fn three_phases_in_order_then_bye() {
    let mut sim = Sim::welcomed();
    let inventory = RdmaInventory { devices: Vec::new(), error: Some("no RDMA devices".into()) };
    let facts = Box::new(HostFacts::of_this_host());
    assert_eq!(
        sim.done(Work::Probed(inventory.clone(), facts.clone(), Ok(()), None)),
        [Action::Send(ToCoordinator::Probe(inventory, facts, None))]
    );
    for phase in 0..3 {
        sim.reach_running(phase);
        for interval in 1..=2 {
            let ends = vec![Counts { bytes: 10, messages: 1 }, Counts { bytes: 0, messages: 0 }];
            let progress = ToCoordinator::Interval { phase, interval, span_ns: 1_000, ends: ends.clone() };
            let work = Work::Interval { phase, interval, span_ns: 1_000, ends };
            assert_eq!(sim.done(work), [Action::Send(progress)]);
        }
        let sent = Action::Send(ToCoordinator::Report(report(phase)));
        assert_eq!(sim.done(Work::Report(report(phase))), [sent]);
        assert!(matches!(sim.s.stage, Stage::Idle { next } if next == phase + 1), "{:?}", sim.s.stage);
    }
    assert_eq!(sim.recv(ToWorker::Heartbeat), []);
    assert_eq!(sim.recv(ToWorker::Bye), [Action::Exit(Ok(()))]);
    // Done: nothing more happens, and no timer is due.
    assert_eq!(sim.setup(3), []);
    assert_eq!(sim.s.poll_timeout(), None);
    assert_eq!(sim.at(60_000), []);
}

#[test]
fn anything_before_welcome_ends_the_session() {
    let mut sim = Sim::new();
    sim.actions();
    let exit = sim.setup(0);
    assert_eq!(exit, [Action::Exit(Err(SessionError::NotWelcomed("Setup")))]);
    let Action::Exit(Err(e)) = &exit[0] else { unreachable!() };
    assert_eq!(e.to_string(), "the coordinator sent Setup before welcoming this rank");
}

#[test]
fn abort_at_each_stage_halts_until_bye() {
    // Reach a stage, abort, then let the work in flight finish late.
    type Reach = fn(&mut Sim);
    let stages: [(&str, Reach, Option<Done>); 6] = [
        ("idle", |_| {}, None),
        (
            "preparing",
            |s| {
                s.setup(0);
            },
            Some(Work::Prepared { phase: 0, result: Ok((Opened(0), endpoints(0))) }),
        ),
        ("prepared", |s| s.reach_prepared(0), None),
        (
            "connecting",
            |s| {
                s.reach_prepared(0);
                s.peers(0);
            },
            Some(Work::Connected { phase: 0, result: Ok(Linked(0)) }),
        ),
        ("connected", |s| s.reach_connected(0), None),
        ("running", |s| s.reach_running(0), Some(Work::Report(report(0)))),
    ];
    for (name, reach, late) in stages {
        let mut sim = Sim::welcomed();
        reach(&mut sim);
        let running = name == "running";
        let stop = if running { vec![Action::StopStreams] } else { Vec::new() };
        assert_eq!(sim.recv(ToWorker::Abort { reason: "rank 2 failed".into() }), stop, "{name}");
        if let Some(late) = late {
            // A stopped phase still reports what it measured; setup and connect work is dropped.
            let sent = if running { vec![Action::Send(ToCoordinator::Report(report(0)))] } else { Vec::new() };
            assert_eq!(sim.done(late), sent, "{name}");
        }
        assert!(matches!(sim.s.stage, Stage::Halted { phase: 0 }), "{name}: {:?}", sim.s.stage);
        assert_eq!(sim.recv(ToWorker::Abort { reason: "again".into() }), [], "{name}");
        let error = "unexpected Setup for phase 1 while halted in phase 0, waiting for Bye";
        assert_eq!(sim.setup(1), [failed(0, error)], "{name}");
        assert_eq!(sim.recv(ToWorker::Bye), [Action::Exit(Ok(()))], "{name}");
    }
}

#[test]
fn a_message_for_another_phase_or_stage_is_an_error_to_the_coordinator() {
    let mut sim = Sim::welcomed();
    let error = "unexpected Setup for phase 1 while waiting for the setup of phase 0";
    assert_eq!(sim.setup(1), [failed(0, error)]);
    let error = "unexpected Peers for phase 0 while waiting for the setup of phase 0";
    assert_eq!(sim.peers(0), [failed(0, error)]);
    assert_eq!(sim.setup(0), [Action::Prepare { phase: 0, flows: Vec::new(), stress: None }]);
    let error = "unexpected Start for phase 0 while creating the endpoints of phase 0";
    assert_eq!(sim.start(0), [failed(0, error)]);
    let error = "unexpected Setup for phase 0 while creating the endpoints of phase 0";
    assert_eq!(sim.setup(0), [failed(0, error)]);
    let result = Ok((Opened(0), endpoints(0)));
    assert_eq!(sim.done(Work::Prepared { phase: 0, result }).len(), 1);
    // Peers for a phase it is not in: refused, and the ends kept for the right ones.
    let error = "unexpected Peers for phase 2 while waiting for the peers of phase 0";
    assert_eq!(sim.peers(2), [failed(0, error)]);
    let error = "unexpected second Welcome while waiting for the peers of phase 0";
    assert_eq!(
        sim.recv(ToWorker::Welcome { now_ns: 0, heartbeat: HEARTBEAT, gpus: Vec::new(), lldp: false }),
        [failed(0, error)]
    );
    assert_eq!(sim.peers(0), [Action::Connect { phase: 0, ends: Opened(0), peers: endpoints(0) }]);
    assert_eq!(sim.done(Work::Connected { phase: 0, result: Ok(Linked(0)) }).len(), 1);
    let error = "unexpected Start for phase 1 while waiting for the start of phase 0";
    assert_eq!(sim.start(1), [failed(0, error)]);
    assert!(matches!(sim.s.stage, Stage::Connected { phase: 0, links: Linked(0) }), "{:?}", sim.s.stage);
}

#[test]
fn a_duplicate_start_is_refused_and_the_phase_runs_on() {
    let mut sim = Sim::welcomed();
    sim.reach_running(0);
    assert_eq!(sim.start(0), [failed(0, "unexpected Start for phase 0 while running phase 0")]);
    let sent = Action::Send(ToCoordinator::Report(report(0)));
    assert_eq!(sim.done(Work::Report(report(0))), [sent]);
    assert_eq!(sim.start(0), [failed(1, "unexpected Start for phase 0 while waiting for the setup of phase 1")]);
}

#[test]
fn heartbeats_every_half_second_and_the_lease_runs_from_the_last_message() {
    let mut sim = Sim::new();
    sim.actions();
    // Before Welcome: no heartbeats, only the lease.
    assert_eq!(sim.s.poll_timeout(), Some(sim.start + LEASE));
    sim.now += Duration::from_millis(2);
    sim.recv(ToWorker::Welcome { now_ns: COORDINATOR_NS, heartbeat: HEARTBEAT, gpus: Vec::new(), lldp: false });
    assert_eq!(sim.s.poll_timeout(), Some(sim.start + Duration::from_millis(502)));
    assert_eq!(sim.at(400), []);
    assert_eq!(sim.at(502), [Action::Send(ToCoordinator::Heartbeat)]);
    assert_eq!(sim.s.poll_timeout(), Some(sim.start + Duration::from_millis(1002)));
    // A stall of this process: the missed heartbeats are not sent in a burst.
    assert_eq!(sim.at(2_600), [Action::Send(ToCoordinator::Heartbeat)]);
    assert_eq!(sim.s.poll_timeout(), Some(sim.start + Duration::from_millis(3_100)));
    // The coordinator's heartbeat at 3 s renews the lease to 8 s.
    sim.now = sim.start + Duration::from_secs(3);
    assert_eq!(sim.recv(ToWorker::Heartbeat), []);
    for ms in [3_100, 3_600, 4_100, 4_600, 5_100, 5_600, 6_100, 6_600, 7_100, 7_600] {
        assert_eq!(sim.at(ms), [Action::Send(ToCoordinator::Heartbeat)], "at {ms} ms");
    }
    assert_eq!(sim.s.poll_timeout(), Some(sim.start + Duration::from_secs(8)));
    assert_eq!(sim.at(8_000), [Action::Exit(Err(SessionError::Silent(LEASE)))]);
    assert_eq!(sim.s.poll_timeout(), None);
    assert_eq!(sim.at(9_000), []);
}

#[test]
fn a_heartbeat_round_that_carried_a_message_sends_none() {
    let mut sim = Sim::welcomed();
    assert_eq!(sim.at(502), [], "the probe went in this round");
    assert_eq!(sim.at(1_002), [Action::Send(ToCoordinator::Heartbeat)]);
    sim.reach_running(0);
    assert_eq!(sim.at(1_502), [], "Endpoints and Ready went in this round");
    assert_eq!(sim.at(2_002), [Action::Send(ToCoordinator::Heartbeat)]);
    assert_eq!(sim.at(2_502), [Action::Send(ToCoordinator::Heartbeat)], "a heartbeat is no sign of business");
}

#[test]
fn a_large_job_spreads_heartbeats_out_and_lengthens_the_lease_with_them() {
    let mut sim = Sim::new();
    sim.actions();
    sim.recv(ToWorker::Welcome {
        now_ns: COORDINATOR_NS,
        heartbeat: Duration::from_secs(2),
        gpus: Vec::new(),
        lldp: false,
    });
    assert_eq!(sim.at(1_999), []);
    assert_eq!(sim.at(2_000), [Action::Send(ToCoordinator::Heartbeat)]);
    assert_eq!(sim.at(3_999), []);
    assert_eq!(sim.at(4_000), [Action::Send(ToCoordinator::Heartbeat)]);
    // Ten intervals: silent for 20 s, not the usual 5 s.
    let silent = Duration::from_secs(20);
    assert_eq!(sim.s.poll_timeout(), Some(sim.start + Duration::from_secs(6)));
    let beats: Vec<Act> = (3..10).flat_map(|k| sim.at(k * 2_000)).collect();
    assert_eq!(beats.len(), 7, "{beats:?}");
    assert_eq!(sim.at(20_000), [Action::Exit(Err(SessionError::Silent(silent)))]);

    // A heartbeat interval past the bound is held to it; none below the usual.
    for (asked, kept) in [(Duration::MAX, MAX_HEARTBEAT), (Duration::ZERO, HEARTBEAT)] {
        let mut sim = Sim::new();
        sim.actions();
        sim.recv(ToWorker::Welcome { now_ns: COORDINATOR_NS, heartbeat: asked, gpus: Vec::new(), lldp: false });
        assert_eq!(sim.s.poll_timeout(), Some(sim.start + kept), "Welcome asked for {asked:?}");
    }
}

#[test]
fn the_lease_expires_before_welcome_and_while_running() {
    let mut sim = Sim::new();
    sim.actions();
    assert_eq!(sim.at(4_999), []);
    assert_eq!(sim.at(5_000), [Action::Exit(Err(SessionError::Silent(LEASE)))]);

    let mut sim = Sim::welcomed();
    sim.reach_running(0);
    assert_eq!(sim.at(502), [], "the round that carried Ready needs no heartbeat");
    let beats = sim.at(4_900);
    assert_eq!(beats, [Action::Send(ToCoordinator::Heartbeat)]);
    let exit = sim.at(5_002);
    assert_eq!(exit, [Action::Exit(Err(SessionError::Silent(LEASE)))]);
    let Action::Exit(Err(e)) = &exit[0] else { unreachable!() };
    assert_eq!(e.to_string(), "the coordinator was silent for 5s (heartbeat lease expired)");
    // The stopped streams' report has no one to go to.
    assert_eq!(sim.done(Work::Report(report(0))), []);
}

/// Peers that come with Setup (the coordinator knew them already) are held
/// while the ends are made: the rank connects right after its Endpoints go,
/// never before them, and a second Peers is still an error.
#[test]
fn the_gpu_preflight_runs_before_any_end_is_made_and_a_failure_ends_the_rank() {
    use crate::hostfile::GpuChoice;
    use crate::plan::GpuAsk;
    use crate::plan::{GpuRegistration, Memory};
    let gpus = vec![GpuAsk {
        memory: Memory::Cuda,
        gpu: GpuChoice::Index(3),
        hostfile: false,
        nic: None,
        registration: GpuRegistration::Auto,
        phase: 2,
        group: "gdr".into(),
    }];
    let welcome = ToWorker::Welcome { now_ns: COORDINATOR_NS, heartbeat: HEARTBEAT, gpus: gpus.clone(), lldp: false };
    let (inventory, facts) = (RdmaInventory::default(), Box::<HostFacts>::default());
    let probe = || Action::Send(ToCoordinator::Probe(inventory.clone(), facts.clone(), None));
    let prepare = Action::Prepare { phase: 0, flows: Vec::new(), stress: None };

    // The GPUs open: phase 0's ends are made only then.
    let mut sim = Sim::new();
    sim.actions();
    assert_eq!(sim.recv(welcome.clone()), [Action::Probe { gpus: gpus.clone(), lldp: false }]);
    assert_eq!(sim.setup(0), [], "no end before the preflight");
    assert_eq!(sim.done(Work::Probed(inventory.clone(), facts.clone(), Ok(()), None)), [probe(), prepare]);

    // One does not: the rank refuses before making any end (nothing ran:
    // the coordinator ends the run as bad input), the probe still sent.
    let mut sim = Sim::new();
    sim.actions();
    sim.recv(welcome.clone());
    assert_eq!(sim.setup(0), []);
    let cause = Box::new(Unusable::Open(MemoryError::NoSuchGpu { gpu: 3, count: 2 }));
    let error = PreflightError { group: "gdr".into(), phase: 0, memory: "cuda", gpu: "3".into(), cause };
    let text = "GPU preflight: group \"gdr\" (phase 0) puts this rank's buffers in cuda memory on gpu = 3, which \
                cannot be used here: GPU 3 not on this host (it has 2; GPUs are numbered from 0 as CUDA counts them)";
    let outcome = Work::Probed(inventory.clone(), facts.clone(), Err(error), None);
    let refused = Action::Send(ToCoordinator::Refused { phase: 0, error: text.into() });
    assert_eq!(sim.done(outcome), [probe(), refused]);
    assert!(matches!(sim.s.stage, Stage::Halted { phase: 0 }), "{:?}", sim.s.stage);

    // Aborted while it ran: the held Setup is dropped, not prepared.
    let mut sim = Sim::new();
    sim.actions();
    sim.recv(welcome);
    sim.setup(0);
    sim.recv(ToWorker::Abort { reason: "rank 2 failed".into() });
    assert_eq!(sim.done(Work::Probed(inventory.clone(), facts.clone(), Ok(()), None)), [probe()]);
}

#[test]
fn early_peers_are_held_until_the_endpoints_have_gone() {
    let mut sim = Sim::welcomed();
    assert_eq!(sim.setup(0), [Action::Prepare { phase: 0, flows: Vec::new(), stress: None }]);
    assert_eq!(sim.peers(0), [], "held while the ends are made");
    let sent = Action::Send(ToCoordinator::Endpoints { phase: 0, endpoints: endpoints(0) });
    let connect = Action::Connect { phase: 0, ends: Opened(0), peers: endpoints(0) };
    assert_eq!(sim.done(Work::Prepared { phase: 0, result: Ok((Opened(0), endpoints(0))) }), [sent, connect]);
    let ready = Action::Send(ToCoordinator::Ready { phase: 0 });
    assert_eq!(sim.done(Work::Connected { phase: 0, result: Ok(Linked(0)) }), [ready]);

    // Before the probe has gone, Endpoints wait for it, and so does the connect.
    let mut sim = Sim::new();
    sim.actions();
    assert_eq!(
        sim.recv(ToWorker::Welcome { now_ns: COORDINATOR_NS, heartbeat: HEARTBEAT, gpus: Vec::new(), lldp: false }),
        [Action::Probe { gpus: Vec::new(), lldp: false }]
    );
    sim.setup(0);
    sim.peers(0);
    assert_eq!(sim.done(Work::Prepared { phase: 0, result: Ok((Opened(0), endpoints(0))) }), []);
    let (inventory, facts) = (RdmaInventory::default(), Box::<HostFacts>::default());
    let probe = Action::Send(ToCoordinator::Probe(inventory.clone(), facts.clone(), None));
    let sent = Action::Send(ToCoordinator::Endpoints { phase: 0, endpoints: endpoints(0) });
    let connect = Action::Connect { phase: 0, ends: Opened(0), peers: endpoints(0) };
    assert_eq!(sim.done(Work::Probed(inventory, facts, Ok(()), None)), [probe, sent, connect]);

    // So does a failure to make them: rank 0 hears the probe (the devices the host has) first.
    let mut sim = Sim::new();
    sim.actions();
    sim.recv(ToWorker::Welcome { now_ns: COORDINATOR_NS, heartbeat: HEARTBEAT, gpus: Vec::new(), lldp: false });
    sim.setup(0);
    assert_eq!(sim.done(Work::Prepared { phase: 0, result: Err(PhaseError::NoPeer { flow: 3 }) }), []);
    let (inventory, facts) = (RdmaInventory::default(), Box::<HostFacts>::default());
    let probe = Action::Send(ToCoordinator::Probe(inventory.clone(), facts.clone(), None));
    let text = "flow 3: the coordinator sent no usable peer endpoint";
    assert_eq!(sim.done(Work::Probed(inventory, facts, Ok(()), None)), [probe, failed(0, text)]);
    assert!(matches!(sim.s.stage, Stage::Halted { phase: 0 }), "{:?}", sim.s.stage);

    let mut sim = Sim::welcomed();
    sim.setup(0);
    sim.peers(0);
    let error = "unexpected Peers for phase 0 while creating the endpoints of phase 0";
    assert_eq!(sim.peers(0), [failed(0, error)]);
}

#[test]
fn bye_mid_phase_exits_at_once() {
    let mut sim = Sim::welcomed();
    sim.reach_running(0);
    assert_eq!(sim.recv(ToWorker::Bye), [Action::Exit(Ok(()))]);
    assert_eq!(
        sim.done(Work::Interval { phase: 0, interval: 1, span_ns: 1, ends: vec![Counts { bytes: 1, messages: 1 }] }),
        []
    );
    assert_eq!(sim.done(Work::Report(report(0))), []);

    let mut sim = Sim::welcomed();
    sim.setup(0);
    assert_eq!(sim.recv(ToWorker::Bye), [Action::Exit(Ok(()))]);
    assert_eq!(sim.done(Work::Prepared { phase: 0, result: Ok((Opened(0), endpoints(0))) }), []);
}

#[test]
fn own_failures_are_reported_and_halt_the_rank() {
    let mut sim = Sim::welcomed();
    sim.setup(0);
    let cause = TcpError::Listen { addr: [10, 0, 0, 1].into(), cause: std::io::ErrorKind::AddrInUse.into() };
    let error = PhaseError::Tcp { flow: 0, side: Side::Receiver, cause };
    let text = "flow 0 (Receiver): cannot listen on 10.0.0.1: address in use";
    assert_eq!(sim.done(Work::Prepared { phase: 0, result: Err(error) }), [failed(0, text)]);
    assert!(matches!(sim.s.stage, Stage::Halted { phase: 0 }));
    assert_eq!(sim.recv(ToWorker::Abort { reason: "rank 1 failed".into() }), []);

    let mut sim = Sim::welcomed();
    sim.reach_prepared(0);
    sim.peers(0);
    let text = "flow 3: the coordinator sent no usable peer endpoint";
    assert_eq!(sim.done(Work::Connected { phase: 0, result: Err(PhaseError::NoPeer { flow: 3 }) }), [failed(0, text)]);
    assert!(matches!(sim.s.stage, Stage::Halted { phase: 0 }));

    // A flow that fails while running is told at once; the coordinator then aborts.
    let mut sim = Sim::welcomed();
    sim.reach_running(0);
    let error = "flow 3 1->0: bad completion";
    assert_eq!(sim.done(Work::FlowFailed { phase: 0, error: error.into() }), [failed(0, error)]);
    assert_eq!(sim.done(Work::FlowFailed { phase: 1, error: error.into() }), []);
    assert_eq!(sim.recv(ToWorker::Abort { reason: "rank 1 failed".into() }), [Action::StopStreams]);
    assert_eq!(sim.done(Work::Report(report(0))).len(), 1);
    assert!(matches!(sim.s.stage, Stage::Halted { phase: 0 }));
}

/// The real coordinator and one session per rank, the ranks' blocking work
/// done at once; with `report`, a started phase reports at once too.
struct Job {
    coordinator: sim::Sim,
    ranks: Vec<Session<Opened, Linked>>,
    report: bool,
    events: Vec<Event>,
    stopped: Vec<usize>,
    exits: Vec<Result<(), SessionError>>,
}

impl Job {
    /// Two ranks of a fan-in swept over two stream counts: two phases.
    fn new(report: bool) -> Job {
        let text = "[[group]]\nname = \"g\"\npattern = \"fan-in\"\n[sweep]\nparameter = \"streams\"\nvalues = [1, 2]\n";
        let plan = make_plan(2, text);
        assert_eq!(plan.phases.len(), 2);
        let mut coordinator = sim::Sim::new(plan, Timeouts::default());
        for conn in 0..2 {
            coordinator.connect(conn);
        }
        let now = Epoch { at: coordinator.now, ns: 0 };
        let ranks = (0..2).map(|r| Session::new(hello(r), now)).collect();
        Job { coordinator, ranks, report, events: Vec::new(), stopped: Vec::new(), exits: Vec::new() }
    }

    /// Carries frames both ways until neither side has anything to do.
    fn settle(&mut self) {
        loop {
            let mut quiet = true;
            let mut said = Vec::new();
            for (rank, session) in self.ranks.iter_mut().enumerate() {
                while let Some(action) = session.poll() {
                    quiet = false;
                    match action {
                        Action::Send(msg) => said.push(sim::Said { conn: rank as u64, msg }),
                        Action::Probe { .. } => {
                            session.finished(Work::Probed(RdmaInventory::default(), Box::default(), Ok(()), None))
                        }
                        Action::Prepare { phase, flows, .. } => {
                            let endpoint = endpoints(phase)[0].endpoint.clone();
                            let receivers = flows.iter().filter(|f| f.side == Side::Receiver);
                            let endpoints = receivers
                                .map(|f| FlowEndpoint { endpoint: endpoint.clone(), flow: f.flow.id, side: f.side })
                                .collect();
                            session.finished(Work::Prepared { phase, result: Ok((Opened(phase), endpoints)) });
                        }
                        Action::Connect { phase, ends, .. } => {
                            session.finished(Work::Connected { phase, result: Ok(Linked(ends.0)) })
                        }
                        Action::Start { phase, .. } if self.report => {
                            let report = RankReport { phase, rank, ..RankReport::default() };
                            session.finished(Work::Report(Box::new(report)))
                        }
                        Action::Start { .. } => {}
                        Action::StopStreams => {
                            self.stopped.push(rank);
                            let phase = phase_of(&session.stage);
                            let report = RankReport { phase, rank, ..RankReport::default() };
                            session.finished(Work::Report(Box::new(report)))
                        }
                        Action::Exit(result) => self.exits.push(result),
                    }
                }
            }
            let (now, mut saved) = (self.coordinator.now, Vec::new());
            let Job { coordinator, ranks, events, .. } = self;
            coordinator.run(said, |output| {
                quiet = false;
                match output {
                    Output::Send(conn, msg) => ranks[conn as usize].handle(msg, now),
                    Output::Close(conn) => panic!("connection {conn} closed"),
                    Output::Admit(_) => {}
                    Output::Event(event) => {
                        if let Event::PhaseDone(phase) = &event {
                            saved.push(phase.index);
                        }
                        events.push(event)
                    }
                }
                None
            });
            // The launcher's part: the phase is on disk, the next may begin.
            for phase in saved {
                coordinator.c.saved(phase, now);
            }
            if quiet {
                return;
            }
        }
    }
}

#[test]
fn sessions_and_the_real_coordinator_run_a_sweep() {
    let mut job = Job::new(true);
    job.settle();
    let done = job.events.iter().filter(|e| matches!(e, Event::PhaseDone(_))).count();
    assert_eq!((done, job.events.last()), (2, Some(&Event::Finished)), "{:?}", job.events);
    assert_eq!((job.stopped, job.exits), (Vec::new(), vec![Ok(()), Ok(())]));
}

#[test]
fn the_real_coordinator_ends_the_run_with_a_sessions_refusal() {
    let mut job = Job::new(false);
    job.settle();
    assert!(job.ranks.iter().all(|s| matches!(s.stage, Stage::Running { phase: 0 })));
    // A coordinator that sends Start twice: rank 1 says so, and the run ends with its words.
    job.ranks[1].handle(ToWorker::Start { phase: 0, t0_ns: 0, window: window() }, job.coordinator.now);
    job.settle();
    let failure = job.events.iter().find_map(|e| match e {
        Event::Failed(f) => Some(f.to_string()),
        _ => None,
    });
    let expected = "rank 1 (h2): failed in phase 0: unexpected Start for phase 0 while running phase 0";
    assert_eq!(failure.as_deref(), Some(expected), "{:?}", job.events);
    assert_eq!((job.stopped, job.exits), (vec![0, 1], vec![Ok(()), Ok(())]));
}

#[test]
fn a_start_whose_window_breaks_the_limits_is_refused() {
    // Found by fuzzing (fuzz/corpus/to_worker/window-overflow): 2³² samples
    // overflowed `Window::boundaries`, and the sampler would reserve them.
    let mut sim = Sim::welcomed();
    sim.reach_connected(0);
    let window = Window { interval: Duration::from_nanos(1), duration: Duration::from_secs(3600), ..window() };
    let error =
        "unexpected Start for phase 0 with a window whose `interval` must be between 1ms and the duration (1h) \
                 while waiting for the start of phase 0";
    assert_eq!(sim.recv(ToWorker::Start { phase: 0, t0_ns: 0, window }), [failed(0, error)]);
    assert!(matches!(sim.s.stage, Stage::Connected { phase: 0, .. }), "{:?}", sim.s.stage);
}
