//! The only `unsafe` of the RDMA data path: a small safe wrapper over the few
//! things sideway's safe layer does not offer without allocating or
//! panicking.
//!
//! * [`Arena`]: page-aligned memory registered as one MR, freed only after
//!   deregistration; touched by the CPU only through volatile byte/word access
//!   (the NIC may be writing it at any time).
//! * [`Qp`]: an extended RC QP that owns an `Arc<Arena>`, so every SGE it posts
//!   points into memory that outlives the QP (fields drop in order: QP first).
//!   Sends go through sideway's `ibv_wr_*` guard (one doorbell per batch);
//!   receives through `ibv_post_recv` on a preallocated WR ring (no
//!   allocation per post, unlike sideway's `PostRecvGuard`).
//! * [`Cq`]: an extended CQ polled with a selectable strategy, plus the
//!   completion-channel calls (`ibv_req_notify_cq`, `ibv_get_cq_event`,
//!   `ibv_ack_cq_events`) for event mode.
//! * [`query_port`]: `ibv_query_port` into a zeroed struct (sideway's version
//!   reads uninitialised fields that an older libibverbs does not fill, and
//!   its accessors panic on values they do not know).

use std::alloc::{self, Layout};
use std::io;
use std::os::fd::AsRawFd;
use std::ptr::{self, NonNull};
use std::sync::Arc;

use rdma_mummy_sys::{
    ibv_ack_cq_events, ibv_cq, ibv_get_cq_event, ibv_port_attr, ibv_post_recv, ibv_recv_wr, ibv_req_notify_cq, ibv_sge,
};
use sideway::ibverbs::completion::{
    CompletionChannel, CompletionQueue, ExtendedCompletionQueue, PollCompletionQueueError,
};
use sideway::ibverbs::device_context::DeviceContext;
use sideway::ibverbs::memory_region::MemoryRegion;
use sideway::ibverbs::protection_domain::ProtectionDomain;
use sideway::ibverbs::queue_pair::{
    ExtendedQueuePair, PostSendError, PostSendGuard, QueuePair, QueuePairAttribute, SetInlineData,
    SetScatterGatherEntry, WorkRequestFlags,
};
use sideway::ibverbs::AccessFlags;

// ---------------------------------------------------------------- Arena ----

/// Registered, page-aligned, zero-initialised memory.
pub(crate) struct Arena {
    /// Deregistered in `Drop` before the memory is freed.
    mr: Option<Arc<MemoryRegion>>,
    ptr: NonNull<u8>,
    layout: Layout,
}

// SAFETY: the arena exclusively owns its allocation; the CPU touches it only
// through the volatile accessors below (plain integers, no references handed
// out), so sharing or moving it between threads cannot create data races in
// the Rust sense; the NIC's DMA is outside the language model either way.
unsafe impl Send for Arena {}
// SAFETY: see `Send`: all accessors take `&self` and use volatile raw access.
unsafe impl Sync for Arena {}

impl Arena {
    pub(crate) fn new(pd: &Arc<ProtectionDomain>, len: usize, access: AccessFlags) -> io::Result<Arena> {
        let layout = Layout::from_size_align(len.max(64), 4096)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
        // SAFETY: layout has a non-zero size.
        let raw = unsafe { alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(raw).ok_or_else(|| io::Error::from(io::ErrorKind::OutOfMemory))?;
        // SAFETY: `ptr` is valid for `layout.size()` bytes and stays allocated
        // until `Drop`, which deregisters the MR before freeing it.
        let mr = unsafe { pd.reg_mr(ptr.as_ptr() as usize, layout.size(), access) };
        match mr {
            Ok(mr) => Ok(Arena { mr: Some(mr), ptr, layout }),
            Err(e) => {
                // SAFETY: allocated above with this layout, never registered.
                unsafe { alloc::dealloc(ptr.as_ptr(), layout) };
                let os = e.0.to_string();
                Err(io::Error::other(format!("ibv_reg_mr({} bytes): {os}", layout.size())))
            }
        }
    }

    fn mr(&self) -> &MemoryRegion {
        self.mr.as_deref().expect("MR present until drop")
    }
    pub(crate) fn addr(&self) -> u64 {
        self.ptr.as_ptr() as u64
    }
    pub(crate) fn len(&self) -> usize {
        self.layout.size()
    }
    pub(crate) fn lkey(&self) -> u32 {
        self.mr().lkey()
    }
    pub(crate) fn rkey(&self) -> u32 {
        self.mr().rkey()
    }

    fn check(&self, off: usize, len: usize) {
        assert!(off.checked_add(len).is_some_and(|end| end <= self.len()), "arena access {off}+{len} out of bounds");
    }

    pub(crate) fn read_u8(&self, off: usize) -> u8 {
        self.check(off, 1);
        // SAFETY: in bounds (checked); volatile because the NIC writes it.
        unsafe { ptr::read_volatile(self.ptr.as_ptr().add(off)) }
    }
    pub(crate) fn write_u8(&self, off: usize, v: u8) {
        self.check(off, 1);
        // SAFETY: in bounds (checked); volatile because the NIC reads it.
        unsafe { ptr::write_volatile(self.ptr.as_ptr().add(off), v) }
    }
    /// Reads an 8-byte word (atomics targets/results); `off` must be 8-aligned.
    pub(crate) fn read_u64(&self, off: usize) -> u64 {
        self.check(off, 8);
        assert!(off.is_multiple_of(8), "unaligned u64 at {off}");
        // SAFETY: in bounds and aligned (base is page-aligned); volatile (DMA).
        unsafe { ptr::read_volatile(self.ptr.as_ptr().add(off).cast::<u64>()) }
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        // Deregister first: the NIC must not touch the memory once it is freed.
        drop(self.mr.take());
        // SAFETY: allocated in `new` with `self.layout`; the MR is gone and no
        // QP can reference the arena any more (QPs hold an `Arc<Arena>`).
        unsafe { alloc::dealloc(self.ptr.as_ptr(), self.layout) };
    }
}

// ------------------------------------------------------------------- Qp ----

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

/// An extended RC QP bound to the arena its WRs point into.
pub(crate) struct Qp {
    // Field order is drop order: the QP is destroyed before the arena can go.
    qp: ExtendedQueuePair,
    recv: Option<RecvRing>,
    inline_buf: Box<[u8]>,
    arena: Arc<Arena>,
}

impl Qp {
    pub(crate) fn new(qp: ExtendedQueuePair, arena: Arc<Arena>, inline_len: usize) -> Qp {
        Qp { qp, recv: None, inline_buf: vec![0u8; inline_len].into_boxed_slice(), arena }
    }

    pub(crate) fn qpn(&self) -> u32 {
        self.qp.qp_number()
    }

    pub(crate) fn modify(&mut self, attr: &QueuePairAttribute) -> Result<(), String> {
        self.qp.modify(attr).map_err(|e| {
            let mut s = e.to_string();
            let mut src = std::error::Error::source(&e);
            while let Some(inner) = src {
                s.push_str(": ");
                s.push_str(&inner.to_string());
                src = inner.source();
            }
            s
        })
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

// ------------------------------------------------------------------- Cq ----

/// The fields of a completion the hot loops need.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Wc {
    pub wr_id: u64,
    pub status: u32,
    /// Only valid for receive completions.
    pub byte_len: u32,
    pub vendor_err: u32,
}

/// An extended CQ plus (in event mode) its completion channel.
pub(crate) struct Cq {
    cq: Arc<ExtendedCompletionQueue>,
    channel: Option<Arc<CompletionChannel>>,
    batched: bool,
    unacked: u32,
}

impl Cq {
    pub(crate) fn new(
        cq: Arc<ExtendedCompletionQueue>,
        channel: Option<Arc<CompletionChannel>>,
        batched: bool,
    ) -> io::Result<Cq> {
        if let Some(ch) = &channel {
            ch.set_nonblocking(true)?;
        }
        Ok(Cq { cq, channel, batched, unacked: 0 })
    }

    pub(crate) fn handle(&self) -> &Arc<ExtendedCompletionQueue> {
        &self.cq
    }

    pub(crate) fn is_event_driven(&self) -> bool {
        self.channel.is_some()
    }

    /// Takes up to `out.len()` completions without blocking; returns how many.
    pub(crate) fn poll(&mut self, out: &mut [Wc]) -> io::Result<usize> {
        let mut n = 0;
        while n < out.len() {
            let mut poller = match self.cq.start_poll() {
                Ok(p) => p,
                Err(PollCompletionQueueError::CompletionQueueEmpty) => return Ok(n),
                Err(PollCompletionQueueError::Ibverbs(e)) => return Err(e),
                Err(e) => return Err(io::Error::other(e.to_string())),
            };
            while n < out.len() {
                let Some(wc) = poller.next() else { return Ok(n) };
                let status = wc.status();
                out[n] = if status == 0 {
                    Wc { wr_id: wc.wr_id(), status, byte_len: wc.byte_len(), vendor_err: 0 }
                } else {
                    Wc { wr_id: wc.wr_id(), status, byte_len: 0, vendor_err: wc.vendor_err() }
                };
                n += 1;
                if !self.batched {
                    break; // end_poll now (drop), then start_poll again
                }
            }
        }
        Ok(n)
    }

    /// Event mode: requests a notification for the next completion.
    pub(crate) fn arm(&self) -> io::Result<()> {
        // SAFETY: the CQ is live (we hold an Arc); an extended CQ starts with
        // the ibv_cq fields (ibv_cq_ex_to_cq is a cast).
        let ret = unsafe { ibv_req_notify_cq(self.cq.cq().as_ptr(), 0) };
        if ret == 0 {
            Ok(())
        } else {
            Err(io::Error::from_raw_os_error(ret))
        }
    }

    /// Event mode: waits up to `timeout_ms` for a completion event; true if
    /// one arrived (the CQ must have been armed).
    pub(crate) fn wait_event(&mut self, timeout_ms: i32) -> io::Result<bool> {
        let Some(ch) = &self.channel else { return Ok(false) };
        let mut pfd = libc::pollfd { fd: ch.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd.
        let r = unsafe { libc::poll(&mut pfd, 1, timeout_ms) };
        if r < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::Interrupted { Ok(false) } else { Err(e) };
        }
        if r == 0 {
            return Ok(false);
        }
        let mut ev_cq: *mut ibv_cq = ptr::null_mut();
        let mut ev_ctx: *mut libc::c_void = ptr::null_mut();
        // SAFETY: the channel is live; the fd is non-blocking, so this returns
        // at once; out-pointers are valid locals.
        let ret = unsafe { ibv_get_cq_event(ch.comp_channel().as_ptr(), &mut ev_cq, &mut ev_ctx) };
        if ret != 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::WouldBlock { Ok(false) } else { Err(e) };
        }
        self.unacked += 1;
        if self.unacked >= 64 {
            self.ack();
        }
        Ok(true)
    }

    /// Event mode, nothing to do: arm, poll once more (a completion may have
    /// landed before the arm), else sleep on the channel up to `timeout_ms`.
    /// Returns the completions taken (0 after a wait; poll again then).
    pub(crate) fn idle_wait(&mut self, out: &mut [Wc], timeout_ms: i32) -> io::Result<usize> {
        self.arm()?;
        let n = self.poll(out)?;
        if n == 0 {
            self.wait_event(timeout_ms)?;
        }
        Ok(n)
    }

    fn ack(&mut self) {
        if self.unacked > 0 {
            // SAFETY: the CQ is live; we ack exactly the events we took.
            unsafe { ibv_ack_cq_events(self.cq.cq().as_ptr(), self.unacked) };
            self.unacked = 0;
        }
    }
}

impl Drop for Cq {
    fn drop(&mut self) {
        // ibv_destroy_cq waits for every event to be acked.
        self.ack();
    }
}

// ----------------------------------------------------------------- port ----

/// `ibv_query_port` into a zeroed struct; the raw fields, no enum conversions.
pub(crate) fn query_port(ctx: &DeviceContext, port: u8) -> io::Result<ibv_port_attr> {
    // SAFETY: ibv_port_attr is plain data; all-zero is a valid value.
    let mut attr: ibv_port_attr = unsafe { std::mem::zeroed() };
    // SAFETY: the context is live (borrowed); `attr` is a valid out-pointer of
    // the size the call is told.
    let ret = unsafe { rdma_mummy_sys::ibv_query_port(ctx.context().as_ptr(), port, &mut attr) };
    if ret == 0 {
        Ok(attr)
    } else {
        Err(io::Error::from_raw_os_error(ret))
    }
}
