//! The worker's half of the control protocol as a state machine without
//! I/O, the mirror of `control::coordinator`: messages from the coordinator,
//! work finished off the async threads and clock readings go in; actions
//! come out, in order, from [`Session::poll`]. `agent` performs them (sends
//! frames, runs the blocking work, stops streams, exits) and decides
//! nothing, so every rule below is tested with a simulated coordinator and
//! no sockets.
//!
//! A rank's stages; each phase goes round from `Idle` back to `Idle`:
//! - `Greeting`: Hello sent; anything but Welcome ends the session.
//! - `Idle`: waiting for the Setup of the next phase (phases come in order).
//! - `Preparing`: creating the phase's flow ends off the async threads.
//! - `Prepared`: Endpoints sent; holding the ends until Peers. Peers may
//!   come early (with Setup, when the coordinator knows them already): they
//!   are held, and the rank connects as soon as its Endpoints have gone.
//! - `Connecting`: connecting them to the peers off the async threads.
//! - `Connected`: Ready sent; waiting at the barrier for Start.
//! - `Running`: streams run from t0; the report ends the phase.
//! - `Stopping`: aborted while running; the streams stop, the report still goes.
//! - `Halted`: aborted, or this rank failed; waiting for Bye.
//! - `Done`: Bye, or the coordinator's lease expired.
//!
//! Heartbeat, Abort and Bye are valid at any stage after Welcome. Any other
//! message the stage does not expect, or for another phase, is answered with
//! `Failed` naming the message and the stage: the coordinator ends the run
//! with that text instead of both sides waiting for a step timeout.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

pub use super::work::{Action, SessionError, Work};
use crate::control::report_parts;
use crate::control::wire::{FlowEndpoint, Hello, ToCoordinator, ToWorker};
use crate::metrics::clock::{Epoch, PeerClock};
use crate::plan::BadKey;

/// A coordinator silent this long is gone: the worker stops and exits
/// (or, in a job whose heartbeats are further apart, [`LEASE_INTERVALS`]
/// of them).
pub const LEASE: Duration = Duration::from_secs(5);
/// How often the worker tells the coordinator it is alive, unless Welcome
/// says otherwise (a large job spreads its heartbeats out).
pub const HEARTBEAT: Duration = Duration::from_millis(500);
/// The longest heartbeat interval a Welcome can set: a rank that would
/// otherwise wait hours to hear a gone coordinator.
pub const MAX_HEARTBEAT: Duration = Duration::from_secs(60);
/// The lease is at least this many heartbeat intervals.
const LEASE_INTERVALS: u32 = 10;

/// Where the rank is in the protocol. `O`: a phase's flow ends, opened and
/// waiting for their peers; `C`: the same ends, connected.
#[derive(Debug)]
pub enum Stage<O, C> {
    Greeting,
    Idle { next: usize },
    Preparing { phase: usize, peers: Option<Vec<FlowEndpoint>> },
    Prepared { phase: usize, ends: O, peers: Option<Vec<FlowEndpoint>> },
    Connecting { phase: usize },
    Connected { phase: usize, links: C },
    Running { phase: usize },
    Stopping { phase: usize },
    Halted { phase: usize },
    Done,
}

pub struct Session<O, C> {
    rank: usize,
    stage: Stage<O, C>,
    /// When Hello left, on both clocks, so Welcome's arrival needs only
    /// the monotonic one.
    greeted: Epoch,
    /// The coordinator's clock as estimated at Welcome (zero offset before).
    clock: PeerClock,
    last_heard: Instant,
    /// How often to heartbeat, and how long a silent coordinator is given.
    heartbeat: Duration,
    lease: Duration,
    /// The next heartbeat; none before Welcome.
    heartbeat_due: Option<Instant>,
    /// Sent something since the last heartbeat round, so that round needs
    /// none: any message renews the coordinator's view of this rank, and
    /// while thousands of ranks bootstrap the heartbeats would be a third
    /// of rank 0's frames.
    busy: bool,
    /// The probe has gone; until it has, Endpoints (or the failure to make
    /// them) wait in `held`, so every rank's probe reaches rank 0 before the
    /// phase can start (a short run used to end before a slow probe arrived,
    /// and run.json lacked it), and rank 0 judges the probe first: a device
    /// the hostfile names and the host lacks is named as such, not as the
    /// engine's failure to open it.
    probed: bool,
    held: Option<ToCoordinator>,
    /// While the GPU preflight runs (Welcome named GPUs), the first phase's
    /// Prepare waits here: no end is made before every GPU has opened.
    preflight: Option<Option<Action<O, C>>>,
    out: VecDeque<Action<O, C>>,
}

impl<O, C> Session<O, C> {
    /// A session that says `hello` at `now`.
    pub fn new(hello: Hello, now: Epoch) -> Session<O, C> {
        let rank = hello.rank;
        Session {
            rank,
            stage: Stage::Greeting,
            greeted: now,
            clock: PeerClock { offset_ns: 0, rtt_ns: 0 },
            last_heard: now.at,
            heartbeat: HEARTBEAT,
            lease: LEASE,
            heartbeat_due: None,
            busy: false,
            probed: false,
            held: None,
            preflight: None,
            out: VecDeque::from([Action::Send(ToCoordinator::Hello(hello))]),
        }
    }

    /// The next thing to do, in order.
    pub fn poll(&mut self) -> Option<Action<O, C>> {
        self.out.pop_front()
    }

    /// When [`Session::handle_timeout`] is due next; `None` once done.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if matches!(self.stage, Stage::Done) {
            return None;
        }
        let lease = self.last_heard + self.lease;
        Some(self.heartbeat_due.map_or(lease, |due| due.min(lease)))
    }

    /// Heartbeats and the coordinator's lease.
    pub fn handle_timeout(&mut self, now: Instant) {
        if matches!(self.stage, Stage::Done) {
            return;
        }
        if now >= self.last_heard + self.lease {
            self.exit(Err(SessionError::Silent(self.lease)));
            return;
        }
        if let Some(due) = self.heartbeat_due.filter(|due| now >= *due) {
            if !std::mem::take(&mut self.busy) {
                self.out.push_back(Action::Send(ToCoordinator::Heartbeat));
            }
            // Heartbeats missed while this process did not run are not made up.
            let every = self.heartbeat;
            self.heartbeat_due = Some(if due + every > now { due + every } else { now + every });
        }
    }

    /// One message from the coordinator, arrived at `now`.
    pub fn handle(&mut self, msg: ToWorker, now: Instant) {
        if matches!(self.stage, Stage::Done) {
            return;
        }
        self.last_heard = now;
        if matches!(self.stage, Stage::Greeting) {
            match msg {
                ToWorker::Welcome { now_ns: coordinator_ns, heartbeat, gpus, lldp } => {
                    let received_ns = self.greeted.ns_at(now);
                    self.clock = PeerClock::estimate(self.greeted.ns, coordinator_ns, received_ns);
                    self.heartbeat = heartbeat.clamp(HEARTBEAT, MAX_HEARTBEAT);
                    self.lease = LEASE.max(self.heartbeat * LEASE_INTERVALS);
                    self.heartbeat_due = Some(now + self.heartbeat);
                    self.busy = false;
                    self.stage = Stage::Idle { next: 0 };
                    // Once per run: opening every device takes a while.
                    self.preflight = (!gpus.is_empty()).then_some(None);
                    self.out.push_back(Action::Probe { gpus, lldp });
                }
                other => self.exit(Err(SessionError::NotWelcomed(other.name()))),
            }
            return;
        }
        match msg {
            ToWorker::Heartbeat => {}
            ToWorker::Bye => self.exit(Ok(())),
            ToWorker::Abort { reason } => self.abort(&reason),
            ToWorker::Welcome { .. } => self.unexpected("second Welcome".to_string()),
            ToWorker::Setup { phase, flows, stress } => match self.stage {
                Stage::Idle { next } if next == phase => {
                    self.stage = Stage::Preparing { phase, peers: None };
                    let prepare = Action::Prepare { phase, flows, stress };
                    match &mut self.preflight {
                        Some(waiting) => *waiting = Some(prepare),
                        None => self.out.push_back(prepare),
                    }
                }
                _ => self.unexpected(format!("Setup for phase {phase}")),
            },
            ToWorker::Peers { phase, peers } => match &mut self.stage {
                Stage::Preparing { phase: current, peers: held @ None }
                | Stage::Prepared { phase: current, peers: held @ None, .. }
                    if *current == phase =>
                {
                    *held = Some(peers);
                    self.connect_when_published();
                }
                _ => self.unexpected(format!("Peers for phase {phase}")),
            },
            ToWorker::Start { phase, t0_ns, window } => {
                // Rank 0 sends a scenario's validated window; any other is refused.
                if let Err(BadKey { key: field, reason: message }) = window.check() {
                    return self.unexpected(format!("Start for phase {phase} with a window whose `{field}` {message}"));
                }
                match std::mem::replace(&mut self.stage, Stage::Running { phase }) {
                    Stage::Connected { phase: current, links } if current == phase => {
                        let clock = self.clock;
                        self.out.push_back(Action::Start { phase, links, t0_ns, window, clock });
                    }
                    other => {
                        self.stage = other;
                        self.unexpected(format!("Start for phase {phase}"));
                    }
                }
            }
        }
    }

    /// Work done off the async threads. Work the stage has moved on from
    /// (the phase was aborted meanwhile) is dropped with what it made.
    pub fn finished(&mut self, work: Work<O, C>) {
        match work {
            _ if matches!(self.stage, Stage::Done) => {}
            Work::Probed(inventory, facts, preflight, lldp) => {
                self.send(ToCoordinator::Probe(inventory, facts, lldp));
                self.probed = true;
                let waiting = self.preflight.take().flatten();
                if let Err(error) = preflight {
                    let phase = phase_of(&self.stage);
                    self.stage = Stage::Halted { phase };
                    return self.send(ToCoordinator::Refused { phase, error: error.to_string() });
                }
                if let Some(prepare) = waiting.filter(|_| matches!(self.stage, Stage::Preparing { .. })) {
                    self.out.push_back(prepare);
                }
                if let Some(endpoints) = self.held.take() {
                    self.send(endpoints);
                }
                self.connect_when_published();
            }
            Work::Prepared { phase, result } if matches!(self.stage, Stage::Preparing { phase: p, .. } if p == phase) => {
                match result {
                    Ok((ends, endpoints)) => {
                        let peers = match &mut self.stage {
                            Stage::Preparing { peers, .. } => peers.take(),
                            _ => None,
                        };
                        self.stage = Stage::Prepared { phase, ends, peers };
                        self.send_once_probed(ToCoordinator::Endpoints { phase, endpoints });
                        self.connect_when_published();
                    }
                    Err(error) => self.failed(phase, error),
                }
            }
            Work::Connected { phase, result } if matches!(self.stage, Stage::Connecting { phase: p } if p == phase) => {
                match result {
                    Ok(links) => {
                        self.stage = Stage::Connected { phase, links };
                        self.send(ToCoordinator::Ready { phase });
                    }
                    Err(error) => self.failed(phase, error),
                }
            }
            Work::Interval { phase, interval, span_ns, ends } if self.streaming() == Some(phase) => {
                self.send(ToCoordinator::Interval { phase, interval, span_ns, ends })
            }
            Work::FlowFailed { phase, error } if self.streaming() == Some(phase) => {
                self.send(ToCoordinator::Failed { phase, error })
            }
            Work::Report(report) if self.streaming() == Some(report.phase) => {
                let phase = report.phase;
                self.stage = match self.stage {
                    Stage::Running { .. } => Stage::Idle { next: phase + 1 },
                    _ => Stage::Halted { phase },
                };
                for message in report_parts::split(*report) {
                    self.send(message);
                }
            }
            stale => tracing::debug!("rank {}: dropped {} (now {})", self.rank, work_name(&stale), self.doing()),
        }
    }

    /// Connects once the ends are made, their Endpoints have gone (so Ready
    /// never overtakes them) and the peers are here.
    fn connect_when_published(&mut self) {
        if self.held.is_some() || !matches!(self.stage, Stage::Prepared { peers: Some(_), .. }) {
            return;
        }
        let Stage::Prepared { phase, ends, peers: Some(peers) } = std::mem::replace(&mut self.stage, Stage::Done)
        else {
            unreachable!("matched above")
        };
        self.stage = Stage::Connecting { phase };
        self.out.push_back(Action::Connect { phase, ends, peers });
    }

    /// The phase whose streams run (or are stopping).
    fn streaming(&self) -> Option<usize> {
        match self.stage {
            Stage::Running { phase } | Stage::Stopping { phase } => Some(phase),
            _ => None,
        }
    }

    fn abort(&mut self, reason: &str) {
        tracing::warn!("rank {}: run aborted: {reason}", self.rank);
        self.stage = match std::mem::replace(&mut self.stage, Stage::Done) {
            Stage::Running { phase } => {
                self.out.push_back(Action::StopStreams);
                Stage::Stopping { phase }
            }
            stopping @ (Stage::Stopping { .. } | Stage::Halted { .. }) => stopping,
            other => Stage::Halted { phase: phase_of(&other) },
        };
    }

    /// This rank's own preflight, setup or connect failed: the coordinator
    /// ends the run with the error's text (the wire carries text).
    fn failed(&mut self, phase: usize, error: impl std::fmt::Display) {
        self.stage = Stage::Halted { phase };
        self.send_once_probed(ToCoordinator::Failed { phase, error: error.to_string() });
    }

    /// Sends `msg` now if the probe has gone, else holds it until the probe goes.
    fn send_once_probed(&mut self, msg: ToCoordinator) {
        if self.probed {
            self.send(msg);
        } else {
            self.held = Some(msg);
        }
    }

    fn unexpected(&mut self, what: String) {
        let error = format!("unexpected {what} while {}", self.doing());
        self.send(ToCoordinator::Failed { phase: phase_of(&self.stage), error });
    }

    fn exit(&mut self, result: Result<(), SessionError>) {
        self.stage = Stage::Done;
        self.out.push_back(Action::Exit(result));
    }

    fn send(&mut self, msg: ToCoordinator) {
        self.busy = true;
        self.out.push_back(Action::Send(msg));
    }

    /// The stage in words, for errors.
    fn doing(&self) -> String {
        match self.stage {
            Stage::Greeting => "waiting for Welcome".to_string(),
            Stage::Idle { next } => format!("waiting for the setup of phase {next}"),
            Stage::Preparing { phase, .. } => format!("creating the endpoints of phase {phase}"),
            Stage::Prepared { phase, .. } => format!("waiting for the peers of phase {phase}"),
            Stage::Connecting { phase } => format!("connecting the flows of phase {phase}"),
            Stage::Connected { phase, .. } => format!("waiting for the start of phase {phase}"),
            Stage::Running { phase } => format!("running phase {phase}"),
            Stage::Stopping { phase } => format!("stopping phase {phase}"),
            Stage::Halted { phase } => format!("halted in phase {phase}, waiting for Bye"),
            Stage::Done => "done".to_string(),
        }
    }
}

/// The phase a stage is in, or expects next.
fn phase_of<O, C>(stage: &Stage<O, C>) -> usize {
    match *stage {
        Stage::Greeting | Stage::Done => 0,
        Stage::Idle { next } => next,
        Stage::Preparing { phase, .. }
        | Stage::Prepared { phase, .. }
        | Stage::Connecting { phase }
        | Stage::Connected { phase, .. }
        | Stage::Running { phase }
        | Stage::Stopping { phase }
        | Stage::Halted { phase } => phase,
    }
}

fn work_name<O, C>(work: &Work<O, C>) -> String {
    match work {
        Work::Probed(..) => "the probe".to_string(),
        Work::Prepared { phase, .. } => format!("the endpoints of phase {phase}"),
        Work::Connected { phase, .. } => format!("the connected flows of phase {phase}"),
        Work::Interval { phase, interval, .. } => format!("interval {interval} of phase {phase}"),
        Work::FlowFailed { phase, .. } => format!("a flow failure in phase {phase}"),
        Work::Report(report) => format!("the report of phase {}", report.phase),
    }
}

#[cfg(test)]
#[path = "session_tests.rs"]
mod tests;
