//! Where a PCI function sits in the PCIe tree, and how two functions reach
//! each other, in the classes `nvidia-smi topo -m` prints. The place is read
//! from the function's real sysfs path (the links of /sys/bus/pci/devices and
//! /sys/class/infiniband/*/device resolved): the host bridge folder
//! (`pci0000:00`, one root complex), then every bridge from the root port
//! down through PCIe switches' upstream and downstream ports, then the
//! function itself.

use std::fmt;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// How a NIC reaches a GPU (or any two functions each other), best first:
/// the order is the preference of `gpu = "auto"`.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[serde(rename_all = "UPPERCASE")]
pub enum PciLink {
    /// Through at most one PCIe switch (or one bridge): peer-to-peer
    /// traffic never leaves the switch.
    Pix,
    /// Through several switches, without crossing the host bridge.
    Pxb,
    /// Through the host bridge (the CPU's root complex) they share.
    Phb,
    /// Between host bridges of one NUMA node.
    Node,
    /// Across the interconnect between NUMA nodes (sockets).
    Sys,
}

impl PciLink {
    /// Every class, best first, with what it means (a legend).
    pub const ALL: [PciLink; 5] = [PciLink::Pix, PciLink::Pxb, PciLink::Phb, PciLink::Node, PciLink::Sys];

    pub fn meaning(self) -> &'static str {
        match self {
            PciLink::Pix => "one PCIe switch",
            PciLink::Pxb => "several PCIe switches",
            PciLink::Phb => "the host bridge",
            PciLink::Node => "host bridges of one NUMA node",
            PciLink::Sys => "across NUMA nodes",
        }
    }
}

impl fmt::Display for PciLink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PciLink::Pix => "PIX",
            PciLink::Pxb => "PXB",
            PciLink::Phb => "PHB",
            PciLink::Node => "NODE",
            PciLink::Sys => "SYS",
        })
    }
}

/// One PCI function's place in the tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PciPlace {
    /// The host bridge folder, e.g. "pci0000:00".
    pub host_bridge: String,
    /// The bridges above the function, root port first.
    pub bridges: Vec<String>,
    /// The function's own address, e.g. "0000:1b:00.0".
    pub address: String,
    /// `numa_node`; `None` when the kernel says -1 (no NUMA) or nothing.
    pub numa_node: Option<u32>,
}

impl PciPlace {
    /// The place of the function at `device`: a sysfs folder or a link to
    /// one (`bus/pci/devices/ADDR`, `class/infiniband/DEV/device`). `None`
    /// for what is not on PCI (Soft-RoCE, a missing path).
    pub fn of(device: &Path) -> Option<PciPlace> {
        let real = std::fs::canonicalize(device).ok()?;
        let parts: Vec<&str> = real.components().filter_map(|c| c.as_os_str().to_str()).collect();
        let at = parts.iter().position(|p| is_host_bridge(p))?;
        let mut chain: Vec<String> =
            parts[at + 1..].iter().take_while(|p| is_pci_address(p)).map(|p| p.to_string()).collect();
        let address = chain.pop()?;
        let numa_node = std::fs::read_to_string(real.join("numa_node")).ok().and_then(|t| t.trim().parse().ok());
        Some(PciPlace { host_bridge: parts[at].to_string(), bridges: chain, address, numa_node })
    }

    /// How this function reaches `other`. Below one host bridge, the paths
    /// part at the last bridge they share: none shared is PHB (they meet in
    /// the root complex); at most one bridge more on either side is PIX (the
    /// downstream ports of one switch, or one bridge); more is PXB. Across
    /// host bridges the NUMA node decides between NODE and SYS.
    pub fn link(&self, other: &PciPlace) -> PciLink {
        if self.host_bridge != other.host_bridge {
            return if self.numa_node == other.numa_node { PciLink::Node } else { PciLink::Sys };
        }
        let shared = self.bridges.iter().zip(&other.bridges).take_while(|(a, b)| a == b).count();
        if shared == 0 {
            return PciLink::Phb;
        }
        match (self.bridges.len() - shared).max(other.bridges.len() - shared) {
            0 | 1 => PciLink::Pix,
            _ => PciLink::Pxb,
        }
    }
}

/// `pci0000:00`: a host bridge's folder under /sys/devices (domain:bus).
fn is_host_bridge(name: &str) -> bool {
    name.strip_prefix("pci")
        .is_some_and(|rest| rest.split_once(':').is_some_and(|(d, b)| is_hex(d, 4) && (is_hex(b, 2) || is_hex(b, 3))))
}

/// `0000:1b:00.0`: domain, bus, device, function.
fn is_pci_address(name: &str) -> bool {
    let Some((rest, function)) = name.rsplit_once('.') else { return false };
    let parts: Vec<&str> = rest.split(':').collect();
    matches!(&parts[..], [d, b, s] if is_hex(d, 4) && is_hex(b, 2) && is_hex(s, 2)) && is_hex(function, 1)
}

fn is_hex(s: &str, len: usize) -> bool {
    s.len() == len && s.chars().all(|c| c.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn place(host_bridge: &str, bridges: &[&str], numa_node: Option<u32>) -> PciPlace {
        PciPlace {
            host_bridge: host_bridge.into(),
            bridges: bridges.iter().map(|b| b.to_string()).collect(),
            address: "0000:ff:00.0".into(),
            numa_node,
        }
    }

    #[test]
    fn names_of_host_bridges_and_functions() {
        assert!(is_host_bridge("pci0000:00") && is_host_bridge("pci0001:a0"));
        assert!(!is_host_bridge("pcie") && !is_host_bridge("pci_bus") && !is_host_bridge("0000:00:01.0"));
        assert!(is_pci_address("0000:1b:00.0") && is_pci_address("0001:a0:1f.7"));
        assert!(!is_pci_address("0000:1b:00") && !is_pci_address("infiniband") && !is_pci_address("pci0000:00"));
    }

    #[test]
    fn every_class_from_the_shape_of_two_paths() {
        let switch = ["0000:00:01.0", "0000:01:00.0"];
        let gpu = place("pci0000:00", &[switch[0], switch[1], "0000:02:00.0"], Some(0));
        let nic = place("pci0000:00", &[switch[0], switch[1], "0000:02:01.0"], Some(0));
        let cascaded =
            place("pci0000:00", &[switch[0], switch[1], "0000:02:03.0", "0000:06:00.0", "0000:07:00.0"], Some(0));
        let other_root_port = place("pci0000:00", &["0000:00:03.0"], Some(0));
        let other_host_bridge = place("pci0000:17", &["0000:17:01.0"], Some(0));
        let other_socket = place("pci0000:80", &["0000:80:01.0"], Some(1));
        assert_eq!(gpu.link(&nic), PciLink::Pix);
        assert_eq!(nic.link(&nic), PciLink::Pix, "functions of one device");
        assert_eq!(gpu.link(&cascaded), PciLink::Pxb);
        assert_eq!(cascaded.link(&gpu), PciLink::Pxb, "symmetric");
        assert_eq!(gpu.link(&other_root_port), PciLink::Phb);
        assert_eq!(gpu.link(&other_host_bridge), PciLink::Node);
        assert_eq!(gpu.link(&other_socket), PciLink::Sys);
        let no_numa = |p: &PciPlace| PciPlace { numa_node: None, ..p.clone() };
        assert_eq!(
            no_numa(&gpu).link(&no_numa(&other_host_bridge)),
            PciLink::Node,
            "one node when the kernel has no NUMA"
        );
        assert!(PciLink::ALL.windows(2).all(|w| w[0] < w[1]), "best first");
    }
}
