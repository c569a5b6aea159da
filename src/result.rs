//! The result of a run. These structs are the export schema: `run.json` is
//! exactly a serialized [`RunResult`], and every CSV, table and chart is
//! rendered from them. Bump [`SCHEMA_VERSION`] on any incompatible change
//! and describe it in docs/METRICS.md.

use serde::{Deserialize, Serialize};

use crate::hostfile::Host;
use crate::load::stress::StressReport;
use crate::metrics::cpu::CpuUsage;
use crate::metrics::latency::LatencySummary;
use crate::metrics::netdev::NetdevDelta;
use crate::metrics::sweep::SweepResult;
use crate::metrics::GroupPlacement;
use crate::plan::{FlowId, Plan};
use crate::scenario::{Mode, Op, Pattern, Scenario, Transport};

pub const SCHEMA_VERSION: u32 = 1;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    pub schema_version: u32,
    pub tool_version: String,
    /// RFC 3339, UTC.
    pub started_at: String,
    pub scenario_file: String,
    pub scenario: Scenario,
    pub hosts: Vec<Host>,
    pub plan: Plan,
    /// From the launcher's start to every rank connected, seconds.
    pub launch_s: Option<f64>,
    /// Phases measured, complete or cut short by a failure.
    pub phases: Vec<PhaseResult>,
    /// With `[sweep]`: one row per point and the ratios to the baseline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sweep: Option<SweepResult>,
    pub status: RunStatus,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum RunStatus {
    Ok,
    Failed { error: String },
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PhaseResult {
    pub index: usize,
    pub name: String,
    /// False when the phase was cut short; its numbers cover what ran.
    pub complete: bool,
    /// Length of the common measurement window, seconds.
    pub window_s: f64,
    /// Spread of the flows' actual start times around t0, µs.
    pub start_skew_us: f64,
    /// All bytes of all bandwidth flows in the window / window length, Gb/s.
    pub aggregate_gbps: f64,
    /// The aggregate per sample interval, Gb/s.
    pub interval_gbps: Vec<f64>,
    pub groups: Vec<GroupResult>,
    pub flows: Vec<FlowResult>,
    pub receivers: Vec<ReceiverResult>,
    pub ranks: Vec<RankResult>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FlowResult {
    pub id: FlowId,
    pub group: String,
    /// Latency flows are kept out of bandwidth aggregates and fairness.
    pub mode: Mode,
    pub src: usize,
    pub dst: usize,
    pub src_host: String,
    pub dst_host: String,
    pub streams: u32,
    pub message_size: u64,
    /// Bytes the sender handed to the transport in the window.
    pub tx_bytes: Option<u64>,
    /// Bytes the receiver got in the window.
    pub rx_bytes: Option<u64>,
    /// The flow's count: received bytes where the receiver reported, else sent.
    pub bytes: u64,
    pub gbps: f64,
    pub msgs_per_s: f64,
    /// This flow per sample interval, Gb/s.
    pub interval_gbps: Vec<f64>,
    /// Latency flows: half round trip (as perftest reports ping-pong), µs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<LatencySummary>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Everything arriving at one rank (the incast view).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReceiverResult {
    pub rank: usize,
    pub host: String,
    pub senders: usize,
    pub aggregate_gbps: f64,
    /// Smallest and largest sender's part of the aggregate, 0..1.
    pub min_share: f64,
    pub max_share: f64,
    /// Jain's fairness index over the senders, 1/n..1.
    pub jain: f64,
    /// Coefficient of variation of the senders' Gb/s.
    pub cov: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GroupResult {
    pub name: String,
    pub mode: Mode,
    pub pattern: Pattern,
    pub transport: Transport,
    pub op: Op,
    pub flows: usize,
    pub aggregate_gbps: f64,
    pub min_flow_gbps: f64,
    pub max_flow_gbps: f64,
    pub jain: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RankResult {
    pub rank: usize,
    pub host: String,
    /// False when the rank's report never arrived (it died).
    pub reported: bool,
    pub tx_gbps: f64,
    pub rx_gbps: f64,
    pub cpu: CpuUsage,
    /// Kernel interface counters over the window.
    pub netdevs: Vec<NetdevDelta>,
    /// CPU stress run on this rank: asked and measured load.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stress: Option<StressReport>,
    /// Cores each group's streams were pinned to (empty: not pinned).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub placements: Vec<GroupPlacement>,
    pub clock_offset_us: f64,
    pub rtt_us: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}
