//! The sending end of a TCP flow: dials all its streams at once without
//! blocking and writes each one's preamble, so one thread drives it beside
//! every other end of its rank (`handshake`).

use std::io::{self, ErrorKind, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use mio::{Interest, Registry, Token};
use socket2::{Domain, Protocol, Socket, Type};

use crate::transport::tcp::handshake::Shake;
use crate::transport::tcp::preamble::{self, FlowAuth, PREAMBLE_LEN};
use crate::transport::tcp::{dscp, TcpError};

/// Streams of one end connected but not yet through their preamble, at
/// most: the kernel completes a connect before this thread writes, and a
/// receiver closes connections past its `PROVING_MAX` unproved ones as
/// crowded (real streams among them, were all of a large flow dialed at once).
const IN_FLIGHT: usize = 32;

/// Where a sending end dials from and to, and how.
pub struct DialPlan {
    /// This rank's address: traffic leaves through it.
    pub local: IpAddr,
    pub peer: SocketAddr,
    pub auth: FlowAuth,
    pub streams: u32,
    /// Marks every packet of the streams, their SYNs included.
    pub dscp: Option<u8>,
    /// How long a connected stream's blocking writes may wait later (as
    /// the blocking dial set them): the connect timeout.
    pub write_timeout: Duration,
}

/// A sending end: its plan, and its streams so far.
pub struct Dialing {
    plan: DialPlan,
    dials: Vec<Dial>,
}

/// One stream: connecting until `written` is some, done at a whole preamble.
struct Dial {
    sock: mio::net::TcpStream,
    written: Option<usize>,
}

impl Dialing {
    pub fn new(plan: DialPlan) -> Dialing {
        Dialing { plan, dials: Vec::new() }
    }

    fn fail(&self, stream: usize, cause: io::Error) -> TcpError {
        TcpError::Connect { stream: stream as u32, local: self.plan.local, peer: self.plan.peer, cause }
    }

    /// A socket bound to this rank's address (traffic leaves through it),
    /// marked, its connect begun.
    fn open(&self) -> io::Result<mio::net::TcpStream> {
        let DialPlan { local, peer, dscp, .. } = self.plan;
        let socket = Socket::new(Domain::for_address(peer), Type::STREAM, Some(Protocol::TCP))?;
        socket.set_nonblocking(true)?;
        if let Some(dscp) = dscp {
            dscp::mark(&socket, peer.is_ipv6(), dscp)?;
        }
        socket.bind(&SocketAddr::new(local, 0).into())?;
        match socket.connect(&peer.into()) {
            Ok(()) => {}
            // The connect goes on in the kernel; `step` learns how it ended.
            Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
            Err(e) => return Err(e),
        }
        Ok(mio::net::TcpStream::from_std(socket.into()))
    }

    /// Moves stream `k` on as far as it goes now.
    fn step(&mut self, k: usize) -> io::Result<()> {
        let dial = &mut self.dials[k];
        if dial.written.is_none() {
            if let Some(e) = dial.sock.take_error()? {
                return Err(e);
            }
            // Connected once it has a peer (mio's way to learn a nonblocking connect's end).
            match dial.sock.peer_addr() {
                Ok(_) => dial.written = Some(0),
                Err(e) if e.kind() == ErrorKind::NotConnected => return Ok(()),
                Err(e) => return Err(e),
            }
        }
        let preamble = preamble::encode(&self.plan.auth, k as u32);
        while let Some(written) = dial.written.filter(|&w| w < PREAMBLE_LEN) {
            match dial.sock.write(&preamble[written..]) {
                Ok(0) => return Err(ErrorKind::WriteZero.into()),
                Ok(n) => dial.written = Some(written + n),
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Begins the next dials while fewer than `IN_FLIGHT` have yet to
    /// write their preamble.
    fn open_more(&mut self, registry: &Registry, token: Token) -> Result<(), TcpError> {
        let mut in_flight = self.dials.iter().filter(|d| d.written != Some(PREAMBLE_LEN)).count();
        while self.dials.len() < self.plan.streams as usize && in_flight < IN_FLIGHT {
            let k = self.dials.len();
            let mut sock = self.open().map_err(|e| self.fail(k, e))?;
            registry.register(&mut sock, token, Interest::WRITABLE).map_err(|e| self.fail(k, e))?;
            self.dials.push(Dial { sock, written: None });
            // A loopback or near peer has answered already: its preamble
            // goes now, not after every other end's dials have begun (the
            // receiver gives a connection only `PREAMBLE_WITHIN` for it).
            self.step(k).map_err(|e| self.fail(k, e))?;
            in_flight += 1;
        }
        Ok(())
    }

    /// The streams, handed over blocking as the engines expect them.
    fn finish(&mut self, registry: &Registry) -> Result<Vec<TcpStream>, TcpError> {
        let write_timeout = self.plan.write_timeout;
        let dials = std::mem::take(&mut self.dials);
        let mut streams = Vec::with_capacity(dials.len());
        for (k, mut dial) in dials.into_iter().enumerate() {
            let handed = registry.deregister(&mut dial.sock).and_then(|()| {
                let sock = TcpStream::from(dial.sock);
                sock.set_nonblocking(false)?;
                sock.set_write_timeout(Some(write_timeout))?;
                Ok(sock)
            });
            streams.push(handed.map_err(|e| self.fail(k, e))?);
        }
        Ok(streams)
    }
}

impl Shake for Dialing {
    type Output = Vec<TcpStream>;

    fn start(&mut self, registry: &Registry, token: Token) -> Result<(), TcpError> {
        self.open_more(registry, token)
    }

    fn advance(&mut self, registry: &Registry, token: Token, _: Instant) -> Option<Result<Vec<TcpStream>, TcpError>> {
        for k in 0..self.dials.len() {
            if let Err(e) = self.step(k) {
                return Some(Err(self.fail(k, e)));
            }
        }
        if let Err(e) = self.open_more(registry, token) {
            return Some(Err(e));
        }
        let done = self.dials.len() == self.plan.streams as usize
            && self.dials.iter().all(|d| d.written == Some(PREAMBLE_LEN));
        done.then(|| self.finish(registry))
    }

    /// The first stream not yet through, as the blocking dial's timeout named it.
    fn expire(&mut self, _: Duration) -> TcpError {
        let k = self.dials.iter().position(|d| d.written != Some(PREAMBLE_LEN)).unwrap_or(self.dials.len());
        self.fail(k, io::Error::new(ErrorKind::TimedOut, "connection timed out"))
    }
}
