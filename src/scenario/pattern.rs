//! `pattern`: which pairs of ranks a group's flows join (docs/SCENARIOS.md, "Patterns").

use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Pattern {
    /// Every sender to each receiver (incast).
    #[serde(alias = "all-to-one")]
    FanIn,
    /// Each sender to every receiver.
    OneToAll,
    /// Rank i to rank i + N/2, or the explicit `flows`.
    Pairwise,
    /// Every rank to every other rank.
    AllToAll,
    /// Rank i to rank i + 1, the last back to the first.
    Ring,
    /// A ring through the ranks in a seeded random order (GPCNeT's random
    /// ring): each sends to its successor in the permutation.
    RandomRing,
    /// Every pair of ranks once, in rounds of disjoint pairs (one phase per round).
    AllPairs,
    /// Exactly the `flows` listed.
    Explicit,
    /// Pairs across the spine, as many per leaf as it has uplinks (needs a topology).
    Bisection,
    /// Every pair of one rail once; with a topology those within a leaf
    /// and pairs across the spine for each two leaves (`watch`'s probe mesh).
    Mesh,
}

impl Pattern {
    pub fn name(self) -> &'static str {
        match self {
            Pattern::FanIn => "fan-in",
            Pattern::OneToAll => "one-to-all",
            Pattern::Pairwise => "pairwise",
            Pattern::AllToAll => "all-to-all",
            Pattern::Ring => "ring",
            Pattern::RandomRing => "random-ring",
            Pattern::AllPairs => "all-pairs",
            Pattern::Explicit => "explicit",
            Pattern::Bisection => "bisection",
            Pattern::Mesh => "mesh",
        }
    }
}
