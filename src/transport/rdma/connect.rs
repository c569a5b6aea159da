//! Creating a flow's verbs resources (PD, MR, CQs, RC or UD QPs in INIT)
//! and connecting them to the peer's endpoint (INIT → RTR → RTS; UD sends
//! then name the peer through an address handle).

use std::net::IpAddr;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use sideway::ibverbs::device_context::Mtu;
use sideway::ibverbs::queue_pair::{QueuePairAttribute, QueuePairState, QueuePairType, SendOperationFlags};
use sideway::ibverbs::AccessFlags;

use super::device::{self, OpenDevice};
use super::endpoint::RdmaEndpoint;
use super::error::{panic_message, RdmaError, Refused};
use super::ffi::{self, Arena, Cq, Qp};
use super::memlock;
use super::shared_cq::{ShardCq, ShardsOn, Sharing};
use super::ud;
use crate::histogram::Span;
use crate::plan::{CompletionMode, Connection, Mode, Op, RdmaParams, UD_GRH};
use crate::transport::validation::FlowNumber;
use crate::transport::{FlowCounters, Side};

/// perftest's RC timers: local ACK timeout 4.096 µs · 2^14 ≈ 67 ms, 7 retries,
/// infinite RNR retries with a 0.64 ms RNR timer.
pub(super) const QP_TIMEOUT: u8 = 14;
pub(super) const QP_RETRY_CNT: u8 = 7;
pub(super) const QP_RNR_RETRY: u8 = 7;
pub(super) const QP_MIN_RNR_TIMER: u8 = 12;

/// wr_id layout: bit 63 = receive, bits 32..48 = QP index in the flow,
/// bits 0..32 = how many send WRs this (signaled) completion accounts for.
pub(crate) const WR_RECV: u64 = 1 << 63;
pub(crate) fn wr_id(qp: usize, covered: u32) -> u64 {
    ((qp as u64 & 0xffff) << 32) | u64::from(covered)
}
pub(crate) fn wr_qp(wr_id: u64) -> usize {
    ((wr_id >> 32) & 0xffff) as usize
}
pub(crate) fn wr_covered(wr_id: u64) -> u32 {
    wr_id as u32
}

/// One QP of a flow and where it writes / reads on the peer.
pub(crate) struct QpSlot {
    /// Index of this QP in the flow (0..qps), as used in wr_id and errors.
    pub index: usize,
    pub qp: Qp,
    /// Offset of this QP's slot in the local arena.
    pub local_off: usize,
    /// Peer's slot for this QP (set by connect).
    pub remote_addr: u64,
}

/// The QPs one task drives, and the CQ it polls (its own or shared).
pub(crate) struct Shard {
    // Drop order: QPs before their CQ.
    pub qps: Vec<QpSlot>,
    pub cq: ShardCq,
}

/// What one step of a shard's work (`task`) works on: the flow's resources, the
/// shard (its QPs and CQ) and the lane's counters.
pub(super) struct Step<'a> {
    pub res: &'a FlowResources,
    pub shard: &'a mut Shard,
    pub counters: &'a FlowCounters,
}

/// Everything a flow owns, shared by the prepared and connected states.
pub(crate) struct FlowResources {
    pub params: RdmaParams,
    pub side: Side,
    pub label: String,
    pub shards: Vec<Shard>,
    pub arena: Arc<Arena>,
    pub slot_len: usize,
    pub psns: Vec<u32>,
    pub peer_rkey: u32,
    /// UD: the Q_Key this flow's QPs accept (0 for RC).
    pub qkey: u32,
    /// Latency mode: the round trips recorded are those inside it (all without).
    pub latency_window: Option<Span>,
    /// Offered load: messages per second the whole flow posts (`None`:
    /// unpaced; in latency mode, ping-pong).
    pub pace: Option<f64>,
    /// Open-loop latency: Poisson gaps drawn from this seed (`None`: even).
    pub poisson_seed: Option<u64>,
    /// `connect = "rdma_cm"`: the flow's CM ids (set by `with_rdma_cm`).
    pub cm: Option<super::cm::Cm>,
    /// GPU memory: what was registered and how (`None`: host memory).
    pub gpu: Option<super::gpu::GpuMemoryUse>,
    /// Data validation: the flow whose pattern its slots carry (`validate`).
    pub validate: Option<FlowNumber>,
    // Last: the device context outlives every object created on it.
    pub dev: OpenDevice,
}

/// A flow whose QPs exist (in INIT, receives posted) but are not connected.
pub struct PreparedFlow {
    pub(crate) res: FlowResources,
}

/// A flow whose QPs are in RTS, ready to run.
pub struct ConnectedFlow {
    pub(crate) res: FlowResources,
}

impl ConnectedFlow {
    /// GPU memory: what this end registered and how (`None`: host memory).
    pub fn gpu_memory(&self) -> Option<&super::gpu::GpuMemoryUse> {
        self.res.gpu.as_ref()
    }
}

pub(super) fn guard<T>(
    flow: &str,
    what: &'static str,
    f: impl FnOnce() -> Result<T, RdmaError>,
) -> Result<T, RdmaError> {
    catch_unwind(AssertUnwindSafe(f))
        .unwrap_or_else(|p| Err(RdmaError::Panicked { flow: flow.to_string(), what, message: panic_message(&*p) }))
}

fn align64(n: u64) -> u64 {
    n.div_ceil(64) * 64
}

/// Bytes a receive takes: the message, behind the GRH on UD.
fn receive_len(p: &RdmaParams) -> u64 {
    p.effective_message_size() + if p.knobs.connection == Connection::Ud { UD_GRH } else { 0 }
}

/// Per-QP slot: bandwidth uses one message-sized region; latency two halves
/// (receive target at 0, send source at half).
pub(crate) fn slot_len(p: &RdmaParams) -> usize {
    let msg = align64(receive_len(p).max(8));
    (match p.mode {
        Mode::Bandwidth => msg,
        Mode::Latency => 2 * msg,
    }) as usize
}

/// What one flow end registers for its buffers: a slot per QP. Its queues'
/// rings are pinned on top, so this is the least its locked-memory limit
/// must allow.
pub fn registered_len(p: &RdmaParams) -> u64 {
    slot_len(p) as u64 * u64::from(p.knobs.qps)
}

fn random_psns(n: usize) -> Vec<u32> {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    let mut x = (nanos as u64) ^ (u64::from(std::process::id()) << 32) ^ 0x9e37_79b9_7f4a_7c15;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x & 0xff_ffff) as u32
        })
        .collect()
}

pub(super) fn mtu_from(v: u32) -> Mtu {
    match v {
        1 => Mtu::Mtu256,
        2 => Mtu::Mtu512,
        3 => Mtu::Mtu1024,
        4 => Mtu::Mtu2048,
        _ => Mtu::Mtu4096,
    }
}

/// Whether this side keeps receives posted.
fn needs_receives(p: &RdmaParams, side: Side) -> bool {
    match p.mode {
        Mode::Bandwidth => side == Side::Receiver && p.op.needs_receives(),
        Mode::Latency => p.op == Op::Send,
    }
}

impl PreparedFlow {
    /// Names the flow in every error (e.g. "flow 3->0").
    pub fn with_label(mut self, label: impl Into<String>) -> Self {
        self.res.label = label.into();
        self
    }

    pub fn endpoint(&self) -> RdmaEndpoint {
        let r = &self.res;
        let mut qpns = vec![0; r.params.knobs.qps as usize];
        for s in &r.shards {
            for q in &s.qps {
                qpns[q.index] = q.qp.qpn();
            }
        }
        RdmaEndpoint {
            lid: r.dev.lid,
            gid: r.dev.gid,
            gid_index: r.dev.gid_index,
            qpns,
            psns: r.psns.clone(),
            mtu: r.dev.active_mtu,
            rkey: r.arena.rkey(),
            qkey: r.qkey,
            addr: r.arena.addr(),
            len: (r.slot_len * r.params.knobs.qps as usize) as u64,
            cm_addr: r.cm.as_ref().and_then(super::cm::Cm::listen_addr),
        }
    }

    /// GPU memory: what this end registered and how (`None`: host memory).
    pub fn gpu_memory(&self) -> Option<&super::gpu::GpuMemoryUse> {
        self.res.gpu.as_ref()
    }

    /// Why its GPU was chosen, when the caller chose it (`gpu = "auto"`
    /// resolved from the host's NIC–GPU affinity).
    pub fn with_gpu_reason(mut self, why: Option<String>) -> Self {
        if let (Some(gpu), Some(why)) = (self.res.gpu.as_mut(), why) {
            gpu.chosen = why;
        }
        self
    }

    /// NUMA node of the flow's device (for pinning its thread), when known.
    pub fn numa_node(&self) -> Option<i32> {
        super::probe::numa_node(&self.res.dev.name)
    }

    /// The name of the device this flow uses.
    pub fn device(&self) -> &str {
        &self.res.dev.name
    }

    /// The device's port this flow uses.
    pub fn port(&self) -> u8 {
        self.res.dev.port
    }

    /// `connect = "rdma_cm"`: the receiver listens on `local` (its endpoint
    /// then carries the address), the sender will connect from it.
    pub fn with_rdma_cm(mut self, local: IpAddr) -> Result<Self, RdmaError> {
        let r = &self.res;
        self.res.cm = Some(match r.side {
            Side::Receiver => super::cm::listen(&r.label, local, r.params.knobs.qps as usize)?,
            Side::Sender => super::cm::dialer(&r.label, local)?,
        });
        Ok(self)
    }
}

/// Creates the flow's resources; QPs end in INIT with receives posted
/// where needed. Each shard polls a CQ of its own.
pub fn prepare(params: &RdmaParams, side: Side) -> Result<PreparedFlow, RdmaError> {
    params.validate()?;
    guard("flow", "prepare", || prepare_inner(params, side, None))
}

/// As [`prepare`], each busy-polling shard on the shared CQ of the group
/// `sharing` gives it (event mode, or no group given: a CQ of its own).
pub fn prepare_shared(params: &RdmaParams, side: Side, sharing: Sharing) -> Result<PreparedFlow, RdmaError> {
    params.validate()?;
    guard("flow", "prepare", || prepare_inner(params, side, Some(sharing)))
}

/// A verbs call on `dev` that failed while a flow was made (it has no
/// label yet: "flow", as in every error of `prepare`).
fn setup_failed(dev: &OpenDevice, what: String, e: &(dyn std::error::Error + 'static)) -> RdmaError {
    RdmaError::Setup {
        flow: "flow".into(),
        device: dev.name.clone(),
        what,
        source: std::io::Error::other(ffi::with_causes(e) + &memlock::hint(e)),
    }
}

/// A CQ of `entries` on `dev` for shard `shard` (`event`: with a completion
/// channel, on one of the device's completion vectors, shards spread over
/// them).
fn make_cq(dev: &OpenDevice, entries: u32, event: bool, shard: u32) -> Result<Cq, RdmaError> {
    let setup = |what: String, e: &(dyn std::error::Error + 'static)| setup_failed(dev, what, e);
    let channel = match event {
        true => Some(dev.ctx.create_comp_channel().map_err(|e| setup("ibv_create_comp_channel".into(), &e))?),
        false => None,
    };
    let mut b = dev.ctx.create_cq_builder();
    b.setup_cqe(entries);
    let on = match &channel {
        Some(ch) => {
            let vector = shard % ffi::completion_vectors(&dev.ctx);
            b.setup_comp_channel(ch, vector);
            format!(", comp_vector={vector}")
        }
        None => String::new(),
    };
    let cq = b.build().map_err(|e| setup(format!("ibv_create_cq(cqe={entries}{on})"), &e))?;
    Cq::new(cq, channel).map_err(|e| setup("completion channel O_NONBLOCK".into(), &e))
}

fn prepare_inner(params: &RdmaParams, side: Side, mut sharing: Option<Sharing>) -> Result<PreparedFlow, RdmaError> {
    let flow = "flow";
    let dev = device::open(params.knobs.device.as_deref(), params.knobs.port, params.knobs.gid_index)?;
    let setup = |what: String, e: &(dyn std::error::Error + 'static)| setup_failed(&dev, what, e);
    let ud = params.knobs.connection == Connection::Ud;
    let qkey = if ud { ud::qkey(random_psns(1)[0]) } else { 0 };
    if ud {
        ud::fits_one_packet(params.effective_message_size(), dev.active_mtu, &dev.name, dev.port, flow)?;
    }
    let pd = dev.ctx.alloc_pd().map_err(|e| setup("ibv_alloc_pd".into(), &e))?;
    let slot = slot_len(params);
    let qps = params.knobs.qps as usize;
    let access =
        AccessFlags::LocalWrite | AccessFlags::RemoteWrite | AccessFlags::RemoteRead | AccessFlags::RemoteAtomic;
    let (arena, gpu) = match super::gpu::memory_of(params, side).is_gpu() {
        true => super::gpu::arena(&pd, params, side, slot * qps, access, &dev.name).map(|(a, g)| (a, Some(g)))?,
        false => (Arena::new(&pd, slot * qps, access).map_err(|e| setup("registering its buffers".into(), &e))?, None),
    };
    let arena = Arc::new(arena);

    let recv = needs_receives(params, side);
    let inline = params.effective_inline_size();
    let send_inline = params.sends_inline();
    let mut ops = SendOperationFlags::Write
        | SendOperationFlags::WriteWithImmediate
        | SendOperationFlags::Send
        | SendOperationFlags::SendWithImmediate
        | SendOperationFlags::Read;
    let dev_attr = dev.ctx.query_device().map_err(|e| setup("ibv_query_device_ex".into(), &e))?;
    // Atomics on an extended QP built without these flags crash: always set
    // them when the device can do atomics at all (or the flow asks for them).
    if ud {
        // A UD QP sends datagrams only.
        ops = SendOperationFlags::Send | SendOperationFlags::SendWithImmediate;
    } else if dev_attr.attr.orig_attr.atomic_cap != 0 || params.op.is_atomic() {
        ops |= SendOperationFlags::AtomicCompareAndSwap | SendOperationFlags::AtomicFetchAndAdd;
    }
    let max_cqe = dev_attr.attr.orig_attr.max_cqe.max(1) as u32;

    let threads = params.knobs.threads as usize;
    let mut shards = Vec::with_capacity(threads);
    let groups = match (&mut sharing, params.knobs.completion) {
        (Some(sharing), CompletionMode::Busy) => {
            (sharing.groups)(ShardsOn { device: &dev.name, node: super::probe::numa_node(&dev.name), shards: threads })
        }
        _ => Vec::new(),
    };
    for t in 0..threads {
        let my_qps: Vec<usize> = (0..qps).filter(|i| i % threads == t).collect();
        let per_qp = params.knobs.tx_depth + if recv { params.knobs.rx_depth } else { 0 };
        let need = per_qp * my_qps.len() as u32 + 16;
        let make = |entries, event| make_cq(&dev, entries, event, t as u32);
        let cq = match (groups.get(t), sharing.as_mut()) {
            (Some(&group), Some(sharing)) => {
                let (at, wants) = ((Arc::as_ptr(&dev.ctx) as usize, group), (need, params.knobs.poll_batch as usize));
                ShardCq::Shared(sharing.pool.share(at, wants, max_cqe, |entries| make(entries, false))?)
            }
            _ => ShardCq::Own(make(need.min(max_cqe), params.knobs.completion == CompletionMode::Event)?),
        };

        let mut slots = Vec::with_capacity(my_qps.len());
        for &i in &my_qps {
            let mut qb = pd.create_qp_builder();
            if ud {
                qb.setup_qp_type(QueuePairType::UnreliableDatagram);
            }
            qb.setup_max_send_wr(params.knobs.tx_depth)
                .setup_max_recv_wr(if recv { params.knobs.rx_depth } else { 1 })
                .setup_max_send_sge(1)
                .setup_max_recv_sge(1)
                .setup_max_inline_data(inline)
                .setup_send_cq(cq.handle())
                .setup_recv_cq(cq.handle())
                .setup_send_ops_flags(ops);
            let raw = qb.build_ex().map_err(|e| {
                setup(
                    format!(
                        "ibv_create_qp_ex for QP {i} (max_send_wr={}, max_inline_data={inline})",
                        params.knobs.tx_depth
                    ),
                    &e,
                )
            })?;
            let mut qp = Qp::new(
                raw,
                Arc::clone(&arena),
                if send_inline { params.effective_message_size() as usize } else { 0 },
            );
            if let ShardCq::Shared(share) = &cq {
                share.add_qp(qp.qpn());
            }
            let init = if ud { ud::init(&mut qp, dev.port, qkey) } else { init_rc(&mut qp, dev.port, access) };
            init.map_err(|refused| refused.at(flow.into(), i, qp.qpn()))?;
            let local_off = i * slot;
            if recv {
                // Receives scatter into the slot's receive half (all of it in
                // bandwidth mode), UD's GRH first.
                let len = receive_len(params) as u32;
                qp.setup_recv_ring(params.knobs.rx_depth as usize, WR_RECV | wr_id(i, 0), local_off, len);
                qp.post_recvs(params.knobs.rx_depth as usize).map_err(|e| RdmaError::Post {
                    flow: flow.into(),
                    qp: i,
                    what: "initial receives",
                    reason: format!("{} receives: {e}", params.knobs.rx_depth),
                })?;
            }
            slots.push(QpSlot { index: i, qp, local_off, remote_addr: 0 });
        }
        shards.push(Shard { qps: slots, cq });
    }
    Ok(PreparedFlow {
        res: FlowResources {
            params: params.clone(),
            side,
            label: flow.to_string(),
            shards,
            arena,
            slot_len: slot,
            psns: random_psns(qps),
            peer_rkey: 0,
            qkey,
            latency_window: None,
            pace: None,
            poisson_seed: None,
            cm: None,
            gpu,
            validate: None,
            dev,
        },
    })
}

/// RC's RESET → INIT: the port and what the peer may do to our memory.
fn init_rc(qp: &mut Qp, port: u8, access: AccessFlags) -> Result<(), Refused> {
    let mut attr = QueuePairAttribute::new();
    attr.setup_state(QueuePairState::Init).setup_pkey_index(0).setup_port(port).setup_access_flags(access);
    qp.modify(&attr).map_err(|e| Refused {
        transition: "RESET->INIT",
        attrs: format!("port={port}, pkey_index=0, access=local_write|remote_write|remote_read|remote_atomic"),
        reason: e.into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::RdmaKnobs;

    #[test]
    fn wr_id_round_trips() {
        let id = wr_id(4095, 100);
        assert_eq!((wr_qp(id), wr_covered(id)), (4095, 100));
        assert_eq!(wr_qp(WR_RECV | wr_id(7, 0)), 7);
        assert!(WR_RECV & wr_id(65535, u32::MAX) == 0);
    }

    #[test]
    fn slots_are_aligned_and_sized_per_mode() {
        let bw = RdmaParams { message_size: 100, ..Default::default() };
        assert_eq!(slot_len(&bw), 128);
        let lat = RdmaParams { message_size: 2, mode: Mode::Latency, ..Default::default() };
        assert_eq!(slot_len(&lat), 128);
        let at = RdmaParams { op: Op::CmpSwap, ..Default::default() };
        assert_eq!(slot_len(&at), 64);
    }

    #[test]
    fn ud_slots_hold_the_grh() {
        let knobs = RdmaKnobs { connection: Connection::Ud, ..Default::default() };
        let ud = RdmaParams { op: Op::Send, message_size: 4096, knobs, ..Default::default() };
        assert_eq!(slot_len(&ud), 4160, "room for the 40-byte GRH ahead of the message");
    }

    #[test]
    fn psns_are_24_bit() {
        assert!(random_psns(64).iter().all(|&p| p <= 0xff_ffff));
    }
}
