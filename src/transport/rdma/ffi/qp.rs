//! An extended RC QP that owns an `Arc<Arena>`, so every SGE it posts points
//! into memory that outlives the QP. Sends go through sideway's `ibv_wr_*`
//! guard (one doorbell per batch); receives through `ibv_post_recv` on a
//! preallocated WR ring (no allocation per post, unlike sideway's
//! `PostRecvGuard`).

use std::io;
use std::ptr;
use std::sync::Arc;

use rdma_mummy_sys::{ibv_post_recv, ibv_qp_to_qp_ex, ibv_recv_wr, ibv_sge, ibv_wr_set_ud_addr};
use sideway::ibverbs::queue_pair::{
    ExtendedQueuePair, ModifyQueuePairError, PostSendError, PostSendGuard, QueuePair, QueuePairAttribute,
    SetInlineData, SetScatterGatherEntry, WorkRequestFlags,
};

use super::ud::{self, Ah};
use super::{with_causes, Arena};
use crate::transport::rdma::path::AddressPath;

/// A UD QP's peer: the address handle and the remote QP every send names.
struct UdTarget {
    ah: Ah,
    qpn: u32,
    qkey: u32,
}

/// A QP state change the device refused: sideway's error, shown with every
/// cause beneath it (its own text hides the errno, which is the innermost).
#[derive(Debug, thiserror::Error)]
#[error("{}", with_causes(&.0))]
pub struct QpModifyError(ModifyQueuePairError);

/// What one send WR does (the remote side of it).
#[derive(Clone, Copy, Debug)]
pub(crate) enum WrKind {
    Write,
    WriteImm(u32),
    Read,
    Send,
    SendImm(u32),
    FetchAdd(u64),
    CmpSwap { compare: u64, swap: u64 },
}

/// A batch's shape: op, remote target, local bytes. Checked against the arena
/// when posted.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SendSpec {
    pub kind: WrKind,
    pub rkey: u32,
    pub remote_addr: u64,
    pub local_off: usize,
    pub len: u32,
    /// Copy the payload into the WQE (from the QP's inline buffer).
    pub inline: bool,
}

/// Preallocated receive WRs for one QP, all scattering into one arena slot.
struct RecvRing {
    wrs: Box<[ibv_recv_wr]>,
    sge: Box<ibv_sge>,
}

// SAFETY: the raw pointers in `wrs` point into `sge` / `wrs` themselves
// (heap boxes owned by this struct, stable across moves); they are only
// dereferenced by ibv_post_recv while `&mut self` is held.
unsafe impl Send for RecvRing {}
// SAFETY: no `&self` method touches the pointers; every use needs `&mut`.
unsafe impl Sync for RecvRing {}

/// An extended RC or UD QP bound to the arena its WRs point into.
pub(crate) struct Qp {
    // Field order is drop order: the QP is destroyed before its address
    // handle and the arena can go.
    qp: ExtendedQueuePair,
    recv: Option<RecvRing>,
    inline_buf: Box<[u8]>,
    ud: Option<UdTarget>,
    arena: Arc<Arena>,
}

impl Qp {
    pub(crate) fn new(qp: ExtendedQueuePair, arena: Arc<Arena>, inline_len: usize) -> Qp {
        Qp { qp, recv: None, inline_buf: vec![0u8; inline_len].into_boxed_slice(), ud: None, arena }
    }

    /// UD: RESET → INIT on `port`, receiving datagrams that carry `qkey`.
    pub(crate) fn init_ud(&mut self, port: u8, qkey: u32) -> io::Result<()> {
        // SAFETY: the QP is live (owned by self) for the call.
        ud::init(unsafe { self.qp.qp() }, port, qkey)
    }

    /// UD: every send from now on goes to QP `qpn` (accepting `qkey`) at `to`.
    pub(crate) fn set_ud_target(&mut self, to: &AddressPath, qpn: u32, qkey: u32) -> io::Result<()> {
        // SAFETY: the QP is live (owned by self) for the call.
        let ah = Ah::new(unsafe { self.qp.qp() }, to)?;
        self.ud = Some(UdTarget { ah, qpn, qkey });
        Ok(())
    }

    pub(crate) fn qpn(&self) -> u32 {
        self.qp.qp_number()
    }

    pub(crate) fn modify(&mut self, attr: &QueuePairAttribute) -> Result<(), QpModifyError> {
        self.qp.modify(attr).map_err(QpModifyError)
    }

    /// Sets the last payload byte of `spec`'s message (the byte a write-latency
    /// peer polls on), in the inline buffer or the arena.
    pub(crate) fn set_last_payload_byte(&mut self, spec: &SendSpec, v: u8) {
        let last = spec.len.max(1) as usize - 1;
        if spec.inline {
            self.inline_buf[last] = v;
        } else {
            self.arena.write_u8(spec.local_off + last, v);
        }
    }

    /// Posts `n` WRs shaped by `spec` with one doorbell; `wr(k)` gives the
    /// k-th WR's (wr_id, signaled). Allocates nothing.
    pub(crate) fn post_sends(
        &mut self,
        spec: &SendSpec,
        n: u32,
        mut wr: impl FnMut(u32) -> (u64, bool),
    ) -> Result<(), PostSendError> {
        let len = spec.len as usize;
        self.arena.check(spec.local_off, len);
        let lkey = self.arena.lkey();
        let laddr = self.arena.addr() + spec.local_off as u64;
        let inline = spec.inline && len <= self.inline_buf.len();
        let payload = &self.inline_buf[..if inline { len } else { 0 }];
        // SAFETY: the QP is live (owned by self); an extended QP's ibv_qp is
        // the base of its ibv_qp_ex, which this only converts back to.
        let qp_ex = unsafe { ibv_qp_to_qp_ex(self.qp.qp().as_ptr()) };
        let ud = self.ud.as_ref();
        let mut guard = self.qp.start_post_send();
        for k in 0..n {
            let (wr_id, signaled) = wr(k);
            let mut flags = if signaled { WorkRequestFlags::Signaled } else { WorkRequestFlags::none() };
            if inline {
                flags |= WorkRequestFlags::Inline;
            }
            let h = guard.construct_wr(wr_id, flags);
            let h = match spec.kind {
                WrKind::Write => h.setup_write(spec.rkey, spec.remote_addr),
                WrKind::WriteImm(imm) => h.setup_write_imm(spec.rkey, spec.remote_addr, imm),
                WrKind::Read => h.setup_read(spec.rkey, spec.remote_addr),
                WrKind::Send => h.setup_send(),
                WrKind::SendImm(imm) => h.setup_send_imm(imm),
                WrKind::FetchAdd(add) => h.setup_atomic_fetch_add(spec.rkey, spec.remote_addr, add),
                WrKind::CmpSwap { compare, swap } => {
                    h.setup_atomic_compare_swap(spec.rkey, spec.remote_addr, compare, swap)
                }
            };
            if let Some(t) = ud {
                // SAFETY: between the WR's opcode call and the guard's post,
                // as ibv_wr_set_ud_addr requires; the AH lives in self (it
                // outlives the QP) and the QP is UD, whose provider sets the hook.
                unsafe { ibv_wr_set_ud_addr(qp_ex, t.ah.as_ptr(), t.qpn, t.qkey) };
            }
            if inline {
                h.setup_inline_data(payload);
            } else {
                // SAFETY: [laddr, laddr+len) lies in the arena (checked above),
                // which is registered under `lkey` and outlives this QP (we
                // hold an Arc to it and the QP field drops first).
                unsafe { h.setup_sge(lkey, laddr, spec.len) };
            }
        }
        guard.post()
    }

    /// Prepares `depth` receive WRs that scatter into `[off, off+len)` of the arena.
    pub(crate) fn setup_recv_ring(&mut self, depth: usize, wr_id: u64, off: usize, len: u32) {
        self.arena.check(off, len as usize);
        let mut sge = Box::new(ibv_sge { addr: self.arena.addr() + off as u64, length: len, lkey: self.arena.lkey() });
        let sge_ptr: *mut ibv_sge = &mut *sge;
        let wrs = (0..depth.max(1))
            .map(|_| ibv_recv_wr { wr_id, next: ptr::null_mut(), sg_list: sge_ptr, num_sge: 1 })
            .collect();
        self.recv = Some(RecvRing { wrs, sge });
    }

    /// Posts `n` (≤ ring depth) receives with one `ibv_post_recv`. The QP must
    /// be in INIT or later.
    pub(crate) fn post_recvs(&mut self, n: usize) -> io::Result<()> {
        let ring = self.recv.as_mut().ok_or_else(|| io::Error::other("no receive ring set up"))?;
        if n == 0 {
            return Ok(());
        }
        assert!(n <= ring.wrs.len(), "posting {n} receives on a ring of {}", ring.wrs.len());
        let base = ring.wrs.as_mut_ptr();
        for i in 0..n {
            // SAFETY: i < n ≤ len; links WR i to WR i+1 inside the same boxed slice.
            unsafe { (*base.add(i)).next = if i + 1 < n { base.add(i + 1) } else { ptr::null_mut() } };
        }
        let _ = &ring.sge; // the WRs' sg_list points here
        let mut bad: *mut ibv_recv_wr = ptr::null_mut();
        // SAFETY: the QP pointer is live (owned by self); the WR chain and its
        // SGE are valid for the call and only read by it; the SGE's memory is
        // the arena, which outlives the QP.
        let ret = unsafe { ibv_post_recv(self.qp.qp().as_ptr(), base, &mut bad) };
        if ret == 0 {
            Ok(())
        } else {
            Err(io::Error::from_raw_os_error(ret))
        }
    }

    pub(crate) fn arena(&self) -> &Arena {
        &self.arena
    }
}

#[cfg(test)]
mod tests {
    use sideway::ibverbs::queue_pair::ModifyQueuePairErrorKind;

    use super::*;
    use crate::transport::rdma::error::Refused;

    #[test]
    fn a_refused_transition_shows_the_errno_beneath_sideways_text() {
        let errno = io::Error::from_raw_os_error(22);
        let refused = Refused {
            transition: "INIT->RTR",
            attrs: "path_mtu=1024".into(),
            reason: QpModifyError(ModifyQueuePairErrorKind::Ibverbs(errno).into()).into(),
        };
        assert_eq!(
            refused.at("flow 1->0".into(), 2, 0x11).to_string(),
            "flow 1->0: QP 2 (qpn 0x11) INIT->RTR failed (path_mtu=1024): modify queue pair failed: Invalid argument \
             (os error 22)"
        );
    }
}
