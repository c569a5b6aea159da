//! Latency, perftest style: write ping-pong polling on memory (ib_write_lat),
//! send ping-pong (ib_send_lat), one read at a time (ib_read_lat), one
//! atomic at a time (ib_atomic_lat). Write and send report half the round
//! trip, read and atomics the full round trip; what is recorded is the
//! round trip, every one inside the window.
//!
//! A ping-pong is a state machine its task steps on an engine: each step
//! looks at what the round trip waits on (the last byte of the peer's
//! write, a receive, the read's completion), goes on while the answers are
//! there at once, and returns at the first that is not, so the engine spins
//! on it as perftest's loop does, and a stop is seen within a step.

use std::time::{Duration, Instant};

use super::connect::{wr_id, FlowResources, QpSlot, Shard, Step, WR_RECV};
use super::error::RdmaError;
use super::ffi::{SendSpec, Wc};
use super::shared_cq::ShardCq;
use super::stream::{poll_err, wc_error, wr_kind, EVENT_NAP};
use crate::histogram::{Histogram, Recorder};
use crate::plan::Op;
use crate::transport::task::Turn;
use crate::transport::Side;

/// Steps of a wait between looks at the CQ and the stall clock.
const CHECK_EVERY: u32 = 256;
/// Round trips one step may run back to back while each is answered at
/// its first look: the engine's turn between steps is then paid once per
/// `BURST` round trips instead of once per round trip (a read's completion
/// is usually there when its post returns), and a stop is still seen
/// within a few round trips.
const BURST: u64 = 16;
/// How long the WRs still in flight at the end may take to complete.
const DRAIN: Duration = Duration::from_millis(100);

/// Completions of one latency QP: what is in flight, what came back.
pub(super) struct Waiter {
    pub(super) stall: Duration,
    wcs: [Wc; 4],
    /// Send completions outstanding (every latency WR is signaled).
    pub(super) sends_in_flight: u32,
    /// Receives reaped and not yet taken: one poll can reap several (an
    /// open-loop initiator keeps many probes in flight), each is one message.
    pub(super) recvs_ready: u32,
}

impl Waiter {
    pub(super) fn new(res: &FlowResources) -> Self {
        Waiter {
            stall: Duration::from_millis(res.params.knobs.stall_timeout_ms),
            wcs: [Wc::default(); 4],
            sends_in_flight: 0,
            recvs_ready: 0,
        }
    }

    /// Reaps completions: counts send ones off `sends_in_flight` and
    /// receives onto `recvs_ready`.
    pub(super) fn reap(&mut self, res: &FlowResources, cq: &mut ShardCq) -> Result<(), RdmaError> {
        let n = cq.poll(&mut self.wcs).map_err(|e| poll_err(res, e))?;
        for wc in &self.wcs[..n] {
            if wc.status != 0 {
                return Err(wc_error(res, wc));
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

    pub(super) fn stalled(&self, res: &FlowResources, qp: usize, clock: &StallClock, what: &'static str) -> RdmaError {
        RdmaError::Stalled { flow: res.label.clone(), qp, waited_ms: clock.waited_ms(), what }
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

/// What one side of a ping-pong does each round trip.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Part {
    /// Writes, then watches its memory for the peer's write back.
    WriteInitiator,
    /// Watches its memory for the peer's write, then writes back.
    WriteResponder,
    /// Sends, then waits for the peer's send.
    SendInitiator,
    /// Waits for the peer's send, then sends back.
    SendResponder,
    /// Reads (or an atomic), then waits for its completion.
    OneSided,
}

impl Part {
    /// Whether it sends first (and times the round trip).
    fn initiates(self) -> bool {
        matches!(self, Part::WriteInitiator | Part::SendInitiator | Part::OneSided)
    }
}

/// One side of a latency ping-pong (single QP, single shard).
pub(super) struct PingPong {
    part: Part,
    spec: SendSpec,
    /// The last byte of the receive half, which a write ping-pong watches.
    recv_last: usize,
    depth: u32,
    recorder: Option<Recorder>,
    i: u64,
    /// The current round trip's message is out (initiators).
    posted: bool,
    /// One-sided: the sends in flight with this round trip's.
    limit: u32,
    /// The start of the current round trip (the initiator's clock).
    t_start: Option<Instant>,
    w: Waiter,
    spins: u32,
    clock: StallClock,
    drain_until: Option<Instant>,
    /// Event mode: the CQ was armed; its channel's events are taken next step.
    armed: bool,
}

impl PingPong {
    /// The side of `res` in its ping-pong; `None` for the target of reads
    /// and atomics, whose CPU takes no part (it only waits for the stop).
    pub(super) fn new(res: &FlowResources, shard: &Shard) -> Option<PingPong> {
        let p = &res.params;
        let q = &shard.qps[0];
        let initiator = res.side == Side::Sender;
        let part = match (p.op, initiator) {
            (Op::Write, true) => Part::WriteInitiator,
            (Op::Write, false) => Part::WriteResponder,
            (Op::Send, true) => Part::SendInitiator,
            (Op::Send, false) => Part::SendResponder,
            (_, true) => Part::OneSided,
            (_, false) => return None,
        };
        let w = Waiter::new(res);
        Some(PingPong {
            part,
            spec: probe_spec(res, q),
            recv_last: q.local_off + p.effective_message_size() as usize - 1,
            depth: p.knobs.tx_depth.max(1),
            recorder: initiator.then(|| Recorder::new(res.latency_window)),
            i: 0,
            posted: false,
            limit: 0,
            t_start: None,
            clock: StallClock::new(w.stall),
            w,
            spins: 0,
            drain_until: None,
            armed: false,
        })
    }

    /// The round trips it recorded (the initiator's).
    pub(super) fn round_trips(self) -> Option<Histogram> {
        self.recorder.map(Recorder::into_histogram)
    }

    /// One step: looks at what the round trip waits on, and sends the next
    /// message when it came, again while each is answered at once (up to
    /// `BURST`); returns at the first look that must wait.
    pub(super) fn step(&mut self, Step { res, shard, counters }: Step, stop: bool) -> Result<Turn, RdmaError> {
        for _ in 0..BURST {
            let before = self.i;
            let turn = self.look(Step { res, shard: &mut *shard, counters }, stop)?;
            if self.i == before {
                return Ok(turn);
            }
        }
        Ok(Turn::Again)
    }

    /// One look at what the round trip waits on, and the next message when
    /// it came; after `stop` or the last iteration, the WRs still in flight
    /// are reaped briefly (teardown errors are noise).
    fn look(&mut self, Step { res, shard, counters }: Step, stop: bool) -> Result<Turn, RdmaError> {
        let Shard { qps, cq } = shard;
        if std::mem::take(&mut self.armed) {
            cq.take_events().map_err(|e| poll_err(res, e))?;
        }
        let done = res.params.knobs.iterations.is_some_and(|n| self.i >= n);
        if stop || done || self.drain_until.is_some() {
            return Ok(self.drain(res, cq));
        }
        self.t_start.get_or_insert_with(Instant::now);
        let q = &mut qps[0];
        if self.w.sends_in_flight >= self.depth {
            // Keeps the send queue from overflowing.
            self.w.reap(res, cq)?;
            return self.waiting(res, cq, q.index, "waiting for send completions");
        }
        if !self.answered(res, q, cq)? {
            let what = match self.part {
                Part::WriteInitiator | Part::WriteResponder => "waiting for the peer's write",
                Part::OneSided => "waiting for the read's or atomic's completion",
                _ => "waiting for the peer's message",
            };
            return self.waiting(res, cq, q.index, what);
        }
        if let (Some(recorder), Some(t_start)) = (self.recorder.as_mut(), self.t_start) {
            // One clock read per round trip, as perftest: a round trip is the
            // time between the starts of two consecutive iterations.
            let now = Instant::now();
            recorder.record(t_start, now);
            self.t_start = Some(now);
        }
        counters.add(res.params.effective_message_size(), 1);
        (self.i, self.posted, self.spins) = (self.i + 1, false, 0);
        self.clock = StallClock::new(self.w.stall);
        Ok(Turn::Again)
    }

    /// Sends this round trip's message where it is this side's turn, and
    /// whether the round trip is over (the responder: answered).
    fn answered(&mut self, res: &FlowResources, q: &mut QpSlot, cq: &mut ShardCq) -> Result<bool, RdmaError> {
        let v = (self.i % 255 + 1) as u8;
        if self.part.initiates() && !self.posted {
            if self.part == Part::WriteInitiator {
                q.qp.set_last_payload_byte(&self.spec, v);
            }
            self.post(res, q)?;
            (self.posted, self.limit) = (true, self.w.sends_in_flight);
        }
        Ok(match self.part {
            Part::WriteInitiator => q.qp.arena().read_u8(self.recv_last) == v,
            Part::WriteResponder => {
                let came = q.qp.arena().read_u8(self.recv_last) == v;
                if came {
                    q.qp.set_last_payload_byte(&self.spec, v);
                    self.post(res, q)?;
                }
                came
            }
            Part::SendInitiator | Part::SendResponder => {
                let came = self.receive(res, cq)?;
                if came {
                    repost(res, q)?;
                    if self.part == Part::SendResponder {
                        self.post(res, q)?;
                    }
                }
                came
            }
            Part::OneSided => {
                self.w.reap(res, cq)?;
                self.w.sends_in_flight < self.limit
            }
        })
    }

    fn post(&mut self, res: &FlowResources, q: &mut QpSlot) -> Result<(), RdmaError> {
        post_one(res, q, &self.spec)?;
        self.w.sends_in_flight += 1;
        Ok(())
    }

    /// A receive came (busy: one poll; event mode: armed first when none).
    fn receive(&mut self, res: &FlowResources, cq: &mut ShardCq) -> Result<bool, RdmaError> {
        self.w.reap(res, cq)?;
        if self.w.take_recv() {
            return Ok(true);
        }
        if !cq.is_event_driven() {
            return Ok(false);
        }
        // Armed, then polled once more: a receive that landed before the
        // arm is taken now, any later one wakes the channel.
        cq.arm().map_err(|e| poll_err(res, e))?;
        self.armed = true;
        self.w.reap(res, cq)?;
        Ok(self.w.take_recv())
    }

    /// Not yet: looks at the CQ and the stall clock every few steps (event
    /// mode: waits on the channel), armed once the peer has been heard.
    fn waiting(
        &mut self,
        res: &FlowResources,
        cq: &mut ShardCq,
        qp: usize,
        what: &'static str,
    ) -> Result<Turn, RdmaError> {
        self.spins = self.spins.wrapping_add(1);
        let event = self.armed;
        if event || self.spins.is_multiple_of(CHECK_EVERY) {
            self.w.reap(res, cq)?;
            // A responder waits as long as it must for the first message.
            let armed = self.i > 0 || self.part.initiates();
            if armed && self.clock.expired() {
                return Err(self.w.stalled(res, qp, &self.clock, what));
            }
        }
        if matches!(self.part, Part::WriteInitiator | Part::WriteResponder) {
            // Watching memory the NIC writes: as perftest's loop does.
            std::hint::spin_loop();
        }
        Ok(match event {
            true => Turn::Wait(Some(Instant::now() + EVENT_NAP)),
            false => Turn::Again,
        })
    }

    fn drain(&mut self, res: &FlowResources, cq: &mut ShardCq) -> Turn {
        let until = *self.drain_until.get_or_insert_with(|| Instant::now() + DRAIN);
        if self.w.sends_in_flight == 0 || Instant::now() >= until || self.w.reap(res, cq).is_err() {
            return Turn::Done(Ok(()));
        }
        Turn::Again
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
