//! The Flaps tables of a phase: each flow's dips below `[soak] flap` of its
//! median (the worst first) and every link event, on the window's time axis.

use crate::report::tables::table::Table;
use crate::result::flaps::PhaseFlaps;
use crate::result::{PhaseResult, RunResult};
use crate::units::number;

/// Flows a table lists (the most dip time first); run.json has them all.
const LISTED_FLOWS: usize = 32;
/// Dips named in a flow's row.
const NAMED_DIPS: usize = 3;

/// The phase's flaps: its flows' table and its links' table (empty tables
/// are left out by every writer).
pub fn tables(run: &RunResult, p: &PhaseResult) -> Vec<Table> {
    match run.flaps.iter().find(|f| f.phase == p.index) {
        Some(flaps) => vec![flows(flaps), links(flaps)],
        None => Vec::new(),
    }
}

fn flows(flaps: &PhaseFlaps) -> Table {
    let mut t = Table::new(
        format!("Flaps: flows below {}% of their median", flaps.threshold_pct),
        &[
            "flow",
            "src → dst",
            "median Gb/s",
            "lowest interval Gb/s",
            "at (s)",
            "dips",
            "dip time (s)",
            "dips (start s, for s)",
        ],
    );
    let mut listed: Vec<_> = flaps.flows.iter().collect();
    listed.sort_by(|a, b| b.dip_s.total_cmp(&a.dip_s).then(a.flow.cmp(&b.flow)));
    for f in listed.iter().take(LISTED_FLOWS) {
        let mut named: Vec<String> = f
            .spans
            .iter()
            .take(NAMED_DIPS)
            .map(|d| format!("{} for {}", secs(d.start_s), secs(d.duration_s)))
            .collect();
        if f.dips > NAMED_DIPS {
            named.push(format!("+{} more", f.dips - NAMED_DIPS));
        }
        t.rows.push(vec![
            f.flow.to_string(),
            format!("{} → {}", f.src_host, f.dst_host),
            number(f.median_gbps, 3),
            number(f.min_gbps, 3),
            secs(f.min_at_s),
            f.dips.to_string(),
            secs(f.dip_s),
            named.join(", "),
        ]);
    }
    if listed.len() > LISTED_FLOWS {
        let rest = &listed[LISTED_FLOWS..];
        let dipped = rest.iter().filter(|f| f.dips > 0).count();
        let mut row = vec![String::new(); t.header.len()];
        row[1] = format!("{} more flows ({dipped} with dips): run.json `flaps`", rest.len());
        t.rows.push(row);
    }
    t
}

fn links(flaps: &PhaseFlaps) -> Table {
    let mut t = Table::new(
        "Flaps: link events".into(),
        &["rank", "host", "device", "from (s)", "lasted (s)", "states", "counters moved"],
    );
    for l in &flaps.links {
        let counters: Vec<String> = l.counters.iter().map(|(k, v)| format!("{k} +{v}")).collect();
        t.rows.push(vec![
            l.rank.to_string(),
            l.host.clone(),
            l.device.clone(),
            secs(l.start_s),
            l.duration_s.map_or_else(|| "still down at the end".into(), secs),
            l.states.join(", "),
            counters.join(", "),
        ]);
    }
    t
}

/// Seconds on the window's axis: to a tenth, the resolution of a 100 ms interval.
fn secs(s: f64) -> String {
    format!("{s:.1}")
}
