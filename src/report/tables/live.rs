//! The line of a run read while it goes: the phase under way, as far as
//! the journal's interval lines go, and the dips of its aggregate so far.

use crate::result::flaps;
use crate::result::RunResult;
use crate::units::number;

/// Dips named in the line.
const NAMED_DIPS: usize = 3;

pub fn line(run: &RunResult) -> Option<String> {
    let live = run.live.as_ref()?;
    let name = run.plan.phases.get(live.phase).map_or("?", |p| p.name.as_str());
    let interval_s = run.scenario.run.interval.as_secs_f64();
    let boundaries = run.scenario.run.duration.as_secs_f64() / interval_s;
    let mut out = format!(
        "phase {} `{name}` under way: {} of {} interval(s) so far",
        live.phase,
        live.interval_gbps.len(),
        boundaries.ceil()
    );
    let (Some(last), Some(median)) = (live.interval_gbps.last(), crate::metrics::stats::median(&live.interval_gbps))
    else {
        return Some(out);
    };
    let (low_k, low) =
        live.interval_gbps.iter().copied().enumerate().min_by(|a, b| a.1.total_cmp(&b.1)).unwrap_or((0, 0.0));
    out += &format!(
        "; aggregate Gb/s: last {}, median {}, lowest {} (at {:.1} s)",
        number(*last, 3),
        number(median, 3),
        number(low, 3),
        low_k as f64 * interval_s
    );
    let threshold = run.scenario.soak.flap_pct();
    let dips = flaps::dips(&live.interval_gbps, interval_s, threshold);
    let mut named: Vec<String> =
        dips.iter().take(NAMED_DIPS).map(|d| format!("{:.1} s for {:.1} s", d.start_s, d.duration_s)).collect();
    if dips.len() > NAMED_DIPS {
        named.push(format!("+{} more", dips.len() - NAMED_DIPS));
    }
    out += &match dips.len() {
        0 => format!("; no dip below {threshold}% of the median"),
        n => format!("; {n} dip(s) below {threshold}% of the median: {}", named.join(", ")),
    };
    Some(out)
}
