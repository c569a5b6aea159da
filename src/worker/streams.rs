//! The streams of one end of one flow: a thread per connection (TCP) or
//! rail (RDMA) running the transport's loop from t0, pinned where the group
//! asks, each counting into its own lane; the end's totals are the lanes' sum.

use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::control::wire::FlowRole;
use crate::histogram::{Histogram, Recorder};
use crate::load::placement::{self, Placed};
use crate::metrics::cpu::{ThreadBook, ThreadClass, DATA_THREAD};
use crate::scenario::limits::TCP_MAX_MESSAGE;
use crate::scenario::rate::Schedule;
use crate::scenario::Mode;
use crate::transport::pace::{Pacer, ProbePlan};
use crate::transport::{rdma, tcp, FlowCounters, Side};

/// Told when a flow fails while its phase runs (the error, naming the flow).
pub type FlowFailed = Arc<dyn Fn(String) + Send + Sync>;

/// One lane of a flow end: a TCP stream or an RDMA rail, with its own
/// counters (one writer each, so no stream contends with another).
pub struct Lane {
    pub counters: Arc<FlowCounters>,
    /// RDMA: the rail's device.
    pub device: Option<String>,
}

/// One end of one flow on this rank.
pub struct FlowEnd {
    pub role: FlowRole,
    /// In stream (rail) order.
    pub lanes: Vec<Lane>,
    /// When the last of its streams began moving data.
    pub started: Arc<Mutex<Option<Instant>>>,
    pub error: Arc<Mutex<Option<String>>>,
    /// Round trips measured in the window by the latency client's end, all
    /// its streams (TCP) or rails (RDMA) merged.
    pub rtts: Arc<Mutex<Option<Histogram>>>,
    /// Where its threads run (or why not as asked); several rails: the
    /// union of their cores, each rail near its own device.
    pub placed: Result<Placed, String>,
    /// Strangers its TCP receiver closed while connecting.
    pub refused: u64,
}

impl FlowEnd {
    pub fn new(role: FlowRole, device_node: Option<usize>) -> FlowEnd {
        let placed = placement::resolve(&role.group.placement, device_node);
        FlowEnd {
            role,
            lanes: Vec::new(),
            started: Arc::default(),
            error: Arc::default(),
            rtts: Arc::default(),
            placed,
            refused: 0,
        }
    }

    /// The end's totals (bytes, messages) and each lane's bytes into
    /// `lanes`, read at one instant: the totals are the lanes' sum.
    pub fn read(&self, lanes: &mut Vec<u64>) -> (u64, u64) {
        lanes.clear();
        let mut total = (0, 0);
        for lane in &self.lanes {
            let (bytes, messages) = lane.counters.read();
            lanes.push(bytes);
            total = (total.0 + bytes, total.1 + messages);
        }
        total
    }

    fn add_lane(&mut self, device: Option<String>) -> Arc<FlowCounters> {
        let counters = Arc::<FlowCounters>::default();
        self.lanes.push(Lane { counters: counters.clone(), device });
        counters
    }

    /// Runs one connection of this end from `t0` until `stop`, on a
    /// data-path thread booked in `book`.
    pub fn spawn(
        &mut self,
        sock: TcpStream,
        t0: Instant,
        window: (Instant, Instant),
        stop: Arc<AtomicBool>,
        book: ThreadBook,
    ) -> JoinHandle<()> {
        let stream = self.lanes.len() as u64;
        let counters = self.add_lane(None);
        let (started, error, rtts) = (self.started.clone(), self.error.clone(), self.rtts.clone());
        let (side, mode) = (self.role.side, self.role.group.mode);
        let pace = self.stream_pace(stream, t0);
        let size = self.role.group.message_size.bytes() as usize;
        let cores = self.placed.as_ref().map(|p| p.cores.clone()).unwrap_or_default();
        self.data_thread(move || {
            let _booked = book.enter(ThreadClass::Data);
            if let Err(e) = placement::pin_current_thread(&cores) {
                error.lock().expect("error lock").get_or_insert(e);
            }
            // Allocate before t0: the loops themselves allocate nothing. One message
            // per buffer: validation keeps TCP sizes within TCP_MAX_MESSAGE.
            let mut buf = vec![0xA5u8; size.clamp(1, TCP_MAX_MESSAGE as usize)];
            let mut recorder = (mode == Mode::Latency && side == Side::Sender).then(|| Recorder::new(Some(window)));
            sleep_until(t0, &stop);
            // A sender that would begin after its window closed (its rank
            // got Start late) or was told to stop closes cleanly (EOF): its
            // receiver may be gone, and it would only write into a reset
            // connection; it is reported late, not broken. A receiver still
            // reads until its sender closes, which may be sending already:
            // its rank's window is not this one's.
            let too_late = stop.load(Ordering::Relaxed) || Instant::now() >= window.1;
            if too_late && side == Side::Sender {
                return;
            }
            note_start(&started);
            let outcome = match (mode, side, recorder.as_mut()) {
                (Mode::Bandwidth, Side::Sender, _) => {
                    tcp::send_loop(sock, &buf, &counters, &stop, pace.map(|p| Pacer::new(p.per_s)))
                }
                (Mode::Bandwidth, Side::Receiver, _) => {
                    tcp::receive_loop(sock, &mut buf, size as u64, &counters, (&stop, window.1))
                }
                (Mode::Latency, _, Some(recorder)) => match pace {
                    Some(plan) => tcp::probe_loop(sock, &mut buf, &counters, &stop, recorder, plan),
                    None => tcp::ping_loop(sock, &mut buf, &counters, &stop, recorder),
                },
                (Mode::Latency, _, None) => tcp::echo_loop(sock, &mut buf, &counters, (&stop, window.1)),
            };
            if let Err(e) = outcome {
                error.lock().expect("error lock").get_or_insert(e.to_string());
            }
            if let Some(recorder) = recorder {
                keep_round_trips(&rtts, recorder.into_histogram());
            }
        })
    }
}

impl FlowEnd {
    /// What one of the end's `streams` offers when its group has a `rate`
    /// (the flow's rate split evenly): its messages per second from `t0`
    /// and, for Poisson probes, the seed of stream `stream` of this flow.
    fn stream_pace(&self, stream: u64, t0: Instant) -> Option<ProbePlan> {
        let group = &self.role.group;
        let per_s = group.offered_msgs_per_s()? / f64::from(group.streams.max(1));
        Some(ProbePlan { start: t0, per_s, poisson_seed: self.poisson_seed(stream) })
    }

    /// The seed of the Poisson probes of stream (or rail) `stream` of this
    /// flow, where the group's schedule is Poisson.
    pub fn poisson_seed(&self, stream: u64) -> Option<u64> {
        let poisson = self.role.group.schedule == Some(Schedule::Poisson);
        poisson.then_some(u64::from(self.role.flow.id) << 32 | stream)
    }

    /// Runs one rail of an RDMA flow end (all its QPs on `device`) from `t0`
    /// until `stop`, its threads near `device_node`. An error before `stop`
    /// (bad completion status, stall) is also told to `failed`: the flow is
    /// over and the run must not wait for the window to close.
    pub fn spawn_rdma(
        &mut self,
        (flow, device, device_node): (rdma::ConnectedFlow, String, Option<usize>),
        t0: Instant,
        window: (Instant, Instant),
        stop: Arc<AtomicBool>,
        failed: FlowFailed,
        book: ThreadBook,
    ) -> JoinHandle<()> {
        let rail = placement::resolve(&self.role.group.placement, device_node);
        let cores = rail.as_ref().map(|p| p.cores.clone()).unwrap_or_default();
        self.placed = widen(std::mem::replace(&mut self.placed, Ok(Placed::default())), rail);
        let counters = self.add_lane(Some(device));
        let (started, error, rtts) = (self.started.clone(), self.error.clone(), self.rtts.clone());
        let flow = flow.with_latency_window(window.0, window.1);
        self.data_thread(move || {
            let _booked = book.enter(ThreadClass::Data);
            if let Err(e) = placement::pin_current_thread(&cores) {
                error.lock().expect("error lock").get_or_insert(e);
            }
            sleep_until(t0, &stop);
            if stop.load(Ordering::Relaxed) {
                return;
            }
            note_start(&started);
            match flow.run(&counters, &stop) {
                Ok(outcome) => {
                    if let Some(round_trips) = outcome.latency {
                        keep_round_trips(&rtts, round_trips);
                    }
                }
                Err(e) => {
                    if !stop.load(Ordering::Relaxed) {
                        failed(e.to_string());
                    }
                    error.lock().expect("error lock").get_or_insert(e.to_string());
                }
            }
        })
    }
}

impl FlowEnd {
    /// A data-path thread of this end, named `fb-data F` (F: the flow) for
    /// `top -H` and `ps -L`.
    fn data_thread(&self, run: impl FnOnce() + Send + 'static) -> JoinHandle<()> {
        let name = format!("{DATA_THREAD} {}", self.role.flow.id);
        std::thread::Builder::new().name(name).spawn(run).expect("spawning a data-path thread")
    }
}

/// An end's placement with one more rail's: the union of their cores, the
/// first note; a rail that could not be placed makes the end's an error.
fn widen(end: Result<Placed, String>, rail: Result<Placed, String>) -> Result<Placed, String> {
    let (mut end, rail) = (end?, rail?);
    end.cores.extend(rail.cores);
    end.cores.sort_unstable();
    end.cores.dedup();
    end.note = end.note.or(rail.note);
    Ok(end)
}

/// Adds one stream's (or rail's) round trips to its end's.
fn keep_round_trips(rtts: &Mutex<Option<Histogram>>, round_trips: Histogram) {
    match &mut *rtts.lock().expect("latency lock") {
        Some(kept) => kept.merge(&round_trips),
        empty => *empty = Some(round_trips),
    }
}

/// Records that one more stream of an end began moving data now.
fn note_start(started: &Mutex<Option<Instant>>) {
    let now = Instant::now();
    let mut latest = started.lock().expect("start lock");
    *latest = Some(latest.map_or(now, |prev| prev.max(now)));
}

/// Sleeps until `at`, waking early if `stop` is set.
pub fn sleep_until(at: Instant, stop: &AtomicBool) {
    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        if now >= at {
            return;
        }
        std::thread::park_timeout((at - now).min(Duration::from_millis(10)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rails_near_different_nodes_widen_the_ends_cores() {
        let placed =
            |cores: &[usize], note: Option<&str>| Placed { cores: cores.to_vec(), note: note.map(String::from) };
        let end = widen(Ok(placed(&[0, 1], None)), Ok(placed(&[2, 3, 1], Some("rail 1"))));
        assert_eq!(end, Ok(placed(&[0, 1, 2, 3], Some("rail 1"))));
        let end = widen(Ok(placed(&[0], Some("first"))), Ok(placed(&[4], Some("second"))));
        assert_eq!(end.unwrap().note.as_deref(), Some("first"), "the first note stays");
        let bad = widen(Ok(placed(&[0], None)), Err("core 4096 does not exist".into()));
        assert_eq!(bad, Err("core 4096 does not exist".to_string()), "a rail that cannot be placed is told");
    }

    #[test]
    fn every_stream_keeps_its_round_trips() {
        let rtts = Mutex::new(None);
        for ns in [[1_000, 2_000], [3_000, 4_000], [5_000, 6_000]] {
            let mut h = Histogram::default();
            ns.into_iter().for_each(|ns| h.record(ns));
            keep_round_trips(&rtts, h);
        }
        let kept = rtts.into_inner().unwrap().unwrap();
        assert_eq!(kept.count(), 6, "the streams' round trips add up, none replaces another");
        assert!((kept.summary(1.0).unwrap().max_us - 6.0).abs() < 6e-3);
    }
}
