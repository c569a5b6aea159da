//! The address vector an RC QP's INIT → RTR transition carries: pure, so the
//! InfiniBand (LID, no GRH) and RoCE (GRH with the peer's GID) paths are
//! tested without a device.

use sideway::ibverbs::address::{AddressHandleAttribute, Gid};

use super::endpoint::RdmaEndpoint;

/// `IBV_LINK_LAYER_ETHERNET`: a `LocalPort`'s link layer on RoCE.
pub(crate) const LINK_LAYER_ETHERNET: u8 = 2;

/// Hop limit of GRH-routed packets (routers decrement it; 64 crosses any
/// data-centre fabric).
const HOP_LIMIT: u8 = 64;

/// What this side knows about its own port when it builds the path.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LocalPort {
    pub port: u8,
    pub link_layer: u8,
    pub gid_index: u32,
    /// The user chose the GID index (`gid_index`, perftest's `-x`): on
    /// InfiniBand that asks for a GRH, as perftest does with `-x`.
    pub gid_index_asked: bool,
    /// The group's `service_level` (0..=15, validated).
    pub service_level: u8,
    /// The group's `traffic_class`, carried in the GRH (RoCE v2: the TOS byte).
    pub traffic_class: u8,
}

/// The global route header of a path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Grh {
    pub dgid: [u8; 16],
    pub sgid_index: u8,
    pub hop_limit: u8,
    pub traffic_class: u8,
}

/// Everything of `ibv_ah_attr` this transport sets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct AddressPath {
    pub dlid: u16,
    pub port: u8,
    pub service_level: u8,
    pub grh: Option<Grh>,
}

/// The path to `peer`: RoCE always routes by GID (a GRH; the LID is 0);
/// InfiniBand routes by LID and adds a GRH only when a GID index was asked
/// for or the peer has no LID. Errors say why the peer cannot be reached.
pub(crate) fn address_path(local: &LocalPort, peer: &RdmaEndpoint) -> Result<AddressPath, PathError> {
    let roce = local.link_layer == LINK_LAYER_ETHERNET;
    let use_grh = roce || local.gid_index_asked || peer.lid == 0;
    if roce && peer.gid == [0; 16] {
        return Err(PathError::ZeroGidOnRoce);
    }
    if use_grh && peer.gid == [0; 16] {
        return Err(PathError::ZeroGid { lid: peer.lid });
    }
    let sgid_index = u8::try_from(local.gid_index).map_err(|_| PathError::WideGidIndex(local.gid_index))?;
    Ok(AddressPath {
        dlid: peer.lid,
        port: local.port,
        service_level: local.service_level,
        grh: use_grh.then_some(Grh {
            dgid: peer.gid,
            sgid_index,
            hop_limit: HOP_LIMIT,
            traffic_class: local.traffic_class,
        }),
    })
}

/// Why the path to a peer cannot be built.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum PathError {
    #[error("peer GID is all zero on a RoCE port")]
    ZeroGidOnRoce,
    #[error("peer has LID {lid} and an all-zero GID: a GRH path needs its GID")]
    ZeroGid { lid: u16 },
    #[error("local gid_index {0} does not fit the GRH's 8-bit sgid_index")]
    WideGidIndex(u32),
}

impl AddressPath {
    /// The verbs attribute for `QueuePairAttribute::setup_address_vector`.
    pub(crate) fn to_ah(self) -> AddressHandleAttribute {
        let mut ah = AddressHandleAttribute::new();
        ah.setup_dest_lid(self.dlid).setup_port(self.port).setup_service_level(self.service_level);
        if let Some(g) = self.grh {
            ah.setup_grh(&Gid { raw: g.dgid }, 0, g.sgid_index, g.hop_limit, g.traffic_class);
        }
        ah
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const IB: u8 = 1;
    /// Port 1 of an InfiniBand HCA, GID 0, no class or level asked.
    const IB_PORT_1: LocalPort =
        LocalPort { port: 1, link_layer: IB, gid_index: 0, gid_index_asked: false, service_level: 0, traffic_class: 0 };

    fn peer(lid: u16, gid: [u8; 16]) -> RdmaEndpoint {
        RdmaEndpoint { lid, gid, qpns: vec![1], psns: vec![1], mtu: 5, rkey: 1, len: 64, ..RdmaEndpoint::default() }
    }

    fn ib_gid() -> [u8; 16] {
        "fe80::b859:9f03:d:5f3a".parse::<std::net::Ipv6Addr>().unwrap().octets()
    }

    #[test]
    fn infiniband_routes_by_lid_without_grh() {
        let local = IB_PORT_1;
        let p = address_path(&local, &peer(0x17, ib_gid())).unwrap();
        assert_eq!(p, AddressPath { dlid: 0x17, port: 1, service_level: 0, grh: None });
    }

    #[test]
    fn infiniband_adds_a_grh_when_a_gid_index_is_asked() {
        let local = LocalPort { gid_index: 1, gid_index_asked: true, ..IB_PORT_1 };
        let p = address_path(&local, &peer(0x17, ib_gid())).unwrap();
        assert_eq!(p.dlid, 0x17);
        assert_eq!(p.grh, Some(Grh { dgid: ib_gid(), sgid_index: 1, hop_limit: HOP_LIMIT, traffic_class: 0 }));
    }

    #[test]
    fn infiniband_peer_without_lid_needs_its_gid() {
        let local = IB_PORT_1;
        assert!(address_path(&local, &peer(0, ib_gid())).unwrap().grh.is_some());
        let e = address_path(&local, &peer(0, [0; 16])).unwrap_err();
        assert_eq!(e, PathError::ZeroGid { lid: 0 });
        assert!(e.to_string().contains("all-zero GID"), "{e}");
    }

    #[test]
    fn roce_always_uses_the_grh_with_the_peer_gid() {
        let v4 = "::ffff:10.0.0.2".parse::<std::net::Ipv6Addr>().unwrap().octets();
        let local = LocalPort {
            port: 2,
            link_layer: LINK_LAYER_ETHERNET,
            gid_index: 3,
            gid_index_asked: false,
            service_level: 3,
            traffic_class: 104,
        };
        let p = address_path(&local, &peer(0, v4)).unwrap();
        assert_eq!(
            p,
            AddressPath {
                dlid: 0,
                port: 2,
                service_level: 3,
                grh: Some(Grh { dgid: v4, sgid_index: 3, hop_limit: 64, traffic_class: 104 })
            }
        );
        let e = address_path(&local, &peer(0, [0; 16])).unwrap_err();
        assert_eq!(e.to_string(), "peer GID is all zero on a RoCE port");
    }

    #[test]
    fn gid_index_beyond_8_bits_is_an_error_not_a_truncation() {
        let local = LocalPort {
            port: 1,
            link_layer: LINK_LAYER_ETHERNET,
            gid_index: 300,
            gid_index_asked: true,
            service_level: 0,
            traffic_class: 0,
        };
        let e = address_path(&local, &peer(0, ib_gid())).unwrap_err();
        assert_eq!(e, PathError::WideGidIndex(300));
        assert!(e.to_string().contains("gid_index 300"), "{e}");
    }
}
