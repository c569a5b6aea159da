//! Connecting a rank's ends of a phase's flows: every TCP end on the
//! calling thread, as nonblocking handshakes driven together
//! (`tcp::handshake`), so thousands of ends need no thread each; RDMA
//! ends connected through verbs on a few threads (moving QPs to RTS waits
//! for no peer, but resolving a RoCE peer's MAC may wait on ARP, so a few
//! at once), and each end connected through rdma_cm on its own thread, as
//! its handshake blocks while it waits for its peer.

use std::net::IpAddr;
use std::sync::Mutex;
use std::thread::JoinHandle;

use super::{Connected, Link, Opened, Opening, PhaseError, CONNECT_TIMEOUT};
use crate::control::printable;
use crate::control::wire::{Endpoint, FlowEndpoint, FlowRole};
use crate::plan::ConnectMethod;
use crate::transport::tcp::handshake;
use crate::transport::tcp::{Handshake, Shaken};
use crate::transport::{tcp, Side};
use crate::worker::streams::Rail;

/// How many threads connect a rank's verbs RDMA ends.
const RDMA_CONNECTORS: usize = 8;

/// Connecting one end's RDMA rails.
type RdmaJob = Box<dyn FnOnce() -> Result<Link, PhaseError> + Send>;

/// An end being connected: its TCP handshake's place among the rank's,
/// its verbs RDMA rails' place among the rank's jobs, or the thread
/// connecting its rails through rdma_cm.
enum Connecting {
    Tcp(usize),
    Rdma(usize),
    RdmaCm(JoinHandle<Result<Link, PhaseError>>),
}

impl Opened {
    /// Connects every end to its peer's, all at once (a rank may be both
    /// ends of a flow, and a TCP receiver waits for its sender). Each end
    /// succeeds or fails alone; the first failing end in order is the error.
    pub fn connect(self, peers: &[FlowEndpoint]) -> Result<Connected, PhaseError> {
        let Opened { context, ends } = self;
        let (mut handshakes, mut jobs) = (Vec::new(), Vec::new());
        let pending = ends
            .into_iter()
            .map(|(role, opening)| {
                let connecting = begin(&role, opening, peers, context.bind, (&mut handshakes, &mut jobs))?;
                Ok((role, connecting))
            })
            .collect::<Result<Vec<_>, PhaseError>>()?;
        let (shaken, linked) = std::thread::scope(|scope| {
            let linked = scope.spawn(|| pooled(jobs, RDMA_CONNECTORS));
            let shaken = handshake::drive(handshakes, CONNECT_TIMEOUT);
            (shaken, linked.join().expect("connect threads do not panic"))
        });
        let ends = finish(pending, shaken, linked)?;
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

/// Begins connecting one end: a TCP end joins `handshakes`, a verbs RDMA
/// end `jobs`; an rdma_cm end gets its thread.
fn begin(
    role: &FlowRole,
    opening: Opening,
    peers: &[FlowEndpoint],
    bind: IpAddr,
    (handshakes, jobs): (&mut Vec<Handshake>, &mut Vec<RdmaJob>),
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
            let cm = role.group.rdma.as_ref().is_some_and(|p| p.knobs.connect == ConnectMethod::RdmaCm);
            if cm {
                return Ok(Connecting::RdmaCm(std::thread::spawn(connect)));
            }
            jobs.push(Box::new(connect));
            return Ok(Connecting::Rdma(jobs.len() - 1));
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
    linked: Vec<Result<Link, PhaseError>>,
) -> Result<Vec<(FlowRole, Link)>, PhaseError> {
    let mut shaken: Vec<_> = shaken.into_iter().map(Some).collect();
    let mut linked: Vec<_> = linked.into_iter().map(Some).collect();
    let mut connected = Vec::with_capacity(pending.len());
    let mut first_error = None;
    for (role, connecting) in pending {
        let (flow, side) = (role.flow.id, role.side);
        let link = match connecting {
            Connecting::Rdma(k) => linked[k].take().expect("each RDMA end is taken once"),
            Connecting::RdmaCm(task) => task.join().expect("connect threads do not panic"),
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
