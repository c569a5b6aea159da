//! Connecting a rank's ends of a phase's flows: every TCP end on the
//! calling thread, as nonblocking handshakes driven together
//! (`tcp::handshake`), so thousands of ends need no thread each; RDMA
//! ends connected through verbs on a few threads (moving QPs to RTS waits
//! for no peer, but resolving a RoCE peer's MAC may wait on ARP, so a few
//! at once), and every end connected through rdma_cm on one thread more,
//! their handshakes driven together as the TCP ones are.

use std::net::IpAddr;
use std::sync::Mutex;

use super::{Connected, Link, Opened, Opening, PhaseError, CONNECT_TIMEOUT};
use crate::control::printable;
use crate::control::wire::{Endpoint, FlowEndpoint, FlowRole};
use crate::plan::ConnectMethod;
use crate::transport::rdma::{self, RdmaEndpoint};
use crate::transport::tcp::handshake;
use crate::transport::tcp::{Handshake, Shaken};
use crate::transport::{tcp, Side};
use crate::worker::streams::Rail;

/// How many threads connect a rank's verbs RDMA ends.
const RDMA_CONNECTORS: usize = 8;

/// Connecting one end's RDMA rails.
type RdmaJob = Box<dyn FnOnce() -> Result<Link, PhaseError> + Send>;

/// One end's rails to connect through rdma_cm, and the peer's rail each meets.
struct CmJob {
    flow: u32,
    side: Side,
    rails: Vec<Rail<rdma::PreparedFlow>>,
    peer: Vec<RdmaEndpoint>,
}

/// An end being connected: its TCP handshake's place among the rank's,
/// its verbs RDMA rails' place among the rank's jobs, or its place among
/// the rank's rdma_cm ends.
enum Connecting {
    Tcp(usize),
    Rdma(usize),
    RdmaCm(usize),
}

/// What [`begin`] adds an end to.
struct Begins<'a> {
    handshakes: &'a mut Vec<Handshake>,
    jobs: &'a mut Vec<RdmaJob>,
    cm: &'a mut Vec<CmJob>,
}

impl Opened {
    /// Connects every end to its peer's, all at once (a rank may be both
    /// ends of a flow, and a TCP receiver waits for its sender). Each end
    /// succeeds or fails alone; the first failing end in order is the error.
    pub fn connect(self, peers: &[FlowEndpoint]) -> Result<Connected, PhaseError> {
        let Opened { context, ends } = self;
        let (mut handshakes, mut jobs, mut cm) = (Vec::new(), Vec::new(), Vec::new());
        let mut begins = Begins { handshakes: &mut handshakes, jobs: &mut jobs, cm: &mut cm };
        let pending = ends
            .into_iter()
            .map(|(role, opening)| {
                let connecting = begin(&role, opening, peers, context.bind, &mut begins)?;
                Ok((role, connecting))
            })
            .collect::<Result<Vec<_>, PhaseError>>()?;
        let (shaken, linked, cm_linked) = std::thread::scope(|scope| {
            let linked = scope.spawn(|| pooled(jobs, RDMA_CONNECTORS));
            let cm_linked = (!cm.is_empty()).then(|| scope.spawn(|| drive_cm(cm)));
            let shaken = handshake::drive(handshakes, CONNECT_TIMEOUT);
            let join = "connect threads do not panic";
            (shaken, linked.join().expect(join), cm_linked.map(|t| t.join().expect(join)).unwrap_or_default())
        });
        let ends = finish(pending, shaken, linked, cm_linked)?;
        Ok(Connected { context, ends })
    }
}

/// Runs `jobs` on at most `threads` threads at once; their results, in order.
fn pooled<T: Send>(jobs: Vec<Box<dyn FnOnce() -> T + Send + '_>>, threads: usize) -> Vec<T> {
    let count = jobs.len();
    let queue = Mutex::new(jobs.into_iter().enumerate());
    let done = Mutex::new(Vec::with_capacity(count));
    let next = || queue.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).next();
    std::thread::scope(|scope| {
        for _ in 0..threads.min(count) {
            scope.spawn(|| {
                while let Some((k, job)) = next() {
                    let result = job();
                    done.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).push((k, result));
                }
            });
        }
    });
    let mut done = done.into_inner().unwrap_or_else(|poisoned| poisoned.into_inner());
    done.sort_unstable_by_key(|(k, _)| *k);
    done.into_iter().map(|(_, result)| result).collect()
}

/// Begins connecting one end: a TCP end joins the handshakes, a verbs
/// RDMA end the jobs, an rdma_cm end the rdma_cm ends.
fn begin(
    role: &FlowRole,
    opening: Opening,
    peers: &[FlowEndpoint],
    bind: IpAddr,
    begins: &mut Begins,
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
            if role.group.rdma.as_ref().is_some_and(|p| p.knobs.connect == ConnectMethod::RdmaCm) {
                begins.cm.push(CmJob { flow, side, rails, peer });
                return Ok(Connecting::RdmaCm(begins.cm.len() - 1));
            }
            let connect = move || {
                rails
                    .into_iter()
                    .zip(&peer)
                    .map(|(Rail { flow, device, node }, endpoint)| {
                        Ok(Rail { flow: flow.connect(endpoint)?, device, node })
                    })
                    .collect::<Result<Vec<_>, _>>()
                    .map(Link::Rdma)
                    .map_err(|cause| PhaseError::Rdma { flow, side, cause })
            };
            begins.jobs.push(Box::new(connect));
            return Ok(Connecting::Rdma(begins.jobs.len() - 1));
        }
        _ => return Err(PhaseError::NoPeer { flow }),
    };
    begins.handshakes.push(handshake);
    Ok(Connecting::Tcp(begins.handshakes.len() - 1))
}

/// Connects every rdma_cm end on this thread: each rail's handshake begun,
/// then every rail's moved on by the events its channel has until each is
/// connected or failed (its end with it); their links, in order.
fn drive_cm(jobs: Vec<CmJob>) -> Vec<Result<Link, PhaseError>> {
    let mut ends: Vec<(u32, Side, Result<Vec<CmRail>, rdma::RdmaError>)> =
        jobs.into_iter().map(|job| (job.flow, job.side, begin_cm(job.rails, &job.peer))).collect();
    loop {
        let mut waiting = false;
        for (_, _, end) in &mut ends {
            let Ok(rails) = end else { continue };
            match advance_cm(rails) {
                Ok(done) => waiting |= !done,
                Err(e) => *end = Err(e),
            }
        }
        if !waiting {
            break;
        }
        std::thread::sleep(rdma::CM_EVENT_POLL);
    }
    let connected = |(Rail { flow, device, node }, _): CmRail| {
        let flow = match flow {
            rdma::Begun::Connected(flow) => *flow,
            rdma::Begun::Handshaking(shaken) => shaken.finish(),
        };
        Rail { flow, device, node }
    };
    let link = |(flow, side, end): (u32, Side, Result<Vec<CmRail>, rdma::RdmaError>)| match end {
        Ok(rails) => Ok(Link::Rdma(rails.into_iter().map(connected).collect())),
        Err(cause) => Err(PhaseError::Rdma { flow, side, cause }),
    };
    ends.into_iter().map(link).collect()
}

/// A rail of an rdma_cm end: its handshake begun, and whether it is connected.
type CmRail = (Rail<rdma::Begun>, bool);

/// One rdma_cm end's rails, each rail's handshake begun.
fn begin_cm(rails: Vec<Rail<rdma::PreparedFlow>>, peer: &[RdmaEndpoint]) -> Result<Vec<CmRail>, rdma::RdmaError> {
    rails
        .into_iter()
        .zip(peer)
        .map(|(Rail { flow, device, node }, endpoint)| {
            let begun = flow.begin_connect(endpoint)?;
            let done = matches!(begun, rdma::Begun::Connected(_));
            Ok((Rail { flow: begun, device, node }, done))
        })
        .collect()
}

/// Moves every rail of one rdma_cm end on; `true` once all are connected.
fn advance_cm(rails: &mut [CmRail]) -> Result<bool, rdma::RdmaError> {
    for (rail, done) in rails.iter_mut().filter(|(_, done)| !*done) {
        if let rdma::Begun::Handshaking(shaking) = &mut rail.flow {
            *done = shaking.advance()?;
        }
    }
    Ok(rails.iter().all(|(_, done)| *done))
}

/// Every end's link, in order, once every RDMA thread is joined; else the
/// first end's error in order.
fn finish(
    pending: Vec<(FlowRole, Connecting)>,
    shaken: Vec<Result<Shaken, tcp::TcpError>>,
    linked: Vec<Result<Link, PhaseError>>,
    cm_linked: Vec<Result<Link, PhaseError>>,
) -> Result<Vec<(FlowRole, Link)>, PhaseError> {
    let mut shaken: Vec<_> = shaken.into_iter().map(Some).collect();
    let mut linked: Vec<_> = linked.into_iter().map(Some).collect();
    let mut cm_linked: Vec<_> = cm_linked.into_iter().map(Some).collect();
    let mut connected = Vec::with_capacity(pending.len());
    let mut first_error = None;
    for (role, connecting) in pending {
        let (flow, side) = (role.flow.id, role.side);
        let link = match connecting {
            Connecting::Rdma(k) => linked[k].take().expect("each RDMA end is taken once"),
            Connecting::RdmaCm(k) => cm_linked[k].take().expect("each rdma_cm end is taken once"),
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    use std::time::Duration;

    #[test]
    fn pooled_jobs_run_a_few_at_a_time_and_answer_in_order() {
        let (running, most) = (AtomicUsize::new(0), AtomicUsize::new(0));
        let jobs: Vec<Box<dyn FnOnce() -> usize + Send + '_>> = (0..20usize)
            .map(|k| {
                let (running, most) = (&running, &most);
                Box::new(move || {
                    most.fetch_max(running.fetch_add(1, SeqCst) + 1, SeqCst);
                    std::thread::sleep(Duration::from_millis(2 + k as u64 % 3));
                    running.fetch_sub(1, SeqCst);
                    k * 10
                }) as Box<dyn FnOnce() -> usize + Send>
            })
            .collect();
        let done = pooled(jobs, 4);
        assert_eq!(done, (0..20).map(|k| k * 10).collect::<Vec<_>>());
        let most = most.load(SeqCst);
        assert!((1..=4).contains(&most), "{most} at once");
        assert!(pooled(Vec::<Box<dyn FnOnce() -> u8 + Send>>::new(), 4).is_empty(), "no job, no thread");
    }
}
