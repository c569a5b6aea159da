//! Wall-clock time in ns, the one clock that means the same on every host
//! (to within the offset measured at Hello), and its mapping to `Instant`s.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Nanoseconds since the Unix epoch on this host's clock.
pub fn now_ns() -> i64 {
    let since = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    i64::try_from(since.as_nanos()).unwrap_or(i64::MAX)
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
        let local_ns = peer_ns + self.offset_ns;
        let (now, now_ns) = (Instant::now(), now_ns());
        let ahead = local_ns - now_ns;
        if ahead >= 0 {
            now + Duration::from_nanos(ahead as u64)
        } else {
            now.checked_sub(Duration::from_nanos(ahead.unsigned_abs())).unwrap_or(now)
        }
    }

    /// The coordinator's clock at a local `Instant`.
    pub fn peer_ns_of(&self, at: Instant) -> i64 {
        let (now, now_ns) = (Instant::now(), now_ns());
        let local_ns =
            if at >= now { now_ns + (at - now).as_nanos() as i64 } else { now_ns - (now - at).as_nanos() as i64 };
        local_ns - self.offset_ns
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
    fn instants_round_trip() {
        let c = PeerClock { offset_ns: 123_456_789, rtt_ns: 0 };
        let at = Instant::now() + Duration::from_millis(50);
        let back = c.instant_of(c.peer_ns_of(at));
        let diff = if back > at { back - at } else { at - back };
        assert!(diff < Duration::from_millis(5), "{diff:?}");
    }
}
