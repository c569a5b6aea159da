//! A group as the plan holds it: its settings resolved once from the
//! scenario's `[[group]]` (defaults applied), each fact in one field. The
//! request an RDMA flow obeys is made from them, never stored beside them.

use serde::{Deserialize, Serialize};

use super::{Mode, Op, Pattern, Placement, Rate, RdmaParams, RdmaSetup, Schedule, Transport};
use crate::scenario::GroupSpec;
use crate::units::ByteSize;

/// The transport settings a group's flows share.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(into = "Stored", from = "Stored")]
pub struct GroupPlan {
    pub index: usize,
    pub name: String,
    pub pattern: Pattern,
    pub transport: Transport,
    pub op: Op,
    pub mode: Mode,
    /// Bytes per message (an atomic's operand for atomics).
    pub message_size: ByteSize,
    pub streams: u32,
    /// Where the group's stream threads run.
    pub placement: Placement,
    /// RDMA groups: memory, GPU and knobs; with the group's op, mode and
    /// size they make each flow's request ([`GroupPlan::rdma_request`]).
    pub rdma: Option<RdmaSetup>,
    /// Offered load per flow (`rate`); `None`: unpaced.
    pub rate: Option<Rate>,
    /// Open-loop latency groups (latency with a `rate`): the probes'
    /// schedule; `None`: closed loop (ping-pong).
    pub schedule: Option<Schedule>,
    /// TCP groups: the DSCP both ends mark the streams with (validated 0..=63);
    /// `None`: the sockets' default.
    pub dscp: Option<u8>,
    /// Data validation (`validate`): senders write each message's pattern,
    /// receivers (readers) check it (`transport::validation`).
    pub validate: bool,
}

impl GroupPlan {
    /// The group `spec` describes, as group `index` of its phase: every
    /// default applied here, for `run` and `pair` alike.
    pub fn from_spec(index: usize, spec: &GroupSpec) -> GroupPlan {
        GroupPlan {
            index,
            name: spec.name.clone(),
            pattern: spec.pattern,
            transport: spec.transport,
            op: spec.effective_op(),
            mode: spec.mode,
            message_size: spec.effective_message_size(),
            streams: spec.streams,
            // Not given: RDMA threads go near their NIC (`cores` wins when given).
            placement: Placement {
                cores: spec.cores.clone(),
                numa: spec.numa.or_default_for(spec.transport == Transport::Rdma),
            },
            rdma: spec.rdma_setup(),
            rate: spec.rate,
            schedule: match (spec.mode, spec.rate) {
                (Mode::Latency, Some(_)) => Some(spec.schedule.unwrap_or_default()),
                _ => None,
            },
            // Validated to 0..=63 with the scenario.
            dscp: spec.dscp.map(|d| d as u8),
            validate: spec.validate,
        }
    }

    /// RDMA groups: what every flow is asked (op, mode, size and the knobs).
    pub fn rdma_request(&self) -> Option<RdmaParams> {
        self.rdma.as_ref().map(|setup| setup.request(self.op, self.mode, self.message_size.bytes()))
    }

    /// What one flow offers, in messages per second (`None`: unpaced).
    pub fn offered_msgs_per_s(&self) -> Option<f64> {
        self.rate.map(|r| r.messages_per_s(self.message_size.bytes()))
    }

    /// Whether the sender checks a validating flow's data: the reader of
    /// RDMA read does (it fetches the responder's pattern); else the receiver.
    pub fn validation_checked_by_sender(&self) -> bool {
        self.transport == Transport::Rdma && self.op == Op::Read
    }

    /// Whether a flow's bytes are counted where they arrive: the receiver
    /// takes part in TCP, RDMA send and write-with-immediate; one-sided
    /// ops are counted at the initiator.
    pub fn counted_at_receiver(&self) -> bool {
        self.transport == Transport::Tcp || self.op.needs_receives()
    }
}

/// A group as run.json and the control wire carry it: the RDMA request
/// whole (op, mode and size beside the knobs), as every run.json has it.
#[derive(Serialize, Deserialize)]
struct Stored {
    index: usize,
    name: String,
    pattern: Pattern,
    transport: Transport,
    op: Op,
    mode: Mode,
    message_size: ByteSize,
    streams: u32,
    #[serde(default)] // absent from schema-1 run.json (nothing was pinned then)
    placement: Placement,
    /// One object in run.json, as it always was.
    #[serde(default, with = "crate::scenario::rdma::stored")]
    rdma: Option<RdmaParams>,
    // These cross the wire: no skip_serializing_if.
    #[serde(default)]
    rate: Option<Rate>,
    #[serde(default)]
    schedule: Option<Schedule>,
    #[serde(default)]
    dscp: Option<u8>,
    #[serde(default)]
    validate: bool,
}

impl From<GroupPlan> for Stored {
    fn from(group: GroupPlan) -> Self {
        let rdma = group.rdma_request();
        let GroupPlan {
            index,
            name,
            pattern,
            transport,
            op,
            mode,
            message_size,
            streams,
            placement,
            rate,
            schedule,
            dscp,
            validate,
            ..
        } = group;
        Stored {
            index,
            name,
            pattern,
            transport,
            op,
            mode,
            message_size,
            streams,
            placement,
            rdma,
            rate,
            schedule,
            dscp,
            validate,
        }
    }
}

impl From<Stored> for GroupPlan {
    /// The request's op, mode and size are the group's own.
    fn from(stored: Stored) -> Self {
        let Stored {
            index,
            name,
            pattern,
            transport,
            op,
            mode,
            message_size,
            streams,
            placement,
            rdma,
            rate,
            schedule,
            dscp,
            validate,
        } = stored;
        let rdma = rdma.map(RdmaSetup::from);
        GroupPlan {
            index,
            name,
            pattern,
            transport,
            op,
            mode,
            message_size,
            streams,
            placement,
            rdma,
            rate,
            schedule,
            dscp,
            validate,
        }
    }
}
