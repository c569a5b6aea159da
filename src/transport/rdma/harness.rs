//! The transport's own test harness (tests and the `testing` feature): one
//! flow end run to its end on the calling thread, its tasks stepped the
//! way an engine steps them, and what it did. The worker's engines
//! (`worker::engine`) run the same tasks in the tool.

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::connect::ConnectedFlow;
use super::error::RdmaError;
use super::task::ShardTask;
use crate::histogram::Histogram;
use crate::transport::task::Turn;
use crate::transport::FlowCounters;

/// The longest the harness sleeps while every task waits.
const NAP: Duration = Duration::from_millis(1);

/// What a flow end did.
#[derive(Clone, Debug, PartialEq)]
pub struct FlowOutcome {
    /// Messages (sender: WRs completed; receiver: receives consumed; 0 for
    /// the passive end of one-sided ops) and bytes counted in the run.
    pub messages: u64,
    pub bytes: u64,
    /// Latency mode, initiator only: the round trips inside the window.
    pub latency: Option<Histogram>,
    /// Atomics: per QP, the sender's last fetched value / the target word.
    pub atomic_words: Option<Vec<u64>>,
}

impl ConnectedFlow {
    /// The shared CQ each shard polls (`None`: its own), as engines group them.
    pub fn poll_groups(&self) -> Vec<Option<usize>> {
        self.res.shards.iter().map(|s| s.cq.shared_id()).collect()
    }

    /// Runs the flow end until its iterations are done or soon after
    /// `stop`, its tasks stepped in turn on this thread. The first error
    /// ends it.
    pub fn run(self, counters: &Arc<FlowCounters>, stop: &AtomicBool) -> Result<FlowOutcome, RdmaError> {
        let before = counters.read();
        let tasks = step_tasks(self.shard_tasks(counters.clone()), stop)?;
        let atomic = tasks.first().is_some_and(|t| t.res.params.op.is_atomic());
        let atomic_words = atomic.then(|| {
            let mut words: Vec<(usize, u64)> = tasks
                .iter()
                .flat_map(|t| t.shard.qps.iter().map(|q| (q.index, t.res.arena.read_u64(q.local_off))))
                .collect();
            words.sort_unstable();
            words.into_iter().map(|(_, w)| w).collect()
        });
        let latency = tasks.into_iter().find_map(ShardTask::finish);
        let after = counters.read();
        Ok(FlowOutcome {
            messages: after.messages - before.messages,
            bytes: after.bytes - before.bytes,
            latency,
            atomic_words,
        })
    }
}

/// Steps `tasks` until each is done, as an engine would (a waiting task
/// again at its deadline, or after `NAP`); the first error ends them.
fn step_tasks(mut tasks: Vec<ShardTask>, stop: &AtomicBool) -> Result<Vec<ShardTask>, RdmaError> {
    let mut waiting: Vec<Option<Instant>> = vec![None; tasks.len()];
    let mut live = vec![true; tasks.len()];
    while live.contains(&true) {
        let stopping = stop.load(Relaxed);
        let mut moved = false;
        for (k, task) in tasks.iter_mut().enumerate() {
            let due = waiting[k].is_none_or(|at| Instant::now() >= at);
            if !live[k] || !(due || stopping) {
                continue;
            }
            match task.turn(stopping)? {
                Turn::Again => (moved, waiting[k]) = (true, None),
                Turn::Wait(at) => waiting[k] = Some(at.unwrap_or_else(|| Instant::now() + NAP)),
                Turn::Done(_) => live[k] = false,
            }
        }
        if !moved {
            std::thread::sleep(NAP);
        }
    }
    Ok(tasks)
}
