//! The largest values a scenario may ask for. Each bound is far above what
//! a measurement needs and far below what would overflow, exhaust memory or
//! silently change the run; docs/SECURITY.md lists them and how to raise them.

use std::time::Duration;

use crate::scenario::rdma::MAX_MESSAGE_SIZE;
use crate::scenario::Transport;

/// The shortest sample interval: the clocks and the sampler tick in ms.
pub const MIN_INTERVAL: Duration = Duration::from_millis(1);
/// Samples (duration / interval) one phase may take: every rank keeps a
/// counter pair per sample and flow end.
pub const MAX_SAMPLES: u128 = 100_000;
/// Longest `duration`, and longest `warmup`: a week each keeps every
/// window sum (t0 + warmup + duration + timeouts, in ns) far inside an i64.
pub const MAX_WINDOW: Duration = Duration::from_secs(7 * 24 * 3600);
/// Largest TCP message: each stream sends from, and receives into, one
/// buffer of the message size, allocated before t0.
pub const TCP_MAX_MESSAGE: u64 = 4 << 20;
/// Largest TCP `dscp` (the 6-bit differentiated-services code point).
pub const MAX_DSCP: u8 = 63;
/// Parallel streams (TCP connections) per flow.
pub const MAX_STREAMS: u32 = 1024;
/// Pairs one `explicit` or `pairwise` group may list.
pub const MAX_FLOWS: usize = 1 << 20;
/// Points of a sweep (values × `by` values): one phase each.
pub const MAX_SWEEP_POINTS: usize = 10_000;
/// Repeats of each phase (`[run] repeat`, `run --repeat`): every repeat is
/// a phase of its own, journaled and kept, so the run is this many times longer.
pub const MAX_REPEATS: u32 = 100;
/// Phases of one run, repeats included (sweep points × all-pairs rounds ×
/// repeats): the plan holds every phase before the first starts, and the
/// journal keeps one line each; a run of more is several runs.
pub const MAX_PHASES: usize = 100_000;
/// Longest `run.name` and group name.
pub const MAX_NAME: usize = 64;
/// Burner threads per rank, per core of the machine that validates.
pub const THREADS_PER_CORE: usize = 4;

/// The message sizes a transport sends as asked: up to `largest` bytes,
/// and the sentence that says so and why (for the error).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MessageSizes {
    pub largest: u64,
    pub why: &'static str,
}

/// The message sizes `transport` sends as asked.
pub fn message_sizes(transport: Transport) -> MessageSizes {
    match transport {
        Transport::Tcp => MessageSizes {
            largest: TCP_MAX_MESSAGE,
            why: "TCP messages are 1 B to 4 MiB (each stream sends from one buffer that size)",
        },
        Transport::Rdma => MessageSizes {
            largest: MAX_MESSAGE_SIZE,
            why: "RDMA messages are 1 B to 1 GiB (one work request, the RC limit of most HCAs)",
        },
    }
}

/// What the machine that validates the scenario has: the stand-in for the
/// ranks' hosts, which a scenario file does not know (a launcher usually
/// runs on a node like the others).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Machine {
    pub cores: usize,
    /// MemTotal, bytes; `None` where /proc/meminfo cannot be read.
    pub memory: Option<u64>,
}

impl Machine {
    pub fn this() -> Machine {
        let memory = std::fs::read_to_string("/proc/meminfo").ok().and_then(|text| mem_total(&text));
        Machine { cores: num_cpus::get().max(1), memory }
    }
}

/// `MemTotal:  16318304 kB` in bytes.
fn mem_total(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find_map(|l| l.strip_prefix("MemTotal:"))?;
    let kib: u64 = line.trim().strip_suffix("kB")?.trim().parse().ok()?;
    kib.checked_mul(1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mem_total_reads_meminfo() {
        assert_eq!(mem_total("MemTotal:       16318304 kB\nMemFree: 1 kB\n"), Some(16318304 * 1024));
        assert_eq!(mem_total("MemFree: 1 kB\n"), None);
        assert!(Machine::this().memory.is_some_and(|m| m > 0));
    }
}
