//! `gpu = "auto"` on this rank: the GPU nearest the rail's NIC, from this
//! host's facts (PCIe classes as `nvidia-smi topo -m` prints them); and the
//! GPU preflight, before the rank makes any end.

use std::path::Path;

use crate::hostfacts::HostFacts;
use crate::plan::GpuAsk;
use crate::scenario::memory::GpuChoice;
use crate::scenario::rdma::RdmaParams;
use crate::transport::memory::{cuda, CudaMemory, MemoryError};
use crate::transport::Side;

/// `rail` with `gpu = "auto"` replaced by the nearest GPU's index, and why,
/// when the end is in GPU memory and this host tells the affinity;
/// otherwise as it is (the transport then takes GPU 0 and warns).
pub(super) fn resolve_auto(rail: &RdmaParams, side: Side) -> (RdmaParams, Option<String>) {
    let memory = match side {
        Side::Sender => rail.memory.sender,
        Side::Receiver => rail.memory.receiver,
    };
    if !memory.is_gpu() || rail.gpu != GpuChoice::Auto {
        return (rail.clone(), None);
    }
    let nearest = HostFacts::of_this_host().gpus.and_then(|gpus| gpus.nearest_to(rail.device.as_deref()));
    match nearest {
        Some((index, why)) => (RdmaParams { gpu: GpuChoice::Index(index), ..rail.clone() }, Some(why)),
        None => (rail.clone(), None),
    }
}

/// The GPU preflight: every GPU this rank's ends ask for in any phase
/// opens through the driver (FABRICBENCH_LIBCUDA, else libcuda.so.1), before
/// any end is made. The error names the GPU and the group that asks for it;
/// the coordinator adds the rank and host.
pub(super) fn preflight(asks: &[GpuAsk]) -> Result<(), PreflightError> {
    preflight_at(&cuda::library(std::env::var_os(cuda::LIBRARY_ENV)), asks)
}

/// A GPU this rank's ends ask for that the driver cannot open.
#[derive(Debug, thiserror::Error)]
#[error(
    "GPU preflight: group \"{group}\" (phase {phase}) puts this rank's buffers in {memory} memory on gpu = {gpu}, \
     which cannot be used here: {cause}"
)]
pub struct PreflightError {
    pub group: String,
    pub phase: usize,
    pub memory: &'static str,
    /// The group's `gpu`, as written (`3`, `"0000:1b:00.0"`, `auto`).
    pub gpu: String,
    pub cause: Box<MemoryError>,
}

fn preflight_at(library: &Path, asks: &[GpuAsk]) -> Result<(), PreflightError> {
    for ask in asks {
        CudaMemory::open_choice(library, &ask.gpu, cuda::placement(ask.memory)).map_err(|cause| PreflightError {
            group: ask.group.clone(),
            phase: ask.phase,
            memory: ask.memory.name(),
            gpu: ask.gpu.describe(),
            cause: Box::new(cause),
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::memory::Memory;

    #[test]
    fn a_host_without_the_driver_is_refused_naming_the_gpu_and_group() {
        let ask = GpuAsk { memory: Memory::Cuda, gpu: GpuChoice::Index(3), phase: 2, group: "gdr".into() };
        assert!(preflight_at(Path::new("/nonexistent/libcuda.so.1"), &[]).is_ok(), "nothing asked, nothing opened");
        let e = preflight_at(Path::new("/nonexistent/libcuda.so.1"), &[ask]).unwrap_err().to_string();
        assert!(
            e.starts_with(
                "GPU preflight: group \"gdr\" (phase 2) puts this rank's buffers in cuda memory on gpu = 3, which \
                 cannot be used here: no NVIDIA driver: /nonexistent/libcuda.so.1 not found"
            ),
            "{e}"
        );
    }
}
