//! `fabricbench probe`: every device and port, for humans and for run.json.

use std::fmt;
use std::fs;
use std::path::Path;

use serde::{Deserialize, Serialize};
use sideway::ibverbs::device::DeviceInfo;

use super::device;
use super::error::RdmaError;
use super::ffi;
use super::gids;
use super::gids::{GidInfo, GidKind};

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct ProbeReport {
    /// rdma-core version of the loaded libibverbs (e.g. 44), when known.
    pub rdma_core: Option<u32>,
    pub devices: Vec<DeviceReport>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct DeviceReport {
    pub name: String,
    pub node_guid: String,
    pub firmware: String,
    pub vendor_id: u32,
    pub vendor_part_id: u32,
    /// From /sys/class/infiniband/<dev>/device/numa_node; None when absent or -1.
    pub numa_node: Option<i32>,
    pub max_qp: i32,
    pub max_qp_wr: i32,
    pub max_cqe: i32,
    pub max_qp_rd_atom: i32,
    pub atomics: bool,
    pub ports: Vec<PortReport>,
    /// Set when the device could be listed but not opened or queried.
    pub error: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct PortReport {
    pub port: u8,
    pub state: String,
    pub physical_state: String,
    pub link_layer: String,
    /// e.g. "HDR 4X = 200 Gb/s".
    pub rate: String,
    /// Gb/s of data (width × per-lane throughput), when the speed is known.
    pub rate_gbps: Option<f64>,
    pub active_mtu: u32,
    pub max_mtu: u32,
    pub lid: u16,
    pub sm_lid: u16,
    pub gids: Vec<GidInfo>,
    pub error: Option<String>,
}

/// Lists every device, port and GID. Errors only when there is no device at all.
pub fn probe() -> Result<ProbeReport, RdmaError> {
    let infiniband = crate::sysfs::infiniband(&crate::sysfs::root()?);
    let list = device::device_list()?;
    let mut devices = Vec::new();
    for dev in list.iter() {
        let name = dev.name();
        let mut report = DeviceReport {
            name: name.clone(),
            node_guid: String::new(),
            firmware: String::new(),
            vendor_id: 0,
            vendor_part_id: 0,
            numa_node: numa_node_at(&infiniband, &name),
            max_qp: 0,
            max_qp_wr: 0,
            max_cqe: 0,
            max_qp_rd_atom: 0,
            atomics: false,
            ports: Vec::new(),
            error: None,
        };
        let ctx = match dev.open() {
            Ok(c) => c,
            Err(e) => {
                report.error = Some(format!(
                    "ibv_open_device: {}",
                    std::error::Error::source(&e).map(|s| s.to_string()).unwrap_or(e.to_string())
                ));
                devices.push(report);
                continue;
            }
        };
        match ctx.query_device() {
            Ok(attr) => {
                let a = &attr.attr.orig_attr;
                report.node_guid = guid_string(u64::from_be(a.node_guid));
                report.firmware = attr.firmware_version();
                report.vendor_id = a.vendor_id;
                report.vendor_part_id = a.vendor_part_id;
                report.max_qp = a.max_qp;
                report.max_qp_wr = a.max_qp_wr;
                report.max_cqe = a.max_cqe;
                report.max_qp_rd_atom = a.max_qp_rd_atom;
                report.atomics = a.atomic_cap != 0;
                for port in 1..=a.phys_port_cnt {
                    report.ports.push(port_report(&ctx, &infiniband, &name, port));
                }
            }
            Err(e) => report.error = Some(format!("ibv_query_device_ex: {e}")),
        }
        devices.push(report);
    }
    Ok(ProbeReport { rdma_core: device::rdma_core_version(), devices })
}

fn port_report(
    ctx: &sideway::ibverbs::device_context::DeviceContext,
    infiniband: &Path,
    device: &str,
    port: u8,
) -> PortReport {
    let mut r = PortReport {
        port,
        state: String::new(),
        physical_state: String::new(),
        link_layer: String::new(),
        rate: String::new(),
        rate_gbps: None,
        active_mtu: 0,
        max_mtu: 0,
        lid: 0,
        sm_lid: 0,
        gids: Vec::new(),
        error: None,
    };
    let a = match ffi::query_port(ctx, port) {
        Ok(a) => a,
        Err(e) => {
            r.error = Some(format!("ibv_query_port: {e}"));
            return r;
        }
    };
    r.state = port_state_name(a.state).to_string();
    r.physical_state = phys_state_name(a.phys_state).to_string();
    r.link_layer = link_layer_name(a.link_layer).to_string();
    let speed = if a.active_speed_ex != 0 { a.active_speed_ex } else { u32::from(a.active_speed) };
    // A speed this build does not know (a newer generation): the kernel's own words.
    let codes = RateCodes { speed, width: a.active_width };
    let rate = match rate_string(codes) {
        LineRate { gbps: None, .. } => sysfs_rate_at(infiniband, device, port).unwrap_or_else(|| rate_string(codes)),
        known => known,
    };
    r.rate = rate.text;
    r.rate_gbps = rate.gbps;
    r.active_mtu = mtu_bytes(a.active_mtu);
    r.max_mtu = mtu_bytes(a.max_mtu);
    r.lid = a.lid;
    r.sm_lid = a.sm_lid;
    r.gids = device::gid_table(ctx, port, a.gid_tbl_len, a.link_layer);
    gids::add_netdevs(infiniband, device, port, &mut r.gids);
    r
}

/// The NUMA node of `dev` under the sysfs root (None when absent or -1).
pub(crate) fn numa_node(dev: &str) -> Option<i32> {
    numa_node_at(&crate::sysfs::infiniband(&crate::sysfs::root().ok()?), dev)
}

/// `device/numa_node` of `dev` under `infiniband` (…/class/infiniband).
pub fn numa_node_at(infiniband: &Path, dev: &str) -> Option<i32> {
    let s = fs::read_to_string(infiniband.join(dev).join("device/numa_node")).ok()?;
    s.trim().parse().ok().filter(|&n: &i32| n >= 0)
}

/// A port's `rate` file under `infiniband`, read as [`sysfs_rate`] reads it.
pub fn sysfs_rate_at(infiniband: &Path, dev: &str, port: u8) -> Option<LineRate> {
    let text = fs::read_to_string(infiniband.join(dev).join("ports").join(port.to_string()).join("rate")).ok()?;
    sysfs_rate(&text).map(rate_string)
}

/// A port's verbs speed and width codes (`ibv_port_attr`'s active speed
/// and active width: one bit each).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateCodes {
    pub speed: u32,
    pub width: u8,
}

/// A port's line rate in words ("HDR 4X = 200 Gb/s", or why it is
/// unknown), and its data Gb/s where the codes are known.
#[derive(Clone, Debug, PartialEq)]
pub struct LineRate {
    pub text: String,
    pub gbps: Option<f64>,
}

/// The verbs speed and width codes of a sysfs `rate` such as
/// "200 Gb/sec (4X HDR)" or "2.5 Gb/sec (1X SDR)" (the kernel's
/// `rate_show`: signalling Gb/s, then lanes and generation). The number is
/// not used: it is the signalling rate (QDR 4X says 40 where 32 carry data).
pub fn sysfs_rate(text: &str) -> Option<RateCodes> {
    let inner = text.trim().rsplit_once('(')?.1.strip_suffix(')')?;
    let (lanes, generation) = inner.split_once(' ')?;
    let width = match lanes.strip_suffix('X')? {
        "1" => 1,
        "4" => 2,
        "8" => 4,
        "12" => 8,
        "2" => 16,
        _ => return None,
    };
    let speed = match generation.trim() {
        "SDR" => 1,
        "DDR" => 2,
        "QDR" => 4,
        "FDR10" => 8,
        "FDR" => 16,
        "EDR" => 32,
        "HDR" => 64,
        "NDR" => 128,
        "XDR" => 256,
        _ => return None,
    };
    Some(RateCodes { speed, width })
}

fn guid_string(g: u64) -> String {
    format!("{:04x}:{:04x}:{:04x}:{:04x}", g >> 48, (g >> 32) & 0xffff, (g >> 16) & 0xffff, g & 0xffff)
}

/// `ibv_mtu` enum (1..=5) to bytes; 0 when unknown.
pub(crate) fn mtu_bytes(m: u32) -> u32 {
    if (1..=5).contains(&m) {
        128 << m
    } else {
        0
    }
}

fn port_state_name(s: u32) -> &'static str {
    match s {
        0 => "NOP",
        1 => "DOWN",
        2 => "INIT",
        3 => "ARMED",
        4 => "ACTIVE",
        5 => "ACTIVE_DEFER",
        _ => "UNKNOWN",
    }
}

fn phys_state_name(s: u8) -> &'static str {
    match s {
        1 => "SLEEP",
        2 => "POLLING",
        3 => "DISABLED",
        4 => "PORT_CONFIGURATION_TRAINING",
        5 => "LINK_UP",
        6 => "LINK_ERROR_RECOVERY",
        7 => "PHY_TEST",
        _ => "UNKNOWN",
    }
}

fn link_layer_name(l: u8) -> &'static str {
    match l {
        0 | 1 => "InfiniBand",
        2 => "Ethernet",
        _ => "Unknown",
    }
}

/// "HDR 4X = 200 Gb/s" from the verbs speed and width codes.
pub(crate) fn rate_string(RateCodes { speed, width }: RateCodes) -> LineRate {
    let lanes = match width {
        1 => Some(1u32),
        2 => Some(4),
        4 => Some(8),
        8 => Some(12),
        16 => Some(2),
        _ => None,
    };
    // (name, data Gb/s per lane)
    let generation = match speed {
        1 => Some(("SDR", 2.0)),
        2 => Some(("DDR", 4.0)),
        4 => Some(("QDR", 8.0)),
        8 => Some(("FDR10", 10.0)),
        16 => Some(("FDR", 13.64)),
        32 => Some(("EDR", 25.0)),
        64 => Some(("HDR", 50.0)),
        128 => Some(("NDR", 100.0)),
        256 => Some(("XDR", 200.0)),
        _ => None,
    };
    match (generation, lanes) {
        (Some((name, per_lane)), Some(n)) => {
            let total = per_lane * f64::from(n);
            let shown = if total.fract() == 0.0 { format!("{total:.0}") } else { format!("{total:.2}") };
            LineRate { text: format!("{name} {n}X = {shown} Gb/s"), gbps: Some(total) }
        }
        _ => LineRate { text: format!("unknown (speed code {speed}, width code {width})"), gbps: None },
    }
}

impl fmt::Display for ProbeReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(v) = self.rdma_core {
            writeln!(f, "rdma-core {v}")?;
        }
        for d in &self.devices {
            write!(
                f,
                "{}: fw {}, node GUID {}, NUMA node ",
                d.name,
                if d.firmware.is_empty() { "-" } else { &d.firmware },
                d.node_guid
            )?;
            match d.numa_node {
                Some(n) => writeln!(f, "{n}")?,
                None => writeln!(f, "-")?,
            }
            if let Some(e) = &d.error {
                writeln!(f, "  error: {e}")?;
            }
            for p in &d.ports {
                writeln!(
                    f,
                    "  port {}: {} ({}), {}, {}, MTU {} (max {}), LID {}",
                    p.port, p.state, p.physical_state, p.link_layer, p.rate, p.active_mtu, p.max_mtu, p.lid
                )?;
                if let Some(e) = &p.error {
                    writeln!(f, "    error: {e}")?;
                }
                for g in &p.gids {
                    let kind = match g.kind {
                        GidKind::Ib => "IB",
                        GidKind::RoceV1 => "RoCE v1",
                        GidKind::RoceV2 => "RoCE v2",
                    };
                    writeln!(
                        f,
                        "    GID[{:>3}] {:<40} {kind} {}",
                        g.index,
                        g.gid,
                        if g.ipv4 { "IPv4" } else { "IPv6" }
                    )?;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_read_like_ibstat() {
        let text = |speed, width| rate_string(RateCodes { speed, width }).text;
        assert_eq!(text(64, 2), "HDR 4X = 200 Gb/s");
        assert_eq!(text(32, 2), "EDR 4X = 100 Gb/s");
        assert_eq!(text(1, 1), "SDR 1X = 2 Gb/s"); // what rxe reports
        assert_eq!(text(16, 2), "FDR 4X = 54.56 Gb/s");
        assert!(rate_string(RateCodes { speed: 3, width: 9 }).gbps.is_none());
        assert_eq!(mtu_bytes(5), 4096);
        assert_eq!(mtu_bytes(9), 0);
    }

    #[test]
    fn sysfs_rates_read_like_the_verbs_codes() {
        let rate = |t: &str| sysfs_rate(t).map(rate_string).map(|r| (r.text, r.gbps));
        assert_eq!(rate("200 Gb/sec (4X HDR)\n"), Some(("HDR 4X = 200 Gb/s".into(), Some(200.0))));
        assert_eq!(rate("400 Gb/sec (4X NDR)"), Some(("NDR 4X = 400 Gb/s".into(), Some(400.0))));
        assert_eq!(rate("100 Gb/sec (2X HDR)"), Some(("HDR 2X = 100 Gb/s".into(), Some(100.0))));
        assert_eq!(rate("2.5 Gb/sec (1X SDR)"), Some(("SDR 1X = 2 Gb/s".into(), Some(2.0)))); // rxe
        assert_eq!(rate("40 Gb/sec (4X QDR)"), Some(("QDR 4X = 32 Gb/s".into(), Some(32.0))));
        assert_eq!(sysfs_rate("56 Gb/sec (4X FDR)"), Some(RateCodes { speed: 16, width: 2 }));
        for bad in ["", "200 Gb/sec", "200 Gb/sec (4X)", "200 Gb/sec (3X HDR)", "800 Gb/sec (4X YDR)"] {
            assert_eq!(sysfs_rate(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn probe_without_rdma_says_so() {
        match probe() {
            Ok(r) => assert!(!r.devices.is_empty()),
            Err(e) => assert!(e.to_string().contains("no RDMA devices"), "{e}"),
        }
    }
}
