//! Whether this host can give its NIC a GPU's memory as the group asks
//! (`gpu_registration`), decided by the GPU preflight before any end is
//! made, in the order setup tries (`transport::rdma`'s arena: dma-buf first
//! under `auto`, then peer memory): dma-buf needs a kernel that registers
//! it (5.12 or later) and a driver that exports it
//! (`cuMemGetHandleForAddressRange` and the device's dma-buf attribute);
//! peer memory needs nvidia_peermem (or nv_peer_mem) loaded, read from
//! `module/` under the sysfs root (FABRICBENCH_SYSFS_ROOT moves it to a
//! recorded tree).

use std::path::PathBuf;

use crate::hostfacts::{dma_buf_kernel, kernel_registers_dma_buf, peer_memory_module, HostFacts};
use crate::plan::GpuRegistration;
use crate::transport::memory::{CudaMemory, CudaMemoryType, MemoryProvider};

/// What this host offers for registering GPU memory.
#[derive(Debug, Clone)]
pub(super) struct HostOffer {
    /// The kernel release, e.g. "6.1.0-18-amd64".
    pub kernel: Option<String>,
    /// The sysfs root the peer-memory module was looked for under.
    pub sys: PathBuf,
    /// The peer-memory module loaded there, if any.
    pub peer_memory: Option<String>,
}

/// The NIC cannot be given this GPU's memory as asked: what each way
/// needs that this host lacks, and the fix.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("its memory cannot be registered with the NIC (gpu_registration = \"{asked}\", {gpu}): {lacks}; fix: {fix}")]
pub struct RegistrationRefused {
    pub asked: &'static str,
    /// The opened GPU, e.g. "CUDA GPU 0 (NVIDIA H100, 0000:1B:00.0, Device memory)".
    pub gpu: String,
    pub lacks: String,
    pub fix: String,
}

/// What dma-buf or peer memory lacks on this host, and what would supply it.
struct Lacking {
    lacks: String,
    fix: String,
}

const PEER_MEMORY_FIX: &str = "load nvidia_peermem (`modprobe nvidia_peermem`; it comes with the NVIDIA driver)";

impl HostOffer {
    /// This host's offer: the kernel of its `facts`, the module under the
    /// sysfs root (crate::sysfs).
    pub fn of_this_host(facts: &HostFacts) -> HostOffer {
        let sys = crate::sysfs::root().unwrap_or_else(|_| PathBuf::from("/sys"));
        HostOffer { kernel: facts.kernel.clone(), peer_memory: peer_memory_module(&sys), sys }
    }

    /// How setup will register `gpu`'s memory under `asked`: dma-buf when
    /// it is possible and not ruled out, else peer memory when possible.
    pub fn registration(
        &self,
        asked: GpuRegistration,
        gpu: &CudaMemory,
        placement: CudaMemoryType,
    ) -> Result<GpuRegistration, RegistrationRefused> {
        let dma_buf = || self.dma_buf(gpu);
        let peer = || self.peer_memory(placement);
        let refuse = |lacking: Vec<Lacking>| RegistrationRefused {
            asked: asked.name(),
            gpu: gpu.describe(),
            lacks: lacking.iter().map(|l| l.lacks.as_str()).collect::<Vec<_>>().join("; "),
            fix: lacking.iter().map(|l| l.fix.as_str()).collect::<Vec<_>>().join(", or "),
        };
        match asked {
            GpuRegistration::Dmabuf => dma_buf().map(|()| GpuRegistration::Dmabuf).map_err(|l| refuse(vec![l])),
            GpuRegistration::Peermem => peer().map(|()| GpuRegistration::Peermem).map_err(|l| refuse(vec![l])),
            GpuRegistration::Auto => match (dma_buf(), peer()) {
                (Ok(()), _) => Ok(GpuRegistration::Dmabuf),
                (Err(_), Ok(())) => Ok(GpuRegistration::Peermem),
                (Err(d), Err(p)) => Err(refuse(vec![p, d])),
            },
        }
    }

    fn dma_buf(&self, gpu: &CudaMemory) -> Result<(), Lacking> {
        if !kernel_registers_dma_buf(self.kernel.as_deref()) {
            let kernel = self.kernel.as_deref().unwrap_or("of unknown release");
            return Err(Lacking {
                lacks: format!("no dma-buf: kernel {kernel} is older than {} (ibv_reg_dmabuf_mr)", dma_buf_kernel()),
                fix: format!("for dma-buf, boot a kernel {} or later", dma_buf_kernel()),
            });
        }
        gpu.dma_buf_supported().map_err(|e| Lacking {
            lacks: format!("no dma-buf: {e}"),
            fix: "for dma-buf, install an NVIDIA driver that exports it (R515 or later, open kernel modules)".into(),
        })
    }

    fn peer_memory(&self, placement: CudaMemoryType) -> Result<(), Lacking> {
        // Pinned host memory is registered by address like any host memory.
        if placement == CudaMemoryType::HostPinned || self.peer_memory.is_some() {
            return Ok(());
        }
        Err(Lacking {
            lacks: format!(
                "no peer memory: neither nvidia_peermem nor nv_peer_mem is loaded ({} has neither)",
                self.sys.join("module").display()
            ),
            fix: PEER_MEMORY_FIX.into(),
        })
    }
}
