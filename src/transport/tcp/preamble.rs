//! The first bytes of every TCP data stream: proof that the connection
//! belongs to this job, this flow and one stream slot of it. A receiver
//! checks them before a single byte counts; anything else is a stranger.

use std::fmt;

use serde::{Deserialize, Serialize};
use subtle::ConstantTimeEq;

/// "FBD" (fabricbench data) and the preamble's version.
const MAGIC: [u8; 4] = *b"FBD1";
/// Magic, flow id, stream index, proof.
pub const PREAMBLE_LEN: usize = 4 + 4 + 4 + 32;

/// A flow's secret, known only to its two ends: rank 0 derives it from the
/// job token and sends it inside the authenticated control plane.
#[derive(Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlowProof(pub [u8; 32]);

/// Never printed: a log or an error message must not leak a flow's proof.
impl fmt::Debug for FlowProof {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("FlowProof(…)")
    }
}

/// What both ends of one flow know of it: its id and its proof.
#[derive(Clone, Copy, Debug)]
pub struct FlowAuth {
    pub flow: u32,
    pub proof: FlowProof,
}

/// Why a connection to a flow's data port was closed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("sent {got} of the {PREAMBLE_LEN} preamble bytes before it closed or its time ran out")]
    Incomplete { got: usize },
    #[error("not a fabricbench data stream (bad magic)")]
    Magic,
    #[error("claims flow {claimed}")]
    WrongFlow { claimed: u32 },
    #[error("wrong proof for this flow")]
    Proof,
    #[error("claims stream {stream} of a flow of {streams}")]
    NoSuchStream { stream: u32, streams: u32 },
    #[error("claims stream {stream}, which is connected already")]
    Duplicate { stream: u32 },
    #[error("too many connections had not proved themselves yet")]
    Crowded,
    #[error("had not proved itself when every stream of the flow was in")]
    Late,
}

/// The preamble stream `stream` of a flow writes first.
pub fn encode(auth: &FlowAuth, stream: u32) -> [u8; PREAMBLE_LEN] {
    let mut out = [0; PREAMBLE_LEN];
    out[..4].copy_from_slice(&MAGIC);
    out[4..8].copy_from_slice(&auth.flow.to_be_bytes());
    out[8..12].copy_from_slice(&stream.to_be_bytes());
    out[12..].copy_from_slice(&auth.proof.0);
    out
}

/// Checks what a connection sent first against the flow; `taken[i]` says
/// whether stream i is connected already. The stream index it may take.
pub fn check(sent: &[u8], auth: &FlowAuth, taken: &[bool]) -> Result<u32, Refusal> {
    let sent: &[u8; PREAMBLE_LEN] = sent.try_into().map_err(|_| Refusal::Incomplete { got: sent.len() })?;
    if sent[..4] != MAGIC {
        return Err(Refusal::Magic);
    }
    let field = |at: usize| u32::from_be_bytes(sent[at..at + 4].try_into().expect("4 bytes"));
    let (claimed, stream) = (field(4), field(8));
    if claimed != auth.flow {
        return Err(Refusal::WrongFlow { claimed });
    }
    // Constant time: how much of a guess matched must not show in the timing.
    if !bool::from(sent[12..].ct_eq(&auth.proof.0)) {
        return Err(Refusal::Proof);
    }
    match taken.get(stream as usize) {
        None => Err(Refusal::NoSuchStream { stream, streams: taken.len() as u32 }),
        Some(true) => Err(Refusal::Duplicate { stream }),
        Some(false) => Ok(stream),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const AUTH: FlowAuth = FlowAuth { flow: 7, proof: FlowProof([0x5A; 32]) };

    #[test]
    fn the_flows_own_preamble_takes_its_stream() {
        assert_eq!(check(&encode(&AUTH, 1), &AUTH, &[true, false]), Ok(1));
    }

    #[test]
    fn a_wrong_proof_is_refused() {
        let other = FlowAuth { proof: FlowProof([0x5B; 32]), ..AUTH };
        assert_eq!(check(&encode(&other, 0), &AUTH, &[false]), Err(Refusal::Proof));
        let mut last_bit = encode(&AUTH, 0);
        last_bit[PREAMBLE_LEN - 1] ^= 1;
        assert_eq!(check(&last_bit, &AUTH, &[false]), Err(Refusal::Proof));
    }

    #[test]
    fn short_or_zero_bytes_are_refused() {
        let good = encode(&AUTH, 0);
        assert_eq!(check(&good[..PREAMBLE_LEN - 1], &AUTH, &[false]), Err(Refusal::Incomplete { got: 43 }));
        assert_eq!(check(&[], &AUTH, &[false]), Err(Refusal::Incomplete { got: 0 }));
        assert_eq!(check(&[0; PREAMBLE_LEN], &AUTH, &[false]), Err(Refusal::Magic));
    }

    #[test]
    fn another_flows_preamble_is_refused() {
        // Even with the right proof: a preamble names the one flow it is for.
        let other = FlowAuth { flow: 8, ..AUTH };
        assert_eq!(check(&encode(&other, 0), &AUTH, &[false]), Err(Refusal::WrongFlow { claimed: 8 }));
    }

    #[test]
    fn a_taken_or_missing_stream_is_refused() {
        assert_eq!(check(&encode(&AUTH, 0), &AUTH, &[true, false]), Err(Refusal::Duplicate { stream: 0 }));
        assert_eq!(
            check(&encode(&AUTH, 2), &AUTH, &[false, false]),
            Err(Refusal::NoSuchStream { stream: 2, streams: 2 })
        );
    }
}
