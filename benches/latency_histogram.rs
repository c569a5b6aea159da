//! The latency histogram's two costs: what one flow's histogram weighs in
//! the rank report (postcard bytes on the wire) and what recording one round
//! trip costs in the hot loop (ns per record), over a real TCP ping-pong on
//! loopback and three synthetic sets of one million round trips.
//!
//!   cargo bench --bench latency_histogram
//!
//! Results are in docs/PERFORMANCE.md ("Latency histogram").

use std::hint::black_box;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use fabricbench::histogram::{Histogram, Recorder, Span};
use fabricbench::metrics::cpu::ThreadBook;
use fabricbench::transport::tcp::{self, Role};
use fabricbench::worker::engine::{EndState, Engine};
use rand::{Rng, SeedableRng};

/// Records per measurement of the record cost.
const RECORDS: usize = 20_000_000;

fn main() {
    println!("| round trips | samples | wire bytes | ns per Histogram::record | ns per Recorder::record |");
    println!("|---|---|---|---|---|");
    let tcp = tcp_flow(Duration::from_secs(2));
    println!("| TCP ping-pong on loopback, 64 B, 2 s | {} | {} | | |", tcp.count(), wire_bytes(&tcp));
    for set in ["narrow", "lognormal", "log-uniform"] {
        let values = synthetic(set, 1_000_000);
        let mut h = Histogram::default();
        values.iter().for_each(|&ns| h.record(ns));
        println!(
            "| {set}, 1M | {} | {} | {:.2} | {:.2} |",
            h.count(),
            wire_bytes(&h),
            record_cost(&values),
            recorder_cost(&values)
        );
    }
}

/// One latency flow's round trips as the worker takes them: the
/// transport's ping and echo tasks, each end on an engine of its own.
fn tcp_flow(length: Duration) -> Histogram {
    let ip: IpAddr = [127, 0, 0, 1].into();
    let listener = tcp::Listener::bind(ip, 1).expect("bind");
    let addr = listener.local_addr();
    let auth = tcp::FlowAuth { flow: 0, proof: tcp::FlowProof([1; 32]) };
    let accepting = std::thread::spawn(move || listener.accept(&auth, 1, Duration::from_secs(5)).expect("accept"));
    let sock = tcp::connect(ip, addr, &auth, 1, Duration::from_secs(5)).expect("connect").remove(0);
    let echoed = accepting.join().expect("accepting thread").streams.remove(0);
    let (t0, close) = (Instant::now(), Instant::now() + length);
    let stop = Arc::new(AtomicBool::new(false));
    let (client, server) = (Arc::<EndState>::default(), Arc::<EndState>::default());
    let ends = [
        (sock, Role::Ping { rtts: Recorder::new(None), probes: None }, &client, true),
        // Stopped at the end of its run: it echoes until the client closes.
        (echoed, Role::Echo { close }, &server, false),
    ];
    let engines: Vec<_> = ends
        .into_iter()
        .map(|(sock, role, end, sender)| {
            let task = tcp::task(sock, vec![0; 64], Arc::default(), role, None).expect("a task");
            Engine::of_end(vec![task], end, sender).spawn(t0, close, stop.clone(), ThreadBook::default())
        })
        .collect();
    std::thread::sleep(length);
    stop.store(true, Ordering::Relaxed);
    engines.into_iter().for_each(|e| e.join().expect("engine"));
    for end in [&client, &server] {
        assert_eq!(end.error(), None, "the ping-pong ends cleanly");
    }
    client.take_round_trips().expect("the client's round trips")
}

/// Seeded sets of round trips in ns.
fn synthetic(set: &str, n: usize) -> Vec<u64> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    (0..n)
        .map(|_| match set {
            // RDMA-like: 2 µs plus an exponential jitter of mean 100 ns, 1 % outliers of 5..50 µs.
            "narrow" if rng.gen::<f64>() < 0.01 => rng.gen_range(5_000..50_000),
            "narrow" => 2_000 + (-(1.0 - rng.gen::<f64>()).ln() * 100.0) as u64,
            // Median 20 µs, σ = 1 (Box–Muller).
            "lognormal" => {
                let (u1, u2) = (1.0 - rng.gen::<f64>(), rng.gen::<f64>());
                let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
                (20_000.0 * z.exp()) as u64
            }
            // Log-uniform over 1 µs .. 100 ms: as many non-empty buckets as a flow gets.
            _ => (1_000.0 * 10f64.powf(rng.gen::<f64>() * 5.0)) as u64,
        })
        .collect()
}

fn wire_bytes(h: &Histogram) -> usize {
    postcard::to_stdvec(h).expect("serialize").len()
}

fn record_cost(values: &[u64]) -> f64 {
    let mut h = Histogram::default();
    let rounds = RECORDS / values.len();
    let t = Instant::now();
    for _ in 0..rounds {
        for &ns in values {
            h.record(black_box(ns));
        }
    }
    let ns = t.elapsed().as_nanos() as f64 / (rounds * values.len()) as f64;
    black_box(h);
    ns
}

/// The hot loop's call: the window test, the subtraction and the record.
fn recorder_cost(values: &[u64]) -> f64 {
    let t0 = Instant::now();
    let trips: Vec<(Instant, Instant)> = values.iter().map(|&ns| (t0, t0 + Duration::from_nanos(ns))).collect();
    let mut recorder = Recorder::new(Some(Span { open: t0, close: t0 + Duration::from_secs(1) }));
    let rounds = RECORDS / trips.len();
    let t = Instant::now();
    for _ in 0..rounds {
        for &(sent, back) in &trips {
            recorder.record(black_box(sent), black_box(back));
        }
    }
    let ns = t.elapsed().as_nanos() as f64 / (rounds * trips.len()) as f64;
    black_box(recorder.into_histogram());
    ns
}
