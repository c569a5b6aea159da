//! UD addressing, which sideway's safe layer lacks: the RESET → INIT
//! transition with a Q_Key, and an address handle to the peer's port that
//! every UD send names (with the peer QP's number and Q_Key).

use std::io;
use std::ptr::NonNull;

use crate::transport::rdma::path::{AddressPath, Grh};
use rdma_mummy_sys::{
    ibv_ah, ibv_ah_attr, ibv_create_ah, ibv_destroy_ah, ibv_gid, ibv_global_route, ibv_modify_qp, ibv_qp, ibv_qp_attr,
    ibv_qp_attr_mask, ibv_qp_state,
};

/// An address handle, destroyed when dropped.
pub(crate) struct Ah(NonNull<ibv_ah>);

// SAFETY: an ibv_ah is an immutable handle once created; libibverbs allows
// it to be named by sends on any thread and destroyed from any thread.
unsafe impl Send for Ah {}
// SAFETY: as above; `&Ah` only hands out the pointer for ibv_wr_set_ud_addr.
unsafe impl Sync for Ah {}

impl Ah {
    /// Creates a handle to `to` on the protection domain of `qp`.
    pub(crate) fn new(qp: NonNull<ibv_qp>, to: &AddressPath) -> io::Result<Ah> {
        let grh = to.grh.unwrap_or(Grh { dgid: [0; 16], sgid_index: 0, hop_limit: 0, traffic_class: 0 });
        let mut attr = ibv_ah_attr {
            grh: ibv_global_route {
                dgid: ibv_gid { raw: grh.dgid },
                flow_label: 0,
                sgid_index: grh.sgid_index,
                hop_limit: grh.hop_limit,
                traffic_class: grh.traffic_class,
            },
            dlid: to.dlid,
            sl: to.service_level,
            src_path_bits: 0,
            static_rate: 0,
            is_global: u8::from(to.grh.is_some()),
            port_num: to.port,
        };
        // SAFETY: `qp` is a live QP (the caller owns it), so its `pd` is a
        // live PD; `attr` is fully initialised and only read by the call.
        let ah = unsafe { ibv_create_ah((*qp.as_ptr()).pd, &mut attr) };
        NonNull::new(ah).map(Ah).ok_or_else(io::Error::last_os_error)
    }

    pub(crate) fn as_ptr(&self) -> *mut ibv_ah {
        self.0.as_ptr()
    }
}

impl Drop for Ah {
    fn drop(&mut self) {
        // SAFETY: the handle was created by ibv_create_ah and is destroyed
        // once, here; the QPs that named it are destroyed first (field order
        // in `Qp`), so no send in flight still refers to it.
        unsafe { ibv_destroy_ah(self.0.as_ptr()) };
    }
}

/// RESET → INIT for a UD QP: partition key 0, `port`, and the Q_Key its
/// receives accept.
pub(crate) fn init(qp: NonNull<ibv_qp>, port: u8, qkey: u32) -> io::Result<()> {
    // SAFETY: ibv_qp_attr is plain data for which all-zero is valid.
    let mut attr: ibv_qp_attr = unsafe { std::mem::zeroed() };
    attr.qp_state = ibv_qp_state::IBV_QPS_INIT;
    attr.pkey_index = 0;
    attr.port_num = port;
    attr.qkey = qkey;
    let mask = ibv_qp_attr_mask::IBV_QP_STATE
        | ibv_qp_attr_mask::IBV_QP_PKEY_INDEX
        | ibv_qp_attr_mask::IBV_QP_PORT
        | ibv_qp_attr_mask::IBV_QP_QKEY;
    // SAFETY: `qp` is live (the caller owns it) and `attr` is initialised for
    // every field the mask names; the call only reads it.
    let ret = unsafe { ibv_modify_qp(qp.as_ptr(), &mut attr, mask.0 as i32) };
    if ret == 0 {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(ret))
    }
}
