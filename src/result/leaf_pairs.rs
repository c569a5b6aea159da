//! A run's bandwidth flows grouped by the leaves their ends are under, when
//! the run had a topology: per pair of leaves, how many flows and the
//! lowest, median and highest of their Gb/s (docs/METRICS.md, "Leaf
//! pairs"). A slow uplink shows as one leaf pair lower than the others.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::metrics::stats::median;
use crate::plan::{Plan, RankInfo};
use crate::result::{repeats, PhaseResult};
use crate::scenario::Mode;
use crate::topology::Topology;

/// run.json's `leaf_pairs`: the leaves of the ranks and the rows by them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LeafPairs {
    /// The topology file (or LLDP folder) the leaves come from, as given.
    pub topology: String,
    /// Each rank's leaf, by rank: where its own NIC (on a rail fabric) or
    /// its host's first NIC is cabled.
    pub rank_leaves: Vec<String>,
    /// One row per pair of leaves with a bandwidth flow between them, in
    /// the leaves' name order.
    pub rows: Vec<LeafPairRow>,
}

/// The bandwidth flows between two leaves, over every counted phase.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LeafPairRow {
    /// The leaves in name order; the same leaf twice for flows under one leaf.
    pub leaf_a: String,
    pub leaf_b: String,
    /// Flows measured between them (each direction of a pair is one flow).
    pub flows: usize,
    /// The lowest, median and highest of those flows' Gb/s.
    pub min_gbps: f64,
    pub median_gbps: f64,
    pub max_gbps: f64,
}

impl LeafPairs {
    /// The ranks of `plan` on `topology` (read from `path`), no rows yet.
    pub fn new(path: &Path, plan: &Plan, topology: &Topology) -> LeafPairs {
        let leaf = |r: &RankInfo| topology.attachments_of(&r.host, &r.devices).first().map(|a| a.leaf.0.clone());
        LeafPairs {
            topology: path.display().to_string(),
            rank_leaves: plan.ranks.iter().map(|r| leaf(r).unwrap_or_default()).collect(),
            rows: Vec::new(),
        }
    }

    /// The rows from the phases measured so far (as the all-pairs matrix,
    /// the counted repeats only).
    pub fn summarize(&mut self, plan: &Plan, phases: &[PhaseResult]) {
        let mut rates: BTreeMap<(&str, &str), Vec<f64>> = BTreeMap::new();
        let counted = phases.iter().filter(|p| repeats::counts(plan, p));
        for flow in counted.flat_map(|p| &p.flows).filter(|f| f.mode == Mode::Bandwidth) {
            let ends = (self.rank_leaves.get(flow.src), self.rank_leaves.get(flow.dst));
            let (Some(a), Some(b)) = ends else { continue };
            rates.entry((a.min(b), a.max(b))).or_default().push(flow.gbps);
        }
        self.rows = rates
            .into_iter()
            .map(|((a, b), gbps)| LeafPairRow {
                leaf_a: a.to_string(),
                leaf_b: b.to_string(),
                flows: gbps.len(),
                min_gbps: gbps.iter().copied().fold(f64::INFINITY, f64::min),
                median_gbps: median(&gbps).unwrap_or_default(),
                max_gbps: gbps.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            })
            .collect();
    }
}
