//! A flow end's buffer in GPU memory: which GPU, which provider, and how
//! the NIC was given it (dma-buf or peer memory), kept for the record.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use sideway::ibverbs::protection_domain::ProtectionDomain;
use sideway::ibverbs::AccessFlags;

use super::error::{GpuMemoryError, RdmaError};
use super::ffi::Arena;
use crate::hostfile::GpuChoice;
use crate::plan::{GpuRegistration, Memory, RdmaParams};
use crate::transport::memory::{self, cuda, CudaMemory, CudaMemoryType, MemoryKind};
use crate::transport::Side;

/// What one end of a flow registered, and why that way.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct GpuMemoryUse {
    pub memory: Memory,
    /// CUDA's number of the GPU.
    pub gpu: usize,
    /// Why that GPU: as asked (`gpu = 1`, a bus id), or `auto`'s choice.
    pub chosen: String,
    /// The provider, e.g. "CUDA GPU 0 (NVIDIA H100, 0000:1B:00.0, Device memory)".
    pub provider: String,
    /// `dmabuf` or `peermem`.
    pub registration: GpuRegistration,
    /// Why that registration (and, under `auto`, why not dma-buf).
    pub why: String,
}

/// The memory this side of the flow asks for.
pub(super) fn memory_of(params: &RdmaParams, side: Side) -> Memory {
    match side {
        Side::Sender => params.memory.sender,
        Side::Receiver => params.memory.receiver,
    }
}

/// `len` bytes of `memory` on the GPU `params.gpu` names, registered on `pd`.
pub(super) fn arena(
    pd: &Arc<ProtectionDomain>,
    params: &RdmaParams,
    side: Side,
    len: usize,
    access: AccessFlags,
    device: &str,
) -> Result<(Arena, GpuMemoryUse), RdmaError> {
    let memory = memory_of(params, side);
    let fail = |reason: GpuMemoryError| RdmaError::GpuMemory {
        flow: "flow".into(),
        side: side.name(),
        device: device.into(),
        reason: Box::new(reason),
    };
    let placement = cuda::placement(memory);
    let (gpu, chosen) = gpu_index(&params.gpu, placement).map_err(fail)?;
    let provider = memory::open(MemoryKind::Cuda { gpu, placement }).map_err(|e| fail(e.into()))?;
    let name = provider.describe();
    let (arena, registered) =
        Arena::provided(pd, provider, len, params.knobs.gpu_registration, access).map_err(|e| fail(e.into()))?;
    Ok((arena, GpuMemoryUse { memory, gpu, chosen, provider: name, registration: registered.how, why: registered.why }))
}

/// The GPU's number. `auto` reaching the transport means the rank's host
/// told no NIC–GPU affinity (the worker resolves it where it can): GPU 0,
/// with a warning. A bus id is looked up among the GPUs CUDA counts.
fn gpu_index(choice: &GpuChoice, placement: CudaMemoryType) -> Result<(usize, String), GpuMemoryError> {
    match choice {
        GpuChoice::Index(i) => Ok((*i, format!("gpu = {i}"))),
        GpuChoice::Auto => {
            let why = "auto: no NIC–GPU affinity known on this host, so GPU 0";
            crate::diag!("fabricbench: warning: gpu = {why}");
            Ok((0, why.into()))
        }
        GpuChoice::BusId(bus) => {
            let library = cuda::library(std::env::var_os(cuda::LIBRARY_ENV));
            let gpu = CudaMemory::open_choice(&library, choice, placement)?;
            Ok((gpu.index(), format!("gpu = \"{bus}\"")))
        }
    }
}
