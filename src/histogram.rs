//! Latency: the one histogram both transports record round trips into, the
//! recorder that keeps the round trips of the measurement window, and the one
//! summary of it that run.json carries.
//!
//! The histogram is HdrHistogram's (the `hdrhistogram` crate) over 1 ns …
//! 60 s at 3 significant digits: every value it reports is within 0.1 % of
//! the exact one (percentiles and `max` are the top of their bucket, `min`
//! the bottom, `mean` and `stdev` are taken from the bucket midpoints). A
//! round trip over 60 s counts as 60 s. Recording allocates nothing and
//! keeps every sample: there is no cap. On the wire (the rank report) a
//! histogram is its V2 encoding, which stores only the counts up to the
//! largest value, zero runs folded; docs/PERFORMANCE.md has its size and
//! record cost. Decoded, every histogram is the whole counts array (108 KiB)
//! however few bytes it took on the wire, so a decoder of frames from the
//! network gives each frame a budget of histograms ([`decode_within`]).

use std::cell::Cell;
use std::fmt;
use std::time::Instant;

use hdrhistogram::serialization::{DeserializeError, Deserializer as V2Deserializer, Serializer as _, V2Serializer};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The smallest round trip told apart from zero, in ns.
const LOWEST_NS: u64 = 1;
/// The largest round trip recorded as itself, in ns; longer ones count as this.
const HIGHEST_NS: u64 = 60_000_000_000;
/// Decimal digits kept of every value: 3 is 0.1 %.
const SIGNIFICANT_DIGITS: u8 = 3;

/// Round trips in ns. A count is a u32 (saturating: 4·10⁹ round trips in
/// one bucket), which halves the 27,648-slot array (108 KiB) that every
/// latency flow's histogram takes in the worker and in the coordinator.
#[derive(Clone, PartialEq)]
pub struct Histogram(hdrhistogram::Histogram<u32>);

impl Default for Histogram {
    fn default() -> Self {
        Histogram(
            hdrhistogram::Histogram::new_with_bounds(LOWEST_NS, HIGHEST_NS, SIGNIFICANT_DIGITS)
                .expect("the constant bounds are valid"),
        )
    }
}

impl fmt::Debug for Histogram {
    // The counts array has 27,648 slots: show what it says instead.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Histogram")
            .field("samples", &self.0.len())
            .field("min_ns", &self.0.min())
            .field("max_ns", &self.0.max())
            .finish()
    }
}

impl Histogram {
    pub fn record(&mut self, ns: u64) {
        self.0.saturating_record(ns);
    }

    pub fn merge(&mut self, other: &Histogram) {
        // Both have the same bounds (see `Deserialize`), so nothing is out of range.
        self.0.add(&other.0).expect("histograms of the same bounds add");
    }

    pub fn count(&self) -> u64 {
        self.0.len()
    }

    /// Summary in µs; `share` is the part of a round trip that is reported
    /// (0.5 for half round trip, as perftest does for ping-pong).
    pub fn summary(&self, share: f64) -> Option<LatencySummary> {
        let h = &self.0;
        if h.is_empty() {
            return None;
        }
        let us = |ns: f64| ns * share / 1e3;
        let q = |quantile: f64| us(h.value_at_quantile(quantile) as f64);
        Some(LatencySummary {
            samples: h.len(),
            min_us: us(h.min() as f64),
            max_us: us(h.max() as f64),
            typical_us: q(0.5),
            mean_us: us(h.mean()),
            stdev_us: us(h.stdev()),
            p99_us: q(0.99),
            p999_us: q(0.999),
        })
    }
}

impl Serialize for Histogram {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut bytes = Vec::new();
        V2Serializer::new().serialize(&self.0, &mut bytes).map_err(serde::ser::Error::custom)?;
        bytes.serialize(s)
    }
}

impl<'de> Deserialize<'de> for Histogram {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let bytes = Vec::<u8>::deserialize(d)?;
        let error = |what: BadHistogram| serde::de::Error::custom(format!("latency histogram: {what}"));
        check_v2_header(&bytes).map_err(error)?;
        take_from_budget().map_err(error)?;
        V2Deserializer::new()
            .deserialize(&mut bytes.as_slice())
            .map(Histogram)
            .map_err(|e| error(BadHistogram::Decode(e)))
    }
}

/// Why a latency histogram from the wire is refused before (or while) it is decoded.
#[derive(Debug, thiserror::Error)]
enum BadHistogram {
    #[error("{len} bytes, shorter than its header")]
    Short { len: usize },
    #[error("payload of {payload} bytes in {len} bytes")]
    Payload { payload: usize, len: usize },
    #[error("over {low}..{high} ns at {digits} digits, expected {LOWEST_NS}..{HIGHEST_NS} ns at {SIGNIFICANT_DIGITS}")]
    Bounds { low: u64, high: u64, digits: u32 },
    #[error("more histograms than this frame may carry")]
    OverBudget,
    #[error("{0}")]
    Decode(#[from] DeserializeError),
}

/// What the decode running on this thread may still allocate.
#[derive(Clone, Copy)]
struct Budget {
    /// Histograms left; `None`: no limit (outside [`decode_within`]).
    left: Option<usize>,
    /// A histogram was refused for want of budget.
    overdrawn: bool,
}

thread_local! {
    static BUDGET: Cell<Budget> = const { Cell::new(Budget { left: None, overdrawn: false }) };
}

/// What a decode under [`decode_within`] returned, and whether it was
/// refused a histogram: serde formats may drop the error's own text, so
/// this is how a caller tells an over-budget frame from a malformed one.
#[derive(Debug)]
pub struct Decoded<T> {
    pub value: T,
    pub overdrawn: bool,
}

/// Runs `decode` (a synchronous decode on this thread) letting it decode at
/// most `histograms` latency histograms: one more fails it, before its
/// counts array is allocated.
pub fn decode_within<T>(histograms: usize, decode: impl FnOnce() -> T) -> Decoded<T> {
    /// Puts the enclosing budget back, also when `decode` panics.
    struct Restore(Budget);
    impl Drop for Restore {
        fn drop(&mut self) {
            BUDGET.with(|b| b.set(self.0));
        }
    }
    let outer = BUDGET.with(|b| b.replace(Budget { left: Some(histograms), overdrawn: false }));
    let restore = Restore(outer);
    let value = decode();
    let overdrawn = BUDGET.with(|b| b.get().overdrawn);
    drop(restore);
    Decoded { value, overdrawn }
}

fn take_from_budget() -> Result<(), BadHistogram> {
    BUDGET.with(|cell| {
        let mut budget = cell.get();
        let result = match budget.left {
            None => Ok(()),
            Some(0) => {
                budget.overdrawn = true;
                Err(BadHistogram::OverBudget)
            }
            Some(n) => {
                budget.left = Some(n - 1);
                Ok(())
            }
        };
        cell.set(budget);
        result
    })
}

/// Length of V2's header: cookie, payload length, index offset, digits,
/// lowest, highest, int-to-double ratio (big-endian).
const V2_HEADER_LEN: usize = 40;

/// Checks what the decoder would allocate by before it runs: the payload
/// length against the bytes there are, the bounds against ours (so that
/// histograms from every rank merge).
fn check_v2_header(bytes: &[u8]) -> Result<(), BadHistogram> {
    let header = bytes.get(..V2_HEADER_LEN).ok_or(BadHistogram::Short { len: bytes.len() })?;
    let be32 = |at: usize| u32::from_be_bytes(header[at..at + 4].try_into().expect("4 bytes"));
    let be64 = |at: usize| u64::from_be_bytes(header[at..at + 8].try_into().expect("8 bytes"));
    let payload = be32(4) as usize;
    if payload > bytes.len() - V2_HEADER_LEN {
        return Err(BadHistogram::Payload { payload, len: bytes.len() });
    }
    let (digits, low, high) = (be32(12), be64(16), be64(24));
    if (digits, low, high) != (u32::from(SIGNIFICANT_DIGITS), LOWEST_NS, HIGHEST_NS) {
        return Err(BadHistogram::Bounds { low, high, digits });
    }
    Ok(())
}

/// The measurement window on this host's clock: what happens from `open`
/// to `close` counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    pub open: Instant,
    pub close: Instant,
}

impl Span {
    fn holds(&self, t: Instant) -> bool {
        t >= self.open && t <= self.close
    }
}

/// Records the round trips that start and end inside the measurement
/// window (all of them without one). Create it before the hot loop: it
/// allocates the histogram, `record` allocates nothing.
pub struct Recorder {
    window: Option<Span>,
    histogram: Histogram,
}

impl Recorder {
    pub fn new(window: Option<Span>) -> Recorder {
        Recorder { window, histogram: Histogram::default() }
    }

    /// One round trip, sent at `sent` and back at `back`.
    pub fn record(&mut self, sent: Instant, back: Instant) {
        if self.window.is_none_or(|w| w.holds(sent) && w.holds(back)) {
            self.histogram.record(u64::try_from((back - sent).as_nanos()).unwrap_or(u64::MAX));
        }
    }

    /// One open-loop probe, scheduled at `at` and back at `back`: it counts
    /// when it was scheduled inside the window, however late it came back
    /// (a stall near the close is the stall the probe is there to see).
    pub fn record_scheduled(&mut self, at: Instant, back: Instant) {
        if self.window.is_none_or(|w| w.holds(at)) {
            self.histogram.record(u64::try_from(back.saturating_duration_since(at).as_nanos()).unwrap_or(u64::MAX));
        }
    }

    pub fn into_histogram(self) -> Histogram {
        self.histogram
    }
}

/// Latency statistics as perftest names them, in µs; `typical` is the median.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct LatencySummary {
    pub samples: u64,
    pub min_us: f64,
    pub max_us: f64,
    pub typical_us: f64,
    pub mean_us: f64,
    pub stdev_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// Within the documented 0.1 %.
    fn close_to(got: f64, exact: f64) -> bool {
        (got - exact).abs() <= exact * 1e-3
    }

    #[test]
    fn summary_within_a_thousandth() {
        let mut h = Histogram::default();
        for ns in 1..=100_000u64 {
            h.record(ns * 10);
        }
        let s = h.summary(0.5).unwrap();
        assert_eq!(s.samples, 100_000);
        for (got, exact) in [
            (s.min_us, 0.005),
            (s.max_us, 500.0),
            (s.typical_us, 250.0),
            (s.mean_us, 250.0025),
            (s.p99_us, 495.0),
            (s.p999_us, 499.5),
            // Uniform over 0..500 µs: 500 / √12.
            (s.stdev_us, 144.3376),
        ] {
            assert!(close_to(got, exact), "{got} vs {exact}: {s:?}");
        }
        assert!(s.min_us <= s.typical_us && s.typical_us <= s.p99_us && s.p99_us <= s.p999_us && s.p999_us <= s.max_us);
        assert_eq!(Histogram::default().summary(1.0), None);
    }

    #[test]
    fn nothing_is_dropped_at_the_edges_of_the_range() {
        let mut h = Histogram::default();
        for ns in [0, 1, HIGHEST_NS, u64::MAX] {
            h.record(ns);
        }
        let s = h.summary(1.0).unwrap();
        assert_eq!(s.samples, 4);
        assert!(close_to(s.max_us, HIGHEST_NS as f64 / 1e3), "{s:?}");
    }

    #[test]
    fn merge_equals_recording_everything_once() {
        let (mut a, mut b, mut all) = (Histogram::default(), Histogram::default(), Histogram::default());
        for ns in [5, 900, 12_345, 7, 1 << 30] {
            a.record(ns);
            all.record(ns);
        }
        for ns in [3, 44_000, 8] {
            b.record(ns);
            all.record(ns);
        }
        a.merge(&b);
        assert_eq!(a, all);
        assert_eq!(a.count(), 8);
    }

    #[test]
    fn wire_form_round_trips_and_rejects_other_bounds() {
        let mut h = Histogram::default();
        h.record(1_000);
        h.record(2_000_000);
        let bytes = postcard::to_stdvec(&h).unwrap();
        assert!(bytes.len() < 64, "{} bytes", bytes.len());
        assert_eq!(postcard::from_bytes::<Histogram>(&bytes).unwrap(), h);

        // postcard drops custom messages: JSON carries the same bytes and keeps them.
        let decode = |v2: &[u8]| serde_json::from_str::<Histogram>(&serde_json::to_string(v2).unwrap()).unwrap_err();
        let v2 = postcard::from_bytes::<Vec<u8>>(&bytes).unwrap();
        let mut other = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 1_000, 2).unwrap();
        other.record(10).unwrap();
        let mut foreign = Vec::new();
        V2Serializer::new().serialize(&other, &mut foreign).unwrap();
        let err = decode(&foreign).to_string();
        assert!(err.contains("over 1..1000 ns at 2 digits, expected 1..60000000000 ns at 3"), "{err}");
        assert!(decode(&[7; 12]).to_string().contains("12 bytes, shorter than its header"));
        let mut huge = v2.clone();
        huge[4..8].copy_from_slice(&u32::MAX.to_be_bytes());
        assert!(decode(&huge).to_string().contains("payload of 4294967295 bytes"));
        let mut cookie = v2.clone();
        cookie[0] ^= 0xff;
        assert!(decode(&cookie).to_string().contains("cookie"));
        assert!(postcard::from_bytes::<Histogram>(&postcard::to_stdvec(&cookie).unwrap()).is_err());
    }

    #[test]
    fn a_decode_gets_only_the_histograms_of_its_budget() {
        let mut h = Histogram::default();
        h.record(5_000);
        let three = postcard::to_stdvec(&vec![h.clone(), h.clone(), h.clone()]).unwrap();
        let decode = || postcard::from_bytes::<Vec<Histogram>>(&three);
        let Decoded { value, overdrawn } = decode_within(3, decode);
        assert_eq!((value.unwrap().len(), overdrawn), (3, false));
        let Decoded { value, overdrawn } = decode_within(2, decode);
        assert!(value.is_err() && overdrawn, "the third of a budget of two is refused");
        let Decoded { value, overdrawn } = decode_within(0, || postcard::from_bytes::<Option<Histogram>>(&[0]));
        assert_eq!((value.unwrap(), overdrawn), (None, false), "no histogram, no budget needed");
        // Outside a budget (and after one, nested or not): no limit.
        let inner = decode_within(5, || decode_within(0, decode)).value;
        assert!(inner.value.is_err() && inner.overdrawn);
        assert_eq!(decode_within(1, || decode_within(3, decode).value.map(|v| v.len())).value.unwrap(), 3);
        assert_eq!(decode().unwrap().len(), 3);
    }

    #[test]
    fn every_sample_counts_far_past_two_to_the_twenty() {
        // 3 M round trips (the RDMA loop once kept the first 2^20 only).
        let mut r = Recorder::new(None);
        let t = Instant::now();
        for k in 0..3_000_000u64 {
            r.record(t, t + Duration::from_nanos(1_000 + k % 7_919));
        }
        let h = r.into_histogram();
        assert_eq!(h.count(), 3_000_000);
        let s = h.summary(1.0).unwrap();
        assert!(close_to(s.max_us, 8.918) && close_to(s.min_us, 1.0), "{s:?}");
    }

    #[test]
    fn recorder_keeps_the_round_trips_wholly_inside_the_window() {
        let t = Instant::now();
        let at = |us: u64| t + Duration::from_micros(us);
        let mut r = Recorder::new(Some(Span { open: at(100), close: at(200) }));
        r.record(at(50), at(110)); // starts before the window opens
        r.record(at(100), at(130)); // 30 µs, in
        r.record(at(150), at(200)); // 50 µs, in
        r.record(at(190), at(210)); // ends after it closes
        let s = r.into_histogram().summary(1.0).unwrap();
        assert_eq!(s.samples, 2);
        assert!(close_to(s.min_us, 30.0) && close_to(s.max_us, 50.0), "{s:?}");

        let mut all = Recorder::new(None);
        all.record(at(0), at(7));
        all.record(at(300), at(301));
        assert_eq!(all.into_histogram().count(), 2);
    }
}
