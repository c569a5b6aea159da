//! Data-path transports: endpoints, connecting, the hot loops and their
//! counters. A transport knows nothing of hosts or scenarios.

pub mod memory;
pub mod pace;
pub mod rdma;
pub(crate) mod task;
pub mod tcp;
pub mod validation;

use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

/// Which end of a flow a rank plays. The sender initiates (TCP: writes;
/// RDMA: every WR, the ping of a ping-pong); the receiver accepts, exposes
/// memory, keeps receives posted or answers pings.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Side {
    Sender,
    Receiver,
}

impl Side {
    /// The end's name in a sentence: `sender`, `receiver`.
    pub fn name(self) -> &'static str {
        match self {
            Side::Sender => "sender",
            Side::Receiver => "receiver",
        }
    }
}

/// Running totals of one end of one flow, shared by its streams and read by
/// the sampler. Relaxed ordering: each counter is only ever summed.
#[derive(Debug, Default)]
pub struct FlowCounters {
    pub bytes: AtomicU64,
    pub messages: AtomicU64,
    /// Data validation's counts (untouched when the group does not validate).
    pub dv: validation::DvCounters,
}

impl FlowCounters {
    pub fn add(&self, bytes: u64, messages: u64) {
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
        if messages > 0 {
            self.messages.fetch_add(messages, Ordering::Relaxed);
        }
    }

    pub fn read(&self) -> Counts {
        Counts { bytes: self.bytes.load(Ordering::Relaxed), messages: self.messages.load(Ordering::Relaxed) }
    }
}

/// What one flow end moved: its counters as read, what they grew by over
/// one interval, or such growths summed. Crosses the wire in a rank's
/// interval readings.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    pub bytes: u64,
    pub messages: u64,
}

impl Counts {
    /// Both counts added, held at the largest count rather than wrapping.
    pub fn saturating_add(self, other: Counts) -> Counts {
        Counts { bytes: self.bytes.saturating_add(other.bytes), messages: self.messages.saturating_add(other.messages) }
    }

    /// What moved since the totals `was` (counters only grow; a reading
    /// behind `was` is nothing).
    pub fn since(self, was: Counts) -> Counts {
        Counts { bytes: self.bytes.saturating_sub(was.bytes), messages: self.messages.saturating_sub(was.messages) }
    }
}
