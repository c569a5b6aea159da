//! Control-plane messages between workers and the rank-0 coordinator.
//! Encoded with postcard inside length-delimited frames (see `framing`).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::hostfacts::lldp::LldpOutput;
use crate::hostfacts::HostFacts;
use crate::metrics::RankReport;
use crate::plan::{Flow, FlowId, GpuAsk, GroupPlan};
use crate::result::degraded::AskedWindow;
use crate::scenario::memory::GpuChoice;
use crate::scenario::stress::StressSpec;
use crate::scenario::{check_run, BadKey, RunSpec};
use crate::transport::rdma::{RdmaEndpoint, RdmaInventory};
use crate::transport::tcp::FlowProof;
use crate::transport::{Counts, Side};

/// "FBCP": the first field of every Hello; anything else is a stranger.
pub const MAGIC: u32 = 0x4642_4350;
/// Bumped on any incompatible change to these messages (5: `Probe` carries
/// the host's facts, `Welcome` the heartbeat interval; 6: the rank report's
/// CPU per thread class; 7: a group's offered `rate` and `schedule` in
/// Setup, the rank report's link events; 8: a group's `dscp` and its RDMA
/// knobs' `connect`, `traffic_class`, `service_level` and `connection` (RC
/// or UD) in Setup, the RDMA endpoint's rdma_cm address and UD Q_Key; 9:
/// Peers may come before the rank has sent its Endpoints, with its Setup;
/// 10: each flow end's counts go interval by interval (`Interval`), not
/// in the report; 11: `Probe`'s host facts carry the GPUs; 12: each flow
/// end's report names the engines that carried its lanes; 13: a group's
/// RDMA knobs carry each end's `memory`, the `gpu` and `gpu_registration`;
/// 14: an engine's core is optional, none where it was bound to several;
/// 15: Welcome carries the GPUs the rank's ends use, for its preflight;
/// 16: `Welcome` asks for the host's LLDP neighbours, `Probe` carries its
/// `lldpctl -f json` text or why there is none; 17: Welcome's GPUs carry
/// the NIC `auto` resolves against and the registration asked for, and a
/// rank the GPU preflight refuses says so with `Refused`; 18: a group's
/// RDMA request carries its `[group.rdma]` knobs as one nested record after
/// op, mode, size and memory; 19: a group's plan says whether it validates
/// data, a flow end's report what it checked; 20: a flow role carries its
/// end's GPU from the hostfile's `gpus=`, and Welcome's GPUs say which
/// came from there; 21: `Probe`'s host facts carry the locked-memory limit).
pub const PROTOCOL_VERSION: u32 = 21;
/// The largest first frame of a connection: a Hello, with room to spare.
pub const HELLO_MAX: usize = 4096;

/// A connection's first frame, read as a Hello and as nothing else (so a
/// stranger's first frame can never be a message that grows in memory).
/// Hello is `ToCoordinator`'s first variant: tag 0, then the struct.
pub fn decode_hello(frame: &[u8]) -> Result<Hello, HelloError> {
    match frame.split_first() {
        Some((0, hello)) => postcard::from_bytes(hello).map_err(HelloError::Undecodable),
        Some((tag, _)) => Err(HelloError::NotHello(*tag)),
        None => Err(HelloError::Empty),
    }
}

/// Why a connection's first frame is not a Hello.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum HelloError {
    #[error("not a Hello: {0}")]
    Undecodable(postcard::Error),
    /// The tag of the message it is instead.
    #[error("the first frame must be a Hello, not message {0}")]
    NotHello(u8),
    #[error("an empty first frame")]
    Empty,
}

/// A worker's first frame. The token is checked before anything else.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Hello {
    pub magic: u32,
    pub token: String,
    pub version: u32,
    pub tool_version: String,
    pub job: u64,
    pub rank: usize,
    pub host: String,
    pub pid: u32,
}

/// How a peer reaches one end of a flow.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Endpoint {
    Tcp {
        addr: SocketAddr,
    },
    /// One endpoint per rail (device) of the flow, in rail order.
    Rdma(Vec<RdmaEndpoint>),
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlowEndpoint {
    pub flow: FlowId,
    pub side: Side,
    pub endpoint: Endpoint,
}

/// A rank's part in one flow, as the coordinator assigns it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FlowRole {
    pub flow: Flow,
    pub side: Side,
    /// Shared by every role of the group: with thousands of flows per rank
    /// a copy each is most of the coordinator's memory (same bytes on the wire).
    pub group: Arc<GroupPlan>,
    /// RDMA: this end's devices from its host's `devices=` (one rail each),
    /// when the group names none; empty otherwise.
    pub rails: Vec<String>,
    /// RDMA in GPU memory: this end's GPU from its host's `gpus=`, which
    /// replaces the group's `gpu`; `None` otherwise.
    pub gpu: Option<GpuChoice>,
    /// What a TCP stream of this flow sends first to prove it is one
    /// (`control::proofs`); sent to the flow's two ends only.
    pub proof: FlowProof,
}

/// The common measurement window of a phase.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Window {
    #[serde(with = "strict_duration")]
    pub warmup: Duration,
    #[serde(with = "strict_duration")]
    pub duration: Duration,
    #[serde(with = "strict_duration")]
    pub interval: Duration,
}

impl Window {
    /// The window a scenario's `[run]` asks for.
    pub fn of(run: &RunSpec) -> Window {
        Window { warmup: run.warmup, duration: run.duration, interval: run.interval }
    }

    /// Whether the window keeps the limits of a scenario's `[run]`: a rank
    /// takes a window from rank 0 only if it does (a hostile one of 2³²
    /// samples would have the sampler reserve tens of GiB).
    pub fn check(&self) -> Result<(), BadKey> {
        let run = RunSpec {
            name: "window".into(),
            warmup: self.warmup,
            duration: self.duration,
            interval: self.interval,
            ..RunSpec::default()
        };
        check_run(&run)
    }

    /// What the phase's result is judged against (`result::degraded`).
    pub fn asked(&self) -> AskedWindow {
        AskedWindow { warmup: self.warmup, duration: self.duration }
    }

    /// Sample boundaries in the window: 0 (window opens) … the last (closes).
    pub fn boundaries(&self) -> u32 {
        let n = self.duration.as_nanos().div_ceil(self.interval.as_nanos().max(1));
        u32::try_from(n).unwrap_or(u32::MAX).saturating_add(1)
    }

    /// Offset of boundary `k` from t0 (saturating: total for any window).
    pub fn boundary(&self, k: u32) -> Duration {
        let close = self.warmup.saturating_add(self.duration);
        self.warmup.saturating_add(self.interval.saturating_mul(k)).min(close)
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum ToCoordinator {
    /// The first frame of every connection, and only that (see
    /// [`decode_hello`]): keep it the first variant.
    Hello(Hello),
    /// The rank's own ends of its flows in a phase, for its peers.
    Endpoints {
        phase: usize,
        endpoints: Vec<FlowEndpoint>,
    },
    /// Every flow of the rank is connected; the rank waits at the barrier.
    Ready {
        phase: usize,
    },
    /// One interval of the running phase (from 1): how long it was on the
    /// coordinator's clock, and what each of the rank's flow ends moved in
    /// it (bytes, messages), in the order of its Setup's flows.
    Interval {
        phase: usize,
        interval: u32,
        span_ns: i64,
        ends: Vec<Counts>,
    },
    /// Everything the rank measured in a phase.
    Report(Box<RankReport>),
    /// The rank cannot go on (endpoint, connect or stream error).
    Failed {
        phase: usize,
        error: String,
    },
    Heartbeat,
    /// The host's RDMA devices and ports (or why it has none), probed once
    /// after Hello, for run.json and line rates; and what the host is
    /// (kernel, OS, CPU, rdma-core, drivers and firmware), for the record.
    /// The third part: the host's `lldpctl -f json` text when Welcome asked for it.
    Probe(RdmaInventory, Box<HostFacts>, Option<LldpOutput>),
    /// Some flows of a report too large for one frame; the final `Report`
    /// follows with the rest (`control::report_parts`).
    ReportPart(Box<RankReport>),
    /// The GPU preflight found this rank's GPUs unusable as the scenario
    /// asks, before any end was made: nothing ran (bad input, not a failed
    /// run).
    Refused {
        phase: usize,
        error: String,
    },
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum ToWorker {
    /// Hello accepted; `now_ns` is the coordinator's clock, for the offset.
    /// `heartbeat`: how often the rank is to send one (it grows with the
    /// job's size), from which the rank also derives its lease. `gpus`:
    /// the GPUs the rank's ends use in any phase, checked before it makes
    /// any end (the GPU preflight); empty when all are in host memory.
    Welcome {
        now_ns: i64,
        #[serde(with = "strict_duration")]
        heartbeat: Duration,
        gpus: Vec<GpuAsk>,
        /// Run `lldpctl -f json` in the probe: rank 0 builds the run's
        /// topology from every host's neighbours (`run --topology lldp`).
        lldp: bool,
    },
    /// The rank's flows in a phase: create their endpoints.
    /// `stress`: the burners to run beside them.
    Setup {
        phase: usize,
        flows: Vec<FlowRole>,
        stress: Option<StressSpec>,
    },
    /// The peer ends of the rank's flows: connect.
    Peers {
        phase: usize,
        peers: Vec<FlowEndpoint>,
    },
    /// Run from `t0_ns` (coordinator clock) through the window.
    Start {
        phase: usize,
        t0_ns: i64,
        window: Window,
    },
    /// Stop the phase and report what was measured.
    Abort {
        reason: String,
    },
    /// The run is over: exit.
    Bye,
    Heartbeat,
}

impl ToWorker {
    /// The message's name, for errors.
    pub fn name(&self) -> &'static str {
        match self {
            ToWorker::Welcome { .. } => "Welcome",
            ToWorker::Setup { .. } => "Setup",
            ToWorker::Peers { .. } => "Peers",
            ToWorker::Start { .. } => "Start",
            ToWorker::Abort { .. } => "Abort",
            ToWorker::Bye => "Bye",
            ToWorker::Heartbeat => "a heartbeat",
        }
    }
}

/// A `Duration` on the wire as serde writes one (seconds, then
/// nanoseconds: the same bytes), read strictly: nanoseconds of a second or
/// more are refused, where serde would carry them into the seconds. Every
/// frame then has one reading, and re-encodes to no more than it carried
/// (the fuzzers' round-trip property found 8 bytes that re-encoded to 9).
mod strict_duration {
    use std::time::Duration;

    use serde::de::Error;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    const NANOS_PER_SEC: u32 = 1_000_000_000;

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        (d.as_secs(), d.subsec_nanos()).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let (secs, nanos) = <(u64, u32)>::deserialize(d)?;
        if nanos >= NANOS_PER_SEC {
            return Err(D::Error::custom(format!("a duration's nanoseconds ({nanos}) must be below one second")));
        }
        Ok(Duration::new(secs, nanos))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fuzzer's input (fuzz/corpus/to_worker/nanos-carry): a Welcome
    /// whose heartbeat has 2.1 s of nanoseconds. It is refused, where it
    /// used to decode as 128 s that re-encode a byte longer.
    #[test]
    fn a_duration_with_a_second_of_nanoseconds_is_refused() {
        let frame = [0x00, 0x00, 0x7e, 0x80, 0xca, 0xb5, 0xee, 0x08];
        let e = postcard::from_bytes::<ToWorker>(&frame).unwrap_err();
        assert!(matches!(e, postcard::Error::SerdeDeCustom), "{e:?}");
        // The same bytes as serde's own encoding of a Duration, both ways.
        let welcome =
            ToWorker::Welcome { now_ns: -5, heartbeat: Duration::new(126, 999_999_999), gpus: Vec::new(), lldp: true };
        let bytes = postcard::to_stdvec(&welcome).unwrap();
        let plain =
            postcard::to_stdvec(&(0u8, -5i64, Duration::new(126, 999_999_999), Vec::<u8>::new(), true)).unwrap();
        assert_eq!(bytes, plain);
        assert_eq!(postcard::from_bytes::<ToWorker>(&bytes).unwrap(), welcome);
    }

    #[test]
    fn window_arithmetic_is_total() {
        // Found by fuzzing (fuzz/corpus/to_worker/window-overflow).
        let huge = Window { warmup: Duration::MAX, duration: Duration::MAX, interval: Duration::from_nanos(1) };
        assert_eq!(huge.boundaries(), u32::MAX);
        assert_eq!(huge.boundary(u32::MAX), Duration::MAX);
        assert!(huge.check().is_err());
        let run = Window {
            warmup: Duration::from_secs(1),
            duration: Duration::from_secs(2),
            interval: Duration::from_secs(1),
        };
        assert_eq!(
            (run.boundaries(), run.boundary(2), run.boundary(9)),
            (3, Duration::from_secs(3), Duration::from_secs(3))
        );
        assert_eq!(run.check(), Ok(()));
    }
}
