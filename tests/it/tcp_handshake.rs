//! Connecting many TCP flow ends at once on one thread
//! (`transport::tcp::handshake`): no thread per end, each end's result its
//! own, strangers refused as the blocking accept refused them.

use std::io::Write;
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use fabricbench::transport::tcp::handshake::drive;
use fabricbench::transport::tcp::{Accepting, DialPlan, Dialing, FlowAuth, FlowProof, Listener, Refusal, TcpError};
use fabricbench::transport::tcp::{Handshake, Shaken};

const LOOPBACK: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);
const TIMEOUT: Duration = Duration::from_secs(10);

fn auth(flow: u32) -> FlowAuth {
    FlowAuth { flow, proof: FlowProof([flow as u8 ^ 0x5A; 32]) }
}

/// Both ends of `flows` flows of `streams` streams, as one rank holding
/// both would connect them: receivers first, each sender after its own.
fn both_ends(flows: u32, streams: u32) -> Vec<Handshake> {
    (0..flows)
        .flat_map(|flow| {
            let listener = Listener::bind(LOOPBACK, streams).unwrap();
            let addr = listener.local_addr();
            let accepting = Accepting::new(listener, auth(flow), streams).unwrap();
            let dialing = dial(addr, flow, streams);
            [Handshake::Accept(accepting), Handshake::Dial(dialing)]
        })
        .collect()
}

fn dial(peer: SocketAddr, flow: u32, streams: u32) -> Dialing {
    Dialing::new(DialPlan { local: LOOPBACK, peer, auth: auth(flow), streams, dscp: None, write_timeout: TIMEOUT })
}

fn threads() -> usize {
    std::fs::read_dir("/proc/self/task").unwrap().count()
}

/// Counts this process's threads every millisecond until told to stop;
/// the most it saw.
fn watch_threads(stop: Arc<AtomicBool>) -> std::thread::JoinHandle<usize> {
    std::thread::spawn(move || {
        let most = AtomicUsize::new(0);
        while !stop.load(Ordering::Relaxed) {
            most.fetch_max(threads(), Ordering::Relaxed);
            std::thread::sleep(Duration::from_millis(1));
        }
        most.into_inner()
    })
}

#[test]
fn a_thousand_ends_connect_on_the_calling_thread() {
    let ends = both_ends(500, 2);
    let stop = Arc::new(AtomicBool::new(false));
    let watcher = watch_threads(stop.clone());
    let before = threads();
    let results = drive(ends, TIMEOUT);
    stop.store(true, Ordering::Relaxed);
    let most = watcher.join().unwrap();
    assert!(most <= before, "connecting 1 000 ends took threads: {before} before, {most} at most");
    assert_eq!(results.len(), 1000);
    for (k, result) in results.into_iter().enumerate() {
        match result {
            Ok(Shaken::Accepted(a)) => assert_eq!((a.streams.len(), a.refused), (2, 0), "end {k}"),
            Ok(Shaken::Dialed(streams)) => assert_eq!(streams.len(), 2, "end {k}"),
            Err(e) => panic!("end {k}: {e}"),
        }
    }
}

#[test]
fn a_receiver_whose_sender_never_dials_times_out_alone() {
    let mut ends = both_ends(3, 4);
    // Flow 1's sender never dials: its receiver waits alone.
    ends.remove(3);
    let results = drive(ends, Duration::from_millis(800));
    assert_eq!(results.len(), 5);
    match &results[2] {
        Err(TcpError::Accept { accepted: 0, expected: 4, refused: 0, .. }) => {}
        other => panic!("flow 1's receiver: {:?}", other.as_ref().err().map(ToString::to_string)),
    }
    for k in [0, 1, 3, 4] {
        assert!(results[k].is_ok(), "end {k}: {:?}", results[k].as_ref().err().map(ToString::to_string));
    }
}

#[test]
fn a_stranger_during_the_handshake_is_refused_and_the_flow_connects() {
    let listener = Listener::bind(LOOPBACK, 2).unwrap();
    let addr = listener.local_addr();
    // In the queue before the real streams, as a port scanner would be.
    let mut stranger = TcpStream::connect(addr).unwrap();
    stranger.write_all(b"GET / HTTP/1.0\r\nHost: fabricbench.invalid\r\n\r\n").unwrap();
    let ends =
        vec![Handshake::Accept(Accepting::new(listener, auth(9), 2).unwrap()), Handshake::Dial(dial(addr, 9, 2))];
    let mut results = drive(ends, TIMEOUT).into_iter();
    let Some(Ok(Shaken::Accepted(accepted))) = results.next() else { panic!("the receiver connects") };
    assert!(matches!(results.next(), Some(Ok(Shaken::Dialed(s))) if s.len() == 2));
    assert_eq!((accepted.streams.len(), accepted.refused), (2, 1));
    assert_eq!(accepted.strangers.len(), 1);
    assert_eq!(accepted.strangers[0].why, Refusal::Magic);
    assert!(accepted.strangers[0].sent.starts_with(b"GET / HTTP"));
}

#[test]
fn a_dial_to_a_closed_port_fails_naming_its_stream() {
    let closed = std::net::TcpListener::bind((LOOPBACK, 0)).unwrap().local_addr().unwrap();
    let results = drive(vec![dial(closed, 1, 3)], TIMEOUT);
    match &results[0] {
        Err(e @ TcpError::Connect { peer, .. }) => {
            assert_eq!(*peer, closed);
            assert!(e.to_string().contains(&format!("from {LOOPBACK} to {closed}")), "{e}");
        }
        other => panic!("{:?}", other.as_ref().err().map(ToString::to_string)),
    }
}

/// More streams than a receiver keeps unproved at once: the dialer writes
/// each preamble before it begins many more, so no real stream is turned
/// away as crowded.
#[test]
fn a_flow_of_a_thousand_streams_connects_with_no_stream_refused() {
    let mut results = drive(both_ends(1, 1024), TIMEOUT).into_iter();
    match results.next() {
        Some(Ok(Shaken::Accepted(a))) => assert_eq!((a.streams.len(), a.refused), (1024, 0)),
        other => panic!("{:?}", other.and_then(Result::err).map(|e| e.to_string())),
    }
    assert!(matches!(results.next(), Some(Ok(Shaken::Dialed(s))) if s.len() == 1024));
}
