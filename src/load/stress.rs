//! CPU stress in the worker process: busy threads with a duty cycle,
//! optionally streaming memory, pinned where the scenario says, running
//! exactly from t0 to the end of the window like the flows.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::load::placement::{self, Placed, PlacementError};
use crate::scenario::stress::{StressSpec, Threads};

/// The name prefix of burner threads (`fb-burn N`): CPU accounting
/// (`metrics::cpu`) tells them apart by it.
pub const BURNER_THREAD: &str = "fb-burn";

/// One duty cycle: busy for `load`% of it, asleep for the rest.
const PERIOD: Duration = Duration::from_millis(10);
/// Memory is streamed in chunks of this size between clock checks.
const CHUNK: usize = 1 << 20;

/// What ran, for the report.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StressReport {
    pub threads: usize,
    /// Cores the burners were pinned to (empty: not pinned).
    pub cores: Vec<usize>,
    pub asked_load_pct: f64,
    /// Busy time of those cores over the window (all cores if not pinned), percent.
    pub measured_load_pct: f64,
    pub note: Option<String>,
}

/// Why the burners did not start (none is left running).
#[derive(Debug, thiserror::Error)]
pub enum StressError {
    #[error(transparent)]
    Placement(#[from] PlacementError),
    #[error("cannot start burner thread {thread}: {cause}")]
    Spawn { thread: usize, cause: std::io::Error },
}

pub struct Burners {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    pub placed: Placed,
    pub count: usize,
}

/// Starts the burners; they begin at `start` and run until [`Burners::stop`].
/// Each burner thread (named [`BURNER_THREAD`] N) calls `enter` first and holds what
/// it returns until it ends: the caller books its CPU time that way.
pub fn start<G: 'static>(
    spec: &StressSpec,
    device_node: Option<usize>,
    start: Instant,
    enter: impl Fn() -> G + Clone + Send + 'static,
) -> Result<Burners, StressError> {
    let placed = placement::resolve(&spec.placement, device_node)?;
    let count = match spec.threads {
        Threads::Count(n) => n,
        Threads::All if placed.cores.is_empty() => crate::load::topology::online_cpus().len(),
        Threads::All => placed.cores.len(),
    };
    let stop = Arc::new(AtomicBool::new(false));
    let busy = PERIOD * u32::from(spec.load.min(100)) / 100;
    let mut threads = Vec::with_capacity(count);
    for i in 0..count {
        // One core per burner, round robin over the placement.
        let core: Vec<usize> = placed.cores.get(i % placed.cores.len().max(1)).copied().into_iter().collect();
        let (stop_burner, enter) = (stop.clone(), enter.clone());
        let memory = spec.memory.map(|m| m.bytes() as usize);
        let spawned = std::thread::Builder::new().name(format!("{BURNER_THREAD} {i}")).spawn(move || {
            let _booked = enter();
            let _ = placement::pin_current_thread(&core);
            let mut buffer = memory.map(|m| vec![1u8; m.max(2 * CHUNK)]);
            while Instant::now() < start && !stop_burner.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(1));
            }
            burn(&stop_burner, busy, buffer.as_deref_mut());
        });
        match spawned {
            Ok(thread) => threads.push(thread),
            Err(cause) => {
                // None is left running.
                Burners { stop, threads, placed, count }.stop();
                return Err(StressError::Spawn { thread: i, cause });
            }
        }
    }
    Ok(Burners { stop, threads, placed, count })
}

fn burn(stop: &AtomicBool, busy: Duration, mut memory: Option<&mut [u8]>) {
    let mut offset = 0;
    while !stop.load(Ordering::Relaxed) {
        let cycle = Instant::now();
        while cycle.elapsed() < busy {
            match memory.as_deref_mut() {
                // Copy one chunk onto the next: a read and a write stream.
                Some(buf) => {
                    let half = buf.len() / 2;
                    let at = offset % (half - CHUNK + 1);
                    let (src, dst) = buf.split_at_mut(half);
                    dst[at..at + CHUNK].copy_from_slice(&src[at..at + CHUNK]);
                    offset = at + CHUNK;
                }
                None => std::hint::spin_loop(),
            }
        }
        if let Some(rest) = PERIOD.checked_sub(cycle.elapsed()) {
            if !rest.is_zero() {
                std::thread::sleep(rest);
            }
        }
    }
}

impl Burners {
    pub fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads {
            let _ = t.join();
        }
    }
}
