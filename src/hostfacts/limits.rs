//! The locked-memory limit a host gives the processes it starts, read from
//! /proc/self/limits (and /proc/self/status for CAP_IPC_LOCK, which lifts
//! it) of the process reading the facts: started the same way as the run's
//! workers (the same ssh, Slurm step or shell), it inherits what they
//! inherit. Verbs pin what they register (buffers, and on NICs the queues)
//! against it.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The hard RLIMIT_MEMLOCK: every fabricbench process raises its soft limit
/// to it, so it is what a worker may pin.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum LockedMemory {
    Unlimited,
    /// The process holds CAP_IPC_LOCK (root outside a container, most
    /// often): the limit does not apply to it.
    CapIpcLock,
    Bytes(u64),
}

/// CAP_IPC_LOCK's bit in the capability sets (linux/capability.h).
const CAP_IPC_LOCK: u32 = 14;

impl LockedMemory {
    /// What a /proc/PID/limits and /proc/PID/status text say: the hard
    /// "Max locked memory", unless `CapEff` holds CAP_IPC_LOCK.
    pub(super) fn read(limits: &str, status: Option<&str>) -> Option<LockedMemory> {
        let capable = status.and_then(effective_caps).is_some_and(|caps| caps >> CAP_IPC_LOCK & 1 == 1);
        if capable {
            return Some(LockedMemory::CapIpcLock);
        }
        const NAME: &str = "Max locked memory";
        let line = limits.lines().find(|l| l.starts_with(NAME))?;
        match line[NAME.len()..].split_whitespace().nth(1)? {
            "unlimited" => Some(LockedMemory::Unlimited),
            bytes => bytes.parse().ok().map(LockedMemory::Bytes),
        }
    }

    pub fn is_limited(self) -> bool {
        matches!(self, LockedMemory::Bytes(_))
    }
}

/// The `CapEff:` mask of a /proc/PID/status text (hex).
fn effective_caps(status: &str) -> Option<u64> {
    let hex = status.lines().find_map(|l| l.strip_prefix("CapEff:"))?;
    u64::from_str_radix(hex.trim(), 16).ok()
}

impl fmt::Display for LockedMemory {
    /// `unlimited`, `64 KiB`, `8 MiB`, `1.5 GiB`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let bytes = match *self {
            LockedMemory::Unlimited => return write!(f, "unlimited"),
            LockedMemory::CapIpcLock => return write!(f, "unlimited (CAP_IPC_LOCK)"),
            LockedMemory::Bytes(bytes) => bytes,
        };
        let units = [(1u64 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")];
        match units.iter().find(|(scale, _)| bytes >= *scale) {
            Some((scale, unit)) if bytes.is_multiple_of(*scale) => write!(f, "{} {unit}", bytes / scale),
            Some((scale, unit)) => write!(f, "{:.1} {unit}", bytes as f64 / *scale as f64),
            None => write!(f, "{bytes} B"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: &str = "Limit                     Soft Limit           Hard Limit           Units     \n\
        Max cpu time              unlimited            unlimited            seconds   \n\
        Max locked memory         65536                8388608              bytes     \n\
        Max address space         unlimited            unlimited            bytes     \n";

    #[test]
    fn the_hard_limit_is_read() {
        assert_eq!(LockedMemory::read(LIMITS, None), Some(LockedMemory::Bytes(8 << 20)));
        let unlimited = LIMITS.replace("65536                8388608", "unlimited            unlimited");
        assert_eq!(LockedMemory::read(&unlimited, None), Some(LockedMemory::Unlimited));
        assert_eq!(LockedMemory::read("Max cpu time unlimited unlimited seconds\n", None), None);
        assert_eq!(LockedMemory::read("Max locked memory 64k lots bytes\n", None), None);
    }

    #[test]
    fn cap_ipc_lock_lifts_the_limit() {
        // Root on a host, and a container's root without CAP_IPC_LOCK (Docker's default set).
        let root = "Name:\tfabricbench\nCapInh:\t0000000000000000\nCapEff:\t000001ffffffffff\n";
        let docker = "CapEff:\t00000000a80425fb\n";
        assert_eq!(LockedMemory::read(LIMITS, Some(root)), Some(LockedMemory::CapIpcLock));
        assert_eq!(LockedMemory::read(LIMITS, Some(docker)), Some(LockedMemory::Bytes(8 << 20)));
        assert_eq!(LockedMemory::read(LIMITS, Some("CapEff:\tzz\n")), Some(LockedMemory::Bytes(8 << 20)));
        assert!(!LockedMemory::CapIpcLock.is_limited());
        assert_eq!(LockedMemory::CapIpcLock.to_string(), "unlimited (CAP_IPC_LOCK)");
    }

    #[test]
    fn sizes_read_in_binary_units() {
        let text = |b| LockedMemory::Bytes(b).to_string();
        assert_eq!(
            (text(65536), text(8 << 20), text(3 << 29), text(100)),
            ("64 KiB".into(), "8 MiB".into(), "1.5 GiB".into(), "100 B".into())
        );
        assert_eq!(LockedMemory::Unlimited.to_string(), "unlimited");
        assert!(!LockedMemory::Unlimited.is_limited() && LockedMemory::Bytes(1).is_limited());
    }
}
