//! `gpu = "auto"` on this rank: the GPU nearest the rail's NIC, from this
//! host's facts (PCIe classes as `nvidia-smi topo -m` prints them); and the
//! GPU preflight, before the rank makes any end: every GPU its ends will
//! use opens, and the registration asked for is possible on this host.

use std::path::Path;

use crate::hostfacts::{GpuFacts, HostFacts, NearestGpu};
use crate::hostfile::GpuChoice;
use crate::plan::{GpuAsk, RdmaParams};
use crate::transport::memory::{cuda, CudaMemory, MemoryError};
use crate::transport::Side;

use super::gpu_registration::{HostOffer, RegistrationRefused};

/// A GPU choice (or a rail with one) as resolved on this host, and why
/// that GPU where the group's `gpu` does not say it: the run's notes and
/// the preflight's error name it.
#[derive(Debug, PartialEq)]
pub(super) struct Resolved<T> {
    pub value: T,
    pub why: Option<String>,
}

/// `choice` for a rail on `nic` (`None`: the host's first NIC), on a host
/// whose GPU facts are `gpus`: `auto` becomes the nearest GPU's index, and
/// why; anything else, and `auto` where the host tells no affinity, stays
/// as it is (the transport then takes GPU 0 and warns). Setup and the
/// preflight both resolve through here, so they open the same GPU.
pub(super) fn resolve(choice: &GpuChoice, nic: Option<&str>, gpus: Option<&GpuFacts>) -> Resolved<GpuChoice> {
    if *choice != GpuChoice::Auto {
        return Resolved { value: choice.clone(), why: None };
    }
    match gpus.and_then(|g| g.nearest_to(nic)) {
        Some(NearestGpu { index, why }) => Resolved { value: GpuChoice::Index(index), why: Some(why) },
        None => Resolved { value: GpuChoice::Auto, why: None },
    }
}

/// `rail` on the GPU this end uses when it is in GPU memory, and why when
/// the group's `gpu` does not say it: the host's own from the hostfile's
/// `gpus=` (`host_gpu`, the coordinator's pick for ends in GPU memory),
/// else `gpu = "auto"` [`resolve`]d on this host. An end in host memory
/// stays as it is.
pub(super) fn resolve_end(rail: &RdmaParams, side: Side, host_gpu: Option<&GpuChoice>) -> Resolved<RdmaParams> {
    let memory = match side {
        Side::Sender => rail.memory.sender,
        Side::Receiver => rail.memory.receiver,
    };
    if let Some(gpu) = host_gpu.filter(|_| memory.is_gpu()) {
        return Resolved { value: RdmaParams { gpu: gpu.clone(), ..rail.clone() }, why: Some(from_hostfile(gpu)) };
    }
    if !memory.is_gpu() || rail.gpu != GpuChoice::Auto {
        return Resolved { value: rail.clone(), why: None };
    }
    let facts = HostFacts::of_this_host();
    let Resolved { value: gpu, why } = resolve(&rail.gpu, rail.knobs.device.as_deref(), facts.gpus.as_deref());
    Resolved { value: RdmaParams { gpu, ..rail.clone() }, why }
}

/// Why an end is on `gpu`: its host's `gpus=` names it.
fn from_hostfile(gpu: &GpuChoice) -> String {
    format!("{} (this host's gpus= in the hostfile)", gpu.describe())
}

/// The GPU preflight: every GPU this rank's ends ask for in any phase (as
/// [`resolve`]d on this host, whose `facts` are given) opens through the
/// driver (FABRICBENCH_LIBCUDA, else libcuda.so.1), and its memory can be
/// registered as the group asks, before any end is made. The error names
/// the GPU, the group that asks for it and the fix; the coordinator adds
/// the rank and host.
pub(super) fn preflight(asks: &[GpuAsk], facts: &HostFacts) -> Result<(), PreflightError> {
    let library = cuda::library(std::env::var_os(cuda::LIBRARY_ENV));
    preflight_at(&library, asks, facts.gpus.as_deref(), &HostOffer::of_this_host(facts))
}

/// A GPU this rank's ends ask for that cannot be used here.
#[derive(Debug, thiserror::Error)]
#[error(
    "GPU preflight: group \"{group}\" (phase {phase}) puts this rank's buffers in {memory} memory on gpu = {gpu}, \
     which cannot be used here: {cause}"
)]
pub struct PreflightError {
    pub group: String,
    pub phase: usize,
    pub memory: &'static str,
    /// The group's `gpu`, as written (`3`, `"0000:1b:00.0"`, `auto`), and
    /// under `auto` the GPU it resolved to and why.
    pub gpu: String,
    pub cause: Box<Unusable>,
}

/// Why a GPU cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum Unusable {
    /// The driver cannot open it.
    #[error(transparent)]
    Open(MemoryError),
    /// Its memory cannot be registered with the NIC as asked.
    #[error(transparent)]
    Register(RegistrationRefused),
}

fn preflight_at(
    library: &Path,
    asks: &[GpuAsk],
    gpus: Option<&GpuFacts>,
    host: &HostOffer,
) -> Result<(), PreflightError> {
    for ask in asks {
        let Resolved { value: gpu, why } = resolve(&ask.gpu, ask.nic.as_deref(), gpus);
        let refuse = |cause| PreflightError {
            group: ask.group.clone(),
            phase: ask.phase,
            memory: ask.memory.name(),
            gpu: match (&why, ask.hostfile) {
                (Some(why), _) => why.clone(),
                (None, true) => from_hostfile(&ask.gpu),
                (None, false) => ask.gpu.describe(),
            },
            cause: Box::new(cause),
        };
        let placement = cuda::placement(ask.memory);
        let opened = CudaMemory::open_choice(library, &gpu, placement).map_err(|e| refuse(Unusable::Open(e)))?;
        host.registration(ask.registration, &opened, placement).map_err(|e| refuse(Unusable::Register(e)))?;
    }
    Ok(())
}

#[cfg(test)]
#[path = "gpu_tests.rs"]
mod tests;
