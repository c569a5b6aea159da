//! Offered load against what was delivered: a row per paced group, then
//! one per flow of it (docs/METRICS.md, "Offered load").

use crate::report::tables::table::Table;
use crate::result::{Offered, PhaseResult};
use crate::scenario::Mode;
use crate::units::number;

/// Every paced group and its flows; empty when nothing was paced.
pub fn table(p: &PhaseResult) -> Table {
    let mut t = Table::new(
        "Offered load (rate) vs delivered".into(),
        &[
            "group / flow",
            "mode",
            "offered Gb/s",
            "offered msgs/s",
            "delivered Gb/s",
            "delivered msgs/s",
            "delivered %",
        ],
    );
    let mut row = |item: String, mode: Mode, o: &Offered, gbps: f64, msgs_per_s: f64| {
        let mode = match mode {
            Mode::Bandwidth => "bandwidth",
            Mode::Latency => "open-loop latency",
        };
        t.rows.push(vec![
            item,
            mode.to_string(),
            number(o.gbps, 3),
            number(o.msgs_per_s, 0),
            number(gbps, 3),
            number(msgs_per_s, 0),
            number(o.delivered_ratio * 100.0, 2),
        ]);
    };
    for g in &p.groups {
        let Some(o) = &g.offered else { continue };
        let flows: Vec<_> = p.flows.iter().filter(|f| f.group == g.name).collect();
        let msgs_per_s = flows.iter().map(|f| f.msgs_per_s).sum();
        row(format!("{} (group)", g.name), g.mode, o, g.aggregate_gbps, msgs_per_s);
        for f in flows {
            if let Some(o) = &f.offered {
                let item = format!("  flow {} {} ({}) → {} ({})", f.id, f.src, f.src_host, f.dst, f.dst_host);
                row(item, f.mode, o, f.gbps, f.msgs_per_s);
            }
        }
    }
    t
}
