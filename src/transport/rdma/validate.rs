//! Data validation on RC bandwidth flows (`validate = true`). Every WR of
//! a QP posts from, and every receive lands in, that QP's one slot, so the
//! slot's pattern is fixed for the phase: message number = the QP's index
//! in the flow (the lane in `BadByte`). The end the data comes from (write,
//! send: the sender; read: the responder) fills its slots before the
//! endpoints are published, so before any peer can touch them. What the
//! checking end proves (docs/RDMA.md, "Data validation"):
//! - send: after every poll that completed receives on a QP, and before
//!   they are posted again, the slot holds the pattern, every byte;
//! - read: after every poll that completed reads on a QP, the reader's
//!   slot holds the responder's pattern, every byte;
//! - write: at the end of the phase, each of the responder's slots holds
//!   the pattern (the responder's CPU sees no write as it lands).
//!
//! GPU memory is filled and read back through its provider (the driver).

use super::connect::{FlowResources, PreparedFlow, Shard};
use super::error::{GpuMemoryError, RdmaError};
use crate::plan::Op;
use crate::transport::memory::MemoryError;
use crate::transport::validation::{self, BadByte, FlowNumber, Pattern};
use crate::transport::{FlowCounters, Side};

impl PreparedFlow {
    /// Validates the flow's data as flow `flow`: the data's source fills
    /// its slots with their patterns now (GPU memory: through the driver).
    pub fn with_validation(mut self, flow: FlowNumber) -> Result<Self, RdmaError> {
        let r = &self.res;
        if r.side == source(r) {
            let len = r.params.effective_message_size() as usize;
            for q in r.shards.iter().flat_map(|s| &s.qps) {
                let pattern = validation::source(flow, q.index as u64, len);
                r.arena.write_bytes(q.local_off, &pattern).map_err(|e| failed(r, e))?;
            }
        }
        self.res.validate = Some(flow);
        Ok(self)
    }
}

/// The end the data comes from: a read's responder, else the sender.
fn source(res: &FlowResources) -> Side {
    if res.params.op == Op::Read {
        Side::Receiver
    } else {
        Side::Sender
    }
}

/// A checking end's scratch: one message, allocated before the loop.
pub(super) struct SlotCheck {
    flow: FlowNumber,
    scratch: Vec<u8>,
}

impl SlotCheck {
    /// For the end of `res` that checks (the one the data goes to), when
    /// its flow validates; None for the end the data comes from.
    pub(super) fn of(res: &FlowResources) -> Option<SlotCheck> {
        let flow = res.validate.filter(|_| res.side != source(res))?;
        Some(SlotCheck { flow, scratch: vec![0; res.params.effective_message_size() as usize] })
    }

    /// `messages` just completed on QP `qp` (its slot at `off`): all are
    /// counted bad if the slot is off its pattern now.
    pub(super) fn check(
        &mut self,
        res: &FlowResources,
        (qp, off): (usize, usize),
        messages: u64,
        counters: &FlowCounters,
    ) -> Result<(), RdmaError> {
        res.arena.read_bytes(off, &mut self.scratch).map_err(|e| failed(res, e))?;
        let bad = Pattern::of(self.flow, qp as u64).first_bad(0, &self.scratch);
        let at = bad.map(|offset| BadByte { lane: qp as u32, message: qp as u64, offset });
        counters.dv.messages(messages, at);
        Ok(())
    }

    /// Every QP's slot of `shard`, once (the write responder, at the end).
    pub(super) fn check_all(
        &mut self,
        res: &FlowResources,
        shard: &Shard,
        counters: &FlowCounters,
    ) -> Result<(), RdmaError> {
        shard.qps.iter().try_for_each(|q| self.check(res, (q.index, q.local_off), 1, counters))
    }
}

/// The driver failed to copy to or from the flow's GPU memory.
fn failed(res: &FlowResources, e: MemoryError) -> RdmaError {
    RdmaError::GpuMemory {
        flow: res.label.clone(),
        side: res.side.name(),
        device: res.dev.name.clone(),
        reason: Box::new(GpuMemoryError::Memory(e)),
    }
}
