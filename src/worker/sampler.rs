//! The sampler of one rank's phase: reads every flow's counters at the
//! common boundaries and hands on what each end moved in each interval (so
//! nothing grows with the window), CPU and interface counters at the
//! window's edges, stops the streams and the stress at its end, and writes
//! the report.
//! CPU is read per thread (`metrics::cpu`) at the first and the last
//! boundary only (or where the phase was stopped): every thread's /proc
//! files, which a rank of thousands of flows should not read each interval.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use crate::control::wire::Window;
use crate::load::stress::{Burners, StressError, StressReport};
use crate::metrics::clock::PeerClock;
use crate::metrics::cpu::{CoreTicks, CpuSnapshot, CpuUsage, ThreadBook};
use crate::metrics::links::{LinkWatch, Watched};
use crate::metrics::netdev::NetdevSnapshot;
use crate::metrics::{FlowSamples, GroupPlacement, LaneSamples, RankReport};
use crate::transport::rdma::counters::{self, CounterSnapshot, DevicePort};
use crate::transport::tcp::info::{TcpInfo, TcpView};
use crate::transport::Counts;
use crate::worker::engine::sleep_until;
use crate::worker::streams::FlowEnd;

pub struct Sampler {
    pub rank: usize,
    pub phase: usize,
    pub t0: Instant,
    pub window: Window,
    pub clock: PeerClock,
    pub iface: Option<String>,
    /// RDMA device ports whose counters are read at the window's edges.
    pub rdma_ports: Vec<DevicePort>,
    pub ends: Vec<FlowEnd>,
    /// The rank's stress (its asked load) or why it could not start.
    pub burners: Option<Result<(u8, Burners), StressError>>,
    /// The phase's data-path and burner threads.
    pub book: ThreadBook,
    pub stop: Arc<AtomicBool>,
}

/// One flow end's readings: its totals at the latest boundary, its lanes'
/// bytes at the first and at the latest, and its sending TCP streams'
/// `TCP_INFO` at the window's edges.
#[derive(Default)]
struct EndReadings {
    latest: Counts,
    opened: Vec<u64>,
    closed: Vec<u64>,
    tcp_opened: Vec<Option<TcpInfo>>,
    tcp_closed: Vec<Option<TcpInfo>>,
}

/// Counters of the host at a window edge.
struct HostCounters {
    cores: CoreTicks,
    net: Option<NetdevSnapshot>,
    rdma: Vec<CounterSnapshot>,
}

impl Sampler {
    /// Samples until the window closes or `stop`; `progress(k, span_ns,
    /// moved)` is told interval k's length on the coordinator's clock and
    /// what each end moved in it, in the ends' order.
    pub fn run(mut self, streams: Vec<JoinHandle<()>>, progress: impl Fn(u32, i64, Vec<Counts>)) -> RankReport {
        let boundaries = self.window.boundaries();
        let mut taken = 0;
        let mut previous_ns = 0;
        let mut counts: Vec<EndReadings> = (0..self.ends.len()).map(|_| EndReadings::default()).collect();
        let (mut first, mut last) = (None, None);
        let (mut cpu_open, mut cpu_close) = (None, None);
        let mut links = LinkWatch::new(self.watched());
        for k in 0..boundaries {
            sleep_until(self.t0 + self.window.boundary(k), &self.stop);
            if self.stop.load(Ordering::Relaxed) {
                break;
            }
            let now = Instant::now();
            // The host's counters enclose the flows' own: read before them at
            // the first edge and after them at the others, so an interface
            // never shows less than the application counted through it.
            let opening = (k == 0).then(|| self.host_counters());
            let moved: Vec<Counts> = self
                .ends
                .iter()
                .zip(counts.iter_mut())
                .map(|(end, readings)| {
                    let total = end.read(&mut readings.closed);
                    if k == 0 {
                        readings.opened.clone_from(&readings.closed);
                    }
                    let was = std::mem::replace(&mut readings.latest, total);
                    total.since(was)
                })
                .collect();
            let at_ns = self.clock.peer_ns_of(now) - self.clock.peer_ns_of(self.t0);
            let span_ns = at_ns - std::mem::replace(&mut previous_ns, at_ns);
            taken += 1;
            links.observe(at_ns);
            let edge = opening.unwrap_or_else(|| self.host_counters());
            // Each thread's CPU after the flows' counters, timed on its own.
            if k == 0 || k + 1 == boundaries {
                let cpu = Some((Instant::now(), CpuSnapshot::take(&self.book)));
                *if k == 0 { &mut cpu_open } else { &mut cpu_close } = cpu;
            }
            if k == 0 {
                // TCP's view after every flow's counters too: a read per stream
                // between them would spread the boundary over the ends.
                for (end, readings) in self.ends.iter().zip(&mut counts) {
                    readings.tcp_opened = end.tcp_info();
                }
                first = Some(edge);
            } else {
                last = Some(edge);
                progress(k, span_ns, moved);
            }
        }
        // TCP's view at the last boundary taken, or where the phase was stopped.
        for (end, readings) in self.ends.iter().zip(&mut counts) {
            if !readings.tcp_opened.is_empty() {
                readings.tcp_closed = end.tcp_info();
            }
        }
        // Stopped early: the CPU of the window up to now.
        if cpu_open.is_some() && cpu_close.is_none() {
            cpu_close = Some((Instant::now(), CpuSnapshot::take(&self.book)));
        }
        let cpu = match (cpu_open, cpu_close) {
            (Some((t0, a)), Some((t1, b))) => Some(a.usage_until(&b, (t1 - t0).as_secs_f64())),
            _ => None,
        };
        let aborted = self.stop.swap(true, Ordering::Relaxed);
        let stress = self.burners.take().map(|b| stop_stress(b, first.as_ref(), last.as_ref()));
        for s in streams {
            let _ = s.join();
        }
        let mut report = self.report(taken, counts, (first, last), cpu.unwrap_or_default(), stress, aborted);
        let seen = links.finish();
        report.link_events = seen.events;
        report.link_events_dropped = seen.dropped;
        report
    }

    /// The devices whose link events are watched: the interface of the
    /// rank's address and its flows' RDMA ports.
    fn watched(&self) -> Vec<Watched> {
        let ports = self.rdma_ports.iter().map(|p| Watched::rdma_port(&p.device, p.port));
        self.iface.iter().map(|i| Watched::netdev(i)).chain(ports).collect()
    }

    fn host_counters(&self) -> HostCounters {
        HostCounters {
            cores: CoreTicks::take(),
            net: self.iface.as_deref().and_then(NetdevSnapshot::take),
            // A port whose counters cannot be read is left out of both edges.
            rdma: self.rdma_ports.iter().filter_map(|p| counters::snapshot(&p.device, p.port).ok()).collect(),
        }
    }

    fn report(
        self,
        boundaries: u32,
        counts: Vec<EndReadings>,
        (first, last): (Option<HostCounters>, Option<HostCounters>),
        cpu: CpuUsage,
        stress: Option<StressReport>,
        aborted: bool,
    ) -> RankReport {
        let (netdevs, rdma_counters) = match (first, last) {
            (Some(a), Some(b)) => {
                let net = match (a.net, b.net) {
                    (Some(n0), Some(n1)) => vec![n0.delta_until(&n1)],
                    _ => Vec::new(),
                };
                let rdma = a
                    .rdma
                    .iter()
                    .filter_map(|s0| {
                        let s1 = b.rdma.iter().find(|s1| s1.device == s0.device && s1.port == s0.port)?;
                        Some(s0.moved_until(s1))
                    })
                    .collect();
                (net, rdma)
            }
            _ => Default::default(),
        };
        let flows = self.flow_samples(counts);
        let mut placements: Vec<GroupPlacement> = Vec::new();
        for end in &self.ends {
            if placements.iter().all(|p| p.group != end.role.group.name) {
                let (cores, note) = match &end.placed {
                    Ok(p) => (p.cores.clone(), p.note.clone()),
                    Err(e) => (Vec::new(), Some(e.to_string())),
                };
                let core_nodes = crate::load::topology::nodes_of(&cores);
                let (group, device_node) = (end.role.group.name.clone(), end.device_node);
                placements.push(GroupPlacement { group, cores, note, core_nodes, device_node });
            }
        }
        RankReport {
            phase: self.phase,
            rank: self.rank,
            boundaries,
            flows,
            clock_offset_ns: self.clock.offset_ns,
            rtt_ns: self.clock.rtt_ns,
            cpu,
            netdevs,
            rdma_counters,
            stress,
            placements,
            error: aborted.then(|| "stopped before the window closed".to_string()),
            link_events: Vec::new(),
            link_events_dropped: 0,
        }
    }

    /// Each end's samples: its start, error, round trips, lanes' bytes at
    /// the window's edges and TCP's view of the window.
    fn flow_samples(&self, counts: Vec<EndReadings>) -> Vec<FlowSamples> {
        let t0_ns = self.clock.peer_ns_of(self.t0);
        self.ends
            .iter()
            .zip(counts)
            .map(|(end, EndReadings { opened, closed, tcp_opened, tcp_closed, .. })| FlowSamples {
                flow: end.role.flow.id,
                side: end.role.side,
                start_ns: end.state.started().map(|at| self.clock.peer_ns_of(at) - t0_ns),
                error: end.state.error(),
                rtts: end.state.take_round_trips(),
                refused: end.refused,
                gpu_memory: end.gpu_memory.clone(),
                validation: end.validation(),
                lanes: match end.lanes.len() {
                    1 => Vec::new(),
                    _ => end
                        .lanes
                        .iter()
                        .zip(opened.into_iter().zip(closed))
                        .map(|(lane, (opened, closed))| LaneSamples { device: lane.device.clone(), opened, closed })
                        .collect(),
                },
                engines: end.engines.clone(),
                tcp: TcpView::of(&tcp_opened, &tcp_closed),
            })
            .collect()
    }
}

/// Stops the burners and says what load their cores actually carried.
fn stop_stress(
    burners: Result<(u8, Burners), StressError>,
    first: Option<&HostCounters>,
    last: Option<&HostCounters>,
) -> StressReport {
    match burners {
        Err(note) => StressReport { note: Some(note.to_string()), ..Default::default() },
        Ok((load, burners)) => {
            let cores = burners.placed.cores.clone();
            let measured = match (first, last) {
                (Some(a), Some(b)) => a.cores.busy_pct_until(&b.cores, &cores),
                _ => 0.0,
            };
            let report = StressReport {
                threads: burners.count,
                cores,
                asked_load_pct: f64::from(load),
                measured_load_pct: measured,
                note: burners.placed.note.clone(),
            };
            burners.stop();
            report
        }
    }
}
