//! Measuring: clocks, per-interval samples, CPU and interface counters,
//! statistics, and the report each rank sends at the end of a phase
//! (`result` aggregates those into run.json).

pub mod clock;
pub(crate) mod confidence;
pub mod cpu;
pub mod links;
pub mod netdev;
pub mod qdisc;
pub mod stats;

use serde::{Deserialize, Serialize};

use crate::histogram::Histogram;
use crate::load::stress::StressReport;
use crate::plan::FlowId;
use crate::transport::rdma::{CounterDelta, GpuMemoryUse};
use crate::transport::tcp::info::TcpView;
use crate::transport::validation::DvTally;
use crate::transport::Side;

/// What one rank measured in one phase, sent to the coordinator at its end.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RankReport {
    pub phase: usize,
    pub rank: usize,
    /// Boundaries the rank took (the first, and one per interval it sent).
    pub boundaries: u32,
    pub flows: Vec<FlowSamples>,
    /// The rank's clock minus the coordinator's, as estimated at Hello.
    pub clock_offset_ns: i64,
    /// Round trip of that estimate: its uncertainty is half of it.
    pub rtt_ns: i64,
    pub cpu: cpu::CpuUsage,
    pub netdevs: Vec<netdev::NetdevDelta>,
    /// The RDMA ports the rank's flows used: counters that moved in the window.
    pub rdma_counters: Vec<CounterDelta>,
    /// The CPU stress this rank ran, and the load it measured.
    pub stress: Option<StressReport>,
    /// Where each group's threads ran on this rank.
    pub placements: Vec<GroupPlacement>,
    /// Set when the rank stopped early (abort, stream error).
    pub error: Option<String>,
    /// Its links' events in the window (`links`), by start.
    pub link_events: Vec<links::LinkEvent>,
    /// Events past `links::MAX_EVENTS`, counted and left out.
    pub link_events_dropped: u64,
}

/// The cores a group's stream threads were pinned to on one rank.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupPlacement {
    pub group: String,
    /// Empty: not pinned.
    pub cores: Vec<usize>,
    pub note: Option<String>,
    /// The NUMA nodes of `cores` (empty: not pinned, or no NUMA), and of
    /// the NIC its (first) rail or interface hangs off (`None`: virtual,
    /// or no NUMA). Absent in runs made before they were read.
    #[serde(default)]
    pub core_nodes: Vec<usize>,
    #[serde(default)]
    pub device_node: Option<usize>,
}

/// One end of one flow at the phase's end. What it moved went interval by
/// interval (`ToCoordinator::Interval`), not here.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FlowSamples {
    pub flow: FlowId,
    pub side: Side,
    /// When the last of the flow's streams began moving data, ns after t0.
    pub start_ns: Option<i64>,
    pub error: Option<String>,
    /// Round-trip times in the window (the latency client's end).
    pub rtts: Option<Histogram>,
    /// TCP receiver: connections to its data port closed because they did
    /// not prove they were the flow's (`transport::tcp::preamble`).
    pub refused: u64,
    /// An end of several lanes (TCP streams, RDMA rails): each one's own
    /// cumulative bytes at the first and the last boundary taken, read
    /// together with the end's own counters (so they sum to what it moved).
    /// Empty for an end of one lane.
    pub lanes: Vec<LaneSamples>,
    /// The engines (data-path threads) that ran its TCP streams; empty
    /// where the end's lanes have threads of their own (RDMA).
    pub engines: Vec<EngineSeat>,
    /// An RDMA end in GPU memory: what each rail registered, and how.
    pub gpu_memory: Vec<GpuMemoryUse>,
    /// A group that validates data: what this end checked (receivers and
    /// RDMA readers; a sending end's is `None`), over the whole phase.
    pub validation: Option<DvTally>,
    /// A TCP bandwidth sender: what its streams' `TCP_INFO` told of the
    /// window (`None`: not such an end, or no stream could be read).
    pub tcp: Option<TcpView>,
}

/// An engine of a rank that carried lanes of one flow end: its number on
/// the rank, the core it was bound to (none where it could run on several,
/// the kernel choosing), and how many of the end's lanes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EngineSeat {
    pub engine: u32,
    pub core: Option<u32>,
    pub lanes: u32,
}

/// Where a TCP flow's ends ran (run.json's `flows[].engines`): each end's
/// engines, from its rank's report (empty: that end did not report).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlowEngines {
    pub sender: Vec<EngineSeat>,
    pub receiver: Vec<EngineSeat>,
}

/// One lane of a flow end: a TCP stream (in stream order) or an RDMA rail.
/// Two readings, not a series: a flow of 1024 streams over 100 000
/// boundaries must still fit a report.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LaneSamples {
    /// RDMA: the rail's device.
    pub device: Option<String>,
    /// Cumulative bytes at the first boundary.
    pub opened: u64,
    /// Cumulative bytes at the last boundary taken.
    pub closed: u64,
}
