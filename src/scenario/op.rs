//! The verb and the mode of a group's flows, one type each for the
//! scenario, the plan, the CLI and the data path. Their defaults (TCP
//! sends, RDMA writes; bandwidth) are applied in one place,
//! `GroupSpec::effective_op` and the field's `#[serde(default)]`.

use serde::{Deserialize, Serialize};

/// The operation of a group: TCP streams `send`; RDMA flows any verb.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Op {
    /// A stream of messages from sender to receiver (TCP; RDMA send/recv).
    Send,
    /// RDMA write (the receiver's CPU is not involved).
    Write,
    /// RDMA write with immediate: the receiver consumes a posted receive per message.
    #[serde(alias = "write_imm")]
    WriteImm,
    Read,
    #[serde(alias = "send_imm")]
    SendImm,
    /// 8-byte atomic fetch-and-add (add = 1).
    #[serde(alias = "fetch_add")]
    FetchAdd,
    /// 8-byte atomic compare-and-swap (compare = 0, swap = `rdma::CMP_SWAP_VALUE`).
    #[serde(alias = "cmp_swap")]
    CmpSwap,
}

impl Op {
    pub const ALL: [Op; 7] = [Op::Write, Op::WriteImm, Op::Read, Op::Send, Op::SendImm, Op::FetchAdd, Op::CmpSwap];

    /// The op `text` names in either spelling (`write_imm`, `write-imm`).
    pub fn named(text: &str) -> Option<Op> {
        let snake = text.replace('-', "_");
        Op::ALL.into_iter().find(|op| op.name() == snake)
    }

    /// perftest's spelling (`write_imm`), as messages and pair names say it.
    pub fn name(self) -> &'static str {
        match self {
            Op::Write => "write",
            Op::WriteImm => "write_imm",
            Op::Read => "read",
            Op::Send => "send",
            Op::SendImm => "send_imm",
            Op::FetchAdd => "fetch_add",
            Op::CmpSwap => "cmp_swap",
        }
    }

    pub fn is_atomic(self) -> bool {
        matches!(self, Op::FetchAdd | Op::CmpSwap)
    }

    /// The receiver consumes posted receives (two-sided, or write with
    /// immediate), so the receiving end counts what arrives (else only the
    /// initiator can).
    pub fn needs_receives(self) -> bool {
        matches!(self, Op::Send | Op::SendImm | Op::WriteImm)
    }

    /// Ops whose payload may go inline in the WQE.
    pub fn can_inline(self) -> bool {
        matches!(self, Op::Write | Op::WriteImm | Op::Send | Op::SendImm)
    }
}

/// An RDMA request's op as it has always been written there: perftest's
/// spelling (`write_imm`); read in either spelling. A string in every
/// format, the wire's included.
pub mod perftest_name {
    use serde::de::Error as _;
    use serde::{Deserialize, Deserializer, Serializer};

    use super::Op;

    pub fn serialize<S: Serializer>(op: &Op, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(op.name())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Op, D::Error> {
        let text = String::deserialize(d)?;
        Op::named(&text).ok_or_else(|| {
            let known: Vec<&str> = Op::ALL.iter().map(|op| op.name()).collect();
            D::Error::custom(format!("`{text}` is not an operation; the operations are {}", known.join(", ")))
        })
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Streams as fast as they go: Gb/s and messages/s.
    #[default]
    Bandwidth,
    /// One message at a time, echoed back: round-trip times. RDMA: ping-pong
    /// (write, send) or one outstanding read or atomic at a time.
    Latency,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_spellings_read_and_a_request_writes_perftests() {
        #[derive(Debug, Serialize, Deserialize)]
        struct Request {
            #[serde(with = "perftest_name")]
            op: Op,
        }
        for text in ["\"write-imm\"", "\"write_imm\""] {
            assert_eq!(serde_json::from_str::<Op>(text).unwrap(), Op::WriteImm, "{text}");
        }
        assert_eq!(serde_json::to_string(&Op::WriteImm).unwrap(), "\"write-imm\"");
        let r: Request = serde_json::from_str(r#"{"op":"cmp-swap"}"#).unwrap();
        assert_eq!(serde_json::to_string(&r).unwrap(), r#"{"op":"cmp_swap"}"#);
        let wire = postcard::to_stdvec(&Request { op: Op::SendImm }).unwrap();
        assert_eq!(postcard::from_bytes::<Request>(&wire).unwrap().op, Op::SendImm);
        assert!(serde_json::from_str::<Request>(r#"{"op":"wirte"}"#)
            .unwrap_err()
            .to_string()
            .contains("not an operation"));
    }
}
