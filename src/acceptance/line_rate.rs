//! The line rate a "% of line rate" check holds an item to: the `line_rate`
//! of [check] / --line-rate when given (every port alike), else the active
//! rate of the port each rank's RDMA group uses, from that rank's own probe
//! (`probes` in run.json). TCP groups have no probed port.

use crate::result::{Checked, PhaseResult, RankProbe, RunResult};
use crate::scenario::Transport;
use crate::transport::rdma::inventory::port_used;

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
    pub fn of(&self, checked: &Checked) -> Result<LineRate, String> {
        if let Some(gbps) = self.given {
            return Ok(LineRate { gbps, source: "line_rate given".into() });
        }
        let phase_of = |index: usize| {
            self.run.phases.iter().find(|p| p.index == index).ok_or_else(|| format!("phase {index} has no result"))
        };
        match checked {
            Checked::Flow { phase, flow, src, dst } => {
                let phase = phase_of(*phase)?;
                let group = phase
                    .flows
                    .iter()
                    .find(|f| f.id == *flow)
                    .map(|f| f.group.as_str())
                    .ok_or_else(|| format!("flow {flow} has no result"))?;
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
                let (mut best, mut why): (Option<LineRate>, Option<String>) = (None, None);
                for group in groups {
                    match self.port(phase, *rank, group) {
                        Ok(p) if best.as_ref().is_none_or(|b| p.gbps > b.gbps) => best = Some(p),
                        Ok(_) => {}
                        Err(e) => _ = why.get_or_insert(e),
                    }
                }
                best.ok_or_else(|| why.unwrap_or_else(|| format!("rank {rank} took part in no flow")))
            }
            Checked::Group { .. } | Checked::Rule => Err("a group or a rule has no single port".into()),
        }
    }

    /// The probed port `rank` uses for `group` (its `device`/`port`, or as
    /// the transport picks them).
    fn port(&self, phase: &PhaseResult, rank: usize, group: &str) -> Result<LineRate, String> {
        let transport = phase.groups.iter().find(|g| g.name == group).map(|g| g.transport);
        if transport != Some(Transport::Rdma) {
            return Err(format!(
                "group `{group}` is not RDMA, so no port was probed for it: set `line_rate` in [check] or --line-rate"
            ));
        }
        let probe: &RankProbe = self
            .run
            .probes
            .iter()
            .find(|p| p.rank == rank)
            .ok_or_else(|| format!("rank {rank} sent no probe of its RDMA devices"))?;
        if let Some(why) = &probe.error {
            return Err(format!("{} (rank {rank}): {why}", probe.host));
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
            let (d, p) = port_used(&probe.devices, device, port).ok_or_else(|| {
                format!(
                    "{} (rank {rank}) has no {} {}",
                    probe.host,
                    device.map_or("RDMA device".to_string(), |n| format!("device {n}")),
                    port.map_or("with an ACTIVE port".to_string(), |n| format!("port {n}"))
                )
            })?;
            let gbps = p.rate_gbps.ok_or_else(|| {
                format!("{} (rank {rank}): {} port {} reports an unknown speed", probe.host, d.name, p.port)
            })?;
            let and = if rate.source.is_empty() { "" } else { " + " };
            rate.source += &format!("{and}{} port {}", d.name, p.port);
            rate.gbps += gbps;
        }
        rate.source += &format!(" of {} at {} Gb/s", probe.host, rate.gbps);
        Ok(rate)
    }
}
