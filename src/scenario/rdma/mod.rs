//! What one RDMA flow does. A group's `[group.rdma]` table is [`RdmaKnobs`],
//! the knobs of perftest with perftest's defaults and nothing else; the
//! request one flow obeys, [`RdmaParams`], is built from the group
//! (`RdmaSetup::request`): the group's op, mode and size, and its memory
//! and knobs ([`RdmaSetup`]). The transport obeys these; it is the scenario that owns them,
//! so the schema never pulls in the verbs.

mod knobs;
mod setup;
pub mod stored;

use serde::{Deserialize, Serialize};

pub use knobs::{write_table, CompletionMode, ConnectMethod, Connection, RdmaKnobs};
pub use setup::RdmaSetup;

use super::memory::{GpuChoice, MemorySides};
use super::op::{self, Mode, Op};
use super::Transport;

/// A knob, or a combination of knobs, that no RDMA flow can run with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid RDMA parameter {field}: {reason}")]
pub struct InvalidParam {
    pub field: &'static str,
    pub reason: String,
}

/// What a group decides for its flows (`[group] op = …`), never its
/// `[group.rdma]` table.
pub const GROUP_KEYS: [&str; 5] = ["op", "mode", "message_size", "memory", "gpu"];

/// Knobs a `[group.rdma]` table once had, each with what took its place: a
/// scenario file that gives one is told so, a stored run that has one reads.
pub const RETIRED_KEYS: [(&str, &str); 1] = [(
    "poll_strategy",
    "completions are always taken with ibv_poll_cq, up to `poll_batch` per poll (perftest's way); remove the line",
)];

/// Bytes every atomic moves: one 8-byte operand (the verbs' only size).
pub const ATOMIC_SIZE: u64 = 8;

/// Bytes a message of `op` carries when `asked` for: an atomic always its
/// one operand, whatever was asked.
pub fn message_bytes(op: Op, asked: u64) -> u64 {
    if op.is_atomic() {
        ATOMIC_SIZE
    } else {
        asked
    }
}

/// Why a size other than [`ATOMIC_SIZE`] is refused for an atomic op.
pub fn atomic_size_error(asked: impl std::fmt::Display) -> String {
    format!("{asked}: atomics (fetch_add, cmp_swap) move one {ATOMIC_SIZE}-byte operand; give {ATOMIC_SIZE} or leave the size out")
}

/// The value every compare-and-swap of a flow tries to install (compare = 0).
pub const CMP_SWAP_VALUE: u64 = 0xFAB0_0000_0000_0001;

/// Bytes of the Global Routing Header a UD receive buffer holds ahead of
/// each message (the verbs put it there whether or not the packet had one).
pub const UD_GRH: u64 = 40;
/// The largest UD message: one packet at the largest path MTU.
pub const UD_MAX_MESSAGE: u64 = 4096;

/// Largest GRH traffic class (8 bits; RoCE carries `traffic_class >> 2` as the DSCP).
pub const MAX_TRAFFIC_CLASS: u32 = 255;
/// Largest InfiniBand service level (4 bits).
pub const MAX_SERVICE_LEVEL: u32 = 15;

/// What one RDMA flow is asked to do: its group's op, mode, size and
/// memory, and the group's knobs. On the control wire the knobs travel
/// nested (postcard has no flattening); run.json shows one object, as it
/// always has ([`stored`]).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct RdmaParams {
    #[serde(with = "op::perftest_name")]
    pub op: Op,
    pub mode: Mode,
    /// Bytes per message (atomics move [`ATOMIC_SIZE`] whatever it says).
    pub message_size: u64,
    /// Each end's buffer memory (the group's `memory`).
    pub memory: MemorySides,
    /// Which GPU GPU memory is on (the group's `gpu`).
    pub gpu: GpuChoice,
    /// The group's `[group.rdma]` table.
    pub knobs: RdmaKnobs,
}

impl Default for RdmaParams {
    fn default() -> Self {
        RdmaParams {
            op: Op::Write,
            mode: Mode::Bandwidth,
            message_size: Transport::Rdma.default_message_size(Mode::Bandwidth).bytes(),
            memory: MemorySides::default(),
            gpu: GpuChoice::Auto,
            knobs: RdmaKnobs::default(),
        }
    }
}

/// Largest message one WR may carry (the RC limit of most HCAs, and rxe's max_msg_sz).
pub const MAX_MESSAGE_SIZE: u64 = 1 << 30;

impl RdmaParams {
    /// Bytes each message carries on the wire.
    pub fn effective_message_size(&self) -> u64 {
        message_bytes(self.op, self.message_size)
    }

    /// Inline threshold after applying perftest's defaults.
    pub fn effective_inline_size(&self) -> u32 {
        if !self.op.can_inline() {
            return 0;
        }
        match (self.knobs.inline_size, self.mode) {
            (Some(n), _) => n,
            (None, Mode::Bandwidth) => 0,
            (None, Mode::Latency) => 220,
        }
    }

    /// WRs per signaled completion: `cq_moderation`, lowered so one
    /// completion never accounts for more than `signal_bytes`, at most `tx_depth`.
    pub fn effective_cq_moderation(&self) -> u32 {
        let by_bytes = match self.knobs.signal_bytes {
            0 => u64::MAX,
            b => (b / self.effective_message_size().max(1)).max(1),
        };
        (u64::from(self.knobs.cq_moderation).min(by_bytes) as u32).clamp(1, self.knobs.tx_depth.max(1))
    }

    /// Whether messages of this flow go inline.
    pub fn sends_inline(&self) -> bool {
        self.effective_message_size() <= u64::from(self.effective_inline_size())
    }

    /// The flow split into its rails: one set of params per device of
    /// `devices` (at most one per QP), rail k holding QPs k, k + n, k + 2n…
    /// and the threads spread the same way; the flow itself without `devices`.
    pub fn rails(&self) -> Vec<RdmaParams> {
        let n = self.knobs.devices.len().min(self.knobs.qps as usize);
        if n == 0 {
            return vec![self.clone()];
        }
        let share = |total: u32, k: usize| (total as usize + n - 1 - k) / n;
        (0..n)
            .map(|k| RdmaParams {
                knobs: RdmaKnobs {
                    qps: share(self.knobs.qps, k) as u32,
                    threads: share(self.knobs.threads, k).max(1) as u32,
                    device: Some(self.knobs.devices[k].clone()),
                    devices: Vec::new(),
                    ..self.knobs.clone()
                },
                ..self.clone()
            })
            .collect()
    }

    /// The rails of one end on a host whose hostfile `devices=` gave
    /// `host_devices` (`FlowRole::rails`): those devices when the group
    /// names none, else the group's own [`RdmaParams::rails`].
    pub fn rails_on(&self, host_devices: &[String]) -> Vec<RdmaParams> {
        match host_devices.is_empty() {
            true => self.rails(),
            false => {
                RdmaParams { knobs: RdmaKnobs { devices: host_devices.to_vec(), ..self.knobs.clone() }, ..self.clone() }
                    .rails()
            }
        }
    }

    /// Checks the combination; every error names the field.
    pub fn validate(&self) -> Result<(), InvalidParam> {
        let bad = |field: &'static str, reason: String| Err(InvalidParam { field, reason });
        let size = self.effective_message_size();
        if size == 0 || size > MAX_MESSAGE_SIZE {
            return bad("message_size", format!("{size} is outside 1..={MAX_MESSAGE_SIZE}"));
        }
        if self.knobs.qps == 0 || self.knobs.qps > 4096 {
            return bad("qps", format!("{} is outside 1..=4096", self.knobs.qps));
        }
        if self.knobs.tx_depth == 0 || self.knobs.tx_depth > 16384 {
            return bad("tx_depth", format!("{} is outside 1..=16384", self.knobs.tx_depth));
        }
        if self.knobs.rx_depth == 0 || self.knobs.rx_depth > 16384 {
            return bad("rx_depth", format!("{} is outside 1..=16384", self.knobs.rx_depth));
        }
        if self.knobs.post_list == 0 || self.knobs.post_list > self.knobs.tx_depth {
            return bad(
                "post_list",
                format!("{} must be 1..=tx_depth ({})", self.knobs.post_list, self.knobs.tx_depth),
            );
        }
        if self.knobs.cq_moderation == 0 {
            return bad("cq_moderation", "must be at least 1".into());
        }
        if self.knobs.poll_batch == 0 || self.knobs.poll_batch > 1024 {
            return bad("poll_batch", format!("{} is outside 1..=1024", self.knobs.poll_batch));
        }
        if self.knobs.threads == 0 || self.knobs.threads > self.knobs.qps {
            return bad("threads", format!("{} must be 1..=qps ({})", self.knobs.threads, self.knobs.qps));
        }
        if self.knobs.iterations == Some(0) {
            return bad("iterations", "must be at least 1 (or absent for duration mode)".into());
        }
        if self.knobs.stall_timeout_ms == 0 {
            return bad("stall_timeout_ms", "must be at least 1".into());
        }
        if self.knobs.device.is_some() && !self.knobs.devices.is_empty() {
            return bad("devices", "give either `device` or `devices`, not both".into());
        }
        if let Some(twice) = self.knobs.devices.iter().enumerate().find(|(i, d)| self.knobs.devices[..*i].contains(d)) {
            return bad("devices", format!("{:?} is listed twice", twice.1));
        }
        self.validate_path()?;
        self.validate_memory()?;
        if self.knobs.connection == Connection::Ud {
            if self.knobs.connect == ConnectMethod::RdmaCm {
                return bad(
                    "connect",
                    "rdma_cm connects RC queue pairs here; UD exchanges its address through the coordinator: \
                     leave connect = \"verbs\" (pair without -R)"
                        .into(),
                );
            }
            if self.op != Op::Send {
                return bad(
                    "op",
                    format!("connection UD carries send only (like ib_send_bw -c UD); {} needs RC", self.op.name()),
                );
            }
            if size > UD_MAX_MESSAGE {
                return bad(
                    "message_size",
                    format!("{size} B is above UD's largest message, {UD_MAX_MESSAGE} B (one packet at the largest path MTU)"),
                );
            }
        }
        if self.mode == Mode::Latency {
            if self.knobs.qps != 1 || self.knobs.threads != 1 {
                return bad("qps", "latency mode uses exactly one QP and one thread".into());
            }
            if !matches!(self.op, Op::Write | Op::Send | Op::Read) && !self.op.is_atomic() {
                return bad(
                    "op",
                    format!("latency mode supports write, send, read, fetch_add and cmp_swap, not {}", self.op.name()),
                );
            }
        }
        Ok(())
    }

    /// GPU memory: bandwidth flows of write, read and send only, since
    /// latency ping-pong and atomics read the buffer from the CPU.
    fn validate_memory(&self) -> Result<(), InvalidParam> {
        if !self.memory.any_gpu() {
            return Ok(());
        }
        let bad = |reason: String| Err(InvalidParam { field: "memory", reason });
        if self.mode == Mode::Latency {
            return bad("GPU memory carries bandwidth flows only: latency mode polls the buffer from the CPU; \
                        use memory = \"host\" for latency"
                .into());
        }
        if self.op.is_atomic() {
            return bad(format!(
                "GPU memory carries write, read and send: {} results are read from the buffer by the CPU",
                self.op.name()
            ));
        }
        if self.sends_inline() {
            return bad(format!(
                "inline sends are copied from the buffer by the CPU: with GPU memory keep the message ({} B) above \
                 inline_size ({})",
                self.effective_message_size(),
                self.effective_inline_size()
            ));
        }
        Ok(())
    }

    /// The path knobs: traffic class, service level and how they meet `connect`.
    fn validate_path(&self) -> Result<(), InvalidParam> {
        let bad = |field: &'static str, reason: String| Err(InvalidParam { field, reason });
        if self.knobs.traffic_class > MAX_TRAFFIC_CLASS {
            return bad(
                "traffic_class",
                format!(
                    "{} is outside 0..={MAX_TRAFFIC_CLASS} (the GRH traffic class; RoCE sends traffic_class >> 2 as the DSCP, e.g. 104 for DSCP 26)",
                    self.knobs.traffic_class
                ),
            );
        }
        if self.knobs.service_level > MAX_SERVICE_LEVEL {
            return bad(
                "service_level",
                format!(
                    "{} is outside 0..={MAX_SERVICE_LEVEL} (the InfiniBand service level, 4 bits)",
                    self.knobs.service_level
                ),
            );
        }
        if self.knobs.connect == ConnectMethod::RdmaCm
            && (self.knobs.traffic_class != 0 || self.knobs.service_level != 0)
        {
            let field = if self.knobs.traffic_class != 0 { "traffic_class" } else { "service_level" };
            return bad(
                field,
                "rdma_cm (connect = \"rdma_cm\", pair -R) supplies the path and so its class; \
                 set the traffic class or service level with connect = \"verbs\" (pair without -R)"
                    .into(),
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The default flow with these knobs.
    fn with(knobs: RdmaKnobs) -> RdmaParams {
        RdmaParams { knobs, ..Default::default() }
    }

    #[test]
    fn defaults_are_perftest_like_and_valid() {
        let p = RdmaParams::default();
        assert_eq!((p.message_size, p.knobs.tx_depth, p.knobs.rx_depth, p.knobs.cq_moderation), (65536, 128, 512, 100));
        p.validate().unwrap();
        assert_eq!(p.effective_inline_size(), 0);
        let lat = RdmaParams { mode: Mode::Latency, message_size: 2, ..p };
        assert_eq!(lat.effective_inline_size(), 220);
        assert!(lat.sends_inline());
    }

    #[test]
    fn unknown_fields_are_rejected_and_missing_ones_defaulted() {
        let k: RdmaKnobs = serde_json::from_str(r#"{"connection":"UD","qps":4}"#).unwrap();
        assert_eq!((k.connection, k.qps, k.tx_depth), (Connection::Ud, 4, 128));
        let e = serde_json::from_str::<RdmaKnobs>(r#"{"qpz":4}"#).unwrap_err();
        assert!(e.to_string().contains("unknown field"), "{e}");
        // What the group decides is no knob.
        for key in GROUP_KEYS {
            let e = serde_json::from_str::<RdmaKnobs>(&format!(r#"{{"{key}":1}}"#)).unwrap_err();
            assert!(e.to_string().contains(&format!("unknown field `{key}`")), "{e}");
        }
    }

    #[test]
    fn validation_names_the_field() {
        let p = with(RdmaKnobs { post_list: 500, ..Default::default() });
        let e = p.validate().unwrap_err().to_string();
        assert!(e.contains("post_list"), "{e}");
        let p = RdmaParams { mode: Mode::Latency, ..with(RdmaKnobs { qps: 2, ..Default::default() }) };
        assert!(p.validate().unwrap_err().to_string().contains("qps"));
        let p = RdmaParams { op: Op::FetchAdd, message_size: 0, ..Default::default() };
        p.validate().unwrap(); // atomics are always 8 bytes
    }

    #[test]
    fn ud_is_send_only_and_one_packet() {
        let ud = |op, message_size| RdmaParams {
            op,
            message_size,
            ..with(RdmaKnobs { connection: Connection::Ud, ..Default::default() })
        };
        ud(Op::Send, 4096).validate().unwrap();
        RdmaParams { mode: Mode::Latency, ..ud(Op::Send, 2) }.validate().unwrap();
        let e = ud(Op::Send, 4097).validate().unwrap_err().to_string();
        assert_eq!(
            e,
            "invalid RDMA parameter message_size: 4097 B is above UD's largest message, 4096 B (one packet at the largest path MTU)"
        );
        for (op, name) in [(Op::Write, "write"), (Op::Read, "read"), (Op::FetchAdd, "fetch_add")] {
            let e = ud(op, 64).validate().unwrap_err().to_string();
            assert_eq!(
                e,
                format!("invalid RDMA parameter op: connection UD carries send only (like ib_send_bw -c UD); {name} needs RC")
            );
        }
        let mut cm = ud(Op::Send, 64);
        cm.knobs.connect = ConnectMethod::RdmaCm;
        let e = cm.validate().unwrap_err().to_string();
        assert_eq!(
            e,
            "invalid RDMA parameter connect: rdma_cm connects RC queue pairs here; UD exchanges its address through \
             the coordinator: leave connect = \"verbs\" (pair without -R)"
        );
        let k: RdmaKnobs = serde_json::from_str(r#"{"connection":"UD"}"#).unwrap();
        assert_eq!(k.connection, Connection::Ud);
        let e = serde_json::from_str::<RdmaKnobs>(r#"{"connection":"XRC"}"#).unwrap_err().to_string();
        assert!(e.contains("unknown variant `XRC`, expected one of `RC`, `rc`, `UD`, `ud`"), "{e}");
    }

    #[test]
    fn rails_spread_qps_and_threads_round_robin() {
        let two = |qps, threads| {
            with(RdmaKnobs { qps, threads, devices: vec!["a".into(), "b".into()], ..Default::default() })
        };
        let rails = two(5, 2).rails();
        let got: Vec<(u32, u32, Option<&str>)> =
            rails.iter().map(|r| (r.knobs.qps, r.knobs.threads, r.knobs.device.as_deref())).collect();
        assert_eq!(got, [(3, 1, Some("a")), (2, 1, Some("b"))], "QPs 0,2,4 on a; 1,3 on b");
        // One QP: one rail, on the first device.
        let rails = two(1, 1).rails();
        assert_eq!((rails.len(), rails[0].knobs.device.as_deref()), (1, Some("a")));
        assert!(rails.iter().all(|r| r.knobs.devices.is_empty() && r.validate().is_ok()));
        // No list: the flow as it is.
        assert_eq!(RdmaParams::default().rails(), [RdmaParams::default()]);
        let mut both = two(2, 1);
        both.knobs.device = Some("a".into());
        let e = both.validate().unwrap_err().to_string();
        assert!(e.contains("devices"), "{e}");
        let e = with(RdmaKnobs { devices: vec!["a".into(), "a".into()], ..Default::default() }).validate().unwrap_err();
        assert!(e.to_string().contains("\"a\" is listed twice"), "{e}");
    }

    #[test]
    fn path_knobs_are_bounded_and_named() {
        let p = with(RdmaKnobs { traffic_class: 256, ..Default::default() });
        assert_eq!(
            p.validate().unwrap_err().to_string(),
            "invalid RDMA parameter traffic_class: 256 is outside 0..=255 (the GRH traffic class; RoCE sends traffic_class >> 2 as the DSCP, e.g. 104 for DSCP 26)"
        );
        let p = with(RdmaKnobs { service_level: 16, ..Default::default() });
        assert_eq!(
            p.validate().unwrap_err().to_string(),
            "invalid RDMA parameter service_level: 16 is outside 0..=15 (the InfiniBand service level, 4 bits)"
        );
        with(RdmaKnobs { traffic_class: 255, service_level: 15, ..Default::default() }).validate().unwrap();
        let cm = with(RdmaKnobs { connect: ConnectMethod::RdmaCm, traffic_class: 104, ..Default::default() });
        let e = cm.validate().unwrap_err();
        assert_eq!(e.field, "traffic_class");
        assert!(e.reason.contains("connect = \"verbs\""), "{e}");
        with(RdmaKnobs { connect: ConnectMethod::RdmaCm, ..Default::default() }).validate().unwrap();
        let k: RdmaKnobs = serde_json::from_str(r#"{"connect":"rdma_cm"}"#).unwrap();
        assert_eq!(k.connect, ConnectMethod::RdmaCm);
        let e = serde_json::from_str::<RdmaKnobs>(r#"{"connect":"cm"}"#).unwrap_err().to_string();
        assert!(e.contains("unknown variant `cm`, expected `verbs` or `rdma_cm`"), "{e}");
    }

    #[test]
    fn moderation_is_capped_by_bytes_and_depth() {
        let p = RdmaParams::default(); // 64 KiB: 1 MiB / 64 KiB = 16
        assert_eq!(p.effective_cq_moderation(), 16);
        let p = RdmaParams { message_size: 64, ..Default::default() };
        assert_eq!(p.effective_cq_moderation(), 100);
        let p = RdmaParams { message_size: 8 << 20, ..Default::default() };
        assert_eq!(p.effective_cq_moderation(), 1);
        let p = with(RdmaKnobs { signal_bytes: 0, tx_depth: 50, ..Default::default() });
        assert_eq!(p.effective_cq_moderation(), 50);
    }
}
