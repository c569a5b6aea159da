//! Runs one RDMA flow between two threads of this process over the local
//! device and prints a perftest-shaped line; used to compare with perftest
//! in the Soft-RoCE VM (scripts/bench-rdma).
//!
//! rdma_pair OP MODE SIZE [SECONDS|xITERATIONS] [key=value...]   (keys: qps, post_list, tx_depth, cq_mod, inline, event=1, threads)

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use fabricbench::scenario::rdma::{CompletionMode, RdmaParams};
use fabricbench::scenario::{Mode, Op};
use fabricbench::transport::FlowCounters;
use fabricbench::transport::{rdma, Side};

fn main() {
    let a: Vec<String> = std::env::args().collect();
    if a.len() < 4 {
        eprintln!(
            "usage: rdma_pair write|read|send|write_imm|send_imm|fetch_add|cmp_swap bw|lat SIZE [SECS|xITERS] [k=v...]"
        );
        std::process::exit(2);
    }
    let op: Op = serde_json::from_str(&format!("\"{}\"", a[1])).expect("op");
    let mode = if a[2] == "lat" { Mode::Latency } else { Mode::Bandwidth };
    let mut p = RdmaParams { op, mode, message_size: a[3].parse().expect("size"), ..Default::default() };
    let mut secs = 5.0;
    if let Some(x) = a.get(4) {
        if let Some(n) = x.strip_prefix('x') {
            p.knobs.iterations = Some(n.parse().expect("iterations"));
        } else {
            secs = x.parse().expect("seconds");
        }
    }
    for kv in a.iter().skip(5) {
        let (k, v) = kv.split_once('=').expect("key=value");
        let n: u32 = v.parse().expect("number");
        match k {
            "qps" => p.knobs.qps = n,
            "post_list" => p.knobs.post_list = n,
            "tx_depth" => p.knobs.tx_depth = n,
            "cq_mod" => p.knobs.cq_moderation = n,
            "inline" => p.knobs.inline_size = Some(n),
            "threads" => p.knobs.threads = n,
            "event" => p.knobs.completion = if n == 1 { CompletionMode::Event } else { CompletionMode::Busy },
            _ => panic!("unknown key {k}"),
        }
    }
    let s = rdma::prepare(&p, Side::Sender).unwrap_or_else(|e| panic!("{e}"));
    let r = rdma::prepare(&p, Side::Receiver).unwrap_or_else(|e| panic!("{e}"));
    let (se, re) = (s.endpoint(), r.endpoint());
    let s = s.connect(&re).unwrap_or_else(|e| panic!("{e}"));
    let r = r.connect(&se).unwrap_or_else(|e| panic!("{e}"));
    let stop = Arc::new(AtomicBool::new(false));
    let rt = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || r.run(&FlowCounters::default(), &stop))
    };
    let sc = Arc::new(FlowCounters::default());
    let st = {
        let (stop, sc) = (Arc::clone(&stop), Arc::clone(&sc));
        std::thread::spawn(move || s.run(&sc, &stop))
    };
    let t0 = Instant::now();
    if p.knobs.iterations.is_none() {
        std::thread::sleep(Duration::from_secs_f64(secs));
        stop.store(true, Ordering::Relaxed);
    }
    let out = st.join().unwrap().unwrap_or_else(|e| panic!("{e}"));
    let wall = t0.elapsed().as_secs_f64().min(out.elapsed_ns as f64 / 1e9);
    stop.store(true, Ordering::Relaxed);
    rt.join().unwrap().unwrap_or_else(|e| panic!("{e}"));
    // perftest reports half a round trip for write and send, a whole one for read.
    let (share, measure) = if op == Op::Read { (1.0, "round trip") } else { (0.5, "half round trip") };
    match out.latency.as_ref().and_then(|h| h.summary(share)) {
        Some(l) => println!(
            "fabricbench {} lat {} B: {} samples, min {:.2} us, typical {:.2} us, avg {:.2} us, p99 {:.2} us, p99.9 {:.2} us, max {:.2} us ({measure})",
            op.name(), p.message_size, l.samples, l.min_us, l.typical_us, l.mean_us, l.p99_us, l.p999_us, l.max_us
        ),
        None => println!(
            "fabricbench {} bw {} B qps {}: {} msgs in {:.2} s = {:.3} Gb/s, {:.6} Mpps ({:?})",
            op.name(), out.bytes / out.messages.max(1), p.knobs.qps, out.messages, wall,
            out.bytes as f64 * 8.0 / wall / 1e9, out.messages as f64 / wall / 1e6, out.poll_strategy
        ),
    }
}
