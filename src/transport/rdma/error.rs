//! Errors of the RDMA data path. Each one says what failed, on which device /
//! QP / flow, so a run over many hosts can be debugged from its report.

use std::io;

use rdma_mummy_sys::ibv_wc_status as st;

use super::ffi::{QpModifyError, RegisterError};
use crate::plan::InvalidParam;
use crate::transport::memory::MemoryError;

#[derive(Debug, thiserror::Error)]
pub enum RdmaError {
    /// libibverbs could not be loaded or it found no device (ENOSYS / empty list).
    #[error("no RDMA devices / libibverbs not found ({detail})")]
    NoDevices { detail: String },

    #[error("RDMA device {name:?} not found (available: {available})")]
    DeviceNotFound { name: String, available: String },

    #[error("RDMA device {device}: no ACTIVE port{}", port.map(|p| format!(" (port {p} requested)")).unwrap_or_default())]
    NoActivePort { device: String, port: Option<u8> },

    #[error("RDMA device {device} port {port}: {what}")]
    Gid { device: String, port: u8, what: String },

    #[error(transparent)]
    InvalidParam(#[from] InvalidParam),

    /// FABRICBENCH_SYSFS_ROOT names no sysfs tree.
    #[error(transparent)]
    SysfsRoot(#[from] crate::sysfs::RootError),

    /// A verbs call failed while setting up (`what` names the call and its object).
    #[error("{flow}: {what} on device {device}: {source}")]
    Setup {
        flow: String,
        device: String,
        what: String,
        #[source]
        source: io::Error,
    },

    /// GPU memory could not be set up or registered; `reason` says what
    /// would fix it (the driver, the GPU, nvidia_peermem or dma-buf).
    #[error("{flow}: GPU memory for the {side} on device {device}: {reason}")]
    GpuMemory { flow: String, side: &'static str, device: String, reason: Box<GpuMemoryError> },

    /// A QP state transition failed; `attr` names the transition and the attributes set.
    #[error("{flow}: QP {qp} (qpn {qpn:#x}) {transition} failed ({attrs}): {reason}")]
    Connect { flow: String, qp: usize, qpn: u32, transition: &'static str, attrs: String, reason: TransitionFailure },

    /// Connecting through rdma_cm failed; `step` names the call or the event awaited.
    #[error("{flow}: rdma_cm {step}: {reason}")]
    Cm { flow: String, step: String, reason: String },

    /// UD: a message larger than one packet on this port.
    #[error(
        "{flow}: [group.rdma] connection = \"UD\": message_size {size} B is above the active MTU of {device} port {port} ({mtu} B); a UD message is one packet: give at most {mtu}"
    )]
    AboveUdMtu { flow: String, size: u64, device: String, port: u8, mtu: u64 },

    #[error("{flow}: peer endpoint does not match: {reason}")]
    PeerMismatch { flow: String, reason: String },

    /// A posted work request failed to post (queue full, bad WR, QP in error).
    #[error("{flow}: posting {what} on QP {qp} failed: {reason}")]
    Post { flow: String, qp: usize, what: &'static str, reason: String },

    /// A work completion came back with an error status.
    #[error(
        "{flow}: QP {qp}: work completion {status_name} (status {status}, vendor_err {vendor_err:#x}) on {opcode_name}"
    )]
    Completion {
        flow: String,
        qp: usize,
        status: u32,
        status_name: &'static str,
        vendor_err: u32,
        opcode_name: &'static str,
    },

    #[error("{flow}: polling the CQ failed: {source}")]
    Poll {
        flow: String,
        #[source]
        source: io::Error,
    },

    /// No completion for `stall_timeout_ms` while work was outstanding.
    #[error("{flow}: QP {qp}: no progress for {waited_ms} ms while {what}")]
    Stalled { flow: String, qp: usize, waited_ms: u64, what: &'static str },

    /// A call into libibverbs / sideway panicked (e.g. on a value it did not know).
    #[error("{flow}: {what} panicked inside the verbs wrapper: {message}")]
    Panicked { flow: String, what: &'static str, message: String },
}

impl RdmaError {
    /// Whether the text begins with the flow it happened to (`flow 0
    /// 0->1: …`); the device and parameter errors name none.
    pub fn names_its_flow(&self) -> bool {
        use RdmaError::*;
        !matches!(
            self,
            NoDevices { .. }
                | DeviceNotFound { .. }
                | NoActivePort { .. }
                | Gid { .. }
                | InvalidParam(_)
                | SysfsRoot(_)
        )
    }

    /// The error under the flow's `label`: one from `prepare`, which runs
    /// before the flow has a label, names it "flow".
    pub fn labelled(mut self, label: &str) -> RdmaError {
        use RdmaError::*;
        if let Setup { flow, .. }
        | GpuMemory { flow, .. }
        | Connect { flow, .. }
        | Cm { flow, .. }
        | AboveUdMtu { flow, .. }
        | PeerMismatch { flow, .. }
        | Post { flow, .. }
        | Completion { flow, .. }
        | Poll { flow, .. }
        | Stalled { flow, .. }
        | Panicked { flow, .. } = &mut self
        {
            *flow = label.to_string();
        }
        self
    }
}

/// perftest-style name of a work-completion status (ibv_wc_status_str without the prose).
pub fn wc_status_name(status: u32) -> &'static str {
    match status {
        st::IBV_WC_SUCCESS => "SUCCESS",
        st::IBV_WC_LOC_LEN_ERR => "LOC_LEN_ERR",
        st::IBV_WC_LOC_QP_OP_ERR => "LOC_QP_OP_ERR",
        st::IBV_WC_LOC_EEC_OP_ERR => "LOC_EEC_OP_ERR",
        st::IBV_WC_LOC_PROT_ERR => "LOC_PROT_ERR",
        st::IBV_WC_WR_FLUSH_ERR => "WR_FLUSH_ERR",
        st::IBV_WC_MW_BIND_ERR => "MW_BIND_ERR",
        st::IBV_WC_BAD_RESP_ERR => "BAD_RESP_ERR",
        st::IBV_WC_LOC_ACCESS_ERR => "LOC_ACCESS_ERR",
        st::IBV_WC_REM_INV_REQ_ERR => "REM_INV_REQ_ERR",
        st::IBV_WC_REM_ACCESS_ERR => "REM_ACCESS_ERR",
        st::IBV_WC_REM_OP_ERR => "REM_OP_ERR",
        st::IBV_WC_RETRY_EXC_ERR => "RETRY_EXC_ERR",
        st::IBV_WC_RNR_RETRY_EXC_ERR => "RNR_RETRY_EXC_ERR",
        st::IBV_WC_LOC_RDD_VIOL_ERR => "LOC_RDD_VIOL_ERR",
        st::IBV_WC_REM_INV_RD_REQ_ERR => "REM_INV_RD_REQ_ERR",
        st::IBV_WC_REM_ABORT_ERR => "REM_ABORT_ERR",
        st::IBV_WC_INV_EECN_ERR => "INV_EECN_ERR",
        st::IBV_WC_INV_EEC_STATE_ERR => "INV_EEC_STATE_ERR",
        st::IBV_WC_FATAL_ERR => "FATAL_ERR",
        st::IBV_WC_RESP_TIMEOUT_ERR => "RESP_TIMEOUT_ERR",
        st::IBV_WC_GENERAL_ERR => "GENERAL_ERR",
        st::IBV_WC_TM_ERR => "TM_ERR",
        st::IBV_WC_TM_RNDV_INCOMPLETE => "TM_RNDV_INCOMPLETE",
        _ => "UNKNOWN_STATUS",
    }
}

/// Name of a work-completion opcode (only meaningful on successful completions).
pub fn wc_opcode_name(opcode: u32) -> &'static str {
    use rdma_mummy_sys::ibv_wc_opcode as op;
    match opcode {
        op::IBV_WC_SEND => "SEND",
        op::IBV_WC_RDMA_WRITE => "RDMA_WRITE",
        op::IBV_WC_RDMA_READ => "RDMA_READ",
        op::IBV_WC_COMP_SWAP => "COMP_SWAP",
        op::IBV_WC_FETCH_ADD => "FETCH_ADD",
        op::IBV_WC_RECV => "RECV",
        op::IBV_WC_RECV_RDMA_WITH_IMM => "RECV_RDMA_WITH_IMM",
        _ => "OTHER",
    }
}

/// Text of a caught panic payload.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_string()
    }
}

/// Why a flow end's GPU memory could not be had; each says what would fix it.
#[derive(Debug, thiserror::Error)]
pub enum GpuMemoryError {
    /// The CUDA driver or the GPU refused (no driver, no such GPU or bus id,
    /// a call failed).
    #[error(transparent)]
    Memory(#[from] MemoryError),
    #[error(transparent)]
    Register(#[from] RegisterError),
}

/// Why a QP state transition failed: the modify itself, or the verbs call
/// made with it (UD's init with its Q_Key, the peer's address handle).
#[derive(Debug, thiserror::Error)]
pub enum TransitionFailure {
    #[error(transparent)]
    Modify(#[from] QpModifyError),
    #[error(transparent)]
    Verbs(#[from] io::Error),
}

/// A transition one QP refused, before the flow and the QP that name it
/// are added (`at`).
#[derive(Debug)]
pub(crate) struct Refused {
    pub transition: &'static str,
    /// The attributes set, as `name=value` pairs.
    pub attrs: String,
    pub reason: TransitionFailure,
}

impl Refused {
    pub(crate) fn at(self, flow: String, qp: usize, qpn: u32) -> RdmaError {
        let Refused { transition, attrs, reason } = self;
        RdmaError::Connect { flow, qp, qpn, transition, attrs, reason }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_names_never_panic() {
        assert_eq!(wc_status_name(st::IBV_WC_RETRY_EXC_ERR), "RETRY_EXC_ERR");
        assert_eq!(wc_status_name(9999), "UNKNOWN_STATUS");
        assert_eq!(wc_opcode_name(4242), "OTHER");
    }

    #[test]
    fn a_setup_error_takes_the_flows_label() {
        let e = RdmaError::Setup {
            flow: "flow".into(),
            device: "rxe0".into(),
            what: "registering its buffers".into(),
            source: io::Error::other("ibv_reg_mr(1048576 bytes): Cannot allocate memory (os error 12)"),
        };
        let e = e.labelled("flow 2 1->0 rail 1");
        assert!(e.names_its_flow());
        let s = e.to_string();
        assert_eq!(
            s,
            "flow 2 1->0 rail 1: registering its buffers on device rxe0: ibv_reg_mr(1048576 bytes): Cannot allocate memory (os error 12)"
        );
        let kept = RdmaError::NoDevices { detail: "empty list".into() }.labelled("flow 0 0->1");
        assert!(!kept.names_its_flow());
        assert_eq!(kept.to_string(), "no RDMA devices / libibverbs not found (empty list)");
    }

    #[test]
    fn completion_error_names_status_and_qp() {
        let e = RdmaError::Completion {
            flow: "flow 3->0".into(),
            qp: 2,
            status: st::IBV_WC_RETRY_EXC_ERR,
            status_name: wc_status_name(st::IBV_WC_RETRY_EXC_ERR),
            vendor_err: 0,
            opcode_name: "RDMA_WRITE",
        };
        let s = e.to_string();
        assert!(s.contains("RETRY_EXC_ERR") && s.contains("QP 2") && s.contains("flow 3->0"), "{s}");
    }
}
