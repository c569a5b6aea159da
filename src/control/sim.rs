//! Simulated ranks around the sans-IO coordinator, in one process and
//! without sockets: they join, answer Setup with endpoints and Peers with
//! Ready, until the coordinator starts the phase, and then report it. One
//! harness for every consumer: the worker session's unit tests, the
//! integration tests, the control-plane benchmark (benches/control_plane.rs)
//! and the fuzz targets, all driving the coordinator through [`Sim`]. Compiled for the crate's own tests and behind the
//! `testing` feature, never into the tool.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::control::coordinator::{ConnId, Coordinator, Event, Output, Timeouts};
use crate::control::wire::{Endpoint, FlowEndpoint, Hello, ToCoordinator, ToWorker, Window, MAGIC, PROTOCOL_VERSION};
use crate::metrics::clock::Epoch;
use crate::metrics::{FlowSamples, RankReport};
use crate::plan::{Phase, Plan};
use crate::result::intervals::Series;
use crate::result::{PhaseResult, RunResult};
use crate::transport::{Counts, Side};
use crate::{hostfile, plan, scenario};

pub const TOKEN: &str = "secret";
pub const JOB: u64 = 7;

/// The plan of `scenario_text` on hosts h1..hN.
pub fn make_plan(ranks: usize, scenario_text: &str) -> Plan {
    make_run(ranks, scenario_text).plan
}

/// A run of `scenario_text` on hosts h1..hN about to start.
pub fn make_run(ranks: usize, scenario_text: &str) -> RunResult {
    let hosts: String = (1..=ranks).map(|i| format!("h{i}\n")).collect();
    let hosts = hostfile::parse(&hosts, Path::new("hosts")).unwrap();
    let (s, _) = scenario::parse(scenario_text, Path::new("s.toml")).unwrap();
    let plan = plan::build(&hosts, &s).unwrap();
    RunResult::new("s.toml".into(), s, hosts, plan)
}

pub fn window() -> Window {
    Window { warmup: Duration::from_secs(1), duration: Duration::from_secs(2), interval: Duration::from_secs(1) }
}

/// A coordinator that starts at `epoch` (`Epoch::now()` under the tokio
/// driver), with the heartbeats of a real job of this size. Its other
/// limits are generous: thousands of ranks on two loaded cores are slow,
/// not lost.
pub fn coordinator(plan: Plan, epoch: Epoch) -> Coordinator {
    let minute = Duration::from_secs(60);
    let usual = Timeouts::for_ranks(plan.ranks.len());
    let timeouts = Timeouts { silence: minute, join: minute, stage: minute, ..usual };
    Coordinator::new(JOB, TOKEN.into(), plan, window(), timeouts, epoch)
}

/// A message from a rank's connection to the coordinator.
#[derive(Debug)]
pub struct Said {
    pub conn: ConnId,
    pub msg: ToCoordinator,
}

/// The coordinator driven as `control::driver` drives it, with the ranks
/// around it played by the caller: the one loop that hands it messages and
/// takes its outputs away. Its clock is simulated: it moves only when told,
/// and it read 0 ns on the wire when the coordinator started.
pub struct Sim {
    pub c: Coordinator,
    pub now: Instant,
    start: Instant,
    /// Messages not yet handed to the coordinator, in order.
    queue: VecDeque<Said>,
}

impl Sim {
    /// A coordinator of `plan` under `timeouts`, with this module's job,
    /// token and window.
    pub fn new(plan: Plan, timeouts: Timeouts) -> Sim {
        let epoch = Sim::start();
        Sim::around(Coordinator::new(JOB, TOKEN.into(), plan, window(), timeouts, epoch), epoch)
    }

    /// A coordinator of `plan` with [`coordinator`]'s limits.
    pub fn generous(plan: Plan) -> Sim {
        let epoch = Sim::start();
        Sim::around(coordinator(plan, epoch), epoch)
    }

    /// A simulated clock's start: it reads 0 ns on the wire.
    pub fn start() -> Epoch {
        Epoch { at: Instant::now(), ns: 0 }
    }

    /// Simulated ranks around `c`, which started at `epoch`.
    pub fn around(c: Coordinator, epoch: Epoch) -> Sim {
        Sim { c, now: epoch.at, start: epoch.at, queue: VecDeque::new() }
    }

    /// How far the clock has moved since the coordinator started.
    pub fn elapsed(&self) -> Duration {
        self.now - self.start
    }

    /// A connection opens.
    pub fn connect(&mut self, conn: ConnId) {
        self.c.connected(conn, self.now);
    }

    /// Hands the coordinator `said`, in order, and each output to `each`;
    /// what `each` answers (a rank's reply) is handed on in turn, behind
    /// what came before it. Returns once nothing is left to hand on.
    pub fn run(&mut self, said: impl IntoIterator<Item = Said>, mut each: impl FnMut(Output) -> Option<Said>) {
        self.queue.extend(said);
        loop {
            while let Some(output) = self.c.poll() {
                self.queue.extend(each(output));
            }
            let Some(Said { conn, msg }) = self.queue.pop_front() else { return };
            self.c.handle(conn, msg, self.now);
        }
    }

    /// One message from `conn`, then [`Sim::run`].
    pub fn send(&mut self, conn: ConnId, msg: ToCoordinator, each: impl FnMut(Output) -> Option<Said>) {
        self.run([Said { conn, msg }], each);
    }

    /// Ranks 0 to `ranks - 1` connect (connection id = rank) and say
    /// Hello, then [`Sim::run`].
    pub fn join(&mut self, ranks: usize, each: impl FnMut(Output) -> Option<Said>) {
        for rank in 0..ranks {
            self.connect(rank as ConnId);
        }
        let hellos = (0..ranks).map(|rank| Said { conn: rank as ConnId, msg: ToCoordinator::Hello(hello(rank)) });
        self.run(hellos, each);
    }

    /// What the coordinator has to give out (after a call on `c` itself),
    /// as [`Sim::run`] does.
    pub fn pump(&mut self, each: impl FnMut(Output) -> Option<Said>) {
        self.run([], each);
    }

    /// The clock moves on by `by`, and the coordinator's timeouts run.
    pub fn advance(&mut self, by: Duration, each: impl FnMut(Output) -> Option<Said>) {
        self.now += by;
        self.c.handle_timeout(self.now);
        self.pump(each);
    }
}

/// Every rank answers as a worker does ([`answer`]).
pub fn reply(output: Output) -> Option<Said> {
    match output {
        Output::Send(conn, msg) => answer(&msg).map(|msg| Said { conn, msg }),
        _ => None,
    }
}

pub fn hello(rank: usize) -> Hello {
    Hello {
        magic: MAGIC,
        token: TOKEN.into(),
        version: PROTOCOL_VERSION,
        tool_version: env!("CARGO_PKG_VERSION").into(),
        job: JOB,
        rank,
        host: format!("h{}", rank + 1),
        pid: 1,
    }
}

/// A made-up TCP endpoint for a flow's receiving end.
pub fn endpoint(flow: u32) -> Endpoint {
    Endpoint::Tcp { addr: SocketAddr::from(([10, 0, (flow >> 16) as u8, (flow >> 8) as u8], flow as u16)) }
}

/// A worker's answer to a control message, if it has one: its endpoints
/// (a TCP receiver listens, a sender does not) or its readiness.
pub fn answer(msg: &ToWorker) -> Option<ToCoordinator> {
    match msg {
        ToWorker::Setup { phase, flows, .. } => {
            let endpoints = flows
                .iter()
                .filter(|f| f.side == Side::Receiver)
                .map(|f| FlowEndpoint { flow: f.flow.id, side: Side::Receiver, endpoint: endpoint(f.flow.id) })
                .collect();
            Some(ToCoordinator::Endpoints { phase: *phase, endpoints })
        }
        ToWorker::Peers { phase, .. } => Some(ToCoordinator::Ready { phase: *phase }),
        _ => None,
    }
}

/// What the coordinator sent each rank (connection id = rank) during a bootstrap.
pub struct Traffic {
    pub messages: Vec<u64>,
    pub bytes: Vec<u64>,
    /// Every rank was sent Start.
    pub started: bool,
}

/// Hello from every rank → endpoint tables delivered → barrier → Start,
/// all at one moment.
pub fn bootstrap(sim: &mut Sim, ranks: usize) -> Traffic {
    let mut traffic = Traffic { messages: vec![0; ranks], bytes: vec![0; ranks], started: false };
    let mut starts = 0;
    sim.join(ranks, |output| {
        if let Output::Send(conn, msg) = &output {
            let rank = *conn as usize;
            traffic.messages[rank] += 1;
            traffic.bytes[rank] += postcard::to_stdvec(msg).expect("encodes").len() as u64;
            starts += usize::from(matches!(msg, ToWorker::Start { .. }));
        }
        reply(output)
    });
    traffic.started = starts == ranks;
    traffic
}

/// A rank at the barrier: what it was sent (heartbeats aside), and its
/// connection, open until this is dropped — a rank that closed at once
/// would fail the phase of the ranks still on their way.
pub struct Started {
    pub messages: u64,
    pub bytes: u64,
    _reader: crate::control::framing::FrameReader<tokio::net::tcp::OwnedReadHalf, ToWorker>,
    writer: tokio::task::JoinHandle<()>,
}

impl Drop for Started {
    fn drop(&mut self) {
        self.writer.abort();
    }
}

/// Why a simulated rank over TCP did not reach the barrier.
#[derive(Debug, thiserror::Error)]
pub enum RankError {
    #[error("rank {rank}: connect: {source}")]
    Connect { rank: usize, source: std::io::Error },
    #[error("rank {rank}: {source}")]
    Frame { rank: usize, source: crate::control::framing::FrameError },
    #[error("rank {rank}: the coordinator closed the connection")]
    Closed { rank: usize },
}

/// One rank over real TCP and real framing: connects to the coordinator at
/// `addr`, says Hello, heartbeats as Welcome asks (as a worker does: not in
/// a round that carried another message), answers until Start.
pub async fn tcp_rank(addr: SocketAddr, rank: usize) -> Result<Started, RankError> {
    use crate::control::framing::{pump, FrameReader, FrameWriter};
    let stream = connect_from_own_address(addr, rank).await.map_err(|source| RankError::Connect { rank, source })?;
    let _ = stream.set_nodelay(true);
    let (read, write) = stream.into_split();
    let mut reader: FrameReader<_, ToWorker> = FrameReader::new(read);
    let (out, queue) = tokio::sync::mpsc::unbounded_channel();
    let writer = tokio::spawn(pump(FrameWriter::new(write), queue));
    let _ = out.send(ToCoordinator::Hello(hello(rank)));
    // None until Welcome says how often.
    let mut heartbeat: Option<tokio::time::Interval> = None;
    let mut busy = false;
    let (mut messages, mut bytes) = (0, 0);
    let outcome = loop {
        let msg = tokio::select! {
            msg = reader.next() => msg,
            _ = async { heartbeat.as_mut().expect("guarded").tick().await }, if heartbeat.is_some() => {
                if !std::mem::take(&mut busy) {
                    let _ = out.send(ToCoordinator::Heartbeat);
                }
                continue;
            }
        };
        let msg = match msg {
            Some(Ok(msg)) => msg,
            Some(Err(source)) => break Err(RankError::Frame { rank, source }),
            None => break Err(RankError::Closed { rank }),
        };
        if msg == ToWorker::Heartbeat {
            continue;
        }
        if let ToWorker::Welcome { heartbeat: every, .. } = msg {
            heartbeat = Some(tokio::time::interval_at(tokio::time::Instant::now() + every, every));
        }
        messages += 1;
        bytes += postcard::to_stdvec(&msg).expect("encodes").len() as u64;
        if matches!(msg, ToWorker::Start { .. }) {
            break Ok((messages, bytes));
        }
        if let Some(reply) = answer(&msg) {
            busy = true;
            let _ = out.send(reply);
        }
    };
    match outcome {
        Ok((messages, bytes)) => Ok(Started { messages, bytes, _reader: reader, writer }),
        Err(e) => {
            writer.abort();
            Err(e)
        }
    }
}

/// Connects from an address of the rank's own (127.1.0.0 + rank), as each
/// rank of a real job connects from its own host: from one address, the
/// kernel's search for a free port is linear in the ports taken, and at
/// 16 384 ranks it was 42 % of the machine's time.
async fn connect_from_own_address(addr: SocketAddr, rank: usize) -> std::io::Result<tokio::net::TcpStream> {
    let [_, b, c, d] = u32::try_from(rank).unwrap_or(u32::MAX).to_be_bytes();
    let socket = tokio::net::TcpSocket::new_v4()?;
    if addr.ip().is_loopback() {
        socket.bind(SocketAddr::from(([127, b.saturating_add(1), c, d], 0)))?;
    }
    socket.connect(addr).await
}

/// A flow end's report part: it started at 0 and nothing went wrong.
pub fn samples(flow: u32, side: Side) -> FlowSamples {
    FlowSamples {
        flow,
        side,
        start_ns: Some(0),
        error: None,
        rtts: None,
        refused: 0,
        lanes: Vec::new(),
        engines: Vec::new(),
        gpu_memory: Vec::new(),
        validation: None,
        tcp: None,
    }
}

/// What every rank of `phase` sends through and after the window: its
/// intervals (`boundaries` sample times 1 s apart, 1 GB/s on every flow),
/// then its report with each flow end it plays. One pass over the flows,
/// so that 65 536 ranks are quick to make.
pub fn rank_messages(phase: &Phase, ranks: usize, boundaries: u32) -> Vec<Vec<ToCoordinator>> {
    let mut reports: Vec<RankReport> =
        (0..ranks).map(|rank| RankReport { phase: phase.index, rank, boundaries, ..Default::default() }).collect();
    for f in &phase.flows {
        reports[f.src].flows.push(samples(f.id, Side::Sender));
        reports[f.dst].flows.push(samples(f.id, Side::Receiver));
    }
    reports
        .into_iter()
        .map(|report| {
            let ends = vec![Counts { bytes: 1_000_000_000, messages: 7_630 }; report.flows.len()];
            let interval = |interval| ToCoordinator::Interval {
                phase: phase.index,
                interval,
                span_ns: 1_000_000_000,
                ends: ends.clone(),
            };
            let mut said: Vec<ToCoordinator> = (1..boundaries).map(interval).collect();
            said.push(ToCoordinator::Report(Box::new(report)));
            said
        })
        .collect()
}

/// What the coordinator did with one phase's reports.
pub struct Gathered {
    /// The aggregated phase, if the coordinator finished it.
    pub phase: Option<PhaseResult>,
    /// The longest the coordinator spent on one message and its outputs:
    /// while it works its loop sends no heartbeats, so this is how long
    /// they can stall.
    pub longest_step: Duration,
}

/// Every rank of a started phase 0 sends its intervals and its report
/// (`boundaries` sample times); the coordinator gathers and aggregates
/// them, and its intervals go back into the phase as the launcher puts them.
pub fn report_phase(sim: &mut Sim, plan: &Plan, boundaries: u32) -> Gathered {
    let said = rank_messages(&plan.phases[0], plan.ranks.len(), boundaries);
    let (mut phase, mut longest_step) = (None, Duration::ZERO);
    let mut series = Series::default();
    for (rank, messages) in said.into_iter().enumerate() {
        for message in messages {
            let started = Instant::now();
            sim.send(rank as ConnId, message, |output| {
                match output {
                    Output::Event(Event::Progress { phase, gbps, flows, .. }) => series.push(phase, gbps, &flows),
                    Output::Event(Event::PhaseDone(mut result)) => {
                        series.fill(&mut result);
                        phase = Some(*result);
                    }
                    _ => {}
                }
                None
            });
            longest_step = longest_step.max(started.elapsed());
        }
    }
    Gathered { phase, longest_step }
}
