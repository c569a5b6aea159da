//! What a host is, for the record of a run and for `fabricbench hosts`:
//! kernel, OS, CPU model, cores, NUMA nodes, rdma-core, and every RDMA
//! device's driver, firmware, model and port rates, and its NVIDIA GPUs with
//! their PCIe affinity to those devices. Everything is read
//! from files under a root (`/` on a real host), so recorded device trees
//! (tests/fixtures/hosts/) stand in for hardware this machine lacks. A fact
//! that cannot be read is `None`, never an error: a host is recorded as far
//! as it can be.

pub mod clock;
mod gpu;
mod limits;
pub mod lldp;
mod pci;
mod rdma;

use std::fmt;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::load::topology::parse_cpu_list;
use crate::transport::rdma::libibverbs_release;

pub use crate::sysfs::pcie::PcieLink;
pub use clock::ClockFacts;
pub use gpu::{
    dma_buf_kernel, dma_buf_possible, kernel_registers_dma_buf, peer_memory_module, GpuDevice, GpuFacts, NearestGpu,
    NicAffinity,
};
pub use limits::LockedMemory;
pub use pci::{PciLink, PciPlace};
pub use rdma::{PortFacts, RdmaDeviceFacts};

/// Library folders (under the root) searched for libibverbs, in the order
/// the dynamic loader of Debian, Red Hat and SUSE would find it.
const LIBRARY_DIRS: &[&str] = &[
    "usr/lib/x86_64-linux-gnu",
    "usr/lib/aarch64-linux-gnu",
    "usr/lib/powerpc64le-linux-gnu",
    "usr/lib64",
    "usr/lib",
    "lib/x86_64-linux-gnu",
    "lib64",
    "lib",
    "usr/local/lib",
];

/// One host's facts. Crosses the wire (each rank sends its own): no
/// `skip_serializing_if` here.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct HostFacts {
    /// Kernel release (/proc/sys/kernel/osrelease), e.g. "6.1.0-18-amd64".
    pub kernel: Option<String>,
    /// `PRETTY_NAME` of /etc/os-release, e.g. "Debian GNU/Linux 12 (bookworm)".
    pub os: Option<String>,
    /// The first `model name` of /proc/cpuinfo.
    pub cpu_model: Option<String>,
    /// Logical CPUs online (/sys/devices/system/cpu/online).
    pub cores: Option<usize>,
    /// NUMA nodes online (/sys/devices/system/node/online); `None` on
    /// kernels without NUMA.
    pub numa_nodes: Option<usize>,
    /// rdma-core release of the installed libibverbs, from its file name
    /// (libibverbs.so.1.14.44.0 is rdma-core 44); `None` without one.
    pub rdma_core: Option<u32>,
    /// The libibverbs file that version was read from.
    pub libibverbs: Option<String>,
    /// Every device of /sys/class/infiniband, by name.
    pub rdma_devices: Vec<RdmaDeviceFacts>,
    /// NVIDIA GPUs and each RDMA NIC's PCIe class to them; `None` on a
    /// host without one (and in records made before GPUs were read).
    #[serde(default)]
    pub gpus: Option<Box<GpuFacts>>,
    /// The hard locked-memory limit of processes started as the reader
    /// was (/proc/self/limits); `None` where unread (and in records made
    /// before it was read).
    #[serde(default)]
    pub locked_memory: Option<LockedMemory>,
    /// The clock latency samples read: its source, the counter's rate and
    /// one read's cost (measured on the live host). Empty in records made
    /// before it was read.
    #[serde(default)]
    pub clock: ClockFacts,
}

impl HostFacts {
    /// This host's facts (its sysfs part under FABRICBENCH_SYSFS_ROOT when
    /// that is set: crate::sysfs).
    pub fn of_this_host() -> HostFacts {
        let sys = crate::sysfs::root().unwrap_or_else(|_| Path::new("/sys").to_path_buf());
        let facts = HostFacts::under_with_sysfs(Path::new("/"), &sys);
        HostFacts { clock: facts.clock.clone().measured(), ..facts }
    }

    /// The facts of the host whose files are under `root`.
    pub fn under(root: &Path) -> HostFacts {
        HostFacts::under_with_sysfs(root, &root.join("sys"))
    }

    /// [`HostFacts::under`] with the sysfs part (cores, NUMA nodes, RDMA
    /// devices) under `sys`.
    fn under_with_sysfs(root: &Path, sys: &Path) -> HostFacts {
        let read = |path: &str| std::fs::read_to_string(root.join(path)).ok();
        let count = |path: &str| {
            std::fs::read_to_string(sys.join(path)).ok().and_then(|t| parse_cpu_list(&t)).map(|list| list.len())
        };
        let library = libibverbs(root);
        let kernel = read("proc/sys/kernel/osrelease").map(|t| t.trim().to_string()).filter(|t| !t.is_empty());
        let cpuinfo = read("proc/cpuinfo");
        HostFacts {
            gpus: GpuFacts::read(root, sys, kernel.as_deref()).map(Box::new),
            kernel,
            os: read("etc/os-release").or_else(|| read("usr/lib/os-release")).and_then(|t| pretty_name(&t)),
            cpu_model: cpuinfo.as_deref().and_then(cpu_model),
            cores: count("devices/system/cpu/online").filter(|&n| n > 0),
            numa_nodes: count("devices/system/node/online").filter(|&n| n > 0),
            rdma_core: library.as_deref().and_then(|name| libibverbs_release(name.rsplit('/').next()?)),
            libibverbs: library,
            rdma_devices: rdma::devices(&crate::sysfs::infiniband(sys)),
            locked_memory: read("proc/self/limits")
                .and_then(|t| LockedMemory::read(&t, read("proc/self/status").as_deref())),
            clock: ClockFacts::under(sys, cpuinfo.as_deref()),
        }
    }
}

/// Facts that are not the same on every host, one line each naming every
/// value and its hosts (`kernel: 6.1.0-57 on h1, h2; 6.1.0-40 on h3`): the
/// node on other firmware or another kernel that an acceptance run should
/// know of before it blames the fabric. Devices are compared by chip
/// (`hca_type`, else name), so one host's mlx5_0 meets another's of the same
/// model; a fact a host could not read is not compared.
pub fn differences(hosts: &[(&str, &HostFacts)]) -> Vec<String> {
    // Each fact, in the order first met, with every (value, host) read.
    let mut seen: Vec<(String, Vec<(String, &str)>)> = Vec::new();
    for &(host, f) in hosts {
        let mut add = |fact: String, value: Option<String>| {
            let Some(value) = value else { return };
            match seen.iter_mut().find(|(known, _)| *known == fact) {
                Some((_, values)) => values.push((value, host)),
                None => seen.push((fact, vec![(value, host)])),
            }
        };
        add("kernel".into(), f.kernel.clone());
        add("OS".into(), f.os.clone());
        add("CPU".into(), f.cpu_model.clone());
        add("cores".into(), f.cores.map(|n| n.to_string()));
        add("NUMA nodes".into(), f.numa_nodes.map(|n| n.to_string()));
        add("rdma-core".into(), f.rdma_core.map(|n| n.to_string()));
        add("locked memory".into(), f.locked_memory.map(|m| m.to_string()));
        add("clocksource".into(), f.clock.source.clone());
        add("NVIDIA driver".into(), f.gpus.as_ref().and_then(|g| g.driver.clone()));
        for d in &f.rdma_devices {
            let chip = d.hca_type.clone().unwrap_or_else(|| d.name.clone());
            add(format!("{chip} firmware"), d.firmware.clone());
            add(format!("{chip} driver"), d.driver.clone());
        }
    }
    seen.into_iter()
        .filter_map(|(fact, read)| {
            let mut values: Vec<(String, Vec<&str>)> = Vec::new();
            for (value, host) in read {
                match values.iter_mut().find(|(v, _)| *v == value) {
                    Some((_, on)) if !on.contains(&host) => on.push(host),
                    Some(_) => {}
                    None => values.push((value, vec![host])),
                }
            }
            let listed: Vec<String> = values.iter().map(|(v, on)| format!("{v} on {}", on.join(", "))).collect();
            (values.len() > 1).then(|| format!("{fact}: {}", listed.join("; ")))
        })
        .collect()
}

/// The hosts with RDMA devices whose locked memory is limited, and the
/// limit of each: verbs pin a flow's buffers (and on NICs its queues)
/// against it, so a run whose flows need more fails to set up there.
pub fn limited_locked_memory<'h>(hosts: &[(&'h str, &HostFacts)]) -> Vec<(&'h str, LockedMemory)> {
    hosts
        .iter()
        .filter(|(_, f)| !f.rdma_devices.is_empty())
        .filter_map(|&(host, f)| Some((host, f.locked_memory.filter(|m| m.is_limited())?)))
        .collect()
}

/// `PRETTY_NAME` of an os-release file (else `NAME VERSION`), unquoted.
fn pretty_name(text: &str) -> Option<String> {
    let field = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
            .map(|v| v.trim().trim_matches('"').to_string())
    };
    field("PRETTY_NAME").or_else(|| Some(format!("{} {}", field("NAME")?, field("VERSION").unwrap_or_default())))
}

/// The first `model name` of /proc/cpuinfo (x86), else its `Model` or
/// `cpu` line (ARM, POWER).
fn cpu_model(text: &str) -> Option<String> {
    ["model name", "Model", "cpu"].iter().find_map(|key| cpuinfo_field(text, key)).map(str::to_string)
}

/// The value of the first /proc/cpuinfo line `KEY : VALUE` with a value.
fn cpuinfo_field<'t>(text: &'t str, key: &str) -> Option<&'t str> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim() == key && !v.trim().is_empty()).then(|| v.trim())
    })
}

/// The path of the first libibverbs.so.1.X.Y.Z (the real file, not its
/// links) in the library folders under `root`, as `/usr/lib/…`.
fn libibverbs(root: &Path) -> Option<String> {
    LIBRARY_DIRS.iter().find_map(|dir| {
        let mut names: Vec<String> = std::fs::read_dir(root.join(dir))
            .ok()?
            .flatten()
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|name| libibverbs_release(name).is_some())
            .collect();
        names.sort();
        names.pop().map(|name| format!("/{dir}/{name}"))
    })
}

impl fmt::Display for HostFacts {
    /// One line for the host, one per RDMA device: what `fabricbench facts`
    /// and `fabricbench hosts` show.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let or_unknown = |v: &Option<String>| v.clone().unwrap_or_else(|| "unknown".into());
        let count = |v: Option<usize>| v.map_or_else(|| "?".to_string(), |n| n.to_string());
        write!(
            f,
            "{} · Linux {} · {} · {} cores · {} NUMA node(s) · ",
            or_unknown(&self.os),
            or_unknown(&self.kernel),
            or_unknown(&self.cpu_model),
            count(self.cores),
            count(self.numa_nodes)
        )?;
        if let Some(m) = self.locked_memory {
            write!(f, "locked memory {m} · ")?;
        }
        if let Some(source) = &self.clock.source {
            write!(f, "clocksource {source}")?;
            if let Some(ns) = self.clock.read_ns {
                write!(f, " ({ns:.0} ns a read)")?;
            }
            write!(f, " · ")?;
        }
        match self.rdma_core {
            Some(v) => writeln!(f, "rdma-core {v}")?,
            None => writeln!(f, "no libibverbs")?,
        }
        for d in &self.rdma_devices {
            writeln!(f, "{d}")?;
        }
        if let Some(gpus) = &self.gpus {
            write!(f, "{gpus}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn os_release_names() {
        assert_eq!(
            pretty_name("NAME=\"Rocky Linux\"\nPRETTY_NAME=\"Rocky Linux 9.3 (Blue Onyx)\"\n").as_deref(),
            Some("Rocky Linux 9.3 (Blue Onyx)")
        );
        assert_eq!(pretty_name("NAME=Alpine\nVERSION=3.19\n").as_deref(), Some("Alpine 3.19"));
        assert_eq!(pretty_name("ID=x\n"), None);
    }

    #[test]
    fn cpu_models_of_x86_and_arm() {
        assert_eq!(
            cpu_model("processor\t: 0\nmodel name\t: AMD EPYC 7763 64-Core Processor\n").as_deref(),
            Some("AMD EPYC 7763 64-Core Processor")
        );
        assert_eq!(
            cpu_model("processor\t: 0\nBogoMIPS\t: 50.00\nModel\t\t: Ampere Altra\n").as_deref(),
            Some("Ampere Altra")
        );
        assert_eq!(cpu_model("processor\t: 0\n"), None);
    }

    #[test]
    fn this_host_has_a_kernel_and_cores() {
        let facts = HostFacts::of_this_host();
        assert!(facts.kernel.is_some(), "{facts:?}");
        assert_eq!(facts.cores, Some(crate::load::topology::online_cpus().len()), "{facts:?}");
        assert_eq!(facts.rdma_core.is_some(), facts.libibverbs.is_some(), "{facts:?}");
        let (_, hard) = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_MEMLOCK).unwrap();
        match facts.locked_memory {
            Some(LockedMemory::Bytes(bytes)) => assert_eq!(bytes, hard),
            Some(LockedMemory::Unlimited) => assert_eq!(hard, nix::sys::resource::RLIM_INFINITY),
            // Root (the owner of /proc/self) with CAP_IPC_LOCK, whatever its limit.
            Some(LockedMemory::CapIpcLock) => {
                use std::os::unix::fs::MetadataExt;
                assert_eq!(std::fs::metadata("/proc/self").unwrap().uid(), 0, "{facts:?}");
            }
            None => panic!("no locked-memory limit read: {facts:?}"),
        }
    }

    #[test]
    fn only_rdma_hosts_with_a_limit_are_named() {
        let rxe = HostFacts::under(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hosts/rxe"));
        let host = |m| HostFacts { locked_memory: Some(m), ..rxe.clone() };
        let (low, open) = (host(LockedMemory::Bytes(64 << 10)), host(LockedMemory::Unlimited));
        let plain = HostFacts { locked_memory: Some(LockedMemory::Bytes(64 << 10)), ..HostFacts::default() };
        let named = limited_locked_memory(&[("h1", &low), ("h2", &open), ("h3", &plain)]);
        assert_eq!(named, [("h1", LockedMemory::Bytes(64 << 10))]);
        let differ = differences(&[("h1", &low), ("h2", &open)]);
        assert!(differ.contains(&"locked memory: 64 KiB on h1; unlimited on h2".to_string()), "{differ:?}");
    }
}
