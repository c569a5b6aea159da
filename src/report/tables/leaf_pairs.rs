//! The leaf-pair table: a run's bandwidth flows by the leaves of their
//! ends (`result::leaf_pairs`), shown when the run had a topology.

use crate::report::tables::table::Table;
use crate::result::leaf_pairs::LeafPairs;
use crate::units::number;

/// One row per pair of leaves: the flows between them and their Gb/s.
pub fn table(leaf_pairs: &LeafPairs) -> Table {
    let title = format!("Leaf pairs (topology {}; every counted phase)", leaf_pairs.topology);
    let mut t = Table::new(title, &["leaf A ↔ leaf B", "flows", "min Gb/s", "median Gb/s", "max Gb/s"]);
    for row in &leaf_pairs.rows {
        t.rows.push(vec![
            format!("{} ↔ {}", row.leaf_a, row.leaf_b),
            row.flows.to_string(),
            number(row.min_gbps, 3),
            number(row.median_gbps, 3),
            number(row.max_gbps, 3),
        ]);
    }
    t
}
