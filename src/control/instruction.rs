//! What the launcher tells a worker on its stdin after the job spec, one
//! JSON object per line (closing stdin is the other instruction: exit).
//! Rank 0 hands each to its coordinator.

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Instruction {
    /// End the run now; a running phase still gathers its partial reports,
    /// as on any failure.
    Stop { reason: String },
    /// The launcher has journaled this phase to disk: the next may start,
    /// so that a stop at any moment loses at most the phase that runs.
    Saved { phase: usize },
}
