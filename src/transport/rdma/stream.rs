//! Bandwidth streams: keep `tx_depth` WRs in flight per QP, post `post_list`
//! WRs per doorbell, signal every `cq_moderation`-th, count completions.
//! Nothing in the loops allocates.

use std::sync::atomic::{AtomicBool, Ordering, Ordering::Relaxed};
use std::time::{Duration, Instant};

use super::connect::{wr_covered, wr_id, wr_qp, FlowResources, Shard, WR_RECV};
use super::error::{wc_status_name, RdmaError};
use super::ffi::{SendSpec, Wc, WrKind};
use super::validate::SlotCheck;
use crate::scenario::rdma::{Connection, CMP_SWAP_VALUE, UD_GRH};
use crate::scenario::Op;
use crate::transport::pace::Pacer;
use crate::transport::FlowCounters;
use crate::transport::Side;

/// Time allowed after `stop` for signaled WRs still in flight to complete.
const DRAIN: Duration = Duration::from_millis(200);
/// How long the passive end of a one-sided flow sleeps between looks at
/// `stop` (it has nothing else to do; fewer wake-ups leave the CPUs to the
/// data path, which matters with Soft-RoCE).
pub(crate) const PASSIVE_NAP: Duration = Duration::from_millis(10);
/// The longest a paced sender sleeps for its next token at once: completions
/// wait that long to be polled (counted), so it stays short.
const PACED_NAP: Duration = Duration::from_millis(1);
/// How long an event-mode wait sleeps before re-checking `stop`.
const EVENT_WAIT_MS: i32 = 10;

/// The caller's stop flag, plus an abort raised by a failing sibling shard.
pub(crate) struct ShardStop<'a> {
    pub ext: &'a AtomicBool,
    pub abort: AtomicBool,
}

impl ShardStop<'_> {
    pub(crate) fn load(&self, o: Ordering) -> bool {
        self.ext.load(o) || self.abort.load(o)
    }
}

/// What one shard did.
#[derive(Default, Debug)]
pub(crate) struct ShardResult {
    pub messages: u64,
    pub bytes: u64,
    /// Per QP of the shard (flow QP index, word): the sender's last fetched
    /// value, the receiver's target word.
    pub atomic_words: Vec<(usize, u64)>,
}

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

/// Runs one shard of a bandwidth flow on the calling thread.
pub(crate) fn run_shard(
    res: &FlowResources,
    shard: &mut Shard,
    counters: &FlowCounters,
    stop: &ShardStop,
    pace: Option<f64>,
) -> Result<ShardResult, RdmaError> {
    let r = match res.side {
        Side::Sender => send_loop(res, shard, counters, stop, pace.map(Pacer::new)),
        Side::Receiver if res.params.op.needs_receives() => recv_loop(res, shard, counters, stop),
        Side::Receiver => passive_wait(res, shard, counters, stop),
    };
    if r.is_err() {
        stop.abort.store(true, Relaxed);
    }
    r
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

fn send_loop(
    res: &FlowResources,
    shard: &mut Shard,
    counters: &FlowCounters,
    stop: &ShardStop,
    mut pacer: Option<Pacer>,
) -> Result<ShardResult, RdmaError> {
    let p = &res.params;
    let msg = p.effective_message_size();
    let paced = pacer.is_some();
    let tx_depth = u64::from(p.knobs.tx_depth);
    let post_list = p.knobs.post_list;
    let cq_mod = p.effective_cq_moderation();
    let target = p.knobs.iterations;
    let stall = Duration::from_millis(p.knobs.stall_timeout_ms);
    let inline = p.sends_inline();

    let specs: Vec<SendSpec> = shard
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
    let mut prog = vec![QpProgress::default(); shard.qps.len()];
    // Flow QP index -> position in this shard.
    let max_index = shard.qps.iter().map(|q| q.index).max().unwrap_or(0);
    let mut pos_of = vec![usize::MAX; max_index + 1];
    for (k, q) in shard.qps.iter().enumerate() {
        pos_of[q.index] = k;
    }
    let mut wcs = vec![Wc::default(); p.knobs.poll_batch as usize];
    let mut out = ShardResult::default();
    // Stall detection reads the clock only when idle: (when, completions then).
    let mut total_completed = 0u64;
    let mut stall_mark = (Instant::now(), 0u64);
    let mut idle_polls: u32 = 0;
    // Data validation: the reader checks what it read.
    let mut check = SlotCheck::of(res);

    loop {
        if stop.load(Relaxed) {
            break;
        }
        // Post as many batches as the send queues allow.
        let mut posted_any = false;
        for (k, q) in shard.qps.iter_mut().enumerate() {
            let st = &mut prog[k];
            loop {
                let remaining = target.map_or(u64::MAX, |t| t - st.posted);
                let allowed = pacer.as_mut().map_or(u64::MAX, |p| p.available(Instant::now()));
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
                q.qp.post_sends(&specs[k], n, |j| {
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
                if let Some(p) = pacer.as_mut() {
                    p.take(u64::from(n));
                }
            }
        }

        let mut n = shard.cq.poll(&mut wcs).map_err(|e| poll_err(res, e))?;
        let in_flight = || prog.iter().any(|s| s.posted > s.completed);
        // A paced sender with nothing in flight waits for its pacer, not the CQ.
        if n == 0 && !posted_any && shard.cq.is_event_driven() && (!paced || in_flight()) {
            n = shard.cq.idle_wait(&mut wcs, EVENT_WAIT_MS).map_err(|e| poll_err(res, e))?;
        }
        if n > 0 {
            let mut msgs = 0u64;
            for wc in &wcs[..n] {
                if wc.status != 0 {
                    return Err(wc_error(res, wc));
                }
                let k = pos_of.get(wr_qp(wc.wr_id)).copied().unwrap_or(usize::MAX);
                let Some(st) = prog.get_mut(k) else { continue };
                let c = u64::from(wr_covered(wc.wr_id));
                st.completed += c;
                msgs += c;
                if let Some(check) = &mut check {
                    check.check(res, (shard.qps[k].index, shard.qps[k].local_off), c, counters)?;
                }
            }
            out.messages += msgs;
            out.bytes += msgs * msg;
            counters.messages.fetch_add(msgs, Relaxed);
            counters.bytes.fetch_add(msgs * msg, Relaxed);
            total_completed += msgs;
            idle_polls = 0;
            if let Some(t) = target {
                if prog.iter().all(|s| s.completed >= t) {
                    break;
                }
            }
            continue;
        }
        if posted_any {
            continue;
        }
        // Nothing to post and nothing completed. Paced: sleep for the next
        // token (not a stall while nothing is in flight).
        if let Some(wait) = pacer.as_ref().map(|p| p.wait_for_one(Instant::now())).filter(|w| !w.is_zero()) {
            std::thread::sleep(wait.min(PACED_NAP));
            if !in_flight() {
                stall_mark = (Instant::now(), total_completed);
                continue;
            }
        }
        idle_polls = idle_polls.wrapping_add(1);
        if shard.cq.is_event_driven() || idle_polls.is_multiple_of(1024) {
            let now = Instant::now();
            if total_completed != stall_mark.1 {
                stall_mark = (now, total_completed);
            } else if now - stall_mark.0 > stall {
                let k = prog.iter().position(|s| s.posted > s.completed).unwrap_or(0);
                return Err(RdmaError::Stalled {
                    flow: res.label.clone(),
                    qp: shard.qps.get(k).map_or(0, |q| q.index),
                    waited_ms: (now - stall_mark.0).as_millis() as u64,
                    what: "waiting for send completions",
                });
            }
        }
    }

    // Stopped (or done): let signaled WRs in flight finish, briefly; errors
    // now are teardown noise (the peer may already be gone).
    let deadline = Instant::now() + DRAIN;
    while prog.iter().any(|s| s.completed < s.signaled_mark) && Instant::now() < deadline {
        let n = shard.cq.poll(&mut wcs).map_err(|e| poll_err(res, e))?;
        for wc in &wcs[..n] {
            if wc.status != 0 {
                continue;
            }
            let k = pos_of.get(wr_qp(wc.wr_id)).copied().unwrap_or(usize::MAX);
            if let Some(st) = prog.get_mut(k) {
                let c = u64::from(wr_covered(wc.wr_id));
                st.completed += c;
                out.messages += c;
                out.bytes += c * msg;
                counters.messages.fetch_add(c, Relaxed);
                counters.bytes.fetch_add(c * msg, Relaxed);
            }
        }
        if n == 0 {
            std::hint::spin_loop();
        }
    }
    if p.op.is_atomic() {
        out.atomic_words = shard.qps.iter().map(|q| (q.index, res.arena.read_u64(q.local_off))).collect();
    }
    Ok(out)
}

/// Receiver of send / send-with-imm / write-with-imm: counts receives and
/// reposts them at once, so the sender never meets an empty receive queue
/// for long (RNR).
fn recv_loop(
    res: &FlowResources,
    shard: &mut Shard,
    counters: &FlowCounters,
    stop: &ShardStop,
) -> Result<ShardResult, RdmaError> {
    let p = &res.params;
    let msg = p.effective_message_size();
    let target = p.knobs.iterations.map(|t| t * shard.qps.len() as u64);
    let max_index = shard.qps.iter().map(|q| q.index).max().unwrap_or(0);
    let mut pos_of = vec![usize::MAX; max_index + 1];
    for (k, q) in shard.qps.iter().enumerate() {
        pos_of[q.index] = k;
    }
    let mut consumed = vec![0usize; shard.qps.len()];
    let mut wcs = vec![Wc::default(); p.knobs.poll_batch as usize];
    let mut out = ShardResult::default();
    let write_imm = p.op == Op::WriteImm;
    // A UD receive's byte count includes the GRH ahead of the message.
    let grh = if p.knobs.connection == Connection::Ud { UD_GRH as u32 } else { 0 };
    let mut check = SlotCheck::of(res);

    while !stop.load(Relaxed) {
        let mut n = shard.cq.poll(&mut wcs).map_err(|e| poll_err(res, e))?;
        if n == 0 && shard.cq.is_event_driven() {
            n = shard.cq.idle_wait(&mut wcs, EVENT_WAIT_MS).map_err(|e| poll_err(res, e))?;
        }
        if n == 0 {
            continue;
        }
        let (mut msgs, mut bytes) = (0u64, 0u64);
        for wc in &wcs[..n] {
            if wc.status != 0 {
                return Err(wc_error(res, wc));
            }
            let k = pos_of.get(wr_qp(wc.wr_id)).copied().unwrap_or(usize::MAX);
            if let Some(c) = consumed.get_mut(k) {
                *c += 1;
            }
            msgs += 1;
            bytes += if write_imm { msg } else { u64::from(wc.byte_len.saturating_sub(grh)) };
        }
        for (k, q) in shard.qps.iter_mut().enumerate() {
            if consumed[k] > 0 {
                // Before the slot can take another message.
                if let Some(check) = &mut check {
                    check.check(res, (q.index, q.local_off), consumed[k] as u64, counters)?;
                }
                q.qp.post_recvs(consumed[k]).map_err(|e| RdmaError::Post {
                    flow: res.label.clone(),
                    qp: q.index,
                    what: "receives",
                    reason: e.to_string(),
                })?;
                consumed[k] = 0;
            }
        }
        out.messages += msgs;
        out.bytes += bytes;
        counters.messages.fetch_add(msgs, Relaxed);
        counters.bytes.fetch_add(bytes, Relaxed);
        if target.is_some_and(|t| out.messages >= t) {
            break;
        }
    }
    Ok(out)
}

/// Receiver of one-sided ops: nothing to do but keep the memory registered
/// until told to stop.
fn passive_wait(
    res: &FlowResources,
    shard: &mut Shard,
    counters: &FlowCounters,
    stop: &ShardStop,
) -> Result<ShardResult, RdmaError> {
    while !stop.load(Relaxed) {
        std::thread::sleep(PASSIVE_NAP);
    }
    // Data validation of writes: what the last writes left in each slot.
    if let Some(mut check) = SlotCheck::of(res) {
        check.check_all(res, shard, counters)?;
    }
    let mut out = ShardResult::default();
    if res.params.op.is_atomic() {
        out.atomic_words = shard.qps.iter().map(|q| (q.index, res.arena.read_u64(q.local_off))).collect();
    }
    Ok(out)
}
