//! The ends of this rank's flows: their lanes (TCP streams or RDMA
//! rails), each counting into its own counters; the end's totals are the
//! lanes' sum. A TCP stream, and each shard of an RDMA rail, becomes a
//! task for an engine (`engine`).

use std::net::TcpStream;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use std::time::Instant;

use crate::control::wire::FlowRole;
use crate::histogram::{Recorder, Span};
use crate::load::placement::{self, Placed, PlacementError};
use crate::metrics::EngineSeat;
use crate::plan::{Mode, Schedule, TCP_MAX_MESSAGE};
use crate::transport::pace::ProbePlan;
use crate::transport::tcp::info::TcpInfo;
use crate::transport::validation::DvTally;
use crate::transport::{rdma, tcp, Counts, FlowCounters, Side};
use crate::worker::assign::Load;
use crate::worker::engine::{EndState, FlowFailed, Seat};

/// One lane of a flow end: a TCP stream or an RDMA rail, with its own
/// counters (one writer each, so no stream contends with another).
pub struct Lane {
    pub counters: Arc<FlowCounters>,
    /// RDMA: the rail's device.
    pub device: Option<String>,
    /// A sending TCP bandwidth stream: a second descriptor of its socket,
    /// whose `TCP_INFO` the sampler reads at the window's edges while the
    /// stream's own is its engine's.
    pub tcp_info: Option<OwnedFd>,
}

/// One RDMA rail of a flow end: its flow (prepared or connected), its
/// device, and that device's NUMA node, when it has one.
pub struct Rail<F> {
    pub flow: F,
    pub device: String,
    pub node: Option<usize>,
}

/// One end of one flow on this rank.
pub struct FlowEnd {
    pub role: FlowRole,
    /// In stream (rail) order.
    pub lanes: Vec<Lane>,
    /// Its start, error and round trips, shared with what runs its lanes.
    pub state: Arc<EndState>,
    /// Where its threads run (or why not as asked); several rails: the
    /// union of their cores, each rail near its own device.
    pub placed: Result<Placed, PlacementError>,
    /// Strangers its TCP receiver closed while connecting.
    pub refused: u64,
    /// The engines that run its TCP streams.
    pub engines: Vec<EngineSeat>,
    /// RDMA rails in GPU memory: what each registered, and how.
    pub gpu_memory: Vec<rdma::GpuMemoryUse>,
    /// The NUMA node of its NIC (the first rail's), where it has one.
    pub device_node: Option<usize>,
}

/// One lane of an end (a TCP stream, an RDMA shard), ready for an
/// engine, and what it will cost it.
pub struct EngineLane {
    pub seat: Seat,
    pub load: Load,
}

/// A rail's engine lanes, and the cores its placement gives them (empty:
/// not pinned).
pub struct RailLanes {
    pub lanes: Vec<EngineLane>,
    pub cores: Vec<usize>,
}

impl FlowEnd {
    pub fn new(role: FlowRole, device_node: Option<usize>) -> FlowEnd {
        let placed = placement::resolve(&role.group.placement, device_node);
        FlowEnd {
            role,
            lanes: Vec::new(),
            state: Arc::default(),
            placed,
            refused: 0,
            engines: Vec::new(),
            gpu_memory: Vec::new(),
            device_node,
        }
    }

    /// The end's totals and each lane's bytes into `lanes`, read at one
    /// instant: the totals are the lanes' sum.
    pub fn read(&self, lanes: &mut Vec<u64>) -> Counts {
        lanes.clear();
        let mut total = Counts::default();
        for lane in &self.lanes {
            let read = lane.counters.read();
            lanes.push(read.bytes);
            total = Counts { bytes: total.bytes + read.bytes, messages: total.messages + read.messages };
        }
        total
    }

    /// Each lane's `TCP_INFO` now, in lane order (`None`: a lane without a
    /// descriptor to read, or one the kernel refused); empty when the end
    /// has no sending TCP bandwidth stream.
    pub fn tcp_info(&self) -> Vec<Option<TcpInfo>> {
        if self.lanes.iter().all(|l| l.tcp_info.is_none()) {
            return Vec::new();
        }
        self.lanes.iter().map(|l| l.tcp_info.as_ref().and_then(|fd| TcpInfo::read(fd.as_fd()).ok())).collect()
    }

    /// What the end's lanes checked, where its group validates data and
    /// this end checks (the receiver; RDMA read: the reader).
    pub fn validation(&self) -> Option<DvTally> {
        let checks = (self.role.side == Side::Sender) == self.role.group.validation_checked_by_sender();
        (self.role.group.validate && checks)
            .then(|| self.lanes.iter().fold(DvTally::default(), |t, lane| t.plus(lane.counters.dv.read())))
    }

    fn add_lane(&mut self, device: Option<String>, tcp_info: Option<OwnedFd>) -> Arc<FlowCounters> {
        let counters = Arc::<FlowCounters>::default();
        self.lanes.push(Lane { counters: counters.clone(), device, tcp_info });
        counters
    }

    /// Makes a task of each connection of this end, to run from `t0` in
    /// `window` on an engine; a stream that cannot be made one is the
    /// end's error (its lane stays, counting nothing).
    pub fn tcp_lanes(&mut self, streams: Vec<TcpStream>, t0: Instant, window: Span) -> Vec<EngineLane> {
        let (side, mode) = (self.role.side, self.role.group.mode);
        let size = self.role.group.message_size.bytes() as usize;
        let mut lanes = Vec::with_capacity(streams.len());
        for (stream, sock) in streams.into_iter().enumerate() {
            // Without a second descriptor (none left) the stream runs unread.
            let info = (mode, side) == (Mode::Bandwidth, Side::Sender);
            let counters = self.add_lane(None, info.then(|| sock.try_clone().ok().map(OwnedFd::from)).flatten());
            let pace = self.stream_pace(stream as u64, t0);
            let (role, load) = match (mode, side) {
                (Mode::Bandwidth, Side::Sender) => (tcp::Role::Send { per_s: pace.map(|p| p.per_s) }, pace),
                (Mode::Bandwidth, Side::Receiver) => {
                    (tcp::Role::Receive { message_size: size as u64, close: window.close }, pace)
                }
                (Mode::Latency, Side::Sender) => {
                    (tcp::Role::Ping { rtts: Recorder::new(Some(window)), probes: pace }, None)
                }
                (Mode::Latency, Side::Receiver) => (tcp::Role::Echo { close: window.close }, None),
            };
            let load = Load::of(mode == Mode::Latency, load.map(|p| p.per_s), size as f64);
            // One message per buffer: validation keeps TCP sizes within TCP_MAX_MESSAGE.
            let buf = vec![0xA5u8; size.clamp(1, TCP_MAX_MESSAGE as usize)];
            let validate =
                self.role.group.validate.then_some(tcp::Validate { flow: self.role.flow.id, lane: stream as u32 });
            match tcp::task(sock, buf, counters, role, validate) {
                Ok(task) => {
                    let seat = Seat { task, end: self.state.clone(), sender: side == Side::Sender, told: None };
                    lanes.push(EngineLane { seat, load });
                }
                Err(e) => self.state.fail(e.to_string()),
            }
        }
        lanes
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

    /// Takes one rail of an RDMA flow end (all its QPs on `device`) into
    /// the end: its lane and its placement near `device_node` (returned:
    /// the rail's cores, empty where the group pins nothing).
    fn add_rail(&mut self, device: String, device_node: Option<usize>) -> (Arc<FlowCounters>, Vec<usize>) {
        let rail = placement::resolve(&self.role.group.placement, device_node);
        let cores = rail.as_ref().map(|p| p.cores.clone()).unwrap_or_default();
        self.placed = widen(std::mem::replace(&mut self.placed, Ok(Placed::default())), rail);
        (self.add_lane(Some(device), None), cores)
    }

    /// A rail as engine lanes, one per shard of its QPs (latency: one), each
    /// told to `failed` when it fails before the stop (a bad completion, a
    /// stall): the flow is over and the run must not wait for the window
    /// to close.
    pub fn rdma_lanes(
        &mut self,
        Rail { flow, device, node }: Rail<rdma::ConnectedFlow>,
        failed: FlowFailed,
    ) -> RailLanes {
        let (counters, cores) = self.add_rail(device, node);
        self.gpu_memory.extend(flow.gpu_memory().cloned());
        let load = Load::of(flow.is_latency(), flow.task_pace(), self.role.group.message_size.bytes() as f64);
        let sender = self.role.side == Side::Sender;
        let lanes = flow
            .tasks(counters)
            .into_iter()
            .map(|task| {
                let seat = Seat { task, end: self.state.clone(), sender, told: Some(failed.clone()) };
                EngineLane { seat, load }
            })
            .collect();
        RailLanes { lanes, cores }
    }
}

/// An end's placement with one more rail's: the union of their cores, the
/// first note; a rail that could not be placed makes the end's an error.
fn widen(end: Result<Placed, PlacementError>, rail: Result<Placed, PlacementError>) -> Result<Placed, PlacementError> {
    let (mut end, rail) = (end?, rail?);
    end.cores.extend(rail.cores);
    end.cores.sort_unstable();
    end.cores.dedup();
    end.note = end.note.or(rail.note);
    Ok(end)
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
        let missing = || PlacementError::NoSuchCore { core: 4096, online: vec![0, 1] };
        let bad = widen(Ok(placed(&[0], None)), Err(missing()));
        assert_eq!(bad, Err(missing()), "a rail that cannot be placed is told");
    }
}
