//! The PCIe rule: an RDMA flow end whose NIC trained a PCIe link that
//! carries less than the NIC's port (downtrained, or a slot narrower than
//! the card) is held by that link once the flow comes near it.

use super::{Evidence, Limit, LimitKind};
use crate::hostfacts::PcieLink;
use crate::result::line_rate::port_rate;
use crate::result::{FlowResult, PhaseResult, RunResult};

/// A flow at 75 % of its NIC's PCIe link (after the line code) is at that
/// link: the packets' own headers and acknowledgements take 10 to 20 % of
/// a PCIe link at 256-byte payloads, the NIC's descriptor reads more.
pub const PCIE_SHARE: f64 = 0.75;

/// The first end (sender, then receiver) whose NIC's PCIe links carry less
/// than its ports, with the flow at `PCIE_SHARE` of them.
pub(super) fn narrower_than_the_port(run: &RunResult, phase: &PhaseResult, flow: &FlowResult) -> Option<Limit> {
    [("sender", flow.src), ("receiver", flow.dst)].into_iter().find_map(|(end, rank)| {
        let port = port_rate(run, phase, rank, &flow.group).ok()?;
        let facts = run.probes.iter().find(|p| p.rank == rank)?.facts.as_deref()?;
        let links: Vec<(&str, PcieLink)> = port
            .devices
            .iter()
            .map(|d| Some((d.as_str(), facts.rdma_devices.iter().find(|f| &f.name == d)?.pcie?)))
            .collect::<Option<_>>()?;
        let pcie_gbps: f64 = links.iter().map(|(_, l)| l.gbps()).sum();
        (pcie_gbps < port.gbps && flow.gbps >= PCIE_SHARE * pcie_gbps).then(|| {
            let named: Vec<String> = links.iter().map(|(d, l)| format!("{d} at {l}")).collect();
            Limit {
                kind: LimitKind::Pcie,
                rule: format!(
                    "the {end}'s NIC PCIe link ({}) carries less than its port ({}), and the flow reached ≥ {:.0} % of it",
                    named.join(", "),
                    port.source,
                    PCIE_SHARE * 100.0
                ),
                evidence: vec![
                    Evidence { what: "flow".into(), value: flow.gbps, unit: "Gb/s".into() },
                    Evidence { what: format!("{end} PCIe link"), value: pcie_gbps, unit: "Gb/s".into() },
                    Evidence { what: format!("{end} port rate"), value: port.gbps, unit: "Gb/s".into() },
                ],
                unavailable: Vec::new(),
            }
        })
    })
}
