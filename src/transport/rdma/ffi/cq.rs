//! An extended CQ polled with a selectable strategy (one completion per poll
//! or a batch), plus the completion-channel calls (`ibv_req_notify_cq`,
//! `ibv_get_cq_event`, `ibv_ack_cq_events`) of event mode.

use std::io;
use std::os::fd::AsRawFd;
use std::ptr;
use std::sync::Arc;

use rdma_mummy_sys::{ibv_ack_cq_events, ibv_cq, ibv_get_cq_event, ibv_req_notify_cq, ibv_wc_read_qp_num};
use sideway::ibverbs::completion::{
    CompletionChannel, CompletionQueue, ExtendedCompletionQueue, PollCompletionQueueError,
};

/// The fields of a completion the hot loops need.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Wc {
    pub wr_id: u64,
    pub status: u32,
    /// Only valid for receive completions.
    pub byte_len: u32,
    pub vendor_err: u32,
    /// The QP it belongs to; read only from a CQ that several shards share.
    pub qp_num: u32,
}

/// An extended CQ plus (in event mode) its completion channel.
pub(crate) struct Cq {
    cq: Arc<ExtendedCompletionQueue>,
    channel: Option<Arc<CompletionChannel>>,
    batched: bool,
    /// Reads each completion's QP number (the CQ was made with it).
    routed: bool,
    unacked: u32,
}

impl Cq {
    /// `routed`: the CQ was made with the QP number in its completions,
    /// and `poll` reads it.
    pub(crate) fn new(
        cq: Arc<ExtendedCompletionQueue>,
        channel: Option<Arc<CompletionChannel>>,
        batched: bool,
        routed: bool,
    ) -> io::Result<Cq> {
        if let Some(ch) = &channel {
            ch.set_nonblocking(true)?;
        }
        Ok(Cq { cq, channel, batched, routed, unacked: 0 })
    }

    pub(crate) fn handle(&self) -> &Arc<ExtendedCompletionQueue> {
        &self.cq
    }

    /// Whether it takes a batch of completions per poll (not one).
    #[cfg(any(test, feature = "testing"))]
    pub(crate) fn batched(&self) -> bool {
        self.batched
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
                let qp_num = match self.routed {
                    // SAFETY: inside a poll (the poller is live) of a CQ made
                    // with IBV_WC_EX_WITH_QP_NUM; an extended CQ's pointer is
                    // its ibv_cq's (ibv_cq_ex_to_cq is a cast).
                    true => unsafe { ibv_wc_read_qp_num(self.cq.cq().as_ptr().cast()) },
                    false => 0,
                };
                out[n] = if status == 0 {
                    Wc { wr_id: wc.wr_id(), status, byte_len: wc.byte_len(), vendor_err: 0, qp_num }
                } else {
                    Wc { wr_id: wc.wr_id(), status, byte_len: 0, vendor_err: wc.vendor_err(), qp_num }
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
