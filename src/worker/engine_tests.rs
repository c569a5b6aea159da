use std::net::{TcpListener, TcpStream};

use super::*;
use crate::transport::tcp::{self, Role};
use crate::transport::FlowCounters;
use crate::worker::assign::{assign, LaneLoad, Load};

#[test]
fn every_lane_keeps_its_round_trips() {
    let end = EndState::default();
    for ns in [[1_000, 2_000], [3_000, 4_000], [5_000, 6_000]] {
        let mut h = Histogram::default();
        ns.into_iter().for_each(|ns| h.record(ns));
        end.keep_round_trips(h);
    }
    let kept = end.take_round_trips().unwrap();
    assert_eq!(kept.count(), 6, "the lanes' round trips add up, none replaces another");
    assert!((kept.summary(1.0).unwrap().max_us - 6.0).abs() < 6e-3);
}

#[test]
fn the_first_error_of_an_end_is_kept() {
    let end = EndState::default();
    end.fail("stream 0 reset".into());
    end.fail("stream 1 reset".into());
    assert_eq!(end.error().as_deref(), Some("stream 0 reset"));
}

/// `pairs` loopback connections (sender's socket, receiver's socket).
fn connections(pairs: usize) -> Vec<(TcpStream, TcpStream)> {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    (0..pairs)
        .map(|_| {
            let sender = TcpStream::connect(addr).unwrap();
            (sender, listener.accept().unwrap().0)
        })
        .collect()
}

/// One flow end of one stream: its state, its lane's counters, its seat.
struct OneEnd {
    state: Arc<EndState>,
    counters: Arc<FlowCounters>,
}

fn seat(sock: TcpStream, role: Role, sender: bool) -> (OneEnd, Seat) {
    let (state, counters) = (Arc::<EndState>::default(), Arc::<FlowCounters>::default());
    let task = tcp::task(sock, vec![0xA5; 16 * 1024], counters.clone(), role, None).unwrap();
    (OneEnd { state: state.clone(), counters }, Seat { task, end: state, sender, told: None })
}

/// Engines on (at most) two cores for `seats`, as the phase places them.
fn engines(seats: Vec<Seat>) -> Vec<Engine> {
    let cores: Vec<usize> = crate::load::placement::allowed_cores().into_iter().take(2).collect();
    let loads: Vec<LaneLoad> = seats.iter().map(|_| LaneLoad::new(Load::Bandwidth, cores.clone())).collect();
    let a = assign(&loads, 0);
    let mut engines: Vec<Engine> =
        a.engines.iter().enumerate().map(|(id, &core)| Engine { id, cores: vec![core], seats: Vec::new() }).collect();
    for (seat, &e) in seats.into_iter().zip(&a.of_lane) {
        engines[e].seats.push(seat);
    }
    engines
}

/// 500 flows of one stream each: 1 000 flow ends on four engines.
#[test]
fn a_thousand_flow_ends_on_a_few_engines_count_exactly() {
    let _ = crate::fdlimit::raise();
    let t0 = Instant::now() + Duration::from_millis(100);
    // Long enough that a loaded test machine still runs every engine in it.
    let close = t0 + Duration::from_millis(1500);
    let (mut senders, mut receivers) = (Vec::new(), Vec::new());
    let (mut send_seats, mut receive_seats) = (Vec::new(), Vec::new());
    for (tx, rx) in connections(500) {
        let (end, seat) = seat(tx, Role::Send { per_s: None }, true);
        senders.push(end);
        send_seats.push(seat);
        let (end, seat) = seat_of_receiver(rx, close);
        receivers.push(end);
        receive_seats.push(seat);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let book = ThreadBook::default();
    let threads: Vec<_> = engines(send_seats)
        .into_iter()
        .chain(engines(receive_seats))
        .map(|e| e.spawn(t0, close, stop.clone(), book.clone()))
        .collect();
    assert!(threads.len() <= 4, "{} engines for 1 000 flow ends", threads.len());
    std::thread::sleep(close - Instant::now());
    stop.store(true, Ordering::Relaxed);
    threads.into_iter().for_each(|t| t.join().unwrap());
    for (k, (tx, rx)) in senders.iter().zip(&receivers).enumerate() {
        let (sent, received) = (tx.counters.read().bytes, rx.counters.read().bytes);
        assert!(sent > 0, "stream {k} moved nothing: one stream starved");
        assert_eq!(sent, received, "stream {k}: what the receiver got is what its sender sent");
        assert_eq!(tx.state.error(), None, "stream {k}");
        assert_eq!(rx.state.error(), None, "stream {k}");
        assert!(tx.state.started().is_some_and(|at| at >= t0), "stream {k} began at t0");
    }
}

fn seat_of_receiver(rx: TcpStream, close: Instant) -> (OneEnd, Seat) {
    seat(rx, Role::Receive { message_size: 16 * 1024, close }, false)
}

/// A flow whose peer resets its connection fails with its own error; the
/// others on its engine carry on.
#[test]
fn a_failing_flow_end_is_named_and_the_others_keep_moving() {
    let t0 = Instant::now() + Duration::from_millis(50);
    let close = t0 + Duration::from_secs(5);
    let mut pairs = connections(8);
    let (doomed_tx, doomed_rx) = pairs.pop().unwrap();
    let (mut ends, mut seats) = (Vec::new(), Vec::new());
    for (tx, rx) in pairs {
        let (end, s) = seat(tx, Role::Send { per_s: None }, true);
        ends.push(end);
        seats.push(s);
        let (_, s) = seat_of_receiver(rx, close);
        seats.push(s);
    }
    let (doomed, s) = seat(doomed_tx, Role::Send { per_s: None }, true);
    seats.push(s);
    let stop = Arc::new(AtomicBool::new(false));
    let engine = Engine { id: 0, cores: vec![crate::load::placement::allowed_cores()[0]], seats };
    let thread = engine.spawn(t0, close, stop.clone(), ThreadBook::default());
    std::thread::sleep(Duration::from_millis(300));
    // Reset the doomed flow's connection under its sender (SO_LINGER 0: RST).
    socket2::SockRef::from(&doomed_rx).set_linger(Some(Duration::ZERO)).unwrap();
    drop(doomed_rx);
    std::thread::sleep(Duration::from_millis(200));
    let before: Vec<u64> = ends.iter().map(|e| e.counters.read().bytes).collect();
    std::thread::sleep(Duration::from_millis(200));
    stop.store(true, Ordering::Relaxed);
    thread.join().unwrap();
    let error = doomed.state.error().expect("the reset flow end has an error");
    assert!(error.starts_with("stream to 127.0.0.1:"), "{error}");
    for (k, end) in ends.iter().enumerate() {
        assert_eq!(end.state.error(), None, "flow {k} is not blamed");
        assert!(end.counters.read().bytes > before[k], "flow {k} kept moving after the other failed");
    }
}

/// A ping-pong client and its echo server, each alone on its engine: every
/// round trip echoed is one recorded, within the window.
#[test]
fn a_ping_pong_on_engines_records_every_round_trip() {
    let t0 = Instant::now() + Duration::from_millis(50);
    let close = t0 + Duration::from_millis(300);
    let (tx, rx) = connections(1).pop().unwrap();
    let rtts = crate::histogram::Recorder::new(Some(crate::histogram::Span { open: t0, close }));
    let (client, ping) = seat(tx, Role::Ping { rtts, probes: None }, true);
    let (server, echo) = seat(rx, Role::Echo { close }, false);
    let cores = crate::load::placement::allowed_cores();
    let stop = Arc::new(AtomicBool::new(false));
    let threads: Vec<_> = [(0, ping), (1, echo)]
        .into_iter()
        .map(|(id, seat)| Engine { id, cores: vec![cores[id % cores.len()]], seats: vec![seat] })
        .map(|e| e.spawn(t0, close, stop.clone(), ThreadBook::default()))
        .collect();
    std::thread::sleep(close + Duration::from_millis(20) - Instant::now());
    stop.store(true, Ordering::Relaxed);
    threads.into_iter().for_each(|t| t.join().unwrap());
    let (pings, echoes) = (client.counters.read().messages, server.counters.read().messages);
    assert!(pings > 10, "{pings} round trips in 300 ms");
    // The stop may come after the last echo left and before it arrived.
    assert!((pings..=pings + 1).contains(&echoes), "{pings} round trips, {echoes} echoes");
    let kept = client.state.take_round_trips().expect("the client keeps its round trips");
    assert!(kept.count() > 0 && kept.count() <= pings, "{} of {pings}", kept.count());
    assert_eq!(client.state.error().or(server.state.error()), None);
}
