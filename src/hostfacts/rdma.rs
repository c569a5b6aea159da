//! RDMA devices as sysfs describes them (/sys/class/infiniband/DEV): what
//! the verbs probe does not say — the kernel driver, the board, the PCI
//! function and the Ethernet interfaces — and each port's rate as the
//! kernel states it. No libibverbs needed: a host whose rdma-core is
//! missing still shows its hardware.

use std::fmt;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::sysfs::pcie::PcieLink;
use crate::sysfs::{entries, text};
use crate::topology::NodeGuid;

/// One device of /sys/class/infiniband. Crosses the wire: no
/// `skip_serializing_if` here.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct RdmaDeviceFacts {
    pub name: String,
    /// The kernel driver bound to the device's bus device (`device/driver`,
    /// e.g. "mlx5_core"); `None` for virtual devices (Soft-RoCE).
    pub driver: Option<String>,
    /// `fw_ver`, e.g. "20.39.1002"; `None` when absent or empty.
    pub firmware: Option<String>,
    /// `hca_type`, the chip, e.g. "MT4123" (ConnectX-6).
    pub hca_type: Option<String>,
    /// `board_id`, the vendor's board part number, e.g. "MT_0000000222".
    pub board_id: Option<String>,
    /// PCI vendor and device id (`device/vendor`, `device/device`), e.g.
    /// "0x15b3" and "0x101b": the vendor part.
    pub vendor_id: Option<String>,
    pub vendor_part_id: Option<String>,
    /// PCI address (`PCI_SLOT_NAME` of `device/uevent`).
    pub pci: Option<String>,
    /// The PCIe link it trained at (`device/current_link_*`), `None` for a
    /// virtual device and in runs made before it was read.
    #[serde(default)]
    pub pcie: Option<PcieLink>,
    /// `node_guid`: what an ibnetdiscover dump names this HCA by (`None`
    /// when absent, and in runs made before it was read).
    #[serde(default)]
    pub node_guid: Option<NodeGuid>,
    /// Network interfaces of the device (`device/net/*`; Soft-RoCE: `parent`).
    pub netdevs: Vec<String>,
    pub ports: Vec<PortFacts>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct PortFacts {
    pub port: u8,
    /// `state` without its number: "ACTIVE", "DOWN", …
    pub state: Option<String>,
    /// "InfiniBand" or "Ethernet".
    pub link_layer: Option<String>,
    /// `rate` as the kernel writes it, e.g. "200 Gb/sec (4X HDR)".
    pub rate: Option<String>,
    /// The number of `rate`, Gb/s: the signalling rate (QDR 4X says 40,
    /// FDR 4X 56, where the probe's data rate is 32 and 54.54).
    pub rate_gbps: Option<f64>,
    /// The port's LID (InfiniBand), `None` when 0 (unassigned, or Ethernet).
    pub lid: Option<u16>,
    /// GID table entries in use (non-zero).
    pub gids: usize,
}

/// Every device under `class` (…/sys/class/infiniband), by name.
pub fn devices(class: &Path) -> Vec<RdmaDeviceFacts> {
    let mut names = entries(class);
    names.sort();
    names.into_iter().map(|name| device(&class.join(&name), name)).collect()
}

fn device(dir: &Path, name: String) -> RdmaDeviceFacts {
    let bus = dir.join("device");
    let link_name = |path: &Path| Some(std::fs::read_link(path).ok()?.file_name()?.to_str()?.to_string());
    let mut netdevs = entries(&bus.join("net"));
    netdevs.sort();
    if netdevs.is_empty() {
        netdevs.extend(text(&dir.join("parent")));
    }
    let mut ports: Vec<PortFacts> =
        entries(&dir.join("ports")).iter().filter_map(|p| port(&dir.join("ports").join(p), p.parse().ok()?)).collect();
    ports.sort_by_key(|p| p.port);
    RdmaDeviceFacts {
        name,
        driver: link_name(&bus.join("driver")),
        firmware: text(&dir.join("fw_ver")),
        hca_type: text(&dir.join("hca_type")),
        board_id: text(&dir.join("board_id")),
        vendor_id: text(&bus.join("vendor")),
        vendor_part_id: text(&bus.join("device")),
        pci: text(&bus.join("uevent"))
            .and_then(|t| t.lines().find_map(|l| l.strip_prefix("PCI_SLOT_NAME=").map(str::to_string))),
        pcie: PcieLink::of(&bus),
        node_guid: text(&dir.join("node_guid")).and_then(|g| g.parse().ok()),
        netdevs,
        ports,
    }
}

fn port(dir: &Path, port: u8) -> Option<PortFacts> {
    let rate = text(&dir.join("rate"));
    let gids = entries(&dir.join("gids"))
        .iter()
        .filter(|g| {
            text(&dir.join("gids").join(g)).is_some_and(|gid| gid.chars().any(|c| c.is_ascii_hexdigit() && c != '0'))
        })
        .count();
    Some(PortFacts {
        port,
        state: text(&dir.join("state"))
            .map(|s| s.split_once(':').map_or(s.clone(), |(_, name)| name.trim().to_string())),
        link_layer: text(&dir.join("link_layer")),
        rate_gbps: rate.as_deref().and_then(|r| r.split_whitespace().next()?.parse().ok()),
        rate,
        lid: text(&dir.join("lid"))
            .and_then(|l| u16::from_str_radix(l.trim_start_matches("0x"), 16).ok())
            .filter(|&lid| lid != 0),
        gids,
    })
}

impl fmt::Display for RdmaDeviceFacts {
    /// `mlx5_0: driver mlx5_core, fw 20.39.1002, model MT4123 MT_0000000222 (0x15b3:0x101b) at 0000:3b:00.0, node GUID 0xb8cef60300f12a3c, ib0`
    /// and one line per port.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let or = |v: &Option<String>, none: &str| v.clone().unwrap_or_else(|| none.to_string());
        write!(f, "{}: driver {}, fw {}", self.name, or(&self.driver, "none (virtual)"), or(&self.firmware, "-"),)?;
        let model: Vec<&str> = [&self.hca_type, &self.board_id].into_iter().flatten().map(String::as_str).collect();
        if !model.is_empty() {
            write!(f, ", model {}", model.join(" "))?;
        }
        if let (Some(v), Some(p)) = (&self.vendor_id, &self.vendor_part_id) {
            write!(f, " ({v}:{p})")?;
        }
        if let Some(pci) = &self.pci {
            write!(f, " at {pci}")?;
        }
        if let Some(link) = &self.pcie {
            write!(f, " PCIe {link}")?;
        }
        if let Some(guid) = &self.node_guid {
            write!(f, ", node GUID {guid}")?;
        }
        if !self.netdevs.is_empty() {
            write!(f, ", {}", self.netdevs.join(" "))?;
        }
        for p in &self.ports {
            write!(
                f,
                "\n  port {}: {} {}, {}",
                p.port,
                or(&p.state, "?"),
                or(&p.link_layer, "?"),
                or(&p.rate, "rate unknown")
            )?;
            match p.lid {
                Some(lid) => write!(f, ", LID {lid:#x}")?,
                None => write!(f, ", {} GID(s)", p.gids)?,
            }
        }
        Ok(())
    }
}
