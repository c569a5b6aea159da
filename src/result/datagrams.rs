//! A UD flow's losses (run.json's `flows[].datagrams`).

use serde::{Deserialize, Serialize};

/// UD's losses over the window, in messages.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Datagrams {
    /// Sends the sender completed in the window.
    pub sent: u64,
    /// Receives the receiver consumed in the window.
    pub received: u64,
    /// max(0, sent − received) / sent (0 with nothing sent).
    pub lost_ratio: f64,
}

impl Datagrams {
    pub fn new(sent: u64, received: u64) -> Datagrams {
        let lost = sent.saturating_sub(received);
        Datagrams { sent, received, lost_ratio: if sent == 0 { 0.0 } else { lost as f64 / sent as f64 } }
    }
}
