//! What a joined rank sends is checked against the plan before it counts:
//! a rank holds the job's token, but a buggy (or hostile) one must fail its
//! own flows with a clear message, never crash rank 0 or speak for others.

use std::collections::HashSet;

use crate::control::wire::FlowEndpoint;
use crate::metrics::RankReport;
use crate::plan::{Phase, RankInfo};
use crate::scenario::Mode;
use crate::transport::rdma::RdmaInventory;
use crate::transport::Side;

/// Whether `rank` plays `side` of flow `flow` in `phase`.
fn owns(phase: &Phase, rank: usize, flow: u32, side: Side) -> bool {
    phase.flows.get(flow as usize).is_some_and(|f| match side {
        Side::Sender => f.src == rank,
        Side::Receiver => f.dst == rank,
    })
}

/// Whether `rank` measures latency on flow `flow` of `phase`: it is the
/// sending (initiating) end of a latency flow, the end that records the
/// round trips.
fn measures_latency(phase: &Phase, rank: usize, flow: u32, side: Side) -> bool {
    side == Side::Sender
        && phase
            .flows
            .get(flow as usize)
            .is_some_and(|f| f.src == rank && phase.groups.get(f.group).is_some_and(|g| g.mode == Mode::Latency))
}

/// How many latency histograms `rank`'s report of `phase` may carry: one
/// per latency flow it sends on. Decoded, each is 108 KiB whatever it took
/// on the wire, so rank 0 holds a rank to this.
pub fn histograms_allowed(phase: &Phase, rank: usize) -> usize {
    phase.flows.iter().filter(|f| measures_latency(phase, rank, f.id, Side::Sender)).count()
}

/// [`histograms_allowed`] for every rank of `ranks`, in one pass over the
/// flows (asking rank by rank is quadratic: 65 536 ranks took seconds).
pub fn histograms_by_rank(phase: &Phase, ranks: usize) -> Vec<usize> {
    let mut allowed = vec![0; ranks];
    for f in &phase.flows {
        if let Some(n) = allowed.get_mut(f.src).filter(|_| measures_latency(phase, f.src, f.id, Side::Sender)) {
            *n += 1;
        }
    }
    allowed
}

/// The first of the rank's hostfile `devices=` its own probe did not find,
/// named with what the host has: checked as the run starts, before a phase
/// would fail on it half-way.
pub fn missing_device(rank: &RankInfo, inventory: &RdmaInventory) -> Option<String> {
    let missing = rank.devices.iter().find(|d| !inventory.devices.iter().any(|found| &found.name == *d))?;
    let names: Vec<&str> = inventory.devices.iter().map(|d| d.name.as_str()).collect();
    let has = match (&inventory.error, names.is_empty()) {
        (Some(why), true) => format!("it has no RDMA devices ({why})"),
        (None, true) => "it has no RDMA devices".to_string(),
        (_, false) => format!("its RDMA devices: {}", names.join(", ")),
    };
    Some(format!(
        "the hostfile gives host `{}` device `{missing}` (devices=), which is not on the host; {has}",
        rank.host
    ))
}

/// Why `rank`'s endpoints cannot be used, if they cannot.
pub fn endpoints_problem(phase: &Phase, rank: usize, list: &[FlowEndpoint]) -> Option<String> {
    let mut seen = HashSet::new();
    list.iter().find_map(|e| {
        if !owns(phase, rank, e.flow, e.side) {
            Some(format!("published an endpoint for flow {} ({:?}) that is not its own", e.flow, e.side))
        } else if !seen.insert((e.flow, e.side)) {
            Some(format!("published flow {} ({:?}) twice", e.flow, e.side))
        } else {
            None
        }
    })
}

/// Why `rank`'s report of `phase` cannot be aggregated, if it cannot.
pub fn report_problem(phase: &Phase, rank: usize, report: &RankReport) -> Option<String> {
    if report.rank != rank {
        return Some(format!("sent a report for rank {}", report.rank));
    }
    let mut seen = HashSet::new();
    report.flows.iter().find_map(|s| {
        if !owns(phase, rank, s.flow, s.side) {
            Some(format!("reported flow {} ({:?}), which is not its own", s.flow, s.side))
        } else if !seen.insert((s.flow, s.side)) {
            Some(format!("reported flow {} ({:?}) twice", s.flow, s.side))
        } else if s.rtts.is_some() && !measures_latency(phase, rank, s.flow, s.side) {
            Some(format!("reported round trips for flow {} ({:?}), which measures none there", s.flow, s.side))
        } else {
            None
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hostfile;
    use crate::plan::ranks_of;
    use crate::transport::rdma::InventoryDevice;

    fn device(name: &str) -> InventoryDevice {
        InventoryDevice { name: name.to_string(), numa_node: None, ports: Vec::new(), error: None }
    }

    #[test]
    fn each_rank_device_must_be_on_its_host() {
        let hosts = hostfile::parse("n1 devices=mlx5_0,mlx5_1\n", std::path::Path::new("hosts")).unwrap();
        let ranks = ranks_of(&hosts);
        let has = |names: &[&str]| RdmaInventory { devices: names.iter().map(|n| device(n)).collect(), error: None };
        // Rank 1 needs mlx5_1 only: a host missing mlx5_0 fails rank 0 alone.
        assert_eq!(missing_device(&ranks[1], &has(&["mlx5_1"])), None);
        assert_eq!(
            missing_device(&ranks[0], &has(&["mlx5_1", "mlx5_2"])).unwrap(),
            "the hostfile gives host `n1` device `mlx5_0` (devices=), which is not on the host; its RDMA devices: mlx5_1, mlx5_2"
        );
        let none = RdmaInventory { devices: Vec::new(), error: Some("libibverbs not found".to_string()) };
        assert_eq!(
            missing_device(&ranks[1], &none).unwrap(),
            "the hostfile gives host `n1` device `mlx5_1` (devices=), which is not on the host; it has no RDMA devices (libibverbs not found)"
        );
        // A rank bound to no device needs none.
        assert_eq!(missing_device(&ranks_of(&[hostfile::Host::named("n2")])[0], &none), None);
    }
}
