//! Placing HCAs by node GUID: an ibnetdiscover dump of a fabric whose
//! node descriptions were never set (`MT4123 ConnectX6 Mellanox
//! Technologies`) names no host, but each HCA's GUID is also the GUID its
//! host reports for one of its devices (sysfs `node_guid`). A run whose
//! ranks the descriptions do not place probes its hosts first and places
//! each HCA a host reported on that host, as that device.

use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet};

use super::{Attachment, NodeGuid, Topology};

/// One RDMA device a host reported.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReportedHca<'a> {
    pub host: &'a str,
    /// The device's name on its host (`mlx5_3`), as `devices=` names it.
    pub nic: &'a str,
    pub guid: NodeGuid,
}

/// Two hosts (or two devices) reported one node GUID.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "node GUID {guid} is reported by {first} and by {second}, and a node GUID names one HCA: the topology \
     cannot place it by GUID (are these hosts' sysfs trees copies, or their devices virtual ones with \
     equal addresses?); give their HCAs node descriptions that begin with the host name (`node01 mlx5_0`)"
)]
pub struct GuidClash {
    pub guid: NodeGuid,
    /// `host node01's mlx5_0`
    pub first: String,
    pub second: String,
}

impl Topology {
    /// Whether any HCA is known by its node GUID (an ibnetdiscover dump).
    pub fn names_guids(&self) -> bool {
        self.hosts.values().flatten().any(|a| a.guid.is_some())
    }

    /// Moves every attachment whose GUID a host reported to that host, named
    /// as its device; the others stay as their descriptions placed them.
    /// Returns the GUIDs placed.
    pub fn place_by_guid(&mut self, reported: &[ReportedHca<'_>]) -> Result<BTreeSet<NodeGuid>, GuidClash> {
        let mut owners: BTreeMap<NodeGuid, ReportedHca> = BTreeMap::new();
        for hca in reported {
            match owners.entry(hca.guid) {
                Entry::Vacant(free) => {
                    free.insert(*hca);
                }
                // Every rank of a host reports the host's devices.
                Entry::Occupied(owner) if owner.get() == hca => {}
                Entry::Occupied(owner) => {
                    let name = |h: &ReportedHca| format!("host {}'s {}", h.host, h.nic);
                    return Err(GuidClash { guid: hca.guid, first: name(owner.get()), second: name(hca) });
                }
            }
        }
        let mut placed = BTreeSet::new();
        for (name, attached) in std::mem::take(&mut self.hosts) {
            for attachment in attached {
                let owner = attachment.guid.and_then(|g| owners.get(&g));
                let (host, attachment) = match owner {
                    Some(hca) => {
                        placed.insert(hca.guid);
                        (hca.host.to_string(), Attachment { nic: Some(hca.nic.to_string()), ..attachment })
                    }
                    None => (name.clone(), attachment),
                };
                let on = self.hosts.entry(host).or_default();
                if !on.contains(&attachment) {
                    on.push(attachment);
                }
            }
        }
        Ok(placed)
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::hostfile::Host;

    /// The two-rail fixture with every HCA's description the firmware's
    /// default, as on a fabric where nothing set them.
    fn nameless_rails() -> Topology {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/topology/rails.ibnetdiscover");
        let text = std::fs::read_to_string(&path).unwrap();
        let text = (1..=4).fold(text, |text, n| {
            (0..2).fold(text, |t, k| t.replace(&format!("node0{n} mlx5_{k}"), "MT4123 ConnectX6 Mellanox Technologies"))
        });
        assert!(!text.contains("node0"), "every description replaced");
        super::super::ibnet::parse(&text, &path).unwrap().finish(&path).unwrap()
    }

    fn hca(host: &'static str, nic: &'static str, guid: u64) -> ReportedHca<'static> {
        ReportedHca { host, nic, guid: NodeGuid(guid) }
    }

    #[test]
    fn each_reported_hca_moves_to_its_host_as_its_device() {
        let mut topology = nameless_rails();
        let ranks = crate::hostfile::parse("a devices=mlx5_0,mlx5_1\n", Path::new("h")).unwrap();
        assert!(topology.check_placed(&ranks, Path::new("f")).is_err(), "the descriptions place no host");
        // Host a's devices are node02's HCAs, named in the other order.
        let reported = [hca("a", "mlx5_1", 0x0002_c903_00c0_0200), hca("a", "mlx5_0", 0x0002_c903_00c1_0200)];
        let placed = topology.place_by_guid(&[reported[0], reported[1], reported[0]]).unwrap();
        assert_eq!(placed.len(), 2);
        topology.check_placed(&ranks, Path::new("f")).unwrap();
        let ends: Vec<(Option<&str>, String)> =
            topology.hosts["a"].iter().map(|a| (a.nic.as_deref(), a.cable_end())).collect();
        assert_eq!(ends, [(Some("mlx5_1"), "rail0 port 2".to_string()), (Some("mlx5_0"), "rail1 port 2".into())]);
        let others: Vec<&String> = topology.hosts.keys().filter(|h| *h != "a").collect();
        assert_eq!(others.len(), 6, "the HCAs no host reported stay, named by their ids: {others:?}");
        assert!(others.contains(&&"H-0002c90300c00100".to_string()), "{others:?}");
        let own = topology.attachments_of("a", &Host::named("a").devices);
        assert_eq!(own.len(), 2, "a rank using every NIC of its host is on both rails");
    }

    #[test]
    fn one_guid_reported_twice_is_refused_with_both_owners() {
        let clash = [hca("a", "mlx5_0", 7), hca("b", "mlx5_0", 7)];
        let e = nameless_rails().place_by_guid(&clash).unwrap_err().to_string();
        assert!(
            e.starts_with(
                "node GUID 0x0000000000000007 is reported by host a's mlx5_0 and by host b's mlx5_0, and a node \
                 GUID names one HCA"
            ),
            "{e}"
        );
    }
}
