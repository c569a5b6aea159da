//! The rank-0 coordinator as a state machine without I/O: frames and clock
//! readings go in, frames to send and events for the launcher come out.
//! The tokio layer in `driver` only moves bytes; everything that decides
//! lives here, so it is tested with simulated ranks and no sockets.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::control::gather::Gather;
use crate::control::wire::{FlowEndpoint, FlowRole, Hello, ToCoordinator, ToWorker, Window, MAGIC, PROTOCOL_VERSION};
use crate::metrics::RankReport;
use crate::plan::{GroupPlan, Plan};
use crate::result::aggregate_phase;
use crate::result::{PhaseResult, RankProbe};
use crate::transport::Side;
use crate::units::gbps;

/// A control connection, numbered by the driver.
pub type ConnId = u64;

/// Time limits of the control plane.
#[derive(Clone, Copy, Debug)]
pub struct Timeouts {
    /// How often the coordinator sends heartbeats.
    pub heartbeat: Duration,
    /// A rank not heard from for this long is declared lost.
    pub silence: Duration,
    /// All ranks must have said Hello within this.
    pub join: Duration,
    /// Endpoints, connect and the final report must each arrive within this.
    pub stage: Duration,
    /// t0 is this far after the barrier, so Start reaches every rank first.
    pub start_delay: Duration,
    /// After an abort, how long to wait for the partial reports.
    pub abort_grace: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            heartbeat: Duration::from_millis(500),
            silence: Duration::from_secs(3),
            join: Duration::from_secs(30),
            stage: Duration::from_secs(30),
            start_delay: Duration::from_millis(200),
            abort_grace: Duration::from_secs(2),
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum Output {
    Send(ConnId, ToWorker),
    /// Drop the connection (after sending what was queued to it).
    Close(ConnId),
    Event(Event),
}

/// What the launcher is told, as it happens.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Event {
    /// A connection was refused; the run goes on.
    Rejected {
        conn: ConnId,
        reason: String,
    },
    Joined {
        rank: usize,
        host: String,
        joined: usize,
        total: usize,
    },
    PhaseStarted {
        phase: usize,
        name: String,
        window: Window,
    },
    /// Live aggregate of one interval, from every rank's count.
    Progress {
        phase: usize,
        interval: u32,
        gbps: f64,
    },
    /// A rank's RDMA inventory arrived (once per rank, soon after it joined).
    Probed(RankProbe),
    PhaseDone(Box<PhaseResult>),
    Finished,
    Failed(Failure),
}

/// Why a run ended early, naming the rank and host where one is to blame.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failure {
    pub rank: Option<usize>,
    pub host: Option<String>,
    pub message: String,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.rank, &self.host) {
            (Some(rank), Some(host)) => write!(f, "rank {rank} ({host}): {}", self.message),
            (Some(rank), None) => write!(f, "rank {rank}: {}", self.message),
            _ => f.write_str(&self.message),
        }
    }
}

struct Slot {
    host: String,
    conn: Option<ConnId>,
    joined: bool,
    last_heard: i64,
    /// Sent something since the last heartbeat round (so it needs none).
    busy: bool,
}

/// Per-rank progress through one step of a phase.
enum Stage {
    Joining,
    Setup { phase: usize, endpoints: Gather<Vec<FlowEndpoint>> },
    Connecting { phase: usize, ready: Gather<()> },
    Running { phase: usize, t0_ns: i64, reports: Gather<RankReport>, progress: BTreeMap<u32, Tally> },
    Aborting { phase: usize, reports: Gather<RankReport>, failure: Failure, deadline_ns: i64 },
    Done,
}

#[derive(Default)]
struct Tally {
    ranks: usize,
    tx: u64,
    rx: u64,
}

pub struct Coordinator {
    job: u64,
    token: String,
    tool_version: String,
    plan: Plan,
    window: Window,
    timeouts: Timeouts,
    slots: Vec<Slot>,
    joined: usize,
    /// The rank on each joined connection.
    ranks: HashMap<ConnId, usize>,
    /// Connections that have not said Hello yet.
    pending: HashMap<ConnId, i64>,
    stage: Stage,
    /// When the current stage began (coordinator clock, ns).
    stage_since: i64,
    last_heartbeat: i64,
    /// The previous tick, to see when the coordinator itself was not running.
    last_tick: i64,
    out: VecDeque<Output>,
}

fn ns(d: Duration) -> i64 {
    i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)
}

impl Coordinator {
    pub fn new(job: u64, token: String, plan: Plan, window: Window, timeouts: Timeouts, now_ns: i64) -> Coordinator {
        let slots = plan
            .ranks
            .iter()
            .map(|r| Slot { host: r.host.clone(), conn: None, joined: false, last_heard: now_ns, busy: false })
            .collect();
        Coordinator {
            job,
            token,
            tool_version: env!("CARGO_PKG_VERSION").to_string(),
            plan,
            window,
            timeouts,
            slots,
            joined: 0,
            ranks: HashMap::new(),
            pending: HashMap::new(),
            stage: Stage::Joining,
            stage_since: now_ns,
            last_heartbeat: now_ns,
            last_tick: now_ns,
            out: VecDeque::new(),
        }
    }

    /// The next thing to do, in order.
    pub fn poll(&mut self) -> Option<Output> {
        self.out.pop_front()
    }

    pub fn is_done(&self) -> bool {
        matches!(self.stage, Stage::Done)
    }

    pub fn connected(&mut self, conn: ConnId, now_ns: i64) {
        self.pending.insert(conn, now_ns);
    }

    pub fn closed(&mut self, conn: ConnId, now_ns: i64) {
        if self.pending.remove(&conn).is_some() {
            return;
        }
        let Some(rank) = self.ranks.remove(&conn) else { return };
        self.slots[rank].conn = None;
        if !self.is_done() {
            let stage = self.stage_name();
            let flows = self.flows_of(rank);
            self.fail(Some(rank), format!("connection lost {stage}{flows}"), now_ns);
            self.check_abort_complete();
        }
    }

    pub fn received(&mut self, conn: ConnId, msg: ToCoordinator, now_ns: i64) {
        if self.pending.contains_key(&conn) {
            match msg {
                ToCoordinator::Hello(hello) => self.hello(conn, hello, now_ns),
                _ => self.reject(conn, "first frame was not a Hello".to_string()),
            }
            return;
        }
        let Some(&rank) = self.ranks.get(&conn) else { return };
        self.slots[rank].last_heard = now_ns;
        match msg {
            ToCoordinator::Hello(_) => self.reject(conn, format!("rank {rank} sent a second Hello")),
            ToCoordinator::Heartbeat => {}
            ToCoordinator::Probe(inventory) => {
                let host = self.slots[rank].host.clone();
                self.event(Event::Probed(RankProbe { rank, host, devices: inventory.devices, error: inventory.error }));
            }
            ToCoordinator::Endpoints { phase, endpoints } => self.endpoints(rank, phase, endpoints, now_ns),
            ToCoordinator::Ready { phase } => self.ready(rank, phase, now_ns),
            ToCoordinator::Progress { phase, interval, tx_bytes, rx_bytes } => {
                self.progress(phase, interval, tx_bytes, rx_bytes)
            }
            ToCoordinator::Report(report) => self.report(rank, *report, now_ns),
            ToCoordinator::Failed { phase, error } => {
                self.fail(Some(rank), format!("failed in phase {phase}: {error}"), now_ns);
                self.check_abort_complete();
            }
        }
    }

    /// A frame that could not be decoded: a stranger is turned away, a
    /// rank that garbles its stream ends the run.
    pub fn protocol_error(&mut self, conn: ConnId, reason: &str, now_ns: i64) {
        if self.pending.contains_key(&conn) {
            self.reject(conn, format!("undecodable first frame: {reason}"));
        } else if let Some(rank) = self.ranks.remove(&conn) {
            self.out.push_back(Output::Close(conn));
            self.slots[rank].conn = None;
            // A reset connection (a killed worker) lands here too: name its flows.
            let flows = self.flows_of(rank);
            self.fail(Some(rank), format!("protocol error: {reason}{flows}"), now_ns);
            self.check_abort_complete();
        }
    }

    /// Heartbeats and deadlines; call it at least every heartbeat interval.
    pub fn tick(&mut self, now_ns: i64) {
        if self.is_done() {
            return;
        }
        // Ticks come at least every heartbeat interval; a longer gap means
        // this process was not running (a loaded host, an emulated CPU) and
        // heard no one: that time does not count as the ranks' silence.
        let stalled = now_ns - self.last_tick - ns(self.timeouts.heartbeat);
        self.last_tick = now_ns;
        if stalled > 0 {
            for slot in &mut self.slots {
                slot.last_heard += stalled;
            }
        }
        if now_ns - self.last_heartbeat >= ns(self.timeouts.heartbeat) {
            self.last_heartbeat = now_ns;
            self.heartbeat();
        }
        // Already failing: only the grace for the partial reports counts. (A
        // rank that stays connected but silent, e.g. frozen, must not keep
        // re-failing the run here and hold the abort open forever.)
        if let Stage::Aborting { deadline_ns, .. } = &self.stage {
            if now_ns >= *deadline_ns {
                self.finish_abort();
            }
            return;
        }
        let silent = self
            .slots
            .iter()
            .position(|s| s.conn.is_some() && s.joined && now_ns - s.last_heard > ns(self.timeouts.silence));
        if let Some(rank) = silent {
            let secs = (now_ns - self.slots[rank].last_heard) as f64 / 1e9;
            let stage = self.stage_name();
            let flows = self.flows_of(rank);
            self.fail(Some(rank), format!("silent for {secs:.1} s {stage} (heartbeat timeout){flows}"), now_ns);
            return;
        }
        let elapsed = now_ns - self.stage_since;
        let limit = match &self.stage {
            Stage::Joining => ns(self.timeouts.join),
            Stage::Setup { .. } | Stage::Connecting { .. } => ns(self.timeouts.stage),
            Stage::Running { t0_ns, .. } => {
                t0_ns - self.stage_since + ns(self.window.warmup + self.window.duration) + ns(self.timeouts.stage)
            }
            Stage::Aborting { .. } | Stage::Done => return,
        };
        if elapsed <= limit {
            return;
        }
        let missing = match &self.stage {
            Stage::Joining => (0..self.slots.len()).filter(|&r| !self.slots[r].joined).collect(),
            Stage::Setup { endpoints, .. } => endpoints.missing(),
            Stage::Connecting { ready, .. } => ready.missing(),
            Stage::Running { reports, .. } => reports.missing(),
            Stage::Aborting { .. } | Stage::Done => Vec::new(),
        };
        if !missing.is_empty() {
            let stage = self.stage_name();
            let message = format!("no answer {stage} within {:.0} s", limit as f64 / 1e9);
            let first = missing[0];
            let others =
                if missing.len() > 1 { format!(" (also ranks {})", list(&missing[1..])) } else { String::new() };
            self.fail(Some(first), format!("{message}{others}"), now_ns);
        }
    }

    fn hello(&mut self, conn: ConnId, hello: Hello, now_ns: i64) {
        let verdict = if hello.magic != MAGIC {
            Err("not a fabricbench worker (bad magic)".to_string())
        } else if hello.token != self.token {
            Err(format!("wrong job token from `{}` claiming rank {}", hello.host, hello.rank))
        } else if hello.job != self.job {
            Err(format!("rank {} on {} belongs to job {:x}, not {:x}", hello.rank, hello.host, hello.job, self.job))
        } else if hello.rank >= self.slots.len() {
            Err(format!("rank {} does not exist in a job of {} ranks", hello.rank, self.slots.len()))
        } else if self.slots[hello.rank].joined {
            Err(format!("rank {} joined twice (second Hello from {})", hello.rank, hello.host))
        } else if !matches!(self.stage, Stage::Joining) {
            Err(format!("rank {} said Hello after the run began", hello.rank))
        } else {
            Ok(())
        };
        if let Err(reason) = verdict {
            self.reject(conn, reason);
            return;
        }
        // A rank of this very job (it has the token) built from another
        // version cannot take part: end the run and say which versions met.
        if hello.version != PROTOCOL_VERSION || hello.tool_version != self.tool_version {
            self.reject(conn, "version mismatch".to_string());
            let message = format!(
                "runs fabricbench {} (protocol {}) but rank 0 runs fabricbench {} (protocol {}); install one version everywhere",
                hello.tool_version, hello.version, self.tool_version, PROTOCOL_VERSION
            );
            let failure = Failure { rank: Some(hello.rank), host: Some(hello.host), message };
            self.broadcast(|| ToWorker::Abort { reason: failure.to_string() });
            self.broadcast(|| ToWorker::Bye);
            self.event(Event::Failed(failure));
            self.stage = Stage::Done;
            return;
        }
        self.pending.remove(&conn);
        self.ranks.insert(conn, hello.rank);
        let slot = &mut self.slots[hello.rank];
        slot.conn = Some(conn);
        slot.joined = true;
        slot.last_heard = now_ns;
        self.joined += 1;
        self.send(hello.rank, ToWorker::Welcome { now_ns });
        let joined = self.joined;
        self.event(Event::Joined { rank: hello.rank, host: hello.host, joined, total: self.slots.len() });
        if joined == self.slots.len() {
            self.begin_phase(0, now_ns);
        }
    }

    fn begin_phase(&mut self, phase: usize, now_ns: i64) {
        let n = self.slots.len();
        let p = &self.plan.phases[phase];
        let groups: Vec<Arc<GroupPlan>> = p.groups.iter().cloned().map(Arc::new).collect();
        let mut setups: Vec<Vec<FlowRole>> = vec![Vec::new(); n];
        for flow in &p.flows {
            let group = &groups[flow.group];
            let [src_rails, dst_rails] = self.plan.host_rails(group, flow);
            let role = |side, rails| FlowRole { flow: *flow, side, group: group.clone(), rails };
            setups[flow.src].push(role(Side::Sender, src_rails));
            setups[flow.dst].push(role(Side::Receiver, dst_rails));
        }
        for (rank, flows) in setups.into_iter().enumerate() {
            let stress = self.plan.phases[phase].stress.iter().find(|s| s.rank == rank).map(|s| s.spec.clone());
            self.send(rank, ToWorker::Setup { phase, flows, stress });
        }
        self.set_stage(Stage::Setup { phase, endpoints: Gather::new(n) }, now_ns);
    }

    fn endpoints(&mut self, rank: usize, phase: usize, list: Vec<FlowEndpoint>, now_ns: i64) {
        let Stage::Setup { phase: current, endpoints } = &mut self.stage else { return };
        if *current != phase {
            return;
        }
        if !endpoints.put(rank, list) {
            return;
        }
        // Index every end by flow (ids are 0..flows) and side, then hand
        // each rank the far ends of its own flows.
        let p = &self.plan.phases[phase];
        let mut ends: Vec<[Option<&FlowEndpoint>; 2]> = vec![[None, None]; p.flows.len()];
        for e in endpoints.answers().iter().flatten().flatten() {
            if let Some(end) = ends.get_mut(e.flow as usize) {
                let side = match e.side {
                    Side::Sender => 0,
                    Side::Receiver => 1,
                };
                end[side] = Some(e);
            }
        }
        let mut peers: Vec<Vec<FlowEndpoint>> = vec![Vec::new(); self.slots.len()];
        for (flow, [sender, receiver]) in p.flows.iter().zip(ends) {
            if let Some(e) = receiver {
                peers[flow.src].push(e.clone());
            }
            if let Some(e) = sender {
                peers[flow.dst].push(e.clone());
            }
        }
        for (rank, list) in peers.into_iter().enumerate() {
            self.send(rank, ToWorker::Peers { phase, peers: list });
        }
        let n = self.slots.len();
        self.set_stage(Stage::Connecting { phase, ready: Gather::new(n) }, now_ns);
    }

    fn ready(&mut self, rank: usize, phase: usize, now_ns: i64) {
        let Stage::Connecting { phase: current, ready } = &mut self.stage else { return };
        if *current != phase {
            return;
        }
        if ready.put(rank, ()) {
            let t0_ns = now_ns + ns(self.timeouts.start_delay);
            let window = self.window;
            self.broadcast(|| ToWorker::Start { phase, t0_ns, window });
            let name = self.plan.phases[phase].name.clone();
            self.event(Event::PhaseStarted { phase, name, window });
            let n = self.slots.len();
            let stage = Stage::Running { phase, t0_ns, reports: Gather::new(n), progress: BTreeMap::new() };
            self.set_stage(stage, now_ns);
        }
    }

    fn progress(&mut self, phase: usize, interval: u32, tx: u64, rx: u64) {
        let n = self.slots.len();
        let Stage::Running { phase: current, progress, .. } = &mut self.stage else { return };
        if *current != phase {
            return;
        }
        let tally = progress.entry(interval).or_default();
        tally.ranks += 1;
        tally.tx += tx;
        tally.rx += rx;
        if tally.ranks == n {
            // Receivers count what arrived; transports whose receivers are passive count at the sender.
            let bytes = if tally.rx > 0 { tally.rx } else { tally.tx };
            let rate = gbps(bytes, self.window.interval.as_secs_f64());
            progress.remove(&interval);
            self.event(Event::Progress { phase, interval, gbps: rate });
        }
    }

    fn report(&mut self, rank: usize, report: RankReport, now_ns: i64) {
        match &mut self.stage {
            Stage::Running { phase, reports, .. } if *phase == report.phase => {
                let phase = *phase;
                if !reports.put(rank, report) {
                    return;
                }
                let reports = std::mem::replace(reports, Gather::new(0)).into_answers();
                let result = aggregate_phase(&self.plan.phases[phase], &self.plan.ranks, &reports, true);
                self.event(Event::PhaseDone(Box::new(result)));
                if phase + 1 < self.plan.phases.len() {
                    self.begin_phase(phase + 1, now_ns);
                } else {
                    self.broadcast(|| ToWorker::Bye);
                    self.event(Event::Finished);
                    self.set_stage(Stage::Done, now_ns);
                }
            }
            Stage::Aborting { phase, reports, .. } if *phase == report.phase => {
                reports.put(rank, report);
                self.check_abort_complete();
            }
            _ => {}
        }
    }

    /// Ends the run: a phase that was running collects partial reports first.
    fn fail(&mut self, rank: Option<usize>, message: String, now_ns: i64) {
        let failure = Failure { rank, host: rank.map(|r| self.slots[r].host.clone()), message };
        match std::mem::replace(&mut self.stage, Stage::Done) {
            Stage::Running { phase, reports, .. } => {
                let reason = failure.to_string();
                self.broadcast(|| ToWorker::Abort { reason: reason.clone() });
                let deadline_ns = now_ns + ns(self.timeouts.abort_grace);
                self.set_stage(Stage::Aborting { phase, reports, failure, deadline_ns }, now_ns);
            }
            aborting @ Stage::Aborting { .. } => self.stage = aborting,
            Stage::Done => {}
            _ => {
                let reason = failure.to_string();
                self.broadcast(|| ToWorker::Abort { reason: reason.clone() });
                self.broadcast(|| ToWorker::Bye);
                self.event(Event::Failed(failure));
            }
        }
    }

    fn check_abort_complete(&mut self) {
        let Stage::Aborting { reports, .. } = &self.stage else { return };
        let waiting = self.slots.iter().enumerate().any(|(r, s)| s.conn.is_some() && !reports.has(r));
        if !waiting {
            self.finish_abort();
        }
    }

    fn finish_abort(&mut self) {
        let Stage::Aborting { phase, reports, failure, .. } = std::mem::replace(&mut self.stage, Stage::Done) else {
            return;
        };
        if reports.any() {
            let result = aggregate_phase(&self.plan.phases[phase], &self.plan.ranks, reports.answers(), false);
            self.event(Event::PhaseDone(Box::new(result)));
        }
        self.broadcast(|| ToWorker::Bye);
        self.event(Event::Failed(failure));
    }

    fn reject(&mut self, conn: ConnId, reason: String) {
        self.pending.remove(&conn);
        self.event(Event::Rejected { conn, reason });
        self.out.push_back(Output::Close(conn));
    }

    fn set_stage(&mut self, stage: Stage, now_ns: i64) {
        self.stage = stage;
        self.stage_since = now_ns;
    }

    fn stage_name(&self) -> String {
        match &self.stage {
            Stage::Joining => "while joining".to_string(),
            Stage::Setup { phase, .. } => format!("while creating endpoints of phase {phase}"),
            Stage::Connecting { phase, .. } => format!("while connecting flows of phase {phase}"),
            Stage::Running { phase, .. } | Stage::Aborting { phase, .. } => format!("during phase {phase}"),
            Stage::Done => "after the run".to_string(),
        }
    }

    /// The rank's flows in the current phase, for naming what a lost rank
    /// broke: "; its flows: 0 (1->0), 4 (1->2)" (the first few).
    fn flows_of(&self, rank: usize) -> String {
        const SHOWN: usize = 4;
        let phase = match &self.stage {
            Stage::Setup { phase, .. }
            | Stage::Connecting { phase, .. }
            | Stage::Running { phase, .. }
            | Stage::Aborting { phase, .. } => *phase,
            Stage::Joining | Stage::Done => return String::new(),
        };
        let mine: Vec<String> = self.plan.phases[phase]
            .flows
            .iter()
            .filter(|f| f.src == rank || f.dst == rank)
            .map(|f| format!("{} ({}->{})", f.id, f.src, f.dst))
            .collect();
        match mine.len() {
            0 => String::new(),
            n if n > SHOWN => format!("; its flows: {} and {} more", mine[..SHOWN].join(", "), n - SHOWN),
            _ => format!("; its flows: {}", mine.join(", ")),
        }
    }

    fn send(&mut self, rank: usize, msg: ToWorker) {
        let slot = &mut self.slots[rank];
        if let Some(conn) = slot.conn {
            slot.busy = true;
            self.out.push_back(Output::Send(conn, msg));
        }
    }

    /// A heartbeat to each rank that was sent nothing since the last round:
    /// any message keeps a worker's lease, and while thousands of ranks
    /// bootstrap the tables themselves are traffic enough.
    fn heartbeat(&mut self) {
        for slot in &mut self.slots {
            if let Some(conn) = slot.conn {
                if !std::mem::take(&mut slot.busy) {
                    self.out.push_back(Output::Send(conn, ToWorker::Heartbeat));
                }
            }
        }
    }

    fn broadcast(&mut self, msg: impl Fn() -> ToWorker) {
        for rank in 0..self.slots.len() {
            self.send(rank, msg());
        }
    }

    fn event(&mut self, event: Event) {
        self.out.push_back(Output::Event(event));
    }
}

fn list(ranks: &[usize]) -> String {
    ranks.iter().map(usize::to_string).collect::<Vec<_>>().join(", ")
}
