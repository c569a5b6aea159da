//! The line rate a "% of line rate" check holds an item to: the `line_rate`
//! of [check] / --line-rate when given (every port alike), else the active
//! rate of the port each rank's RDMA group uses, from that rank's own probe
//! (`probes` in run.json). TCP groups have no probed port.

use crate::result::line_rate::port_rate;
pub use crate::result::line_rate::{LineRate, NoLineRate};
use crate::result::{Checked, PhaseResult, RunResult};

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
            return Ok(LineRate { gbps, source: "line_rate given".into(), devices: Vec::new() });
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

    fn port(&self, phase: &PhaseResult, rank: usize, group: &str) -> Result<LineRate, NoLineRate> {
        port_rate(self.run, phase, rank, group)
    }
}
