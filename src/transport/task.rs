//! The seam between a flow end's transport and the engine that runs it.
//!
//! Preparing and connecting stay the transport's own (`tcp::Listener`,
//! `tcp::connect`, `rdma::prepare`); once connected, each lane of a flow
//! end (a TCP stream, a shard of an RDMA bandwidth flow's QPs) becomes a
//! [`FlowTask`]: a nonblocking state machine that an engine
//! thread drives together with many others. The task is handed its message
//! buffer by its caller (memory and its registration stay apart from the
//! transport, so other memory can plug in there), counts into its own
//! lane's [`FlowCounters`], and says after each turn when it wants the next.
//!
//! Readiness is epoll through `mio`, edge-triggered, rather than io_uring:
//! a TCP stream's work here is one `read`/`write` of a buffer the task
//! owns, so completion-based I/O would save only the readiness syscall,
//! while it would need registered buffers and a kernel ≥ 5.x with its
//! uring enabled (often disabled on the clusters this runs on); epoll works
//! on every kernel we support, and `mio` is already built (through tokio).

use std::time::Instant;

use mio::{Registry, Token};

use crate::histogram::Histogram;
use crate::transport::rdma::RdmaError;
use crate::transport::tcp::TcpError;

/// Why a task ended before its peer closed.
#[derive(Debug, thiserror::Error)]
pub enum TaskError {
    #[error(transparent)]
    Tcp(#[from] TcpError),
    #[error(transparent)]
    Rdma(#[from] RdmaError),
}

/// What a task wants after a turn.
#[derive(Debug)]
pub enum Turn {
    /// More to do at once: it stopped at its share of one turn, so that
    /// one busy stream does not starve the others of its engine.
    Again,
    /// Waiting for its socket to become ready (it saw `WouldBlock`), or,
    /// when given, for this instant (a pacer's next token, a probe's send
    /// time, a drain's end), whichever comes first.
    Wait(Option<Instant>),
    /// Over: its peer closed, it closed after a stop, or it failed.
    Done(Result<(), TaskError>),
}

/// One lane of a flow end, run by an engine from t0 until it is done.
pub trait FlowTask: Send {
    /// Registers its socket (an RDMA shard in event mode: its completion
    /// channel) with the engine's poll under `token`.
    fn register(&mut self, registry: &Registry, token: Token) -> std::io::Result<()>;
    /// Moves what it can now without blocking; `stop`: the phase is over
    /// (or aborted) and the task should wind down as its mode does.
    fn progress(&mut self, stop: bool) -> Turn;
    /// Closes it; the round trips it measured, when it is a latency client.
    fn close(self: Box<Self>) -> Option<Histogram>;
    /// Whether it only measures latency (its engine may then spin rather
    /// than sleep, so a round trip is not lengthened by a wake-up).
    fn latency(&self) -> bool;
    /// Whether it busy-polls what it waits on (an RDMA shard's CQ) and so
    /// never waits on the engine's poll: an engine of such tasks alone
    /// does not look at its poll between their turns.
    fn polls_itself(&self) -> bool {
        false
    }
    /// The completion queue it shares with other tasks, if any: the tasks
    /// of one poll group must run on one engine, which polls it for them.
    fn poll_group(&self) -> Option<usize> {
        None
    }
}
