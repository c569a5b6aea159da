//! Wall-clock time in ns, the one clock that means the same on every host
//! (to within the offset measured at Hello), and its mapping to `Instant`s.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Nanoseconds since the Unix epoch on this host's clock.
pub fn now_ns() -> i64 {
    let since = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    i64::try_from(since.as_nanos()).unwrap_or(i64::MAX)
}

/// One moment read on both clocks: the monotonic one the protocol's state
/// machines run on, and the wall clock whose ns the wire carries (the
/// coordinator's reading in Welcome, t0 in Start). Every conversion between
/// the two goes through here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Epoch {
    pub at: Instant,
    /// The wall clock at `at`, ns since the Unix epoch.
    pub ns: i64,
}

impl Epoch {
    /// Both clocks, read together.
    pub fn now() -> Epoch {
        Epoch { at: Instant::now(), ns: now_ns() }
    }

    /// The wall clock's ns at `t`, as far from `ns` as `t` is from `at`.
    pub fn ns_at(&self, t: Instant) -> i64 {
        let ns = |d: Duration| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX);
        if t >= self.at {
            self.ns.saturating_add(ns(t - self.at))
        } else {
            self.ns.saturating_sub(ns(self.at - t))
        }
    }

    /// The `Instant` at which the wall clock reads `ns` (this moment, for
    /// one before what the monotonic clock can show).
    pub fn instant_at(&self, ns: i64) -> Instant {
        let ahead = ns - self.ns;
        if ahead >= 0 {
            self.at + Duration::from_nanos(ahead as u64)
        } else {
            self.at.checked_sub(Duration::from_nanos(ahead.unsigned_abs())).unwrap_or(self.at)
        }
    }
}

/// A worker's view of the coordinator's clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerClock {
    /// Local clock minus coordinator clock.
    pub offset_ns: i64,
    pub rtt_ns: i64,
}

impl PeerClock {
    /// NTP's estimate from one exchange: the peer read `peer_ns` halfway
    /// between our `sent_ns` and `received_ns`.
    pub fn estimate(sent_ns: i64, peer_ns: i64, received_ns: i64) -> PeerClock {
        let midpoint = sent_ns + (received_ns - sent_ns) / 2;
        PeerClock { offset_ns: midpoint - peer_ns, rtt_ns: received_ns - sent_ns }
    }

    /// The local `Instant` at which the coordinator's clock reads `peer_ns`.
    pub fn instant_of(&self, peer_ns: i64) -> Instant {
        Epoch::now().instant_at(peer_ns + self.offset_ns)
    }

    /// The coordinator's clock at a local `Instant`.
    pub fn peer_ns_of(&self, at: Instant) -> i64 {
        Epoch::now().ns_at(at) - self.offset_ns
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offset_from_symmetric_exchange() {
        let c = PeerClock::estimate(1_000, 5_500, 2_000);
        assert_eq!((c.offset_ns, c.rtt_ns), (-4_000, 1_000));
    }

    #[test]
    fn an_epoch_maps_instants_to_wall_ns_and_back() {
        let epoch = Epoch { at: Instant::now(), ns: 5_000 };
        let later = epoch.at + Duration::from_nanos(1_500);
        assert_eq!(epoch.ns_at(later), 6_500);
        assert_eq!(epoch.instant_at(6_500), later);
        assert_eq!(epoch.ns_at(epoch.instant_at(4_000)), 4_000);
    }

    #[test]
    fn instants_round_trip() {
        let c = PeerClock { offset_ns: 123_456_789, rtt_ns: 0 };
        let at = Instant::now() + Duration::from_millis(50);
        let back = c.instant_of(c.peer_ns_of(at));
        let diff = if back > at { back - at } else { at - back };
        assert!(diff < Duration::from_millis(5), "{diff:?}");
    }
}
