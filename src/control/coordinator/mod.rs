//! The rank-0 coordinator as a state machine without I/O: frames and clock
//! readings go in, frames to send and events for the launcher come out.
//! It speaks as the worker's session does: `handle` a message, `poll` for
//! what to do, `poll_timeout` for when to call `handle_timeout`, all on the
//! monotonic clock. The tokio layer in `driver` only moves bytes;
//! everything that decides lives here, so it is tested with simulated
//! ranks and no sockets.

mod checks;
mod events;
mod failing;
mod phases;
mod timeouts;
mod wiring;

pub use events::{Event, Output, RunFailure};
pub use timeouts::Timeouts;

use timeouts::past;
use wiring::Wiring;

use std::collections::{HashMap, VecDeque};
use std::time::Instant;

use crate::control::gather::Gather;
use crate::control::proofs::FlowProofs;
use crate::control::wire::{FlowRole, ToCoordinator, ToWorker, Window};
use crate::metrics::clock::Epoch;
use crate::metrics::{FlowSamples, RankReport};
use crate::plan::{GpuAsk, Plan};
use crate::result::intervals::PhaseIntervals;
use crate::result::RankProbe;

/// A control connection, numbered by the driver.
pub type ConnId = u64;

struct Slot {
    host: String,
    conn: Option<ConnId>,
    joined: bool,
    last_heard: Instant,
    /// Sent something since the last heartbeat round (so it needs none).
    busy: bool,
    /// Flows of this phase's report that came ahead of it in parts.
    parts: Vec<FlowSamples>,
    /// The GPUs its ends use in any phase: its Welcome carries them.
    gpus: Vec<GpuAsk>,
    /// Its probe came (a plan of no phases ends once every rank's has).
    probed: bool,
}

/// Connections that have not said Hello yet, beyond the job's own ranks:
/// more wait until these are admitted or closed.
pub const PENDING_STRANGERS: usize = 1024;
/// Nor may they hold more than this share (1 / N) of rank 0's open-files
/// limit: a flood leaves the rest to the ranks' connections, the data plane's
/// sockets and the files rank 0 reads, so it cannot starve the run of them.
pub const STRANGERS_FD_SHARE: u64 = 4;

/// Per-rank progress through one step of a phase.
enum Stage {
    /// Ranks say Hello; each is sent phase 0's Setup with its Welcome, so
    /// its endpoints are made while the others join (one write, not two).
    Joining {
        setups: Vec<Vec<FlowRole>>,
        wiring: Wiring,
    },
    /// Ranks publish their flow ends; each is sent its peers once they are
    /// all known, so some connect while others still publish.
    Setup {
        phase: usize,
        wiring: Wiring,
    },
    /// Every end is published; the last ranks connect.
    Connecting {
        phase: usize,
        wiring: Wiring,
    },
    Running {
        phase: usize,
        t0: Instant,
        reports: Gather<RankReport>,
        intervals: Box<PhaseIntervals>,
    },
    /// A plan of no phases (the launch that gathers the hosts' LLDP
    /// neighbours before the run is planned): every rank joined, and the
    /// run ends once every rank's probe is in.
    Probing,
    /// The phase is done; the next starts once the launcher says this one
    /// is on disk.
    Saving {
        phase: usize,
    },
    Aborting {
        phase: usize,
        reports: Gather<RankReport>,
        intervals: Box<PhaseIntervals>,
        failure: RunFailure,
        deadline: Instant,
    },
    Done,
}

pub struct Coordinator {
    job: u64,
    token: String,
    proofs: FlowProofs,
    tool_version: String,
    plan: Plan,
    window: Window,
    timeouts: Timeouts,
    /// Ask every rank for its LLDP neighbours (`run --topology lldp`).
    lldp: bool,
    slots: Vec<Slot>,
    joined: usize,
    /// The rank on each joined connection.
    ranks: HashMap<ConnId, usize>,
    /// Connections that have not said Hello yet.
    pending: HashMap<ConnId, Instant>,
    /// The most latency histograms each rank's report may carry, over all
    /// phases: what a frame from it may decode (`histogram_budget`).
    histograms: Vec<usize>,
    stage: Stage,
    /// When the current stage began.
    stage_since: Instant,
    last_heartbeat: Instant,
    /// The previous `handle_timeout`, to see when the coordinator itself
    /// was not running.
    last_timeout: Instant,
    /// The earliest Hello or silence limit as of the last check, lowered as
    /// connections open and ranks join: when to look again.
    watch: Option<Instant>,
    /// The monotonic clock's reading at the wall clock's: the wire carries
    /// wall-clock ns (Welcome's reading, Start's t0).
    epoch: Epoch,
    out: VecDeque<Output>,
}

impl Coordinator {
    /// A coordinator that starts at `epoch`.
    pub fn new(job: u64, token: String, plan: Plan, window: Window, timeouts: Timeouts, epoch: Epoch) -> Coordinator {
        let now = epoch.at;
        let slots = plan
            .ranks
            .iter()
            .zip(plan.gpu_asks())
            .map(|(r, gpus)| Slot {
                host: r.host.clone(),
                conn: None,
                joined: false,
                last_heard: now,
                busy: false,
                parts: Vec::new(),
                gpus,
                probed: false,
            })
            .collect();
        let mut histograms = vec![0; plan.ranks.len()];
        for phase in &plan.phases {
            for (most, allowed) in histograms.iter_mut().zip(checks::histograms_by_rank(phase, plan.ranks.len())) {
                *most = allowed.max(*most);
            }
        }
        let mut coordinator = Coordinator {
            job,
            proofs: FlowProofs::new(&token, job),
            token,
            tool_version: env!("CARGO_PKG_VERSION").to_string(),
            plan,
            window,
            timeouts,
            lldp: false,
            slots,
            joined: 0,
            ranks: HashMap::new(),
            pending: HashMap::new(),
            histograms,
            stage: Stage::Done,
            stage_since: now,
            last_heartbeat: now,
            last_timeout: now,
            watch: None,
            epoch,
            out: VecDeque::new(),
        };
        let n = coordinator.slots.len();
        let wiring = Wiring::new(coordinator.plan.phases.first(), n);
        coordinator.stage = Stage::Joining { setups: coordinator.setups(0), wiring };
        coordinator
    }

    /// Every rank's probe is to carry its `lldpctl -f json` text, which
    /// the launcher builds the run's topology from.
    pub fn gathering_lldp(mut self) -> Coordinator {
        self.lldp = true;
        self
    }

    /// The next thing to do, in order.
    pub fn poll(&mut self) -> Option<Output> {
        self.out.pop_front()
    }

    /// How many latency histograms one frame from `conn` may decode: as
    /// many as its rank's report of any phase may carry (0 for a connection
    /// that is no rank). Each is 108 KiB decoded, however small on the wire:
    /// the frame reader enforces this inside the decode
    /// (`histogram::decode_within`), before any is allocated.
    pub fn histogram_budget(&self, conn: ConnId) -> usize {
        self.ranks.get(&conn).and_then(|&rank| self.histograms.get(rank)).copied().unwrap_or(0)
    }

    pub fn is_done(&self) -> bool {
        matches!(self.stage, Stage::Done)
    }

    pub fn connected(&mut self, conn: ConnId, now: Instant) {
        self.pending.insert(conn, now);
        self.watch_until(past(now + self.timeouts.hello));
    }

    /// Whether to take another connection: the job's own ranks always fit
    /// beside a bounded number of strangers that have not said Hello yet, at
    /// most [`PENDING_STRANGERS`] and a [`STRANGERS_FD_SHARE`] share of
    /// `open_files` (the process's RLIMIT_NOFILE now).
    pub fn accepts_more(&self, open_files: u64) -> bool {
        let by_fds = usize::try_from(open_files / STRANGERS_FD_SHARE).unwrap_or(usize::MAX);
        self.pending.len() < PENDING_STRANGERS.min(by_fds) + self.slots.len() - self.joined
    }

    pub fn closed(&mut self, conn: ConnId, now: Instant) {
        if self.pending.remove(&conn).is_some() {
            return;
        }
        let Some(rank) = self.ranks.remove(&conn) else { return };
        self.slots[rank].conn = None;
        // Already failing: a mass of lost ranks (the whole job killed) costs
        // no message each, which would be O(flows) apiece.
        if matches!(self.stage, Stage::Aborting { .. }) {
            self.check_abort_complete();
        } else if !self.is_done() {
            let stage = self.stage_name();
            let flows = self.flows_of(rank);
            self.fail(Some(rank), format!("connection lost {stage}{flows}"), now);
            self.check_abort_complete();
        }
    }

    /// One message from `conn`, arrived at `now`.
    pub fn handle(&mut self, conn: ConnId, msg: ToCoordinator, now: Instant) {
        if self.pending.contains_key(&conn) {
            match msg {
                ToCoordinator::Hello(hello) => self.hello(conn, hello, now),
                _ => self.reject(conn, "first frame was not a Hello".to_string()),
            }
            return;
        }
        let Some(&rank) = self.ranks.get(&conn) else { return };
        self.slots[rank].last_heard = now;
        match msg {
            ToCoordinator::Hello(_) => {
                self.fail(Some(rank), "sent a second Hello on its joined connection".to_string(), now);
                self.check_abort_complete();
            }
            ToCoordinator::Heartbeat => {}
            ToCoordinator::Probe(inventory, facts, lldp) => {
                let rank_info = self.plan.ranks.get(rank).filter(|_| self.plan.uses_rdma());
                let missing = rank_info.and_then(|r| checks::missing_device(r, &inventory));
                let host = self.slots[rank].host.clone();
                if let Some(lldp) = lldp.filter(|_| self.lldp) {
                    self.event(Event::Neighbours { rank, host: host.clone(), lldp });
                }
                let (devices, error, facts) = (inventory.devices, inventory.error, Some(facts));
                self.event(Event::Probed(RankProbe { rank, host, devices, error, facts }));
                self.slots[rank].probed = true;
                if let Some(message) = missing {
                    self.fail(Some(rank), message, now);
                    self.check_abort_complete();
                } else if matches!(self.stage, Stage::Probing) && self.slots.iter().all(|s| s.probed) {
                    self.broadcast(|| ToWorker::Bye);
                    self.event(Event::Finished);
                    self.set_stage(Stage::Done, now);
                }
            }
            ToCoordinator::Endpoints { phase, endpoints } => self.endpoints(rank, phase, endpoints, now),
            ToCoordinator::Ready { phase } => self.ready(rank, phase, now),
            ToCoordinator::Interval { phase, interval, span_ns, ends } => {
                self.interval(rank, phase, interval, span_ns, ends, now)
            }
            ToCoordinator::Report(report) => self.report(rank, *report, now),
            ToCoordinator::ReportPart(part) => self.report_part(rank, *part, now),
            ToCoordinator::Failed { phase, error } => {
                self.fail(Some(rank), format!("failed in phase {phase}: {error}"), now);
                self.check_abort_complete();
            }
            ToCoordinator::Refused { phase, error } => {
                self.refuse(rank, format!("failed in phase {phase}: {error}"), now);
                self.check_abort_complete();
            }
        }
    }

    /// Ends the run from outside (the launcher was stopped): a phase that
    /// is running collects the partial reports first, as on any failure.
    pub fn stop(&mut self, reason: &str, now: Instant) {
        if !self.is_done() {
            self.fail(None, reason.to_string(), now);
            self.check_abort_complete();
        }
    }

    /// The launcher journaled `phase`: the next phase begins.
    pub fn saved(&mut self, phase: usize, now: Instant) {
        if matches!(self.stage, Stage::Saving { phase: done } if done == phase) {
            self.begin_phase(phase + 1, now);
        }
    }

    /// A frame that could not be decoded: a stranger is turned away, a
    /// rank that garbles its stream ends the run.
    pub fn protocol_error(&mut self, conn: ConnId, reason: &str, now: Instant) {
        if self.pending.contains_key(&conn) {
            self.reject(conn, format!("undecodable first frame: {reason}"));
        } else if let Some(rank) = self.ranks.remove(&conn) {
            self.out.push_back(Output::Close(conn));
            self.slots[rank].conn = None;
            let flows = self.flows_of(rank);
            self.fail(Some(rank), format!("protocol error: {reason}{flows}"), now);
            self.check_abort_complete();
        }
    }

    /// The ranks the current stage waits for.
    fn unanswered(&self) -> Vec<usize> {
        let without = |done: fn(&Slot) -> bool| (0..self.slots.len()).filter(|&r| !done(&self.slots[r])).collect();
        match &self.stage {
            Stage::Joining { .. } => without(|s| s.joined),
            Stage::Setup { wiring, .. } | Stage::Connecting { wiring, .. } => wiring.missing(),
            Stage::Probing => without(|s| s.probed),
            Stage::Running { reports, .. } => reports.missing(),
            Stage::Saving { .. } | Stage::Aborting { .. } | Stage::Done => Vec::new(),
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
