//! What an RDMA group adds to its op, mode and size: where its buffers live,
//! on which GPU, and its `[group.rdma]` knobs. A group holds this once; the
//! request one flow obeys is made from it and the group's own fields.

use serde::{Deserialize, Serialize};

use super::{GpuChoice, MemorySides, Mode, Op, RdmaKnobs, RdmaParams};

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct RdmaSetup {
    /// Each end's buffer memory (the group's `memory`).
    pub memory: MemorySides,
    /// Which GPU GPU memory is on (the group's `gpu`).
    pub gpu: GpuChoice,
    /// The group's `[group.rdma]` table.
    pub knobs: RdmaKnobs,
}

impl RdmaSetup {
    /// The request of a flow of a group with this setup and `op`, `mode`
    /// and `message_size` (bytes).
    pub fn request(&self, op: Op, mode: Mode, message_size: u64) -> RdmaParams {
        RdmaParams { op, mode, message_size, memory: self.memory, gpu: self.gpu.clone(), knobs: self.knobs.clone() }
    }
}

impl From<RdmaParams> for RdmaSetup {
    /// The setup a request was made from (its op, mode and size are the group's).
    fn from(RdmaParams { memory, gpu, knobs, .. }: RdmaParams) -> Self {
        RdmaSetup { memory, gpu, knobs }
    }
}
