//! Open-loop latency over verbs: the initiator posts a send on a fixed
//! schedule (constant or Poisson), whatever the echoes do, and times each
//! echo from the moment its probe was scheduled, so a stall counts in every
//! probe it delays (no coordinated omission; see `tcp::latency`).
//!
//! The target is the ping-pong responder (`latency::run`): it echoes every
//! message it receives. An RC QP delivers in order, so the k-th echo answers
//! the k-th probe, and the initiator draws the schedule a second time to know
//! when that probe was due: no timestamps travel.

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant};

use super::connect::{FlowResources, Shard};
use super::error::RdmaError;
use super::latency::{post_one, probe_spec, repost, LatencyResult, StallClock, Waiter};
use crate::histogram::Recorder;
use crate::transport::pace::ProbePlan;
use crate::transport::FlowCounters;

/// How long the echoes of probes in flight may take after the stop.
const DRAIN_LIMIT: Duration = Duration::from_millis(200);
/// With nothing in flight, the initiator sleeps until this long before the
/// next probe is due, then spins (a sleep overshoots by tens of µs).
const SPIN_BEFORE_DUE: Duration = Duration::from_micros(500);
/// Longest single sleep, so a stop is seen promptly.
const NAP: Duration = Duration::from_millis(10);

/// Sends probes on `plan` from the initiator until `stop`, then waits for the
/// echoes still in flight (up to `DRAIN_LIMIT`).
pub(crate) fn run(
    res: &FlowResources,
    shard: &mut Shard,
    counters: &FlowCounters,
    stop: &AtomicBool,
    plan: ProbePlan,
) -> Result<LatencyResult, RdmaError> {
    let p = &res.params;
    let msg = p.effective_message_size();
    let Shard { qps, cq } = shard;
    let q = &mut qps[0];
    let spec = probe_spec(res, q);
    let mut w = Waiter::new(res, stop);
    // Probes in flight: no more than either end has receives posted (more
    // would meet receiver-not-ready), nor than the send queue holds. A probe
    // held back by this limit is late, and its lateness is measured.
    let in_flight_limit = u64::from(p.knobs.tx_depth.min(p.knobs.rx_depth).max(1));
    let mut sending = plan.schedule();
    let mut answered = plan.schedule();
    let mut recorder = Recorder::new(res.latency_window);
    let mut due = sending.advance();
    let (mut sent, mut echoed) = (0u64, 0u64);
    let mut clock = StallClock::new(w.stall);
    let mut drain_until: Option<Instant> = None;
    loop {
        w.reap(cq)?;
        if w.recvs_ready > 0 {
            let back = Instant::now();
            for _ in 0..w.recvs_ready {
                recorder.record_scheduled(answered.advance(), back);
                repost(res, q)?;
            }
            let n = u64::from(std::mem::take(&mut w.recvs_ready));
            echoed += n;
            counters.messages.fetch_add(n, Relaxed);
            counters.bytes.fetch_add(n * msg, Relaxed);
            clock = StallClock::new(w.stall);
        }
        let now = Instant::now();
        match drain_until {
            Some(until) if echoed == sent || now >= until => break,
            Some(_) => {}
            None if stop.load(Relaxed) => drain_until = Some(now + DRAIN_LIMIT),
            None if now >= due && sent - echoed < in_flight_limit && w.sends_in_flight < p.knobs.tx_depth => {
                post_one(res, q, &spec)?;
                w.sends_in_flight += 1;
                sent += 1;
                due = sending.advance();
                continue;
            }
            None => {}
        }
        if sent > echoed {
            if drain_until.is_none() && clock.expired() {
                return Err(w.stalled(q.index, &clock, "waiting for the echo of an open-loop probe"));
            }
        } else if let Some(idle) = due.checked_duration_since(now).filter(|idle| *idle > SPIN_BEFORE_DUE) {
            // Nothing in flight and the next probe far off: sleep, but wake
            // early enough to post it on time.
            std::thread::sleep((idle - SPIN_BEFORE_DUE).min(NAP));
        }
        std::hint::spin_loop();
    }
    Ok(LatencyResult { round_trips: Some(recorder.into_histogram()), messages: echoed, bytes: echoed * msg })
}
