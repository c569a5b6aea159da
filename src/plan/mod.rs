//! The plan's types, and a scenario's groups over the job's ranks made into
//! phases of numbered flows (each pattern's pairs: `patterns`). Pure and
//! deterministic: the same hosts and scenario give the same plan, so every
//! rank and every re-rendered report agree on flow ids.

mod congestion;
mod gpu;
mod group;
mod mesh;
mod patterns;
mod rails;
mod rounds;
mod shuffle;
mod stress;
mod topology;

pub use congestion::{split, CongestionPoint, Split};
pub use gpu::GpuAsk;
pub use group::GroupPlan;
pub use rails::{uneven_rails, HostRails, UnevenRails};
pub use topology::Fabric;
use topology::Job;

// The words a plan is written in. The scenario's TOML model defines them,
// since it reads and checks them; the transport and the worker take them
// from here, so that the plan is the one thing below them they obey.
pub use crate::scenario::limits::{MAX_DSCP, TCP_MAX_MESSAGE};
pub use crate::scenario::memory::{GpuRegistration, Memory, MemorySides};
pub use crate::scenario::placement::{Numa, Placement};
pub use crate::scenario::rate::{Rate, Schedule};
pub use crate::scenario::rdma::{
    CompletionMode, ConnectMethod, Connection, InvalidParam, RdmaKnobs, RdmaParams, RdmaSetup, CMP_SWAP_VALUE, UD_GRH,
};
pub use crate::scenario::stress::StressSpec;
pub use crate::scenario::{BadField, BadKey, Mode, Op, Pattern, Scenario, Transport};

use serde::{Deserialize, Serialize};

use crate::hostfile::{GpuChoice, Host};
use crate::scenario::limits::MAX_PHASES;
use crate::scenario::rails::Rails;
use crate::scenario::{Field, RankSet, Section};

use patterns::{expand, select, with_reverse, Pairs};
use stress::stress_of;

/// Index of a flow within its phase; also its id on the wire.
pub type FlowId = u32;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub ranks: Vec<RankInfo>,
    pub phases: Vec<Phase>,
}

/// One rank: one worker process on one host.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RankInfo {
    pub rank: usize,
    pub host: String,
    /// Its host's address: where the rank's data plane binds unless
    /// `data_addr` says otherwise, and, for rank 0, the coordinator.
    pub addr: String,
    /// The address its TCP data listens on and leaves from, its NIC's,
    /// from the hostfile's `addrs=` (absent: `addr`).
    #[serde(default, skip_serializing_if = "Option::is_none")] // the plan goes as JSON, never postcard
    pub data_addr: Option<String>,
    /// This rank's RDMA devices from the hostfile (`devices=`: its own one,
    /// or all of the host's with `slots=1`): the rails of RDMA groups that
    /// name none. (Crosses the wire: no skip_serializing_if.)
    #[serde(default)]
    pub devices: Vec<String>,
    /// Its index among its host's ranks, from 0.
    #[serde(default, skip_serializing_if = "is_zero")] // the plan goes as JSON, never postcard
    pub slot: u32,
    /// How many ranks its host runs (absent: 1).
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub slots: u32,
    /// Its GPU from the hostfile (`gpus=`): what its ends in GPU memory use
    /// over their group's `gpu` (absent: the group's).
    #[serde(default, skip_serializing_if = "Option::is_none")] // the plan goes as JSON, never postcard
    pub gpu: Option<GpuChoice>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

fn one() -> u32 {
    1
}

fn is_one(n: &u32) -> bool {
    *n == 1
}

impl RankInfo {
    /// The NIC this rank uses alone on a host of several ranks: its one
    /// device of `devices=`, else its own address of `addrs=`.
    pub fn own_nic(&self) -> Option<&str> {
        match self.devices.as_slice() {
            _ if self.slots < 2 => None,
            [device] => Some(device),
            _ => self.data_addr.as_deref(),
        }
    }

    /// How reports name the rank: its host, or `host#slot` on a host that
    /// runs several ranks.
    pub fn label(&self) -> String {
        match self.slots {
            1 => self.host.clone(),
            _ => format!("{}#{}", self.host, self.slot),
        }
    }
}

/// Flows that run together in one common measurement window.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Phase {
    pub index: usize,
    pub name: String,
    pub groups: Vec<GroupPlan>,
    pub flows: Vec<Flow>,
    /// Ranks that run CPU stress in this phase, with what they run.
    #[serde(default)] // absent from schema-1 run.json (no stress then)
    pub stress: Vec<RankStress>,
    /// The sweep point this phase measures, if the scenario sweeps.
    pub sweep: Option<SweepPoint>,
    /// With `[congestion]`: the canary group this phase measures, alone or
    /// congested (absent otherwise, and in runs made before it existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub congestion: Option<CongestionPoint>,
    /// With `[run] repeat` above 1: which repeat of which phase this is.
    #[serde(default, skip_serializing_if = "Option::is_none")] // the plan goes as JSON, never postcard
    pub repeat: Option<Repeat>,
}

/// One of the runs of a repeated phase.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Repeat {
    /// From 1.
    pub number: u32,
    pub count: u32,
    /// The phase's name without the repeat: what its repeats share.
    pub of: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SweepPoint {
    pub parameter: String,
    pub value: String,
    /// Two-parameter sweeps: the column's parameter and value.
    pub by: Option<SweepCoordinate>,
    /// The point the others (of its column) are compared with.
    pub baseline: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SweepCoordinate {
    pub parameter: String,
    pub value: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RankStress {
    pub rank: usize,
    pub spec: StressSpec,
}

/// Traffic from one rank to another, carried by `streams` connections.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Flow {
    pub id: FlowId,
    pub group: usize,
    pub src: usize,
    pub dst: usize,
}

/// The rank that holds the most TCP sockets at once, and how many.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BusiestRank {
    pub rank: usize,
    pub sockets: u64,
}

impl Plan {
    /// The most TCP sockets one rank holds at once (its streams of one
    /// phase, both ends counted), and which rank that is.
    pub fn busiest_sockets(&self) -> BusiestRank {
        let mut busiest = BusiestRank { rank: 0, sockets: 0 };
        for phase in &self.phases {
            let mut sockets = vec![0u64; self.ranks.len()];
            for flow in &phase.flows {
                let group = &phase.groups[flow.group];
                if group.transport == Transport::Tcp {
                    sockets[flow.src] += u64::from(group.streams);
                    sockets[flow.dst] += u64::from(group.streams);
                }
            }
            for (rank, &n) in sockets.iter().enumerate() {
                if n > busiest.sockets {
                    busiest = BusiestRank { rank, sockets: n };
                }
            }
        }
        busiest
    }

    /// Whether any group moves data over RDMA: only then must the hostfile's
    /// `devices=` be RDMA devices of their hosts (a TCP run names its ranks'
    /// NICs with them, for the topology and suspects, and uses none).
    pub fn uses_rdma(&self) -> bool {
        self.phases.iter().flat_map(|p| &p.groups).any(|g| g.transport == Transport::Rdma)
    }

    /// The devices each end of an RDMA flow uses when its group names none:
    /// each host's hostfile `devices=`, as many rails as both ends have
    /// (rail k meets rail k); empty for both when the group names its own
    /// device(s), is not RDMA, or a host lists none.
    pub fn host_rails(&self, group: &GroupPlan, flow: &Flow) -> [Vec<String>; 2] {
        let names_none = group.rdma.as_ref().is_some_and(|r| r.knobs.device.is_none() && r.knobs.devices.is_empty());
        let (src, dst) = (&self.ranks[flow.src].devices, &self.ranks[flow.dst].devices);
        let n = if names_none { src.len().min(dst.len()) } else { 0 };
        [src[..n].to_vec(), dst[..n].to_vec()]
    }
}

impl Phase {
    /// Flows this rank sends or receives, in flow order.
    pub fn flows_of(&self, rank: usize) -> impl Iterator<Item = &Flow> {
        self.flows.iter().filter(move |f| f.src == rank || f.dst == rank)
    }
}

/// The ranks of the hostfile's rank list, one per entry, in order.
pub fn ranks_of(hosts: &[Host]) -> Vec<RankInfo> {
    hosts
        .iter()
        .enumerate()
        .map(|(rank, h)| RankInfo {
            rank,
            host: h.name.clone(),
            addr: h.host_addr().to_string(),
            data_addr: h.nic_addr().map(str::to_string),
            devices: h.devices.clone(),
            slot: h.slot,
            slots: h.slots,
            gpu: h.gpu().cloned(),
        })
        .collect()
}

/// Builds the plan without a topology (keys that need one are refused);
/// an error names the scenario field that cannot be met.
pub fn build(hosts: &[Host], scenario: &Scenario) -> Result<Plan, BadField> {
    build_on(hosts, scenario, None)
}

/// Builds the plan, choosing pairs by `fabric` where the scenario asks.
pub fn build_on(hosts: &[Host], scenario: &Scenario, fabric: Option<&Fabric>) -> Result<Plan, BadField> {
    let n = hosts.len();
    let ranks = ranks_of(hosts);
    let job = Job { n, ranks: &ranks, fabric };
    let mut phases = Vec::new();
    match (&scenario.sweep, &scenario.congestion) {
        // Validation keeps the two apart: a congestion run makes its own pairs of phases.
        (None, Some(spec)) => phases.extend(congestion::phases(scenario, spec, job)?),
        (None, None) => phases.extend(phases_of(scenario, &scenario.run.name, job, None, 0)?),
        (Some(sweep), _) => {
            for point in sweep.points(scenario, n).map_err(|e| BadField::new(Field::sweep("values"), e.to_string()))? {
                let mut name = format!("{}={}", sweep.parameter.name(), point.value);
                let by = sweep.by.as_ref().zip(point.by).map(|(axis, value)| {
                    name += &format!(" {}={value}", axis.parameter.name());
                    SweepCoordinate { parameter: axis.parameter.name().to_string(), value: value.to_string() }
                });
                let at = SweepPoint {
                    parameter: sweep.parameter.name().to_string(),
                    value: point.value.to_string(),
                    by,
                    baseline: point.value == sweep.baseline(),
                };
                let first = phases.len();
                phases.extend(phases_of(&point.scenario, &name, job, Some(at), first)?);
            }
        }
    }
    let total = phases.len().saturating_mul(scenario.run.repeat as usize);
    if total > MAX_PHASES {
        return Err(BadField::new(
            Field::run("repeat"),
            format!(
                "{} phases × {} repeats make {total} phases; a run takes at most {MAX_PHASES}: fewer repeats or sweep points, or several runs",
                phases.len(),
                scenario.run.repeat
            ),
        ));
    }
    Ok(Plan { ranks, phases: repeated(phases, scenario.run.repeat) })
}

/// Every phase `count` times, interleaved: A B A B, not A A B B, so that a
/// drift over the run (a warming switch, a neighbour's job) falls on every
/// point alike instead of on the later ones.
fn repeated(once: Vec<Phase>, count: u32) -> Vec<Phase> {
    if count <= 1 {
        return once;
    }
    let mut out = Vec::with_capacity(once.len() * count as usize);
    for number in 1..=count {
        for phase in &once {
            let mut p = phase.clone();
            p.index = out.len();
            p.name = format!("{} (repeat {number}/{count})", phase.name);
            p.repeat = Some(Repeat { number, count, of: phase.name.clone() });
            out.push(p);
        }
    }
    out
}

/// The phases of one scenario, numbered from `first`: one phase with every
/// group's flows and the stress in one window, or one per all-pairs round.
pub(super) fn phases_of(
    scenario: &Scenario,
    name: &str,
    Job { n, ranks, fabric }: Job,
    sweep: Option<SweepPoint>,
    first: usize,
) -> Result<Vec<Phase>, BadField> {
    let groups: Vec<GroupPlan> =
        scenario.groups.iter().enumerate().map(|(index, spec)| GroupPlan::from_spec(index, spec)).collect();
    let stress = stress_of(scenario, n)?;
    let no_flows = |index: usize, pattern: Pattern| {
        BadField::new(Field::group(index, "pattern"), format!("`{}` gives no flows with {n} rank(s)", pattern.name()))
    };
    if let [spec] = &scenario.groups[..] {
        if spec.pattern == Pattern::AllPairs {
            let members = select("ranks", &spec.ranks, RankSet::All, n).map_err(|e| e.within(Section::Group(0)))?;
            let rounds = match spec.rails() {
                Rails::All => rounds::circle(&members),
                Rails::Same => rails::rounds(&members, ranks),
            };
            let rounds = topology::restrict_rounds(spec, rounds, fabric).map_err(|e| e.within(Section::Group(0)))?;
            if rounds.is_empty() {
                return Err(no_flows(0, spec.pattern));
            }
            let count = rounds.len();
            // Without a sweep the rounds are the phases' names; with one, the point leads.
            let prefix = if sweep.is_some() { format!("{name} ") } else { String::new() };
            return Ok(rounds
                .into_iter()
                .enumerate()
                .map(|(i, pairs)| Phase {
                    index: first + i,
                    name: format!("{prefix}round {}/{count}", i + 1),
                    groups: groups.clone(),
                    flows: numbered(&[(0, with_reverse(pairs, spec.bidirectional))]),
                    stress: stress.clone(),
                    sweep: sweep.clone(),
                    congestion: None,
                    repeat: None,
                })
                .collect());
        }
    }
    let mut per_group = Vec::new();
    for (index, spec) in scenario.groups.iter().enumerate() {
        let pairs = match (spec.pattern, spec.rails()) {
            (Pattern::Mesh, _) => mesh::mesh(spec, ranks, fabric),
            (Pattern::Bisection, Rails::All) => topology::bisection(spec, n, fabric),
            (Pattern::Bisection, Rails::Same) => {
                topology::bisection(spec, n, fabric).and_then(|hosts| rails::widen(spec, hosts, ranks))
            }
            (_, Rails::All) => expand(spec, n).and_then(|pairs| topology::restrict(spec, pairs, fabric)),
            (_, Rails::Same) => rails::expand(spec, ranks).and_then(|pairs| topology::restrict(spec, pairs, fabric)),
        };
        let pairs = pairs.map_err(|e| e.within(Section::Group(index)))?;
        if pairs.is_empty() {
            return Err(no_flows(index, spec.pattern));
        }
        per_group.push((index, pairs));
    }
    let flows = numbered(&per_group);
    Ok(vec![Phase {
        index: first,
        name: name.to_string(),
        groups,
        flows,
        stress,
        sweep,
        congestion: None,
        repeat: None,
    }])
}

/// A phase's flows, numbered in group order.
fn numbered(per_group: &[(usize, Pairs)]) -> Vec<Flow> {
    let mut flows = Vec::new();
    for (group, pairs) in per_group {
        for &(src, dst) in pairs {
            flows.push(Flow { id: flows.len() as FlowId, group: *group, src, dst });
        }
    }
    flows
}
