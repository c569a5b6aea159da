//! Which shared completion queue each busy-polling RDMA shard of a rank
//! polls, chosen as its flow is prepared (a QP is made on its CQ): the
//! shards that one engine will step share one CQ per device.
//!
//! As `assign` does with lanes: one group per core a shard may use (per
//! device), each shard to the least loaded of them by its expected load.
//! The engines then place each group as one unit (`phase::engines`), so
//! a group's shards run together on one engine: with no more shards than
//! cores each has its own CQ and engine, as before; with a thousand on
//! eight cores, eight CQs.

use std::collections::HashMap;

use crate::transport::rdma::CqGroup;
use crate::worker::assign::Load;

/// The groups so far of one rank's phase.
#[derive(Default)]
pub struct CqGroups {
    slots: HashMap<Where, Vec<Slot>>,
    next: u32,
}

/// Shards of one device that may run on the same cores.
#[derive(PartialEq, Eq, Hash)]
struct Where {
    device: String,
    cores: Vec<usize>,
}

/// One group and the load of its shards so far.
struct Slot {
    group: CqGroup,
    load: f64,
}

impl CqGroups {
    /// The groups of `shards` shards, each expected to cost `load`, on
    /// `device`, that may run on `cores` (in order).
    pub fn place(&mut self, device: &str, cores: &[usize], load: Load, shards: usize) -> Vec<CqGroup> {
        let next = &mut self.next;
        let at = Where { device: device.to_string(), cores: cores.to_vec() };
        let slots = self.slots.entry(at).or_insert_with(|| {
            (0..cores.len().max(1))
                .map(|_| {
                    *next += 1;
                    Slot { group: CqGroup(*next - 1), load: 0.0 }
                })
                .collect()
        });
        (0..shards)
            .map(|_| {
                let slot = slots.iter_mut().min_by(|a, b| a.load.total_cmp(&b.load)).expect("one slot at least");
                slot.load += load.weight();
                slot.group
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_spread_over_one_group_per_core_by_load() {
        let mut g = CqGroups::default();
        let four = g.place("mlx5_0", &[0, 1], Load::Bandwidth, 4);
        assert_eq!(four[0], four[2], "{four:?}");
        assert_eq!(four[1], four[3]);
        assert_ne!(four[0], four[1], "two cores, two CQs");
        // A latency shard goes to the group with the lighter load, and more
        // shards of the same device and cores join the same groups.
        let paced = g.place("mlx5_0", &[0, 1], Load::Paced { bytes_per_s: 1e6 }, 1);
        let latency = g.place("mlx5_0", &[0, 1], Load::Latency, 1);
        assert_ne!(paced, latency, "the latency shard avoids the paced one's group");
        assert!(four.contains(&paced[0]) && four.contains(&latency[0]));
    }

    #[test]
    fn devices_and_cores_have_groups_of_their_own() {
        let mut g = CqGroups::default();
        let a = g.place("mlx5_0", &[0, 1], Load::Bandwidth, 1);
        let b = g.place("mlx5_1", &[0, 1], Load::Bandwidth, 1);
        let c = g.place("mlx5_0", &[2, 3], Load::Bandwidth, 1);
        let unpinned = g.place("mlx5_0", &[], Load::Bandwidth, 3);
        assert!(a != b && a != c && b != c, "{a:?} {b:?} {c:?}");
        assert!(unpinned.iter().all(|&x| x == unpinned[0]), "no cores known: one group");
    }
}
