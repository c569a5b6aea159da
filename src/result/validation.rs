//! Data validation in the result: a flow whose checking end found a
//! message off its pattern fails the run, naming the flow and where.

use crate::result::{FlowResult, RunResult, RunStatus};

impl FlowResult {
    /// "flow 3 (g, h1 → h2): 12 of 4096 messages bad, the first at byte 77
    /// of message 4 on lane 0", for a flow with bad data.
    pub fn bad_data(&self) -> Option<String> {
        let errors = self.dv_errors.filter(|&e| e > 0)?;
        let checked = self.dv_checked.unwrap_or(0);
        let at = self.dv_first_bad.map_or_else(String::new, |b| {
            format!(", the first at byte {} of message {} on lane {}", b.offset, b.message, b.lane)
        });
        Some(format!(
            "flow {} ({}, {} → {}): {errors} of {checked} messages bad{at}",
            self.id, self.group, self.src_host, self.dst_host
        ))
    }
}

impl RunResult {
    /// A run in which data came out wrong failed, whatever else it did:
    /// its numbers measured a fabric that corrupts.
    pub fn fail_on_bad_data(&mut self) {
        let bad: Vec<String> = self
            .phases
            .iter()
            .flat_map(|p| p.flows.iter().filter_map(|f| f.bad_data().map(|b| format!("phase {}: {b}", p.index))))
            .collect();
        if !bad.is_empty() && !matches!(self.status, RunStatus::Failed { .. }) {
            self.status = RunStatus::Failed { error: format!("data validation failed: {}", bad.join("; ")) };
        }
    }
}
