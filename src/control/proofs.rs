//! The TCP data plane's per-flow proofs: HMAC-SHA256 keyed with the job
//! token over the job, phase and flow. Rank 0 sends each one inside the
//! authenticated control plane to the flow's two ends only (in their
//! `FlowRole`), so a stranger without the token cannot make one, and a
//! proof of one phase or flow opens no other.

use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::plan::FlowId;
use crate::transport::tcp::FlowProof;

/// Separates these MACs from any other use of the token.
const DOMAIN: &[u8] = b"fabricbench data plane v1";

pub struct FlowProofs {
    /// Keyed once; cloned per flow (thousands of flows per phase).
    keyed: Hmac<Sha256>,
    job: u64,
}

impl FlowProofs {
    pub fn new(token: &str, job: u64) -> FlowProofs {
        let keyed = Hmac::<Sha256>::new_from_slice(token.as_bytes()).expect("HMAC takes a key of any length");
        FlowProofs { keyed, job }
    }

    pub fn of(&self, phase: usize, flow: FlowId) -> FlowProof {
        let mut mac = self.keyed.clone();
        mac.update(DOMAIN);
        mac.update(&self.job.to_be_bytes());
        mac.update(&(phase as u64).to_be_bytes());
        mac.update(&flow.to_be_bytes());
        FlowProof(mac.finalize().into_bytes().into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_flow_phase_job_and_token_has_its_own_proof() {
        let proofs = FlowProofs::new("token", 1);
        let one = proofs.of(0, 0);
        assert_eq!(one, FlowProofs::new("token", 1).of(0, 0), "both ends get the same");
        for other in [
            proofs.of(0, 1),
            proofs.of(1, 0),
            FlowProofs::new("token", 2).of(0, 0),
            FlowProofs::new("tokem", 1).of(0, 0),
        ] {
            assert_ne!(one, other);
        }
    }
}
