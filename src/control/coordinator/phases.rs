//! The coordinator's steps of one phase as each rank's messages arrive:
//! Hello, then per phase the endpoints, ready, the intervals and the report.

use std::sync::Arc;
use std::time::Instant;

use subtle::ConstantTimeEq;

use super::wiring::Known;
use super::{checks, past, ConnId, Coordinator, Event, Output, RunFailure, Stage, Wiring};
use crate::control::gather::Gather;
use crate::control::printable;
use crate::control::wire::{FlowEndpoint, FlowRole, Hello, ToWorker, MAGIC, PROTOCOL_VERSION};
use crate::metrics::RankReport;
use crate::plan::GroupPlan;
use crate::result::aggregate_phase;
use crate::result::intervals::PhaseIntervals;
use crate::transport::{Counts, Side};

/// Why a Hello is refused before its rank takes part; `host` as the
/// stranger wrote it, escaped and cut short.
#[derive(Debug, thiserror::Error)]
enum Refusal {
    #[error("not a fabricbench worker (bad magic)")]
    BadMagic,
    #[error("wrong job token from `{host}` claiming rank {rank}")]
    WrongToken { host: String, rank: usize },
    #[error("rank {rank} on {host} belongs to job {theirs:x}, not {ours:x}")]
    OtherJob { host: String, rank: usize, theirs: u64, ours: u64 },
    #[error("rank {rank} does not exist in a job of {ranks} ranks")]
    NoSuchRank { rank: usize, ranks: usize },
    #[error("rank {rank} joined twice (second Hello from {host})")]
    Twice { host: String, rank: usize },
    #[error("rank {rank} said Hello after the run began")]
    Late { rank: usize },
}

impl Coordinator {
    /// Whether `hello` may join: this job's token and id, a rank of the
    /// job not yet joined, before the run began.
    fn admits(&self, hello: &Hello) -> Result<(), Refusal> {
        let (host, rank) = (printable(&hello.host), hello.rank);
        if hello.magic != MAGIC {
            Err(Refusal::BadMagic)
        } else if !bool::from(hello.token.as_bytes().ct_eq(self.token.as_bytes())) {
            Err(Refusal::WrongToken { host, rank })
        } else if hello.job != self.job {
            Err(Refusal::OtherJob { host, rank, theirs: hello.job, ours: self.job })
        } else if rank >= self.slots.len() {
            Err(Refusal::NoSuchRank { rank, ranks: self.slots.len() })
        } else if self.slots[rank].joined {
            Err(Refusal::Twice { host, rank })
        } else if !matches!(self.stage, Stage::Joining { .. }) {
            Err(Refusal::Late { rank })
        } else {
            Ok(())
        }
    }

    pub(super) fn hello(&mut self, conn: ConnId, hello: Hello, now: Instant) {
        // Whatever a stranger wrote is shown escaped and cut short.
        if let Err(refusal) = self.admits(&hello) {
            self.reject(conn, refusal.to_string());
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
            let failure = RunFailure { rank: Some(hello.rank), host: Some(hello.host), message, refused: false };
            self.broadcast(|| ToWorker::Abort { reason: failure.to_string() });
            self.broadcast(|| ToWorker::Bye);
            self.event(Event::Failed(failure));
            self.stage = Stage::Done;
            return;
        }
        self.pending.remove(&conn);
        self.out.push_back(Output::Admit(conn));
        self.ranks.insert(conn, hello.rank);
        let slot = &mut self.slots[hello.rank];
        slot.conn = Some(conn);
        slot.joined = true;
        slot.last_heard = now;
        let silence = self.timeouts.silence;
        self.joined += 1;
        let gpus = std::mem::take(&mut slot.gpus);
        let (heartbeat, lldp) = (self.timeouts.heartbeat, self.lldp);
        self.watch_until(past(now + silence));
        let now_ns = self.epoch.ns_at(now);
        self.send(hello.rank, ToWorker::Welcome { now_ns, heartbeat, gpus, lldp });
        // A plan of no phases has no Setup to send: its ranks only probe.
        if let Stage::Joining { setups, .. } = &mut self.stage {
            if let Some(flows) = setups.get_mut(hello.rank).map(std::mem::take) {
                let setup = self.setup(0, hello.rank, flows);
                self.send(hello.rank, setup);
                self.peers_if_known(hello.rank);
            }
        }
        let joined = self.joined;
        self.event(Event::Joined { rank: hello.rank, host: hello.host, joined, total: self.slots.len() });
        if joined == self.slots.len() {
            let Stage::Joining { wiring, .. } = std::mem::replace(&mut self.stage, Stage::Done) else {
                unreachable!("Hello is taken only while joining")
            };
            let next = if self.plan.phases.is_empty() { Stage::Probing } else { Stage::Setup { phase: 0, wiring } };
            self.set_stage(next, now);
        }
    }

    /// Phase 0 began as the ranks joined; every later one begins here.
    pub(super) fn begin_phase(&mut self, phase: usize, now: Instant) {
        let wiring = Wiring::new(self.plan.phases.get(phase), self.slots.len());
        self.set_stage(Stage::Setup { phase, wiring }, now);
        for (rank, flows) in self.setups(phase).into_iter().enumerate() {
            let setup = self.setup(phase, rank, flows);
            self.send(rank, setup);
            self.peers_if_known(rank);
        }
    }

    /// `rank` was sent its Setup: its Peers too, if they are known already
    /// (they go in the same write).
    fn peers_if_known(&mut self, rank: usize) {
        let (phase, wiring) = match &mut self.stage {
            Stage::Joining { wiring, .. } => (0, wiring),
            Stage::Setup { phase, wiring } => (*phase, wiring),
            _ => return,
        };
        if let Some(peers) = wiring.set_up(rank) {
            self.send(rank, ToWorker::Peers { phase, peers });
        }
    }

    fn setup(&self, phase: usize, rank: usize, flows: Vec<FlowRole>) -> ToWorker {
        let stress = self.plan.phases[phase].stress.iter().find(|s| s.rank == rank).map(|s| s.spec.clone());
        ToWorker::Setup { phase, flows, stress }
    }

    /// Each rank's flow ends in `phase`, in one pass over its flows.
    pub(super) fn setups(&self, phase: usize) -> Vec<Vec<FlowRole>> {
        let Some(p) = self.plan.phases.get(phase) else { return Vec::new() };
        let groups: Vec<Arc<GroupPlan>> = p.groups.iter().cloned().map(Arc::new).collect();
        let mut setups: Vec<Vec<FlowRole>> = vec![Vec::new(); self.slots.len()];
        for flow in &p.flows {
            let group = &groups[flow.group];
            let [src_rails, dst_rails] = self.plan.host_rails(group, flow);
            let [src_gpu, dst_gpu] = self.plan.host_gpus(group, flow);
            let proof = self.proofs.of(phase, flow.id);
            let role = |side, rails, gpu| FlowRole { flow: *flow, side, group: group.clone(), rails, gpu, proof };
            setups[flow.src].push(role(Side::Sender, src_rails, src_gpu));
            setups[flow.dst].push(role(Side::Receiver, dst_rails, dst_gpu));
        }
        setups
    }

    pub(super) fn endpoints(&mut self, rank: usize, phase: usize, list: Vec<FlowEndpoint>, now: Instant) {
        // Phase 0's endpoints come in while the last ranks are still joining.
        let (current, wiring) = match &mut self.stage {
            Stage::Setup { phase, wiring } => (*phase, wiring),
            Stage::Joining { wiring, .. } => (0, wiring),
            _ => return,
        };
        if current != phase {
            return;
        }
        let problem = match self.plan.phases.get(phase) {
            _ if wiring.has_published(rank) => Some("published its endpoints twice".to_string()),
            // A plan of no phases (its ranks only probe) takes no endpoints.
            None => Some(format!("sent endpoints, but the run has {} phase(s)", self.plan.phases.len())),
            Some(p) => checks::endpoints_problem(p, rank, &list),
        };
        if let Some(problem) = problem {
            self.fail(Some(rank), format!("{problem} (phase {phase})"), now);
            return;
        }
        for Known { rank: peer, peers } in wiring.publish(rank, list) {
            self.send(peer, ToWorker::Peers { phase, peers });
        }
        if matches!(&self.stage, Stage::Setup { wiring, .. } if wiring.all_published()) {
            let Stage::Setup { phase, wiring } = std::mem::replace(&mut self.stage, Stage::Done) else {
                unreachable!("matched above")
            };
            self.set_stage(Stage::Connecting { phase, wiring }, now);
        }
    }

    /// A rank connected its flows; it may do so while others still publish
    /// (`wiring`), and Start goes once every rank has.
    pub(super) fn ready(&mut self, rank: usize, phase: usize, now: Instant) {
        let (current, wiring) = match &mut self.stage {
            Stage::Joining { wiring, .. } => (0, wiring),
            Stage::Setup { phase, wiring } | Stage::Connecting { phase, wiring } => (*phase, wiring),
            _ => return,
        };
        if current != phase {
            return;
        }
        match wiring.ready(rank) {
            Err(problem) => self.fail(Some(rank), format!("{problem} (phase {phase})"), now),
            Ok(all) if all && matches!(self.stage, Stage::Connecting { .. }) => {
                let t0 = now + self.timeouts.start_delay;
                let t0_ns = self.epoch.ns_at(t0);
                let window = self.window;
                self.broadcast(|| ToWorker::Start { phase, t0_ns, window });
                let name = self.plan.phases[phase].name.clone();
                self.event(Event::PhaseStarted { phase, name, window });
                let n = self.slots.len();
                let intervals = self.window.boundaries() - 1;
                let intervals = Box::new(PhaseIntervals::new(&self.plan.phases[phase], n, intervals));
                let stage = Stage::Running { phase, t0, reports: Gather::new(n), intervals };
                self.set_stage(stage, now);
            }
            Ok(_) => {}
        }
    }

    /// One interval from `rank`; the ones every rank has sent go to the
    /// launcher as they close. A stopped phase still takes them: its
    /// partial result covers the intervals every reporting rank took.
    pub(super) fn interval(
        &mut self,
        rank: usize,
        phase: usize,
        k: u32,
        span_ns: i64,
        ends: Vec<Counts>,
        now: Instant,
    ) {
        let (Stage::Running { phase: current, intervals, .. } | Stage::Aborting { phase: current, intervals, .. }) =
            &mut self.stage
        else {
            return;
        };
        if *current != phase {
            return;
        }
        match intervals.take(rank, k, span_ns, ends) {
            Ok(closed) => {
                for c in closed {
                    self.event(Event::Progress { phase, interval: c.interval, gbps: c.gbps, flows: c.flows });
                }
            }
            Err(problem) => {
                self.fail(Some(rank), format!("{problem} (phase {phase})"), now);
                self.check_abort_complete();
            }
        }
    }

    /// Flows that come ahead of a large report; more than the rank has ends
    /// in the phase is a broken rank.
    pub(super) fn report_part(&mut self, rank: usize, part: RankReport, now: Instant) {
        let ends = self.plan.phases.get(part.phase).map_or(0, |p| {
            p.flows.iter().map(|f| usize::from(f.src == rank) + usize::from(f.dst == rank)).sum::<usize>()
        });
        let histograms = self.plan.phases.get(part.phase).map_or(0, |p| checks::histograms_allowed(p, rank));
        let parts = &mut self.slots[rank].parts;
        parts.extend(part.flows);
        let carried = parts.iter().filter(|f| f.rtts.is_some()).count();
        let problem = if parts.len() > ends {
            Some(format!(
                "sent {} flow reports in parts for phase {}, but has {ends} flow ends",
                parts.len(),
                part.phase
            ))
        } else if carried > histograms {
            Some(format!(
                "sent {carried} latency histograms in parts for phase {}, but measures latency on {histograms} flows",
                part.phase
            ))
        } else {
            None
        };
        if let Some(message) = problem {
            parts.clear();
            self.fail(Some(rank), message, now);
            self.check_abort_complete();
        }
    }

    pub(super) fn report(&mut self, rank: usize, mut report: RankReport, now: Instant) {
        let parts = std::mem::take(&mut self.slots[rank].parts);
        if !parts.is_empty() {
            report.flows.splice(0..0, parts);
        }
        let problem = self.plan.phases.get(report.phase).and_then(|p| checks::report_problem(p, rank, &report));
        if let Some(problem) = problem {
            self.fail(Some(rank), format!("{problem} (phase {}); its report is left out", report.phase), now);
            self.check_abort_complete();
            return;
        }
        match &mut self.stage {
            Stage::Running { phase, reports, intervals, .. } if *phase == report.phase => {
                let phase = *phase;
                if !reports.put(rank, report) {
                    return;
                }
                let reports = std::mem::replace(reports, Gather::new(0)).into_answers();
                let result = aggregate_phase(
                    &self.plan.phases[phase],
                    &self.plan.ranks,
                    &reports,
                    intervals,
                    true,
                    self.window.asked(),
                );
                self.event(Event::PhaseDone(Box::new(result)));
                if phase + 1 < self.plan.phases.len() {
                    self.set_stage(Stage::Saving { phase }, now);
                } else {
                    self.broadcast(|| ToWorker::Bye);
                    self.event(Event::Finished);
                    self.set_stage(Stage::Done, now);
                }
            }
            Stage::Aborting { phase, reports, .. } if *phase == report.phase => {
                reports.put(rank, report);
                self.check_abort_complete();
            }
            _ => {}
        }
    }
}
