//! What one side of a flow tells the other (through the coordinator) to connect.

use std::net::SocketAddr;

use serde::{Deserialize, Serialize};

/// Local identity of a flow's QPs and memory, exchanged between ranks.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
pub struct RdmaEndpoint {
    /// Port LID (InfiniBand; 0 on RoCE).
    pub lid: u16,
    /// GID of the chosen index (all zero on InfiniBand without GRH).
    pub gid: [u8; 16],
    pub gid_index: u32,
    /// One QP number per QP of the flow, in QP order.
    pub qpns: Vec<u32>,
    /// Initial packet sequence number of each QP (24 bits).
    pub psns: Vec<u32>,
    /// Active path MTU as the `ibv_mtu` enum value (1 = 256 … 5 = 4096).
    pub mtu: u32,
    pub rkey: u32,
    /// UD: the Q_Key this side's QPs accept (random per flow, so a stray
    /// datagram that does not know it is dropped); 0 for RC.
    #[serde(default)]
    pub qkey: u32,
    /// Start of the registered buffer; QP i owns `[addr + i·len/qps, +len/qps)`.
    pub addr: u64,
    pub len: u64,
    /// `connect = "rdma_cm"`, the passive end (receiver): where it listens
    /// for the sender's QPs (its rank's data address and a port).
    #[serde(default)]
    pub cm_addr: Option<SocketAddr>,
}

impl RdmaEndpoint {
    /// Bytes of the buffer that belong to each QP.
    pub fn slot_len(&self) -> u64 {
        if self.qpns.is_empty() {
            0
        } else {
            self.len / self.qpns.len() as u64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_through_json() {
        let e = RdmaEndpoint {
            lid: 0,
            gid: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 77, 0, 1],
            gid_index: 1,
            qpns: vec![17, 18],
            psns: vec![0x12_3456, 0x65_4321],
            mtu: 5,
            rkey: 0x1234,
            qkey: 0x0123_4567,
            addr: 0x7f00_0000_0000,
            len: 131_072,
            cm_addr: Some("[fd00::2]:20001".parse().unwrap()),
        };
        let s = serde_json::to_string(&e).unwrap();
        assert_eq!(serde_json::from_str::<RdmaEndpoint>(&s).unwrap(), e);
        assert_eq!(e.slot_len(), 65_536);
    }
}
