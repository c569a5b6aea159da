//! TCP streams: what iperf measures, over loopback, Ethernet or IPoIB.
//! One flow is `streams` connections, each a nonblocking task (`tasks`,
//! `latency`) that an engine thread drives with many others; none
//! allocates while it moves data. Every stream begins with its flow's
//! preamble (`preamble`), which the receiver checks before it counts
//! anything (`accept`).

mod accept;
mod dial;
pub(crate) mod dscp;
mod either;
mod error;
pub mod handshake;
pub mod info;
mod latency;
pub(crate) mod preamble;
mod tasks;

pub use accept::{Accepted, Accepting, Listener, Stranger};
pub use dial::{DialPlan, Dialing};
pub use either::{Handshake, Shaken};
pub use error::TcpError;
pub use preamble::{FlowAuth, FlowProof, Refusal};

use std::net::{IpAddr, SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::histogram::Recorder;
use crate::transport::pace::ProbePlan;
use crate::transport::task::FlowTask;
use crate::transport::validation::{FlowNumber, Stamp, StreamCheck};
use crate::transport::FlowCounters;

/// How long an aborted receiving end waits for its silent sender: the run
/// is ending, and its partial report must make the coordinator's grace.
const ABORT_SILENCE: Duration = Duration::from_millis(200);
/// After its own rank's window closes, a receiving end keeps reading until
/// its sender closes, giving up only after this long without a byte: the
/// sender's rank closes its window on its own clock, and on a busy host its
/// threads can wait far longer than `ABORT_SILENCE` for a core. Closing earlier
/// resets the connection under a sender that is still writing (EPIPE).
const DRAIN_SILENCE: Duration = Duration::from_secs(2);
/// …and after this long in all, whatever the sender does, so a report is
/// never held by a peer that writes on.
const DRAIN_LIMIT: Duration = Duration::from_secs(5);

/// Opens `streams` connections from `local` to a receiver, each proving
/// with its preamble that it is that stream of the flow.
pub fn connect(
    local: IpAddr,
    peer: SocketAddr,
    auth: &FlowAuth,
    streams: u32,
    timeout: Duration,
) -> Result<Vec<TcpStream>, TcpError> {
    connect_marked(local, peer, auth, streams, timeout, None)
}

/// [`connect`], every packet of the streams (their SYN included) marked
/// with `dscp` when given.
pub fn connect_marked(
    local: IpAddr,
    peer: SocketAddr,
    auth: &FlowAuth,
    streams: u32,
    timeout: Duration,
    dscp: Option<u8>,
) -> Result<Vec<TcpStream>, TcpError> {
    let dialing = Dialing::new(DialPlan { local, peer, auth: *auth, streams, dscp, write_timeout: timeout });
    handshake::drive(vec![dialing], timeout).pop().expect("one end, one result")
}

/// What a TCP lane does, and what it needs for it.
pub enum Role {
    /// Writes messages back to back, or paced at `Some(msgs/s)`.
    Send { per_s: Option<f64> },
    /// Reads until its sender closes, counting whole `message_size` units;
    /// drains after a stop at or after `close`.
    Receive { message_size: u64, close: Instant },
    /// Latency client: ping-pong, or open-loop probes on a plan.
    Ping { rtts: Recorder, probes: Option<ProbePlan> },
    /// Latency server: echoes every message; drains as a receiver does.
    Echo { close: Instant },
}

/// Which flow's pattern a bandwidth lane writes or checks (data
/// validation, `transport::validation`), and the lane's number in it.
#[derive(Clone, Copy, Debug)]
pub struct Validate {
    pub flow: FlowNumber,
    pub lane: u32,
}

/// Makes the lane task of a connected stream (its preamble already
/// written or checked), with `buf` as its message buffer; with `validate`,
/// a bandwidth lane writes (checks) every message's pattern.
pub fn task(
    sock: TcpStream,
    buf: Vec<u8>,
    counters: Arc<FlowCounters>,
    role: Role,
    validate: Option<Validate>,
) -> Result<Box<dyn FlowTask>, TcpError> {
    let nodelay = matches!(role, Role::Ping { .. } | Role::Echo { .. });
    let stream = tasks::Stream::new(sock, counters, nodelay)?;
    Ok(match role {
        Role::Send { per_s } => Box::new(tasks::Sender::new(stream, buf, per_s, validate.map(|v| Stamp::new(v.flow)))),
        Role::Receive { message_size, close } => {
            let check = validate.map(|v| StreamCheck::new(v.flow, v.lane, message_size));
            Box::new(tasks::Receiver::new(stream, buf, message_size, Drain::new(close), check))
        }
        Role::Ping { rtts, probes: None } => Box::new(latency::Ping::new(stream, buf, rtts)),
        Role::Ping { rtts, probes: Some(plan) } => Box::new(latency::Probe::new(stream, buf, rtts, plan)),
        Role::Echo { close } => Box::new(latency::Echo::new(stream, buf, Drain::new(close))),
    })
}

/// When a receiving end that was told to stop may close. A stop at or
/// after its window's `close` is the phase's end: it drains until its
/// sender has been silent for `DRAIN_SILENCE` since the stop, or
/// `DRAIN_LIMIT` after it (a sender that has not begun yet is late, not
/// gone). A stop before `close` is an abort: the run is ending, and the
/// partial report must not wait, so it closes once silent for `ABORT_SILENCE`.
pub(super) struct Drain {
    close: Instant,
    /// When it was told to stop, and whether that was an abort.
    stopped: Option<(Instant, bool)>,
    /// The last byte heard after the stop.
    heard: Option<Instant>,
}

impl Drain {
    pub(super) fn new(close: Instant) -> Drain {
        Drain { close, stopped: None, heard: None }
    }

    /// Called after reading at `now` (`heard`: bytes came since the last call).
    pub(super) fn over(&mut self, now: Instant, stop: bool, heard: bool) -> bool {
        if !stop {
            return false;
        }
        self.stopped.get_or_insert((now, now < self.close));
        if heard {
            self.heard = Some(now);
        }
        self.deadline().is_some_and(|at| now >= at)
    }

    /// When it closes if its sender stays silent (none before a stop).
    pub(super) fn deadline(&self) -> Option<Instant> {
        let (stopped, aborted) = self.stopped?;
        let quiet = self.heard.map_or(stopped, |heard| heard.max(stopped));
        let silence = if aborted { ABORT_SILENCE } else { DRAIN_SILENCE };
        Some((quiet + silence).min(stopped + DRAIN_LIMIT))
    }
}
