//! Expanding a scenario's patterns over the job's ranks into flows. Pure and
//! deterministic: the same hosts and scenario give the same plan, so every
//! rank and every re-rendered report agree on flow ids.

use serde::{Deserialize, Serialize};

use crate::hostfile::Host;
use crate::scenario::{Field, GroupSpec, Op, Pattern, RankSet, Scenario, Transport};
use crate::units::ByteSize;

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
    /// Where the rank's data plane (and, for rank 0, the coordinator) binds.
    pub addr: String,
}

/// Flows that run together in one common measurement window.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Phase {
    pub index: usize,
    pub name: String,
    pub groups: Vec<GroupPlan>,
    pub flows: Vec<Flow>,
}

/// The transport settings a group's flows share.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupPlan {
    pub index: usize,
    pub name: String,
    pub pattern: Pattern,
    pub transport: Transport,
    pub op: Op,
    pub message_size: ByteSize,
    pub streams: u32,
}

/// Traffic from one rank to another, carried by `streams` connections.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Flow {
    pub id: FlowId,
    pub group: usize,
    pub src: usize,
    pub dst: usize,
}

impl Phase {
    /// Flows this rank sends or receives, in flow order.
    pub fn flows_of(&self, rank: usize) -> impl Iterator<Item = &Flow> {
        self.flows.iter().filter(move |f| f.src == rank || f.dst == rank)
    }
}

/// Builds the plan; an error names the scenario field that cannot be met.
pub fn build(hosts: &[Host], scenario: &Scenario) -> Result<Plan, (Field, String)> {
    let n = hosts.len();
    let ranks = hosts
        .iter()
        .enumerate()
        .map(|(rank, h)| RankInfo { rank, host: h.name.clone(), addr: h.data_addr().to_string() })
        .collect();
    let mut groups = Vec::new();
    let mut flows = Vec::new();
    for (index, spec) in scenario.groups.iter().enumerate() {
        let pairs = expand(spec, n).map_err(|(key, m)| (Field::group(index, key), m))?;
        if pairs.is_empty() {
            return Err((
                Field::group(index, "pattern"),
                format!("`{}` gives no flows with {n} rank(s)", spec.pattern.name()),
            ));
        }
        for (src, dst) in pairs {
            flows.push(Flow { id: flows.len() as FlowId, group: index, src, dst });
        }
        groups.push(GroupPlan {
            index,
            name: spec.name.clone(),
            pattern: spec.pattern,
            transport: spec.transport,
            op: spec.op,
            message_size: spec.message_size,
            streams: spec.streams,
        });
    }
    let phase = Phase { index: 0, name: scenario.run.name.clone(), groups, flows };
    Ok(Plan { ranks, phases: vec![phase] })
}

type Pairs = Vec<(usize, usize)>;

/// A pattern's `(src, dst)` pairs; errors carry the offending field.
fn expand(g: &GroupSpec, n: usize) -> Result<Pairs, (&'static str, String)> {
    let select = |key: &'static str, set: &Option<RankSet>, default: RankSet| {
        set.as_ref().unwrap_or(&default).resolve(n).map_err(|m| (key, m))
    };
    let pairs = match g.pattern {
        Pattern::FanIn => {
            let receivers = select("receivers", &g.receivers, RankSet::one(0))?;
            let senders = select("senders", &g.senders, RankSet::All)?;
            cross(&senders, &receivers, g.allow_self)
        }
        Pattern::OneToAll => {
            let senders = select("senders", &g.senders, RankSet::one(0))?;
            let receivers = select("receivers", &g.receivers, RankSet::All)?;
            cross(&senders, &receivers, g.allow_self)
        }
        Pattern::AllToAll => {
            let ranks = select("ranks", &g.ranks, RankSet::All)?;
            cross(&ranks, &ranks, g.allow_self)
        }
        Pattern::Ring => {
            let ranks = select("ranks", &g.ranks, RankSet::All)?;
            let ring: Pairs = if ranks.len() < 2 {
                Vec::new()
            } else {
                (0..ranks.len()).map(|i| (ranks[i], ranks[(i + 1) % ranks.len()])).collect()
            };
            with_reverse(dedup(ring), g.bidirectional)
        }
        Pattern::Pairwise => {
            let pairs = match &g.flows {
                Some(list) => explicit(list, n, g.allow_self)?,
                None => {
                    let ranks = select("ranks", &g.ranks, RankSet::All)?;
                    if ranks.len() % 2 == 1 {
                        return Err(("ranks", format!("pairwise needs an even number of ranks, got {}", ranks.len())));
                    }
                    let half = ranks.len() / 2;
                    (0..half).map(|i| (ranks[i], ranks[i + half])).collect()
                }
            };
            with_reverse(pairs, g.bidirectional)
        }
        Pattern::Explicit => explicit(g.flows.as_deref().unwrap_or_default(), n, g.allow_self)?,
    };
    Ok(pairs)
}

fn cross(srcs: &[usize], dsts: &[usize], allow_self: bool) -> Pairs {
    let mut out = Vec::new();
    for &dst in dsts {
        for &src in srcs {
            if src != dst || allow_self {
                out.push((src, dst));
            }
        }
    }
    out
}

fn explicit(list: &[[usize; 2]], n: usize, allow_self: bool) -> Result<Pairs, (&'static str, String)> {
    let mut out = Vec::new();
    for (i, &[src, dst]) in list.iter().enumerate() {
        for rank in [src, dst] {
            RankSet::one(rank).resolve(n).map_err(|m| ("flows", format!("flow {i} [{src}, {dst}]: {m}")))?;
        }
        if src == dst && !allow_self {
            return Err((
                "flows",
                format!(
                    "flow {i} [{src}, {dst}] goes from a rank to itself; set allow_self = true to measure loopback"
                ),
            ));
        }
        if out.contains(&(src, dst)) {
            return Err(("flows", format!("flow {i} [{src}, {dst}] is listed twice")));
        }
        out.push((src, dst));
    }
    Ok(out)
}

fn with_reverse(pairs: Pairs, bidirectional: bool) -> Pairs {
    if !bidirectional {
        return pairs;
    }
    let reversed: Pairs = pairs.iter().map(|&(a, b)| (b, a)).collect();
    dedup(pairs.into_iter().chain(reversed).collect())
}

/// Drops repeated pairs (a 2-rank ring is one pair each way), keeping order.
fn dedup(pairs: Pairs) -> Pairs {
    let mut seen = std::collections::HashSet::with_capacity(pairs.len());
    pairs.into_iter().filter(|p| seen.insert(*p)).collect()
}
