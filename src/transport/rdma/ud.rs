//! UD (unreliable datagram) QPs, as `ib_send_bw -c UD` runs them: the
//! Q_Key at INIT, the one-packet size checks, the peer's address, and one
//! QP's INIT → RTR → RTS with its address handle. `connect` makes the rest
//! of a UD flow's resources as it does RC's, and calls these.

use sideway::ibverbs::queue_pair::{QueuePairAttribute, QueuePairState};

use super::endpoint::RdmaEndpoint;
use super::error::{RdmaError, Refused};
use super::ffi::{Qp, QpModifyError};
use super::path::{address_path, AddressPath, LocalPort, PathError};

/// UD's RESET → INIT: the port and the Q_Key its receives accept.
pub(crate) fn init(qp: &mut Qp, port: u8, qkey: u32) -> Result<(), Refused> {
    qp.init_ud(port, qkey).map_err(|e| Refused {
        transition: "RESET->INIT",
        attrs: format!("port={port}, pkey_index=0, qkey={qkey:#x}"),
        reason: e.into(),
    })
}

/// A UD flow's Q_Key from 24 random bits: bit 24 set (never 0) and bit 31,
/// which marks the privileged "controlled" Q_Keys, clear.
pub(crate) fn qkey(random: u32) -> u32 {
    random & 0xff_ffff | 1 << 24
}

/// UD carries a message in one packet: refuses one above the port's active
/// MTU (`active_mtu` as the ibv_mtu enum).
pub(crate) fn fits_one_packet(size: u64, active_mtu: u32, device: &str, port: u8, flow: &str) -> Result<(), RdmaError> {
    let mtu = u64::from(super::probe::mtu_bytes(active_mtu));
    if size > mtu {
        return Err(RdmaError::AboveUdMtu { flow: flow.into(), size, device: device.into(), port, mtu });
    }
    Ok(())
}

/// Why `peer` cannot take this flow's datagrams (`qps` QPs of `size` bytes),
/// or the address its QPs are reached at.
pub(crate) fn peer_address(
    local: &LocalPort,
    qps: usize,
    size: u64,
    peer: &RdmaEndpoint,
) -> Result<AddressPath, UdPeerError> {
    if peer.qpns.len() != qps {
        return Err(UdPeerError::QpCount { peer: peer.qpns.len(), flow: qps });
    }
    if peer.qkey == 0 {
        return Err(UdPeerError::NoQkey);
    }
    let peer_mtu = u64::from(super::probe::mtu_bytes(peer.mtu));
    if size > peer_mtu {
        return Err(UdPeerError::AboveMtu { size, mtu: peer_mtu });
    }
    // The same path as RC's (LID or GRH, class and level), in an address handle.
    Ok(address_path(local, peer)?)
}

/// Why a peer cannot take a UD flow's datagrams.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum UdPeerError {
    #[error("peer has {peer} QPs, this flow {flow}")]
    QpCount { peer: usize, flow: usize },
    #[error("peer sent no UD Q_Key (is it an RC flow, or an older fabricbench?)")]
    NoQkey,
    #[error("UD message_size {size} B is above the peer port's active MTU ({mtu} B); give at most {mtu}")]
    AboveMtu { size: u64, mtu: u64 },
    #[error(transparent)]
    Path(#[from] PathError),
}

/// One UD QP: INIT → RTR → RTS (no peer in the QP), then its sends go to
/// QP `peer_qpn` (accepting `peer_qkey`) at `to`.
pub(crate) fn connect_qp(
    qp: &mut Qp,
    psn: u32,
    to: &AddressPath,
    peer_qpn: u32,
    peer_qkey: u32,
) -> Result<(), Refused> {
    let refused = |transition, attrs| move |e: QpModifyError| Refused { transition, attrs, reason: e.into() };
    let mut rtr = QueuePairAttribute::new();
    rtr.setup_state(QueuePairState::ReadyToReceive);
    qp.modify(&rtr).map_err(refused("INIT->RTR", String::new()))?;
    let mut rts = QueuePairAttribute::new();
    rts.setup_state(QueuePairState::ReadyToSend).setup_sq_psn(psn);
    qp.modify(&rts).map_err(refused("RTR->RTS", format!("sq_psn={psn:#x}")))?;
    qp.set_ud_target(to, peer_qpn, peer_qkey).map_err(|e| {
        let (dgid, sgid_index) = to.grh.map_or(([0; 16], 0), |g| (g.dgid, g.sgid_index));
        let attrs = format!(
            "ibv_create_ah: dlid={}, grh={}, sgid_index={sgid_index}, dgid={}",
            to.dlid,
            to.grh.is_some(),
            std::net::Ipv6Addr::from(dgid)
        );
        Refused { transition: "address handle", attrs, reason: e.into() }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::rdma::path::Grh;

    #[test]
    fn ud_messages_fit_the_ports_mtu() {
        fits_one_packet(1024, 3, "mlx5_0", 1, "flow 0 1->0").unwrap();
        let e = fits_one_packet(2048, 3, "mlx5_0", 1, "flow 0 1->0").unwrap_err().to_string();
        assert_eq!(
            e,
            "flow 0 1->0: [group.rdma] connection = \"UD\": message_size 2048 B is above the active MTU of mlx5_0 port 1 (1024 B); a UD message is one packet: give at most 1024"
        );
    }

    #[test]
    fn qkeys_are_non_zero_and_uncontrolled() {
        for random in [0, 0xff_ffff, u32::MAX] {
            let q = qkey(random);
            assert!(q != 0 && q & 1 << 31 == 0, "{q:#x}");
        }
    }

    fn endpoint() -> RdmaEndpoint {
        RdmaEndpoint {
            lid: 0,
            gid: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 2],
            gid_index: 1,
            qpns: vec![17],
            psns: vec![1],
            mtu: 5,
            rkey: 0,
            qkey: qkey(7),
            len: 4160,
            ..RdmaEndpoint::default()
        }
    }

    #[test]
    fn the_peer_is_addressed_by_gid_on_roce_and_checked() {
        let roce = LocalPort {
            port: 1,
            link_layer: super::super::path::LINK_LAYER_ETHERNET,
            gid_index: 3,
            gid_index_asked: false,
            service_level: 0,
            traffic_class: 104,
        };
        let to = peer_address(&roce, 1, 4096, &endpoint()).unwrap();
        let grh = Grh { dgid: endpoint().gid, sgid_index: 3, hop_limit: 64, traffic_class: 104 };
        assert_eq!(to, AddressPath { dlid: 0, port: 1, service_level: 0, grh: Some(grh) });
        // InfiniBand with a LID and no GID asked: LID addressing, no GRH, the level kept.
        let ib = LocalPort { port: 2, link_layer: 1, gid_index: 0, service_level: 3, traffic_class: 0, ..roce };
        let to = peer_address(&ib, 1, 2048, &RdmaEndpoint { lid: 9, ..endpoint() }).unwrap();
        assert_eq!(to, AddressPath { dlid: 9, port: 2, service_level: 3, grh: None });
        let small_mtu = RdmaEndpoint { mtu: 3, ..endpoint() };
        let e = peer_address(&roce, 1, 2048, &small_mtu).unwrap_err().to_string();
        assert_eq!(e, "UD message_size 2048 B is above the peer port's active MTU (1024 B); give at most 1024");
        let e = peer_address(&roce, 1, 64, &RdmaEndpoint { qkey: 0, ..endpoint() }).unwrap_err();
        assert_eq!(e, UdPeerError::NoQkey);
        assert!(e.to_string().starts_with("peer sent no UD Q_Key"), "{e}");
        let e = peer_address(&roce, 2, 64, &endpoint()).unwrap_err().to_string();
        assert_eq!(e, "peer has 1 QPs, this flow 2");
        let e = peer_address(&roce, 1, 64, &RdmaEndpoint { gid: [0; 16], ..endpoint() }).unwrap_err();
        assert_eq!(e, UdPeerError::Path(PathError::ZeroGidOnRoce));
    }
}
