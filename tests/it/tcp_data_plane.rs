//! The TCP data plane with real loopback sockets, each stream a task on an
//! engine as a worker runs it: a stranger on a receiver's port takes no
//! stream's slot and adds no byte to the flow.

use std::io::{BufRead, BufReader, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::process::Child;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::common::{self, Bench};
use fabricbench::metrics::cpu::ThreadBook;
use fabricbench::transport::tcp::{self, Accepted, FlowAuth, FlowProof, Listener, Refusal, Role};
use fabricbench::transport::FlowCounters;
use fabricbench::worker::engine::{EndState, Engine};

const LOOPBACK: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);
const AUTH: FlowAuth = FlowAuth { flow: 3, proof: FlowProof([0x42; 32]) };
const TIMEOUT: Duration = Duration::from_secs(10);
/// A sender's window that does not close while a test runs.
const OPEN: Duration = Duration::from_secs(60);

/// One flow end whose streams run on an engine of their own.
struct End {
    state: Arc<EndState>,
    counters: Arc<FlowCounters>,
    engine: JoinHandle<()>,
}

impl End {
    /// Runs `socks` as one end's lanes, each in `role`, from `t0` in a
    /// window closing at `close`, until they are done (`stop`: the phase's end).
    fn run(
        socks: Vec<TcpStream>,
        role: impl Fn() -> Role,
        sender: bool,
        window: (Instant, Instant),
        stop: &Arc<AtomicBool>,
    ) -> End {
        let (state, counters) = (Arc::<EndState>::default(), Arc::<FlowCounters>::default());
        let tasks = socks
            .into_iter()
            .map(|sock| tcp::task(sock, vec![0xA5; 65536], counters.clone(), role(), None).unwrap())
            .collect();
        let engine =
            Engine::of_end(tasks, &state, sender).spawn(window.0, window.1, stop.clone(), ThreadBook::default());
        End { state, counters, engine }
    }

    /// Sends until `stop`, from `t0`.
    fn send(socks: Vec<TcpStream>, t0: Instant, stop: &Arc<AtomicBool>) -> End {
        End::run(socks, || Role::Send { per_s: None }, true, (t0, t0 + OPEN), stop)
    }

    /// Receives from now until the senders close; after `stop`, drains as
    /// the end of a window closing at `close` does.
    fn receive(socks: Vec<TcpStream>, close: Instant, stop: &Arc<AtomicBool>) -> End {
        End::run(socks, || Role::Receive { message_size: 65536, close }, false, (Instant::now(), close), stop)
    }

    /// Once every lane is done: the end's bytes, or its first error.
    fn bytes(self) -> Result<u64, String> {
        self.engine.join().unwrap();
        match self.state.error() {
            Some(e) => Err(e),
            None => Ok(self.counters.read().bytes),
        }
    }
}

/// A stranger that connects, writes its first zeros, says it has, then
/// streams zeros until it is closed (or 5 s pass); the bytes it got out.
fn stranger_streaming_zeros(addr: SocketAddr) -> JoinHandle<u64> {
    let (connected, is_connected) = mpsc::channel();
    let stranger = std::thread::spawn(move || {
        let mut sock = TcpStream::connect(addr).expect("the stranger connects");
        let zeros = [0u8; 64 * 1024];
        // Small enough to fit the buffer of a connection not accepted yet.
        sock.write_all(&zeros[..4096]).expect("the stranger's first zeros");
        connected.send(()).unwrap();
        let mut sent = 4096;
        let until = Instant::now() + Duration::from_secs(5);
        while Instant::now() < until {
            match sock.write(&zeros) {
                Ok(n) => sent += n as u64,
                Err(_) => break,
            }
        }
        sent
    });
    is_connected.recv().expect("the stranger is connected before the real sender");
    stranger
}

/// Receives every accepted stream to its end; the bytes counted.
fn receive_all(accepted: Accepted) -> u64 {
    let never = Arc::new(AtomicBool::new(false));
    End::receive(accepted.streams, Instant::now(), &never).bytes().expect("the real streams receive cleanly")
}

#[test]
fn a_stranger_connecting_first_and_streaming_zeros_counts_nothing() {
    let listener = Listener::bind(LOOPBACK, 2).unwrap();
    let addr = listener.local_addr();
    let stranger = stranger_streaming_zeros(addr);
    let receiver = std::thread::spawn(move || {
        let accepted = listener.accept(&AUTH, 2, TIMEOUT).expect("both real streams get their slots");
        let (refused, strangers) = (accepted.refused, accepted.strangers.clone());
        (refused, strangers, receive_all(accepted))
    });

    let stop = Arc::new(AtomicBool::new(false));
    let senders = End::send(tcp::connect(LOOPBACK, addr, &AUTH, 2, TIMEOUT).unwrap(), Instant::now(), &stop);
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    let sent = senders.bytes().expect("the real streams send cleanly");

    let (refused, strangers, received) = receiver.join().unwrap();
    let stranger_sent = stranger.join().unwrap();
    assert!(stranger_sent > 0, "the stranger streamed zeros");
    assert!(sent > 0);
    assert_eq!(received, sent, "the flow received exactly what its sender sent");
    assert_eq!(refused, 1);
    assert_eq!(strangers.len(), 1);
    assert_eq!(strangers[0].why, Refusal::Magic);
    assert!(strangers[0].sent.iter().all(|&b| b == 0), "{:?}", strangers[0].sent);
}

#[test]
fn a_silent_stranger_delays_no_real_stream() {
    let listener = Listener::bind(LOOPBACK, 1).unwrap();
    let addr = listener.local_addr();
    let _silent = TcpStream::connect(addr).unwrap();
    let began = Instant::now();
    let receiver = std::thread::spawn(move || listener.accept(&AUTH, 1, TIMEOUT));
    let _real = tcp::connect(LOOPBACK, addr, &AUTH, 1, TIMEOUT).unwrap();
    let accepted = receiver.join().unwrap().unwrap();
    // The silent one had 2 s to send its preamble; the real stream did not wait for that.
    assert!(began.elapsed() < Duration::from_secs(1), "took {:?}", began.elapsed());
    assert_eq!(accepted.streams.len(), 1);
    assert_eq!(accepted.refused, 1);
    assert_eq!(accepted.strangers[0].why, Refusal::Late);
}

#[test]
fn a_stream_of_another_flow_is_refused_and_the_accept_says_so() {
    let listener = Listener::bind(LOOPBACK, 1).unwrap();
    let addr = listener.local_addr();
    let other = FlowAuth { flow: 4, ..AUTH };
    let _wrong = tcp::connect(LOOPBACK, addr, &other, 1, TIMEOUT).unwrap();
    let err = listener.accept(&AUTH, 1, Duration::from_millis(500)).err().expect("no real stream came");
    assert!(
        err.to_string().contains("only 0 of 1 streams connected") && err.to_string().contains("1 stranger(s) refused"),
        "{err}"
    );
}

/// Rank 2 sends to rank 1; rank 0 only coordinates.
const TWO_TO_ONE: &str = "[run]\nname = \"stranger\"\nduration = \"1s\"\nwarmup = \"200ms\"\ninterval = \"500ms\"\n\n\
    [[group]]\nname = \"p\"\npattern = \"fan-in\"\nreceivers = 1\nsenders = \"2\"\n";

/// Waits (bounded) until `pid` listens on a TCP port; that port.
fn wait_for_listener(pid: u32) -> Option<u16> {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if let Some((_, port)) = common::tcp_sockets(pid).into_iter().find(|(state, _)| state == "0A") {
            return Some(port);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    None
}

/// The PID of the bench's worker of `rank`, looked for without pause: the
/// test must stop it before it has done much.
fn worker_pid_at_once(bench: &Bench, rank: usize) -> u32 {
    let deadline = Instant::now() + Duration::from_secs(20);
    let needle = format!("worker --rank {rank}");
    loop {
        if let Some((pid, _)) = bench.processes().into_iter().find(|(_, cmd)| cmd.contains(&needle)) {
            return pid;
        }
        assert!(Instant::now() < deadline, "rank {rank} never started");
    }
}

/// The launcher's stderr, kept as it comes; `joined` hears when rank 2 has.
fn keep_stderr(child: &mut Child) -> (Arc<Mutex<String>>, mpsc::Receiver<()>, JoinHandle<()>) {
    let (lines, kept) = (child.stderr.take().unwrap(), Arc::new(Mutex::new(String::new())));
    let (joined, rank_2_joined) = mpsc::channel();
    let reader = {
        let kept = kept.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(lines).lines().map_while(Result::ok) {
                if line.contains("rank 2 (127.0.0.3) ready") {
                    let _ = joined.send(());
                }
                kept.lock().unwrap().push_str(&(line + "\n"));
            }
        })
    };
    (kept, rank_2_joined, reader)
}

/// The real binary on three local ranks. The connect window is held open
/// with SIGSTOP so that the stranger is first on the receiver's data port:
/// rank 1 (the receiver) is stopped before it has opened a data port (only
/// its control connection, if that); rank 2 (the sender) is stopped once it
/// has joined. Rank 2 cannot connect before rank 1 has bound and published
/// its port, so once rank 1 resumes and listens, the stranger connects to
/// that port (found among rank 1's sockets) and streams zeros; then rank 2
/// resumes. Both stops are far inside the 3 s lease. Stopping rank 1 that
/// early is a race with its start: a run where rank 1 was already past
/// binding proves nothing and is run again (at most 5 times).
#[test]
fn a_stranger_on_a_workers_data_port_is_refused_and_reported() {
    let _machine = common::busy_machine();
    for _ in 0..5 {
        let bench = Bench::new();
        let hosts = bench.write("hosts", "127.0.0.1\n127.0.0.2\n127.0.0.3\n");
        let scenario = bench.write("s.toml", TWO_TO_ONE);
        let mut child = bench.spawn(&["run", scenario.to_str().unwrap(), "-H", hosts.to_str().unwrap()]);
        let receiver = worker_pid_at_once(&bench, 1);
        common::signal(receiver, "-STOP");
        let (stderr, rank_2_joined, reader) = keep_stderr(&mut child);
        if common::tcp_sockets(receiver).len() > 1 {
            common::signal(receiver, "-CONT");
            let _ = child.wait();
            continue;
        }
        rank_2_joined.recv_timeout(Duration::from_secs(20)).expect("rank 2 joins");
        let sender = bench.worker_pid(2, Duration::from_secs(1));
        common::signal(sender, "-STOP");
        common::signal(receiver, "-CONT");
        let Some(port) = wait_for_listener(receiver) else {
            common::signal(sender, "-CONT");
            let _ = child.wait();
            reader.join().unwrap();
            panic!("rank 1 never listened:\n{}", stderr.lock().unwrap());
        };
        let stranger = stranger_streaming_zeros(SocketAddr::new([127, 0, 0, 2].into(), port));
        common::signal(sender, "-CONT");

        let status = child.wait().unwrap();
        reader.join().unwrap();
        let stderr = stderr.lock().unwrap().clone();
        assert!(status.success(), "{stderr}");
        assert!(stranger.join().unwrap() > 0, "the stranger streamed zeros");
        return check_reported(&bench, &stderr);
    }
    panic!("rank 1 was past binding its data port each time it was stopped");
}

/// The run's files and log show the stranger, and the flow's bytes are its sender's.
fn check_reported(bench: &Bench, stderr: &str) {
    let run = common::read_json(&bench.result_dir().join("run.json"));
    let flow = &run["phases"][0]["flows"][0];
    assert_eq!(flow["refused"], 1, "{flow}");
    let (tx, rx) = (flow["tx_bytes"].as_u64().unwrap(), flow["rx_bytes"].as_u64().unwrap());
    // Each end counts at its own window boundaries, with up to the socket
    // buffers in flight between them: equal within a few per cent (exactly
    // equal end to end: the transport test above). Had the stranger taken
    // the stream's slot, the receiver would have counted its zeros and the
    // real sender, never accepted, would have sent only what fits in a buffer.
    assert!(tx > 0 && rx.abs_diff(tx) <= tx / 10, "sent {tx}, received {rx}");
    assert!(stderr.contains("flow 0: refused a data connection from 127.0.0.1:"), "{stderr}");
    assert!(stderr.contains(r"it sent `\0\0\0"), "{stderr}");
    let summary = std::fs::read_to_string(bench.result_dir().join("summary.md")).unwrap();
    let line = "warning: data connections refused";
    assert!(summary.contains(line) && summary.contains("flow 0 (127.0.0.3 → 127.0.0.2): 1"), "{summary}");
    assert_eq!(bench.leftovers(Duration::from_secs(2)), []);
}

/// The broken pipes of a 32-rank all-to-all: a receiver whose rank's window
/// had closed (its Start came late, so it ran through its boundaries at
/// once) dropped its sockets after one silent poll, while its sender, on a
/// rank with its own window, had not even begun: the sender then wrote
/// into a reset connection (EPIPE). A receiver told to stop now reads
/// until its sender closes.
#[test]
fn a_receiver_whose_window_closed_waits_for_its_late_sender() {
    let listener = Listener::bind(LOOPBACK, 1).unwrap();
    let addr = listener.local_addr();
    let receiver = std::thread::spawn(move || {
        let accepted = listener.accept(&AUTH, 1, TIMEOUT).unwrap();
        // Its window has closed: the stop is the phase's end, not an abort.
        End::receive(accepted.streams, Instant::now(), &Arc::new(AtomicBool::new(true))).bytes()
    });
    let socks = tcp::connect(LOOPBACK, addr, &AUTH, 1, TIMEOUT).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    // Late: the receiver's engine waits in silence for a while first.
    let sender = End::send(socks, Instant::now() + Duration::from_millis(800), &stop);
    std::thread::sleep(Duration::from_millis(1300));
    stop.store(true, Ordering::Relaxed);
    let sent = sender.bytes().expect("the late sender is not cut off by a broken pipe");
    let received = receiver.join().unwrap().expect("the receiver ends at its sender's close");
    assert!(sent > 0, "the sender sent for 500 ms");
    assert_eq!(received, sent, "everything sent was read before the receiver closed");
}

/// An abort (a stop before the window closed) ends the run: the receiver
/// does not wait for a silent sender, so its partial report makes the
/// coordinator's abort grace.
#[test]
fn an_aborted_receiver_closes_at_its_first_silent_poll() {
    let listener = Listener::bind(LOOPBACK, 1).unwrap();
    let addr = listener.local_addr();
    let receiver = std::thread::spawn(move || {
        let accepted = listener.accept(&AUTH, 1, TIMEOUT).unwrap();
        let began = Instant::now();
        let window_closes = began + Duration::from_secs(60);
        let outcome = End::receive(accepted.streams, window_closes, &Arc::new(AtomicBool::new(true))).bytes();
        (outcome, began.elapsed())
    });
    let _silent_sender = tcp::connect(LOOPBACK, addr, &AUTH, 1, TIMEOUT).unwrap();
    let (outcome, took) = receiver.join().unwrap();
    assert_eq!(outcome, Ok(0), "an aborted receiver ends cleanly, having heard nothing");
    assert!(took < Duration::from_secs(1), "waited {took:?} for a silent sender after an abort");
}

/// A sender may connect before its receiver accepts (it is sent its peers
/// as soon as the receiver's end is published): every stream of a flow of
/// more streams than a usual accept queue (128) is connected and has sent
/// its preamble before the receiver accepts one, and then all are taken.
#[test]
fn every_stream_of_a_flow_connects_before_the_receiver_accepts() {
    let streams = 300;
    let listener = Listener::bind(LOOPBACK, streams).unwrap();
    let addr = listener.local_addr();
    // With a queue of 128, the 130th connect waits for an accept that
    // does not come, and times out.
    let senders = tcp::connect(LOOPBACK, addr, &AUTH, streams, TIMEOUT).expect("every stream connects");
    assert_eq!(senders.len(), streams as usize);
    let accepted = listener.accept(&AUTH, streams, TIMEOUT).expect("every stream is accepted");
    assert_eq!((accepted.streams.len(), accepted.refused), (streams as usize, 0));
}
