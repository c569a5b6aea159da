//! The worker's side of the control protocol, the I/O around `session`:
//! reads frames into the session, performs its actions (sends frames, runs
//! setup, connect and the phase off the async threads, stops streams) and
//! feeds it the clock. Nothing here decides anything.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};

use crate::control::framing::{pump, FrameError, FrameReader, FrameWriter};
use crate::control::wire::{Hello, ToCoordinator, ToWorker, MAGIC, PROTOCOL_VERSION};
use crate::hostfacts::HostFacts;
use crate::metrics::clock::Epoch;
use crate::transport::rdma::RdmaInventory;
use crate::worker::engine::FlowFailed;
use crate::worker::phase::{self, Connected, Opened, Stopper};
use crate::worker::session::{Action, Session, SessionError};

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error("cannot reach the coordinator at {addr} within {timeout:?}: {cause}")]
    Connect { addr: SocketAddr, timeout: Duration, cause: std::io::Error },
    #[error("the coordinator closed the connection")]
    Closed,
    #[error(transparent)]
    Session(#[from] SessionError),
    #[error("control connection: {0}")]
    Frame(FrameError),
}

/// Who this worker is, as the launcher told it.
pub struct Identity {
    pub job: u64,
    pub token: String,
    pub rank: usize,
    pub host: String,
    /// The host's address, where rank 0's coordinator listens.
    pub bind: IpAddr,
    /// Where this rank's data plane binds: its own address, else the host's.
    pub data: IpAddr,
}

type Work = crate::worker::session::Work<Opened, Connected>;

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
    // Every piece of work off the async threads reports here, in order: a
    // phase's last interval comes before its report.
    let (work, mut finished) = mpsc::unbounded_channel();

    let hello = Hello {
        magic: MAGIC,
        token: me.token.clone(),
        version: PROTOCOL_VERSION,
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        job: me.job,
        rank: me.rank,
        host: me.host.clone(),
        pid: std::process::id(),
    };
    let mut session = Session::new(hello, Epoch::now());
    let mut performer = Performer { rank: me.rank, data: me.data, out, work, stopper: None };
    let outcome = loop {
        if let Some(end) = performer.perform(&mut session) {
            break end.map_err(AgentError::from);
        }
        let due = session.poll_timeout();
        tokio::select! {
            // What arrived is heard before the clock judges the coordinator silent.
            biased;
            msg = reader.next() => match msg {
                Some(Ok(msg)) => session.handle(msg, Instant::now()),
                Some(Err(e)) => break Err(AgentError::Frame(e)),
                None => break Err(AgentError::Closed),
            },
            Some(done) = finished.recv() => session.finished(done),
            _ = shutdown.changed() => break Ok(()),
            () = sleep_until(due) => session.handle_timeout(Instant::now()),
        }
    };
    performer.stop_streams();
    drop(session);
    drop(performer);
    let _ = tokio::time::timeout(Duration::from_secs(1), writer).await;
    outcome
}

/// Carries out the session's actions.
struct Performer {
    rank: usize,
    /// Where the rank's flow ends bind.
    data: IpAddr,
    out: mpsc::UnboundedSender<ToCoordinator>,
    work: mpsc::UnboundedSender<Work>,
    /// The streams of the last phase started.
    stopper: Option<Stopper>,
}

impl Performer {
    /// Performs every queued action; `Some` when the session is over.
    fn perform(&mut self, session: &mut Session<Opened, Connected>) -> Option<Result<(), SessionError>> {
        while let Some(action) = session.poll() {
            match action {
                Action::Send(msg) => {
                    let _ = self.out.send(msg);
                }
                // Opening devices, registering memory and connecting can take
                // seconds (more under emulation): off the async threads, which
                // carry the heartbeats (and, on rank 0, the coordinator).
                Action::Probe { gpus, lldp } => self.off_thread(move || {
                    let (inventory, facts) = (RdmaInventory::of_this_host(), Box::new(HostFacts::of_this_host()));
                    let preflight = super::gpu::preflight(&gpus, &facts);
                    let neighbours = lldp.then(crate::hostfacts::lldp::of_this_host);
                    Work::Probed(inventory, facts, preflight, neighbours)
                }),
                Action::Prepare { phase, flows, stress } => {
                    let data = self.data;
                    self.off_thread(move || {
                        let result = phase::prepare(phase, flows, stress, data);
                        Work::Prepared { phase, result }
                    })
                }
                Action::Connect { phase, ends, peers } => {
                    self.off_thread(move || Work::Connected { phase, result: ends.connect(&peers) })
                }
                Action::Start { phase, links, t0_ns, window, clock } => {
                    let work = self.work.clone();
                    let progress = move |interval, span_ns, ends| {
                        let _ = work.send(Work::Interval { phase, interval, span_ns, ends });
                    };
                    let work = self.work.clone();
                    let failed: FlowFailed = Arc::new(move |error| {
                        let _ = work.send(Work::FlowFailed { phase, error });
                    });
                    let running = links.start(self.rank, clock.instant_of(t0_ns), window, clock, progress, failed);
                    self.stopper = Some(running.stopper());
                    self.off_thread(move || Work::Report(Box::new(running.join())));
                }
                Action::StopStreams => self.stop_streams(),
                Action::Exit(result) => return Some(result),
            }
        }
        None
    }

    fn off_thread(&self, job: impl FnOnce() -> Work + Send + 'static) {
        let work = self.work.clone();
        drop(tokio::task::spawn_blocking(move || {
            let _ = work.send(job());
        }));
    }

    fn stop_streams(&self) {
        if let Some(stopper) = &self.stopper {
            stopper.stop();
        }
    }
}

/// Sleeps until `due`; forever when there is nothing due.
async fn sleep_until(due: Option<Instant>) {
    match due {
        Some(due) => tokio::time::sleep_until(due.into()).await,
        None => std::future::pending().await,
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
