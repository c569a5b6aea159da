//! The RDMA transport: RC and UD queue pairs through sideway / rdma-mummy-sys
//! (libibverbs is opened at run time, so the binary runs without rdma-core).
//!
//! Life of a flow, driven by the worker:
//! ```text
//! prepare(params, side)  -> PreparedFlow   (device, PD, MR, CQs, QPs in INIT, receives posted)
//!   .endpoint()          -> RdmaEndpoint   (sent to the peer through the coordinator)
//!   .connect(&peer)      -> ConnectedFlow  (INIT -> RTR -> RTS)
//!   .tasks(counters)     -> engine tasks   (one per shard, stepped by an engine; latency: one)
//! ```
//! Module map: `params` (knobs), `device` (device/port/GID choice, quirks),
//! `connect` (resources in INIT), `peering` (INIT → RTR → RTS against the peer), `cm` (the same through rdma_cm), `ud` (UD's Q_Key,
//! size check and connection), `path` (the address vector), `stream` (bandwidth senders), `receive` (receivers), `task` (shards as engine tasks),
//! `latency` (ping-pong), `open_loop` (probes on a schedule), `probe` (inventory), `gids` (GID entries, the auto-choice, a port's
//! table from sysfs), `inventory` (the probe's
//! compact form in run.json), `counters` (sysfs counters),
//! `endpoint` (the exchanged record), `error`, `memlock` (the locked-memory limit named in setup errors),
//! and `ffi` (the only unsafe).

mod cm;
mod connect;
pub mod counters;
mod device;
pub mod endpoint;
pub mod error;
mod ffi;
mod gids;
mod gpu;
#[cfg(any(test, feature = "testing"))]
mod harness;
pub mod inventory;
mod latency;
mod memlock;
mod open_loop;
mod path;
mod peering;
pub mod probe;
mod receive;
mod shared_cq;
mod stream;
mod task;
mod ud;
mod validate;

pub use cm::EVENT_POLL as CM_EVENT_POLL;
pub use connect::{prepare, prepare_shared, registered_len, ConnectedFlow, PreparedFlow};
pub use counters::{CounterDelta, CounterSnapshot, DevicePort};
pub use device::{libibverbs_release, set_data_address};
pub use endpoint::RdmaEndpoint;
pub use error::RdmaError;
pub use gids::{GidInfo, GidKind};
pub use gpu::GpuMemoryUse;
#[cfg(any(test, feature = "testing"))]
pub use harness::FlowOutcome;
pub use inventory::{InventoryDevice, InventoryPort, RdmaInventory};
pub use memlock::{raise as raise_memlock_limit, HOW_TO_RAISE as HOW_TO_RAISE_MEMLOCK};
pub use peering::{Begun, CmConnecting};
pub(crate) use probe::numa_node;
pub use probe::{probe, DeviceReport, PortReport, ProbeReport};
pub use shared_cq::{CqGroup, CqPool, ShardsOn, Sharing};

use crate::histogram::Span;
use crate::plan::{Mode, RdmaParams};

impl ConnectedFlow {
    /// Names the flow in every error (e.g. "flow 3->0").
    pub fn with_label(mut self, label: impl Into<String>) -> Self {
        self.res.label = label.into();
        self
    }

    /// Latency mode: records only the round trips that start and end in
    /// `window` (without it, every one).
    pub fn with_latency_window(mut self, window: Span) -> Self {
        self.res.latency_window = Some(window);
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

    /// Whether it measures latency (ping-pong or open-loop probes): its
    /// one task is then light, and its engine spins rather than sleeps.
    pub fn is_latency(&self) -> bool {
        self.res.params.mode == Mode::Latency
    }

    pub fn params(&self) -> &RdmaParams {
        &self.res.params
    }
}
