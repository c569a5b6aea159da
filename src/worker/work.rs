//! What the worker's session asks its agent to do ([`Action`]), and what the
//! agent's work off the async threads hands back ([`Work`]).

use crate::control::wire::{FlowEndpoint, FlowRole, ToCoordinator, Window};
use crate::hostfacts::lldp::LldpOutput;
use crate::hostfacts::HostFacts;
use crate::metrics::clock::PeerClock;
use crate::metrics::RankReport;
use crate::plan::{GpuAsk, StressSpec};
use std::time::Duration;

use crate::transport::rdma::RdmaInventory;
use crate::transport::Counts;
use crate::worker::gpu::PreflightError;
use crate::worker::phase::PhaseError;

/// What the agent is to do, in the order given.
#[derive(Debug, PartialEq)]
pub enum Action<O, C> {
    Send(ToCoordinator),
    /// Probe the host's RDMA devices off the async threads, and open each
    /// GPU of `gpus` (the GPU preflight), and with `lldp` gather the host's
    /// LLDP neighbours, then [`Work::Probed`].
    Probe {
        gpus: Vec<GpuAsk>,
        lldp: bool,
    },
    /// Create the phase's flow ends off the async threads, then
    /// [`Work::Prepared`].
    Prepare {
        phase: usize,
        flows: Vec<FlowRole>,
        stress: Option<StressSpec>,
    },
    /// Connect `ends` to `peers` off the async threads, then [`Work::Connected`].
    Connect {
        phase: usize,
        ends: O,
        peers: Vec<FlowEndpoint>,
    },
    /// Run the streams from `t0_ns` (coordinator clock) through `window`;
    /// each interval is [`Work::Interval`], a flow that fails
    /// [`Work::FlowFailed`], their end [`Work::Report`].
    Start {
        phase: usize,
        links: C,
        t0_ns: i64,
        window: Window,
        clock: PeerClock,
    },
    /// Stop the running streams early; their report still comes.
    StopStreams,
    /// The session is over: stop any streams, flush what was sent, return.
    Exit(Result<(), SessionError>),
}

/// What the work off the async threads has finished.
#[derive(Debug)]
pub enum Work<O, C> {
    /// The probe, the GPU preflight's outcome (why a GPU cannot be used),
    /// and the host's `lldpctl -f json` text when it was asked.
    Probed(RdmaInventory, Box<HostFacts>, Result<(), PreflightError>, Option<LldpOutput>),
    Prepared {
        phase: usize,
        result: Result<(O, Vec<FlowEndpoint>), PhaseError>,
    },
    Connected {
        phase: usize,
        result: Result<C, PhaseError>,
    },
    /// One interval of the running phase: its length on the coordinator's
    /// clock and what each flow end moved in it.
    Interval {
        phase: usize,
        interval: u32,
        span_ns: i64,
        ends: Vec<Counts>,
    },
    /// A flow of the running phase ended with an error before it was stopped.
    FlowFailed {
        phase: usize,
        error: String,
    },
    Report(Box<RankReport>),
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SessionError {
    #[error("the coordinator was silent for {0:?} (heartbeat lease expired)")]
    Silent(Duration),
    #[error("the coordinator sent {0} before welcoming this rank")]
    NotWelcomed(&'static str),
}
