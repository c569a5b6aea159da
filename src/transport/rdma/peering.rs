//! Connecting a prepared flow's QPs to the peer's endpoint: RC through
//! INIT → RTR → RTS with perftest's timers (directly or with rdma_cm's
//! attributes), UD by naming the peer through an address handle.

use sideway::ibverbs::queue_pair::{QueuePairAttribute, QueuePairState};

use super::cm::{Cm, Handshake, EVENT_POLL};
use super::connect::{
    guard, mtu_from, ConnectedFlow, FlowResources, PreparedFlow, QpSlot, QP_MIN_RNR_TIMER, QP_RETRY_CNT, QP_RNR_RETRY,
    QP_TIMEOUT,
};
use super::endpoint::RdmaEndpoint;
use super::error::RdmaError;
use super::ffi::QpModifyError;
use super::path::{address_path, LocalPort};
use super::ud;
use crate::plan::Connection;

impl PreparedFlow {
    /// Moves every QP to RTR then RTS against `peer` (through rdma_cm when
    /// the flow was given [`Self::with_rdma_cm`]), waiting for rdma_cm's
    /// handshake.
    pub fn connect(self, peer: &RdmaEndpoint) -> Result<ConnectedFlow, RdmaError> {
        match self.begin_connect(peer)? {
            Begun::Connected(flow) => Ok(*flow),
            Begun::Handshaking(mut flow) => loop {
                if flow.advance()? {
                    return Ok(flow.finish());
                }
                std::thread::sleep(EVENT_POLL);
            },
        }
    }

    /// Connects a flow through verbs at once; a flow given
    /// [`Self::with_rdma_cm`] begins its handshake, which the caller drives
    /// with [`CmConnecting::advance`] (beside other flows' on one thread).
    pub fn begin_connect(mut self, peer: &RdmaEndpoint) -> Result<Begun, RdmaError> {
        let label = self.res.label.clone();
        guard(&label, "connect", move || match self.res.cm.take() {
            None => connect(self.res, peer).map(|flow| Begun::Connected(Box::new(flow))),
            Some(cm) => {
                check_peer(&self.res, peer)?;
                let qps = self.res.shards.iter().flat_map(|s| &s.qps).map(|q| (q.index, q.qp.qpn())).collect();
                let hs = cm.handshake(&self.res.label, qps, peer)?;
                Ok(Begun::Handshaking(Box::new(CmConnecting { res: self.res, cm, hs })))
            }
        })
    }
}

/// What [`PreparedFlow::begin_connect`] gives.
pub enum Begun {
    Connected(Box<ConnectedFlow>),
    Handshaking(Box<CmConnecting>),
}

/// A flow whose QPs rdma_cm is connecting: [`CmConnecting::advance`] it
/// until it says done, then [`CmConnecting::finish`].
pub struct CmConnecting {
    res: FlowResources,
    cm: Cm,
    hs: Handshake,
}

/// The peer's endpoint has this flow's QPs and room for its messages.
fn check_peer(res: &FlowResources, peer: &RdmaEndpoint) -> Result<(), RdmaError> {
    let qps = res.params.knobs.qps as usize;
    let mismatch = |reason: String| RdmaError::PeerMismatch { flow: res.label.clone(), reason };
    if peer.qpns.len() != qps || peer.psns.len() != qps {
        return Err(mismatch(format!("peer has {} QPs / {} PSNs, this flow {qps}", peer.qpns.len(), peer.psns.len())));
    }
    if peer.slot_len() < res.slot_len as u64 {
        return Err(mismatch(format!("peer buffer {} B per QP < {} B needed", peer.slot_len(), res.slot_len)));
    }
    Ok(())
}

fn connect(res: FlowResources, peer: &RdmaEndpoint) -> Result<ConnectedFlow, RdmaError> {
    match res.params.knobs.connection {
        Connection::Rc => connect_rc(res, peer),
        Connection::Ud => connect_ud(res, peer),
    }
}

/// UD: the peer's address checked and built once, then each QP connected
/// to the peer's QP of the same index.
fn connect_ud(mut res: FlowResources, peer: &RdmaEndpoint) -> Result<ConnectedFlow, RdmaError> {
    let to =
        ud::peer_address(&local_port(&res), res.params.knobs.qps as usize, res.params.effective_message_size(), peer)
            .map_err(|e| RdmaError::PeerMismatch { flow: res.label.clone(), reason: e.to_string() })?;
    let label = res.label.clone();
    let psns = res.psns.clone();
    for shard in &mut res.shards {
        for q in &mut shard.qps {
            let (i, qpn) = (q.index, q.qp.qpn());
            ud::connect_qp(&mut q.qp, psns[i], &to, peer.qpns[i], peer.qkey)
                .map_err(|refused| refused.at(label.clone(), i, qpn))?;
        }
    }
    Ok(ConnectedFlow { res })
}

/// This side's port as the path to a peer needs it (RC and UD alike).
fn local_port(res: &FlowResources) -> LocalPort {
    LocalPort {
        port: res.dev.port,
        link_layer: res.dev.link_layer,
        gid_index: res.dev.gid_index,
        gid_index_asked: res.params.knobs.gid_index.is_some(),
        // validate() bounds both: service level 0..=15, traffic class 0..=255.
        service_level: res.params.knobs.service_level as u8,
        traffic_class: res.params.knobs.traffic_class as u8,
    }
}

fn connect_rc(mut res: FlowResources, peer: &RdmaEndpoint) -> Result<ConnectedFlow, RdmaError> {
    check_peer(&res, peer)?;
    let mismatch = |reason: String| RdmaError::PeerMismatch { flow: res.label.clone(), reason };
    let mtu = mtu_from(res.dev.active_mtu.min(peer.mtu).max(1));
    let local = local_port(&res);
    let (sl, tclass) = (local.service_level, local.traffic_class);
    let path = address_path(&local, peer).map_err(|e| mismatch(e.to_string()))?;
    let use_grh = path.grh.is_some();
    let ah = path.to_ah();
    let max_rd = res.dev.max_rd_atomic;
    let label = res.label.clone();
    let psns = res.psns.clone();
    let slot = peer.slot_len();
    for shard in &mut res.shards {
        for q in &mut shard.qps {
            let i = q.index;
            let mut rtr = QueuePairAttribute::new();
            rtr.setup_state(QueuePairState::ReadyToReceive)
                .setup_path_mtu(mtu)
                .setup_dest_qp_num(peer.qpns[i])
                .setup_rq_psn(peer.psns[i])
                .setup_max_dest_read_atomic(max_rd)
                .setup_min_rnr_timer(QP_MIN_RNR_TIMER)
                .setup_address_vector(&ah);
            q.qp.modify(&rtr).map_err(|reason| RdmaError::Connect {
                flow: label.clone(),
                qp: i,
                qpn: q.qp.qpn(),
                transition: "INIT->RTR",
                attrs: format!(
                    "path_mtu={}, dest_qpn={:#x}, rq_psn={:#x}, max_dest_rd_atomic={max_rd}, dlid={}, sl={sl}, grh={}, sgid_index={}, traffic_class={tclass}, dgid={}",
                    super::probe::mtu_bytes(mtu as u32),
                    peer.qpns[i],
                    peer.psns[i],
                    peer.lid,
                    use_grh,
                    res.dev.gid_index,
                    std::net::Ipv6Addr::from(peer.gid)
                ),
                reason: reason.into(),
            })?;
            let mut rts = QueuePairAttribute::new();
            rts.setup_state(QueuePairState::ReadyToSend)
                .setup_sq_psn(psns[i])
                .setup_timeout(QP_TIMEOUT)
                .setup_retry_cnt(QP_RETRY_CNT)
                .setup_rnr_retry(QP_RNR_RETRY)
                .setup_max_read_atomic(max_rd);
            q.qp.modify(&rts).map_err(|reason| RdmaError::Connect {
                flow: label.clone(),
                qp: i,
                qpn: q.qp.qpn(),
                transition: "RTR->RTS",
                attrs: format!(
                    "sq_psn={:#x}, timeout={QP_TIMEOUT}, retry_cnt={QP_RETRY_CNT}, rnr_retry={QP_RNR_RETRY}, max_rd_atomic={max_rd}",
                    psns[i]
                ),
                reason: reason.into(),
            })?;
            q.remote_addr = peer.addr + slot * i as u64;
        }
    }
    res.peer_rkey = peer.rkey;
    Ok(ConnectedFlow { res })
}

impl CmConnecting {
    /// Takes the events rdma_cm has for the flow, moving each QP it
    /// connects to RTR and RTS with rdma_cm's attributes and the flow's RC
    /// timers; `true` once every QP is connected.
    pub fn advance(&mut self) -> Result<bool, RdmaError> {
        // Called every pass of the rank's rdma_cm loop: nothing is gathered
        // or copied until an event brings a QP to move.
        let CmConnecting { res, cm, hs } = self;
        let (label, dev, shards) = (&res.label, &res.dev, &mut res.shards);
        let max_rd = dev.max_rd_atomic;
        let mut ready = |i: usize, mut rtr: QueuePairAttribute, mut rts: QueuePairAttribute| {
            let mut slots = shards.iter_mut().flat_map(|s| s.qps.iter_mut());
            let q: &mut QpSlot = slots.find(|q| q.index == i).expect("rdma_cm connects the flow's own QPs");
            let qpn = q.qp.qpn();
            let failed = |transition, attrs: String| {
                let flow = label.clone();
                move |reason: QpModifyError| RdmaError::Connect {
                    flow,
                    qp: i,
                    qpn,
                    transition,
                    attrs,
                    reason: reason.into(),
                }
            };
            rtr.setup_max_dest_read_atomic(max_rd).setup_min_rnr_timer(QP_MIN_RNR_TIMER);
            let rtr_attrs = format!("rdma_cm's path, dest_qpn={:#x}, max_dest_rd_atomic={max_rd}", rtr.dest_qp_num());
            q.qp.modify(&rtr).map_err(failed("INIT->RTR", rtr_attrs))?;
            rts.setup_timeout(QP_TIMEOUT)
                .setup_retry_cnt(QP_RETRY_CNT)
                .setup_rnr_retry(QP_RNR_RETRY)
                .setup_max_read_atomic(max_rd);
            let rts_attrs = format!("rdma_cm's sq_psn, timeout={QP_TIMEOUT}, max_rd_atomic={max_rd}");
            q.qp.modify(&rts).map_err(failed("RTR->RTS", rts_attrs))
        };
        guard(label, "connect", || cm.advance(hs, label, dev, &mut ready))
    }

    /// The connected flow, the peer's buffer as its endpoint says.
    pub fn finish(self) -> ConnectedFlow {
        let CmConnecting { mut res, cm, hs } = self;
        res.cm = Some(cm);
        let peer = hs.peer();
        let slot = peer.slot_len();
        for q in res.shards.iter_mut().flat_map(|s| s.qps.iter_mut()) {
            q.remote_addr = peer.addr + slot * q.index as u64;
        }
        res.peer_rkey = peer.rkey;
        ConnectedFlow { res }
    }
}
