//! The scenario file: what to run, in TOML. The model here is also what
//! `run.json` records, so a result always carries the scenario that made it.
//!
//! Parsing rejects unknown fields; problems found later (a rank the hostfile
//! does not have) are reported against the field's line through [`Source`].

mod check;
pub mod congestion;
pub mod dv;
pub mod gate;
pub mod limits;
mod locate;
pub mod memory;
mod op;
mod pattern;
pub mod placement;
pub mod rails;
mod ranks;
pub mod rate;
pub mod rdma;
pub mod soak;
pub mod stress;
pub mod sweep;
pub mod topology;
mod validate;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use check::{parse_rate, BadGbps, BadRule, BadThreshold, CheckSpec, Rule, Subject, Threshold};
pub use locate::{BadField, BadKey, Field, Section, Source};
pub use op::{Mode, Op};
pub use pattern::Pattern;
pub use ranks::{BadRanks, RankSet};
pub use validate::check_run;

use crate::units::ByteSize;
use placement::Numa;
use rate::{Rate, Schedule};
use rdma::{RdmaKnobs, RdmaParams, RdmaSetup};
use stress::Threads;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    #[serde(default)]
    pub run: RunSpec,
    #[serde(rename = "group")]
    pub groups: Vec<GroupSpec>,
    /// `[check]`: what the results must reach (acceptance).
    #[serde(default, skip_serializing_if = "CheckSpec::is_empty")]
    pub check: CheckSpec,
    /// CPU stress on chosen ranks, running in the same window as the groups.
    #[serde(rename = "stress", default, skip_serializing_if = "Vec::is_empty")]
    pub stress: Vec<StressTable>,
    /// Repeat the run once per value of one parameter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sweep: Option<sweep::SweepSpec>,
    /// Measure the canary groups alone and beside the congestor groups
    /// (GPCNeT's congestion impact; docs/CONGESTION.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub congestion: Option<congestion::CongestionSpec>,
    /// `[soak]`: the flap detector's threshold.
    #[serde(default, skip_serializing_if = "soak::SoakSpec::is_default")]
    pub soak: soak::SoakSpec,
    /// `[topology]`: the fabric's shape, for the patterns that choose pairs by it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology: Option<topology::TopologyTable>,
    /// `[gate]`: the node gate that runs before everything else.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate: Option<gate::GateSpec>,
}

/// `[[stress]]`: busy threads on some ranks, from t0 to the window's end.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StressTable {
    /// Ranks that run the burners (default: all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ranks: Option<RankSet>,
    /// Burner threads: a number, or "all" (one per core of the placement).
    #[serde(default = "all_threads")]
    pub threads: Threads,
    /// Pin the burners to these cores (one per burner, round robin).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cores: Option<Vec<usize>>,
    /// Or place them near/far from the NUMA node of the rank's device.
    #[serde(default)]
    pub numa: Numa,
    /// Duty cycle of each burner, percent (1-100).
    #[serde(default = "full_load")]
    pub load: u8,
    /// Each burner streams over a buffer of this size (memory bandwidth).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<ByteSize>,
}

fn all_threads() -> Threads {
    Threads::All
}

fn full_load() -> u8 {
    100
}

/// `[run]`: the measurement window shared by every flow.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RunSpec {
    /// Name used in the results folder; defaults to the file's stem.
    pub name: String,
    /// Length of the measured window.
    #[serde(with = "humantime_serde")]
    pub duration: Duration,
    /// Traffic before the window opens, excluded from every number.
    #[serde(with = "humantime_serde")]
    pub warmup: Duration,
    /// Length of one per-interval sample; when the file does not give it,
    /// [`RunSpec::default_interval`] of the duration.
    #[serde(with = "humantime_serde")]
    pub interval: Duration,
    /// How many times each phase runs (1 to [`limits::MAX_REPEATS`]); the
    /// repeats of a sweep's points interleave (A B A B), and every
    /// aggregate gets a mean and a 95 % confidence interval over them.
    #[serde(skip_serializing_if = "is_one")]
    pub repeat: u32,
}

fn is_one(n: &u32) -> bool {
    *n == 1
}

impl Default for RunSpec {
    fn default() -> Self {
        RunSpec {
            name: String::new(),
            duration: Duration::from_secs(10),
            warmup: Duration::from_secs(1),
            interval: Duration::from_secs(1),
            repeat: 1,
        }
    }
}

/// `[[group]]`: flows of one pattern that run together in the window.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupSpec {
    pub name: String,
    pub pattern: Pattern,
    #[serde(default)]
    pub transport: Transport,
    /// The operation: `send` for TCP; for RDMA write (default), read, send,
    /// write-imm, send-imm, fetch-add, cmp-swap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub op: Option<Op>,
    /// Bandwidth streams, or latency ping-pong.
    #[serde(default)]
    pub mode: Mode,
    /// Bytes per message; 128K for bandwidth, 2 for latency (perftest's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_size: Option<ByteSize>,
    /// Offered load per flow: the sender paces itself to this rate
    /// (`"2 Gb/s"`, `"400 Mb/s"`, `"100k msg/s"`); latency groups with a rate
    /// send open-loop probes on `schedule`. Not given: as fast as it goes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<Rate>,
    /// Open-loop latency: when probes go (`constant` or `poisson`), needs `rate`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<Schedule>,
    /// Parallel streams (TCP connections) per flow.
    #[serde(default = "default_streams")]
    pub streams: u32,
    /// Sending ranks (fan-in, one-to-all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub senders: Option<RankSet>,
    /// Receiving ranks (fan-in, one-to-all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receivers: Option<RankSet>,
    /// Ranks taking part (pairwise, all-to-all, all-pairs, ring).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ranks: Option<RankSet>,
    /// Explicit `[src, dst]` pairs (pairwise) or flows (explicit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flows: Option<Vec<[usize; 2]>>,
    /// Pairwise, all-pairs and ring: traffic in both directions.
    #[serde(default)]
    pub bidirectional: bool,
    /// Permit flows from a rank to itself (loopback through the stack).
    #[serde(default)]
    pub allow_self: bool,
    /// `[group.rdma]`, RDMA knobs only (perftest's): qps, tx_depth, rx_depth,
    /// post_list, cq_moderation, inline_size, poll_batch, completion, device,
    /// gid_index, threads…
    #[serde(default, skip_serializing_if = "Option::is_none", serialize_with = "rdma::write_table")]
    pub rdma: Option<RdmaKnobs>,
    /// RDMA groups: where each end's buffers live, `"host"` (default),
    /// `"cuda"`, `"cuda-managed"`, `"cuda-host"`, or `{ sender, receiver }`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<memory::MemorySides>,
    /// RDMA groups with GPU memory: `"auto"` (the GPU nearest the NIC), an
    /// index or a PCI bus id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<memory::GpuChoice>,
    /// TCP groups: the DSCP (0-63) both ends mark the flows' packets with
    /// (IP_TOS / IPV6_TCLASS = dscp << 2). RDMA groups set rdma.traffic_class.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dscp: Option<u32>,
    /// Data validation: every message carries a pattern of its flow, number
    /// and offsets, checked where it lands (costs throughput).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub validate: bool,
    /// Pin the group's stream threads to these cores.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cores: Option<Vec<usize>>,
    /// Or place them near/far from the NUMA node of the device they use
    /// (not given: near for RDMA groups, any for TCP).
    #[serde(default)]
    pub numa: Numa,
    /// With `[congestion]`: whether the group is measured (canary) or
    /// makes the traffic that hurts (congestor).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<congestion::Role>,
    /// `random-ring`: the seed of its permutation (default: the
    /// `[congestion]` seed, else 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// All-pairs, pairwise: only pairs under one `leaf` (needs a topology).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub within: Option<topology::SwitchLevel>,
    /// All-pairs, pairwise: only pairs under different leaves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub across: Option<topology::SwitchLevel>,
    /// All-pairs, pairwise: only pairs whose route has these hop counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hops: Option<topology::HopRange>,
    /// All-pairs, pairwise, fan-in, bisection: `same` keeps rail k of one
    /// host with rail k of another only (not given: every pair, `all`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rails: Option<rails::Rails>,
}

fn default_streams() -> u32 {
    1
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Transport {
    /// Kernel TCP sockets (Ethernet, IPoIB, loopback).
    #[default]
    Tcp,
    /// RC queue pairs over verbs (InfiniBand, RoCE, Soft-RoCE).
    Rdma,
}

#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    #[error("cannot read scenario {path}: {cause}")]
    Read { path: PathBuf, cause: std::io::Error },
    #[error("{path}:{line}:{column}: {message}")]
    Syntax { path: PathBuf, line: usize, column: usize, message: String },
    #[error("{0}")]
    Invalid(String),
}

/// The default `run.name`: the file's stem, made fit for a folder name.
fn name_of(path: &Path) -> String {
    let stem = path.file_stem().map_or_else(|| "run".into(), |s| s.to_string_lossy());
    let name: String = stem
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') { c } else { '-' })
        .take(limits::MAX_NAME)
        .collect();
    if name.is_empty() {
        "run".to_string()
    } else {
        name
    }
}

/// Reads, parses and validates a scenario file.
pub fn read(path: &Path) -> Result<(Scenario, Source), ScenarioError> {
    let text =
        std::fs::read_to_string(path).map_err(|cause| ScenarioError::Read { path: path.to_path_buf(), cause })?;
    parse(&text, path)
}

/// Parses and validates scenario text; `path` names it in errors.
pub fn parse(text: &str, path: &Path) -> Result<(Scenario, Source), ScenarioError> {
    let source = Source::new(path, text);
    let mut scenario: Scenario = toml::from_str(text).map_err(|e| {
        // The rdma table's type refuses the group's own keys; say where they go.
        if let Err(bad) = validate::check_rdma_tables(&source) {
            return ScenarioError::Invalid(source.explain(&bad));
        }
        let (line, column) = e.span().map_or((1, 1), |s| source.line_col(s.start));
        ScenarioError::Syntax { path: path.to_path_buf(), line, column, message: e.message().to_string() }
    })?;
    if scenario.run.name.is_empty() {
        scenario.run.name = name_of(path);
    }
    if !source.sets(&Field::run("interval")) {
        scenario.run.interval = RunSpec::default_interval(scenario.run.duration);
    }
    validate::validate(&scenario, &limits::Machine::this())
        .and_then(|()| topology::check(&scenario))
        .and_then(|()| rails::check(&scenario))
        .map_err(|bad| ScenarioError::Invalid(source.explain(&bad)))?;
    Ok((scenario, source))
}

impl RunSpec {
    /// The interval of a run that does not give one: 1 s, or the whole
    /// window when the duration is shorter (one sample, as iperf's 1 s
    /// reports give for a shorter run). Every duration of 1 s or more keeps
    /// the 1 s it always had.
    pub fn default_interval(duration: Duration) -> Duration {
        duration.min(Duration::from_secs(1))
    }
}

impl GroupSpec {
    /// The operation after defaults: TCP sends; RDMA writes unless told.
    pub fn effective_op(&self) -> Op {
        match self.transport {
            Transport::Tcp => Op::Send,
            Transport::Rdma => self.op.unwrap_or(Op::Write),
        }
    }

    /// The message size after defaults ([`Transport::default_message_size`]);
    /// atomics always their 8-byte operand.
    pub fn effective_message_size(&self) -> ByteSize {
        let asked = self.message_size.unwrap_or(self.transport.default_message_size(self.mode));
        ByteSize(rdma::message_bytes(self.effective_op(), asked.bytes()))
    }

    /// Which rails the group's pairs join (not given: all).
    pub fn rails(&self) -> rails::Rails {
        self.rails.unwrap_or_default()
    }

    /// RDMA groups: their memory, GPU and `[group.rdma]` knobs after defaults.
    pub fn rdma_setup(&self) -> Option<RdmaSetup> {
        (self.transport == Transport::Rdma).then(|| RdmaSetup {
            memory: self.memory.unwrap_or_default(),
            gpu: self.gpu.clone().unwrap_or_default(),
            knobs: self.rdma.clone().unwrap_or_default(),
        })
    }

    /// RDMA groups: the request each flow obeys, the group's op, mode and
    /// size with its setup.
    pub fn rdma_params(&self) -> Option<RdmaParams> {
        let (op, size) = (self.effective_op(), self.effective_message_size().bytes());
        self.rdma_setup().map(|setup| setup.request(op, self.mode, size))
    }

    /// A group with this name and pattern and every other key as a scenario
    /// file that leaves it out has it.
    pub fn new(name: &str, pattern: Pattern) -> GroupSpec {
        GroupSpec {
            name: name.to_string(),
            pattern,
            transport: Transport::default(),
            op: None,
            mode: Mode::default(),
            message_size: None,
            rate: None,
            schedule: None,
            streams: default_streams(),
            senders: None,
            receivers: None,
            ranks: None,
            flows: None,
            bidirectional: false,
            allow_self: false,
            rdma: None,
            memory: None,
            gpu: None,
            dscp: None,
            validate: false,
            cores: None,
            numa: Numa::default(),
            role: None,
            seed: None,
            within: None,
            across: None,
            hops: None,
            rails: None,
        }
    }
}

impl Transport {
    /// Bytes per message when a group gives none: iperf's 128 KiB for TCP
    /// bandwidth (perftest's 64 KiB is small for TCP), perftest's 64 KiB
    /// for RDMA bandwidth and its 2 bytes for latency.
    pub fn default_message_size(self, mode: Mode) -> ByteSize {
        match (self, mode) {
            (_, Mode::Latency) => ByteSize(2),
            (Transport::Tcp, Mode::Bandwidth) => ByteSize(128 * 1024),
            (Transport::Rdma, Mode::Bandwidth) => ByteSize(64 * 1024),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) const FAN_IN: &str = r#"
[run]
name = "fan"
duration = "3s"
warmup = "500ms"
interval = "1s"

[[group]]
name = "incast"
pattern = "fan-in"
message_size = "64K"
receivers = 0
senders = "1-3"
"#;

    pub(super) fn err(text: &str) -> String {
        parse(text, Path::new("s.toml")).unwrap_err().to_string()
    }

    #[test]
    fn parses_with_defaults() {
        let (s, _) = parse(FAN_IN, Path::new("s.toml")).unwrap();
        assert_eq!(s.run.duration, Duration::from_secs(3));
        let g = &s.groups[0];
        assert_eq!((g.pattern, g.transport, g.op), (Pattern::FanIn, Transport::Tcp, None));
        assert_eq!(g.message_size, Some(ByteSize(65536)));
        assert_eq!(g.mode, Mode::Bandwidth);
        assert_eq!(g.senders, Some(RankSet::Ranges(vec![(1, 3)])));
        assert_eq!(g.streams, 1);
    }

    #[test]
    fn name_defaults_to_file_stem() {
        let text = FAN_IN.replace("name = \"fan\"\n", "");
        let (s, _) = parse(&text, Path::new("dir/my-test.toml")).unwrap();
        assert_eq!(s.run.name, "my-test");
    }

    /// An interval the file does not give follows the duration: 1 s, or the
    /// whole window of a shorter run; one it gives is kept (and checked).
    #[test]
    fn an_interval_not_given_follows_the_duration() {
        let interval = |text: &str| parse(text, Path::new("s.toml")).unwrap().0.run.interval;
        let unset = FAN_IN.replace("interval = \"1s\"\n", "");
        assert_eq!(interval(&unset), Duration::from_secs(1));
        assert_eq!(interval(&unset.replace("\"3s\"", "\"500ms\"")), Duration::from_millis(500));
        assert_eq!(interval(&FAN_IN.replace("\"1s\"", "\"250ms\"")), Duration::from_millis(250));
        let e = err(&FAN_IN.replace("\"3s\"", "\"500ms\""));
        assert_eq!(e, "s.toml:6: [run]: field `interval`: must be between 1ms and the duration (500ms)");
    }

    #[test]
    fn unknown_field_names_line_and_field() {
        let e = err(&FAN_IN.replace("streams", "x").replace("senders = \"1-3\"", "sendrs = \"1-3\""));
        assert!(e.starts_with("s.toml:13:1: unknown field `sendrs`, expected one of"), "{e}");
    }

    #[test]
    fn bad_value_names_line() {
        let e = err(&FAN_IN.replace("\"64K\"", "\"big\""));
        assert!(e.starts_with("s.toml:11:16: `big` is not a size"), "{e}");
        let e = err(&FAN_IN.replace("fan-in", "incast"));
        assert!(e.starts_with("s.toml:10:11: unknown variant `incast`, expected one of `all-to-one`, `fan-in`"), "{e}");
    }
}
