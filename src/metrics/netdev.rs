//! Interface byte counters (/sys/class/net/*/statistics): the kernel's count
//! of what crossed the wire, the ground truth beside the application's count.

use std::net::IpAddr;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::metrics::qdisc::{egress_limiter, Limiter};
use crate::sysfs::pcie::PcieLink;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetdevSnapshot {
    pub iface: String,
    rx_bytes: u64,
    tx_bytes: u64,
}

/// Bytes an interface received and sent over a window.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NetdevDelta {
    pub iface: String,
    pub rx_bytes: u64,
    pub tx_bytes: u64,
    /// The link's speed at the window's end (/sys/class/net/IF/speed), Mb/s;
    /// `None` where the kernel tells none (loopback, a link that is down),
    /// and in runs made before it was read.
    #[serde(default)]
    pub speed_mbps: Option<u64>,
    /// An egress rate limiter on it at the window's end (a root tbf, or an
    /// htb's one top class): what it sends goes no faster. `null` where it
    /// has none; absent in runs made before it was read. (Always written:
    /// the rank's report crosses the wire in postcard, which has no
    /// absent fields.)
    #[serde(default)]
    pub limiter: Option<Limiter>,
    /// The PCIe link its NIC trained at (`device/current_link_*`); `None`
    /// for a virtual interface, and in runs made before it was read.
    #[serde(default)]
    pub pcie: Option<PcieLink>,
}

/// The interface that owns `addr`: the one holding it, or whose subnet has it
/// (127.0.0.2 lives on `lo` through 127.0.0.0/8).
pub fn iface_of(addr: IpAddr) -> Option<String> {
    let ifaces = if_addrs::get_if_addrs().ok()?;
    if let Some(exact) = ifaces.iter().find(|i| i.ip() == addr) {
        return Some(exact.name.clone());
    }
    ifaces.iter().find(|i| in_subnet(&i.addr, addr)).map(|i| i.name.clone())
}

fn in_subnet(ifaddr: &if_addrs::IfAddr, addr: IpAddr) -> bool {
    match (ifaddr, addr) {
        (if_addrs::IfAddr::V4(v4), IpAddr::V4(a)) => {
            let mask = u32::from(v4.netmask);
            u32::from(v4.ip) & mask == u32::from(a) & mask
        }
        (if_addrs::IfAddr::V6(v6), IpAddr::V6(a)) => {
            let mask = u128::from(v6.netmask);
            u128::from(v6.ip) & mask == u128::from(a) & mask
        }
        _ => false,
    }
}

impl NetdevSnapshot {
    pub fn take(iface: &str) -> Option<NetdevSnapshot> {
        let dir = Path::new("/sys/class/net").join(iface).join("statistics");
        let read = |name: &str| -> Option<u64> { std::fs::read_to_string(dir.join(name)).ok()?.trim().parse().ok() };
        Some(NetdevSnapshot { iface: iface.to_string(), rx_bytes: read("rx_bytes")?, tx_bytes: read("tx_bytes")? })
    }

    /// What moved from `self` to `end`, with the link's speed read now (once,
    /// as the window closes, not at every boundary).
    pub fn delta_until(&self, end: &NetdevSnapshot) -> NetdevDelta {
        NetdevDelta {
            iface: self.iface.clone(),
            rx_bytes: end.rx_bytes.saturating_sub(self.rx_bytes),
            tx_bytes: end.tx_bytes.saturating_sub(self.tx_bytes),
            speed_mbps: speed_mbps(&self.iface),
            limiter: egress_limiter(&self.iface),
            pcie: PcieLink::of(&Path::new("/sys/class/net").join(&self.iface).join("device")),
        }
    }
}

/// /sys/class/net/IF/speed in Mb/s; the kernel says -1 (unknown) as
/// 4294967295 or -1, and loopback has none: neither is a speed.
fn speed_mbps(iface: &str) -> Option<u64> {
    let text = std::fs::read_to_string(Path::new("/sys/class/net").join(iface).join("speed")).ok()?;
    let mbps = u64::try_from(text.trim().parse::<i64>().ok()?).ok()?;
    (mbps > 0 && mbps < u64::from(u32::MAX)).then_some(mbps)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_addresses_map_to_lo() {
        assert_eq!(iface_of("127.0.0.3".parse().unwrap()).as_deref(), Some("lo"));
        assert!(NetdevSnapshot::take("lo").is_some());
        assert!(NetdevSnapshot::take("no-such-if0").is_none());
    }

    #[test]
    fn loopback_and_a_missing_interface_have_no_speed() {
        assert_eq!((speed_mbps("lo"), speed_mbps("no-such-if0")), (None, None));
    }
}
