//! `ibv_query_port` into a zeroed struct: sideway's version reads
//! uninitialised fields that an older libibverbs does not fill, and its
//! accessors panic on values they do not know.

use std::io;

use rdma_mummy_sys::ibv_port_attr;
use sideway::ibverbs::device_context::DeviceContext;

/// `ibv_query_port` into a zeroed struct; the raw fields, no enum conversions.
pub(crate) fn query_port(ctx: &DeviceContext, port: u8) -> io::Result<ibv_port_attr> {
    // SAFETY: ibv_port_attr is plain data; all-zero is a valid value.
    let mut attr: ibv_port_attr = unsafe { std::mem::zeroed() };
    // SAFETY: the context is live (borrowed); `attr` is a valid out-pointer of
    // the size the call is told.
    let ret = unsafe { rdma_mummy_sys::ibv_query_port(ctx.context().as_ptr(), port, &mut attr) };
    if ret == 0 {
        Ok(attr)
    } else {
        Err(io::Error::from_raw_os_error(ret))
    }
}
