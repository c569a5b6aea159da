//! One phase on one rank: create the rank's ends of its flows, connect them,
//! run every stream on its own thread from t0, and sample all counters at
//! the common boundaries. Blocking code on plain threads: the data path
//! never waits on the async runtime.

use std::net::{IpAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::control::wire::{Endpoint, FlowEndpoint, FlowRole, Side, Window};
use crate::metrics::clock::PeerClock;
use crate::metrics::cpu::CpuSnapshot;
use crate::metrics::latency::Histogram;
use crate::metrics::netdev::{self, NetdevSnapshot};
use crate::metrics::{FlowSamples, RankReport};
use crate::scenario::Mode;
use crate::transport::{tcp, FlowCounters};

/// How long connecting a phase's flows may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum PhaseError {
    #[error("flow {flow} ({side:?}): {cause}")]
    Tcp { flow: u32, side: Side, cause: tcp::TcpError },
    #[error("flow {flow}: the coordinator sent no peer endpoint")]
    NoPeer { flow: u32 },
}

/// The rank's ends of its flows, created and waiting for peers.
pub struct Prepared {
    phase: usize,
    bind: IpAddr,
    ends: Vec<(FlowRole, Option<tcp::Listener>)>,
}

/// Every flow connected; ready for Start.
pub struct Connected {
    phase: usize,
    bind: IpAddr,
    ends: Vec<(FlowRole, Vec<TcpStream>)>,
}

/// A phase in flight: stop it early through [`Running::stopper`], collect
/// its report with [`Running::join`].
pub struct Running {
    stop: Arc<AtomicBool>,
    sampler: JoinHandle<RankReport>,
}

pub fn prepare(phase: usize, roles: Vec<FlowRole>, bind: IpAddr) -> Result<(Prepared, Vec<FlowEndpoint>), PhaseError> {
    let mut ends = Vec::with_capacity(roles.len());
    let mut endpoints = Vec::new();
    for role in roles {
        let listener = match role.side {
            Side::Receiver => {
                let l = tcp::Listener::bind(bind).map_err(|cause| PhaseError::Tcp {
                    flow: role.flow.id,
                    side: role.side,
                    cause,
                })?;
                endpoints.push(FlowEndpoint {
                    flow: role.flow.id,
                    side: Side::Receiver,
                    endpoint: Endpoint::Tcp { addr: l.local_addr() },
                });
                Some(l)
            }
            Side::Sender => None,
        };
        ends.push((role, listener));
    }
    Ok((Prepared { phase, bind, ends }, endpoints))
}

impl Prepared {
    /// Connects senders to their receivers' endpoints and accepts on the
    /// receiving ends, all at once (a rank may be both ends of a flow).
    pub fn connect(self, peers: &[FlowEndpoint]) -> Result<Connected, PhaseError> {
        let Prepared { phase, bind, ends } = self;
        let mut pending = Vec::new();
        for (role, listener) in ends {
            let (flow, side, streams) = (role.flow.id, role.side, role.group.streams);
            let task: JoinHandle<Result<Vec<TcpStream>, PhaseError>> = match listener {
                Some(l) => std::thread::spawn(move || {
                    l.accept(streams, CONNECT_TIMEOUT).map_err(|cause| PhaseError::Tcp { flow, side, cause })
                }),
                None => {
                    let peer = peers
                        .iter()
                        .find(|p| p.flow == flow && p.side == Side::Receiver)
                        .ok_or(PhaseError::NoPeer { flow })?;
                    let Endpoint::Tcp { addr } = peer.endpoint;
                    std::thread::spawn(move || {
                        tcp::connect(bind, addr, streams, CONNECT_TIMEOUT).map_err(|cause| PhaseError::Tcp {
                            flow,
                            side,
                            cause,
                        })
                    })
                }
            };
            pending.push((role, task));
        }
        let mut connected = Vec::with_capacity(pending.len());
        for (role, task) in pending {
            let streams = task.join().expect("connect threads do not panic")?;
            connected.push((role, streams));
        }
        Ok(Connected { phase, bind, ends: connected })
    }
}

/// The end of one flow on this rank, and when its streams began.
struct End {
    role: FlowRole,
    counters: Arc<FlowCounters>,
    started: Arc<Mutex<Option<Instant>>>,
    error: Arc<Mutex<Option<String>>>,
    /// Round trips measured in the window (latency clients only).
    rtts: Arc<Mutex<Option<Histogram>>>,
}

impl Connected {
    /// Starts every stream at `t0` and samples through the window.
    /// `progress(interval, tx, rx)` is called after each interval.
    pub fn start(
        self,
        rank: usize,
        t0: Instant,
        window: Window,
        clock: PeerClock,
        progress: impl Fn(u32, u64, u64) + Send + 'static,
    ) -> Running {
        let stop = Arc::new(AtomicBool::new(false));
        let mut ends = Vec::new();
        let mut streams = Vec::new();
        for (role, socks) in self.ends {
            let end = End {
                role,
                counters: Arc::new(FlowCounters::default()),
                started: Arc::new(Mutex::new(None)),
                error: Arc::new(Mutex::new(None)),
                rtts: Arc::new(Mutex::new(None)),
            };
            let open = t0 + window.boundary(0);
            let close = t0 + window.boundary(window.boundaries() - 1);
            for sock in socks {
                streams.push(spawn_stream(&end, sock, t0, (open, close), stop.clone()));
            }
            ends.push(end);
        }
        let iface = netdev::iface_of(self.bind);
        let phase = self.phase;
        let stop_for_sampler = stop.clone();
        let sampler = std::thread::spawn(move || {
            let sampler = Sampler { rank, phase, t0, window, clock, iface, ends, stop: stop_for_sampler };
            sampler.run(streams, progress)
        });
        Running { stop, sampler }
    }
}

fn spawn_stream(
    end: &End,
    sock: TcpStream,
    t0: Instant,
    window: (Instant, Instant),
    stop: Arc<AtomicBool>,
) -> JoinHandle<()> {
    let (counters, started, error, rtts) =
        (end.counters.clone(), end.started.clone(), end.error.clone(), end.rtts.clone());
    let (side, mode) = (end.role.side, end.role.group.mode);
    let size = end.role.group.message_size.bytes() as usize;
    std::thread::spawn(move || {
        // Allocate before t0: the loops themselves allocate nothing.
        let mut buf = vec![0xA5u8; size.clamp(1, 4 << 20)];
        let mut histogram = Histogram::default();
        sleep_until(t0, &stop);
        if stop.load(Ordering::Relaxed) {
            return;
        }
        let now = Instant::now();
        {
            let mut latest = started.lock().expect("start lock");
            *latest = Some(latest.map_or(now, |prev| prev.max(now)));
        }
        let outcome = match (mode, side) {
            (Mode::Bandwidth, Side::Sender) => tcp::send_loop(sock, &buf, &counters, &stop),
            (Mode::Bandwidth, Side::Receiver) => tcp::receive_loop(sock, &mut buf, size as u64, &counters, &stop),
            (Mode::Latency, Side::Sender) => tcp::ping_loop(sock, &mut buf, &counters, &stop, window, &mut histogram),
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

/// Sleeps until `at`, waking early if `stop` is set.
fn sleep_until(at: Instant, stop: &AtomicBool) {
    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        if now >= at {
            return;
        }
        std::thread::park_timeout((at - now).min(Duration::from_millis(10)));
    }
}

struct Sampler {
    rank: usize,
    phase: usize,
    t0: Instant,
    window: Window,
    clock: PeerClock,
    iface: Option<String>,
    ends: Vec<End>,
    stop: Arc<AtomicBool>,
}

impl Sampler {
    fn run(self, streams: Vec<JoinHandle<()>>, progress: impl Fn(u32, u64, u64)) -> RankReport {
        let boundaries = self.window.boundaries();
        let mut sample_ns = Vec::with_capacity(boundaries as usize);
        let mut counts: Vec<Vec<(u64, u64)>> = vec![Vec::with_capacity(boundaries as usize); self.ends.len()];
        let mut first = None;
        let mut last = None;
        for k in 0..boundaries {
            let at = self.t0 + self.window.boundary(k);
            sleep_until(at, &self.stop);
            if self.stop.load(Ordering::Relaxed) {
                break;
            }
            let now = Instant::now();
            for (end, series) in self.ends.iter().zip(counts.iter_mut()) {
                series.push(end.counters.read());
            }
            sample_ns.push(self.clock.peer_ns_of(now) - self.clock.peer_ns_of(self.t0));
            let snapshot = (CpuSnapshot::take(), self.iface.as_deref().and_then(NetdevSnapshot::take), now);
            if k == 0 {
                first = Some(snapshot);
            } else {
                last = Some(snapshot);
                let (tx, rx) = self.interval_bytes(&counts, k as usize);
                progress(k, tx, rx);
            }
        }
        let aborted = self.stop.swap(true, Ordering::Relaxed);
        for s in streams {
            let _ = s.join();
        }
        self.report(sample_ns, counts, first, last, aborted)
    }

    fn interval_bytes(&self, counts: &[Vec<(u64, u64)>], k: usize) -> (u64, u64) {
        let mut tx = 0;
        let mut rx = 0;
        for (end, series) in self.ends.iter().zip(counts) {
            let delta = series[k].0 - series[k - 1].0;
            match end.role.side {
                Side::Sender => tx += delta,
                Side::Receiver => rx += delta,
            }
        }
        (tx, rx)
    }

    fn report(
        self,
        sample_ns: Vec<i64>,
        counts: Vec<Vec<(u64, u64)>>,
        first: Option<(CpuSnapshot, Option<NetdevSnapshot>, Instant)>,
        last: Option<(CpuSnapshot, Option<NetdevSnapshot>, Instant)>,
        aborted: bool,
    ) -> RankReport {
        let (cpu, netdevs) = match (first, last) {
            (Some((cpu0, net0, t_first)), Some((cpu1, net1, t_last))) => {
                let seconds = (t_last - t_first).as_secs_f64();
                let net = match (net0, net1) {
                    (Some(a), Some(b)) => vec![a.delta_until(&b)],
                    _ => Vec::new(),
                };
                (cpu0.usage_until(&cpu1, seconds), net)
            }
            _ => Default::default(),
        };
        let t0_ns = self.clock.peer_ns_of(self.t0);
        let flows = self
            .ends
            .iter()
            .zip(counts)
            .map(|(end, series)| FlowSamples {
                flow: end.role.flow.id,
                side: end.role.side,
                bytes: series.iter().map(|c| c.0).collect(),
                messages: series.iter().map(|c| c.1).collect(),
                start_ns: end.started.lock().ok().and_then(|s| *s).map(|at| self.clock.peer_ns_of(at) - t0_ns),
                error: end.error.lock().ok().and_then(|e| e.clone()),
                rtts: end.rtts.lock().ok().and_then(|mut h| h.take()),
            })
            .collect();
        RankReport {
            phase: self.phase,
            rank: self.rank,
            sample_ns,
            flows,
            clock_offset_ns: self.clock.offset_ns,
            rtt_ns: self.clock.rtt_ns,
            cpu,
            netdevs,
            error: aborted.then(|| "stopped before the window closed".to_string()),
        }
    }
}

/// Ends a running phase early, from any thread.
#[derive(Clone)]
pub struct Stopper(Arc<AtomicBool>);

impl Stopper {
    pub fn stop(&self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

impl Running {
    pub fn stopper(&self) -> Stopper {
        Stopper(self.stop.clone())
    }

    /// Waits for the sampler's report (blocking: call from a blocking context).
    pub fn join(self) -> RankReport {
        self.sampler.join().expect("the sampler does not panic")
    }
}
