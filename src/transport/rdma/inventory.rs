//! The compact form of a host's probe that every rank sends the coordinator
//! once, for run.json (`probes`) and for "% of line rate": devices, ports,
//! state, link layer, active rate and MTU. The full report (firmware, GIDs,
//! limits) stays with `fabricbench probe`.

use serde::{Deserialize, Serialize};

use super::probe::{probe, ProbeReport};

/// One host's RDMA devices as its own probe saw them. Crosses the wire:
/// no `skip_serializing_if` here.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct RdmaInventory {
    pub devices: Vec<InventoryDevice>,
    /// Why there are no devices (e.g. "no RDMA devices / libibverbs not
    /// found (…)"); `None` when the probe ran.
    pub error: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct InventoryDevice {
    pub name: String,
    /// The device's NUMA node (sysfs), `None` when it has none.
    pub numa_node: Option<i32>,
    pub ports: Vec<InventoryPort>,
    /// The device was listed but could not be opened or queried.
    pub error: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct InventoryPort {
    pub port: u8,
    /// "ACTIVE", "DOWN", … as ibv_devinfo names it.
    pub state: String,
    /// "InfiniBand" or "Ethernet".
    pub link_layer: String,
    /// Active rate × width in Gb/s of data (HDR 4X = 200), `None` when the
    /// speed code is unknown.
    pub rate_gbps: Option<f64>,
    /// Active MTU in bytes.
    pub mtu: u32,
}

impl RdmaInventory {
    /// Probes this host; a host without RDMA gives no devices and the reason.
    pub fn of_this_host() -> RdmaInventory {
        match probe() {
            Ok(report) => RdmaInventory::from(&report),
            Err(e) => RdmaInventory { devices: Vec::new(), error: Some(e.to_string()) },
        }
    }
}

/// The port a flow uses among a host's `devices`: the asked device and
/// port, else (as the transport picks them) the first device and port that
/// are ACTIVE.
pub fn port_used<'a>(
    devices: &'a [InventoryDevice],
    device: Option<&str>,
    port: Option<u8>,
) -> Option<(&'a InventoryDevice, &'a InventoryPort)> {
    devices
        .iter()
        .filter(|d| device.is_none_or(|name| d.name == name))
        .flat_map(|d| d.ports.iter().map(move |p| (d, p)))
        .find(|(_, p)| port.map_or(p.state == "ACTIVE", |n| p.port == n))
}

impl From<&ProbeReport> for RdmaInventory {
    fn from(report: &ProbeReport) -> RdmaInventory {
        let devices = report
            .devices
            .iter()
            .map(|d| InventoryDevice {
                name: d.name.clone(),
                numa_node: d.numa_node,
                ports: d
                    .ports
                    .iter()
                    .map(|p| InventoryPort {
                        port: p.port,
                        state: p.state.clone(),
                        link_layer: p.link_layer.clone(),
                        rate_gbps: p.rate_gbps,
                        mtu: p.active_mtu,
                    })
                    .collect(),
                error: d.error.clone(),
            })
            .collect();
        RdmaInventory { devices, error: None }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_host_has_devices_or_says_why_not() {
        let inventory = RdmaInventory::of_this_host();
        assert_eq!(inventory.error.is_some(), inventory.devices.is_empty(), "{inventory:?}");
    }
}
