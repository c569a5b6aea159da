//! One phase on one rank: create the rank's ends of its flows (the
//! busy-polling RDMA shards one engine will run on one shared CQ per
//! device: `cq_groups`), connect them (`phase_connect`), then run every
//! TCP stream and every shard of an RDMA rail on an engine — one thread
//! per core the rank's flows may use, each driving many lanes (`engine`,
//! `assign`) — from t0, while the sampler reads all counters at the common
//! boundaries (`sampler`). Blocking code on plain threads: the data path
//! never waits on the async runtime, and no engine runs on a control thread.

use std::collections::{BTreeSet, HashMap};
use std::net::{IpAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::control::wire::{Endpoint, FlowEndpoint, FlowRole, Window};
use crate::histogram::Span;
use crate::load::placement;
use crate::load::stress;
use crate::load::topology;
use crate::metrics::clock::PeerClock;
use crate::metrics::cpu::{ThreadBook, ThreadClass};
use crate::metrics::netdev;
use crate::metrics::EngineSeat;
use crate::metrics::RankReport;
use crate::plan::{ConnectMethod, Mode, Numa, StressSpec};
use crate::transport::{rdma, tcp, Counts, Side};
use crate::worker::assign::{assign, Assignment, LaneLoad, Load};
use crate::worker::cq_groups::CqGroups;
use crate::worker::engine::{Engine, FlowFailed};
use crate::worker::gpu::{resolve_end, Resolved};
use crate::worker::sampler::Sampler;
use crate::worker::streams::{EngineLane, FlowEnd, Rail};

#[path = "phase_connect.rs"]
mod connect;

/// How long connecting a phase's flows may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum PhaseError {
    #[error("flow {flow} ({side:?}): {cause}")]
    Tcp { flow: u32, side: Side, cause: tcp::TcpError },
    /// One whose cause names its flow (`flow 0 0->1 rail 1: …`) is told
    /// under the end alone, not under the flow's number a second time.
    #[error("{}", rdma_text(*.flow, *.side, .cause))]
    Rdma { flow: u32, side: Side, cause: rdma::RdmaError },
    #[error("flow {flow}: the coordinator sent no usable peer endpoint")]
    NoPeer { flow: u32 },
}

fn rdma_text(flow: u32, side: Side, cause: &rdma::RdmaError) -> String {
    if cause.names_its_flow() {
        format!("the {} of {cause}", side.name())
    } else {
        format!("flow {flow} ({side:?}): {cause}")
    }
}

/// One end of a flow before it is connected.
pub enum Opening {
    /// TCP receiver: listening for the sender's streams.
    Listen(tcp::Listener),
    /// TCP sender: dials once the receiver's address is known.
    Dial,
    /// RDMA: QPs in INIT, waiting for the peer's QP numbers; one flow per rail.
    Rdma(Vec<Rail<rdma::PreparedFlow>>),
}

/// One end of a flow, connected.
pub enum Link {
    /// The streams in stream order; `refused`: strangers the receiver closed.
    Tcp { streams: Vec<TcpStream>, refused: u64 },
    /// One connected flow per rail (device), each on its own thread, placed
    /// near its device's NUMA node.
    Rdma(Vec<Rail<rdma::ConnectedFlow>>),
}

/// What the rank's part of a phase keeps beside its flow ends, from
/// setup to report.
struct PhaseContext {
    phase: usize,
    bind: IpAddr,
    stress: Option<StressSpec>,
    /// The RDMA ports the rank's flows use, for their counters.
    rdma_ports: Vec<rdma::DevicePort>,
}

/// The rank's ends of its flows, opened and waiting for their peers.
pub struct Opened {
    context: PhaseContext,
    ends: Vec<(FlowRole, Opening)>,
}

/// Every flow connected; ready for Start.
pub struct Connected {
    context: PhaseContext,
    ends: Vec<(FlowRole, Link)>,
}

/// A phase in flight: stop it early through [`Running::stopper`], collect
/// its report with [`Running::join`].
pub struct Running {
    stop: Arc<AtomicBool>,
    sampler: JoinHandle<RankReport>,
}

/// Creates this rank's ends of its flows and the endpoints its peers need.
pub fn prepare(
    phase: usize,
    roles: Vec<FlowRole>,
    stress: Option<StressSpec>,
    bind: IpAddr,
) -> Result<(Opened, Vec<FlowEndpoint>), PhaseError> {
    let mut ends = Vec::with_capacity(roles.len());
    let mut endpoints = Vec::new();
    let mut rdma_ports: Vec<rdma::DevicePort> = Vec::new();
    // Busy-polling shards share a CQ with those their engine will run.
    let (mut pool, mut groups) = (rdma::CqPool::default(), CqGroups::default());
    for role in roles {
        let (flow, side) = (role.flow.id, role.side);
        let publish = |endpoint| FlowEndpoint { flow, side, endpoint };
        let opening = match (&role.group.rdma_request(), side) {
            (Some(params), _) => {
                let label = format!("flow {flow} {}->{}", role.flow.src, role.flow.dst);
                // The host's `devices=` when the group names none (both ends have as many).
                let rails = params.rails_on(&role.rails);
                let count = rails.len();
                let prepared = rails
                    .iter()
                    .enumerate()
                    .map(|(k, rail)| {
                        let label = if count > 1 { format!("{label} rail {k}") } else { label.clone() };
                        let Resolved { value: rail, why: gpu_reason } = resolve_end(rail, side, role.gpu.as_ref());
                        // A latency shard polls a CQ of its own: no lock or
                        // hand-on lengthens its round trips.
                        let mut choose = |on: rdma::ShardsOn| match shard_load(&role, count, on.shards) {
                            Load::Latency => Vec::new(),
                            load => groups.place(on.device, &prepare_cores(&role, on.node), load, on.shards),
                        };
                        let sharing = rdma::Sharing { pool: &mut pool, groups: &mut choose };
                        let p = rdma::prepare_shared(&rail, side, sharing).map_err(|e| e.labelled(&label))?;
                        let mut p = p.with_label(label).with_gpu_reason(gpu_reason);
                        if role.group.validate {
                            p = p.with_validation(flow)?;
                        }
                        match rail.knobs.connect {
                            ConnectMethod::Verbs => Ok(p),
                            ConnectMethod::RdmaCm => p.with_rdma_cm(bind),
                        }
                    })
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|cause| PhaseError::Rdma { flow, side, cause })?;
                endpoints.push(publish(Endpoint::Rdma(prepared.iter().map(|p| p.endpoint()).collect())));
                for rail in &prepared {
                    let port = rdma::DevicePort { device: rail.device().to_string(), port: rail.port() };
                    if !rdma_ports.contains(&port) {
                        rdma_ports.push(port);
                    }
                }
                // Each rail's threads go near its own device (rails may sit on different sockets).
                let rails = prepared
                    .into_iter()
                    .map(|flow| {
                        let (device, node) = (flow.device().to_string(), flow.numa_node());
                        Rail { flow, device, node: node.and_then(|n| usize::try_from(n).ok()) }
                    })
                    .collect();
                Opening::Rdma(rails)
            }
            (None, Side::Receiver) => {
                let tcp_err = |cause| PhaseError::Tcp { flow, side, cause };
                let l = tcp::Listener::bind(bind, role.group.streams).map_err(tcp_err)?;
                if let Some(dscp) = role.group.dscp {
                    l.mark(dscp).map_err(tcp_err)?;
                }
                endpoints.push(publish(Endpoint::Tcp { addr: l.local_addr() }));
                Opening::Listen(l)
            }
            (None, Side::Sender) => Opening::Dial,
        };
        ends.push((role, opening));
    }
    Ok((Opened { context: PhaseContext { phase, bind, stress, rdma_ports }, ends }, endpoints))
}

/// What each of an RDMA end's `shards` (on one of its `rails`) is expected
/// to cost its engine: the group's offered rate split evenly over them.
fn shard_load(role: &FlowRole, rails: usize, shards: usize) -> Load {
    let per_shard = role.group.offered_msgs_per_s().map(|per_s| per_s / (rails * shards).max(1) as f64);
    Load::of(role.group.mode == Mode::Latency, per_shard, role.group.message_size.bytes() as f64)
}

/// The cores a rail of `role` near NUMA node `node` may use, as the
/// engines will see them at start less the stress burners' (not yet placed).
fn prepare_cores(role: &FlowRole, node: Option<i32>) -> Vec<usize> {
    let device_node = node.and_then(|n| usize::try_from(n).ok());
    let placed = placement::resolve(&role.group.placement, device_node).map(|p| p.cores).unwrap_or_default();
    let cores = Cores { host: placement::allowed_cores(), busy: &[], near: placement::near_node(node) };
    cores.usable(&placed, role.group.placement.numa, &cores.near)
}

impl Connected {
    /// Starts every stream (and the rank's stress) at `t0` and samples
    /// through the window. `progress(interval, span_ns, moved)` follows each
    /// interval with what each end moved in it (`Sampler::run`);
    /// `failed(error)` is called when an RDMA flow ends with an error before
    /// the phase is stopped (a bad completion, a stall), so the run ends.
    pub fn start(
        self,
        rank: usize,
        t0: Instant,
        window: Window,
        clock: PeerClock,
        progress: impl Fn(u32, i64, Vec<Counts>) + Send + 'static,
        failed: FlowFailed,
    ) -> Running {
        let stop = Arc::new(AtomicBool::new(false));
        let Connected { context, ends: links } = self;
        let PhaseContext { phase, bind, stress: stress_spec, rdma_ports } = context;
        let iface = netdev::iface_of(bind);
        let device_node = iface.as_deref().and_then(topology::iface_node);
        let span = Span { open: t0 + window.boundary(0), close: t0 + window.boundary(window.boundaries() - 1) };
        // The data-path and burner threads book themselves here: the
        // sampler tells their CPU time from the control plane's.
        let book = ThreadBook::default();
        let burners = stress_spec.as_ref().map(|spec| {
            let booked = book.clone();
            stress::start(spec, device_node, t0, move || booked.enter(ThreadClass::Burner)).map(|b| (spec.load, b))
        });
        let busy: &[usize] = match &burners {
            Some(Ok((_, b))) => &b.placed.cores,
            _ => &[],
        };
        let near = placement::near_node(device_node.and_then(|n| i32::try_from(n).ok()));
        let cores = Cores { host: placement::allowed_cores(), busy, near };
        let mut ends = Vec::new();
        let mut threads = Vec::new();
        let mut lanes = Vec::new();
        for (role, link) in links {
            match link {
                Link::Tcp { streams, refused } => {
                    let mut end = FlowEnd { refused, ..FlowEnd::new(role, device_node) };
                    let usable = cores.for_end(&end);
                    let made = end.tcp_lanes(streams, t0, span);
                    lanes.extend(made.into_iter().map(|lane| (ends.len(), usable.clone(), lane)));
                    ends.push(end);
                }
                Link::Rdma(rails) => {
                    let mut end = FlowEnd::new(role, rails.first().and_then(|rail| rail.node));
                    // The flow's offered rate, split evenly over its rails.
                    let per_rail = end.role.group.offered_msgs_per_s().map(|per_s| per_s / rails.len() as f64);
                    for (k, rail) in rails.into_iter().enumerate() {
                        let seed = end.poisson_seed(k as u64);
                        let flow = rail.flow.with_pace(per_rail, seed).with_latency_window(span);
                        let rail = Rail { flow, ..rail };
                        let near = placement::near_node(rail.node.and_then(|n| i32::try_from(n).ok()));
                        let made = end.rdma_lanes(rail, failed.clone());
                        let usable = cores.usable(&made.cores, end.role.group.placement.numa, &near);
                        lanes.extend(made.lanes.into_iter().map(|lane| (ends.len(), usable.clone(), lane)));
                    }
                    ends.push(end);
                }
            }
        }
        for engine in engines(lanes, &mut ends, rank, &cores.host) {
            threads.push(engine.spawn(t0, span.close, stop.clone(), book.clone()));
        }
        let stop_for_sampler = stop.clone();
        let sampler = std::thread::Builder::new()
            .name("fb-sampler".into())
            .spawn(move || {
                let stop = stop_for_sampler;
                let sampler = Sampler { rank, phase, t0, window, clock, iface, rdma_ports, ends, burners, book, stop };
                sampler.run(threads, progress)
            })
            .expect("spawning the sampler thread");
        Running { stop, sampler }
    }
}

/// The cores a rank's engines may use.
struct Cores<'a> {
    /// Online and in the process's affinity.
    host: Vec<usize>,
    /// The stress burners' cores, left to them where there are others.
    busy: &'a [usize],
    /// The cores near the NIC, where the host has a choice of nodes.
    near: Vec<usize>,
}

impl Cores<'_> {
    /// The cores for the engines of `end`'s TCP streams (see `usable`).
    fn for_end(&self, end: &FlowEnd) -> Vec<usize> {
        let placed = end.placed.as_ref().map(|p| &p.cores[..]).unwrap_or_default();
        self.usable(placed, end.role.group.placement.numa, &self.near)
    }

    /// The cores for an engine's lane: those its group's placement gives
    /// it (`placed`), or those near its NIC (`near`) where the placement is
    /// `auto` and the host has a choice, else all the host's; less the
    /// burners' where that leaves any.
    fn usable(&self, placed: &[usize], numa: Numa, near: &[usize]) -> Vec<usize> {
        let asked = match (placed, numa) {
            ([_, ..], _) => placed.to_vec(),
            (_, Numa::Auto) => near.to_vec(),
            _ => Vec::new(),
        };
        let asked = if asked.is_empty() { self.host.clone() } else { asked };
        let free: Vec<usize> = asked.iter().copied().filter(|c| !self.busy.contains(c)).collect();
        if free.is_empty() {
            asked
        } else {
            free
        }
    }
}

/// The engines that run `lanes` (each with its end's index and cores), and
/// which engine carried each end's streams, told to the end. The lanes of
/// one poll group (RDMA shards on one shared CQ) are placed as one. Each
/// engine is bound to the cores of its lanes, unbound where those are all
/// the process's own (`host`).
fn engines(
    lanes: Vec<(usize, Vec<usize>, EngineLane)>,
    ends: &mut [FlowEnd],
    rank: usize,
    host: &[usize],
) -> Vec<Engine> {
    let (units, unit_of) =
        units(lanes.iter().map(|(_, cores, lane)| (lane.load, &cores[..], lane.seat.task.poll_group())));
    let assignment = assign(&units, rank);
    let mut engines: Vec<Engine> = bindings(&units, &assignment, host)
        .into_iter()
        .enumerate()
        .map(|(id, cores)| Engine { id, cores, seats: Vec::new() })
        .collect();
    for ((end, _, EngineLane { seat, .. }), unit) in lanes.into_iter().zip(unit_of) {
        let e = assignment.of_lane[unit];
        let core = match engines[e].cores[..] {
            [one] => Some(one as u32),
            _ => None,
        };
        let seen = &mut ends[end].engines;
        match seen.iter_mut().find(|s| s.engine as usize == e) {
            Some(seat) => seat.lanes += 1,
            None => seen.push(EngineSeat { engine: e as u32, core, lanes: 1 }),
        }
        engines[e].seats.push(seat);
    }
    engines
}

/// What `assign` places: a unit per lane (its load, cores and poll
/// group), the lanes of one poll group as one unit of their summed
/// weight; and each lane's unit.
fn units<'a>(lanes: impl Iterator<Item = (Load, &'a [usize], Option<usize>)>) -> (Vec<LaneLoad>, Vec<usize>) {
    let mut units: Vec<LaneLoad> = Vec::new();
    let mut unit_of_group: HashMap<usize, usize> = HashMap::new();
    let unit_of = lanes
        .map(|(load, cores, group)| match group.and_then(|g| unit_of_group.get(&g).copied()) {
            Some(unit) => {
                units[unit].weight += load.weight();
                unit
            }
            None => {
                group.map(|g| unit_of_group.insert(g, units.len()));
                units.push(LaneLoad::new(load, cores.to_vec()));
                units.len() - 1
            }
        })
        .collect();
    (units, unit_of)
}

/// The cores each engine is bound to: every core of its lanes, none (the
/// process's own) where those are all of `host`.
fn bindings(lanes: &[LaneLoad], assignment: &Assignment, host: &[usize]) -> Vec<Vec<usize>> {
    let mut bound = vec![BTreeSet::new(); assignment.engines.len()];
    for (lane, &e) in lanes.iter().zip(&assignment.of_lane) {
        bound[e].extend(lane.cores.iter().copied());
    }
    let host: BTreeSet<usize> = host.iter().copied().collect();
    bound.into_iter().map(|cores| if cores == host { Vec::new() } else { cores.into_iter().collect() }).collect()
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

#[cfg(test)]
mod tests {
    use super::*;

    fn lane(cores: &[usize]) -> LaneLoad {
        LaneLoad::new(Load::Bandwidth, cores.to_vec())
    }

    #[test]
    fn an_engine_on_all_the_hosts_cores_is_left_to_the_kernel() {
        let lanes = [lane(&[0, 1, 2, 3]), lane(&[0, 1, 2, 3])];
        let a = assign(&lanes, 0);
        assert_eq!(a.engines.len(), 2, "a lane per core: {a:?}");
        assert_eq!(bindings(&lanes, &a, &[0, 1, 2, 3]), [Vec::<usize>::new(), Vec::new()]);
    }

    #[test]
    fn the_lanes_of_one_poll_group_share_an_engine_and_weigh_together() {
        let cores = [0, 1];
        let lanes = [(Some(7), Load::Bandwidth), (None, Load::Bandwidth), (Some(7), Load::Bandwidth)];
        let lanes = lanes.iter().chain(&[(Some(7), Load::Bandwidth), (None, Load::Bandwidth)]);
        let (units, unit_of) = units(lanes.map(|&(group, load)| (load, &cores[..], group)));
        assert_eq!(unit_of, [0, 1, 0, 0, 2], "the group's three lanes are one unit");
        assert_eq!(units[0].weight, 3.0 * Load::Bandwidth.weight());
        let a = assign(&units, 0);
        assert_ne!(a.of_lane[0], a.of_lane[1], "the group fills one engine, the others the other: {a:?}");
        assert_eq!(a.of_lane[1], a.of_lane[2]);
    }

    #[test]
    fn an_engine_is_bound_to_its_lanes_cores_as_a_set() {
        // A group placed on cores 2-3 (or the NIC's node): both engines may
        // use either core, never one alone, and never cores 0-1.
        let lanes = [lane(&[2, 3]), lane(&[2, 3]), lane(&[1])];
        let a = assign(&lanes, 0);
        let bound = bindings(&lanes, &a, &[0, 1, 2, 3]);
        let of = |k: usize| bound[a.of_lane[k]].clone();
        assert_eq!(of(0), [2, 3]);
        assert_eq!(of(1), [2, 3]);
        assert_eq!(of(2), [1], "a lane placed on one core is bound to it");
    }

    #[test]
    fn an_rdma_error_names_its_flow_once() {
        let setup = rdma::RdmaError::Setup {
            flow: "flow".into(),
            device: "rxe0".into(),
            what: "registering its buffers".into(),
            source: std::io::Error::other("ibv_reg_mr(1048576 bytes): Cannot allocate memory (os error 12)"),
        };
        let cause = setup.labelled("flow 0 0->1");
        assert_eq!(
            PhaseError::Rdma { flow: 0, side: Side::Sender, cause }.to_string(),
            "the sender of flow 0 0->1: registering its buffers on device rxe0: ibv_reg_mr(1048576 bytes): Cannot allocate memory (os error 12)"
        );
        let cause = rdma::RdmaError::DeviceNotFound { name: "mlx5_9".into(), available: "rxe0".into() };
        assert_eq!(
            PhaseError::Rdma { flow: 3, side: Side::Receiver, cause }.to_string(),
            "flow 3 (Receiver): RDMA device \"mlx5_9\" not found (available: rxe0)"
        );
    }
}
