//! What a flow's ends registered in GPU memory, from their reports.

use serde::{Deserialize, Serialize};

use crate::metrics::FlowSamples;
use crate::transport::rdma::GpuMemoryUse;

/// Each end's GPU memory, one entry per rail (empty: host memory).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FlowGpuMemory {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sender: Vec<GpuMemoryUse>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub receiver: Vec<GpuMemoryUse>,
}

impl FlowGpuMemory {
    /// What the two ends' reports say; `None` when neither end used GPU memory.
    pub fn of_ends(tx: Option<&FlowSamples>, rx: Option<&FlowSamples>) -> Option<FlowGpuMemory> {
        let of = |end: Option<&FlowSamples>| end.map_or_else(Vec::new, |s| s.gpu_memory.clone());
        let (sender, receiver) = (of(tx), of(rx));
        (!sender.is_empty() || !receiver.is_empty()).then_some(FlowGpuMemory { sender, receiver })
    }
}
