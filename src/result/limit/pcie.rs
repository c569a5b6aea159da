//! The PCIe rule: a flow end whose data crosses a PCIe link that carries
//! less than its NIC's port (the NIC's own, downtrained or in a slot
//! narrower than the card, or, for an RDMA flow in GPU memory, the GPU's)
//! is held by that link once the flow comes near it.

use super::{Evidence, Limit, LimitKind};
use crate::hostfacts::{HostFacts, PcieLink};
use crate::result::line_rate::port_rate;
use crate::result::{FlowResult, PhaseResult, RunResult};
use crate::scenario::Transport;
use crate::transport::Side;

/// A flow at 75 % of a PCIe link (after the line code) is at that link:
/// the packets' own headers and acknowledgements take 10 to 20 % of a PCIe
/// link at 256-byte payloads, the NIC's descriptor reads more.
pub const PCIE_SHARE: f64 = 0.75;

/// The first end (sender, then receiver) whose narrowest PCIe links carry
/// less than its ports, with the flow at `PCIE_SHARE` of them.
pub(super) fn narrower_than_the_port(run: &RunResult, phase: &PhaseResult, flow: &FlowResult) -> Option<Limit> {
    [(Side::Sender, flow.src), (Side::Receiver, flow.dst)].into_iter().find_map(|(side, rank)| {
        let (port_gbps, port, candidates) = match phase.groups.iter().find(|g| g.name == flow.group)?.transport {
            Transport::Rdma => rdma_links(run, phase, flow, side, rank)?,
            Transport::Tcp => tcp_links(phase, rank)?,
        };
        let narrowest = candidates
            .into_iter()
            .filter(|links| !links.is_empty())
            .min_by(|a, b| total(a).total_cmp(&total(b)))?;
        let pcie_gbps = total(&narrowest);
        (pcie_gbps < port_gbps && flow.gbps >= PCIE_SHARE * pcie_gbps).then(|| {
            let end = side.name();
            let named: Vec<String> = narrowest.iter().map(|(d, l)| format!("{d} at {l}")).collect();
            Limit {
                kind: LimitKind::Pcie,
                rule: format!(
                    "the {end}'s PCIe link ({}) carries less than its NIC's port ({port}), and the flow reached ≥ {:.0} % of it",
                    named.join(", "),
                    PCIE_SHARE * 100.0
                ),
                evidence: vec![
                    Evidence { what: "flow".into(), value: flow.gbps, unit: "Gb/s".into() },
                    Evidence { what: format!("{end} PCIe link"), value: pcie_gbps, unit: "Gb/s".into() },
                    Evidence { what: format!("{end} port rate"), value: port_gbps, unit: "Gb/s".into() },
                ],
                unavailable: Vec::new(),
            }
        })
    })
}

type Links = Vec<(String, PcieLink)>;

/// An RDMA end's port rate, where it comes from, and the PCIe links its
/// data crosses: its NICs', and in GPU memory its GPUs'.
fn rdma_links(
    run: &RunResult,
    phase: &PhaseResult,
    flow: &FlowResult,
    side: Side,
    rank: usize,
) -> Option<(f64, String, [Links; 2])> {
    let port = port_rate(run, phase, rank, &flow.group).ok()?;
    let facts = run.probes.iter().find(|p| p.rank == rank)?.facts.as_deref()?;
    let nics: Links = port
        .devices
        .iter()
        .map(|d| Some((d.clone(), facts.rdma_devices.iter().find(|f| &f.name == d)?.pcie?)))
        .collect::<Option<_>>()?;
    Some((port.gbps, port.source, [nics, gpu_links(facts, flow, side)]))
}

/// A TCP end's interface speed and its NIC's PCIe link.
fn tcp_links(phase: &PhaseResult, rank: usize) -> Option<(f64, String, [Links; 2])> {
    let rank = phase.ranks.iter().find(|r| r.rank == rank)?;
    let netdev = rank.netdevs.first()?;
    let gbps = netdev.speed_mbps? as f64 / 1000.0;
    let source = format!("{} of {} at {gbps} Gb/s", netdev.iface, rank.host);
    Some((gbps, source, [vec![(netdev.iface.clone(), netdev.pcie?)], Vec::new()]))
}

fn total(links: &[(String, PcieLink)]) -> f64 {
    links.iter().map(|(_, l)| l.gbps()).sum()
}

/// The PCIe links of the GPUs whose memory this end of `flow` moved
/// (none in host memory, or where a GPU's link is unknown).
fn gpu_links(facts: &HostFacts, flow: &FlowResult, side: Side) -> Vec<(String, PcieLink)> {
    let Some(memory) = &flow.gpu_memory else { return Vec::new() };
    let uses = if side == Side::Sender { &memory.sender } else { &memory.receiver };
    let mut gpus: Vec<usize> = uses.iter().map(|u| u.gpu).collect();
    gpus.sort_unstable();
    gpus.dedup();
    let of = |gpu: usize| facts.gpus.as_ref()?.gpus.iter().find(|g| g.index == gpu)?.pcie;
    gpus.into_iter().map(|g| Some((format!("GPU {g}"), of(g)?))).collect::<Option<_>>().unwrap_or_default()
}
