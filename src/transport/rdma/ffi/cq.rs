//! A CQ polled with `ibv_poll_cq`, as perftest polls, plus the
//! completion-channel calls (`ibv_req_notify_cq`, `ibv_get_cq_event`,
//! `ibv_ack_cq_events`) of event mode.
//!
//! A plain CQ (`ibv_create_cq`), not an extended one: the extended CQ's
//! reader (`ibv_start_poll`, a call per field, `ibv_end_poll`) costs
//! several indirect calls per completion, measurable in Soft-RoCE's
//! latency (docs/PERFORMANCE.md), and rxe's `ibv_next_poll` in
//! rdma-core < 55 advances the consumer index twice. One `ibv_poll_cq`
//! fills every field the loops read, the QP number included.

use std::io;
use std::mem::MaybeUninit;
use std::os::fd::AsRawFd;
use std::ptr;
use std::sync::Arc;

use rdma_mummy_sys::{ibv_ack_cq_events, ibv_cq, ibv_get_cq_event, ibv_poll_cq, ibv_req_notify_cq, ibv_wc};
use sideway::ibverbs::completion::{BasicCompletionQueue, CompletionChannel, CompletionQueue};
use sideway::ibverbs::device_context::DeviceContext;

/// Completions one `ibv_poll_cq` call may take (perftest's CTX_POLL_BATCH):
/// the raw entries live on the stack, so a longer `out` is filled in chunks.
const CHUNK: usize = 16;

/// How many completion vectors (`comp_vector` values) the device offers;
/// at least one.
pub(crate) fn completion_vectors(ctx: &DeviceContext) -> u32 {
    // SAFETY: the context is live (borrowed); num_comp_vectors is set when
    // the device is opened and never changes.
    let n = unsafe { (*ctx.context().as_ptr()).num_comp_vectors };
    u32::try_from(n).unwrap_or(0).max(1)
}

/// The fields of a completion the hot loops need.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Wc {
    pub wr_id: u64,
    pub status: u32,
    /// Only valid for receive completions.
    pub byte_len: u32,
    pub vendor_err: u32,
    /// The QP it belongs to (a CQ that several shards share routes by it).
    pub qp_num: u32,
}

impl From<&ibv_wc> for Wc {
    fn from(wc: &ibv_wc) -> Self {
        let ok = wc.status == 0;
        Wc {
            wr_id: wc.wr_id,
            status: wc.status,
            // A failed completion's length is undefined, a good one's vendor error too.
            byte_len: if ok { wc.byte_len } else { 0 },
            vendor_err: if ok { 0 } else { wc.vendor_err },
            qp_num: wc.qp_num,
        }
    }
}

/// A CQ plus (in event mode) its completion channel.
pub(crate) struct Cq {
    cq: Arc<BasicCompletionQueue>,
    channel: Option<Arc<CompletionChannel>>,
    unacked: u32,
}

impl Cq {
    pub(crate) fn new(cq: Arc<BasicCompletionQueue>, channel: Option<Arc<CompletionChannel>>) -> io::Result<Cq> {
        if let Some(ch) = &channel {
            ch.set_nonblocking(true)?;
        }
        Ok(Cq { cq, channel, unacked: 0 })
    }

    pub(crate) fn handle(&self) -> &Arc<BasicCompletionQueue> {
        &self.cq
    }

    pub(crate) fn is_event_driven(&self) -> bool {
        self.channel.is_some()
    }

    /// Takes up to `out.len()` completions without blocking; returns how many.
    pub(crate) fn poll(&mut self, out: &mut [Wc]) -> io::Result<usize> {
        let mut raw = [MaybeUninit::<ibv_wc>::uninit(); CHUNK];
        let mut n = 0;
        while n < out.len() {
            let want = (out.len() - n).min(CHUNK);
            // SAFETY: the CQ is live (we hold an Arc); `raw` has room for
            // `want` <= CHUNK entries.
            let got = unsafe { ibv_poll_cq(self.cq.cq().as_ptr(), want as i32, raw.as_mut_ptr().cast()) };
            let got = usize::try_from(got).map_err(|_| io::Error::other(format!("ibv_poll_cq returned {got}")))?;
            for (slot, wc) in out[n..n + got].iter_mut().zip(&raw[..got]) {
                // SAFETY: ibv_poll_cq wrote the first `got` entries.
                *slot = Wc::from(unsafe { wc.assume_init_ref() });
            }
            n += got;
            if got < want {
                break;
            }
        }
        Ok(n)
    }

    /// Event mode: requests a notification for the next completion.
    pub(crate) fn arm(&self) -> io::Result<()> {
        // SAFETY: the CQ is live (we hold an Arc).
        let ret = unsafe { ibv_req_notify_cq(self.cq.cq().as_ptr(), 0) };
        if ret == 0 {
            Ok(())
        } else {
            Err(io::Error::from_raw_os_error(ret))
        }
    }

    /// Takes one event from the channel, false when none waits: its fd is
    /// non-blocking, so an empty channel answers at once.
    fn take_event(&mut self) -> io::Result<bool> {
        let Some(ch) = &self.channel else { return Ok(false) };
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

    /// Event mode: takes every event waiting on the channel, without
    /// blocking (an engine woke for them).
    pub(crate) fn take_events(&mut self) -> io::Result<()> {
        // Read until empty, no poll(2) first: an engine's edge-triggered
        // epoll woke for them, and each system call counts on rxe.
        while self.take_event()? {}
        Ok(())
    }

    /// The completion channel's fd (event mode), for an engine's poll.
    pub(crate) fn channel_fd(&self) -> Option<std::os::fd::RawFd> {
        self.channel.as_ref().map(|ch| ch.as_raw_fd())
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
