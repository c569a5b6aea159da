//! What localising to switches asks of a run's topology: where each rank
//! is cabled and what the path between two ranks may cross. The plan's
//! [`Fabric`] answers it; tests answer it from a fixture alone.

use crate::plan::Fabric;
use crate::topology::{SwitchName, Uplink, UplinkCable};

/// The paths between the ranks of a run: each rank's leaf and the uplinks
/// the path between two ranks may cross.
pub trait Paths {
    /// The leaf a rank is cabled to: its own NIC's, or its host's first NIC's.
    fn leaf(&self, rank: usize) -> Option<&SwitchName>;
    /// Where the cable from a rank's own NIC goes (`rail3 port 17`), where
    /// the topology places that one NIC.
    fn cable(&self, rank: usize) -> Option<String>;
    /// The uplinks the path between two ranks may take; empty under one leaf.
    fn uplinks(&self, a: usize, b: usize) -> Vec<Uplink>;
    /// How many cables join an uplink's leaf and spine.
    fn cables(&self, uplink: &Uplink) -> Option<u32>;
    /// The cables of an uplink by their ports, where the topology names them.
    fn cable_ports(&self, uplink: &Uplink) -> Vec<UplinkCable>;
}

impl Paths for Fabric<'_> {
    fn leaf(&self, rank: usize) -> Option<&SwitchName> {
        self.leaves(rank).next()
    }

    fn cable(&self, rank: usize) -> Option<String> {
        self.attachment(rank).filter(|a| a.nic.is_some()).map(|a| a.cable_end())
    }

    fn uplinks(&self, a: usize, b: usize) -> Vec<Uplink> {
        self.route(a, b).map(|r| r.uplinks).unwrap_or_default()
    }

    fn cables(&self, uplink: &Uplink) -> Option<u32> {
        self.topology().uplinks.get(uplink).copied()
    }

    fn cable_ports(&self, uplink: &Uplink) -> Vec<UplinkCable> {
        self.topology().cables_of(uplink).cloned().collect()
    }
}
