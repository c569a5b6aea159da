//! Open-loop latency over verbs: the initiator posts a send on a fixed
//! schedule (constant or Poisson), whatever the echoes do, and times each
//! echo from the moment its probe was scheduled, so a stall counts in every
//! probe it delays (no coordinated omission; see `tcp::latency`).
//!
//! The target is the ping-pong responder (`latency`): it echoes every
//! message it receives. An RC QP delivers in order, so the k-th echo answers
//! the k-th probe, and the initiator draws the schedule a second time to know
//! when that probe was due: no timestamps travel.

use std::time::{Duration, Instant};

use super::connect::{FlowResources, Shard, Step};
use super::error::RdmaError;
use super::ffi::SendSpec;
use super::latency::{post_one, probe_spec, repost, StallClock, Waiter};
use crate::histogram::{Histogram, Recorder};
use crate::transport::pace::{ProbePlan, Schedule};
use crate::transport::task::Turn;

/// How long the echoes of probes in flight may take after the stop.
const DRAIN_LIMIT: Duration = Duration::from_millis(200);
/// With nothing in flight, the initiator waits until this long before the
/// next probe is due, then spins (a sleep overshoots by tens of µs).
const SPIN_BEFORE_DUE: Duration = Duration::from_micros(500);

/// The initiator of open-loop probes, from its first step.
pub(super) struct Prober {
    per_s: f64,
    poisson_seed: Option<u64>,
    spec: SendSpec,
    /// The send times, drawn twice: when each probe goes, when each was due.
    schedules: Option<(Schedule, Schedule)>,
    due: Option<Instant>,
    recorder: Recorder,
    /// Probes in flight: no more than either end has receives posted (more
    /// would meet receiver-not-ready), nor than the send queue holds. A
    /// probe held back by this limit is late, and its lateness is measured.
    in_flight_limit: u64,
    sent: u64,
    echoed: u64,
    w: Waiter,
    clock: StallClock,
    drain_until: Option<Instant>,
}

impl Prober {
    pub(super) fn new(res: &FlowResources, shard: &Shard, per_s: f64) -> Prober {
        let p = &res.params;
        let w = Waiter::new(res);
        Prober {
            per_s,
            poisson_seed: res.poisson_seed,
            spec: probe_spec(res, &shard.qps[0]),
            schedules: None,
            due: None,
            recorder: Recorder::new(res.latency_window),
            in_flight_limit: u64::from(p.knobs.tx_depth.min(p.knobs.rx_depth).max(1)),
            sent: 0,
            echoed: 0,
            clock: StallClock::new(w.stall),
            w,
            drain_until: None,
        }
    }

    pub(super) fn round_trips(self) -> Option<Histogram> {
        Some(self.recorder.into_histogram())
    }

    /// One step: take the echoes that came, post the probe that is due;
    /// after `stop`, wait for the echoes in flight (up to `DRAIN_LIMIT`).
    pub(super) fn step(&mut self, Step { res, shard, counters }: Step, stop: bool) -> Result<Turn, RdmaError> {
        let Shard { qps, cq } = shard;
        let q = &mut qps[0];
        let (sending, answered) = self.schedules.get_or_insert_with(|| {
            let plan = ProbePlan { start: Instant::now(), per_s: self.per_s, poisson_seed: self.poisson_seed };
            (plan.schedule(), plan.schedule())
        });
        let due = *self.due.get_or_insert_with(|| sending.advance());
        self.w.reap(res, cq)?;
        if self.w.recvs_ready > 0 {
            let back = Instant::now();
            for _ in 0..self.w.recvs_ready {
                self.recorder.record_scheduled(answered.advance(), back);
                repost(res, q)?;
            }
            let n = u64::from(std::mem::take(&mut self.w.recvs_ready));
            self.echoed += n;
            counters.add(n * res.params.effective_message_size(), n);
            self.clock = StallClock::new(self.w.stall);
        }
        let now = Instant::now();
        match self.drain_until {
            Some(until) if self.echoed == self.sent || now >= until => return Ok(Turn::Done(Ok(()))),
            Some(_) => {}
            None if stop => self.drain_until = Some(now + DRAIN_LIMIT),
            None if now >= due
                && self.sent - self.echoed < self.in_flight_limit
                && self.w.sends_in_flight < res.params.knobs.tx_depth =>
            {
                post_one(res, q, &self.spec)?;
                self.w.sends_in_flight += 1;
                self.sent += 1;
                self.due = Some(sending.advance());
                return Ok(Turn::Again);
            }
            None => {}
        }
        if self.sent > self.echoed {
            if self.drain_until.is_none() && self.clock.expired() {
                return Err(self.w.stalled(res, q.index, &self.clock, "waiting for the echo of an open-loop probe"));
            }
        } else if self.drain_until.is_none()
            && due.checked_duration_since(now).is_some_and(|idle| idle > SPIN_BEFORE_DUE)
        {
            // Nothing in flight and the next probe far off: wait, but wake
            // early enough to post it on time (stopped, no probe is due).
            return Ok(Turn::Wait(Some(due - SPIN_BEFORE_DUE)));
        }
        Ok(Turn::Again)
    }
}
