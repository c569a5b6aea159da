//! A paced group's offered load (run.json's `flows[].offered`,
//! `groups[].offered`), and an open-loop latency flow's probes
//! (`flows[].probes`).

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
/// An open-loop latency flow's probes in the window: those its schedule
/// put there against those whose echo was timed.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Probes {
    /// ⌊window × rate⌋ (per stream, summed): what any window of that length
    /// holds of an evenly spaced schedule (one more may fall on its edge;
    /// a Poisson schedule's count varies about it by √due).
    pub due: u64,
    /// Probes scheduled in the window whose echo came back (by the end of
    /// the drain): the latency's `samples`.
    pub echoed: u64,
    /// max(0, due − echoed) / due: probes lost or stalled past the drain.
    pub lost_ratio: f64,
}

impl Probes {
    /// The probes of a flow of `group` that timed `echoed` echoes in a
    /// window of `window_s`; `None` unless the group is open-loop latency.
    pub fn of(group: &GroupPlan, window_s: f64, echoed: u64) -> Option<Probes> {
        if group.mode != Mode::Latency {
            return None;
        }
        let streams = u64::from(group.streams.max(1));
        let per_stream = group.offered_msgs_per_s()? / streams as f64;
        let due = streams * (window_s * per_stream + 1e-9).floor() as u64;
        let lost = due.saturating_sub(echoed);
        Some(Probes { due, echoed, lost_ratio: if due == 0 { 0.0 } else { lost as f64 / due as f64 } })
    }
}
