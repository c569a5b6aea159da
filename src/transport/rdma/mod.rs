//! The RDMA transport: RC and UD queue pairs through sideway / rdma-mummy-sys
//! (libibverbs is opened at run time, so the binary runs without rdma-core).
//!
//! Life of a flow, driven by the worker:
//! ```text
//! prepare(params, side)  -> PreparedFlow   (device, PD, MR, CQs, QPs in INIT, receives posted)
//!   .endpoint()          -> RdmaEndpoint   (sent to the peer through the coordinator)
//!   .connect(&peer)      -> ConnectedFlow  (INIT -> RTR -> RTS)
//!   .run(&counters, &stop) -> FlowOutcome  (blocking; returns when done or promptly after `stop`)
//! ```
//! Module map: `params` (knobs), `device` (device/port/GID choice, quirks),
//! `connect` (resources in INIT), `peering` (INIT → RTR → RTS against the peer), `cm` (the same through rdma_cm), `ud` (UD's Q_Key,
//! size check and connection), `path` (the address vector), `stream` (bandwidth loops),
//! `latency` (ping-pong), `open_loop` (probes on a schedule), `probe` (inventory), `gids` (GID entries, the auto-choice, a port's
//! table from sysfs), `inventory` (the probe's
//! compact form in run.json), `counters` (sysfs counters),
//! `endpoint` (the exchanged record), `error`, and `ffi` (the only unsafe).

mod cm;
mod connect;
pub mod counters;
mod device;
pub mod endpoint;
pub mod error;
mod ffi;
mod gids;
mod gpu;
pub mod inventory;
mod latency;
mod open_loop;
mod path;
mod peering;
pub mod probe;
mod stream;
mod ud;
mod validate;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use serde::{Deserialize, Serialize};

pub use connect::{prepare, ConnectedFlow, PreparedFlow};
pub use counters::{CounterDelta, CounterSnapshot};
pub use device::{libibverbs_release, set_data_address};
pub use endpoint::RdmaEndpoint;
pub use error::RdmaError;
pub use gids::{GidInfo, GidKind};
pub use gpu::GpuMemoryUse;
pub use inventory::{InventoryDevice, InventoryPort, RdmaInventory};
pub(crate) use probe::numa_node;
pub use probe::{probe, DeviceReport, PortReport, ProbeReport};

use crate::histogram::Histogram;
use crate::scenario::rdma::{PollStrategy, RdmaParams};
use crate::scenario::{Mode, Op};
use crate::transport::pace::ProbePlan;
use crate::transport::{FlowCounters, Side};
use error::panic_message;

/// What a flow did, from this side's point of view.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct FlowOutcome {
    pub side: Side,
    pub op: Op,
    pub mode: Mode,
    /// Messages completed here (sender: WRs completed; receiver: receives
    /// consumed; 0 for the passive end of one-sided ops).
    pub messages: u64,
    pub bytes: u64,
    /// Wall time of `run` in nanoseconds.
    pub elapsed_ns: u64,
    /// Latency mode, initiator only: the round trips inside the window
    /// (perftest reports half of each for write and send, all of it for read).
    pub latency: Option<Histogram>,
    /// Atomics: per QP, the sender's last fetched value / the receiver's
    /// target word at the end.
    pub atomic_words: Option<Vec<u64>>,
    pub device: String,
    pub port: u8,
    pub gid_index: u32,
    /// The CQ polling strategy that was used (Auto resolved).
    pub poll_strategy: PollStrategy,
}

impl ConnectedFlow {
    /// Names the flow in every error (e.g. "flow 3->0").
    pub fn with_label(mut self, label: impl Into<String>) -> Self {
        self.res.label = label.into();
        self
    }

    /// Latency mode: records only the round trips that start and end in
    /// `open..=close` (without it, every one).
    pub fn with_latency_window(mut self, open: Instant, close: Instant) -> Self {
        self.res.latency_window = Some((open, close));
        self
    }

    /// Bandwidth mode: the flow posts `per_s` messages a second, its shards
    /// an equal part each, sleeping between (`transport::pace`). Latency
    /// mode: the initiator sends `per_s` open-loop probes a second, evenly
    /// spaced or, with `poisson_seed`, Poisson (`open_loop`).
    pub fn with_pace(mut self, per_s: Option<f64>, poisson_seed: Option<u64>) -> Self {
        self.res.pace = per_s;
        self.res.poisson_seed = poisson_seed;
        self
    }

    /// Runs the flow on this thread (and `threads - 1` more for the other
    /// shards). Returns when `iterations` are done or soon after `stop` is
    /// set; a completion error ends it with `Err` naming the status and QP.
    pub fn run(mut self, counters: &FlowCounters, stop: &AtomicBool) -> Result<FlowOutcome, RdmaError> {
        let t0 = Instant::now();
        let res = &self.res;
        let mut outcome = FlowOutcome {
            side: res.side,
            op: res.params.op,
            mode: res.params.mode,
            messages: 0,
            bytes: 0,
            elapsed_ns: 0,
            latency: None,
            atomic_words: None,
            device: res.dev.name.clone(),
            port: res.dev.port,
            gid_index: res.dev.gid_index,
            poll_strategy: res.poll_strategy,
        };
        let mut shards = std::mem::take(&mut self.res.shards);
        let res = &self.res;
        let label = res.label.clone();
        let shard_stop = stream::ShardStop { ext: stop, abort: AtomicBool::new(false) };
        let shard_stop = &shard_stop;
        let pace = res.pace.map(|per_s| per_s / shards.len().max(1) as f64);
        let caught = |shard: usize, r: std::thread::Result<Result<stream::ShardResult, RdmaError>>| {
            r.unwrap_or_else(|p| {
                Err(RdmaError::ThreadPanicked { flow: label.clone(), shard, message: panic_message(&*p) })
            })
        };

        let result = if res.params.mode == Mode::Latency {
            let probes = res.pace.filter(|_| res.side == Side::Sender);
            let plan = probes.map(|per_s| ProbePlan { start: t0, per_s, poisson_seed: res.poisson_seed });
            let r = catch_unwind(AssertUnwindSafe(|| match plan {
                Some(plan) => open_loop::run(res, &mut shards[0], counters, stop, plan),
                None => latency::run(res, &mut shards[0], counters, stop),
            }))
            .unwrap_or_else(|p| {
                Err(RdmaError::ThreadPanicked { flow: label.clone(), shard: 0, message: panic_message(&*p) })
            });
            r.map(|l| {
                outcome.messages = l.messages;
                outcome.bytes = l.bytes;
                outcome.latency = l.round_trips;
                if res.params.op.is_atomic() {
                    // Initiator: the last fetched value; target: its word now.
                    let word = shards[0].qps.first().map(|q| res.arena.read_u64(q.local_off));
                    outcome.atomic_words = word.map(|w| vec![w]);
                }
            })
        } else {
            let results: Vec<Result<stream::ShardResult, RdmaError>> = if shards.len() == 1 {
                vec![caught(
                    0,
                    catch_unwind(AssertUnwindSafe(|| {
                        stream::run_shard(res, &mut shards[0], counters, shard_stop, pace)
                    })),
                )]
            } else {
                std::thread::scope(|s| {
                    let handles: Vec<_> = shards
                        .iter_mut()
                        .map(|shard| s.spawn(move || stream::run_shard(res, shard, counters, shard_stop, pace)))
                        .collect();
                    handles.into_iter().enumerate().map(|(i, h)| caught(i, h.join())).collect()
                })
            };
            let mut words: Vec<(usize, u64)> = Vec::new();
            let mut first_err = None;
            for r in results {
                match r {
                    Ok(r) => {
                        outcome.messages += r.messages;
                        outcome.bytes += r.bytes;
                        words.extend(r.atomic_words);
                    }
                    Err(e) => {
                        first_err.get_or_insert(e);
                    }
                }
            }
            if res.params.op.is_atomic() {
                words.sort_unstable();
                outcome.atomic_words = Some(words.into_iter().map(|(_, w)| w).collect());
            }
            first_err.map_or(Ok(()), Err)
        };
        // Put the shards back so they drop with the flow (QPs before the arena).
        self.res.shards = shards;
        result?;
        outcome.elapsed_ns = t0.elapsed().as_nanos() as u64;
        Ok(outcome)
    }

    pub fn params(&self) -> &RdmaParams {
        &self.res.params
    }
}
