//! Either end of a TCP flow as one [`Shake`], so that a rank connects its
//! receiving and sending ends in one `handshake::drive`.

use std::net::TcpStream;
use std::time::{Duration, Instant};

use mio::{Registry, Token};

use crate::transport::tcp::handshake::Shake;
use crate::transport::tcp::{Accepted, Accepting, Dialing, TcpError};

/// Either end of a TCP flow.
pub enum Handshake {
    Accept(Accepting),
    Dial(Dialing),
}

/// A connected end: the receiver's streams and strangers, or the sender's streams.
pub enum Shaken {
    Accepted(Accepted),
    Dialed(Vec<TcpStream>),
}

impl Shake for Handshake {
    type Output = Shaken;

    fn start(&mut self, registry: &Registry, token: Token) -> Result<(), TcpError> {
        match self {
            Handshake::Accept(a) => a.start(registry, token),
            Handshake::Dial(d) => d.start(registry, token),
        }
    }

    fn advance(&mut self, registry: &Registry, token: Token, now: Instant) -> Option<Result<Shaken, TcpError>> {
        match self {
            Handshake::Accept(a) => a.advance(registry, token, now).map(|r| r.map(Shaken::Accepted)),
            Handshake::Dial(d) => d.advance(registry, token, now).map(|r| r.map(Shaken::Dialed)),
        }
    }

    fn expire(&mut self, timeout: Duration) -> TcpError {
        match self {
            Handshake::Accept(a) => a.expire(timeout),
            Handshake::Dial(d) => d.expire(timeout),
        }
    }
}
