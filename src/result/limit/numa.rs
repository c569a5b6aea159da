//! The NUMA rule: a flow end whose data threads were pinned only to cores
//! of NUMA nodes other than its NIC's moved every byte across the link
//! between the sockets (its buffers' memory, and the NIC's DMA into it).

use super::{Evidence, Limit, LimitKind};
use crate::result::{FlowResult, PhaseResult};

/// The first end (sender, then receiver) pinned away from its NIC's node.
pub(super) fn far(phase: &PhaseResult, flow: &FlowResult) -> Option<Limit> {
    [("sender", flow.src), ("receiver", flow.dst)].into_iter().find_map(|(end, rank)| {
        let rank = phase.ranks.iter().find(|r| r.rank == rank)?;
        let placed = rank.placements.iter().find(|p| p.group == flow.group)?;
        let nic = placed.device_node?;
        let away = placed.core_nodes.first().filter(|_| !placed.core_nodes.contains(&nic))?;
        let nodes: Vec<String> = placed.core_nodes.iter().map(usize::to_string).collect();
        Some(Limit {
            kind: LimitKind::FarNuma,
            rule: format!(
                "the {end}'s data threads ran only on cores of NUMA node {} of {}, its NIC on node {nic}: \
                 every byte crossed between the sockets",
                nodes.join(", "),
                rank.host
            ),
            evidence: vec![
                Evidence { what: format!("{end} NIC's NUMA node"), value: nic as f64, unit: "node".into() },
                Evidence { what: format!("{end} data threads' NUMA node"), value: *away as f64, unit: "node".into() },
            ],
            unavailable: Vec::new(),
        })
    })
}
