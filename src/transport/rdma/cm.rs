//! Connecting a flow's QPs through rdma_cm (`connect = "rdma_cm"`, pair
//! `-R`). The coordinator still exchanges the endpoints and times the run;
//! what rdma_cm adds is the handshake to the peer's data address, which
//! supplies the path (GID, MTU), the peer's QP number and both PSNs. The
//! receiver listens on its rank's address and reports it in its endpoint;
//! the sender resolves that address and route and connects, one CM id per
//! QP. The QPs are the flow's own (created by `connect::prepare`), moved
//! through RTR and RTS with the attributes rdma_cm gives (rdma_init_qp_attr),
//! as librdmacm asks of QPs it did not create. librdmacm is opened at run
//! time by rdma-mummy-sys, like libibverbs.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sideway::ibverbs::device_context::DeviceContext;
use sideway::ibverbs::queue_pair::{QueuePairAttribute, QueuePairState};
use sideway::rdmacm::communication_manager::{
    BindAddressErrorKind, ConnectionParameter, EventChannel, EventType, GetEventErrorKind, Identifier, PortSpace,
};

use super::device::OpenDevice;
use super::endpoint::RdmaEndpoint;
use super::error::RdmaError;

/// How long the whole handshake of a flow may take (address, route, every QP).
const HANDSHAKE_WITHIN: Duration = Duration::from_secs(10);
/// Address and route resolution, each (rdma_resolve_addr / _route's timeout).
const RESOLVE_WITHIN: Duration = Duration::from_secs(2);
/// How often the rdma_cm ends' empty event channels are looked at again
/// (the handshake is setup, not the data path).
pub const EVENT_POLL: Duration = Duration::from_millis(1);
/// The listener's port is picked in this range (rdma_cm's own port space,
/// apart from TCP's), trying the next one while it is taken.
const PORTS: std::ops::RangeInclusive<u16> = 20_000..=60_999;
const PORT_TRIES: u16 = 256;

/// A flow's rdma_cm state: its event channel, and on the passive end the
/// listener; the connected ids stay here for the flow's life.
pub(crate) struct Cm {
    local: IpAddr,
    channel: Arc<EventChannel>,
    listener: Option<(Arc<Identifier>, SocketAddr)>,
    connected: Vec<Arc<Identifier>>,
}

impl Cm {
    /// Where the passive end listens (its endpoint carries it).
    pub(crate) fn listen_addr(&self) -> Option<SocketAddr> {
        self.listener.as_ref().map(|(_, addr)| *addr)
    }
}

fn cm_err(flow: &str, step: impl Into<String>, reason: impl std::fmt::Display) -> RdmaError {
    RdmaError::Cm { flow: flow.to_string(), step: step.into(), reason: reason.to_string() }
}

/// The rank's data address as rdma_cm can use it: not loopback (rdma_cm
/// binds to an RDMA netdev's address) and, for IPv6, not link-local (it
/// would need a scope the hostfile does not give).
pub(crate) fn check_address(flow: &str, ip: IpAddr) -> Result<(), RdmaError> {
    let bad = |why: &str| Err(cm_err(flow, format!("address {ip}"), why));
    if ip.is_loopback() || ip.is_unspecified() {
        return bad("is not the address of an RDMA netdev; connect = \"rdma_cm\" needs the ranks' data addresses \
             in the hostfile (loopback ranks connect with connect = \"verbs\")");
    }
    if let IpAddr::V6(v6) = ip {
        if v6.segments()[0] & 0xffc0 == 0xfe80 {
            return bad("is IPv6 link-local; give a global or unique-local IPv6 address, or IPv4");
        }
    }
    Ok(())
}

/// Opens the event channel; a missing librdmacm (EOPNOTSUPP from
/// rdma-mummy-sys) and a missing /dev/infiniband/rdma_cm are named.
fn open_channel(flow: &str) -> Result<Arc<EventChannel>, RdmaError> {
    let channel = EventChannel::new().map_err(|e| {
        let cause = std::error::Error::source(&e).map(|s| s.to_string()).unwrap_or_else(|| e.to_string());
        let os =
            std::error::Error::source(&e).and_then(|s| s.downcast_ref::<io::Error>()).and_then(io::Error::raw_os_error);
        let hint = match os {
            Some(libc::EOPNOTSUPP) => {
                "librdmacm.so.1 could not be loaded: install rdma-core's librdmacm (Debian: librdmacm1), \
                 or use connect = \"verbs\""
            }
            _ => "is the rdma_ucm kernel module loaded (/dev/infiniband/rdma_cm)?",
        };
        cm_err(flow, "rdma_create_event_channel", format!("{cause}; {hint}"))
    })?;
    channel.set_nonblocking(true).map_err(|e| cm_err(flow, "event channel O_NONBLOCK", e))?;
    Ok(channel)
}

/// The passive end: listens on `local` (a port of [`PORTS`]) for the flow's QPs.
pub(crate) fn listen(flow: &str, local: IpAddr, qps: usize) -> Result<Cm, RdmaError> {
    check_address(flow, local)?;
    let channel = open_channel(flow)?;
    let id = channel.create_id(PortSpace::Tcp).map_err(|e| cm_err(flow, "rdma_create_id", e))?;
    let span = PORTS.end() - PORTS.start() + 1;
    // Ranks of one host start at different ports, so they rarely try the same.
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    let first = ((std::process::id() ^ nanos) % u32::from(span)) as u16;
    let mut last = None;
    for k in 0..PORT_TRIES {
        let addr = SocketAddr::new(local, PORTS.start() + (first + k) % span);
        match id.bind_addr(addr) {
            Ok(()) => {
                id.listen(qps.clamp(1, 1024) as i32).map_err(|e| cm_err(flow, format!("rdma_listen on {addr}"), e))?;
                return Ok(Cm { local, channel, listener: Some((id, addr)), connected: Vec::new() });
            }
            Err(e) => {
                // Taken: the next port; anything else (not this host's address): no port helps.
                let taken =
                    matches!(&e.source, BindAddressErrorKind::Rdmacm(io) if io.kind() == io::ErrorKind::AddrInUse);
                last = Some(e);
                if !taken {
                    break;
                }
            }
        }
    }
    let last = last.map(|e| std::error::Error::source(&e).map(|s| s.to_string()).unwrap_or_else(|| e.to_string()));
    Err(cm_err(flow, format!("rdma_bind_addr on {local}"), last.unwrap_or_default()))
}

/// The active end: connects from `local` when the peer's address is known.
pub(crate) fn dialer(flow: &str, local: IpAddr) -> Result<Cm, RdmaError> {
    check_address(flow, local)?;
    Ok(Cm { local, channel: open_channel(flow)?, listener: None, connected: Vec::new() })
}

/// One event of a flow's channel, acknowledged.
struct CmEvent {
    kind: EventType,
    status: i32,
    id: Option<Arc<Identifier>>,
}

/// The channel's next event, if one is waiting; past `deadline` with none,
/// the error names what was awaited.
fn try_event(
    flow: &str,
    channel: &Arc<EventChannel>,
    awaiting: &str,
    deadline: Instant,
) -> Result<Option<CmEvent>, RdmaError> {
    match channel.get_cm_event() {
        Ok(ev) => {
            let event = CmEvent { kind: ev.event_type(), status: ev.status(), id: ev.cm_id() };
            ev.ack().map_err(|e| cm_err(flow, "rdma_ack_cm_event", e))?;
            Ok(Some(event))
        }
        Err(e) if matches!(e.0, GetEventErrorKind::NoEvent) && Instant::now() < deadline => Ok(None),
        Err(e) if matches!(e.0, GetEventErrorKind::NoEvent) => Err(cm_err(
            flow,
            format!("awaiting {awaiting}"),
            format!("nothing within {HANDSHAKE_WITHIN:?} (is the peer's address reachable over its RDMA netdev?)"),
        )),
        Err(e) => Err(cm_err(flow, format!("rdma_get_cm_event awaiting {awaiting}"), e)),
    }
}

/// `got` is `want`, or the error says what came instead.
fn expected(flow: &str, want: EventType, got: &CmEvent) -> Result<(), RdmaError> {
    let (got, status) = (&got.kind, got.status);
    if *got == want && status == 0 {
        return Ok(());
    }
    let reason = match got {
        EventType::Rejected => format!("the peer rejected the connection (status {status})"),
        _ => format!("got {got:?} (status {status}: {})", io::Error::from_raw_os_error(status.abs())),
    };
    Err(cm_err(flow, format!("awaiting {want:?}"), reason))
}

/// The id resolved to the flow's own device and port, or an error naming both.
fn same_device(flow: &str, dev: &OpenDevice, id: &Identifier) -> Result<(), RdmaError> {
    let guid = |ctx: &DeviceContext| ctx.query_device().ok().map(|a| a.attr.orig_attr.node_guid);
    let theirs = id.get_device_context();
    if theirs.as_deref().and_then(guid).is_some_and(|g| Some(g) == guid(&dev.ctx)) && id.port() == dev.port {
        return Ok(());
    }
    Err(cm_err(
        flow,
        "device",
        format!(
            "rdma_cm resolved the address to another device or port (port {}) than the flow's {} port {}; \
             name the device whose netdev carries the rank's address",
            id.port(),
            dev.name,
            dev.port
        ),
    ))
}

/// rdma_cm's RTR and RTS attributes for the QP behind `id` (path, peer QP
/// number, PSNs; the flow adds its timers when it applies them).
fn qp_attrs(flow: &str, id: &Identifier) -> Result<(QueuePairAttribute, QueuePairAttribute), RdmaError> {
    let rtr = id.get_qp_attr(QueuePairState::ReadyToReceive).map_err(|e| cm_err(flow, "rdma_init_qp_attr(RTR)", e))?;
    let rts = id.get_qp_attr(QueuePairState::ReadyToSend).map_err(|e| cm_err(flow, "rdma_init_qp_attr(RTS)", e))?;
    Ok((rtr, rts))
}

fn conn_param(qpn: u32) -> ConnectionParameter {
    let mut p = ConnectionParameter::default();
    p.setup_qp_number(qpn);
    p
}

/// What the handshake moves a QP with: its index in the flow and rdma_cm's
/// RTR and RTS attributes; the flow's QP state machine applies them.
pub(crate) type Ready<'a> = dyn FnMut(usize, QueuePairAttribute, QueuePairAttribute) -> Result<(), RdmaError> + 'a;

/// One flow's handshake under way, moved on by [`Cm::advance`] without
/// blocking, so that one thread drives every rdma_cm end of a rank.
pub(crate) struct Handshake {
    /// The flow's QPs: index and QP number each.
    qps: Vec<(usize, u32)>,
    peer: RdmaEndpoint,
    deadline: Instant,
    side: HandshakeSide,
}

enum HandshakeSide {
    /// The sender: QP `next` of the flow's, its id awaiting `step`.
    Dial { to: SocketAddr, next: usize, id: Option<(Arc<Identifier>, DialStep)> },
    /// The receiver: which QPs a request took, and how many are established.
    Accept { taken: Vec<bool>, established: usize },
}

/// The event a dialing id awaits next.
#[derive(Clone, Copy)]
enum DialStep {
    Address,
    Route,
    Response,
}

impl Handshake {
    /// The peer's endpoint the flow connects to.
    pub(crate) fn peer(&self) -> &RdmaEndpoint {
        &self.peer
    }
}

impl Cm {
    /// Begins connecting the flow's QPs (`qps`: index and QP number each):
    /// the sender dials the peer's listener, the receiver accepts the
    /// sender's QPs (told apart by the QP numbers the peer's endpoint lists).
    pub(crate) fn handshake(
        &self,
        flow: &str,
        qps: Vec<(usize, u32)>,
        peer: &RdmaEndpoint,
    ) -> Result<Handshake, RdmaError> {
        let side = match self.listener {
            Some(_) => HandshakeSide::Accept { taken: vec![false; qps.len()], established: 0 },
            None => {
                let to = peer.cm_addr.ok_or_else(|| {
                    cm_err(flow, "peer address", "the peer's endpoint has no rdma_cm address (it connects with verbs)")
                })?;
                check_address(flow, to.ip())?;
                HandshakeSide::Dial { to, next: 0, id: None }
            }
        };
        Ok(Handshake { qps, peer: peer.clone(), deadline: Instant::now() + HANDSHAKE_WITHIN, side })
    }

    /// Takes every event waiting on the flow's channel and moves the
    /// handshake on; `ready` moves each QP to RTS before it is established
    /// or accepted. `true` once every QP is connected.
    pub(crate) fn advance(
        &mut self,
        hs: &mut Handshake,
        flow: &str,
        dev: &OpenDevice,
        ready: &mut Ready,
    ) -> Result<bool, RdmaError> {
        match hs.side {
            HandshakeSide::Dial { .. } => self.dial(hs, flow, dev, ready),
            HandshakeSide::Accept { .. } => self.accept(hs, flow, dev, ready),
        }
    }

    fn dial(&mut self, hs: &mut Handshake, flow: &str, dev: &OpenDevice, ready: &mut Ready) -> Result<bool, RdmaError> {
        let HandshakeSide::Dial { to, next, id } = &mut hs.side else { unreachable!("a dialing handshake") };
        loop {
            let Some(&(i, qpn)) = hs.qps.get(*next) else { return Ok(true) };
            let Some((cm_id, step)) = id.clone() else {
                let cm_id = self.channel.create_id(PortSpace::Tcp).map_err(|e| cm_err(flow, "rdma_create_id", e))?;
                cm_id
                    .resolve_addr(Some(SocketAddr::new(self.local, 0)), *to, RESOLVE_WITHIN)
                    .map_err(|e| cm_err(flow, format!("rdma_resolve_addr {} -> {to}", self.local), e))?;
                *id = Some((cm_id, DialStep::Address));
                continue;
            };
            let want = match step {
                DialStep::Address => EventType::AddressResolved,
                DialStep::Route => EventType::RouteResolved,
                DialStep::Response => EventType::ConnectResponse,
            };
            let Some(got) = try_event(flow, &self.channel, &format!("{want:?}"), hs.deadline)? else {
                return Ok(false);
            };
            expected(flow, want, &got)?;
            match step {
                DialStep::Address => {
                    same_device(flow, dev, &cm_id)?;
                    cm_id
                        .resolve_route(RESOLVE_WITHIN)
                        .map_err(|e| cm_err(flow, format!("rdma_resolve_route to {to}"), e))?;
                    *id = Some((cm_id, DialStep::Route));
                }
                DialStep::Route => {
                    cm_id.connect(conn_param(qpn)).map_err(|e| cm_err(flow, format!("rdma_connect to {to}"), e))?;
                    *id = Some((cm_id, DialStep::Response));
                }
                DialStep::Response => {
                    let (rtr, rts) = qp_attrs(flow, &cm_id)?;
                    ready(i, rtr, rts)?;
                    cm_id.establish().map_err(|e| cm_err(flow, "rdma_establish", e))?;
                    self.connected.push(cm_id);
                    (*id, *next) = (None, *next + 1);
                }
            }
        }
    }

    fn accept(
        &mut self,
        hs: &mut Handshake,
        flow: &str,
        dev: &OpenDevice,
        ready: &mut Ready,
    ) -> Result<bool, RdmaError> {
        let HandshakeSide::Accept { taken, established } = &mut hs.side else { unreachable!("an accepting handshake") };
        while *established < hs.qps.len() {
            let awaiting = "the peer's connections";
            let Some(CmEvent { kind, status, id }) = try_event(flow, &self.channel, awaiting, hs.deadline)? else {
                return Ok(false);
            };
            let Some(id) = id else { continue };
            match kind {
                EventType::ConnectRequest => {
                    let (rtr, rts) = qp_attrs(flow, &id)?;
                    // A request from a QP the peer's endpoint does not list is
                    // not this flow's: dropping its id rejects it.
                    let Some(i) = which_qp(&rtr, &hs.peer, taken) else { continue };
                    same_device(flow, dev, &id)?;
                    taken[i] = true;
                    let &(_, qpn) = hs.qps.iter().find(|(index, _)| *index == i).expect("the flow has QP i");
                    ready(i, rtr, rts)?;
                    id.accept(conn_param(qpn)).map_err(|e| cm_err(flow, format!("rdma_accept for QP {i}"), e))?;
                    self.connected.push(id);
                }
                EventType::Established if self.connected.iter().any(|c| Arc::ptr_eq(c, &id)) => *established += 1,
                other => {
                    return Err(cm_err(flow, "awaiting Established", format!("got {other:?} (status {status})")));
                }
            }
        }
        Ok(true)
    }
}

/// The flow's QP a connect request is for: the one whose peer QP number it carries.
fn which_qp(rtr: &QueuePairAttribute, peer: &RdmaEndpoint, taken: &[bool]) -> Option<usize> {
    peer.qpns.iter().zip(taken).position(|(&qpn, &t)| qpn == rtr.dest_qp_num() && !t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_rdma_cm_cannot_bind_are_refused_by_name() {
        let e = check_address("flow 0 1->0", "127.0.0.2".parse().unwrap()).unwrap_err().to_string();
        assert_eq!(
            e,
            "flow 0 1->0: rdma_cm address 127.0.0.2: is not the address of an RDMA netdev; connect = \"rdma_cm\" needs the ranks' data addresses in the hostfile (loopback ranks connect with connect = \"verbs\")"
        );
        let e = check_address("f", "fe80::5054:ff:fe12:3456".parse().unwrap()).unwrap_err().to_string();
        assert!(e.ends_with("is IPv6 link-local; give a global or unique-local IPv6 address, or IPv4"), "{e}");
        assert!(check_address("f", "::1".parse().unwrap()).is_err());
        check_address("f", "10.0.2.15".parse().unwrap()).unwrap();
        check_address("f", "fd00:fb::1".parse().unwrap()).unwrap();
    }

    #[test]
    fn requests_map_to_the_qp_the_peer_listed() {
        let peer = RdmaEndpoint { qpns: vec![0x11, 0x12, 0x13], ..RdmaEndpoint::default() };
        let mut rtr = QueuePairAttribute::new();
        rtr.setup_dest_qp_num(0x12);
        assert_eq!(which_qp(&rtr, &peer, &[false; 3]), Some(1));
        assert_eq!(which_qp(&rtr, &peer, &[false, true, false]), None, "taken once");
        rtr.setup_dest_qp_num(0x99);
        assert_eq!(which_qp(&rtr, &peer, &[false; 3]), None, "a stranger");
    }

    /// On a host without RDMA the error names rdma_cm's device file (or
    /// the library, where librdmacm is absent), never a panic.
    #[test]
    fn listening_without_rdma_says_what_is_missing() {
        if std::path::Path::new("/dev/infiniband/rdma_cm").exists() {
            return; // an RDMA host: the VM tests connect for real
        }
        let e = listen("f", "10.0.2.15".parse().unwrap(), 1).err().expect("no rdma_cm here").to_string();
        assert!(e.starts_with("f: rdma_cm rdma_create_event_channel: "), "{e}");
        assert!(e.contains("/dev/infiniband/rdma_cm") || e.contains("librdmacm.so.1 could not be loaded"), "{e}");
    }
}
