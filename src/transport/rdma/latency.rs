//! Latency, perftest style: write ping-pong polling on memory (ib_write_lat),
//! send ping-pong (ib_send_lat), one read at a time (ib_read_lat), one
//! atomic at a time (ib_atomic_lat). Write and send report half the round
//! trip, read and atomics the full round trip; what is recorded is the
//! round trip, every one inside the window.

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant};

use super::connect::{wr_id, FlowResources, QpSlot, Shard, WR_RECV};
use super::error::RdmaError;
use super::ffi::{Cq, SendSpec, Wc};
use super::stream::{poll_err, wc_error, wr_kind, PASSIVE_NAP};
use crate::histogram::{Histogram, Recorder};
use crate::scenario::Op;
use crate::transport::FlowCounters;
use crate::transport::Side;

/// Spins between checks of `stop`, the CQ and the stall clock.
const CHECK_EVERY: u32 = 256;

/// What the latency loop of one side produced.
pub(crate) struct LatencyResult {
    /// The initiator's round trips inside the window.
    pub round_trips: Option<Histogram>,
    pub messages: u64,
    pub bytes: u64,
}

/// Bounded waits: `stop`, CQ errors and the stall clock, checked every few spins.
pub(super) struct Waiter<'a> {
    res: &'a FlowResources,
    stop: &'a AtomicBool,
    pub(super) stall: Duration,
    wcs: [Wc; 4],
    /// Send completions outstanding (every latency WR is signaled).
    pub(super) sends_in_flight: u32,
    /// Receives reaped and not yet taken: one poll can reap several (an
    /// open-loop initiator keeps many probes in flight), each is one message.
    pub(super) recvs_ready: u32,
}

pub(super) enum Wake {
    Stopped,
    Ready,
}

impl<'a> Waiter<'a> {
    pub(super) fn new(res: &'a FlowResources, stop: &'a AtomicBool) -> Self {
        Waiter {
            res,
            stop,
            stall: Duration::from_millis(res.params.knobs.stall_timeout_ms),
            wcs: [Wc::default(); 4],
            sends_in_flight: 0,
            recvs_ready: 0,
        }
    }

    /// Reaps completions: counts send ones off `sends_in_flight` and
    /// receives onto `recvs_ready`.
    pub(super) fn reap(&mut self, cq: &mut Cq) -> Result<(), RdmaError> {
        let n = cq.poll(&mut self.wcs).map_err(|e| poll_err(self.res, e))?;
        for wc in &self.wcs[..n] {
            if wc.status != 0 {
                return Err(wc_error(self.res, wc));
            }
            if wc.wr_id & WR_RECV != 0 {
                self.recvs_ready += 1;
            } else {
                self.sends_in_flight = self.sends_in_flight.saturating_sub(1);
            }
        }
        Ok(())
    }

    /// Takes one reaped receive, if there is one.
    fn take_recv(&mut self) -> bool {
        let ready = self.recvs_ready > 0;
        self.recvs_ready -= u32::from(ready);
        ready
    }

    pub(super) fn stalled(&self, qp: usize, clock: &StallClock, what: &'static str) -> RdmaError {
        RdmaError::Stalled { flow: self.res.label.clone(), qp, waited_ms: clock.waited_ms(), what }
    }

    /// Spins until `ready()`; `armed` enables the stall clock.
    fn spin_until(
        &mut self,
        cq: &mut Cq,
        qp: usize,
        armed: bool,
        what: &'static str,
        mut ready: impl FnMut() -> bool,
    ) -> Result<Wake, RdmaError> {
        let mut clock = StallClock::new(self.stall);
        let mut spins = 0u32;
        loop {
            if ready() {
                return Ok(Wake::Ready);
            }
            spins = spins.wrapping_add(1);
            if spins.is_multiple_of(CHECK_EVERY) {
                if self.stop.load(Relaxed) {
                    return Ok(Wake::Stopped);
                }
                self.reap(cq)?;
                if armed && clock.expired() {
                    return Err(self.stalled(qp, &clock, what));
                }
            }
            std::hint::spin_loop();
        }
    }

    /// Waits for one receive completion (busy or on the completion channel).
    fn wait_recv(&mut self, cq: &mut Cq, qp: usize, armed: bool) -> Result<Wake, RdmaError> {
        let mut clock = StallClock::new(self.stall);
        let mut spins = 0u32;
        loop {
            if self.take_recv() {
                return Ok(Wake::Ready);
            }
            self.reap(cq)?;
            if self.take_recv() {
                return Ok(Wake::Ready);
            }
            if cq.is_event_driven() {
                cq.arm().map_err(|e| poll_err(self.res, e))?;
                self.reap(cq)?;
                if self.take_recv() {
                    return Ok(Wake::Ready);
                }
                cq.wait_event(10).map_err(|e| poll_err(self.res, e))?;
            }
            spins = spins.wrapping_add(1);
            if cq.is_event_driven() || spins.is_multiple_of(CHECK_EVERY) {
                if self.stop.load(Relaxed) {
                    return Ok(Wake::Stopped);
                }
                if armed && clock.expired() {
                    return Err(self.stalled(qp, &clock, "waiting for the peer's message"));
                }
            }
        }
    }

    /// Waits until fewer than `limit` sends are in flight (keeps the send
    /// queue from overflowing; with limit = n-1, waits for a send's completion).
    pub(super) fn sends_below(
        &mut self,
        cq: &mut Cq,
        qp: usize,
        limit: u32,
        what: &'static str,
    ) -> Result<Wake, RdmaError> {
        let mut clock = StallClock::new(self.stall);
        let mut spins = 0u32;
        while self.sends_in_flight >= limit {
            self.reap(cq)?;
            spins = spins.wrapping_add(1);
            if spins.is_multiple_of(CHECK_EVERY) {
                if self.stop.load(Relaxed) {
                    return Ok(Wake::Stopped);
                }
                if clock.expired() {
                    return Err(self.stalled(qp, &clock, what));
                }
            }
        }
        Ok(Wake::Ready)
    }
}

/// A stall timer that reads the clock only when asked (clock reads are not
/// free, least of all in a VM), starting at the first question.
pub(super) struct StallClock {
    started: Option<Instant>,
    limit: Duration,
}

impl StallClock {
    pub(super) fn new(limit: Duration) -> Self {
        StallClock { started: None, limit }
    }
    pub(super) fn expired(&mut self) -> bool {
        self.started.get_or_insert_with(Instant::now).elapsed() > self.limit
    }
    fn waited_ms(&self) -> u64 {
        self.started.map_or(0, |s| s.elapsed().as_millis() as u64)
    }
}

pub(super) fn post_one(res: &FlowResources, q: &mut QpSlot, spec: &SendSpec) -> Result<(), RdmaError> {
    let index = q.index;
    q.qp.post_sends(spec, 1, |_| (wr_id(index, 1), true)).map_err(|e| RdmaError::Post {
        flow: res.label.clone(),
        qp: index,
        what: "latency WR",
        reason: e.to_string(),
    })
}

/// Runs the latency loop of one side (single QP, single shard).
pub(crate) fn run(
    res: &FlowResources,
    shard: &mut Shard,
    counters: &FlowCounters,
    stop: &AtomicBool,
) -> Result<LatencyResult, RdmaError> {
    let p = &res.params;
    let msg = p.effective_message_size();
    let iterations = p.knobs.iterations;
    let Shard { qps, cq } = shard;
    let q = &mut qps[0];
    let one_sided = p.op == Op::Read || p.op.is_atomic();
    let spec = probe_spec(res, q);
    let recv_last = q.local_off + msg as usize - 1;
    let mut w = Waiter::new(res, stop);
    let depth = p.knobs.tx_depth.max(1);
    let initiator = res.side == Side::Sender;
    let mut recorder = initiator.then(|| Recorder::new(res.latency_window));
    let (mut messages, mut bytes) = (0u64, 0u64);
    let mut i: u64 = 0;
    let qi = q.index;

    if one_sided && !initiator {
        // ib_read_lat's / ib_atomic_lat's server: passive until stopped.
        while !stop.load(Relaxed) {
            std::thread::sleep(PASSIVE_NAP);
        }
        return Ok(LatencyResult { round_trips: None, messages, bytes });
    }

    let mut t_start = Instant::now();
    while iterations.is_none_or(|n| i < n) && !stop.load(Relaxed) {
        let v = (i % 255 + 1) as u8;
        if w.sends_in_flight >= depth
            && matches!(w.sends_below(cq, qi, depth, "waiting for send completions")?, Wake::Stopped)
        {
            break;
        }
        let wake = match (p.op, initiator) {
            (Op::Write, true) => {
                q.qp.set_last_payload_byte(&spec, v);
                post_one(res, q, &spec)?;
                w.sends_in_flight += 1;
                let arena = q.qp.arena();
                w.spin_until(cq, qi, true, "waiting for the peer's write", || arena.read_u8(recv_last) == v)?
            }
            (Op::Write, false) => {
                let arena = q.qp.arena();
                let wake =
                    w.spin_until(cq, qi, i > 0, "waiting for the peer's write", || arena.read_u8(recv_last) == v)?;
                if let Wake::Ready = wake {
                    q.qp.set_last_payload_byte(&spec, v);
                    post_one(res, q, &spec)?;
                    w.sends_in_flight += 1;
                }
                wake
            }
            (Op::Send, true) => {
                post_one(res, q, &spec)?;
                w.sends_in_flight += 1;
                let wake = w.wait_recv(cq, qi, true)?;
                if let Wake::Ready = wake {
                    repost(res, q)?;
                }
                wake
            }
            (Op::Send, false) => {
                let wake = w.wait_recv(cq, qi, i > 0)?;
                if let Wake::Ready = wake {
                    repost(res, q)?;
                    post_one(res, q, &spec)?;
                    w.sends_in_flight += 1;
                }
                wake
            }
            (_, _) => {
                // Read or atomic, initiator: one in flight, wait for its completion.
                post_one(res, q, &spec)?;
                w.sends_in_flight += 1;
                let limit = w.sends_in_flight;
                w.sends_below(cq, qi, limit, "waiting for the read's or atomic's completion")?
            }
        };
        if let Wake::Stopped = wake {
            break;
        }
        if let Some(recorder) = recorder.as_mut() {
            // One clock read per iteration, as perftest: a round trip is the
            // time between the starts of two consecutive iterations.
            let now = Instant::now();
            recorder.record(t_start, now);
            t_start = now;
        }
        messages += 1;
        bytes += msg;
        counters.messages.fetch_add(1, Relaxed);
        counters.bytes.fetch_add(msg, Relaxed);
        i += 1;
    }
    // Reap what is still in flight, briefly (teardown errors are noise).
    let deadline = Instant::now() + Duration::from_millis(100);
    while w.sends_in_flight > 0 && Instant::now() < deadline {
        if w.reap(cq).is_err() {
            break;
        }
    }
    Ok(LatencyResult { round_trips: recorder.map(Recorder::into_histogram), messages, bytes })
}

/// The WR of one latency message on `q`.
pub(super) fn probe_spec(res: &FlowResources, q: &QpSlot) -> SendSpec {
    let p = &res.params;
    // Read and atomics: the target's CPU takes no part (one WR, one completion).
    let one_sided = p.op == Op::Read || p.op.is_atomic();
    SendSpec {
        kind: wr_kind(p.op, q.index),
        rkey: res.peer_rkey,
        // The peer's receive half (offset 0 of its slot).
        remote_addr: q.remote_addr,
        // Our send half; reads and fetched atomic words land in our receive half.
        local_off: if one_sided { q.local_off } else { q.local_off + res.slot_len / 2 },
        len: p.effective_message_size() as u32,
        inline: p.sends_inline(),
    }
}

pub(super) fn repost(res: &FlowResources, q: &mut QpSlot) -> Result<(), RdmaError> {
    q.qp.post_recvs(1).map_err(|e| RdmaError::Post {
        flow: res.label.clone(),
        qp: q.index,
        what: "receive",
        reason: e.to_string(),
    })
}
