//! CPU time of the worker process (user + system, unlike perftest's user-only
//! figure) and of the whole host, from /proc, between two snapshots.

use serde::{Deserialize, Serialize};

/// Kernel clock ticks per second for /proc times; 100 on every Linux ABI we run on.
const TICKS_PER_SECOND: f64 = 100.0;

#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CpuSnapshot {
    /// This process: user and system ticks.
    process_user: u64,
    process_system: u64,
    /// The host: busy and total ticks over all cores.
    host_busy: u64,
    host_total: u64,
}

/// CPU used over a window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuUsage {
    /// Worker process user + system time, in % of one core (200 = two cores busy).
    pub worker_pct: f64,
    pub worker_user_pct: f64,
    pub worker_system_pct: f64,
    /// Whole host busy time, in % of all its cores.
    pub host_pct: f64,
    pub host_cores: usize,
}

impl CpuSnapshot {
    /// Reads /proc/self/stat and /proc/stat; zeros where they cannot be read.
    pub fn take() -> CpuSnapshot {
        let (process_user, process_system) =
            std::fs::read_to_string("/proc/self/stat").ok().and_then(|s| parse_process_stat(&s)).unwrap_or_default();
        let (host_busy, host_total) =
            std::fs::read_to_string("/proc/stat").ok().and_then(|s| parse_host_stat(&s)).unwrap_or_default();
        CpuSnapshot { process_user, process_system, host_busy, host_total }
    }

    /// Usage between `self` (start) and `end` over `seconds` of wall time.
    pub fn usage_until(&self, end: &CpuSnapshot, seconds: f64) -> CpuUsage {
        let pct_of_core = |ticks: u64| {
            if seconds > 0.0 {
                ticks as f64 / TICKS_PER_SECOND / seconds * 100.0
            } else {
                0.0
            }
        };
        let user = end.process_user.saturating_sub(self.process_user);
        let system = end.process_system.saturating_sub(self.process_system);
        let total = end.host_total.saturating_sub(self.host_total);
        let busy = end.host_busy.saturating_sub(self.host_busy);
        CpuUsage {
            worker_pct: pct_of_core(user + system),
            worker_user_pct: pct_of_core(user),
            worker_system_pct: pct_of_core(system),
            host_pct: if total > 0 { busy as f64 / total as f64 * 100.0 } else { 0.0 },
            host_cores: num_cpus::get(),
        }
    }
}

/// Busy and total ticks of every core, from the `cpuN` lines of /proc/stat.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CoreTicks(Vec<(usize, u64, u64)>);

impl CoreTicks {
    pub fn take() -> CoreTicks {
        let text = std::fs::read_to_string("/proc/stat").unwrap_or_default();
        CoreTicks(
            text.lines()
                .filter_map(|l| {
                    let cpu: usize = l.split_whitespace().next()?.strip_prefix("cpu")?.parse().ok()?;
                    let (busy, total) = busy_total(l)?;
                    Some((cpu, busy, total))
                })
                .collect(),
        )
    }

    /// Busy percent of `cores` (all cores when empty) between two readings.
    pub fn busy_pct_until(&self, end: &CoreTicks, cores: &[usize]) -> f64 {
        let (mut busy, mut total) = (0u64, 0u64);
        for (cpu, b1, t1) in &end.0 {
            if !cores.is_empty() && !cores.contains(cpu) {
                continue;
            }
            if let Some((_, b0, t0)) = self.0.iter().find(|(c, _, _)| c == cpu) {
                busy += b1.saturating_sub(*b0);
                total += t1.saturating_sub(*t0);
            }
        }
        if total == 0 {
            0.0
        } else {
            busy as f64 / total as f64 * 100.0
        }
    }
}

/// utime and stime (fields 14 and 15) of /proc/<pid>/stat. The command name
/// in parentheses may hold spaces, so fields are counted after the last ')'.
fn parse_process_stat(text: &str) -> Option<(u64, u64)> {
    let rest = &text[text.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace().skip(11);
    Some((fields.next()?.parse().ok()?, fields.next()?.parse().ok()?))
}

/// Busy and total ticks from the aggregate `cpu` line of /proc/stat; idle and
/// iowait count as not busy.
fn parse_host_stat(text: &str) -> Option<(u64, u64)> {
    busy_total(text.lines().find(|l| l.starts_with("cpu "))?)
}

fn busy_total(line: &str) -> Option<(u64, u64)> {
    let values: Vec<u64> = line.split_whitespace().skip(1).filter_map(|v| v.parse().ok()).collect();
    // user nice system idle iowait irq softirq steal (guest is inside user)
    let total: u64 = values.iter().take(8).sum();
    let idle = values.get(3)? + values.get(4).unwrap_or(&0);
    Some((total - idle, total))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn process_stat_with_spaces_in_name() {
        let line = "42 (my worker) S 1 42 42 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 3 0";
        assert_eq!(parse_process_stat(line), Some((250, 75)));
    }

    #[test]
    fn host_stat_busy_excludes_idle_and_iowait() {
        let text = "cpu  100 0 50 800 50 0 0 0 0 0\ncpu0 1 2 3 4\n";
        assert_eq!(parse_host_stat(text), Some((150, 1000)));
    }

    #[test]
    fn usage_percentages() {
        let a = CpuSnapshot { process_user: 0, process_system: 0, host_busy: 0, host_total: 0 };
        let b = CpuSnapshot { process_user: 150, process_system: 50, host_busy: 300, host_total: 400 };
        let u = a.usage_until(&b, 2.0);
        assert_eq!((u.worker_pct, u.worker_user_pct, u.host_pct), (100.0, 75.0, 75.0));
    }

    #[test]
    fn real_snapshot_moves_forward() {
        let a = CpuSnapshot::take();
        let mut x = 0u64;
        let start = std::time::Instant::now();
        while start.elapsed().as_millis() < 50 {
            x = x.wrapping_add(std::hint::black_box(1));
        }
        let b = CpuSnapshot::take();
        assert!(b.host_total > a.host_total && b.process_user + b.process_system >= a.process_user + a.process_system);
        assert!(x > 0);
    }

    /// The burners' load as /proc/stat sees it (the stress report's ground truth).
    #[test]
    fn half_load_on_one_core_is_measured_as_half() {
        use std::time::{Duration, Instant};

        use crate::load::stress::start;
        use crate::scenario::placement::Placement;
        use crate::scenario::stress::{StressSpec, Threads};

        let spec = StressSpec {
            threads: Threads::Count(1),
            placement: Placement { cores: Some(vec![0]), numa: Default::default() },
            load: 50,
            memory: None,
        };
        let burners = start(&spec, None, Instant::now()).unwrap();
        std::thread::sleep(Duration::from_millis(100));
        let before = CoreTicks::take();
        std::thread::sleep(Duration::from_millis(1000));
        let busy = before.busy_pct_until(&CoreTicks::take(), &[0]);
        burners.stop();
        // The burner adds 50 points; other work on the core may add more.
        assert!(busy >= 40.0, "core 0 was {busy:.1} % busy");
    }
}
