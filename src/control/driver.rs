//! The tokio layer around the sans-IO coordinator: accepts connections,
//! turns frames into inputs, carries outputs to the right socket, wakes the
//! coordinator when it asks to be (`poll_timeout`). Nothing here decides
//! anything.

use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;

use crate::control::coordinator::{ConnId, Coordinator, Event, Output};
use crate::control::framing::{pump, FrameError, FrameReader, FrameWriter};
use crate::control::instruction::Instruction;
use crate::control::wire::{decode_hello, ToCoordinator, ToWorker, HELLO_MAX};
use crate::histogram::{self, Decoded};

/// Connections the kernel queues until they are accepted. Every rank
/// connects at once; with the usual 128, a job of more ranks loses SYNs and
/// waits for their retransmission (1 s, then 3 s). The kernel caps this at
/// net.core.somaxconn.
const ACCEPT_QUEUE: i32 = 65_535;
/// How long queued frames (the final Bye) may take to flush.
const FLUSH: Duration = Duration::from_secs(2);

enum Inbound {
    Frame(ConnId, ToCoordinator),
    Garbage(ConnId, String),
    Closed(ConnId),
}

struct Conn {
    peer: SocketAddr,
    /// Until the connection is admitted: nothing is ever sent to a
    /// stranger, so it gets no writer task and no write buffer.
    write: Option<OwnedWriteHalf>,
    writer: Option<mpsc::UnboundedSender<ToWorker>>,
    reader: JoinHandle<()>,
    /// Lets the reader take frames of every size: the Hello was valid.
    /// It carries how many latency histograms a frame may decode.
    admit: Option<oneshot::Sender<usize>>,
}

/// How long accepting pauses after the kernel refused a connection (EMFILE,
/// ENFILE, ENOBUFS): the coordinator's timeouts and every rank's frames go
/// on meanwhile.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);
/// Addresses whose strangers were reported (each once); beyond this many, no more.
const LOGGED_PEERS: usize = 4096;

/// The coordinator's listening socket on `addr` (port 0: any free port),
/// not yet tied to a runtime: [`drive`] takes it into the one it runs on.
pub fn listen(addr: SocketAddr) -> std::io::Result<std::net::TcpListener> {
    let socket = socket2::Socket::new(socket2::Domain::for_address(addr), socket2::Type::STREAM, None)?;
    socket.set_reuse_address(true)?;
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    socket.listen(ACCEPT_QUEUE)?;
    Ok(socket.into())
}

/// Runs [`drive`] on a thread of its own, on a single-threaded runtime,
/// until the coordinator is done or `stop` turns true; the thread's end is
/// the returned receiver's. Every frame wakes a connection's reader, the
/// driver and a writer: on one thread those wake-ups are function calls,
/// where on a shared two-thread runtime they were futex calls and
/// interrupts between cores (rank 0's CPU: a fifth to a third less,
/// docs/PERFORMANCE.md).
pub fn spawn(
    listener: std::net::TcpListener,
    coordinator: Coordinator,
    instructions: mpsc::UnboundedReceiver<Instruction>,
    mut stop: watch::Receiver<bool>,
    on_event: impl FnMut(Event) + Send + 'static,
) -> std::io::Result<oneshot::Receiver<()>> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let (ended, end) = oneshot::channel();
    std::thread::Builder::new().name("coordinator".into()).spawn(move || {
        runtime.block_on(async {
            tokio::select! {
                () = drive(listener, coordinator, instructions, on_event) => {}
                _ = stop.wait_for(|stopped| *stopped) => {}
            }
        });
        let _ = ended.send(());
    })?;
    Ok(end)
}

/// Runs the coordinator until it is done, handing every event to `on_event`
/// and every instruction from the launcher to the coordinator (a sender
/// that is gone sends none).
pub async fn drive(
    listener: std::net::TcpListener,
    mut coordinator: Coordinator,
    mut instructions: mpsc::UnboundedReceiver<Instruction>,
    mut on_event: impl FnMut(Event),
) {
    let listener = match TcpListener::from_std(listener) {
        Ok(listener) => listener,
        Err(e) => {
            coordinator.stop(&format!("cannot accept control connections: {e}"), Instant::now());
            while let Some(output) = coordinator.poll() {
                if let Output::Event(event) = output {
                    on_event(event);
                }
            }
            return;
        }
    };
    let (inbound_tx, mut inbound) = mpsc::unbounded_channel();
    let mut d = Driver {
        coordinator,
        conns: HashMap::new(),
        writers: Vec::new(),
        next_id: 0,
        accept_paused: None,
        logged: HashSet::new(),
        inbound: inbound_tx,
    };
    // One timer, moved to each new deadline: a frame does not cost one.
    let timer = tokio::time::sleep(Duration::ZERO);
    tokio::pin!(timer);
    let mut finished = false;
    while let Some(due) = d.coordinator.poll_timeout() {
        let due = tokio::time::Instant::from_std(due);
        if timer.deadline() != due {
            timer.as_mut().reset(due);
        }
        let accepting = d.accept_paused.is_none_or(|until| tokio::time::Instant::now() >= until);
        tokio::select! {
            // What arrived is heard before the clock judges anyone silent.
            biased;
            Some(input) = inbound.recv() => d.heard(input),
            accepted = listener.accept(), if accepting => d.accepted(accepted),
            () = tokio::time::sleep(ACCEPT_BACKOFF), if !accepting => {}
            () = &mut timer => d.coordinator.handle_timeout(Instant::now()),
            Some(instruction) = instructions.recv() => match instruction {
                Instruction::Stop { reason } => d.coordinator.stop(&reason, Instant::now()),
                Instruction::Saved { phase } => d.coordinator.saved(phase, Instant::now()),
            },
        }
        finished |= d.carry_outputs(&mut on_event);
    }
    d.close().await;
    // Told only once every Bye is flushed: the launcher stops the workers
    // when it hears it, and one that saw its connection close before its
    // Bye would report the coordinator gone.
    if finished {
        on_event(Event::Finished);
    }
}

/// The sockets around the coordinator while [`drive`] runs it.
struct Driver {
    coordinator: Coordinator,
    conns: HashMap<ConnId, Conn>,
    writers: Vec<JoinHandle<()>>,
    next_id: ConnId,
    /// Accepting waits until then after the kernel refused a connection.
    accept_paused: Option<tokio::time::Instant>,
    /// Addresses whose strangers were reported.
    logged: HashSet<IpAddr>,
    inbound: mpsc::UnboundedSender<Inbound>,
}

impl Driver {
    /// What a connection's reader passed on.
    fn heard(&mut self, input: Inbound) {
        match input {
            Inbound::Frame(id, msg) => self.coordinator.handle(id, msg, Instant::now()),
            Inbound::Garbage(id, reason) => self.coordinator.protocol_error(id, &reason, Instant::now()),
            Inbound::Closed(id) => {
                self.conns.remove(&id);
                self.coordinator.closed(id, Instant::now());
            }
        }
    }

    /// A new connection, unless the kernel refused it (accepting pauses) or
    /// too many strangers are waiting (it is closed at once).
    fn accepted(&mut self, accepted: std::io::Result<(TcpStream, SocketAddr)>) {
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(e) => {
                if self.accept_paused.is_none() {
                    tracing::warn!("cannot accept control connections ({e}); pausing {ACCEPT_BACKOFF:?} at a time");
                }
                self.accept_paused = Some(tokio::time::Instant::now() + ACCEPT_BACKOFF);
                return;
            }
        };
        self.accept_paused = None;
        // Read each time: an administrator may lower it under a running process.
        let open_files = crate::fdlimit::current().unwrap_or(u64::MAX);
        if !self.coordinator.accepts_more(open_files) {
            if self.logged.len() < LOGGED_PEERS && self.logged.insert(peer.ip()) {
                tracing::warn!("control connection from {peer} closed: too many have not said Hello yet");
            }
            return;
        }
        let _ = stream.set_nodelay(true);
        let id = self.next_id;
        self.next_id += 1;
        let (read, write) = stream.into_split();
        let (admit, admitted) = oneshot::channel();
        let frames = FrameReader::with_limit(read, HELLO_MAX);
        let reader = tokio::spawn(read_frames(id, frames, admitted, self.inbound.clone()));
        self.conns.insert(id, Conn { peer, write: Some(write), writer: None, reader, admit: Some(admit) });
        self.coordinator.connected(id, Instant::now());
    }

    /// Carries every output of the coordinator to its socket or to `on_event`.
    /// Hands the coordinator's outputs on; `true` when one was `Finished`,
    /// which is held back until the connections are closed.
    fn carry_outputs(&mut self, on_event: &mut impl FnMut(Event)) -> bool {
        let mut finished = false;
        while let Some(output) = self.coordinator.poll() {
            match output {
                Output::Send(id, msg) => {
                    if let Some(w) = self.conns.get(&id).and_then(|c| c.writer.as_ref()) {
                        let _ = w.send(msg);
                    }
                }
                Output::Admit(id) => self.admit(id),
                Output::Close(id) => {
                    if let Some(conn) = self.conns.remove(&id) {
                        conn.reader.abort();
                    }
                }
                // A stranger is reported once per address: a flood of them
                // must not flood the operator's terminal.
                Output::Event(Event::Rejected { conn, reason }) => {
                    let Some(peer) = self.conns.get(&conn).map(|c| c.peer) else { continue };
                    if self.logged.len() < LOGGED_PEERS && self.logged.insert(peer.ip()) {
                        let reason = format!("{reason} (from {peer}; later ones from its address are not shown)");
                        on_event(Event::Rejected { conn, reason });
                    }
                }
                Output::Event(Event::Finished) => finished = true,
                Output::Event(event) => on_event(event),
            }
        }
        finished
    }

    /// The connection said a valid Hello: it gets a writer, and its reader
    /// takes frames of every size.
    fn admit(&mut self, id: ConnId) {
        let Some(conn) = self.conns.get_mut(&id) else { return };
        if let Some(write) = conn.write.take() {
            let (writer, queue) = mpsc::unbounded_channel();
            self.writers.push(tokio::spawn(pump(FrameWriter::new(write), queue)));
            conn.writer = Some(writer);
        }
        if let Some(admit) = conn.admit.take() {
            let _ = admit.send(self.coordinator.histogram_budget(id));
        }
    }

    /// Closes every queue so the writers flush what is left (Bye) and end.
    async fn close(mut self) {
        for conn in self.conns.values_mut() {
            conn.writer = None;
        }
        let _ = tokio::time::timeout(FLUSH, futures::future::join_all(self.writers)).await;
        for conn in self.conns.into_values() {
            conn.reader.abort();
        }
    }
}

/// A rank's connection reset or aborted: its worker was killed, or its
/// host went down with data unread (the kernel answers with RST, not FIN).
/// That is a lost connection, as an orderly close is, not a garbled stream.
fn is_lost(e: &FrameError) -> bool {
    use std::io::ErrorKind::{BrokenPipe, ConnectionAborted, ConnectionReset};
    matches!(e, FrameError::Io(io) if matches!(io.kind(), ConnectionReset | ConnectionAborted | BrokenPipe))
}

/// Reads one Hello-sized first frame as a Hello only; then, once the
/// coordinator admits the connection, every message up to the frame limit,
/// each decoding at most the latency histograms the admission allows.
async fn read_frames(
    id: ConnId,
    mut reader: FrameReader<tokio::net::tcp::OwnedReadHalf, ToCoordinator>,
    admitted: oneshot::Receiver<usize>,
    inbound: mpsc::UnboundedSender<Inbound>,
) {
    let first = match reader.next_frame().await {
        Some(Ok(frame)) => match decode_hello(&frame) {
            Ok(hello) => Inbound::Frame(id, ToCoordinator::Hello(hello)),
            Err(reason) => Inbound::Garbage(id, reason.to_string()),
        },
        Some(Err(e)) => Inbound::Garbage(id, e.to_string()),
        None => Inbound::Closed(id),
    };
    let hello = matches!(first, Inbound::Frame(..));
    if inbound.send(first).is_err() || !hello {
        return;
    }
    let Ok(histograms) = admitted.await else { return };
    reader.lift_limit();
    loop {
        let input = match reader.next_frame().await {
            Some(Ok(frame)) => match histogram::decode_within(histograms, || postcard::from_bytes(&frame)) {
                Decoded { value: Ok(msg), .. } => Inbound::Frame(id, msg),
                Decoded { value: Err(_), overdrawn: true } => {
                    let reason = format!(
                        "a frame carried more than {histograms} latency histograms, the most a report of this rank may carry"
                    );
                    let _ = inbound.send(Inbound::Garbage(id, reason));
                    return;
                }
                Decoded { value: Err(e), overdrawn: false } => {
                    let _ = inbound.send(Inbound::Garbage(id, FrameError::Decode(e).to_string()));
                    return;
                }
            },
            Some(Err(e)) if is_lost(&e) => Inbound::Closed(id),
            Some(Err(e)) => {
                let _ = inbound.send(Inbound::Garbage(id, e.to_string()));
                return;
            }
            None => Inbound::Closed(id),
        };
        let closed = matches!(input, Inbound::Closed(_));
        if inbound.send(input).is_err() || closed {
            return;
        }
    }
}
