//! CPU time over a window (user + system, unlike perftest's user-only
//! figure): of the worker's threads by what they do — the data path (one
//! thread per TCP stream or RDMA rail), the stress burners, and the control
//! plane (everything else: the async runtime, the sampler, rank 0's
//! coordinator) — of the whole worker process, and of the host.
//!
//! The data-path and burner threads book themselves in the phase's
//! [`ThreadBook`] when they start (and leave their final times in it when
//! they end), and are named for their class ([`DATA_THREAD`] and
//! [`BURNER_THREAD`] prefixes): a thread they start unnamed (an RDMA flow's
//! shard threads) inherits the name, and is classed by it. Every other
//! thread of the process is control. Each thread is
//! read from /proc/self/task/TID: `schedstat` for its run time in ns
//! (`stat`'s clock ticks, 10 ms each, where the kernel has no schedstat),
//! `stat`'s utime and stime for the user/system split of it. The process is
//! read with getrusage (µs, threads that ended included), so the control
//! plane's figure is the process minus the booked threads.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

pub use crate::load::stress::BURNER_THREAD;

/// The name prefix of data-path threads (engines: `fb-data eN`, N the engine).
pub const DATA_THREAD: &str = "fb-data";

/// Kernel clock ticks per second for /proc times; 100 on every Linux ABI we run on.
const TICKS_PER_SECOND: u64 = 100;
const NS_PER_TICK: u64 = 1_000_000_000 / TICKS_PER_SECOND;

/// What a booked thread does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ThreadClass {
    /// Moves a flow's data: a TCP stream's or an RDMA rail's loop.
    Data,
    /// A CPU stress burner (`[[stress]]`).
    Burner,
}

/// The classes a thread is reported under: the booked ones and the rest.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Class {
    Data,
    Burner,
    Control,
}

impl From<ThreadClass> for Class {
    fn from(c: ThreadClass) -> Class {
        match c {
            ThreadClass::Data => Class::Data,
            ThreadClass::Burner => Class::Burner,
        }
    }
}

/// CPU time of one thread (or process) as read at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct ThreadTimes {
    /// utime and stime in clock ticks (their ratio splits `run_ns`).
    user_ticks: u64,
    system_ticks: u64,
    /// Time on a CPU in ns (schedstat), when the kernel has it.
    run_ns: Option<u64>,
    /// Time runnable but waiting on a run queue in ns (schedstat's second
    /// field): a thread that wanted a core and had none.
    wait_ns: Option<u64>,
}

impl ThreadTimes {
    /// A thread of this process, `None` when it has ended (or /proc is not there).
    fn read(tid: i32) -> Option<ThreadTimes> {
        Self::read_named(tid).map(|(times, _)| times)
    }

    /// A thread's times and its name.
    fn read_named(tid: i32) -> Option<(ThreadTimes, String)> {
        let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).ok()?;
        let (user_ticks, system_ticks) = parse_process_stat(&stat)?;
        let name = stat.get(stat.find('(')? + 1..stat.rfind(')')?)?.to_string();
        let schedstat = std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat")).ok();
        let field = |n: usize| schedstat.as_deref().and_then(|s| s.split_whitespace().nth(n)?.parse().ok());
        Some((ThreadTimes { user_ticks, system_ticks, run_ns: field(0), wait_ns: field(1) }, name))
    }

    /// User and system ns from `self` (start; `None`: the thread began in
    /// the window) to `end`: the total from schedstat when both ends have
    /// it, split as the ticks moved (as they stand when too few moved).
    fn moved_until(start: Option<&ThreadTimes>, end: &ThreadTimes) -> (u64, u64) {
        let zero =
            ThreadTimes { run_ns: end.run_ns.map(|_| 0), wait_ns: end.wait_ns.map(|_| 0), ..ThreadTimes::default() };
        let start = start.unwrap_or(&zero);
        let user = end.user_ticks.saturating_sub(start.user_ticks);
        let system = end.system_ticks.saturating_sub(start.system_ticks);
        let total = match (start.run_ns, end.run_ns) {
            (Some(a), Some(b)) => b.saturating_sub(a),
            _ => (user + system) * NS_PER_TICK,
        };
        let (u, s) = if user + system > 0 { (user, system) } else { (end.user_ticks, end.system_ticks) };
        let user_ns = if u + s > 0 { (u128::from(total) * u128::from(u) / u128::from(u + s)) as u64 } else { total };
        (user_ns, total - user_ns)
    }
}

impl ThreadTimes {
    /// Run-queue wait in ns from `start` (`None`: the thread began in the
    /// window) to `end`; `None` without schedstat.
    fn waited_until(start: Option<&ThreadTimes>, end: &ThreadTimes) -> Option<u64> {
        Some(end.wait_ns?.saturating_sub(start.map_or(Some(0), |s| s.wait_ns)?))
    }
}

/// The calling thread's id, from /proc/thread-self (a link to `PID/task/TID`).
fn current_tid() -> Option<i32> {
    let link = std::fs::read_link("/proc/thread-self").ok()?;
    link.file_name()?.to_str()?.parse().ok()
}

#[derive(Debug)]
struct Booked {
    tid: i32,
    class: ThreadClass,
    /// Its times as it ended (read by the thread itself, last thing).
    ended: Option<ThreadTimes>,
}

/// The data-path and burner threads of one phase on one rank.
#[derive(Clone, Debug, Default)]
pub struct ThreadBook(Arc<Mutex<Vec<Booked>>>);

/// Held by a booked thread for as long as it runs: when dropped, it leaves
/// the thread's final CPU times in the book.
#[must_use = "the thread's final times are booked when this is dropped"]
pub struct BookedThread {
    book: ThreadBook,
    tid: Option<i32>,
}

impl ThreadBook {
    /// Books the calling thread under `class`, until the returned guard drops.
    pub fn enter(&self, class: ThreadClass) -> BookedThread {
        let tid = current_tid();
        if let Some(tid) = tid {
            self.0.lock().expect("thread book").push(Booked { tid, class, ended: None });
        }
        BookedThread { book: self.clone(), tid }
    }

    fn entries(&self) -> Vec<(i32, ThreadClass, Option<ThreadTimes>)> {
        self.0.lock().expect("thread book").iter().map(|b| (b.tid, b.class, b.ended)).collect()
    }
}

impl Drop for BookedThread {
    fn drop(&mut self) {
        let Some(tid) = self.tid else { return };
        let times = ThreadTimes::read(tid);
        if let Some(b) = self.book.0.lock().expect("thread book").iter_mut().find(|b| b.tid == tid) {
            b.ended = times;
        }
    }
}

/// The counters at one edge of the window.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CpuSnapshot {
    /// This process (getrusage, every thread it ever had): user and system ns.
    process_user_ns: u64,
    process_system_ns: u64,
    /// Every thread of the process that was there, or that was booked and
    /// has ended (its final times), with its class.
    threads: HashMap<i32, (Class, ThreadTimes)>,
    /// The host: busy and total ticks over all cores.
    host_busy: u64,
    host_total: u64,
}

/// CPU time of one class of the worker's threads over the window, in % of
/// one core (200 = two cores busy).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ThreadsCpu {
    pub pct: f64,
    pub user_pct: f64,
    pub system_pct: f64,
    /// How many threads of the class ran in the window (control: those
    /// alive at its end).
    pub threads: usize,
    /// The busiest of them alone: 100 is one thread that never left its core.
    pub busiest_thread_pct: f64,
    /// The thread that wanted a core most: the time it ran plus the time it
    /// waited on a run queue (schedstat), with the wait alone; 100 is a
    /// thread that could have used a core the whole window. `None` where
    /// the kernel keeps no schedstat, and in runs made before it was read.
    #[serde(default)]
    pub wanting_thread: Option<ThreadDemand>,
}

/// One thread's demand for a core over the window, % of the window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ThreadDemand {
    /// Ran plus waited to run.
    pub demand_pct: f64,
    /// Waited on a run queue: runnable, but every core it may use was busy.
    pub waited_pct: f64,
}

/// CPU used over a window. (Every field is always written: the rank
/// report's postcard has no field names, so none may be skipped.)
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuUsage {
    /// The worker without its stress burners (data path + control plane):
    /// user + system time in % of one core (200 = two cores busy).
    pub worker_pct: f64,
    pub worker_user_pct: f64,
    pub worker_system_pct: f64,
    /// The data-path threads: a rank's TCP engines (at most one per core), one per RDMA rail.
    /// `None` in runs made before threads were told apart.
    #[serde(default)]
    pub data: Option<ThreadsCpu>,
    /// The control plane: every other thread of the worker (async runtime,
    /// sampler, connect threads, rank 0's coordinator).
    #[serde(default)]
    pub control: Option<ThreadsCpu>,
    /// The CPU stress burners running inside the worker process.
    #[serde(default)]
    pub burners: Option<ThreadsCpu>,
    /// The whole worker process, burners included (what `worker_pct`
    /// measured before the threads were told apart).
    #[serde(default)]
    pub process_pct: Option<f64>,
    /// Whole host busy time, in % of all its cores.
    pub host_pct: f64,
    pub host_cores: usize,
}

impl CpuSnapshot {
    /// Reads every thread of this process, the process and /proc/stat;
    /// zeros where they cannot be read.
    pub fn take(book: &ThreadBook) -> CpuSnapshot {
        let tids = std::fs::read_dir("/proc/self/task").into_iter().flatten().flatten();
        let live: Vec<_> = tids
            .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
            .filter_map(|tid| Some((tid, ThreadTimes::read_named(tid)?)))
            .collect();
        // The book after the threads: a booked thread that exits while they
        // are read (a receiver draining at the window's end) left its final
        // times in the book before it exited, so it is read one way or the
        // other. Read first, the book missed it and its time went to control
        // (CI: one of two receive threads, a quarter of a core).
        let booked = book.entries();
        let class_of = |tid: i32, name: &str| match booked.iter().find(|b| b.0 == tid) {
            Some(b) => b.1.into(),
            None if name.starts_with(DATA_THREAD) => Class::Data,
            None if name.starts_with(BURNER_THREAD) => Class::Burner,
            None => Class::Control,
        };
        let mut threads = HashMap::new();
        for (tid, (times, name)) in live {
            threads.insert(tid, (class_of(tid, &name), times));
        }
        for (tid, class, ended) in booked {
            if let (false, Some(times)) = (threads.contains_key(&tid), ended) {
                threads.insert(tid, (class.into(), times));
            }
        }
        // After the threads, as at every edge: the process encloses them.
        let (process_user_ns, process_system_ns) = process_times().unwrap_or_default();
        let (host_busy, host_total) =
            std::fs::read_to_string("/proc/stat").ok().and_then(|s| parse_host_stat(&s)).unwrap_or_default();
        CpuSnapshot { process_user_ns, process_system_ns, threads, host_busy, host_total }
    }

    /// Usage between `self` (start) and `end` over `seconds` of wall time.
    pub fn usage_until(&self, end: &CpuSnapshot, seconds: f64) -> CpuUsage {
        let pct = |ns: u64| if seconds > 0.0 { ns as f64 / 1e9 / seconds * 100.0 } else { 0.0 };
        #[derive(Default)]
        struct Sum {
            user_ns: u64,
            system_ns: u64,
            threads: usize,
            busiest_ns: u64,
            /// The most wanting thread's ran + waited and waited ns (`None` without schedstat).
            wanting: Option<(u64, u64)>,
        }
        let mut sums: HashMap<Class, Sum> = HashMap::new();
        for (tid, (class, times)) in &end.threads {
            let (user_ns, system_ns) = ThreadTimes::moved_until(self.threads.get(tid).map(|(_, t)| t), times);
            let sum = sums.entry(*class).or_default();
            sum.user_ns += user_ns;
            sum.system_ns += system_ns;
            sum.threads += 1;
            sum.busiest_ns = sum.busiest_ns.max(user_ns + system_ns);
            if let Some(waited) = ThreadTimes::waited_until(self.threads.get(tid).map(|(_, t)| t), times) {
                let demand = (user_ns + system_ns + waited, waited);
                sum.wanting = Some(sum.wanting.map_or(demand, |w| w.max(demand)));
            }
        }
        let of = |class: Class| {
            sums.get(&class)
                .map_or((0, 0, 0, 0, None), |s| (s.user_ns, s.system_ns, s.threads, s.busiest_ns, s.wanting))
        };
        type Of = (u64, u64, usize, u64, Option<(u64, u64)>);
        let cpu = |(user, system, threads, busiest, wanting): Of| ThreadsCpu {
            pct: pct(user + system),
            user_pct: pct(user),
            system_pct: pct(system),
            threads,
            busiest_thread_pct: pct(busiest),
            wanting_thread: wanting
                .map(|(demand, waited)| ThreadDemand { demand_pct: pct(demand), waited_pct: pct(waited) }),
        };
        let (data, burners, live) = (of(Class::Data), of(Class::Burner), of(Class::Control));
        let process_user = end.process_user_ns.saturating_sub(self.process_user_ns);
        let process_system = end.process_system_ns.saturating_sub(self.process_system_ns);
        let process = process_user + process_system;
        // Control threads that ended in the window (the runtime's blocking
        // pool, connect threads) are in the process's time alone: what it
        // has beyond every thread read, split as the process's time is.
        // (Each thread's own split is kept: the process's split is scaled
        // from the sum of everyone's clock ticks and differs from theirs.)
        let read = [data, burners, live].iter().map(|c| c.0 + c.1).sum::<u64>();
        let gone = process.saturating_sub(read);
        let gone_user =
            if process > 0 { (u128::from(gone) * u128::from(process_user) / u128::from(process)) as u64 } else { 0 };
        let control = (live.0 + gone_user, live.1 + gone - gone_user, live.2, live.3, live.4);
        let (worker_user, worker_system) = (data.0 + control.0, data.1 + control.1);
        let total = end.host_total.saturating_sub(self.host_total);
        let busy = end.host_busy.saturating_sub(self.host_busy);
        CpuUsage {
            worker_pct: pct(worker_user + worker_system),
            worker_user_pct: pct(worker_user),
            worker_system_pct: pct(worker_system),
            data: Some(cpu(data)),
            control: Some(cpu(control)),
            burners: Some(cpu(burners)),
            process_pct: Some(pct(process)),
            host_pct: if total > 0 { busy as f64 / total as f64 * 100.0 } else { 0.0 },
            host_cores: num_cpus::get(),
        }
    }
}

/// User and system time of this process, every thread it ever had, in ns.
fn process_times() -> Option<(u64, u64)> {
    use nix::sys::resource::{getrusage, UsageWho};
    let usage = getrusage(UsageWho::RUSAGE_SELF).ok()?;
    let ns = |t: nix::sys::time::TimeVal| {
        u64::try_from(t.tv_sec()).unwrap_or(0) * 1_000_000_000 + u64::try_from(t.tv_usec()).unwrap_or(0) * 1_000
    };
    Some((ns(usage.user_time()), ns(usage.system_time())))
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
    use std::time::{Duration, Instant};

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

    fn times(user_ticks: u64, system_ticks: u64, run_ns: Option<u64>) -> ThreadTimes {
        ThreadTimes { user_ticks, system_ticks, run_ns, wait_ns: None }
    }

    #[test]
    fn a_threads_run_time_is_split_as_its_ticks_moved() {
        let (a, b) = (times(10, 10, Some(200_000_000)), times(13, 19, Some(600_000_000)));
        // 400 ms on a CPU, 3 user ticks to 9 system ticks.
        assert_eq!(ThreadTimes::moved_until(Some(&a), &b), (100_000_000, 300_000_000));
        // Without schedstat, the ticks themselves.
        let (a, b) = (times(10, 10, None), times(13, 19, None));
        assert_eq!(ThreadTimes::moved_until(Some(&a), &b), (30_000_000, 90_000_000));
        // Born in the window: all it ran.
        assert_eq!(ThreadTimes::moved_until(None, &times(1, 3, Some(40_000_000))), (10_000_000, 30_000_000));
        // Too little to move a tick: split as its ticks stand.
        let (a, b) = (times(1, 3, Some(40_000_000)), times(1, 3, Some(44_000_000)));
        assert_eq!(ThreadTimes::moved_until(Some(&a), &b), (1_000_000, 3_000_000));
    }

    fn snapshot(process: (u64, u64), threads: &[(i32, Class, ThreadTimes)], host: (u64, u64)) -> CpuSnapshot {
        CpuSnapshot {
            process_user_ns: process.0,
            process_system_ns: process.1,
            threads: threads.iter().map(|(tid, c, t)| (*tid, (*c, *t))).collect(),
            host_busy: host.0,
            host_total: host.1,
        }
    }

    #[test]
    fn the_thread_that_wanted_a_core_most_is_told_with_its_run_queue_wait() {
        const S: u64 = 1_000_000_000;
        let waited = |run: u64, wait: u64| ThreadTimes { wait_ns: Some(wait), ..times(1, 1, Some(run)) };
        let a = snapshot((0, 0), &[(1, Class::Data, waited(0, 0)), (2, Class::Data, waited(0, 0))], (0, 0));
        // Over 2 s: thread 1 ran 1.2 s and waited 0.2 s; thread 2 ran 0.6 s
        // and waited 1.2 s (it wanted more); thread 3 began in the window,
        // ran 0.2 s and waited 1.7 s.
        let b = snapshot(
            (S * 3, 0),
            &[
                (1, Class::Data, waited(S * 6 / 5, S / 5)),
                (2, Class::Data, waited(S * 3 / 5, S * 6 / 5)),
                (3, Class::Control, waited(S / 5, S * 17 / 10)),
            ],
            (0, 0),
        );
        let u = a.usage_until(&b, 2.0);
        let close = |got: f64, want: f64| (got - want).abs() < 1e-6;
        let data = u.data.unwrap();
        assert!(close(data.busiest_thread_pct, 60.0), "{data:?}");
        let wanting = data.wanting_thread.unwrap();
        assert!(close(wanting.demand_pct, 90.0) && close(wanting.waited_pct, 60.0), "{wanting:?}");
        let control = u.control.unwrap().wanting_thread.unwrap();
        assert!(close(control.demand_pct, 95.0) && close(control.waited_pct, 85.0), "{control:?}");
        // Without schedstat no wait is told.
        let bare = |run: u64| snapshot((0, 0), &[(1, Class::Data, times(1, 1, Some(run)))], (0, 0));
        let data = bare(0).usage_until(&bare(S), 2.0).data.unwrap();
        assert_eq!((data.busiest_thread_pct, data.wanting_thread), (50.0, None));
    }

    #[test]
    fn usage_by_class() {
        const S: u64 = 1_000_000_000;
        let a = snapshot(
            (0, 0),
            &[(1, Class::Control, times(0, 0, Some(0))), (2, Class::Data, times(0, 0, Some(0)))],
            (0, 0),
        );
        // Over 2 s: the data thread ran 1.5 s (a third of it user), two
        // burners 1 s each, all user, a control thread 0.1 s; the process
        // 3.8 s (its own split differs), so threads that ended ran 0.2 s.
        let b = snapshot(
            (S * 3 + S / 2, S * 3 / 10),
            &[
                (1, Class::Control, times(1, 0, Some(S / 10))),
                (2, Class::Data, times(10, 20, Some(S + S / 2))),
                (3, Class::Burner, times(100, 0, Some(S))),
                (4, Class::Burner, times(100, 0, Some(S))),
            ],
            (300, 400),
        );
        let u = a.usage_until(&b, 2.0);
        let close = |got: f64, want: f64| (got - want).abs() < 1e-6;
        let data = u.data.unwrap();
        assert!(close(data.pct, 75.0) && close(data.user_pct, 25.0) && close(data.system_pct, 50.0), "{u:?}");
        assert_eq!((data.threads, data.busiest_thread_pct), (1, 75.0));
        let burners = u.burners.unwrap();
        assert!(close(burners.pct, 100.0) && close(burners.user_pct, 100.0) && burners.threads == 2, "{u:?}");
        assert!(close(burners.busiest_thread_pct, 50.0), "{u:?}");
        assert!(close(u.process_pct.unwrap(), 190.0), "{u:?}");
        // Control: the live thread (user) and what ended, split 35:3 as the process.
        let control = u.control.unwrap();
        let ended_user = 10.0 * 35.0 / 38.0;
        assert!(close(control.pct, 15.0) && close(control.user_pct, 5.0 + ended_user), "{u:?}");
        assert!(close(control.system_pct, 10.0 - ended_user), "{u:?}");
        assert_eq!((control.threads, control.busiest_thread_pct), (1, 5.0));
        // The worker is the process without the burners: data + control.
        assert!(close(u.worker_pct, 90.0) && close(u.worker_user_pct, 30.0 + ended_user), "{u:?}");
        assert!(close(u.worker_system_pct, 60.0 - ended_user), "{u:?}");
        assert!(close(u.host_pct, 75.0));
    }

    /// Held by the tests that start named threads or count them: they share
    /// this process's threads.
    static THREADS: Mutex<()> = Mutex::new(());

    /// Spins the calling thread for `ms` of wall time.
    fn spin(ms: u64) {
        let start = Instant::now();
        let mut x = 0u64;
        while start.elapsed() < Duration::from_millis(ms) {
            x = x.wrapping_add(std::hint::black_box(1));
        }
        assert!(x > 0);
    }

    #[test]
    fn booked_threads_are_told_from_the_rest_even_once_they_ended() {
        let _serial = THREADS.lock().unwrap_or_else(|e| e.into_inner());
        let book = ThreadBook::default();
        let a = CpuSnapshot::take(&book);
        let started = Instant::now();
        let (data, burner) = (book.clone(), book.clone());
        // The data thread ends before the window's last edge: its final times count.
        let ended = std::thread::spawn(move || {
            let _booked = data.enter(ThreadClass::Data);
            spin(300);
        });
        ended.join().unwrap();
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let running = std::thread::spawn(move || {
            let _booked = burner.enter(ThreadClass::Burner);
            while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                std::hint::spin_loop();
            }
        });
        std::thread::sleep(Duration::from_millis(300));
        let b = CpuSnapshot::take(&book);
        let u = a.usage_until(&b, started.elapsed().as_secs_f64());
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        running.join().unwrap();
        let (data, burners) = (u.data.unwrap(), u.burners.unwrap());
        assert_eq!((data.threads, burners.threads), (1, 1), "{u:?}");
        // Each spun for about half the window (got less of it when this host is busy).
        assert!(data.pct > 0.5 && data.pct < 60.0, "{u:?}");
        assert!(burners.pct > 0.5 && burners.pct < 60.0, "{u:?}");
        assert!(u.worker_pct + 1.0 >= data.pct && u.process_pct.unwrap() + 1.0 >= u.worker_pct + burners.pct, "{u:?}");
    }

    #[test]
    fn an_unbooked_thread_is_classed_by_its_name() {
        let _serial = THREADS.lock().unwrap_or_else(|e| e.into_inner());
        let book = ThreadBook::default();
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        // As an RDMA flow's shard threads: started unnamed by a data-path
        // thread, they inherit its name.
        let data = std::thread::Builder::new()
            .name(format!("{DATA_THREAD} 7"))
            .spawn(move || {
                std::thread::spawn(move || {
                    while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                })
                .join()
                .unwrap();
            })
            .unwrap();
        std::thread::sleep(Duration::from_millis(50));
        let a = CpuSnapshot::take(&book);
        std::thread::sleep(Duration::from_millis(50));
        let u = a.usage_until(&CpuSnapshot::take(&book), 0.05);
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        data.join().unwrap();
        assert_eq!(u.data.unwrap().threads, 2, "{u:?}");
    }

    /// The burners' load as /proc/stat sees it (the stress report's ground truth).
    #[test]
    fn half_load_on_one_core_is_measured_as_half() {
        use crate::load::stress::start;
        use crate::scenario::placement::Placement;
        use crate::scenario::stress::{StressSpec, Threads};

        let _serial = THREADS.lock().unwrap_or_else(|e| e.into_inner());
        let spec = StressSpec {
            threads: Threads::Count(1),
            placement: Placement { cores: Some(vec![0]), numa: Default::default() },
            load: 50,
            memory: None,
        };
        let book = ThreadBook::default();
        let booked = book.clone();
        let burners = start(&spec, None, Instant::now(), move || booked.enter(ThreadClass::Burner)).unwrap();
        std::thread::sleep(Duration::from_millis(100));
        let (before, a, at) = (CoreTicks::take(), CpuSnapshot::take(&book), Instant::now());
        std::thread::sleep(Duration::from_millis(1000));
        let busy = before.busy_pct_until(&CoreTicks::take(), &[0]);
        let u = a.usage_until(&CpuSnapshot::take(&book), at.elapsed().as_secs_f64());
        burners.stop();
        // The burner adds 50 points; other work on the core may add more.
        assert!(busy >= 40.0, "core 0 was {busy:.1} % busy");
        // The burner's own thread: at most half a core (less when others
        // share core 0), never more than the core carried.
        let own = u.burners.unwrap();
        assert_eq!(own.threads, 1);
        assert!(own.pct > 0.0 && own.pct <= 55.0 && own.pct <= busy + 5.0, "burner {own:?}, core {busy:.1} %");
    }
}
