//! The one warning line of a phase whose TCP receivers refused strangers on
//! their data ports: rare, so a line for those flows rather than a column
//! for everyone.

use crate::result::PhaseResult;

/// Flows named in the line; the rest are counted.
const NAMED: usize = 8;

pub fn warning(p: &PhaseResult) -> Option<String> {
    let refused: Vec<_> = p.flows.iter().filter(|f| f.refused > 0).collect();
    if refused.is_empty() {
        return None;
    }
    let mut named: Vec<String> = refused
        .iter()
        .take(NAMED)
        .map(|f| format!("flow {} ({} → {}): {}", f.id, f.src_host, f.dst_host, f.refused))
        .collect();
    if refused.len() > NAMED {
        named.push(format!("and {} more flows", refused.len() - NAMED));
    }
    Some(format!(
        "warning: data connections refused (they did not prove they belong to the flow; addresses in the workers' log): {}",
        named.join(", ")
    ))
}
