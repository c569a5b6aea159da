//! Pacing a sender to an offered rate, without a busy loop: two token
//! buckets of messages that sleep for their debt (tc tbf's rate and
//! peakrate), and the send times of open-loop probes (evenly spaced or
//! Poisson).
//!
//! The rate bucket fills at the rate and starts empty, so the long-run
//! rate is exact; it keeps up to `CATCH_UP` of credit, so a sender held up
//! for less than that (a descheduled thread on a busy host, a sleep that
//! overshot) makes the lost messages up afterwards instead of delivering
//! less than asked, and one held up longer (a link slower than the rate)
//! forfeits the rest rather than flooding later. The peak bucket bounds
//! how it makes up: at most twice the rate, at most `BURST_MESSAGES` (or
//! 1 ms of the rate, where that is more) back to back.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Messages a sender may send back to back.
const BURST_MESSAGES: f64 = 8.0;
/// …or this much of its rate, where that is more messages.
const BURST_TIME: Duration = Duration::from_millis(1);
/// Credit a held-up sender keeps, in time at its rate.
const CATCH_UP: Duration = Duration::from_millis(100);
/// How much faster than the rate a sender makes up lost credit.
const PEAK: f64 = 2.0;
/// Longest single sleep, so a stop is seen promptly.
const NAP: Duration = Duration::from_millis(10);

/// One bucket: fills at `per_s` from `origin`, holds at most `cap`.
#[derive(Debug)]
struct Bucket {
    per_s: f64,
    cap: f64,
    origin: Instant,
    /// Messages taken, counted against the fill from `origin` (it moves on
    /// when credit beyond `cap` is forfeited).
    taken: f64,
}

impl Bucket {
    fn new(per_s: f64, cap: f64, full: bool, origin: Instant) -> Bucket {
        Bucket { per_s, cap, origin, taken: if full { -cap } else { 0.0 } }
    }

    fn tokens(&mut self, now: Instant) -> f64 {
        let earned = (now - self.origin).as_secs_f64() * self.per_s;
        if earned - self.taken > self.cap {
            self.taken = earned - self.cap;
        }
        earned - self.taken
    }

    /// When the next whole message's token is there.
    fn due(&self) -> Instant {
        self.origin + Duration::from_secs_f64(((self.taken + 1.0) / self.per_s).max(0.0))
    }
}

/// The rate bucket and the peak bucket of one sender.
#[derive(Debug)]
pub struct Pacer {
    rate: Bucket,
    peak: Bucket,
}

impl Pacer {
    /// A pacer of `per_s` messages per second, from now.
    pub fn new(per_s: f64) -> Pacer {
        let now = Instant::now();
        let burst = BURST_MESSAGES.max(per_s * BURST_TIME.as_secs_f64());
        let credit = burst.max(per_s * CATCH_UP.as_secs_f64());
        Pacer { rate: Bucket::new(per_s, credit, false, now), peak: Bucket::new(per_s * PEAK, burst, true, now) }
    }

    /// The most messages that go back to back.
    pub fn burst(&self) -> f64 {
        self.peak.cap
    }

    /// Messages that may go now (whole ones).
    pub fn available(&mut self, now: Instant) -> u64 {
        self.rate.tokens(now).min(self.peak.tokens(now)).max(0.0) as u64
    }

    /// Takes `n` messages (after `available` said they may go).
    pub fn take(&mut self, n: u64) {
        self.rate.taken += n as f64;
        self.peak.taken += n as f64;
    }

    /// How long until the next whole message may go.
    pub fn wait_for_one(&self, now: Instant) -> Duration {
        self.rate.due().max(self.peak.due()).saturating_duration_since(now)
    }

    /// Blocks (sleeping) until one message may go, then takes it; `false`
    /// when `stop` was set first.
    pub fn next(&mut self, stop: &AtomicBool) -> bool {
        loop {
            if stop.load(Ordering::Relaxed) {
                return false;
            }
            let now = Instant::now();
            if self.available(now) >= 1 {
                self.take(1);
                return true;
            }
            std::thread::sleep(self.wait_for_one(now).min(NAP));
        }
    }
}

/// When the probes of one stream go: from `start`, `per_s` a second, Poisson
/// gaps drawn from `poisson_seed` when given, else evenly spaced.
#[derive(Clone, Copy, Debug)]
pub struct ProbePlan {
    pub start: Instant,
    pub per_s: f64,
    pub poisson_seed: Option<u64>,
}

impl ProbePlan {
    /// The plan's send times. Drawn twice, by the sending side and by the
    /// side that times the echoes, they are the same times.
    pub fn schedule(&self) -> Schedule {
        Schedule::new(self.start, self.per_s, self.poisson_seed)
    }
}

/// The scheduled send times of open-loop probes: `start`, then gaps of
/// 1/rate (constant) or exponential gaps of that mean (Poisson, from a
/// seeded generator, so both ends of a probe can draw the same times).
#[derive(Debug)]
pub struct Schedule {
    next: Instant,
    gap_s: f64,
    poisson: Option<StdRng>,
}

impl Schedule {
    pub fn new(start: Instant, per_s: f64, poisson_seed: Option<u64>) -> Schedule {
        Schedule { next: start, gap_s: 1.0 / per_s, poisson: poisson_seed.map(StdRng::seed_from_u64) }
    }

    /// The next scheduled time, and moves past it.
    pub fn advance(&mut self) -> Instant {
        let at = self.next;
        let gap = match &mut self.poisson {
            // Inverse transform: -ln(U) · mean, U in (0, 1].
            Some(rng) => -(1.0 - rng.gen::<f64>()).ln() * self.gap_s,
            None => self.gap_s,
        };
        self.next += Duration::from_secs_f64(gap);
        at
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_up_sender_makes_up_its_credit_in_bounded_bursts() {
        let mut p = Pacer::new(1000.0);
        let start = p.rate.origin;
        assert_eq!(p.burst(), BURST_MESSAGES, "8 messages beat 1 ms of 1000 msg/s");
        assert_eq!(p.available(start), 0, "the rate bucket starts empty: the long run is exact");
        assert_eq!(p.wait_for_one(start), Duration::from_millis(1));
        // Held up for 50 ms: 50 earned, kept, and made up 8 at a time.
        let later = start + Duration::from_millis(50);
        assert_eq!(p.available(later), 8, "no more than the peak bucket back to back");
        p.take(8);
        assert_eq!(p.available(later), 0);
        // The peak bucket refills at twice the rate: the next in 0.5 ms.
        assert_eq!(p.wait_for_one(later), Duration::from_micros(500));
        // Held up for a second: only 100 ms of credit (100 messages) is kept.
        let mut q = Pacer::new(1000.0);
        let after = q.rate.origin + Duration::from_secs(1);
        assert!((q.rate.tokens(after) - 100.0).abs() < 1e-6);
        assert_eq!(Pacer::new(1e6).burst(), 1000.0, "1 ms of 1M msg/s");
    }

    #[test]
    fn a_paced_sender_keeps_the_rate() {
        let stop = AtomicBool::new(false);
        let mut p = Pacer::new(2000.0);
        let start = Instant::now();
        let sent = (0..200).take_while(|_| p.next(&stop)).count();
        let elapsed = start.elapsed().as_secs_f64();
        // 200 at 2000/s: 100 ms (the 200th is due at exactly 100 ms).
        assert_eq!(sent, 200);
        assert!((0.099..0.15).contains(&elapsed), "{elapsed} s for 200 paced messages");
        stop.store(true, Ordering::Relaxed);
        assert!(!p.next(&stop), "a stop ends the wait");
    }

    #[test]
    fn schedules_are_even_or_poisson_with_the_rates_mean() {
        let start = Instant::now();
        let mut even = Schedule::new(start, 100.0, None);
        let times: Vec<Instant> = (0..3).map(|_| even.advance()).collect();
        assert_eq!(times, [start, start + Duration::from_millis(10), start + Duration::from_millis(20)]);
        let mut poisson = Schedule::new(start, 1000.0, Some(7));
        let last = (0..10_000).map(|_| poisson.advance()).last().unwrap();
        let mean_gap = (last - start).as_secs_f64() / 9_999.0;
        assert!((0.00095..0.00105).contains(&mean_gap), "mean gap {mean_gap} s");
        let mut again = Schedule::new(start, 1000.0, Some(7));
        let mut other = Schedule::new(start, 1000.0, Some(7));
        assert!((0..100).all(|_| again.advance() == other.advance()), "one seed, one schedule");
    }
}
