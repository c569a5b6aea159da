//! Data validation in the summary: one line per phase whose flows were
//! validated, with how many messages were checked and every bad flow.

use crate::result::PhaseResult;

/// "data validation: 4 flows, 81234 messages checked, 0 bad", or the bad flows.
pub fn line(p: &PhaseResult) -> Option<String> {
    let validated: Vec<_> = p.flows.iter().filter(|f| f.dv_errors.is_some()).collect();
    if validated.is_empty() {
        return None;
    }
    let checked: u64 = validated.iter().filter_map(|f| f.dv_checked).sum();
    let bad: Vec<String> = validated.iter().filter_map(|f| f.bad_data()).collect();
    let n = validated.len();
    Some(match bad.is_empty() {
        true => format!("data validation: {n} flow(s), {checked} messages checked, none bad"),
        false => format!("DATA VALIDATION FAILED: {}", bad.join("; ")),
    })
}
