//! A host's clock as latency samples meet it: the kernel's clocksource
//! (`tsc`, `hpet`, `kvm-clock`, `arch_sys_counter`), whether the CPU's
//! cycle counter runs at a constant rate, and what one read of the
//! monotonic clock costs, measured on the live host. Every latency sample
//! pays one read; on a clocksource like HPET that is microseconds (2.6 µs
//! in a QEMU VM), where perftest reads the cycle counter directly.

use std::path::Path;
use std::time::Instant;

use serde::{Deserialize, Serialize};

/// A read above this costs a latency sample more than a tenth of the
/// fastest round trips measured (1.5–3 µs on RDMA NICs): said beside them.
pub const SLOW_READ_NS: f64 = 200.0;

/// Reads timed per round of [`read_ns`], and rounds (the least is kept:
/// an interrupt only ever adds).
const READS: u32 = 1000;
const ROUNDS: u32 = 5;

/// Crosses the wire inside `HostFacts`: no `skip_serializing_if`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct ClockFacts {
    /// The kernel's clocksource (`devices/system/clocksource/clocksource0/current_clocksource`).
    pub source: Option<String>,
    /// Whether the CPU's cycle counter runs at a constant rate: x86's
    /// `constant_tsc` and `nonstop_tsc` flags (/proc/cpuinfo); ARM's
    /// generic timer always does.
    pub constant_counter: Option<bool>,
    /// What one read of the monotonic clock costs, ns; measured on the
    /// live host only (`None` from a recorded tree).
    pub read_ns: Option<f64>,
}

impl ClockFacts {
    /// The clocksource under `sys` and the counter's flags in `cpuinfo`.
    pub fn under(sys: &Path, cpuinfo: Option<&str>) -> ClockFacts {
        let path = sys.join("devices/system/clocksource/clocksource0/current_clocksource");
        ClockFacts {
            source: crate::sysfs::text(&path),
            constant_counter: cpuinfo.and_then(constant_counter),
            read_ns: None,
        }
    }

    /// With the read's cost measured here, now.
    pub fn measured(self) -> ClockFacts {
        ClockFacts { read_ns: Some(read_ns()), ..self }
    }

    /// Whether a read costs a latency sample more than [`SLOW_READ_NS`].
    pub fn is_slow(&self) -> bool {
        self.read_ns.is_some_and(|ns| ns > SLOW_READ_NS)
    }
}

/// x86: both flags on the first `flags` line; ARM (a `CPU implementer`
/// line, no `flags`): the generic timer; else unknown.
fn constant_counter(cpuinfo: &str) -> Option<bool> {
    if let Some(flags) = super::cpuinfo_field(cpuinfo, "flags") {
        let has = |flag: &str| flags.split_whitespace().any(|f| f == flag);
        return Some(has("constant_tsc") && has("nonstop_tsc"));
    }
    super::cpuinfo_field(cpuinfo, "CPU implementer").map(|_| true)
}

/// The least mean cost of one `Instant::now()` over [`ROUNDS`] rounds of
/// [`READS`] reads, ns.
fn read_ns() -> f64 {
    (0..ROUNDS)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..READS {
                std::hint::black_box(Instant::now());
            }
            start.elapsed().as_nanos() as f64 / f64::from(READS)
        })
        .fold(f64::INFINITY, f64::min)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_counter_is_constant_with_both_x86_flags_or_on_arm() {
        let x86 = |flags: &str| format!("processor\t: 0\nflags\t\t: fpu {flags} rdtscp\n\nprocessor\t: 1\n");
        assert_eq!(constant_counter(&x86("tsc constant_tsc nonstop_tsc")), Some(true));
        assert_eq!(constant_counter(&x86("tsc constant_tsc")), Some(false), "a TSC that stops in deep C-states");
        assert_eq!(constant_counter(&x86("tsc")), Some(false));
        let arm = "processor\t: 0\nBogoMIPS\t: 50.00\nFeatures\t: fp asimd\nCPU implementer\t: 0x41\n";
        assert_eq!(constant_counter(arm), Some(true));
        assert_eq!(constant_counter("cpu\t\t: POWER9\n"), None);
    }

    #[test]
    fn the_clocksource_is_read_from_sysfs_and_the_cost_measured_only_live() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("devices/system/clocksource/clocksource0");
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::write(folder.join("current_clocksource"), "hpet\n").unwrap();
        let read = ClockFacts::under(dir.path(), Some("flags\t: tsc\n"));
        let expected = ClockFacts { source: Some("hpet".into()), constant_counter: Some(false), read_ns: None };
        assert_eq!(read, expected);
        assert!(!read.is_slow(), "nothing measured, nothing said");
        assert_eq!(ClockFacts::under(&dir.path().join("none"), None), ClockFacts::default());
    }

    /// The measured cost agrees with reads timed another way: a million
    /// `Instant::now()` against the wall time they took.
    #[test]
    fn the_measured_cost_is_what_many_reads_take() {
        let measured = ClockFacts::default().measured().read_ns.unwrap();
        let start = Instant::now();
        for _ in 0..1_000_000 {
            std::hint::black_box(Instant::now());
        }
        let mean = start.elapsed().as_nanos() as f64 / 1e6;
        assert!(
            measured > 0.0 && measured <= mean * 1.5,
            "measured {measured} ns a read, a million took {mean} ns each"
        );
    }
}
