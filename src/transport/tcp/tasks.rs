//! The TCP lanes as nonblocking state machines ([`FlowTask`]s) that an
//! engine drives many at a time: bandwidth senders and receivers here, the
//! latency client and server in `latency`. Each turn moves until the socket
//! would block or the task has made `CALLS_PER_TURN` calls, whichever is
//! first; nothing allocates after the task is made.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::Arc;
use std::time::Instant;

use mio::{Interest, Registry, Token};

use super::{Drain, TcpError};
use crate::transport::pace::Pacer;
use crate::transport::task::{FlowTask, Turn};
use crate::transport::validation::{Stamp, StreamCheck};
use crate::transport::FlowCounters;

/// Socket calls one task makes in one turn at most.
pub(super) const CALLS_PER_TURN: usize = 16;

/// A connected stream with its counters: what every task holds.
pub(super) struct Stream {
    pub sock: mio::net::TcpStream,
    pub counters: Arc<FlowCounters>,
    peer: String,
}

impl Stream {
    /// Makes `sock` nonblocking (and, for latency, sends without delay).
    pub fn new(sock: TcpStream, counters: Arc<FlowCounters>, nodelay: bool) -> Result<Stream, TcpError> {
        let peer = sock.peer_addr().map_or_else(|_| "?".to_string(), |a| a.to_string());
        let fail = |cause| TcpError::Stream { peer: peer.clone(), bytes: 0, cause };
        sock.set_nonblocking(true).map_err(fail)?;
        if nodelay {
            sock.set_nodelay(true).map_err(fail)?;
        }
        Ok(Stream { sock: mio::net::TcpStream::from_std(sock), counters, peer })
    }

    pub fn error(&self, cause: std::io::Error) -> TcpError {
        TcpError::Stream { peer: self.peer.clone(), bytes: self.counters.read().bytes, cause }
    }

    pub fn failed(&self, cause: std::io::Error) -> Turn {
        Turn::Done(Err(self.error(cause).into()))
    }

    pub fn register(&mut self, registry: &Registry, token: Token, interest: Interest) -> std::io::Result<()> {
        registry.register(&mut self.sock, token, interest)
    }

    pub fn shut(&self) {
        let _ = self.sock.shutdown(Shutdown::Write);
    }
}

/// What a nonblocking call came to.
pub(super) enum Moved {
    Bytes(usize),
    Closed,
    Blocked,
    Failed(std::io::Error),
}

pub(super) fn moved(result: std::io::Result<usize>) -> Moved {
    match result {
        Ok(0) => Moved::Closed,
        Ok(n) => Moved::Bytes(n),
        Err(e) if e.kind() == ErrorKind::WouldBlock => Moved::Blocked,
        Err(e) if e.kind() == ErrorKind::Interrupted => Moved::Bytes(0),
        Err(e) => Moved::Failed(e),
    }
}

impl Drain {
    /// What a receiving task wants after its turn's reads: `heard`, they
    /// brought bytes; `blocked`, the last one would have blocked.
    pub(super) fn turn(&mut self, stop: bool, heard: bool, blocked: bool) -> Turn {
        match (self.over(Instant::now(), stop, heard), blocked) {
            (true, _) => Turn::Done(Ok(())),
            (false, true) => Turn::Wait(self.deadline()),
            (false, false) => Turn::Again,
        }
    }
}

/// Bandwidth sender: `buf` again and again; with a pace, each message
/// waits for its token (the pacer starts at the first turn, t0).
pub(super) struct Sender {
    stream: Stream,
    buf: Vec<u8>,
    offset: usize,
    per_s: Option<f64>,
    pacer: Option<Pacer>,
    /// Data validation: each message's pattern, written before it goes.
    stamp: Option<Stamp>,
}

impl Sender {
    pub fn new(stream: Stream, mut buf: Vec<u8>, per_s: Option<f64>, mut stamp: Option<Stamp>) -> Sender {
        if let Some(stamp) = &mut stamp {
            stamp.next(&mut buf);
        }
        Sender { stream, buf, offset: 0, per_s, pacer: None, stamp }
    }
}

impl FlowTask for Sender {
    fn register(&mut self, registry: &Registry, token: Token) -> std::io::Result<()> {
        self.stream.register(registry, token, Interest::WRITABLE)
    }

    fn progress(&mut self, stop: bool) -> Turn {
        if stop {
            // Tell the receiver we are done; it drains and sees EOF.
            self.stream.shut();
            return Turn::Done(Ok(()));
        }
        for _ in 0..CALLS_PER_TURN {
            if let (0, Some(per_s)) = (self.offset, self.per_s) {
                let pacer = self.pacer.get_or_insert_with(|| Pacer::new(per_s));
                let now = Instant::now();
                if pacer.available(now) == 0 {
                    return Turn::Wait(Some(now + pacer.wait_for_one(now)));
                }
                pacer.take(1);
            }
            match moved(self.stream.sock.write(&self.buf[self.offset..])) {
                Moved::Bytes(n) => {
                    self.offset += n;
                    let whole = self.offset == self.buf.len();
                    if whole {
                        self.offset = 0;
                        // The next message's pattern, once the last has gone whole.
                        if let Some(stamp) = &mut self.stamp {
                            stamp.next(&mut self.buf);
                        }
                    }
                    self.stream.counters.add(n as u64, u64::from(whole && n > 0));
                }
                Moved::Closed => return self.stream.failed(ErrorKind::WriteZero.into()),
                Moved::Blocked => return Turn::Wait(None),
                Moved::Failed(e) => return self.stream.failed(e),
            }
        }
        Turn::Again
    }

    fn close(self: Box<Self>) -> Option<crate::histogram::Histogram> {
        None
    }

    fn latency(&self) -> bool {
        false
    }
}

/// Bandwidth receiver: reads until its sender closes; messages are whole
/// `message_size` units received.
pub(super) struct Receiver {
    stream: Stream,
    buf: Vec<u8>,
    message_size: u64,
    partial: u64,
    drain: Drain,
    /// Data validation: checks every byte read against its message's pattern.
    check: Option<StreamCheck>,
}

impl Receiver {
    pub fn new(stream: Stream, buf: Vec<u8>, message_size: u64, drain: Drain, check: Option<StreamCheck>) -> Receiver {
        Receiver { stream, buf, message_size, partial: 0, drain, check }
    }
}

impl FlowTask for Receiver {
    fn register(&mut self, registry: &Registry, token: Token) -> std::io::Result<()> {
        self.stream.register(registry, token, Interest::READABLE)
    }

    fn progress(&mut self, stop: bool) -> Turn {
        let mut heard = false;
        for _ in 0..CALLS_PER_TURN {
            match moved(self.stream.sock.read(&mut self.buf)) {
                Moved::Bytes(n) => {
                    self.partial += n as u64;
                    let whole = self.partial / self.message_size;
                    self.partial %= self.message_size;
                    self.stream.counters.add(n as u64, whole);
                    if let Some(check) = &mut self.check {
                        check.check(&self.buf[..n], &self.stream.counters.dv);
                    }
                    heard |= n > 0;
                }
                Moved::Closed => return Turn::Done(Ok(())),
                Moved::Failed(e) => return self.stream.failed(e),
                Moved::Blocked => return self.drain.turn(stop, heard, true),
            }
        }
        self.drain.turn(stop, heard, false)
    }

    fn close(self: Box<Self>) -> Option<crate::histogram::Histogram> {
        None
    }

    fn latency(&self) -> bool {
        false
    }
}
