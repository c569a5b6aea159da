//! Bandwidth senders: keep `tx_depth` WRs in flight per QP, post
//! `post_list` WRs per doorbell, signal every `cq_moderation`-th, count
//! completions. A shard's sender is a state machine its task steps on an
//! engine (`task`): each step posts what the send queues allow and polls
//! the CQ once. Nothing in a step allocates.

use std::time::{Duration, Instant};

use super::connect::{wr_covered, wr_id, wr_qp, FlowResources, Shard, Step, WR_RECV};
use super::error::{wc_status_name, RdmaError};
use super::ffi::{SendSpec, Wc, WrKind};
use super::validate::SlotCheck;
use crate::plan::{Op, CMP_SWAP_VALUE};
use crate::transport::pace::Pacer;
use crate::transport::task::Turn;
use crate::transport::FlowCounters;

/// Time allowed after `stop` for signaled WRs still in flight to complete.
const DRAIN: Duration = Duration::from_millis(200);
/// The longest a paced sender waits for its next token at once: completions
/// wait that long to be polled (counted), so it stays short.
const PACED_NAP: Duration = Duration::from_millis(1);
/// How long an event-mode step waits for its channel before it looks at
/// its stall clock again.
pub(super) const EVENT_NAP: Duration = Duration::from_millis(10);
/// Empty polls between two looks at the stall clock (clock reads are not
/// free, least of all in a VM).
const IDLE_POLLS_PER_CLOCK: u32 = 1024;

pub(crate) fn wc_error(res: &FlowResources, wc: &Wc) -> RdmaError {
    RdmaError::Completion {
        flow: res.label.clone(),
        qp: wr_qp(wc.wr_id),
        status: wc.status,
        status_name: wc_status_name(wc.status),
        vendor_err: wc.vendor_err,
        opcode_name: if wc.wr_id & WR_RECV != 0 { "RECV" } else { send_opcode_name(res.params.op) },
    }
}

fn send_opcode_name(op: Op) -> &'static str {
    match op {
        Op::Write | Op::WriteImm => "RDMA_WRITE",
        Op::Read => "RDMA_READ",
        Op::Send | Op::SendImm => "SEND",
        Op::FetchAdd => "FETCH_ADD",
        Op::CmpSwap => "COMP_SWAP",
    }
}

pub(crate) fn poll_err(res: &FlowResources, e: std::io::Error) -> RdmaError {
    RdmaError::Poll { flow: res.label.clone(), source: e }
}

pub(crate) fn wr_kind(op: Op, qp: usize) -> WrKind {
    match op {
        Op::Write => WrKind::Write,
        Op::WriteImm => WrKind::WriteImm((qp as u32).to_be()),
        Op::Read => WrKind::Read,
        Op::Send => WrKind::Send,
        Op::SendImm => WrKind::SendImm((qp as u32).to_be()),
        Op::FetchAdd => WrKind::FetchAdd(1),
        Op::CmpSwap => WrKind::CmpSwap { compare: 0, swap: CMP_SWAP_VALUE },
    }
}

#[derive(Clone, Copy, Default)]
struct QpProgress {
    posted: u64,
    completed: u64,
    /// Unsignaled WRs posted since the last signaled one.
    unsignaled: u32,
    /// `posted` right after the last signaled WR: completions can reach it.
    signaled_mark: u64,
}

/// The sending side of one shard of a bandwidth flow.
pub(super) struct Sender {
    specs: Vec<SendSpec>,
    prog: Vec<QpProgress>,
    /// Flow QP index -> position in this shard.
    pos_of: Vec<usize>,
    wcs: Vec<Wc>,
    /// The shard's share of the flow's rate; its pacer starts at the first step.
    pace: Option<f64>,
    pacer: Option<Pacer>,
    /// Stall detection reads the clock only when idle: (when, completions then).
    total_completed: u64,
    stall_mark: Option<(Instant, u64)>,
    idle_polls: u32,
    /// Data validation: the reader checks what it read.
    check: Option<SlotCheck>,
    /// Stopped or done: the end of the drain of signaled WRs in flight.
    draining: Option<Instant>,
    /// Event mode: the CQ was armed; its channel's events are taken next step.
    armed: bool,
}

impl Sender {
    pub(super) fn new(res: &FlowResources, shard: &Shard, pace: Option<f64>) -> Sender {
        let p = &res.params;
        let msg = p.effective_message_size();
        let inline = p.sends_inline();
        let specs = shard
            .qps
            .iter()
            .map(|q| SendSpec {
                kind: wr_kind(p.op, q.index),
                rkey: res.peer_rkey,
                remote_addr: q.remote_addr,
                local_off: q.local_off,
                len: msg as u32,
                inline,
            })
            .collect();
        Sender {
            specs,
            prog: vec![QpProgress::default(); shard.qps.len()],
            pos_of: positions(shard),
            wcs: vec![Wc::default(); p.knobs.poll_batch as usize],
            pace,
            pacer: None,
            total_completed: 0,
            stall_mark: None,
            idle_polls: 0,
            check: SlotCheck::of(res),
            draining: None,
            armed: false,
        }
    }

    /// One step: post what the queues allow, poll the CQ once; after
    /// `stop` (or the last iteration), drain the signaled WRs in flight.
    pub(super) fn step(&mut self, Step { res, shard, counters }: Step, stop: bool) -> Result<Turn, RdmaError> {
        if std::mem::take(&mut self.armed) {
            shard.cq.take_events().map_err(|e| poll_err(res, e))?;
        }
        if let Some(deadline) = self.draining {
            return self.drain(res, shard, counters, deadline);
        }
        if stop {
            self.draining = Some(Instant::now() + DRAIN);
            return Ok(Turn::Again);
        }
        if self.pacer.is_none() {
            self.pacer = self.pace.map(Pacer::new);
        }
        let posted_any = self.post(res, shard)?;
        let mut n = shard.cq.poll(&mut self.wcs).map_err(|e| poll_err(res, e))?;
        // Whether WRs are in flight is asked only of a step that found nothing.
        if n == 0 && !posted_any && shard.cq.is_event_driven() && self.in_flight() {
            // Armed, then polled once more: a completion that landed before
            // the arm is taken now, any later one wakes the channel.
            shard.cq.arm().map_err(|e| poll_err(res, e))?;
            self.armed = true;
            n = shard.cq.poll(&mut self.wcs).map_err(|e| poll_err(res, e))?;
        }
        if n > 0 {
            self.complete(res, shard, counters, n)?;
            let target = res.params.knobs.iterations;
            if target.is_some_and(|t| self.prog.iter().all(|s| s.completed >= t)) {
                self.draining = Some(Instant::now() + DRAIN);
            }
            return Ok(Turn::Again);
        }
        if posted_any {
            return Ok(Turn::Again);
        }
        let in_flight = self.in_flight();
        self.idle(res, shard, in_flight)
    }

    /// Posts as many batches as the send queues (and the pacer) allow.
    fn post(&mut self, res: &FlowResources, shard: &mut Shard) -> Result<bool, RdmaError> {
        let p = &res.params;
        let (tx_depth, post_list) = (u64::from(p.knobs.tx_depth), p.knobs.post_list);
        let (cq_mod, target, paced) = (p.effective_cq_moderation(), p.knobs.iterations, self.pacer.is_some());
        let mut posted_any = false;
        for (k, q) in shard.qps.iter_mut().enumerate() {
            let st = &mut self.prog[k];
            loop {
                let remaining = target.map_or(u64::MAX, |t| t - st.posted);
                let allowed = self.pacer.as_mut().map_or(u64::MAX, |p| p.available(Instant::now()));
                let n = u64::from(post_list).min(remaining).min(allowed);
                let outstanding = st.posted - st.completed;
                if n == 0 || outstanding + n > tx_depth {
                    break;
                }
                let n = n as u32;
                // Signal every cq_mod-th WR, the last WR of an iteration-mode
                // run, and the last of a batch after which the queue is full
                // (so progress never waits on an unsignaled tail); paced, the
                // last of every batch, so what was sent is counted when it
                // completes, not when the queue next fills.
                let full_after = outstanding + u64::from(n) + u64::from(post_list) > tx_depth;
                let final_batch = remaining == u64::from(n);
                let index = q.index;
                let mut unsig = st.unsignaled;
                let mut last_signaled_at = None;
                q.qp.post_sends(&self.specs[k], n, |j| {
                    unsig += 1;
                    let last = j + 1 == n;
                    if unsig >= cq_mod || (last && (full_after || final_batch || paced)) {
                        let covered = unsig;
                        unsig = 0;
                        last_signaled_at = Some(j);
                        (wr_id(index, covered), true)
                    } else {
                        (wr_id(index, 0), false)
                    }
                })
                .map_err(|e| RdmaError::Post {
                    flow: res.label.clone(),
                    qp: index,
                    what: "send batch",
                    reason: format!("{n} WRs with {outstanding} outstanding: {e}"),
                })?;
                if let Some(j) = last_signaled_at {
                    st.signaled_mark = st.posted + u64::from(j) + 1;
                }
                st.unsignaled = unsig;
                st.posted += u64::from(n);
                posted_any = true;
                if let Some(p) = self.pacer.as_mut() {
                    p.take(u64::from(n));
                }
            }
        }
        Ok(posted_any)
    }

    /// Counts the `n` completions just polled, once, into `counters`.
    fn complete(
        &mut self,
        res: &FlowResources,
        shard: &Shard,
        counters: &FlowCounters,
        n: usize,
    ) -> Result<(), RdmaError> {
        let mut msgs = 0u64;
        for wc in &self.wcs[..n] {
            if wc.status != 0 {
                // Stopped, the peer may already be gone: teardown noise.
                if self.draining.is_some() {
                    continue;
                }
                return Err(wc_error(res, wc));
            }
            let k = self.pos_of.get(wr_qp(wc.wr_id)).copied().unwrap_or(usize::MAX);
            let Some(st) = self.prog.get_mut(k) else { continue };
            let c = u64::from(wr_covered(wc.wr_id));
            st.completed += c;
            msgs += c;
            if let (Some(check), None) = (&mut self.check, self.draining) {
                check.check(res, (shard.qps[k].index, shard.qps[k].local_off), c, counters)?;
            }
        }
        counters.add(msgs * res.params.effective_message_size(), msgs);
        self.total_completed += msgs;
        self.idle_polls = 0;
        Ok(())
    }

    fn in_flight(&self) -> bool {
        self.prog.iter().any(|s| s.posted > s.completed)
    }

    /// Nothing posted, nothing completed: wait for the pacer's next token
    /// (not a stall while nothing is in flight) or the channel, and look
    /// at the stall clock now and then.
    fn idle(&mut self, res: &FlowResources, shard: &Shard, in_flight: bool) -> Result<Turn, RdmaError> {
        let now = Instant::now();
        let token = self.pacer.as_ref().map(|p| p.wait_for_one(now)).filter(|w| !w.is_zero());
        if token.is_some() && !in_flight {
            self.stall_mark = None;
        }
        self.idle_polls = self.idle_polls.wrapping_add(1);
        let event = shard.cq.is_event_driven();
        if event || token.is_some() || self.idle_polls.is_multiple_of(IDLE_POLLS_PER_CLOCK) {
            self.look_for_stall(res, shard, now)?;
        }
        Ok(match (token, event && in_flight) {
            (Some(wait), _) => Turn::Wait(Some(now + wait.min(PACED_NAP))),
            (None, true) => Turn::Wait(Some(now + EVENT_NAP)),
            (None, false) => Turn::Again,
        })
    }

    fn look_for_stall(&mut self, res: &FlowResources, shard: &Shard, now: Instant) -> Result<(), RdmaError> {
        let stall = Duration::from_millis(res.params.knobs.stall_timeout_ms);
        match self.stall_mark {
            Some((since, completed)) if completed == self.total_completed && self.in_flight() => {
                if now - since > stall {
                    let k = self.prog.iter().position(|s| s.posted > s.completed).unwrap_or(0);
                    return Err(RdmaError::Stalled {
                        flow: res.label.clone(),
                        qp: shard.qps.get(k).map_or(0, |q| q.index),
                        waited_ms: (now - since).as_millis() as u64,
                        what: "waiting for send completions",
                    });
                }
            }
            _ => self.stall_mark = Some((now, self.total_completed)),
        }
        Ok(())
    }

    /// Stopped (or done): lets signaled WRs in flight finish, briefly; errors
    /// now are teardown noise (the peer may already be gone).
    fn drain(
        &mut self,
        res: &FlowResources,
        shard: &mut Shard,
        counters: &FlowCounters,
        deadline: Instant,
    ) -> Result<Turn, RdmaError> {
        let pending = self.prog.iter().any(|s| s.completed < s.signaled_mark);
        if !pending || Instant::now() >= deadline {
            return Ok(Turn::Done(Ok(())));
        }
        let n = shard.cq.poll(&mut self.wcs).map_err(|e| poll_err(res, e))?;
        if n > 0 {
            self.complete(res, shard, counters, n)?;
        }
        Ok(Turn::Again)
    }
}

/// Flow QP index -> position in `shard` (`usize::MAX`: not in it).
pub(super) fn positions(shard: &Shard) -> Vec<usize> {
    let max_index = shard.qps.iter().map(|q| q.index).max().unwrap_or(0);
    let mut pos_of = vec![usize::MAX; max_index + 1];
    for (k, q) in shard.qps.iter().enumerate() {
        pos_of[q.index] = k;
    }
    pos_of
}
