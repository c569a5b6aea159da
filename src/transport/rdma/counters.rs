//! NIC truth: /sys/class/infiniband/<dev>/ports/<p>/{counters,hw_counters}.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// Files under hw_counters that are settings, not counters.
const NOT_COUNTERS: &[&str] = &["lifespan"];

/// A port of an RDMA device: the device's name (`mlx5_0`) and the port's
/// number, as sysfs names them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DevicePort {
    pub device: String,
    pub port: u8,
}

/// One reading of every counter of one port, keyed "counters/<name>" and
/// "hw_counters/<name>".
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct CounterSnapshot {
    pub device: String,
    pub port: u8,
    pub values: BTreeMap<String, u64>,
}

/// Reads the counters of `device` port `port` under `root` (normally
/// `/sys/class/infiniband`). Unreadable files are skipped (some need root).
pub fn snapshot_at(root: &Path, device: &str, port: u8) -> std::io::Result<CounterSnapshot> {
    let port_dir = root.join(device).join("ports").join(port.to_string());
    if !port_dir.is_dir() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("{} does not exist", port_dir.display()),
        ));
    }
    let mut values = BTreeMap::new();
    for group in ["counters", "hw_counters"] {
        let Ok(entries) = fs::read_dir(port_dir.join(group)) else { continue };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if NOT_COUNTERS.contains(&name.as_str()) {
                continue;
            }
            let Ok(text) = fs::read_to_string(entry.path()) else { continue };
            if let Ok(v) = text.trim().parse::<u64>() {
                values.insert(format!("{group}/{name}"), v);
            }
        }
    }
    Ok(CounterSnapshot { device: device.to_string(), port, values })
}

/// [`snapshot_at`] under the sysfs root's class/infiniband (crate::sysfs).
pub fn snapshot(device: &str, port: u8) -> std::io::Result<CounterSnapshot> {
    let root = crate::sysfs::root().map_err(std::io::Error::other)?;
    snapshot_at(&crate::sysfs::infiniband(&root), device, port)
}

/// Snapshots of every port of every device under `root` (…/class/infiniband).
pub fn snapshot_all_at(root: &Path) -> Vec<CounterSnapshot> {
    let mut out = Vec::new();
    let Ok(devs) = fs::read_dir(root) else { return out };
    for dev in devs.flatten() {
        let name = dev.file_name().to_string_lossy().into_owned();
        let Ok(ports) = fs::read_dir(dev.path().join("ports")) else { continue };
        for p in ports.flatten() {
            if let Ok(port) = p.file_name().to_string_lossy().parse::<u8>() {
                if let Ok(s) = snapshot_at(root, &name, port) {
                    out.push(s);
                }
            }
        }
    }
    out.sort_by(|a, b| (&a.device, a.port).cmp(&(&b.device, b.port)));
    out
}

/// [`snapshot_all_at`] under the sysfs root (none when the root is invalid).
pub fn snapshot_all() -> Vec<CounterSnapshot> {
    crate::sysfs::root().map(|root| snapshot_all_at(&crate::sysfs::infiniband(&root))).unwrap_or_default()
}

/// Bytes per unit of a counter: IB's `counters/port_xmit_data` and
/// `counters/port_rcv_data` count 4-byte words (IBA PortCounters, and
/// Documentation/ABI/stable/sysfs-class-infiniband: "octets divided by 4");
/// every other counter counts events or packets and has none (`None`).
pub fn bytes_per_unit(key: &str) -> Option<u64> {
    matches!(key, "counters/port_xmit_data" | "counters/port_rcv_data").then_some(4)
}

/// Counters (the name after `counters/` or `hw_counters/`) that mean lost
/// or reordered packets and retries: mlx5's and Soft-RoCE's.
pub const LOSS: &[&str] = &[
    "out_of_sequence",
    "packet_seq_err",
    "local_ack_timeout_err",
    "rnr_nak_retry_err",
    "rcvd_seq_err",
    "out_of_seq_request",
    "retry_exceeded_err",
    "completer_retry_err",
];
/// Counters that mean congestion control acted, or a port waited to send.
pub const CONGESTION: &[&str] = &["np_cnp_sent", "rp_cnp_handled", "np_ecn_marked_roce_packets", "port_xmit_wait"];

/// A counter's name without its group (`hw_counters/np_cnp_sent` → `np_cnp_sent`).
pub fn short_name(key: &str) -> &str {
    key.rsplit('/').next().unwrap_or(key)
}

/// How far one port's counters moved over a window: the counters that
/// changed, keyed like [`CounterSnapshot::values`], in their raw units
/// (IB's `counters/port_{xmit,rcv}_data` count 4-byte words). Crosses the
/// wire in a rank's report: no `skip_serializing_if` here.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct CounterDelta {
    pub device: String,
    pub port: u8,
    pub counters: BTreeMap<String, u64>,
    /// The [`LOSS`] and [`CONGESTION`] counters the port has (short
    /// names), moved or not: one it lacks is unavailable, never 0. `None`
    /// in runs made before it was kept.
    #[serde(default)]
    pub signals: Option<Vec<String>>,
}

impl CounterSnapshot {
    /// The counters that moved between `self` and `later` (zeros left out),
    /// and the loss and congestion counters the port has.
    pub fn moved_until(&self, later: &CounterSnapshot) -> CounterDelta {
        let mut counters = self.delta(later);
        counters.retain(|_, v| *v != 0);
        let signals = self
            .values
            .keys()
            .map(|k| short_name(k))
            .filter(|n| LOSS.contains(n) || CONGESTION.contains(n))
            .map(str::to_string)
            .collect();
        CounterDelta { device: self.device.clone(), port: self.port, counters, signals: Some(signals) }
    }

    /// `later - self` per counter (counters present in both; wrapped or reset
    /// counters give 0). IB's port_*_data counters count 4-byte words; the
    /// delta keeps the raw unit.
    pub fn delta(&self, later: &CounterSnapshot) -> BTreeMap<String, u64> {
        later
            .values
            .iter()
            .filter_map(|(k, &v)| self.values.get(k).map(|&old| (k.clone(), v.saturating_sub(old))))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_both_groups_and_computes_deltas() {
        let dir = std::env::temp_dir().join(format!("fb-counters-{}", std::process::id()));
        let port = dir.join("mlx5_0/ports/1");
        fs::create_dir_all(port.join("counters")).unwrap();
        fs::create_dir_all(port.join("hw_counters")).unwrap();
        fs::write(port.join("counters/port_xmit_data"), "100\n").unwrap();
        fs::write(port.join("hw_counters/rdma_sends"), "7\n").unwrap();
        fs::write(port.join("hw_counters/lifespan"), "10\n").unwrap();
        fs::write(port.join("hw_counters/garbage"), "n/a\n").unwrap();
        let a = snapshot_at(&dir, "mlx5_0", 1).unwrap();
        assert_eq!(a.values.len(), 2, "{:?}", a.values);
        fs::write(port.join("counters/port_xmit_data"), "250\n").unwrap();
        let b = snapshot_at(&dir, "mlx5_0", 1).unwrap();
        let d = a.delta(&b);
        assert_eq!(d["counters/port_xmit_data"], 150);
        assert_eq!(d["hw_counters/rdma_sends"], 0);
        let moved = a.moved_until(&b);
        assert_eq!((moved.device.as_str(), moved.port), ("mlx5_0", 1));
        assert_eq!(moved.counters.into_iter().collect::<Vec<_>>(), [("counters/port_xmit_data".to_string(), 150)]);
        assert!(snapshot_at(&dir, "mlx5_0", 2).is_err());
        fs::remove_dir_all(&dir).unwrap();
    }
}
