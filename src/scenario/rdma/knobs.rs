//! A group's `[group.rdma]` table: perftest's knobs, with perftest's
//! defaults, and nothing the group decides.

use serde::ser::Error as _;
use serde::{Deserialize, Serialize, Serializer};

use crate::scenario::memory::GpuRegistration;

/// The QP transport type (perftest `-c`).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Connection {
    /// Reliable connected: every op, any size up to [`MAX_MESSAGE_SIZE`].
    #[default]
    #[serde(rename = "RC", alias = "rc")]
    #[value(name = "RC", alias = "rc")]
    Rc,
    /// Unreliable datagram: send only, one packet per message (at most the
    /// path MTU), through an address handle to the peer; losses are counted.
    #[serde(rename = "UD", alias = "ud")]
    #[value(name = "UD", alias = "ud")]
    Ud,
}

impl Connection {
    pub fn name(self) -> &'static str {
        match self {
            Connection::Rc => "RC",
            Connection::Ud => "UD",
        }
    }
}

/// How a flow waits for completions.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum CompletionMode {
    /// Spin on the CQ (perftest's default; pegs the engine's core).
    #[default]
    Busy,
    /// Sleep on the completion channel when the CQ is empty (perftest `-e`).
    Event,
}

/// How a flow's queue pairs are connected.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum ConnectMethod {
    /// QP numbers, PSNs and GIDs exchanged through the coordinator, QPs moved
    /// to RTR/RTS with ibv_modify_qp (perftest's default).
    #[default]
    Verbs,
    /// The QPs are connected through librdmacm to the peer's data address
    /// (perftest `-R`): the passive end listens, the active end resolves the
    /// address and route and connects, rdma_cm supplies the path.
    RdmaCm,
}

/// `[group.rdma]`: the knobs of a group's RDMA flows, perftest's, with
/// perftest's defaults (ib_write_bw / ib_*_lat). What the group itself
/// decides (op, mode, message size, memory, GPU) is no knob: this table
/// refuses it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct RdmaKnobs {
    /// RC (default) or UD (send only, messages up to the path MTU).
    pub connection: Connection,
    /// Queue pairs in this flow (perftest `-q`).
    pub qps: u32,
    /// Outstanding send WRs per QP (perftest `-t`, 128).
    pub tx_depth: u32,
    /// Receives kept posted per QP for send / write-with-imm (perftest `-r`, 512).
    pub rx_depth: u32,
    /// WRs per doorbell (perftest `-l`, 1).
    pub post_list: u32,
    /// Signal every Nth WR (perftest `--cq-mod`, 100).
    pub cq_moderation: u32,
    /// Also signal once this many bytes went out unsignaled (1 MiB; 0 = off),
    /// so large messages are counted (and intervals sampled) in steps of at
    /// most this size rather than `cq_moderation` messages.
    pub signal_bytes: u64,
    /// Largest message sent inline; None = perftest's choice (0 for bandwidth, 220 for latency).
    pub inline_size: Option<u32>,
    /// Completions taken per poll (16, perftest's CTX_POLL_BATCH), in
    /// `ibv_poll_cq` calls of at most 16.
    pub poll_batch: u32,
    pub completion: CompletionMode,
    /// Some(n): n messages per QP (bandwidth) or n samples (latency), then return.
    /// None: run until the stop flag is set.
    pub iterations: Option<u64>,
    /// Device name (e.g. "mlx5_0"); None = the first device with an ACTIVE port.
    pub device: Option<String>,
    /// Multi-rail: the flow's QPs spread round robin over these devices
    /// (QP i on `devices[i % n]`), one rail per device on both ends.
    pub devices: Vec<String>,
    /// Port number; None = the first ACTIVE port of the device.
    pub port: Option<u8>,
    /// GID index; None = perftest's choice (RoCE v2 + IPv4 first).
    pub gid_index: Option<u32>,
    /// Shards the QPs of this flow are split over, each a lane of its own on
    /// the rank's engines: where the rank has as many cores, each shard runs
    /// on an engine (a thread) of its own; busy-polling shards poll the
    /// shared CQ of their engine (event mode: a CQ each).
    pub threads: u32,
    /// A flow that sees no completion for this long while work is outstanding fails.
    pub stall_timeout_ms: u64,
    /// How the QPs are connected (perftest `-R` is `rdma_cm`).
    pub connect: ConnectMethod,
    /// GRH traffic class, 0..=255 (perftest `--tclass`); on RoCE v2 the
    /// packets' DSCP is `traffic_class >> 2` and their ECN bits `traffic_class & 3`.
    pub traffic_class: u32,
    /// InfiniBand service level, 0..=15 (perftest `-S/--sl`).
    pub service_level: u32,
    /// How GPU memory is registered with the NIC: dma-buf or peer memory.
    pub gpu_registration: GpuRegistration,
}

impl Default for RdmaKnobs {
    fn default() -> Self {
        RdmaKnobs {
            connection: Connection::Rc,
            qps: 1,
            tx_depth: 128,
            rx_depth: 512,
            post_list: 1,
            cq_moderation: 100,
            signal_bytes: 1 << 20,
            inline_size: None,
            poll_batch: 16,
            completion: CompletionMode::Busy,
            iterations: None,
            device: None,
            devices: Vec::new(),
            port: None,
            gid_index: None,
            threads: 1,
            stall_timeout_ms: 30_000,
            connect: ConnectMethod::Verbs,
            traffic_class: 0,
            service_level: 0,
            gpu_registration: GpuRegistration::Auto,
        }
    }
}

/// Writes a group's `[group.rdma]` table as it may be read back: the knobs
/// it sets, in name order, without the ones left unset.
pub fn write_table<S: Serializer>(table: &Option<RdmaKnobs>, s: S) -> Result<S::Ok, S::Error> {
    let Some(knobs) = table else { return s.serialize_none() };
    let mut knobs = match serde_json::to_value(knobs).map_err(S::Error::custom)? {
        serde_json::Value::Object(knobs) => knobs,
        other => return Err(S::Error::custom(format!("an rdma table written as {other}"))),
    };
    knobs.retain(|_, value| !value.is_null());
    s.serialize_some(&knobs)
}
