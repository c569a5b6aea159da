//! The receiving end of a TCP flow: accepts connections until every stream
//! of the flow has proved itself with its preamble (`preamble`). Strangers
//! (no, short or wrong preamble, a stream taken twice) are closed and
//! counted; they never take a stream's slot, and nothing they sent counts.

use std::collections::HashSet;
use std::io::{ErrorKind, Read};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use mio::{Interest, Registry, Token};
use socket2::{Domain, Protocol, Socket, Type};

use crate::transport::tcp::handshake::{self, Shake};
use crate::transport::tcp::preamble::{self, FlowAuth, Refusal, PREAMBLE_LEN};
use crate::transport::tcp::TcpError;

/// How long a connection may take to send its preamble. The real sender
/// writes it as soon as it connects; a slow stranger waits beside the
/// others, so it delays no one.
const PREAMBLE_WITHIN: Duration = Duration::from_secs(2);
/// Connections proving themselves at once; more are closed at once.
const PROVING_MAX: usize = 256;
/// Strangers kept per flow for the log, one per address.
const STRANGERS_SHOWN: usize = 16;

/// The receiving end of a flow before its senders connect.
/// The accept queue of a flow of few streams (what std's listeners ask for).
const BACKLOG: i32 = 128;

pub struct Listener {
    inner: TcpListener,
}

/// A flow's streams, in stream order, and the strangers turned away.
pub struct Accepted {
    pub streams: Vec<TcpStream>,
    /// Connections closed because they did not prove they were the flow's.
    pub refused: u64,
    /// The first of them from each address (at most `STRANGERS_SHOWN`).
    pub strangers: Vec<Stranger>,
}

/// A refused connection, for the log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stranger {
    pub peer: SocketAddr,
    pub why: Refusal,
    /// Its first bytes (at most a preamble's worth), as it sent them.
    pub sent: Vec<u8>,
}

/// A connection that has not sent all its preamble yet.
struct Proving {
    sock: mio::net::TcpStream,
    peer: SocketAddr,
    sent: Vec<u8>,
    until: Instant,
}

enum Progress {
    Waiting,
    /// All the preamble arrived, or all that will.
    Read,
}

impl Proving {
    fn read(&mut self) -> Progress {
        let mut buf = [0; PREAMBLE_LEN];
        // Never past the preamble: what follows it is the flow's payload.
        match self.sock.read(&mut buf[..PREAMBLE_LEN - self.sent.len()]) {
            Ok(0) => Progress::Read,
            Ok(n) => {
                self.sent.extend_from_slice(&buf[..n]);
                if self.sent.len() == PREAMBLE_LEN {
                    Progress::Read
                } else {
                    Progress::Waiting
                }
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => Progress::Waiting,
            Err(_) => Progress::Read,
        }
    }
}

#[derive(Default)]
struct Refused {
    count: u64,
    strangers: Vec<Stranger>,
    shown: HashSet<IpAddr>,
}

impl Refused {
    fn add(&mut self, peer: SocketAddr, why: Refusal, sent: Vec<u8>) {
        self.count += 1;
        if self.strangers.len() < STRANGERS_SHOWN && self.shown.insert(peer.ip()) {
            self.strangers.push(Stranger { peer, why, sent });
        }
    }
}

impl Listener {
    /// A listener on `ip` (any free port) that queues all of a flow's
    /// `streams` before it accepts one: a sender may connect as soon as it
    /// has its peers, while this end still waits for its own (the
    /// coordinator sends each rank its peers when they are known), and a
    /// full queue would leave its SYNs unanswered. The kernel caps the queue
    /// at net.core.somaxconn.
    pub fn bind(ip: IpAddr, streams: u32) -> Result<Listener, TcpError> {
        let listen = || -> std::io::Result<TcpListener> {
            let addr = SocketAddr::new(ip, 0);
            let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
            // As std's listeners: a port of a run just ended is free again.
            socket.set_reuse_address(true)?;
            socket.bind(&addr.into())?;
            socket.listen(i32::try_from(streams).unwrap_or(i32::MAX).max(BACKLOG))?;
            Ok(socket.into())
        };
        let inner = listen().map_err(|cause| TcpError::Listen { addr: ip, cause })?;
        Ok(Listener { inner })
    }

    /// Marks the flow's packets from this end (SYN-ACKs, ACKs, echoes) with
    /// `dscp`: the accepted connections inherit the listener's.
    pub fn mark(&self, dscp: u8) -> Result<(), TcpError> {
        let addr = self.local_addr().ip();
        crate::transport::tcp::dscp::mark(&self.inner, addr.is_ipv6(), dscp)
            .map_err(|cause| TcpError::Listen { addr, cause })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.inner.local_addr().expect("a bound listener has an address")
    }

    /// Accepts connections until each of the flow's `streams` has proved
    /// itself, within `timeout`; reads nothing past a preamble.
    pub fn accept(self, auth: &FlowAuth, streams: u32, timeout: Duration) -> Result<Accepted, TcpError> {
        let accepting = Accepting::new(self, *auth, streams)?;
        handshake::drive(vec![accepting], timeout).pop().expect("one end, one result")
    }
}

/// A receiving end accepting its flow's streams without blocking, so one
/// thread drives it beside every other end of its rank (`handshake`).
pub struct Accepting {
    listener: mio::net::TcpListener,
    auth: FlowAuth,
    slots: Vec<Option<TcpStream>>,
    proving: Vec<Proving>,
    refused: Refused,
}

impl Accepting {
    pub fn new(listener: Listener, auth: FlowAuth, streams: u32) -> Result<Accepting, TcpError> {
        let fail = |cause| TcpError::Listen { addr: listener.local_addr().ip(), cause };
        listener.inner.set_nonblocking(true).map_err(fail)?;
        Ok(Accepting {
            listener: mio::net::TcpListener::from_std(listener.inner),
            auth,
            slots: (0..streams).map(|_| None).collect(),
            proving: Vec::new(),
            refused: Refused::default(),
        })
    }

    fn fail(&self, cause: std::io::Error) -> TcpError {
        let addr = self.listener.local_addr().map_or(IpAddr::from([0, 0, 0, 0]), |a| a.ip());
        TcpError::Listen { addr, cause }
    }

    /// Takes every connection waiting in the queue: with edge-triggered
    /// readiness, one left there would never be announced again.
    fn take_arrivals(&mut self, registry: &Registry, token: Token, now: Instant) -> Result<(), TcpError> {
        loop {
            match self.listener.accept() {
                Ok((mut sock, peer)) => {
                    // A queue of real streams has sent its preambles already:
                    // they free their places before anyone is crowded out.
                    if self.proving.len() >= PROVING_MAX {
                        self.check_proving(registry, now)?;
                    }
                    if self.proving.len() >= PROVING_MAX {
                        self.refused.add(peer, Refusal::Crowded, Vec::new());
                        continue;
                    }
                    registry.register(&mut sock, token, Interest::READABLE).map_err(|e| self.fail(e))?;
                    self.proving.push(Proving { sock, peer, sent: Vec::new(), until: now + PREAMBLE_WITHIN });
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(cause) => return Err(self.fail(cause)),
            }
        }
    }

    /// Gives each connection that has sent its preamble (or run out of
    /// time) its stream's slot, or refuses it.
    fn check_proving(&mut self, registry: &Registry, now: Instant) -> Result<(), TcpError> {
        let mut k = 0;
        while k < self.proving.len() {
            let done = matches!(self.proving[k].read(), Progress::Read) || now >= self.proving[k].until;
            if !done {
                k += 1;
                continue;
            }
            let Proving { mut sock, peer, sent, .. } = self.proving.swap_remove(k);
            let taken: Vec<bool> = self.slots.iter().map(Option::is_some).collect();
            match preamble::check(&sent, &self.auth, &taken) {
                Ok(stream) => {
                    // Its engine registers it again, in its own epoll set.
                    registry.deregister(&mut sock).map_err(|e| self.fail(e))?;
                    let sock = TcpStream::from(sock);
                    sock.set_nonblocking(false).map_err(|e| self.fail(e))?;
                    self.slots[stream as usize] = Some(sock);
                }
                Err(why) => self.refused.add(peer, why, sent),
            }
        }
        Ok(())
    }
}

impl Shake for Accepting {
    type Output = Accepted;

    fn start(&mut self, registry: &Registry, token: Token) -> Result<(), TcpError> {
        registry.register(&mut self.listener, token, Interest::READABLE).map_err(|e| self.fail(e))
    }

    fn advance(&mut self, registry: &Registry, token: Token, now: Instant) -> Option<Result<Accepted, TcpError>> {
        let stepped = self.take_arrivals(registry, token, now).and_then(|()| self.check_proving(registry, now));
        if let Err(e) = stepped {
            return Some(Err(e));
        }
        if self.slots.iter().any(Option::is_none) {
            return None;
        }
        // Still proving when every stream is in: strangers, whatever they send next.
        let mut refused = std::mem::take(&mut self.refused);
        for p in self.proving.drain(..) {
            refused.add(p.peer, Refusal::Late, p.sent);
        }
        let streams = self.slots.drain(..).flatten().collect();
        Some(Ok(Accepted { streams, refused: refused.count, strangers: refused.strangers }))
    }

    fn expire(&mut self, timeout: Duration) -> TcpError {
        let accepted = self.slots.iter().flatten().count();
        let refused = self.refused.count + self.proving.len() as u64;
        TcpError::Accept { accepted, expected: self.slots.len() as u32, timeout, refused }
    }
}
