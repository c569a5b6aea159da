//! The latency lanes as nonblocking state machines: the ping-pong client
//! ([`Ping`]), the open-loop client ([`Probe`]) and the server that echoes
//! both ([`Echo`]).
//!
//! Open loop: probes leave on a fixed schedule whatever the echoes do, and
//! each is timed from the moment it was scheduled, not from when it could
//! be sent. A stall then shows in every probe it delays — the ones that
//! would have gone during it too — where a ping-pong client would have sent
//! none of them and measured one slow round trip: the "coordinated
//! omission" Gil Tene named (wrk2, HdrHistogram). TCP keeps the echoes'
//! order, so the k-th echo answers the k-th probe, and the reading half
//! draws the same schedule (same start, rate and seed) to know when that
//! probe was due.

use std::io::{Read, Write};
use std::time::Instant;

use mio::{Interest, Registry, Token};

use super::tasks::{moved, Moved, Stream, CALLS_PER_TURN};
use super::{Drain, DRAIN_LIMIT};
use crate::histogram::{Histogram, Recorder};
use crate::transport::pace::{ProbePlan, Schedule};
use crate::transport::task::{FlowTask, Turn};

const BOTH: Interest = Interest::READABLE.add(Interest::WRITABLE);

/// What one half of an open-loop client waits for after its share of a turn.
enum Next {
    /// Nothing: it stopped at its share and has more to do now.
    Now,
    /// The socket's readiness.
    Ready,
    /// The next probe's send time.
    Due,
}

/// Ping-pong client: sends one message, waits for all of it to come back,
/// and records the round trip (the recorder keeps those of the window).
pub(super) struct Ping {
    stream: Stream,
    buf: Vec<u8>,
    done: usize,
    reading: bool,
    sent: Instant,
    rtts: Recorder,
}

impl Ping {
    pub fn new(stream: Stream, buf: Vec<u8>, rtts: Recorder) -> Ping {
        Ping { stream, buf, done: 0, reading: false, sent: Instant::now(), rtts }
    }

    /// Ends the client: the server sees EOF and closes.
    fn finish(&self) -> Turn {
        self.stream.shut();
        Turn::Done(Ok(()))
    }
}

impl FlowTask for Ping {
    fn register(&mut self, registry: &Registry, token: Token) -> std::io::Result<()> {
        self.stream.register(registry, token, BOTH)
    }

    fn progress(&mut self, stop: bool) -> Turn {
        for _ in 0..CALLS_PER_TURN {
            if !self.reading && self.done == 0 {
                if stop {
                    return self.finish();
                }
                self.sent = Instant::now();
            }
            let result = match self.reading {
                false => self.stream.sock.write(&self.buf[self.done..]),
                true => self.stream.sock.read(&mut self.buf[self.done..]),
            };
            match moved(result) {
                Moved::Bytes(n) => self.done += n,
                Moved::Closed => return self.finish(),
                Moved::Blocked if stop => return self.finish(),
                Moved::Blocked => return Turn::Wait(None),
                Moved::Failed(e) => return self.stream.failed(e),
            }
            if self.done == self.buf.len() {
                self.done = 0;
                if self.reading {
                    self.rtts.record(self.sent, Instant::now());
                    self.stream.counters.add(self.buf.len() as u64, 1);
                }
                self.reading = !self.reading;
            }
        }
        Turn::Again
    }

    fn close(self: Box<Self>) -> Option<Histogram> {
        Some(self.rtts.into_histogram())
    }

    fn latency(&self) -> bool {
        true
    }
}

/// Latency server: returns every message as soon as it has all of it,
/// until the client closes (after a stop it drains, as a receiver does).
pub(super) struct Echo {
    stream: Stream,
    buf: Vec<u8>,
    done: usize,
    writing: bool,
    drain: Drain,
}

impl Echo {
    pub fn new(stream: Stream, buf: Vec<u8>, drain: Drain) -> Echo {
        Echo { stream, buf, done: 0, writing: false, drain }
    }
}

impl FlowTask for Echo {
    fn register(&mut self, registry: &Registry, token: Token) -> std::io::Result<()> {
        self.stream.register(registry, token, BOTH)
    }

    fn progress(&mut self, stop: bool) -> Turn {
        let mut heard = false;
        for _ in 0..CALLS_PER_TURN {
            let result = match self.writing {
                false => self.stream.sock.read(&mut self.buf[self.done..]),
                true => self.stream.sock.write(&self.buf[self.done..]),
            };
            match moved(result) {
                Moved::Bytes(n) => {
                    self.done += n;
                    heard |= n > 0;
                }
                Moved::Closed => return Turn::Done(Ok(())),
                Moved::Failed(e) => return self.stream.failed(e),
                Moved::Blocked => return self.drain.turn(stop, heard, true),
            }
            if self.done == self.buf.len() {
                self.done = 0;
                if self.writing {
                    self.stream.counters.add(self.buf.len() as u64, 1);
                }
                self.writing = !self.writing;
            }
        }
        self.drain.turn(stop, heard, false)
    }

    fn close(self: Box<Self>) -> Option<Histogram> {
        None
    }

    fn latency(&self) -> bool {
        true
    }
}

/// The open-loop client of one stream: probes of `probe.len()` bytes on
/// the plan's schedule until a stop, each echo recorded from the time its
/// probe was due. After the stop, the echoes of probes in flight still
/// come back; the server closes once it has echoed the last (EOF), or the
/// client gives up `DRAIN_LIMIT` after the stop.
pub(super) struct Probe {
    stream: Stream,
    probe: Vec<u8>,
    buf: Vec<u8>,
    /// Bytes of the current probe written, and when it is due.
    written: usize,
    due: Instant,
    sending: Schedule,
    /// Bytes of the current echo read, and the schedule it is timed on.
    read: usize,
    timing: Schedule,
    stopped: Option<Instant>,
    rtts: Recorder,
}

impl Probe {
    pub fn new(stream: Stream, buf: Vec<u8>, rtts: Recorder, plan: ProbePlan) -> Probe {
        let mut sending = plan.schedule();
        let due = sending.advance();
        let probe = buf.clone();
        Probe { stream, probe, buf, written: 0, due, sending, read: 0, timing: plan.schedule(), stopped: None, rtts }
    }

    /// Writes the probes that are due: what the writing half waits for next.
    fn send_due(&mut self) -> Result<Next, std::io::Error> {
        for _ in 0..CALLS_PER_TURN {
            if self.written == 0 && Instant::now() < self.due {
                return Ok(Next::Due);
            }
            match moved(self.stream.sock.write(&self.probe[self.written..])) {
                Moved::Bytes(n) => self.written += n,
                Moved::Closed => return Err(std::io::ErrorKind::WriteZero.into()),
                Moved::Blocked => return Ok(Next::Ready),
                Moved::Failed(e) => return Err(e),
            }
            if self.written == self.probe.len() {
                self.written = 0;
                self.due = self.sending.advance();
            }
        }
        Ok(Next::Now)
    }

    /// Reads the echoes there are: what the reading half waits for next.
    fn read_echoes(&mut self) -> Result<Next, Turn> {
        for _ in 0..CALLS_PER_TURN {
            match moved(self.stream.sock.read(&mut self.buf[self.read..])) {
                Moved::Bytes(n) => self.read += n,
                Moved::Closed => return Err(Turn::Done(Ok(()))),
                Moved::Blocked => return Ok(Next::Ready),
                Moved::Failed(e) => return Err(self.stream.failed(e)),
            }
            if self.read == self.buf.len() {
                self.read = 0;
                self.rtts.record_scheduled(self.timing.advance(), Instant::now());
                self.stream.counters.add(self.buf.len() as u64, 1);
            }
        }
        Ok(Next::Now)
    }
}

impl FlowTask for Probe {
    fn register(&mut self, registry: &Registry, token: Token) -> std::io::Result<()> {
        self.stream.register(registry, token, BOTH)
    }

    fn progress(&mut self, stop: bool) -> Turn {
        if stop && self.stopped.is_none() {
            self.stream.shut();
            self.stopped = Some(Instant::now());
        }
        let writing = match self.stopped {
            Some(_) => Next::Ready,
            None => match self.send_due() {
                Ok(next) => next,
                Err(e) => return self.stream.failed(e),
            },
        };
        let reading = match self.read_echoes() {
            Ok(next) => next,
            Err(turn) => return turn,
        };
        match (self.stopped, writing, reading) {
            (Some(at), ..) if at.elapsed() >= DRAIN_LIMIT => Turn::Done(Ok(())),
            (_, Next::Now, _) | (_, _, Next::Now) => Turn::Again,
            (Some(at), ..) => Turn::Wait(Some(at + DRAIN_LIMIT)),
            // Blocked on the socket both ways: its readiness wakes it.
            (None, Next::Ready, _) => Turn::Wait(None),
            (None, Next::Due, _) => Turn::Wait(Some(self.due)),
        }
    }

    fn close(self: Box<Self>) -> Option<Histogram> {
        Some(self.rtts.into_histogram())
    }

    fn latency(&self) -> bool {
        true
    }
}
