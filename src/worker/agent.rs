//! The worker's side of the control protocol: say Hello, then follow the
//! coordinator's steps for each phase while the data path runs on threads.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use crate::control::framing::{pump, FrameError, FrameReader, FrameWriter};
use crate::control::wire::{FlowEndpoint, Hello, ToCoordinator, ToWorker, MAGIC, PROTOCOL_VERSION};
use crate::metrics::clock::{now_ns, PeerClock};
use crate::metrics::RankReport;
use crate::transport::rdma::RdmaInventory;
use crate::worker::phase::{self, Connected, FlowFailed, PhaseError, Prepared, Stopper};

/// A coordinator silent this long is gone: the worker stops and exits.
const LEASE: Duration = Duration::from_secs(5);
const HEARTBEAT: Duration = Duration::from_millis(500);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error("cannot reach the coordinator at {addr} within {timeout:?}: {cause}")]
    Connect { addr: SocketAddr, timeout: Duration, cause: std::io::Error },
    #[error("the coordinator closed the connection{0}")]
    Closed(&'static str),
    #[error("the coordinator was silent for {0:?} (heartbeat lease expired)")]
    Silent(Duration),
    #[error("control connection: {0}")]
    Frame(FrameError),
}

/// Who this worker is, as the launcher told it.
pub struct Identity {
    pub job: u64,
    pub token: String,
    pub rank: usize,
    pub host: String,
    pub bind: IpAddr,
}

/// Blocking work in flight, finishing into the next protocol step.
enum Step {
    Prepared(usize, Result<(Prepared, Vec<FlowEndpoint>), PhaseError>),
    Connected(usize, Result<Connected, PhaseError>),
    Report(RankReport),
}

/// Runs the protocol until Bye, an error, or `shutdown` (stdin closed).
pub async fn run(
    me: &Identity,
    coordinator: SocketAddr,
    mut shutdown: watch::Receiver<bool>,
) -> Result<(), AgentError> {
    let stream = connect(coordinator).await?;
    let _ = stream.set_nodelay(true);
    let (read, write) = stream.into_split();
    let mut reader: FrameReader<_, ToWorker> = FrameReader::new(read);
    let (out, queue) = mpsc::unbounded_channel();
    let writer = tokio::spawn(pump(FrameWriter::new(write), queue));

    let sent_ns = now_ns();
    let _ = out.send(ToCoordinator::Hello(Hello {
        magic: MAGIC,
        token: me.token.clone(),
        version: PROTOCOL_VERSION,
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        job: me.job,
        rank: me.rank,
        host: me.host.clone(),
        pid: std::process::id(),
    }));
    let clock = match next(&mut reader).await? {
        ToWorker::Welcome { now_ns: coordinator_ns } => PeerClock::estimate(sent_ns, coordinator_ns, now_ns()),
        _ => return Err(AgentError::Closed(" before welcoming this rank")),
    };
    // Once per run, off the async threads: opening every device takes a while.
    let prober = out.clone();
    drop(tokio::task::spawn_blocking(move || {
        let _ = prober.send(ToCoordinator::Probe(RdmaInventory::of_this_host()));
    }));
    let heartbeat = {
        let out = out.clone();
        tokio::spawn(async move {
            // The Hello just sent counts: the first heartbeat is due one interval later.
            let mut every = tokio::time::interval_at(tokio::time::Instant::now() + HEARTBEAT, HEARTBEAT);
            loop {
                every.tick().await;
                if out.send(ToCoordinator::Heartbeat).is_err() {
                    break;
                }
            }
        })
    };

    let mut session = Session {
        rank: me.rank,
        bind: me.bind,
        clock,
        out: out.clone(),
        prepared: None,
        connected: None,
        stopper: None,
    };
    let mut step: Option<JoinHandle<Step>> = None;
    let outcome = loop {
        tokio::select! {
            msg = next(&mut reader) => match msg {
                Ok(ToWorker::Bye) => break Ok(()),
                Ok(msg) => {
                    if let Some(work) = session.handle(msg) {
                        step = Some(work);
                    }
                }
                Err(e) => break Err(e),
            },
            done = async { step.as_mut().expect("guarded").await }, if step.is_some() => {
                step = None;
                if let Ok(done) = done {
                    session.finished(done);
                }
            }
            _ = shutdown.changed() => break Ok(()),
        }
    };
    session.stop();
    heartbeat.abort();
    drop(session);
    drop(out);
    let _ = tokio::time::timeout(Duration::from_secs(1), writer).await;
    outcome
}

struct Session {
    rank: usize,
    bind: IpAddr,
    clock: PeerClock,
    out: mpsc::UnboundedSender<ToCoordinator>,
    prepared: Option<(usize, Prepared)>,
    connected: Option<(usize, Connected)>,
    stopper: Option<Stopper>,
}

impl Session {
    /// Acts on one message; blocking work comes back as a task.
    fn handle(&mut self, msg: ToWorker) -> Option<JoinHandle<Step>> {
        match msg {
            ToWorker::Setup { phase, flows, stress } => {
                // Opening devices and registering memory can take seconds
                // (more under emulation): off the async threads, which carry
                // the heartbeats (and, on rank 0, the coordinator).
                let bind = self.bind;
                Some(tokio::task::spawn_blocking(move || {
                    Step::Prepared(phase, phase::prepare(phase, flows, stress, bind))
                }))
            }
            ToWorker::Peers { phase, peers } => {
                let (_, prepared) = self.prepared.take().filter(|(p, _)| *p == phase)?;
                Some(tokio::task::spawn_blocking(move || Step::Connected(phase, prepared.connect(&peers))))
            }
            ToWorker::Start { phase, t0_ns, window } => {
                let (_, connected) = self.connected.take().filter(|(p, _)| *p == phase)?;
                let out = self.out.clone();
                let progress = move |interval, tx_bytes, rx_bytes| {
                    let _ = out.send(ToCoordinator::Progress { phase, interval, tx_bytes, rx_bytes });
                };
                let out = self.out.clone();
                let failed: FlowFailed = Arc::new(move |error| {
                    let _ = out.send(ToCoordinator::Failed { phase, error });
                });
                let t0 = self.clock.instant_of(t0_ns);
                let running = connected.start(self.rank, t0, window, self.clock, progress, failed);
                self.stopper = Some(running.stopper());
                Some(tokio::task::spawn_blocking(move || Step::Report(running.join())))
            }
            ToWorker::Abort { reason } => {
                tracing::warn!("rank {}: run aborted: {reason}", self.rank);
                self.stop();
                None
            }
            ToWorker::Welcome { .. } | ToWorker::Heartbeat | ToWorker::Bye => None,
        }
    }

    fn finished(&mut self, step: Step) {
        match step {
            Step::Prepared(phase, Ok((prepared, endpoints))) => {
                self.prepared = Some((phase, prepared));
                self.send(ToCoordinator::Endpoints { phase, endpoints });
            }
            Step::Prepared(phase, Err(e)) | Step::Connected(phase, Err(e)) => {
                self.send(ToCoordinator::Failed { phase, error: e.to_string() })
            }
            Step::Connected(phase, Ok(connected)) => {
                self.connected = Some((phase, connected));
                self.send(ToCoordinator::Ready { phase });
            }
            Step::Report(report) => {
                self.stopper = None;
                self.send(ToCoordinator::Report(Box::new(report)));
            }
        }
    }

    fn stop(&mut self) {
        if let Some(stopper) = &self.stopper {
            stopper.stop();
        }
    }

    fn send(&self, msg: ToCoordinator) {
        let _ = self.out.send(msg);
    }
}

async fn connect(addr: SocketAddr) -> Result<TcpStream, AgentError> {
    // Rank 0 listens before the others start; retry briefly in case a
    // launcher raced ahead.
    let deadline = tokio::time::Instant::now() + CONNECT_TIMEOUT;
    loop {
        match TcpStream::connect(addr).await {
            Ok(s) => return Ok(s),
            Err(cause) if tokio::time::Instant::now() >= deadline => {
                return Err(AgentError::Connect { addr, timeout: CONNECT_TIMEOUT, cause })
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

async fn next(reader: &mut FrameReader<tokio::net::tcp::OwnedReadHalf, ToWorker>) -> Result<ToWorker, AgentError> {
    match tokio::time::timeout(LEASE, reader.next()).await {
        Err(_) => Err(AgentError::Silent(LEASE)),
        Ok(None) => Err(AgentError::Closed("")),
        Ok(Some(frame)) => frame.map_err(AgentError::Frame),
    }
}
