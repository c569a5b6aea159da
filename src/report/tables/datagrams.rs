//! UD's losses: what each unreliable-datagram flow's receiver got of what
//! its sender sent, in the summary (one line per phase) and under `pair`'s
//! table. RC and TCP flows have none, so a line rather than a column.

use crate::result::{Datagrams, PhaseResult};
use crate::units::number;

/// Flows named in the summary's line; the rest are counted.
const NAMED: usize = 8;

/// "19000 of 20000 messages received, 1000 lost (5.00%)".
pub fn describe(d: &Datagrams) -> String {
    let lost = d.sent.saturating_sub(d.received);
    format!("{} of {} messages received, {lost} lost ({}%)", d.received, d.sent, number(d.lost_ratio * 100.0, 2))
}

/// The summary's line for a phase with UD flows.
pub fn line(p: &PhaseResult) -> Option<String> {
    let ud: Vec<(String, &Datagrams)> = p
        .flows
        .iter()
        .filter_map(|f| Some((format!("flow {} ({} → {})", f.id, f.src_host, f.dst_host), f.datagrams.as_ref()?)))
        .collect();
    if ud.is_empty() {
        return None;
    }
    let mut named: Vec<String> = ud.iter().take(NAMED).map(|(flow, d)| format!("{flow}: {}", describe(d))).collect();
    if ud.len() > NAMED {
        named.push(format!("and {} more flows", ud.len() - NAMED));
    }
    Some(format!("UD (unreliable datagrams, losses not retried): {}", named.join("; ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn losses_in_messages_and_percent() {
        assert_eq!(describe(&Datagrams::new(20_000, 19_000)), "19000 of 20000 messages received, 1000 lost (5.00%)");
        // The window's edges can count a message at the receiver only: never negative.
        assert_eq!(describe(&Datagrams::new(100, 101)), "101 of 100 messages received, 0 lost (0.00%)");
        assert_eq!(Datagrams::new(0, 0).lost_ratio, 0.0);
    }
}
