//! `gpu = "auto"` on this rank: the GPU nearest the rail's NIC, from this
//! host's facts (PCIe classes as `nvidia-smi topo -m` prints them).

use crate::hostfacts::HostFacts;
use crate::scenario::memory::GpuChoice;
use crate::scenario::rdma::RdmaParams;
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
