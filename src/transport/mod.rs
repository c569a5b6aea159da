//! Data-path transports: endpoints, connecting, the hot loops and their
//! counters. A transport knows nothing of hosts or scenarios.

pub mod rdma;
pub mod tcp;

use std::sync::atomic::{AtomicU64, Ordering};

/// Running totals of one end of one flow, shared by its streams and read by
/// the sampler. Relaxed ordering: each counter is only ever summed.
#[derive(Debug, Default)]
pub struct FlowCounters {
    pub bytes: AtomicU64,
    pub messages: AtomicU64,
}

impl FlowCounters {
    pub fn add(&self, bytes: u64, messages: u64) {
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
        if messages > 0 {
            self.messages.fetch_add(messages, Ordering::Relaxed);
        }
    }

    pub fn read(&self) -> (u64, u64) {
        (self.bytes.load(Ordering::Relaxed), self.messages.load(Ordering::Relaxed))
    }
}
