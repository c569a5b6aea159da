//! The streams of one end of one flow: a thread per connection running the
//! transport's loop from t0, pinned where the group asks, sharing counters.

use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::control::wire::FlowRole;
use crate::load::placement::{self, Placed};
use crate::metrics::latency::Histogram;
use crate::scenario::Mode;
use crate::transport::{rdma, tcp, FlowCounters, Side};

/// Told when a flow fails while its phase runs (the error, naming the flow).
pub type FlowFailed = Arc<dyn Fn(String) + Send + Sync>;

/// One end of one flow on this rank.
pub struct End {
    pub role: FlowRole,
    pub counters: Arc<FlowCounters>,
    /// When the last of its streams began moving data.
    pub started: Arc<Mutex<Option<Instant>>>,
    pub error: Arc<Mutex<Option<String>>>,
    /// Round trips measured in the window (TCP latency clients).
    pub rtts: Arc<Mutex<Option<Histogram>>>,
    /// Every latency sample of an RDMA initiator, in order (perftest's
    /// measure: half round trip for write/send, round trip for read); the
    /// sampler keeps those of the window.
    pub rdma_samples: Arc<Mutex<Option<Vec<u64>>>>,
    /// Where its threads run (or why not as asked).
    pub placed: Result<Placed, String>,
}

impl End {
    pub fn new(role: FlowRole, device_node: Option<usize>) -> End {
        let placed = placement::resolve(&role.group.placement, device_node);
        End {
            role,
            counters: Arc::default(),
            started: Arc::default(),
            error: Arc::default(),
            rtts: Arc::default(),
            rdma_samples: Arc::default(),
            placed,
        }
    }

    /// Runs one connection of this end from `t0` until `stop`.
    pub fn spawn(
        &self,
        sock: TcpStream,
        t0: Instant,
        window: (Instant, Instant),
        stop: Arc<AtomicBool>,
    ) -> JoinHandle<()> {
        let (counters, started, error, rtts) =
            (self.counters.clone(), self.started.clone(), self.error.clone(), self.rtts.clone());
        let (side, mode) = (self.role.side, self.role.group.mode);
        let size = self.role.group.message_size.bytes() as usize;
        let cores = self.placed.as_ref().map(|p| p.cores.clone()).unwrap_or_default();
        std::thread::spawn(move || {
            if let Err(e) = placement::pin_current_thread(&cores) {
                error.lock().expect("error lock").get_or_insert(e);
            }
            // Allocate before t0: the loops themselves allocate nothing.
            let mut buf = vec![0xA5u8; size.clamp(1, 4 << 20)];
            let mut histogram = Histogram::default();
            sleep_until(t0, &stop);
            if stop.load(Ordering::Relaxed) {
                return;
            }
            note_start(&started);
            let outcome = match (mode, side) {
                (Mode::Bandwidth, Side::Sender) => tcp::send_loop(sock, &buf, &counters, &stop),
                (Mode::Bandwidth, Side::Receiver) => tcp::receive_loop(sock, &mut buf, size as u64, &counters, &stop),
                (Mode::Latency, Side::Sender) => {
                    tcp::ping_loop(sock, &mut buf, &counters, &stop, window, &mut histogram)
                }
                (Mode::Latency, Side::Receiver) => tcp::echo_loop(sock, &mut buf, &counters, &stop),
            };
            if let Err(e) = outcome {
                error.lock().expect("error lock").get_or_insert(e.to_string());
            }
            if mode == Mode::Latency && side == Side::Sender {
                *rtts.lock().expect("latency lock") = Some(histogram);
            }
        })
    }
}

impl End {
    /// Runs an RDMA flow end (all its QPs) from `t0` until `stop`. An error
    /// before `stop` (bad completion status, stall) is also told to `failed`:
    /// the flow is over and the run must not wait for the window to close.
    pub fn spawn_rdma(
        &self,
        flow: rdma::ConnectedFlow,
        t0: Instant,
        stop: Arc<AtomicBool>,
        failed: FlowFailed,
    ) -> JoinHandle<()> {
        let (counters, started, error, samples) =
            (self.counters.clone(), self.started.clone(), self.error.clone(), self.rdma_samples.clone());
        let cores = self.placed.as_ref().map(|p| p.cores.clone()).unwrap_or_default();
        std::thread::spawn(move || {
            if let Err(e) = placement::pin_current_thread(&cores) {
                error.lock().expect("error lock").get_or_insert(e);
            }
            sleep_until(t0, &stop);
            if stop.load(Ordering::Relaxed) {
                return;
            }
            note_start(&started);
            match flow.run(&counters, &stop) {
                Ok(outcome) => *samples.lock().expect("samples lock") = outcome.latency_ns,
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
