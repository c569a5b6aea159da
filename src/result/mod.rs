//! The result of a run. These structs are the export schema: `run.json` is
//! exactly a serialized [`RunResult`], and every CSV, table and chart is
//! rendered from them. Bump [`SCHEMA_VERSION`] on any incompatible change
//! and describe it in docs/METRICS.md. Beside the schema: how the ranks'
//! reports become a phase result (`aggregate`), the all-pairs matrix and
//! the sweep summary.

mod aggregate;
mod build;
mod checks;
pub mod congestion;
mod datagrams;
pub mod degraded;
pub mod flaps;
pub mod gate;
pub mod gpu_memory;
pub mod intervals;
pub mod leaf_pairs;
pub mod limit;
pub mod line_rate;
mod matrix;
pub mod metric;
mod offered;
pub mod repeats;
pub mod sweep;
#[cfg(test)]
pub(crate) mod testing;
mod validation;

use serde::{Deserialize, Serialize};

pub use aggregate::aggregate_phase;
pub use build::Build;
pub use checks::{
    Acceptance, CheckOutcome, Checked, Direction, NicEnd, Retest, Suspect, SuspectKind, UplinkOutcome, Verdict,
};
pub use datagrams::Datagrams;
pub use matrix::{pair_matrix, PairMatrix};
pub use metric::Metric;
pub use offered::{Offered, Probes};

use crate::histogram::LatencySummary;
use crate::hostfacts::HostFacts;
use crate::hostfile::Host;
use crate::load::stress::StressReport;
use crate::metrics::cpu::CpuUsage;
use crate::metrics::links::LinkEvent;
use crate::metrics::netdev::NetdevDelta;
use crate::metrics::{FlowEngines, GroupPlacement};
use crate::plan::{FlowId, Plan};
use crate::scenario::{Mode, Op, Pattern, Scenario, Transport};
use crate::transport::rdma::{CounterDelta, InventoryDevice};
use crate::transport::tcp::info::TcpView;
use crate::transport::validation::BadByte;

/// 2: `matrix` (all-pairs) and `acceptance` (checks, suspects, retests).
/// 3: `probes`, `ranks[].rdma_counters`, the sweep's message rate, CPU and
/// second parameter.
pub const SCHEMA_VERSION: u32 = 3;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    pub schema_version: u32,
    pub tool_version: String,
    /// The source the binary was built from (absent in runs made before it
    /// existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build: Option<Build>,
    /// The launcher's command line, program name first (absent in older runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command_line: Option<Vec<String>>,
    /// The hostfile as given, byte for byte where it is UTF-8 (absent when
    /// the hosts came from elsewhere: Slurm, `pair`, or older runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostfile_text: Option<String>,
    /// RFC 3339, UTC.
    pub started_at: String,
    pub scenario_file: String,
    #[serde(deserialize_with = "crate::scenario::rdma::stored::read_scenario")]
    pub scenario: Scenario,
    pub hosts: Vec<Host>,
    pub plan: Plan,
    /// From the launcher's start to every rank connected, seconds (under
    /// `mpirun … fabricbench run`, from rank 0's start: mpirun started the
    /// ranks before any launcher ran).
    pub launch_s: Option<f64>,
    /// Every rank's RDMA devices from its own probe, by rank (ranks whose
    /// probe never arrived are missing).
    #[serde(default)]
    pub probes: Vec<RankProbe>,
    /// Phases measured, complete or cut short by a failure.
    pub phases: Vec<PhaseResult>,
    /// With `[sweep]`: one row per point and the ratios to the baseline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sweep: Option<sweep::SweepResult>,
    /// With `[run] repeat` above 1: each phase's aggregates over its
    /// repeats, with mean, spread and 95 % confidence interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeats: Option<Vec<repeats::RepeatedPhase>>,
    pub status: RunStatus,
    /// All-pairs: every pair's Gb/s in one N×N matrix.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matrix: Option<PairMatrix>,
    /// The checks of `[check]` and `--check`, what failed, and who is to blame.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acceptance: Option<Acceptance>,
    /// The node gate's verdict per host, when one ran (`--gate`, `[gate]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate: Option<gate::GateResult>,
    /// With `[congestion]`: each canary group's impact (congested vs isolated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub congestion: Option<Vec<congestion::CanaryImpact>>,
    /// With `[congestion]` and `[run] repeat`: each canary group's impacts
    /// over the repeats, with mean, spread and 95 % confidence interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub congestion_repeats: Option<Vec<congestion::ImpactOverRepeats>>,
    /// Per phase, each flow's dips below `[soak] flap` of its median and
    /// every link event (absent when there were none and `[soak]` is not set).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flaps: Vec<flaps::PhaseFlaps>,
    /// A folder read while its run goes: the phase under way and its
    /// aggregate Gb/s per interval so far, from the journal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub live: Option<LivePhase>,
    /// With a topology: bandwidth flows by their ends' leaves (absent without one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leaf_pairs: Option<leaf_pairs::LeafPairs>,
    /// The run failed because a rank refused before any end was made (the
    /// GPU preflight): nothing ran, so the exit is bad input's. Decides the
    /// exit code only; not part of run.json.
    #[serde(skip)]
    pub refused: bool,
}

/// The phase a live run is measuring, as far as its journal goes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LivePhase {
    pub phase: usize,
    /// The aggregate of all the phase's bandwidth flows per interval so
    /// far, Gb/s (as the progress line shows it).
    pub interval_gbps: Vec<f64>,
}

impl RunResult {
    /// A run about to start, of this build, now: no phases yet.
    pub fn new(scenario_file: String, scenario: Scenario, hosts: Vec<Host>, plan: Plan) -> RunResult {
        RunResult {
            schema_version: SCHEMA_VERSION,
            tool_version: env!("CARGO_PKG_VERSION").to_string(),
            build: Some(Build::of_this_binary()),
            command_line: Some(std::env::args().collect()),
            hostfile_text: None,
            started_at: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
            scenario_file,
            scenario,
            hosts,
            plan,
            launch_s: None,
            probes: Vec::new(),
            phases: Vec::new(),
            sweep: None,
            repeats: None,
            status: RunStatus::Ok,
            matrix: None,
            acceptance: None,
            gate: None,
            congestion: None,
            congestion_repeats: None,
            flaps: Vec::new(),
            live: None,
            leaf_pairs: None,
            refused: false,
        }
    }

    /// A completed run with a degraded phase is degraded, naming each such
    /// phase and its reasons; a failed run stays failed.
    pub fn mark_degraded(&mut self) {
        let reasons: Vec<String> = self.phases.iter().filter(|p| !p.degraded.is_empty()).map(degraded::line).collect();
        if self.status == RunStatus::Ok && !reasons.is_empty() {
            self.status = RunStatus::Degraded { reasons };
        }
    }

    /// Recomputes what is derived from the phases: the sweep summary, the
    /// repeats' statistics, the all-pairs matrix, the congestion impact and
    /// the leaf pairs.
    pub fn summarize_phases(&mut self) {
        self.sweep = sweep::summarize(&self.plan, &self.phases);
        self.repeats = repeats::summarize(&self.plan, &self.phases);
        self.matrix = pair_matrix(&self.plan, &self.phases);
        self.congestion = congestion::summarize(&self.plan, &self.phases);
        self.congestion_repeats = self.congestion.as_deref().and_then(congestion::over_repeats);
        self.flaps = flaps::of_run(self);
        limit::judge_run(self);
        if let Some(leaf_pairs) = &mut self.leaf_pairs {
            leaf_pairs.summarize(&self.plan, &self.phases);
        }
    }
}

/// One rank's RDMA devices and ports as its own probe saw them at the start
/// of the run (`fabricbench probe` in short).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RankProbe {
    pub rank: usize,
    pub host: String,
    /// Empty when the host has no RDMA (`error` says why).
    pub devices: Vec<InventoryDevice>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// What the host is: kernel, OS, CPU, NUMA, rdma-core, and its RDMA
    /// devices' drivers, firmware, models and port rates as sysfs states
    /// them (absent in runs made before it existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub facts: Option<Box<HostFacts>>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum RunStatus {
    Ok,
    Failed {
        error: String,
    },
    /// The run completed, but these phases' numbers are not a valid
    /// measurement: one line per degraded phase, naming its reasons.
    Degraded {
        reasons: Vec<String>,
    },
    /// The run is still going: its folder was read while its launcher
    /// held the journal (`fabricbench report` on a live run, or the
    /// launcher's own renders between phases).
    Running {
        note: String,
    },
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
    /// Why the phase is not a valid measurement (`degraded`); absent when it is.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub degraded: Vec<degraded::Degradation>,
    /// All bytes of all bandwidth flows in the window / window length, Gb/s.
    pub aggregate_gbps: f64,
    /// The aggregate per sample interval, Gb/s.
    pub interval_gbps: Vec<f64>,
    pub groups: Vec<GroupResult>,
    pub flows: Vec<FlowResult>,
    pub receivers: Vec<ReceiverResult>,
    pub ranks: Vec<RankResult>,
    /// What held most of the phase's bandwidth flows; absent without them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<limit::MostHeld>,
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
    /// TCP: connections to the receiver's data port closed because they did
    /// not prove they were this flow's (0 in runs made before it existed).
    #[serde(default)]
    pub refused: u64,
    /// A flow of several streams (TCP) or rails (RDMA): what each moved in
    /// the window, at the end that counts `bytes`, summing to it exactly.
    /// Absent for one lane, and in runs made before it existed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lanes: Vec<LaneResult>,
    /// A paced flow (its group has a `rate`): what it offered, and what
    /// part of that it delivered. Absent when unpaced, and in older runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offered: Option<Offered>,
    /// A UD flow (unreliable datagrams): what the sender sent against what
    /// the receiver got in the window. Absent for RC and TCP, in older runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub datagrams: Option<Datagrams>,
    /// An open-loop latency flow (a latency group with a `rate`): its
    /// probes due in the window against those echoed. Absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probes: Option<offered::Probes>,
    /// TCP: the engines (data-path threads) and cores that carried each
    /// end's streams. Absent for RDMA, and in older runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engines: Option<FlowEngines>,
    /// An RDMA flow with GPU memory at either end: what each end's rails
    /// registered and how (dma-buf or peer memory), and why. Absent when
    /// both ends use host memory, and in older runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_memory: Option<gpu_memory::FlowGpuMemory>,
    /// A flow of a group that validates data (`validate`): messages its
    /// checking end (receiver; RDMA read: the reader) checked over the
    /// phase, warm-up included. Absent when not validated, and in older runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dv_checked: Option<u64>,
    /// …of which messages had a byte off the pattern (more than 0 fails the run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dv_errors: Option<u64>,
    /// …and the first bad byte: its lane, message and offset in the message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dv_first_bad: Option<BadByte>,
    /// A TCP bandwidth flow: what its sending streams' `TCP_INFO` told of
    /// the window (retransmits, round trip, window, limited times). Absent
    /// for RDMA, where the sender's kernel tells nothing, and in older runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp: Option<TcpView>,
    /// A bandwidth flow: what held it, by which rule, on what evidence
    /// ("Why this number"); absent for latency and failed flows, older runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<limit::Limit>,
}

/// One TCP stream (in stream order) or RDMA rail of a flow, over the window.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LaneResult {
    /// The stream's (rail's) index in the flow, from 0.
    pub lane: usize,
    /// RDMA: the rail's device.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    pub bytes: u64,
    pub gbps: f64,
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
    /// Latency groups: over every round trip of all the group's flows
    /// (half round trip as for a flow), µs; absent for bandwidth groups and
    /// in runs made before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<LatencySummary>,
    /// A paced group: its flows' offered load summed, and the group's
    /// delivered / offered (absent when unpaced, and in older runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offered: Option<Offered>,
    /// What held most of its bandwidth flows (absent for latency groups).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<limit::MostHeld>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RankResult {
    pub rank: usize,
    pub host: String,
    /// Its index among its host's ranks (hostfile `slots=`), from 0
    /// (absent: 0, the only rank of its host, and in older runs).
    #[serde(default, skip_serializing_if = "is_zero_slot")]
    pub slot: u32,
    /// The RDMA devices it was bound to by the hostfile's `devices=`
    /// (absent when none were listed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<String>,
    /// The address its TCP data listened on and left from, its own from the
    /// hostfile's `addrs=` (absent: its host's, `plan.ranks[].addr`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_addr: Option<String>,
    /// False when the rank's report never arrived (it died).
    pub reported: bool,
    pub tx_gbps: f64,
    pub rx_gbps: f64,
    pub cpu: CpuUsage,
    /// Kernel interface counters over the window.
    pub netdevs: Vec<NetdevDelta>,
    /// RDMA ports the rank's flows used: the sysfs counters (`counters/…`,
    /// `hw_counters/…`) that moved in the window, raw units.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rdma_counters: Vec<CounterDelta>,
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
    /// Its interface's and RDMA ports' link events in the window, by start
    /// (absent when none, and in runs made before it existed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub link_events: Vec<LinkEvent>,
    /// Link events past the 1000 a rank keeps per phase, counted only.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub link_events_dropped: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn is_zero_slot(n: &u32) -> bool {
    *n == 0
}
