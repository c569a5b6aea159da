//! The coordinator with thousands of ranks: simulated in one process (no
//! sockets), and as real TCP clients on loopback. What each rank is sent to
//! bootstrap (hello → its flows → its peers' endpoints → start) grows with
//! its own flows, never with the size of the job. Speed and memory at scale
//! are measured by benches/control_plane.rs, not here.

use crate::common;

use std::time::Duration;

use fabricbench::control::coordinator::Event;
use fabricbench::control::framing;
use fabricbench::control::sim::{bootstrap, coordinator, make_plan, report_phase, tcp_rank, Sim};
use fabricbench::metrics::clock::Epoch;
use fabricbench::plan::Plan;

const FAN_IN: &str = "[[group]]\nname = \"incast\"\npattern = \"fan-in\"\n";
const RING: &str = "[[group]]\nname = \"ring\"\npattern = \"ring\"\nbidirectional = true\n";
const ALL_TO_ALL: &str = "[[group]]\nname = \"all\"\npattern = \"all-to-all\"\n";

/// Bytes a rank may be sent per bootstrap: a fixed part (Welcome, the
/// phase's Setup and Peers headers, Start) and a part per flow of its own
/// (its role in the flow with the flow's 32-byte data-plane proof, and the
/// peer's endpoint when it sends).
const FIXED_BYTES: u64 = 64;
const BYTES_PER_FLOW: u64 = 48 + 32;

fn flows_per_rank(plan: &Plan) -> Vec<u64> {
    let mut flows = vec![0; plan.ranks.len()];
    for f in &plan.phases[0].flows {
        flows[f.src] += 1;
        flows[f.dst] += 1;
    }
    flows
}

/// After the barrier: every rank of a 4096-rank fan-in reports (the
/// receiver's report holds 4095 flows) and the phase comes out whole, each
/// flow at the 8 Gb/s its samples say, counted once.
#[test]
fn a_large_fan_in_is_gathered_and_aggregated_whole() {
    let n = 4096;
    let plan = make_plan(n, FAN_IN);
    let mut sim = Sim::generous(plan.clone());
    assert!(bootstrap(&mut sim, n).started);
    let phase = report_phase(&mut sim, &plan, 3).phase.expect("the phase is aggregated");
    assert!(phase.complete);
    assert_eq!(phase.flows.len(), n - 1);
    assert!(phase.flows.iter().all(|f| f.gbps == 8.0 && f.error.is_none()), "{:?}", &phase.flows[..2]);
    assert_eq!(phase.aggregate_gbps, 8.0 * (n - 1) as f64);
    // Each interval went to the launcher as it closed, and back into the phase.
    assert_eq!(phase.interval_gbps, [8.0 * (n - 1) as f64; 2]);
    assert!(phase.flows.iter().all(|f| f.interval_gbps == [8.0, 8.0]), "{:?}", &phase.flows[..2]);
    assert_eq!((phase.receivers.len(), phase.receivers[0].senders), (1, n - 1));
    assert_eq!(phase.ranks.iter().filter(|r| r.reported).count(), n);
    assert_eq!(phase.ranks[0].rx_gbps, 8.0 * (n - 1) as f64);
}

#[test]
fn each_rank_is_sent_only_its_own_flows() {
    let cases: [(&str, &str, &[usize]); 3] = [
        ("fan-in", FAN_IN, &[64, 512, 4096]),
        ("ring", RING, &[64, 512, 4096]),
        ("all-to-all", ALL_TO_ALL, &[16, 64, 256]),
    ];
    for (name, scenario, sizes) in cases {
        for &n in sizes {
            let plan = make_plan(n, scenario);
            let flows = flows_per_rank(&plan);
            let traffic = bootstrap(&mut Sim::generous(plan), n);
            assert!(traffic.started, "{name} on {n} ranks did not reach the barrier");
            for (rank, ((&messages, &bytes), &own)) in
                traffic.messages.iter().zip(&traffic.bytes).zip(&flows).enumerate()
            {
                // Welcome, Setup, Peers, Start: four messages whatever the size.
                assert_eq!(messages, 4, "{name}, {n} ranks, rank {rank}");
                let limit = FIXED_BYTES + BYTES_PER_FLOW * own;
                assert!(
                    bytes <= limit,
                    "{name}, {n} ranks: rank {rank} with {own} flow(s) was sent {bytes} bytes (limit {limit})"
                );
            }
        }
    }
}

#[test]
fn real_tcp_clients_on_loopback_reach_the_barrier() {
    let _machine = common::busy_machine();
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    for (name, scenario, n) in [("fan-in", FAN_IN, 512), ("all-to-all", ALL_TO_ALL, 64)] {
        let plan = make_plan(n, scenario);
        let flows = flows_per_rank(&plan);
        let sent = runtime.block_on(async {
            let listener = fabricbench::control::driver::listen(([127, 0, 0, 1], 0).into()).unwrap();
            let addr = listener.local_addr().unwrap();
            let (events_tx, mut events) = tokio::sync::mpsc::unbounded_channel();
            let driver = tokio::spawn(fabricbench::control::driver::drive(
                listener,
                coordinator(plan, Epoch::now()),
                never(),
                move |e| {
                    if matches!(e, Event::PhaseStarted { .. } | Event::Failed(_)) {
                        let _ = events_tx.send(e);
                    }
                },
            ));
            let ranks: Vec<_> = (0..n).map(|rank| tokio::spawn(tcp_rank(addr, rank))).collect();
            let mut sent = Vec::new();
            for rank in ranks {
                match rank.await.unwrap() {
                    Ok(got) => sent.push((got.messages, got.bytes)),
                    Err(e) => panic!("{name}: {e}; the coordinator said {:?}", events.try_recv()),
                }
            }
            assert!(matches!(events.recv().await, Some(Event::PhaseStarted { .. })), "{name}: the phase started");
            driver.abort();
            sent
        });
        for (rank, (messages, bytes)) in sent.into_iter().enumerate() {
            assert_eq!(messages, 4, "{name}: rank {rank}");
            assert!(bytes <= FIXED_BYTES + BYTES_PER_FLOW * flows[rank], "{name}: rank {rank} was sent {bytes} bytes");
        }
    }
}

/// No instruction from a launcher ever comes.
fn never() -> tokio::sync::mpsc::UnboundedReceiver<fabricbench::control::instruction::Instruction> {
    tokio::sync::mpsc::unbounded_channel().1
}

/// Strangers on the coordinator's port — idle connections, a 4 GiB length
/// prefix, a first frame of another type, a wrong token — are turned away
/// (the idle ones after the Hello deadline) and a real job joins meanwhile.
#[test]
fn strangers_on_the_port_cannot_hurt_a_job() {
    use fabricbench::control::wire::{ToCoordinator, HELLO_MAX};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let _machine = common::busy_machine();
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async {
        let n = 8;
        let listener = fabricbench::control::driver::listen(([127, 0, 0, 1], 0).into()).unwrap();
        let addr = listener.local_addr().unwrap();
        let (rejected_tx, mut rejected) = tokio::sync::mpsc::unbounded_channel();
        let driver = tokio::spawn(fabricbench::control::driver::drive(
            listener,
            coordinator(make_plan(n, FAN_IN), Epoch::now()),
            never(),
            move |e| {
                if let Event::Rejected { reason, .. } = e {
                    let _ = rejected_tx.send(reason);
                }
            },
        ));
        // Idle strangers are closed once the Hello deadline (5 s) passes.
        let opened = std::time::Instant::now();
        let mut idle = Vec::new();
        for _ in 0..300 {
            idle.push(from(2, addr).await);
        }
        for mut conn in idle {
            let mut byte = [0u8; 1];
            let read = tokio::time::timeout(Duration::from_secs(15), conn.read(&mut byte)).await;
            assert!(matches!(read, Ok(Ok(0)) | Ok(Err(_))), "an idle stranger was kept open: {read:?}");
        }
        assert!(opened.elapsed() >= Duration::from_millis(4500), "closed after {:?}", opened.elapsed());
        let first = rejected.recv().await.unwrap();
        assert!(first.starts_with("no Hello within 5s (from 127.0.0.2:"), "{first}");
        while rejected.try_recv().is_ok() {}

        let mut huge = from(3, addr).await;
        huge.write_all(&u32::MAX.to_be_bytes()).await.unwrap();
        // A Report (variant 4) as a first frame, as large as a Hello may be.
        let mut report = from(4, addr).await;
        let body: Vec<u8> = std::iter::once(4).chain(std::iter::repeat_n(0xFF, HELLO_MAX - 1)).collect();
        report.write_all(&framing::prefixed(&body)).await.unwrap();
        let mut stranger = fabricbench::control::sim::hello(1);
        stranger.token = "guess".into();
        stranger.host = "\u{1b}[31mred".into();
        let mut wrong = from(5, addr).await;
        wrong.write_all(&framing::frame(&ToCoordinator::Hello(stranger)).unwrap()).await.unwrap();

        let ranks: Vec<_> = (0..n).map(|rank| tokio::spawn(tcp_rank(addr, rank))).collect();
        for (rank, joined) in futures::future::join_all(ranks).await.into_iter().enumerate() {
            assert!(joined.unwrap().is_ok(), "rank {rank} did not reach the barrier beside the strangers");
        }
        let mut reasons = Vec::new();
        while reasons.len() < 3 {
            reasons.push(tokio::time::timeout(Duration::from_secs(10), rejected.recv()).await.unwrap().unwrap());
        }
        let all = reasons.join("\n");
        assert!(all.contains("frame size too big"), "{all}");
        assert!(all.contains("the first frame must be a Hello, not message 4"), "{all}");
        assert!(all.contains("wrong job token from `\\u{1b}[31mred`"), "escaped: {all}");
        // Each stranger address is reported once, however many connections it made.
        assert_eq!(reasons.len() + usize::from(rejected.try_recv().is_ok()), 3, "{all}");
        driver.abort();
    });
}

/// A connection to `addr` from 127.0.0.`host` (strangers are told apart by address).
async fn from(host: u8, addr: std::net::SocketAddr) -> tokio::net::TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind(([127, 0, 0, host], 0).into()).unwrap();
    socket.connect(addr).await.unwrap()
}

/// A rank that holds the job's token sends, after Start, a Report of a
/// hundred thousand latency histograms in 5 MB (each ~50 bytes on the wire,
/// 108 KiB decoded: 10 GiB). The plan lets its reports carry one (its one
/// latency flow): the frame's decode stops at the second histogram, before
/// allocating it, and the rank fails, named, with the reason.
#[test]
fn a_report_may_decode_only_the_histograms_its_plan_allows() {
    use fabricbench::control::wire::ToCoordinator;
    use fabricbench::histogram::Histogram;
    use fabricbench::metrics::{FlowSamples, RankReport};
    use fabricbench::transport::Side;

    const HISTOGRAMS: usize = 100_000;
    let _machine = common::busy_machine();
    let text = "[[group]]\nname = \"lat\"\npattern = \"explicit\"\nmode = \"latency\"\nflows = [[1, 0]]\n";
    let plan = make_plan(2, text);
    // The Report's bytes with its flows list spliced to HISTOGRAMS copies of one flow.
    let mut h = Histogram::default();
    h.record(12_345);
    let flow = FlowSamples {
        flow: 0,
        side: Side::Sender,
        start_ns: Some(0),
        error: None,
        rtts: Some(h),
        refused: 0,
        lanes: Vec::new(),
        engines: Vec::new(),
        validation: None,
        gpu_memory: Vec::new(),
        tcp: None,
    };
    let report = |flows| {
        let r = RankReport { phase: 0, rank: 1, boundaries: 2, flows, ..Default::default() };
        postcard::to_stdvec(&ToCoordinator::Report(Box::new(r))).unwrap()
    };
    let (none, one) = (report(vec![]), report(vec![flow]));
    let at = none.iter().zip(&one).position(|(a, b)| a != b).expect("the flows' count differs");
    assert_eq!((none[at], one[at]), (0, 1), "a one-byte varint");
    let element = &one[at + 1..one.len() - (none.len() - at - 1)];
    let mut hostile = none[..at].to_vec();
    let mut n = HISTOGRAMS;
    while n >= 0x80 {
        hostile.push((n as u8 & 0x7f) | 0x80);
        n >>= 7;
    }
    hostile.push(n as u8);
    for _ in 0..HISTOGRAMS {
        hostile.extend_from_slice(element);
    }
    hostile.extend_from_slice(&none[at + 1..]);
    assert!(hostile.len() < 8 << 20, "{} bytes", hostile.len());

    let failure = failure_after_start(plan, AfterStart::Send(hostile));
    assert!(failure.contains("rank 1") && failure.contains("protocol error"), "{failure}");
    assert!(
        failure.contains("a frame carried more than 1 latency histograms, the most a report of this rank may carry"),
        "{failure}"
    );
}

/// What rank 1 does once Start reaches it; rank 0 answers and waits.
enum AfterStart {
    /// Writes these bytes as one frame.
    Send(Vec<u8>),
    /// Closes its connection with a reset (SO_LINGER 0), as a host that
    /// dies with data unread does.
    Reset,
}

/// Runs a 2-rank `plan` on a real driver on loopback, its ranks answering as
/// workers do; returns the failure the run ends with.
fn failure_after_start(plan: Plan, after: AfterStart) -> String {
    use fabricbench::control::framing::FrameReader;
    use fabricbench::control::wire::{ToCoordinator, ToWorker};
    use tokio::io::AsyncWriteExt;

    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async move {
        let listener = fabricbench::control::driver::listen(([127, 0, 0, 1], 0).into()).unwrap();
        let addr = listener.local_addr().unwrap();
        let (failed_tx, mut failed) = tokio::sync::mpsc::unbounded_channel();
        let driver = tokio::spawn(fabricbench::control::driver::drive(
            listener,
            coordinator(plan, Epoch::now()),
            never(),
            move |e| {
                if let Event::Failed(f) = e {
                    let _ = failed_tx.send(f.to_string());
                }
            },
        ));
        let rank = |rank: usize, after: Option<AfterStart>| async move {
            let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
            let (mut read, mut write) = stream.into_split();
            let mut reader: FrameReader<_, ToWorker> = FrameReader::new(&mut read);
            let send = |msg: &ToCoordinator| framing::frame(msg).unwrap();
            write.write_all(&send(&ToCoordinator::Hello(fabricbench::control::sim::hello(rank)))).await.unwrap();
            while let Some(Ok(msg)) = reader.next().await {
                if let Some(reply) = fabricbench::control::sim::answer(&msg) {
                    write.write_all(&send(&reply)).await.unwrap();
                }
                match (&msg, &after) {
                    (ToWorker::Start { .. }, Some(AfterStart::Send(frame))) => {
                        write.write_all(&framing::prefixed(frame)).await.unwrap();
                    }
                    (ToWorker::Start { .. }, Some(AfterStart::Reset)) => break,
                    _ => {}
                }
            }
            drop(reader);
            // SO_LINGER 0: the close is a reset (tokio's own setter is
            // deprecated as a lingering close would block; this one does not).
            let stream = read.reunite(write).unwrap().into_std().unwrap();
            socket2::SockRef::from(&stream).set_linger(Some(Duration::ZERO)).unwrap();
        };
        let ranks = [tokio::spawn(rank(0, None)), tokio::spawn(rank(1, Some(after)))];
        let failure =
            tokio::time::timeout(Duration::from_secs(30), failed.recv()).await.expect("the rank failed").unwrap();
        driver.abort();
        for r in ranks {
            r.abort();
        }
        failure
    })
}

/// A rank whose connection is reset (its host died with data unread, or
/// its worker was killed) is a lost connection, named with its flows, not a
/// rank that garbled its stream.
#[test]
fn a_reset_connection_is_lost_not_garbled() {
    let plan = make_plan(2, "[[group]]\nname = \"pair\"\npattern = \"explicit\"\nflows = [[1, 0]]\n");
    let failure = failure_after_start(plan, AfterStart::Reset);
    assert!(failure.contains("rank 1") && failure.contains("connection lost during phase 0"), "{failure}");
    assert!(failure.contains("its flows: 0 (1->0)"), "{failure}");
    assert!(!failure.contains("protocol error"), "{failure}");
}

/// Heartbeats stay within a budget whatever the job's size: 500 ms up to
/// 4096 ranks, then spread out (2 s at 16 384) with the silence limit six
/// intervals; each rank learns its interval from Welcome.
#[test]
fn a_large_job_spreads_its_heartbeats_out() {
    use fabricbench::control::coordinator::{Output, Timeouts};
    use fabricbench::control::wire::ToWorker;
    for (ranks, heartbeat_ms, silence_s) in [(2, 500, 3), (4096, 500, 3), (16_384, 2_000, 12), (65_536, 8_000, 48)] {
        let t = Timeouts::for_ranks(ranks);
        assert_eq!(t.heartbeat, Duration::from_millis(heartbeat_ms), "{ranks} ranks");
        assert_eq!(t.silence, Duration::from_secs(silence_s), "{ranks} ranks");
    }
    let n = 16_384;
    let mut sim = Sim::generous(make_plan(n, FAN_IN));
    let mut welcome = None;
    sim.connect(0);
    sim.send(0, fabricbench::control::wire::ToCoordinator::Hello(fabricbench::control::sim::hello(0)), |o| {
        if let Output::Send(0, ToWorker::Welcome { heartbeat, .. }) = o {
            welcome = Some(heartbeat);
        }
        None
    });
    assert_eq!(welcome, Some(Duration::from_secs(2)));
    // The first round (at 2 s) counts the Welcome as rank 0's sign of
    // life; the next one, not before 4 s, sends it a heartbeat.
    let sent_to_0 = |sim: &mut Sim, by_ms| {
        let mut sent = 0;
        sim.advance(Duration::from_millis(by_ms), |o| {
            sent += usize::from(matches!(o, Output::Send(0, _)));
            None
        });
        sent
    };
    for (by_ms, at_ms) in [(500, 500), (500, 1_000), (1_000, 2_000), (1_900, 3_900)] {
        assert_eq!(sent_to_0(&mut sim, by_ms), 0, "at {at_ms} ms");
    }
    assert_eq!(sent_to_0(&mut sim, 100), 1, "at 4 s: one heartbeat");
}
