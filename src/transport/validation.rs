//! Data validation (a group's `validate = true`): every message's payload
//! is a pattern of its flow, its number in its lane (stream or rail) and
//! each byte's offset in it. The sender writes it into each message before
//! the message goes; the end that receives it (or reads it) checks every
//! byte of every message it got. A message with any byte off is one error;
//! the first bad byte is kept. Both cost throughput (a write and a read of
//! every payload byte by the CPU, or through the GPU driver), which is why
//! it is asked for per group and costs nothing when off.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

/// Flows are numbered as the plan numbers them (`plan::FlowId`).
pub type FlowNumber = u32;

/// The payload of one message: 8-byte words, each a mix of the message's
/// seed and the word's index, so no two words of a message, and no two
/// messages or flows, look alike.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pattern {
    seed: u64,
}

/// SplitMix64's finalizer: every input bit moves every output bit.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Pattern {
    /// Message `message` (from 0, in its lane) of flow `flow`.
    pub fn of(flow: FlowNumber, message: u64) -> Pattern {
        Pattern { seed: mix((u64::from(flow) << 40 ^ message).wrapping_add(0x9E37_79B9_7F4A_7C15)) }
    }

    fn value(self, index: u64) -> u64 {
        mix(self.seed ^ index.wrapping_mul(0x9E37_79B9_7F4A_7C15))
    }

    fn word(self, index: u64) -> [u8; 8] {
        self.value(index).to_le_bytes()
    }

    /// Writes the message's bytes `0..buf.len()` into `buf`.
    pub fn fill(self, buf: &mut [u8]) {
        let whole = (buf.len() / 8) as u64;
        let mut words = buf.chunks_exact_mut(8);
        for (index, chunk) in (&mut words).enumerate() {
            chunk.copy_from_slice(&self.word(index as u64));
        }
        let tail = words.into_remainder();
        tail.copy_from_slice(&self.word(whole)[..tail.len()]);
    }

    /// The first offset in the message at which `bytes` (its bytes from
    /// offset `start`) differ from the pattern. Whole aligned words are
    /// compared as numbers: a receiver checks every byte it gets, and a
    /// byte-slice comparison per word held one TCP stream to a quarter of
    /// its rate.
    pub fn first_bad(self, start: u64, bytes: &[u8]) -> Option<u64> {
        let head = (start.wrapping_neg() % 8) as usize;
        let head = head.min(bytes.len());
        if let Some(bad) = self.first_bad_bytes(start, &bytes[..head]) {
            return Some(bad);
        }
        let from = start + head as u64;
        let mut words = bytes[head..].chunks_exact(8);
        for (k, chunk) in (&mut words).enumerate() {
            let at = from + 8 * k as u64;
            let got = u64::from_le_bytes(chunk.try_into().expect("chunks of 8"));
            if got != self.value(at / 8) {
                return self.first_bad_bytes(at, chunk);
            }
        }
        let tail = words.remainder();
        self.first_bad_bytes(start + (bytes.len() - tail.len()) as u64, tail)
    }

    /// As `first_bad`, a byte at a time (the pieces around whole words).
    fn first_bad_bytes(self, start: u64, bytes: &[u8]) -> Option<u64> {
        bytes
            .iter()
            .zip(start..)
            .find_map(|(&b, offset)| (b != self.word(offset / 8)[(offset % 8) as usize]).then_some(offset))
    }
}

/// Where a flow's data first came out wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BadByte {
    /// The lane (TCP stream, RDMA rail) that carried it, from 0.
    pub lane: u32,
    /// The message's number in its lane, from 0.
    pub message: u64,
    /// The byte's offset in the message.
    pub offset: u64,
}

/// One lane's validation counters (one writer: the lane's thread).
#[derive(Debug, Default)]
pub struct DvCounters {
    checked: AtomicU64,
    errors: AtomicU64,
    first: OnceLock<BadByte>,
}

impl DvCounters {
    /// One message checked; `bad`: where it first differed.
    pub fn message(&self, bad: Option<BadByte>) {
        self.messages(1, bad);
    }

    /// `n` messages checked at once (RDMA: those one look at a slot
    /// covers), all bad where `bad` says.
    pub fn messages(&self, n: u64, bad: Option<BadByte>) {
        self.checked.fetch_add(n, Ordering::Relaxed);
        if let Some(bad) = bad {
            self.errors.fetch_add(n, Ordering::Relaxed);
            let _ = self.first.set(bad);
        }
    }

    pub fn read(&self) -> DvTally {
        DvTally {
            checked: self.checked.load(Ordering::Relaxed),
            errors: self.errors.load(Ordering::Relaxed),
            first_bad: self.first.get().copied(),
        }
    }
}

/// What one flow end checked, over the whole phase (warm-up included).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DvTally {
    /// Messages checked.
    pub checked: u64,
    /// Messages with at least one byte off the pattern.
    pub errors: u64,
    pub first_bad: Option<BadByte>,
}

impl DvTally {
    /// Two lanes' tallies as one: the first bad byte of the lowest lane.
    pub fn plus(self, other: DvTally) -> DvTally {
        DvTally {
            checked: self.checked + other.checked,
            errors: self.errors + other.errors,
            first_bad: self.first_bad.or(other.first_bad),
        }
    }
}

/// The receiving side of a byte stream of `size`-byte messages (TCP):
/// checks bytes as they come, whatever the reads' boundaries.
#[derive(Debug)]
pub struct StreamCheck {
    flow: FlowNumber,
    lane: u32,
    size: u64,
    message: u64,
    offset: u64,
    bad: Option<BadByte>,
}

impl StreamCheck {
    pub fn new(flow: FlowNumber, lane: u32, size: u64) -> StreamCheck {
        StreamCheck { flow, lane, size: size.max(1), message: 0, offset: 0, bad: None }
    }

    /// Checks `bytes`, the stream's next, counting each message it ends.
    pub fn check(&mut self, mut bytes: &[u8], counters: &DvCounters) {
        while !bytes.is_empty() {
            let take = ((self.size - self.offset) as usize).min(bytes.len());
            if self.bad.is_none() {
                let (message, lane) = (self.message, self.lane);
                self.bad = Pattern::of(self.flow, message)
                    .first_bad(self.offset, &bytes[..take])
                    .map(|offset| BadByte { lane, message, offset });
            }
            self.offset += take as u64;
            bytes = &bytes[take..];
            if self.offset == self.size {
                counters.message(self.bad.take());
                (self.message, self.offset) = (self.message + 1, 0);
            }
        }
    }
}

/// The sending side: the pattern of each next message, written into its
/// buffer, with the test hook's flipped byte where one is asked for.
#[derive(Debug)]
pub struct Stamp {
    flow: FlowNumber,
    message: u64,
    flip: Option<usize>,
}

impl Stamp {
    pub fn new(flow: FlowNumber) -> Stamp {
        Stamp { flow, message: 0, flip: flip_for(flow) }
    }

    /// Writes the next message's pattern into `buf`.
    pub fn next(&mut self, buf: &mut [u8]) {
        Pattern::of(self.flow, self.message).fill(buf);
        self.message += 1;
        flip(self.flip, buf);
    }
}

fn flip(at: Option<usize>, buf: &mut [u8]) {
    if let Some(byte) = at.and_then(|at| buf.get_mut(at)) {
        *byte ^= 0xFF;
    }
}

/// Message `message` of flow `flow`, `len` bytes, as its source sends it
/// (with the test hook's flipped byte, where one is asked for).
pub fn source(flow: FlowNumber, message: u64, len: usize) -> Vec<u8> {
    let mut buf = vec![0; len];
    Pattern::of(flow, message).fill(&mut buf);
    flip(flip_for(flow), &mut buf);
    buf
}

/// The test hook's variable: `FLOW:OFFSET` makes the sender of flow FLOW
/// flip the byte at OFFSET of every message it sends, so that the tests
/// see one flow fail validation. Read only in builds with the `testing`
/// feature (the test suite's), never in the tool users run.
pub const FLIP_ENV: &str = "FABRICBENCH_TEST_DV_FLIP";

/// The byte the hook flips in flow `flow`'s messages, if any.
#[cfg(feature = "testing")]
fn flip_for(flow: FlowNumber) -> Option<usize> {
    let value = std::env::var(FLIP_ENV).ok()?;
    let (f, offset) = value.split_once(':')?;
    (f.parse::<FlowNumber>().ok()? == flow).then(|| offset.parse().ok()).flatten()
}

#[cfg(not(feature = "testing"))]
fn flip_for(_: FlowNumber) -> Option<usize> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_differ_by_flow_message_and_offset_and_check_from_any_offset() {
        let mut a = vec![0u8; 100];
        Pattern::of(3, 7).fill(&mut a);
        let mut b = a.clone();
        Pattern::of(3, 8).fill(&mut b);
        assert_ne!(a, b, "another message");
        Pattern::of(4, 7).fill(&mut b);
        assert_ne!(a, b, "another flow");
        assert_ne!(a[..8], a[8..16], "another word");
        let p = Pattern::of(3, 7);
        assert_eq!(p.first_bad(0, &a), None);
        assert_eq!(p.first_bad(13, &a[13..61]), None, "unaligned pieces");
        a[42] ^= 1;
        assert_eq!(p.first_bad(0, &a), Some(42));
        assert_eq!(p.first_bad(41, &a[41..43]), Some(42));
        assert_eq!(p.first_bad(43, &a[43..]), None);
    }

    /// Every start, length and flipped byte of a few words, against a
    /// byte-at-a-time reading of `fill`'s output.
    #[test]
    fn first_bad_finds_the_first_changed_byte_of_any_piece() {
        let p = Pattern::of(5, 11);
        let mut message = vec![0u8; 48];
        p.fill(&mut message);
        for start in 0..17 {
            for len in 0..(48 - start) {
                let piece = &message[start..start + len];
                assert_eq!(p.first_bad(start as u64, piece), None, "{start}+{len}");
                for flip in 0..len {
                    let mut bad = piece.to_vec();
                    bad[flip] ^= 0x10;
                    assert_eq!(p.first_bad(start as u64, &bad), Some((start + flip) as u64), "{start}+{len} at {flip}");
                }
            }
        }
        let mut short = [0u8; 13];
        p.fill(&mut short);
        assert_eq!(short, message[..13], "a fill of any length is the message's first bytes");
    }

    #[test]
    fn a_stream_check_counts_messages_across_reads_and_keeps_the_first_bad_byte() {
        let mut stream = Vec::new();
        for message in 0..4 {
            let mut m = vec![0u8; 10];
            Pattern::of(1, message).fill(&mut m);
            stream.extend(m);
        }
        stream[23] ^= 0x80; // message 2, offset 3
        stream[37] ^= 0x80; // message 3, offset 7
        let counters = DvCounters::default();
        let mut check = StreamCheck::new(1, 2, 10);
        for piece in stream.chunks(7) {
            check.check(piece, &counters);
        }
        let bad = BadByte { lane: 2, message: 2, offset: 3 };
        assert_eq!(counters.read(), DvTally { checked: 4, errors: 2, first_bad: Some(bad) });
    }

    #[test]
    fn the_stamp_writes_each_next_message() {
        let mut stamp = Stamp::new(9);
        let mut buf = [0u8; 16];
        stamp.next(&mut buf);
        stamp.next(&mut buf);
        assert_eq!(Pattern::of(9, 1).first_bad(0, &buf), None);
    }
}
