//! The host's NVIDIA GPUs and how each RDMA NIC reaches each of them
//! (`nvidia-smi topo -m`'s NIC rows), read from sysfs alone: no driver
//! library needed, so `fabricbench facts` shows it on any host. Also what
//! GPU memory registration would need: a peer-memory module
//! (`nvidia_peermem`, or the older `nv_peer_mem`) or dma-buf (kernel and
//! driver new enough).

use std::fmt;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::pci::{PciLink, PciPlace};
use crate::sysfs::pcie::PcieLink;
use crate::sysfs::{entries, text};

/// NVIDIA's PCI vendor id.
const NVIDIA: &str = "0x10de";

/// The first NVIDIA driver whose `cuMemGetHandleForAddressRange` exports
/// dma-buf file descriptors: R515 (CUDA 11.7), with the open kernel modules.
const DMA_BUF_DRIVER: u32 = 515;

/// The first kernel whose RDMA core registers dma-buf memory
/// (`ib_umem_dmabuf`, `ibv_reg_dmabuf_mr`): 5.12.
const DMA_BUF_KERNEL: (u32, u32) = (5, 12);

/// The host's GPUs and their affinity to its RDMA NICs. Crosses the wire
/// inside `HostFacts`: no `skip_serializing_if` here.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct GpuFacts {
    /// Every NVIDIA display or 3D controller, by PCI bus id: the index is
    /// the GPU's number (CUDA's with CUDA_DEVICE_ORDER=PCI_BUS_ID).
    pub gpus: Vec<GpuDevice>,
    /// One row per RDMA device on PCI: its class to each GPU, by index.
    pub nics: Vec<NicAffinity>,
    /// The NVIDIA kernel module's version (/sys/module/nvidia/version).
    pub driver: Option<String>,
    /// The loaded peer-memory module that lets verbs register GPU memory:
    /// "nvidia_peermem" or "nv_peer_mem"; `None` when neither is.
    pub peer_memory: Option<String>,
    /// Whether the kernel (≥ 5.12) and the driver (≥ 515) could register
    /// GPU memory through dma-buf instead.
    pub dma_buf: bool,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct GpuDevice {
    pub index: usize,
    /// PCI address, e.g. "0000:1b:00.0".
    pub bus_id: String,
    /// The driver's name for it (/proc/driver/nvidia/gpus/BUS/information),
    /// else the PCI ids, e.g. "NVIDIA [10de:2330]".
    pub model: String,
    pub numa_node: Option<u32>,
    /// The PCIe link it trained at; `None` where the kernel tells none,
    /// and in runs made before it was read.
    #[serde(default)]
    pub pcie: Option<PcieLink>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct NicAffinity {
    /// The RDMA device, e.g. "mlx5_0".
    pub nic: String,
    /// Its class to GPU 0, 1, …
    pub links: Vec<PciLink>,
}

impl NicAffinity {
    /// The GPU `gpu = "auto"` pairs this NIC with: the best class, then
    /// the lowest index; `None` on a host without GPUs.
    pub fn nearest_gpu(&self) -> Option<usize> {
        self.links.iter().enumerate().min_by_key(|&(index, link)| (*link, index)).map(|(index, _)| index)
    }
}

/// The GPU `gpu = "auto"` chose for a NIC: its index, and why it (for
/// the run's notes).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NearestGpu {
    pub index: usize,
    pub why: String,
}

impl GpuFacts {
    /// `gpu = "auto"` for a flow on `nic` (`None`: the host's first RDMA
    /// NIC, the one a flow naming no device would open first): the nearest
    /// GPU; `None` when the host tells no affinity.
    pub fn nearest_to(&self, nic: Option<&str>) -> Option<NearestGpu> {
        let row = match nic {
            Some(name) => self.nics.iter().find(|row| row.nic == name)?,
            None => self.nics.first()?,
        };
        let index = row.nearest_gpu()?;
        let gpu = self.gpus.get(index)?;
        let link = row.links[index];
        let why = format!("auto: nearest {} ({link}, {}): GPU {index} at {}", row.nic, link.meaning(), gpu.bus_id);
        Some(NearestGpu { index, why })
    }

    /// The GPUs under the sysfs root `sys` (models from `root`'s
    /// /proc/driver/nvidia), given the host's kernel release; `None` on a
    /// host without an NVIDIA GPU.
    pub fn read(root: &Path, sys: &Path, kernel: Option<&str>) -> Option<GpuFacts> {
        let mut places: Vec<(PciPlace, String)> = entries(&sys.join("bus/pci/devices"))
            .into_iter()
            .filter_map(|addr| {
                let dir = sys.join("bus/pci/devices").join(&addr);
                let class = text(&dir.join("class"))?;
                let nvidia = text(&dir.join("vendor"))? == NVIDIA;
                (nvidia && (class.starts_with("0x0300") || class.starts_with("0x0302")))
                    .then(|| Some((PciPlace::of(&dir)?, text(&dir.join("device")).unwrap_or_default())))
                    .flatten()
            })
            .collect();
        if places.is_empty() {
            return None;
        }
        places.sort_by(|a, b| a.0.address.cmp(&b.0.address));
        let gpus = places
            .iter()
            .enumerate()
            .map(|(index, (place, device))| GpuDevice {
                index,
                bus_id: place.address.clone(),
                model: model(root, &place.address)
                    .unwrap_or_else(|| format!("NVIDIA [10de:{}]", device.trim_start_matches("0x"))),
                numa_node: place.numa_node,
                pcie: PcieLink::of(&sys.join("bus/pci/devices").join(&place.address)),
            })
            .collect();
        let mut names = entries(&crate::sysfs::infiniband(sys));
        names.sort();
        let nics = names
            .into_iter()
            .filter_map(|nic| {
                let at = PciPlace::of(&crate::sysfs::infiniband(sys).join(&nic).join("device"))?;
                Some(NicAffinity { nic, links: places.iter().map(|(gpu, _)| at.link(gpu)).collect() })
            })
            .collect();
        let driver = text(&sys.join("module/nvidia/version"));
        let peer_memory = peer_memory_module(sys);
        let dma_buf = dma_buf_possible(kernel, driver.as_deref());
        Some(GpuFacts { gpus, nics, driver, peer_memory, dma_buf })
    }
}

/// The peer-memory modules that let verbs register GPU memory by address,
/// the current one first.
const PEER_MEMORY_MODULES: [&str; 2] = ["nvidia_peermem", "nv_peer_mem"];

/// The loaded peer-memory module (a folder of `module/` under the sysfs
/// root `sys`), if any.
pub fn peer_memory_module(sys: &Path) -> Option<String> {
    PEER_MEMORY_MODULES.into_iter().find(|m| sys.join("module").join(m).is_dir()).map(String::from)
}

/// Whether dma-buf registration could work: a kernel of 5.12 or later and a
/// driver of R515 or later (unknown either way: no).
pub fn dma_buf_possible(kernel: Option<&str>, driver: Option<&str>) -> bool {
    let driver = driver.and_then(leading_number);
    kernel_registers_dma_buf(kernel) && driver.is_some_and(|d| d >= DMA_BUF_DRIVER)
}

/// Whether the kernel release (e.g. "6.1.0-18-amd64") is one whose RDMA
/// core registers dma-buf memory (5.12 or later; unknown: no).
pub fn kernel_registers_dma_buf(kernel: Option<&str>) -> bool {
    let kernel = kernel.and_then(|k| {
        let mut parts = k.split('.');
        Some((leading_number(parts.next()?)?, leading_number(parts.next()?)?))
    });
    kernel.is_some_and(|k| k >= DMA_BUF_KERNEL)
}

/// The first kernel release that registers dma-buf, as "5.12".
pub fn dma_buf_kernel() -> String {
    format!("{}.{}", DMA_BUF_KERNEL.0, DMA_BUF_KERNEL.1)
}

fn leading_number(s: &str) -> Option<u32> {
    s.chars().take_while(char::is_ascii_digit).collect::<String>().parse::<u32>().ok()
}

/// The `Model:` line of the driver's information file for the GPU at `bus`.
fn model(root: &Path, bus: &str) -> Option<String> {
    let info = std::fs::read_to_string(root.join("proc/driver/nvidia/gpus").join(bus).join("information")).ok()?;
    info.lines().find_map(|l| Some(l.strip_prefix("Model:")?.trim().to_string())).filter(|m| !m.is_empty())
}

impl fmt::Display for GpuFacts {
    /// The GPU table, then the NIC × GPU matrix with its legend and each
    /// NIC's nearest GPU (what `gpu = "auto"` will pick).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let or = |v: &Option<String>, none: &str| v.clone().unwrap_or_else(|| none.to_string());
        writeln!(
            f,
            "GPUs: {} · NVIDIA driver {} · peer memory: {} · dma-buf: {}",
            self.gpus.len(),
            or(&self.driver, "unknown"),
            or(&self.peer_memory, "no module loaded"),
            if self.dma_buf { "possible" } else { "no (needs kernel ≥ 5.12 and driver ≥ 515)" }
        )?;
        writeln!(f, "  {:<4} {:<13} {:<5} {:<28} model", "GPU", "bus id", "NUMA", "PCIe")?;
        for g in &self.gpus {
            let numa = g.numa_node.map_or_else(|| "-".to_string(), |n| n.to_string());
            let pcie = g.pcie.map_or_else(|| "-".to_string(), |l| l.to_string());
            writeln!(f, "  {:<4} {:<13} {:<5} {pcie:<28} {}", g.index, g.bus_id, numa, g.model)?;
        }
        if self.nics.is_empty() {
            return Ok(());
        }
        writeln!(f, "NIC × GPU PCIe path (as nvidia-smi topo -m), and each NIC's nearest GPU:")?;
        let width = self.nics.iter().map(|n| n.nic.len()).max().unwrap_or(0).max(3);
        write!(f, "  {:<width$}", "NIC")?;
        for g in &self.gpus {
            write!(f, " {:<5}", format!("GPU{}", g.index))?;
        }
        writeln!(f, " nearest")?;
        for n in &self.nics {
            write!(f, "  {:<width$}", n.nic)?;
            for link in &n.links {
                write!(f, " {:<5}", link.to_string())?;
            }
            writeln!(f, " {}", n.nearest_gpu().map_or_else(|| "-".to_string(), |g| format!("GPU{g}")))?;
        }
        let legend: Vec<String> = PciLink::ALL.iter().map(|l| format!("{l} {}", l.meaning())).collect();
        writeln!(f, "  ({})", legend.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dma_buf_needs_kernel_5_12_and_driver_515() {
        assert!(dma_buf_possible(Some("6.5.0-1018-nvidia"), Some("550.54.15")));
        assert!(dma_buf_possible(Some("5.12.0"), Some("515.43.04")));
        assert!(!dma_buf_possible(Some("5.11.22"), Some("550.54.15")), "kernel too old");
        assert!(!dma_buf_possible(Some("5.15.0"), Some("470.223.02")), "driver too old");
        assert!(!dma_buf_possible(None, Some("550.54.15")) && !dma_buf_possible(Some("6.1.0"), None));
        assert!(kernel_registers_dma_buf(Some("5.12.0-rc1")) && kernel_registers_dma_buf(Some("6.0")));
        assert!(!kernel_registers_dma_buf(Some("4.19.0")) && !kernel_registers_dma_buf(Some("garbage")));
        assert_eq!(dma_buf_kernel(), "5.12");
    }

    #[test]
    fn auto_takes_the_best_class_then_the_lowest_index() {
        use PciLink::*;
        let nic = |links: Vec<PciLink>| NicAffinity { nic: "mlx5_0".into(), links };
        assert_eq!(nic(vec![Sys, Pix, Pxb, Pix]).nearest_gpu(), Some(1));
        assert_eq!(nic(vec![Node, Phb, Phb]).nearest_gpu(), Some(1));
        assert_eq!(nic(vec![Sys, Sys]).nearest_gpu(), Some(0), "far GPUs still pair");
        assert_eq!(nic(vec![]).nearest_gpu(), None);
    }
}
