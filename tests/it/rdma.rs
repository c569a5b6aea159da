//! Real verbs traffic over whatever RDMA device the host has (Soft-RoCE in
//! the project's QEMU VMs: `scripts/softroce-vm -- cargo test --release --test it rdma::`).
//!
//! Without a device every test prints why it is skipped and passes, so plain
//! `cargo test` works anywhere; with `FABRICBENCH_REQUIRE_RDMA=1` a missing
//! device fails instead (the VM runs set it). Assertions are about traffic
//! having flowed and numbers being consistent, never about speed.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use fabricbench::histogram::Span;
use fabricbench::scenario::rdma::{CompletionMode, Connection, RdmaKnobs, RdmaParams, CMP_SWAP_VALUE};
use fabricbench::scenario::{Mode, Op};
use fabricbench::transport::rdma::{self, counters, FlowOutcome, RdmaEndpoint, RdmaError};
use fabricbench::transport::{FlowCounters, Side};

/// Counts heap allocations per thread, to show the data path allocates
/// nothing per message.
struct CountingAlloc;

thread_local! {
    static ALLOCS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

#[allow(unsafe_code)] // a global allocator is unsafe to implement; the crate denies it elsewhere
                      // SAFETY: forwards to the system allocator; the counter is a const-initialised
                      // thread-local Cell (no allocation, no reentrancy).
unsafe impl std::alloc::GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        ALLOCS.with(|c| c.set(c.get() + 1));
        // SAFETY: same contract as ours.
        unsafe { std::alloc::System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        // SAFETY: same contract as ours.
        unsafe { std::alloc::System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: CountingAlloc = CountingAlloc;

fn thread_allocs() -> u64 {
    ALLOCS.with(|c| c.get())
}

/// Some(device name) when an ACTIVE RDMA port exists; None (after printing
/// why) otherwise. Panics instead when FABRICBENCH_REQUIRE_RDMA=1.
pub(crate) fn rdma_device(test: &str) -> Option<String> {
    let why = match rdma::probe() {
        // The first by name (rxe0 before an rxe1 another test added): the same device whatever ran before.
        Ok(r) => {
            match r.devices.iter().filter(|d| d.ports.iter().any(|p| p.state == "ACTIVE")).map(|d| &d.name).min() {
                Some(name) => return Some(name.clone()),
                None => "no ACTIVE RDMA port".to_string(),
            }
        }
        Err(e) => e.to_string(),
    };
    if std::env::var_os("FABRICBENCH_REQUIRE_RDMA").is_some_and(|v| v == "1") {
        panic!("{test}: RDMA required (FABRICBENCH_REQUIRE_RDMA=1) but: {why}");
    }
    eprintln!("skipping {test}: {why} (run it in scripts/softroce-vm)");
    None
}

struct PairResult {
    /// Heap allocations made by the sender's thread inside `run`.
    sender_allocs: u64,
    sender: Result<FlowOutcome, RdmaError>,
    receiver: Result<FlowOutcome, RdmaError>,
    sender_counters: Arc<FlowCounters>,
    receiver_counters: Arc<FlowCounters>,
    sender_wall: Duration,
}

/// Runs a sender and a receiver of `p` in this process over the device's
/// loopback. With `duration`, the stop flag is raised after it; otherwise
/// the receiver is stopped once the sender is done.
fn run_pair(p: &RdmaParams, duration: Option<Duration>) -> PairResult {
    run_pair_in(p, duration, None)
}

/// `run_pair`, the sender keeping only the round trips of `window` (offsets from now).
fn run_pair_in(p: &RdmaParams, duration: Option<Duration>, window: Option<(Duration, Duration)>) -> PairResult {
    let now = Instant::now();
    let s = rdma::prepare(p, Side::Sender).expect("prepare sender").with_label("test sender");
    let r = rdma::prepare(p, Side::Receiver).expect("prepare receiver").with_label("test receiver");
    let (se, re) = (s.endpoint(), r.endpoint());
    let mut s = s.connect(&re).expect("connect sender");
    if let Some((open, close)) = window {
        s = s.with_latency_window(Span { open: now + open, close: now + close });
    }
    let r = r.connect(&se).expect("connect receiver");
    let stop = Arc::new(AtomicBool::new(false));
    let (sc, rc) = (Arc::new(FlowCounters::default()), Arc::new(FlowCounters::default()));
    let rt = {
        let (stop, rc) = (Arc::clone(&stop), Arc::clone(&rc));
        thread::spawn(move || r.run(&rc, &stop))
    };
    let st = {
        let (stop, sc) = (Arc::clone(&stop), Arc::clone(&sc));
        thread::spawn(move || {
            let (t0, a0) = (Instant::now(), thread_allocs());
            let r = s.run(&sc, &stop);
            (r, t0.elapsed(), thread_allocs() - a0)
        })
    };
    if let Some(d) = duration {
        thread::sleep(d);
        stop.store(true, Ordering::Relaxed);
    }
    let (sender, sender_wall, sender_allocs) = st.join().expect("sender thread");
    // Two-sided iteration runs end by themselves (the receiver's stall
    // timeout ends one that never does); one-sided receivers need stop.
    // Stopping a two-sided receiver as the sender ends would race its last
    // completions: an event-mode receiver once counted 5976 of 6000 sends.
    // (UD loses datagrams: its receiver is stopped.)
    let ends_itself = p.op.needs_receives()
        && p.knobs.connection == Connection::Rc
        && p.mode == Mode::Bandwidth
        && p.knobs.iterations.is_some();
    if !(ends_itself && duration.is_none()) {
        stop.store(true, Ordering::Relaxed);
    }
    let receiver = rt.join().expect("receiver thread");
    stop.store(true, Ordering::Relaxed);
    PairResult { sender_allocs, sender, receiver, sender_counters: sc, receiver_counters: rc, sender_wall }
}

/// The knobs of a flow on `dev`, with a stall timeout that ends a stuck test.
fn knobs(dev: &str) -> RdmaKnobs {
    RdmaKnobs { device: Some(dev.to_string()), stall_timeout_ms: 20_000, ..Default::default() }
}

/// A flow of `op` with these knobs.
fn flow(op: Op, knobs: RdmaKnobs) -> RdmaParams {
    RdmaParams { op, knobs, ..Default::default() }
}

fn params(dev: &str, op: Op) -> RdmaParams {
    flow(op, knobs(dev))
}

fn load(c: &FlowCounters) -> (u64, u64) {
    (c.bytes.load(Ordering::Relaxed), c.messages.load(Ordering::Relaxed))
}

#[test]
fn probe_reports_ports_and_gids() {
    let Some(dev) = rdma_device("probe_reports_ports_and_gids") else { return };
    let r = rdma::probe().unwrap();
    println!("{r}");
    let d = r.devices.iter().find(|d| d.name == dev).unwrap();
    let port = d.ports.iter().find(|p| p.state == "ACTIVE").unwrap();
    assert!(port.active_mtu >= 256 && port.max_mtu >= port.active_mtu, "{port:?}");
    assert!(!port.rate.is_empty() && !port.link_layer.is_empty());
    if port.link_layer == "Ethernet" {
        assert!(port.gids.iter().any(|g| g.kind == rdma::GidKind::RoceV2), "{:?}", port.gids);
    }
    let json = serde_json::to_string(&r).unwrap();
    let back: rdma::ProbeReport = serde_json::from_str(&json).unwrap();
    assert_eq!(serde_json::to_string(&back).unwrap(), json);
}

#[test]
fn bandwidth_ops_in_iteration_mode_move_every_byte() {
    let Some(dev) = rdma_device("bandwidth_ops_in_iteration_mode_move_every_byte") else { return };
    for op in [Op::Write, Op::Read, Op::Send, Op::WriteImm, Op::SendImm] {
        let p =
            RdmaParams { message_size: 4096, ..flow(op, RdmaKnobs { qps: 2, iterations: Some(1500), ..knobs(&dev) }) };
        let r = run_pair(&p, None);
        let s = r.sender.unwrap_or_else(|e| panic!("{op:?} sender: {e}"));
        let rv = r.receiver.unwrap_or_else(|e| panic!("{op:?} receiver: {e}"));
        let total = 2 * 1500;
        assert_eq!((s.messages, s.bytes), (total, total * 4096), "{op:?} sender {s:?}");
        assert_eq!(load(&r.sender_counters), (total * 4096, total), "{op:?} sender counters");
        if op.needs_receives() {
            assert_eq!((rv.messages, rv.bytes), (total, total * 4096), "{op:?} receiver {rv:?}");
            assert_eq!(load(&r.receiver_counters), (total * 4096, total), "{op:?} receiver counters");
        } else {
            assert_eq!(rv.messages, 0, "{op:?}: the passive side counts nothing");
        }
        let gbps = s.bytes as f64 * 8.0 / r.sender_wall.as_secs_f64() / 1e9;
        println!("{op:?}: {} x 4096 B in {:?} = {gbps:.3} Gb/s", s.messages, r.sender_wall);
        assert!(gbps > 0.0 && gbps < 10_000.0, "{op:?}: insane rate {gbps}");
    }
}

#[test]
fn duration_mode_stops_promptly_and_counts_live() {
    let Some(dev) = rdma_device("duration_mode_stops_promptly_and_counts_live") else { return };
    // 64 KiB (perftest's default) and 1 MiB (one signaled completion per
    // message via signal_bytes, so even a slow link counts bytes live).
    for (op, size) in [(Op::Write, 65536), (Op::Send, 65536), (Op::Write, 1 << 20)] {
        let p = RdmaParams { message_size: size, ..params(&dev, op) };
        let t0 = Instant::now();
        let r = run_pair(&p, Some(Duration::from_millis(700)));
        let s = r.sender.unwrap_or_else(|e| panic!("{op:?}: {e}"));
        let rv = r.receiver.unwrap_or_else(|e| panic!("{op:?}: {e}"));
        assert!(t0.elapsed() < Duration::from_secs(5), "{op:?}: stop took {:?}", t0.elapsed());
        assert!(s.messages > 0 && s.bytes == s.messages * size, "{s:?}");
        assert_eq!(load(&r.sender_counters), (s.bytes, s.messages));
        if op == Op::Send {
            // Both ends counted; they differ at most by what was in flight
            // when `stop` came (the sender drains its signaled WRs after it).
            assert!(rv.messages > 0, "receiver counted nothing");
            assert!(
                rv.messages.abs_diff(s.messages) <= u64::from(p.knobs.tx_depth),
                "recv {} vs sent {}",
                rv.messages,
                s.messages
            );
        }
        println!("{op:?} {size} B duration: {} msgs, {:.3} Gb/s", s.messages, s.bytes as f64 * 8.0 / 0.7 / 1e9);
    }
}

#[test]
fn post_list_moderation_sharding_and_events() {
    let Some(dev) = rdma_device("post_list_moderation_sharding_and_events") else { return };
    let cases = [
        // op, qps, threads, post_list, cq_mod, size, completion, inline
        (Op::Write, 4, 2, 16, 64, 64, CompletionMode::Busy, Some(64)),
        (Op::Send, 2, 1, 8, 16, 256, CompletionMode::Event, None),
        (Op::Write, 1, 1, 4, 1000, 8192, CompletionMode::Event, None),
        // More event-mode shards than the VM's 2 vCPUs (rxe's completion
        // vectors): each CQ's vector is one the device has.
        (Op::Write, 4, 4, 1, 16, 4096, CompletionMode::Event, None),
    ];
    for (op, qps, threads, post_list, cq_mod, size, completion, inline) in cases {
        let p = RdmaParams {
            message_size: size,
            ..flow(
                op,
                RdmaKnobs {
                    qps,
                    threads,
                    post_list,
                    cq_moderation: cq_mod,
                    completion,
                    inline_size: inline,
                    iterations: Some(3000),
                    ..knobs(&dev)
                },
            )
        };
        let r = run_pair(&p, None);
        let s = r.sender.unwrap_or_else(|e| panic!("{p:?}: {e}"));
        let rv = r.receiver.unwrap_or_else(|e| panic!("{p:?}: {e}"));
        let total = u64::from(qps) * 3000;
        assert_eq!(s.messages, total, "{p:?}");
        if op == Op::Send {
            assert_eq!(rv.messages, total, "{p:?}");
        }
    }
}

/// Flows whose shards all poll one CQ per side: each counts exactly its
/// own messages (completions reach the shard whose QP they are), while
/// every shard runs on its own thread (the CQ's lock makes that sound).
#[test]
fn flows_on_one_shared_cq_count_exactly_their_own() {
    let Some(dev) = rdma_device("flows_on_one_shared_cq_count_exactly_their_own") else { return };
    for op in [Op::Send, Op::Write] {
        let p = RdmaParams {
            message_size: 1024,
            ..flow(op, RdmaKnobs { qps: 2, threads: 2, iterations: Some(2000), ..knobs(&dev) })
        };
        let mut pool = rdma::CqPool::default();
        let mut prepare = |side, group| {
            let mut one = |on: rdma::ShardsOn| vec![rdma::CqGroup(group); on.shards];
            let sharing = rdma::Sharing { pool: &mut pool, groups: &mut one };
            rdma::prepare_shared(&p, side, sharing).unwrap_or_else(|e| panic!("{op:?} {side:?}: {e}"))
        };
        let pairs: Vec<_> = (0..4).map(|_| (prepare(Side::Sender, 0), prepare(Side::Receiver, 1))).collect();
        let stop = Arc::new(AtomicBool::new(false));
        let mut ends = Vec::new();
        let mut groups = [Vec::new(), Vec::new()];
        for (s, r) in pairs {
            let (se, re) = (s.endpoint(), r.endpoint());
            for (k, end) in [s.connect(&re), r.connect(&se)].into_iter().enumerate() {
                let end = end.unwrap_or_else(|e| panic!("{op:?} connect: {e}"));
                groups[k].extend(end.poll_groups());
                let (stop, counters) = (stop.clone(), Arc::new(FlowCounters::default()));
                ends.push(thread::spawn(move || (end.run(&counters, &stop), counters)));
            }
        }
        for (side, ids) in groups.iter().enumerate() {
            assert!(
                ids.len() == 8 && ids.iter().all(|id| id.is_some() && *id == ids[0]),
                "{op:?} side {side}: {ids:?}"
            );
        }
        assert_ne!(groups[0][0], groups[1][0], "two groups, two CQs");
        let total = 2 * 2000;
        // Senders first: a one-sided flow's passive end waits for the stop.
        let (senders, receivers): (Vec<_>, Vec<_>) = ends.into_iter().enumerate().partition(|(k, _)| k % 2 == 0);
        for (k, end) in senders.into_iter().chain(receivers) {
            if k % 2 == 1 && !op.needs_receives() {
                stop.store(true, Ordering::Relaxed);
            }
            let (outcome, counters) = end.join().expect("flow thread");
            let outcome = outcome.unwrap_or_else(|e| panic!("{op:?} end {k}: {e}"));
            if k % 2 == 0 || op.needs_receives() {
                assert_eq!((outcome.bytes, outcome.messages), (total * 1024, total), "{op:?} end {k}: {outcome:?}");
                assert_eq!(load(&counters), (total * 1024, total), "{op:?} end {k}: its counters");
            } else {
                assert_eq!(outcome.messages, 0, "{op:?}: the passive end counts nothing");
            }
        }
    }
}

#[test]
fn atomics_return_the_old_values() {
    let Some(dev) = rdma_device("atomics_return_the_old_values") else { return };
    // Fetch-add, pipelined: each QP's word ends at N; the last fetch saw N-1.
    let p = flow(Op::FetchAdd, RdmaKnobs { qps: 2, tx_depth: 16, iterations: Some(500), ..knobs(&dev) });
    let r = run_pair(&p, None);
    let s = r.sender.unwrap();
    let rv = r.receiver.unwrap();
    assert_eq!(s.messages, 1000);
    assert_eq!(s.bytes, 8000);
    assert_eq!(s.atomic_words, Some(vec![499, 499]), "last fetched values");
    assert_eq!(rv.atomic_words, Some(vec![500, 500]), "final target words");
    // Compare-and-swap 0 -> C: the first succeeds (old 0), the rest fail (old C).
    let p = flow(Op::CmpSwap, RdmaKnobs { tx_depth: 1, iterations: Some(20), ..knobs(&dev) });
    let r = run_pair(&p, None);
    let (s, rv) = (r.sender.unwrap(), r.receiver.unwrap());
    assert_eq!(s.messages, 20);
    assert_eq!(s.atomic_words, Some(vec![CMP_SWAP_VALUE]));
    assert_eq!(rv.atomic_words, Some(vec![CMP_SWAP_VALUE]));
    let p = flow(Op::CmpSwap, RdmaKnobs { tx_depth: 1, iterations: Some(1), ..knobs(&dev) });
    let s = run_pair(&p, None).sender.unwrap();
    assert_eq!(s.atomic_words, Some(vec![0]), "a single CAS on a zero word fetches 0");
}

#[test]
fn latency_samples_are_present_and_ordered() {
    let Some(dev) = rdma_device("latency_samples_are_present_and_ordered") else { return };
    for (op, completion) in [
        (Op::Write, CompletionMode::Busy),
        (Op::Send, CompletionMode::Busy),
        (Op::Read, CompletionMode::Busy),
        (Op::Send, CompletionMode::Event),
    ] {
        let p = RdmaParams {
            mode: Mode::Latency,
            message_size: 2,
            ..flow(op, RdmaKnobs { completion, iterations: Some(300), ..knobs(&dev) })
        };
        let r = run_pair(&p, None);
        let s = r.sender.unwrap_or_else(|e| panic!("{op:?}: {e}"));
        r.receiver.unwrap_or_else(|e| panic!("{op:?} receiver: {e}"));
        // perftest reports half a round trip for write and send, a whole one for read.
        let (share, measure) = if op == Op::Read { (1.0, "round trip") } else { (0.5, "half round trip") };
        let l = s.latency.as_ref().expect("round trips").summary(share).expect("summary");
        assert_eq!(l.samples, 300);
        assert!(l.min_us > 0.0);
        assert!(
            l.min_us <= l.typical_us && l.typical_us <= l.p99_us && l.p99_us <= l.p999_us && l.p999_us <= l.max_us,
            "{l:?}"
        );
        println!("{op:?} {completion:?} latency: typical {} us, p99 {} us ({measure})", l.typical_us, l.p99_us);
    }
    let p = RdmaParams {
        mode: Mode::Latency,
        message_size: 4096,
        ..flow(Op::Write, RdmaKnobs { iterations: Some(100), ..knobs(&dev) })
    };
    let r = run_pair(&p, None);
    assert_eq!(r.sender.unwrap().latency.unwrap().count(), 100);
}

/// ib_atomic_lat: one fetch-add / compare-swap at a time, every one a
/// sample of the full round trip, and the target's word shows they all landed.
#[test]
fn atomic_latency_one_at_a_time() {
    let Some(dev) = rdma_device("atomic_latency_one_at_a_time") else { return };
    for op in [Op::FetchAdd, Op::CmpSwap] {
        let p = RdmaParams { mode: Mode::Latency, ..flow(op, RdmaKnobs { iterations: Some(200), ..knobs(&dev) }) };
        let r = run_pair(&p, None);
        let s = r.sender.unwrap_or_else(|e| panic!("{op:?}: {e}"));
        let target = r.receiver.unwrap_or_else(|e| panic!("{op:?} target: {e}"));
        assert_eq!((s.messages, s.bytes), (200, 1600), "{op:?}: 8 bytes per atomic");
        let l = s.latency.as_ref().expect("round trips").summary(1.0).expect("summary");
        assert_eq!(l.samples, 200, "{op:?}");
        assert!(l.min_us > 0.0 && l.min_us <= l.typical_us && l.typical_us <= l.p99_us && l.p99_us <= l.max_us);
        // One at a time: fetch-add's last fetch saw 199 of the 200 adds;
        // compare-swap installed its value once and then kept fetching it.
        let (fetched, word) = match op {
            Op::FetchAdd => (199, 200),
            _ => (CMP_SWAP_VALUE, CMP_SWAP_VALUE),
        };
        assert_eq!((s.atomic_words, target.atomic_words), (Some(vec![fetched]), Some(vec![word])), "{op:?}");
        println!("{op:?} latency: typical {} us, p99 {} us (round trip)", l.typical_us, l.p99_us);
    }
}

/// UD sends (ib_send_bw -c UD) over the device's loopback: datagrams up to
/// the MTU arrive with the GRH stripped from the count, the receiver never
/// counts more than was sent, and send ping-pong works over UD too.
#[test]
fn ud_send_counts_what_arrived() {
    let Some(dev) = rdma_device("ud_send_counts_what_arrived") else { return };
    for message_size in [64, 1024, 4096] {
        let p = RdmaParams {
            message_size,
            ..flow(Op::Send, RdmaKnobs { connection: Connection::Ud, qps: 2, ..knobs(&dev) })
        };
        let r = run_pair(&p, Some(Duration::from_millis(1500)));
        let s = r.sender.unwrap_or_else(|e| panic!("UD {message_size} B sender: {e}"));
        let rv = r.receiver.unwrap_or_else(|e| panic!("UD {message_size} B receiver: {e}"));
        assert!(
            rv.messages > 0 && rv.messages <= s.messages,
            "{message_size} B: got {} of {}",
            rv.messages,
            s.messages
        );
        assert_eq!(rv.bytes, rv.messages * message_size, "{message_size} B: the 40-byte GRH is not payload");
        assert_eq!(s.bytes, s.messages * message_size);
        assert_eq!(
            (load(&r.receiver_counters), load(&r.sender_counters)),
            ((rv.bytes, rv.messages), (s.bytes, s.messages))
        );
        let lost = s.messages - rv.messages;
        println!("UD {message_size} B: {} sent, {} received, {lost} lost", s.messages, rv.messages);
    }
    let p = RdmaParams {
        mode: Mode::Latency,
        message_size: 2,
        ..flow(Op::Send, RdmaKnobs { connection: Connection::Ud, iterations: Some(200), ..knobs(&dev) })
    };
    let r = run_pair(&p, None);
    let s = r.sender.unwrap_or_else(|e| panic!("UD send_lat: {e}"));
    r.receiver.unwrap_or_else(|e| panic!("UD send_lat receiver: {e}"));
    let l = s.latency.as_ref().expect("round trips").summary(0.5).expect("summary");
    assert!(l.samples == 200 && l.min_us > 0.0 && l.min_us <= l.typical_us && l.typical_us <= l.max_us, "{l:?}");
    println!("UD send latency: typical {} us (half round trip)", l.typical_us);
}

/// UD refuses a message above the peer port's MTU before sending anything,
/// naming the size and the MTU.
#[test]
fn ud_message_above_the_mtu_is_refused() {
    let Some(dev) = rdma_device("ud_message_above_the_mtu_is_refused") else { return };
    let p =
        RdmaParams { message_size: 2048, ..flow(Op::Send, RdmaKnobs { connection: Connection::Ud, ..knobs(&dev) }) };
    let s = rdma::prepare(&p, Side::Sender).unwrap().with_label("flow 0 0->1");
    let r = rdma::prepare(&p, Side::Receiver).unwrap();
    // A peer whose port runs a 1024-byte MTU (ibv_mtu 3).
    let peer = RdmaEndpoint { mtu: 3, ..r.endpoint() };
    let e = s.connect(&peer).err().expect("refused").to_string();
    assert_eq!(
        e,
        "flow 0 0->1: peer endpoint does not match: UD message_size 2048 B is above the peer port's active MTU (1024 B); give at most 1024"
    );
}

#[test]
fn latency_keeps_the_round_trips_of_its_window_only() {
    let Some(dev) = rdma_device("latency_keeps_the_round_trips_of_its_window_only") else { return };
    for op in [Op::Write, Op::Send, Op::Read] {
        let p = RdmaParams { mode: Mode::Latency, message_size: 2, ..params(&dev, op) };
        let window = (Duration::from_millis(400), Duration::from_millis(700));
        let r = run_pair_in(&p, Some(Duration::from_millis(1000)), Some(window));
        let s = r.sender.unwrap_or_else(|e| panic!("{op:?}: {e}"));
        let kept = s.latency.as_ref().expect("round trips").count();
        // Every iteration is one message; the window holds some, not all, of them.
        assert!(kept > 0 && kept < s.messages, "{op:?}: {kept} of {} round trips kept", s.messages);
        // A window around the whole run keeps every round trip: each is a
        // sample, exactly (no cap, none lost).
        let whole = (Duration::ZERO, Duration::from_secs(3600));
        let r = run_pair_in(&p, Some(Duration::from_millis(1000)), Some(whole));
        let s = r.sender.unwrap_or_else(|e| panic!("{op:?}: {e}"));
        let kept = s.latency.as_ref().expect("round trips").count();
        assert!(kept > 0 && kept == s.messages, "{op:?}: {kept} samples of {} round trips", s.messages);
    }
}

#[test]
fn hot_loops_allocate_nothing_per_message() {
    let Some(dev) = rdma_device("hot_loops_allocate_nothing_per_message") else { return };
    let cases = [
        (Op::Write, Mode::Bandwidth),
        (Op::Send, Mode::Bandwidth),
        (Op::Read, Mode::Bandwidth),
        (Op::FetchAdd, Mode::Bandwidth),
        (Op::Write, Mode::Latency),
        (Op::Send, Mode::Latency),
    ];
    for (op, mode) in cases {
        let allocs = |n: u64| {
            let p = RdmaParams {
                mode,
                message_size: 256,
                ..flow(op, RdmaKnobs { post_list: 4, iterations: Some(n), ..knobs(&dev) })
            };
            let r = run_pair(&p, None);
            assert_eq!(r.sender.unwrap().messages, n);
            r.sender_allocs
        };
        let (few, many) = (allocs(200), allocs(2000));
        println!("{op:?} {mode:?}: {few} allocations for 200 messages, {many} for 2000");
        assert_eq!(few, many, "{op:?} {mode:?}: allocations grow with messages");
    }
}

#[test]
fn nic_counters_move() {
    let Some(dev) = rdma_device("nic_counters_move") else { return };
    let before = counters::snapshot(&dev, 1).expect("counters readable");
    assert!(!before.values.is_empty(), "no counters for {dev}");
    let p = RdmaParams { message_size: 65536, ..flow(Op::Write, RdmaKnobs { iterations: Some(200), ..knobs(&dev) }) };
    run_pair(&p, None).sender.unwrap();
    let after = counters::snapshot(&dev, 1).unwrap();
    let d = before.delta(&after);
    let moved: Vec<_> = d.iter().filter(|(_, v)| **v > 0).collect();
    println!("counter deltas: {moved:?}");
    assert!(!moved.is_empty(), "no counter moved: {d:?}");
    assert!(counters::snapshot_all().iter().any(|s| s.device == dev));
}

/// Every completion is counted whatever a poll may take: one per poll, a
/// chunk of `ibv_poll_cq` exactly (16), and more than a chunk (40, two
/// calls and a part), with every WR signaled so completions pile up. The
/// extended CQ's batch reader lost completions on rxe (rdma-core < 55).
#[test]
fn every_completion_counts_at_any_poll_batch() {
    let Some(dev) = rdma_device("every_completion_counts_at_any_poll_batch") else { return };
    for (op, poll_batch) in [(Op::Write, 1), (Op::Send, 16), (Op::Send, 40), (Op::Write, 40)] {
        let k = RdmaKnobs { qps: 2, iterations: Some(1000), cq_moderation: 1, poll_batch, ..knobs(&dev) };
        let r = run_pair(&RdmaParams { message_size: 64, ..flow(op, k) }, None);
        let s = r.sender.unwrap_or_else(|e| panic!("{op:?} poll_batch {poll_batch} sender: {e}"));
        assert_eq!((s.messages, s.bytes), (2000, 2000 * 64), "{op:?} poll_batch {poll_batch}");
        if op.needs_receives() {
            let rv = r.receiver.unwrap_or_else(|e| panic!("{op:?} poll_batch {poll_batch} receiver: {e}"));
            assert_eq!((rv.messages, rv.bytes), (2000, 2000 * 64), "{op:?} poll_batch {poll_batch} receiver");
        }
    }
}

#[test]
fn peer_qp_destroyed_ends_the_flow_with_the_status_named() {
    let Some(dev) = rdma_device("peer_qp_destroyed_ends_the_flow_with_the_status_named") else { return };
    let p = RdmaParams {
        message_size: 4096,
        ..flow(Op::Write, RdmaKnobs { qps: 2, stall_timeout_ms: 5000, ..knobs(&dev) })
    };
    let s = rdma::prepare(&p, Side::Sender).unwrap().with_label("flow 3->0");
    let r = rdma::prepare(&p, Side::Receiver).unwrap();
    let (se, re) = (s.endpoint(), r.endpoint());
    let s = s.connect(&re).unwrap();
    let r = r.connect(&se).unwrap();
    let (stop, c) = (Arc::new(AtomicBool::new(false)), Arc::new(FlowCounters::default()));
    let t = {
        let (stop, c) = (Arc::clone(&stop), Arc::clone(&c));
        thread::spawn(move || s.run(&c, &stop))
    };
    // Let traffic flow, then destroy the receiver's QPs and memory.
    let t0 = Instant::now();
    while c.messages.load(Ordering::Relaxed) < 100 && t0.elapsed() < Duration::from_secs(20) {
        thread::sleep(Duration::from_millis(5));
    }
    assert!(c.messages.load(Ordering::Relaxed) >= 100, "no traffic before the kill");
    drop(r);
    let killed = Instant::now();
    // The flow must end by itself (no stop flag), bounded by RC retries.
    while !t.is_finished() && killed.elapsed() < Duration::from_secs(60) {
        thread::sleep(Duration::from_millis(20));
    }
    stop.store(true, Ordering::Relaxed);
    let res = t.join().unwrap();
    let err = res.expect_err("writes to a destroyed QP must fail").to_string();
    println!("after {:?}: {err}", killed.elapsed());
    assert!(killed.elapsed() < Duration::from_secs(60), "no error within 60 s");
    assert!(err.contains("flow 3->0") && err.contains("QP "), "{err}");
    // Real NICs report RETRY_EXC_ERR; Soft-RoCE on Linux 6.1 never retires
    // the WRs to a destroyed QP, and the stall clock ends the flow instead.
    assert!(err.contains("_ERR") || err.contains("no progress"), "status not named: {err}");
}

/// Child half of `peer_process_killed_ends_the_flow`: a send receiver that
/// prints its endpoint, reads the peer's, and serves until killed.
#[test]
fn child_receiver() {
    if std::env::var_os("FB_RDMA_CHILD").is_none() {
        return;
    }
    let dev = std::env::var("FB_RDMA_CHILD").unwrap();
    let p = RdmaParams { message_size: 4096, ..params(&dev, Op::Send) };
    let r = rdma::prepare(&p, Side::Receiver).unwrap();
    println!("PID {}", std::process::id());
    println!("ENDPOINT {}", serde_json::to_string(&r.endpoint()).unwrap());
    std::io::stdout().flush().unwrap();
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).unwrap();
    let peer: RdmaEndpoint = serde_json::from_str(line.trim()).unwrap();
    let r = r.connect(&peer).unwrap();
    let stop = AtomicBool::new(false);
    let c = Arc::new(FlowCounters::default());
    println!("CONNECTED");
    std::io::stdout().flush().unwrap();
    let _ = r.run(&c, &stop);
}

#[test]
fn peer_process_killed_ends_the_flow() {
    let Some(dev) = rdma_device("peer_process_killed_ends_the_flow") else { return };
    let child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "rdma::child_receiver", "--nocapture", "--test-threads=1"])
        .env("FB_RDMA_CHILD", &dev)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    send_then_kill_peer(&dev, child, None);
}

/// Across two VMs (`scripts/softroce-vm --vms 2 --env FB_RDMA_PEER_HOST=vm2 ...`):
/// a send flow to a receiver process on the peer host, over the wire, then
/// that process is killed.
#[test]
fn two_hosts_send_then_peer_killed() {
    let Some(dev) = rdma_device("two_hosts_send_then_peer_killed") else { return };
    let Some(host) = std::env::var("FB_RDMA_PEER_HOST").ok().filter(|h| !h.is_empty()) else {
        eprintln!("skipping two_hosts_send_then_peer_killed: FB_RDMA_PEER_HOST is not set");
        return;
    };
    let exe = std::env::current_exe().unwrap();
    let child = Command::new("ssh")
        .arg(&host)
        .arg(format!("FB_RDMA_CHILD={dev} {} --exact rdma::child_receiver --nocapture --test-threads=1", exe.display()))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    send_then_kill_peer(&dev, child, Some(&host));
}

fn netdev_tx_bytes() -> u64 {
    std::fs::read_dir("/sys/class/net")
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name() != "lo")
        .filter_map(|e| std::fs::read_to_string(e.path().join("statistics/tx_bytes")).ok())
        .filter_map(|s| s.trim().parse::<u64>().ok())
        .sum()
}

/// Connects a send flow to the child receiver (local process or over ssh on
/// `remote`), checks traffic flows, kills the child and expects a bounded,
/// named error.
fn send_then_kill_peer(dev: &str, mut child: std::process::Child, remote: Option<&str>) {
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut peer = None;
    let mut pid = None;
    let mut line = String::new();
    while out.read_line(&mut line).unwrap() > 0 {
        if let Some(at) = line.find("PID ") {
            pid = line[at + 4..].trim().parse::<u32>().ok();
        }
        // The harness prints "test rdma::child_receiver ... " without a newline first.
        if let Some(at) = line.find("ENDPOINT ") {
            peer = Some(serde_json::from_str::<RdmaEndpoint>(line[at + 9..].trim()).unwrap());
            break;
        }
        line.clear();
    }
    let peer = peer.expect("child endpoint");
    let pid = pid.expect("child pid");
    let p = RdmaParams { message_size: 4096, ..flow(Op::Send, RdmaKnobs { stall_timeout_ms: 5000, ..knobs(dev) }) };
    let s = rdma::prepare(&p, Side::Sender).unwrap().with_label("flow 1->2");
    writeln!(child.stdin.as_mut().unwrap(), "{}", serde_json::to_string(&s.endpoint()).unwrap()).unwrap();
    line.clear();
    while out.read_line(&mut line).unwrap() > 0 && !line.contains("CONNECTED") {
        line.clear();
    }
    let s = s.connect(&peer).unwrap();
    let tx0 = netdev_tx_bytes();
    let (stop, c) = (Arc::new(AtomicBool::new(false)), Arc::new(FlowCounters::default()));
    let t = {
        let (stop, c) = (Arc::clone(&stop), Arc::clone(&c));
        thread::spawn(move || s.run(&c, &stop))
    };
    let t0 = Instant::now();
    let want = if remote.is_some() { 1000 } else { 100 };
    while c.messages.load(Ordering::Relaxed) < want && t0.elapsed() < Duration::from_secs(30) {
        thread::sleep(Duration::from_millis(5));
    }
    if remote.is_some() {
        // Watch the flow for a few seconds before the kill.
        let mut last = 0;
        for _ in 0..12 {
            thread::sleep(Duration::from_millis(500));
            let m = c.messages.load(Ordering::Relaxed);
            println!("  {:>6.1} s: {m} messages (+{})", t0.elapsed().as_secs_f64(), m - last);
            last = m;
        }
    }
    let (bytes, msgs) = load(&c);
    assert!(msgs >= want, "only {msgs} messages before the kill");
    if remote.is_some() {
        // Over a wire the NIC's netdev carried at least the payload.
        let tx = netdev_tx_bytes() - tx0;
        println!("{msgs} messages, {bytes} B sent; netdevs sent {tx} B");
        assert!(tx >= bytes, "netdev tx {tx} < RDMA bytes {bytes}");
    }
    eprintln!("killing the receiver process (pid {pid}) after {msgs} messages");
    match remote {
        Some(host) => {
            let ok = Command::new("ssh").arg(host).arg(format!("kill -9 {pid}")).status().unwrap();
            assert!(ok.success(), "ssh {host} kill -9 {pid} failed");
            let _ = child.kill();
        }
        None => child.kill().unwrap(),
    }
    let killed = Instant::now();
    while !t.is_finished() && killed.elapsed() < Duration::from_secs(60) {
        thread::sleep(Duration::from_millis(20));
    }
    stop.store(true, Ordering::Relaxed);
    let err = t.join().unwrap().expect_err("sends to a dead process must fail").to_string();
    println!("after {:?}: {err}", killed.elapsed());
    child.wait().unwrap();
    assert!(killed.elapsed() < Duration::from_secs(60), "no error within 60 s");
    assert!(err.contains("flow 1->2") && err.contains("QP 0"), "{err}");
    assert!(err.contains("_ERR") || err.contains("no progress"), "{err}");
}

#[test]
fn bad_parameters_and_devices_are_named() {
    let e = rdma::prepare(&flow(Op::Write, RdmaKnobs { qps: 0, ..Default::default() }), Side::Sender)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("qps"), "{e}");
    let Some(_dev) = rdma_device("bad_parameters_and_devices_are_named") else { return };
    let e = rdma::prepare(
        &flow(Op::Write, RdmaKnobs { device: Some("nosuch9".into()), ..Default::default() }),
        Side::Sender,
    )
    .err()
    .unwrap()
    .to_string();
    assert!(e.contains("nosuch9") && e.contains("available"), "{e}");
}
