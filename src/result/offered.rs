//! A paced group's offered load (run.json's `flows[].offered`,
//! `groups[].offered`).

use serde::{Deserialize, Serialize};

use crate::metrics::stats;
use crate::plan::GroupPlan;
use crate::scenario::Mode;

/// Offered load against what was delivered in the window.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Offered {
    /// Offered payload rate, Gb/s (messages per second × message size × 8 / 1e9).
    pub gbps: f64,
    /// Offered messages per second (probes per second for open-loop latency).
    pub msgs_per_s: f64,
    /// Delivered / offered: Gb/s over offered Gb/s for bandwidth, messages
    /// (echoes) per second over offered for open-loop latency; 1 is exact.
    pub delivered_ratio: f64,
}

impl Offered {
    /// What `flows` (each its delivered Gb/s and messages per second) of a
    /// paced group offered together, and the part delivered: bandwidth by
    /// bytes, open-loop probes by echoes.
    pub fn of(group: &GroupPlan, flows: &[(f64, f64)]) -> Option<Offered> {
        let per_flow = group.offered_msgs_per_s()?;
        let msgs_per_s = per_flow * flows.len() as f64;
        let gbps = msgs_per_s * group.message_size.bytes() as f64 * 8.0 / 1e9;
        let (delivered, asked) = match group.mode {
            Mode::Bandwidth => (stats::total(flows.iter().map(|f| f.0)), gbps),
            Mode::Latency => (stats::total(flows.iter().map(|f| f.1)), msgs_per_s),
        };
        let delivered_ratio = if asked > 0.0 { delivered / asked } else { 0.0 };
        Some(Offered { gbps, msgs_per_s, delivered_ratio })
    }
}
