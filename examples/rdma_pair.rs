//! Runs RDMA flows between engines of this process over the local device,
//! as a worker runs them,
//! and prints a perftest-shaped line; used to compare with perftest
//! in the Soft-RoCE VM (scripts/bench-rdma).
//!
//! rdma_pair OP MODE SIZE [SECONDS|xITERATIONS] [key=value...]
//!   keys: qps, post_list, tx_depth, cq_mod, inline, event=1, threads;
//!   bandwidth only: flows=N (N such flows), engines=E (their tasks over E engines at each end),
//!   shared=0 (each shard polls a CQ of its own; default: an engine's shards share one, as a worker's do)

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use fabricbench::metrics::cpu::ThreadBook;
use fabricbench::scenario::rdma::{CompletionMode, RdmaParams};
use fabricbench::scenario::{Mode, Op};
use fabricbench::transport::{rdma, Side};
use fabricbench::transport::{Counts, FlowCounters};
use fabricbench::worker::engine::{EndState, Engine};

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
    // Bandwidth: `flows` such flows, their tasks spread over `engines` engines at each end.
    let (mut flows, mut engines, mut shared) = (1, 1, true);
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
            "flows" => flows = n.max(1) as usize,
            "engines" => engines = n.max(1) as usize,
            "shared" => shared = n == 1,
            _ => panic!("unknown key {k}"),
        }
    }
    // As in a worker, a latency flow polls CQs of its own.
    let mut pool = (shared && mode == Mode::Bandwidth).then(rdma::CqPool::default);
    let count = if mode == Mode::Latency { 1 } else { flows };
    // Flow k runs on engine k mod E at each end: its sender's shards poll CQ group 2(k mod E).
    let pairs: Vec<_> = (0..count).map(|k| connected_pair(&p, pool.as_mut(), 2 * (k % engines) as u32)).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let (share, measure) = if op == Op::Read { (1.0, "round trip") } else { (0.5, "half round trip") };
    // Each end's tasks on engines of its own, as a worker runs them.
    let t0 = Instant::now();
    let (close, sc) = (t0 + Duration::from_secs(86_400), Arc::new(FlowCounters::default()));
    let (sent, received) = (Arc::<EndState>::default(), Arc::<EndState>::default());
    let (mut send_tasks, mut receive_tasks): (Vec<Vec<_>>, Vec<Vec<_>>) =
        ((0..engines).map(|_| Vec::new()).collect(), (0..engines).map(|_| Vec::new()).collect());
    for (k, (s, r)) in pairs.into_iter().enumerate() {
        send_tasks[k % engines].extend(s.tasks(sc.clone()));
        receive_tasks[k % engines].extend(r.tasks(Arc::default()));
    }
    let spawn = |tasks: Vec<Vec<_>>, end: &Arc<EndState>, sender| -> Vec<_> {
        let book = ThreadBook::default();
        let engines = tasks.into_iter().filter(|t: &Vec<_>| !t.is_empty());
        engines.map(|t| Engine::of_end(t, end, sender).spawn(t0, close, stop.clone(), book.clone())).collect()
    };
    let receivers = spawn(receive_tasks, &received, false);
    let senders = spawn(send_tasks, &sent, true);
    if p.knobs.iterations.is_none() {
        std::thread::sleep(Duration::from_secs_f64(secs));
        stop.store(true, Ordering::Relaxed);
    }
    senders.into_iter().for_each(|e| e.join().unwrap());
    let wall = t0.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    receivers.into_iter().for_each(|e| e.join().unwrap());
    for end in [&sent, &received] {
        assert_eq!(end.error(), None, "the flows end cleanly");
    }
    if let Some(rtts) = sent.take_round_trips() {
        // perftest reports half a round trip for write and send, a whole one for read.
        let l = rtts.summary(share).expect("round trips");
        println!(
            "fabricbench {} lat {} B: {} samples, min {:.2} us, typical {:.2} us, avg {:.2} us, p99 {:.2} us, p99.9 {:.2} us, max {:.2} us ({measure})",
            op.name(), p.message_size, l.samples, l.min_us, l.typical_us, l.mean_us, l.p99_us, l.p999_us, l.max_us
        );
        return;
    }
    let Counts { bytes, messages } = sc.read();
    println!(
        "fabricbench {} bw {} B qps {} flows {flows} engines {engines} shared {shared}: {} msgs in {:.2} s = {:.3} Gb/s, {:.6} Mpps",
        op.name(),
        bytes / messages.max(1),
        p.knobs.qps,
        messages,
        wall,
        bytes as f64 * 8.0 / wall / 1e9,
        messages as f64 / wall / 1e6
    );
}

/// A sender and a receiver of `p` over the local device, connected; with
/// a pool, the sender's shards on its CQ group `group`, the receiver's on
/// `group + 1`.
fn connected_pair(
    p: &RdmaParams,
    mut pool: Option<&mut rdma::CqPool>,
    group: u32,
) -> (rdma::ConnectedFlow, rdma::ConnectedFlow) {
    let mut end = |side, group| {
        let prepared = match pool.as_deref_mut() {
            Some(pool) => {
                let mut groups = |on: rdma::ShardsOn| vec![rdma::CqGroup(group); on.shards];
                rdma::prepare_shared(p, side, rdma::Sharing { pool, groups: &mut groups })
            }
            None => rdma::prepare(p, side),
        };
        prepared.unwrap_or_else(|e| panic!("{e}"))
    };
    let (s, r) = (end(Side::Sender, group), end(Side::Receiver, group + 1));
    let (se, re) = (s.endpoint(), r.endpoint());
    (s.connect(&re).unwrap_or_else(|e| panic!("{e}")), r.connect(&se).unwrap_or_else(|e| panic!("{e}")))
}
