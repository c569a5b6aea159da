//! The line rate a "% of line rate" check holds an item to: the `line_rate`
//! of [check] / --line-rate when given (every port alike), else the active
//! rate of the port each rank's RDMA group uses, from that rank's own probe
//! (`probes` in run.json). TCP groups have no probed port.

use crate::plan::FlowId;
use crate::result::{Checked, PhaseResult, RankProbe, RunResult};
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
}

pub struct LineRates<'a> {
    run: &'a RunResult,
    given: Option<f64>,
}

impl<'a> LineRates<'a> {
    pub fn new(run: &'a RunResult, given: Option<f64>) -> LineRates<'a> {
        LineRates { run, given }
    }

    /// True when no item can have a line rate: nothing given, nothing probed.
    pub fn none_known(&self) -> bool {
        self.given.is_none()
            && self.run.probes.iter().all(|p| p.devices.iter().all(|d| d.ports.iter().all(|p| p.rate_gbps.is_none())))
    }

    /// The line rate of an item: a flow is held to the slower of its two
    /// ends, a host or receiver to the port its groups use.
    pub fn of(&self, checked: &Checked) -> Result<LineRate, NoLineRate> {
        if let Some(gbps) = self.given {
            return Ok(LineRate { gbps, source: "line_rate given".into() });
        }
        let phase_of =
            |index: usize| self.run.phases.iter().find(|p| p.index == index).ok_or(NoLineRate::NoPhase { index });
        match checked {
            Checked::Flow { phase, flow, src, dst } => {
                let phase = phase_of(*phase)?;
                let group = phase
                    .flows
                    .iter()
                    .find(|f| f.id == *flow)
                    .map(|f| f.group.as_str())
                    .ok_or(NoLineRate::NoFlow { flow: *flow })?;
                let (a, b) = (self.port(phase, *src, group)?, self.port(phase, *dst, group)?);
                Ok(if b.gbps < a.gbps { b } else { a })
            }
            Checked::Host { phase, rank, .. } | Checked::Receiver { phase, rank } => {
                let phase = phase_of(*phase)?;
                let mut groups: Vec<&str> =
                    phase.flows.iter().filter(|f| f.src == *rank || f.dst == *rank).map(|f| f.group.as_str()).collect();
                groups.sort_unstable();
                groups.dedup();
                // A rank in several groups is held to the fastest port it used.
                let (mut best, mut why): (Option<LineRate>, Option<NoLineRate>) = (None, None);
                for group in groups {
                    match self.port(phase, *rank, group) {
                        Ok(p) if best.as_ref().is_none_or(|b| p.gbps > b.gbps) => best = Some(p),
                        Ok(_) => {}
                        Err(e) => _ = why.get_or_insert(e),
                    }
                }
                best.ok_or_else(|| why.unwrap_or(NoLineRate::NoFlowOfRank { rank: *rank }))
            }
            Checked::Group { .. } | Checked::Rule => Err(NoLineRate::NoSinglePort),
        }
    }

    /// The probed port `rank` uses for `group` (its `device`/`port`, or as
    /// the transport picks them).
    fn port(&self, phase: &PhaseResult, rank: usize, group: &str) -> Result<LineRate, NoLineRate> {
        let transport = phase.groups.iter().find(|g| g.name == group).map(|g| g.transport);
        if transport != Some(Transport::Rdma) {
            return Err(NoLineRate::NotRdma { group: group.to_string() });
        }
        let probe: &RankProbe = self.run.probes.iter().find(|p| p.rank == rank).ok_or(NoLineRate::NoProbe { rank })?;
        if let Some(why) = &probe.error {
            return Err(NoLineRate::ProbeFailed { host: probe.host.clone(), rank, why: why.clone() });
        }
        let rdma = self.run.scenario.groups.iter().find(|g| g.name == group).and_then(|g| g.rdma.as_ref());
        let port = rdma.and_then(|r| r.port);
        // Multi-rail (the group's `devices`, else the host's `devices=`): the rails add up.
        let host_devices = self.run.plan.ranks.get(rank).map_or(&[][..], |r| &r.devices[..]);
        let devices: Vec<Option<&str>> = match rdma {
            Some(r) if !r.devices.is_empty() => r.devices.iter().map(|d| Some(d.as_str())).collect(),
            Some(r) if r.device.is_some() => vec![r.device.as_deref()],
            _ if !host_devices.is_empty() => host_devices.iter().map(|d| Some(d.as_str())).collect(),
            _ => vec![None],
        };
        let mut rate = LineRate { gbps: 0.0, source: String::new() };
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
        }
        rate.source += &format!(" of {} at {} Gb/s", probe.host, rate.gbps);
        Ok(rate)
    }
}
