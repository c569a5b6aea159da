//! Connecting a rank's ends of a phase's flows: every TCP end on the
//! calling thread, as nonblocking handshakes driven together
//! (`tcp::handshake`), so thousands of ends need no thread each; each RDMA
//! end on its own thread, as rdma_cm blocks while it waits for its peer.

use std::net::IpAddr;
use std::thread::JoinHandle;

use super::{Connected, Link, Opened, Opening, PhaseError, CONNECT_TIMEOUT};
use crate::control::printable;
use crate::control::wire::{Endpoint, FlowEndpoint, FlowRole};
use crate::transport::tcp::handshake::{self, Handshake, Shaken};
use crate::transport::{tcp, Side};
use crate::worker::streams::Rail;

/// An end being connected: its TCP handshake's place among the rank's, or
/// the thread connecting its RDMA rails.
enum Connecting {
    Tcp(usize),
    Rdma(JoinHandle<Result<Link, PhaseError>>),
}

impl Opened {
    /// Connects every end to its peer's, all at once (a rank may be both
    /// ends of a flow, and a TCP receiver waits for its sender). Each end
    /// succeeds or fails alone; the first failing end in order is the error.
    pub fn connect(self, peers: &[FlowEndpoint]) -> Result<Connected, PhaseError> {
        let Opened { context, ends } = self;
        let mut handshakes = Vec::new();
        let pending = ends
            .into_iter()
            .map(|(role, opening)| {
                let connecting = begin(&role, opening, peers, context.bind, &mut handshakes)?;
                Ok((role, connecting))
            })
            .collect::<Result<Vec<_>, PhaseError>>()?;
        let shaken = handshake::drive(handshakes, CONNECT_TIMEOUT);
        let ends = finish(pending, shaken)?;
        Ok(Connected { context, ends })
    }
}

/// Begins connecting one end: a TCP end joins `handshakes`, an RDMA end
/// gets its thread.
fn begin(
    role: &FlowRole,
    opening: Opening,
    peers: &[FlowEndpoint],
    bind: IpAddr,
    handshakes: &mut Vec<Handshake>,
) -> Result<Connecting, PhaseError> {
    let (flow, side, streams) = (role.flow.id, role.side, role.group.streams);
    let far = match side {
        Side::Sender => Side::Receiver,
        Side::Receiver => Side::Sender,
    };
    let peer = peers.iter().find(|p| p.flow == flow && p.side == far).map(|p| p.endpoint.clone());
    let auth = tcp::FlowAuth { flow, proof: role.proof };
    let handshake = match (opening, peer) {
        (Opening::Listen(l), _) => {
            let accepting =
                tcp::Accepting::new(l, auth, streams).map_err(|cause| PhaseError::Tcp { flow, side, cause })?;
            Handshake::Accept(accepting)
        }
        (Opening::Dial, Some(Endpoint::Tcp { addr })) => Handshake::Dial(tcp::Dialing::new(tcp::DialPlan {
            local: bind,
            peer: addr,
            auth,
            streams,
            dscp: role.group.dscp,
            write_timeout: CONNECT_TIMEOUT,
        })),
        // Both ends split the flow into rails from the same group knobs: rail k meets rail k.
        (Opening::Rdma(rails), Some(Endpoint::Rdma(peer))) if rails.len() == peer.len() => {
            return Ok(Connecting::Rdma(std::thread::spawn(move || {
                rails
                    .into_iter()
                    .zip(&peer)
                    .map(|(Rail { flow, device, node }, endpoint)| {
                        Ok(Rail { flow: flow.connect(endpoint)?, device, node })
                    })
                    .collect::<Result<Vec<_>, _>>()
                    .map(Link::Rdma)
                    .map_err(|cause| PhaseError::Rdma { flow, side, cause })
            })));
        }
        _ => return Err(PhaseError::NoPeer { flow }),
    };
    handshakes.push(handshake);
    Ok(Connecting::Tcp(handshakes.len() - 1))
}

/// Every end's link, in order, once every RDMA thread is joined; else the
/// first end's error in order.
fn finish(
    pending: Vec<(FlowRole, Connecting)>,
    shaken: Vec<Result<Shaken, tcp::TcpError>>,
) -> Result<Vec<(FlowRole, Link)>, PhaseError> {
    let mut shaken: Vec<_> = shaken.into_iter().map(Some).collect();
    let mut connected = Vec::with_capacity(pending.len());
    let mut first_error = None;
    for (role, connecting) in pending {
        let (flow, side) = (role.flow.id, role.side);
        let link = match connecting {
            Connecting::Rdma(task) => task.join().expect("connect threads do not panic"),
            Connecting::Tcp(k) => match shaken[k].take().expect("each handshake is taken once") {
                Ok(Shaken::Accepted(accepted)) => {
                    log_strangers(flow, &accepted.strangers);
                    Ok(Link::Tcp { streams: accepted.streams, refused: accepted.refused })
                }
                Ok(Shaken::Dialed(streams)) => Ok(Link::Tcp { streams, refused: 0 }),
                Err(cause) => Err(PhaseError::Tcp { flow, side, cause }),
            },
        };
        match link {
            Ok(link) => connected.push((role, link)),
            Err(e) => first_error = first_error.or(Some(e)),
        }
    }
    first_error.map_or(Ok(connected), Err)
}

/// Each stranger once per address (the transport keeps the first few),
/// what it sent escaped and cut short: it can neither write escape codes
/// to the operator's terminal nor flood it.
fn log_strangers(flow: u32, strangers: &[tcp::Stranger]) {
    for s in strangers {
        let sent = printable(&String::from_utf8_lossy(&s.sent));
        tracing::warn!(
            "flow {flow}: refused a data connection from {}: {} (it sent `{sent}`; later ones from its address are not shown)",
            s.peer,
            s.why
        );
    }
}
