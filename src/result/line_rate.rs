//! The line rate of a flow's end: the active rate of the RDMA port (or
//! ports, multi-rail) its group uses, from its rank's own probe (`probes`
//! in run.json), as the transport picks it. What acceptance's "% of line
//! rate" and each flow's limit (`flows[].limit`) hold a rate to.

use crate::plan::FlowId;
use crate::result::{PhaseResult, RankProbe, RunResult};
use crate::scenario::Transport;
use crate::transport::rdma::inventory::port_used;

/// Why an item has no line rate to be held to (the check's note says it).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum NoLineRate {
    #[error("phase {index} has no result")]
    NoPhase { index: usize },
    #[error("flow {flow} has no result")]
    NoFlow { flow: FlowId },
    #[error("rank {rank} took part in no flow")]
    NoFlowOfRank { rank: usize },
    #[error("a group or a rule has no single port")]
    NoSinglePort,
    #[error("group `{group}` is not RDMA, so no port was probed for it: set `line_rate` in [check] or --line-rate")]
    NotRdma { group: String },
    #[error("rank {rank} sent no probe of its RDMA devices")]
    NoProbe { rank: usize },
    #[error("{host} (rank {rank}): {why}")]
    ProbeFailed { host: String, rank: usize, why: String },
    /// `device`: "RDMA device" or "device NAME"; `port`: "with an ACTIVE port" or "port N".
    #[error("{host} (rank {rank}) has no {device} {port}")]
    NoPort { host: String, rank: usize, device: String, port: String },
    #[error("{host} (rank {rank}): {device} port {port} reports an unknown speed")]
    UnknownSpeed { host: String, rank: usize, device: String, port: u8 },
}

/// One port's line rate and where it came from, for the check's note.
#[derive(Clone, Debug, PartialEq)]
pub struct LineRate {
    pub gbps: f64,
    pub source: String,
    /// The RDMA devices whose ports add up to it (none when given).
    pub devices: Vec<String>,
}

/// The probed port `rank` uses for `group` (its `device`/`port`, or as
/// the transport picks them).
pub fn port_rate(run: &RunResult, phase: &PhaseResult, rank: usize, group: &str) -> Result<LineRate, NoLineRate> {
    let transport = phase.groups.iter().find(|g| g.name == group).map(|g| g.transport);
    if transport != Some(Transport::Rdma) {
        return Err(NoLineRate::NotRdma { group: group.to_string() });
    }
    let probe: &RankProbe = run.probes.iter().find(|p| p.rank == rank).ok_or(NoLineRate::NoProbe { rank })?;
    if let Some(why) = &probe.error {
        return Err(NoLineRate::ProbeFailed { host: probe.host.clone(), rank, why: why.clone() });
    }
    let rdma = run.scenario.groups.iter().find(|g| g.name == group).and_then(|g| g.rdma.as_ref());
    let port = rdma.and_then(|r| r.port);
    // Multi-rail (the group's `devices`, else the host's `devices=`): the rails add up.
    let host_devices = run.plan.ranks.get(rank).map_or(&[][..], |r| &r.devices[..]);
    let devices: Vec<Option<&str>> = match rdma {
        Some(r) if !r.devices.is_empty() => r.devices.iter().map(|d| Some(d.as_str())).collect(),
        Some(r) if r.device.is_some() => vec![r.device.as_deref()],
        _ if !host_devices.is_empty() => host_devices.iter().map(|d| Some(d.as_str())).collect(),
        _ => vec![None],
    };
    let mut rate = LineRate { gbps: 0.0, source: String::new(), devices: Vec::new() };
    for device in devices {
        let (d, p) = port_used(&probe.devices, device, port).ok_or_else(|| NoLineRate::NoPort {
            host: probe.host.clone(),
            rank,
            device: device.map_or("RDMA device".to_string(), |n| format!("device {n}")),
            port: port.map_or("with an ACTIVE port".to_string(), |n| format!("port {n}")),
        })?;
        let gbps = p.rate_gbps.ok_or_else(|| NoLineRate::UnknownSpeed {
            host: probe.host.clone(),
            rank,
            device: d.name.clone(),
            port: p.port,
        })?;
        let and = if rate.source.is_empty() { "" } else { " + " };
        rate.source += &format!("{and}{} port {}", d.name, p.port);
        rate.gbps += gbps;
        rate.devices.push(d.name.clone());
    }
    rate.source += &format!(" of {} at {} Gb/s", probe.host, rate.gbps);
    Ok(rate)
}
