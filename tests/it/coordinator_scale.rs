//! The coordinator with thousands of ranks: simulated in one process (no
//! sockets), and as real TCP clients on loopback. What each rank is sent to
//! bootstrap (hello → its flows → its peers' endpoints → start) grows with
//! its own flows, never with the size of the job. Speed and memory at scale
//! are measured by benches/control_plane.rs, not here.

use crate::common;

use common::ranks::{bootstrap, coordinator, make_plan, tcp_rank};
use fabricbench::control::coordinator::Event;
use fabricbench::metrics::clock::now_ns;
use fabricbench::plan::Plan;

const FAN_IN: &str = "[[group]]\nname = \"incast\"\npattern = \"fan-in\"\n";
const RING: &str = "[[group]]\nname = \"ring\"\npattern = \"ring\"\nbidirectional = true\n";
const ALL_TO_ALL: &str = "[[group]]\nname = \"all\"\npattern = \"all-to-all\"\n";

/// Bytes a rank may be sent per bootstrap: a fixed part (Welcome, the
/// phase's Setup and Peers headers, Start) and a part per flow of its own
/// (its role in the flow, and the peer's endpoint when it sends).
const FIXED_BYTES: u64 = 64;
const BYTES_PER_FLOW: u64 = 48;

fn flows_per_rank(plan: &Plan) -> Vec<u64> {
    let mut flows = vec![0; plan.ranks.len()];
    for f in &plan.phases[0].flows {
        flows[f.src] += 1;
        flows[f.dst] += 1;
    }
    flows
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
            let mut c = coordinator(plan, 0);
            let traffic = bootstrap(&mut c, n);
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
                coordinator(plan, now_ns()),
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
                    Ok(got) => sent.push(got),
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

/// A stop that never comes.
fn never() -> tokio::sync::watch::Receiver<Option<String>> {
    tokio::sync::watch::channel(None).1
}
