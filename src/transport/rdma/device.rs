//! Opening a device: which device, which port, which GID (like perftest), and
//! the provider quirks that change how we drive it.

use std::net::{IpAddr, Ipv6Addr};
use std::panic::catch_unwind;
use std::sync::{Arc, Mutex, OnceLock, Weak};

use sideway::ibverbs::device::{DeviceInfo, DeviceList};
use sideway::ibverbs::device_context::DeviceContext;

use super::error::{panic_message, RdmaError};
use super::ffi;
use super::gids::{self, choose_gid, is_ipv4_mapped, GidInfo, GidKind};
use super::path::LINK_LAYER_ETHERNET;

/// `ibv_port_state::IBV_PORT_ACTIVE`.
pub(crate) const PORT_ACTIVE: u32 = 4;

/// The GID table of a port, skipping empty entries; never panics.
pub(crate) fn gid_table(ctx: &DeviceContext, port: u8, table_len: i32, link_layer: u8) -> Vec<GidInfo> {
    let mut out = Vec::new();
    for index in 0..table_len.max(0) as u32 {
        let Ok(gid) = ctx.query_gid(port, index) else { continue };
        if gid.is_zero() {
            continue;
        }
        let kind = match ctx.query_gid_type(port, index) {
            Ok(1) => GidKind::RoceV2,
            Ok(_) if link_layer == LINK_LAYER_ETHERNET => GidKind::RoceV1,
            Ok(_) => GidKind::Ib,
            Err(_) => continue,
        };
        out.push(GidInfo {
            index,
            gid: Ipv6Addr::from(gid.raw).to_string(),
            kind,
            ipv4: is_ipv4_mapped(&gid.raw),
            raw: gid.raw,
            netdev: None,
        });
    }
    out
}

/// This worker's data address (its hostfile address), set once at start.
static DATA_ADDRESS: OnceLock<IpAddr> = OnceLock::new();

/// Tells the GID auto-choice which address this worker's traffic carries
/// (one worker is one rank on one address; a second call is ignored).
pub fn set_data_address(addr: IpAddr) {
    let _ = DATA_ADDRESS.set(addr);
}

/// A device opened for one flow: context (shared with the process's other
/// flows on the device), chosen port and GID, quirks.
pub(crate) struct OpenDevice {
    pub ctx: Arc<DeviceContext>,
    pub name: String,
    pub port: u8,
    pub lid: u16,
    pub link_layer: u8,
    /// `ibv_mtu` enum value of the port's active MTU.
    pub active_mtu: u32,
    pub gid_index: u32,
    pub gid: [u8; 16],
    /// Largest max_rd_atomic / max_dest_rd_atomic the device allows.
    pub max_rd_atomic: u8,
}

/// Lists devices, turning "libibverbs absent" (ENOSYS) and "no device" into
/// one clear error.
pub(crate) fn device_list() -> Result<DeviceList, RdmaError> {
    let list = catch_unwind(DeviceList::new)
        .map_err(|p| RdmaError::NoDevices { detail: format!("ibv_get_device_list panicked: {}", panic_message(&*p)) })?
        .map_err(|e| {
            let cause = std::error::Error::source(&e).map(|s| s.to_string()).unwrap_or_else(|| e.to_string());
            RdmaError::NoDevices { detail: format!("ibv_get_device_list: {cause}") }
        })?;
    if list.is_empty() {
        return Err(RdmaError::NoDevices { detail: "libibverbs found no device".into() });
    }
    Ok(list)
}

/// rdma-core's version, from the loaded libibverbs.so.1.<abi>.<rdma-core>.0
/// (libibverbs is dlopen()ed by rdma-mummy-sys, so this works only after the
/// first verbs call).
pub(crate) fn rdma_core_version() -> Option<u32> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    maps.lines().find_map(|l| libibverbs_release(l.rsplit('/').next()?))
}

/// The rdma-core release in a libibverbs file name: libibverbs.so.1.14.44.0
/// (ABI 1.14) is rdma-core 44.
pub fn libibverbs_release(file_name: &str) -> Option<u32> {
    file_name.strip_prefix("libibverbs.so.1.")?.split('.').nth(1)?.parse().ok()
}

fn setup_err(device: &str, what: impl Into<String>, e: impl std::fmt::Display) -> RdmaError {
    RdmaError::Setup {
        flow: String::new(),
        device: device.to_string(),
        what: what.into(),
        source: std::io::Error::other(e.to_string()),
    }
}

/// Opens `name` (or the first device with an ACTIVE port), picks the port
/// (`port` or the first ACTIVE one) and the GID (`gid_index` or perftest's rule).
pub(crate) fn open(name: Option<&str>, port: Option<u8>, gid_index: Option<u32>) -> Result<OpenDevice, RdmaError> {
    let list = device_list()?;
    let names: Vec<String> = list.iter().map(|d| d.name()).collect();
    let candidates: Vec<usize> = match name {
        Some(n) => match names.iter().position(|x| x == n) {
            Some(i) => vec![i],
            None => return Err(RdmaError::DeviceNotFound { name: n.to_string(), available: names.join(", ") }),
        },
        None => (0..names.len()).collect(),
    };
    let mut last_err = None;
    for i in candidates {
        let dev = list.get(i).expect("index within list");
        let dev_name = names[i].clone();
        let ctx = match shared_context(&dev_name, || dev.open()) {
            Ok(c) => c,
            Err(e) => {
                last_err = Some(setup_err(&dev_name, "ibv_open_device", e));
                continue;
            }
        };
        match open_port(&ctx, &dev_name, port, gid_index) {
            Ok(mut d) => {
                d.ctx = ctx;
                return Ok(d);
            }
            Err(e) => last_err = Some(e),
        }
    }
    Err(last_err.unwrap_or(RdmaError::NoDevices { detail: "no usable device".into() }))
}

/// The devices this process has open, by name: every flow on a device
/// uses one context, so that their QPs can share completion queues
/// (`shared_cq`). A context closes with the last flow that holds it.
static CONTEXTS: Mutex<Vec<(String, Weak<DeviceContext>)>> = Mutex::new(Vec::new());

/// `name`'s open context, or the one `open` opens.
fn shared_context<E>(
    name: &str,
    open: impl FnOnce() -> Result<Arc<DeviceContext>, E>,
) -> Result<Arc<DeviceContext>, E> {
    let mut contexts = CONTEXTS.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    contexts.retain(|(_, ctx)| ctx.strong_count() > 0);
    if let Some(ctx) = contexts.iter().find(|(n, _)| n == name).and_then(|(_, ctx)| ctx.upgrade()) {
        return Ok(ctx);
    }
    let ctx = open()?;
    contexts.push((name.to_string(), Arc::downgrade(&ctx)));
    Ok(ctx)
}

fn open_port(
    ctx: &Arc<DeviceContext>,
    dev_name: &str,
    want_port: Option<u8>,
    gid_index: Option<u32>,
) -> Result<OpenDevice, RdmaError> {
    let attr = ctx.query_device().map_err(|e| setup_err(dev_name, "ibv_query_device_ex", e))?;
    let raw = &attr.attr.orig_attr;
    let ports: Vec<u8> = match want_port {
        Some(p) => vec![p],
        None => (1..=raw.phys_port_cnt).collect(),
    };
    let (port, pattr) = ports
        .into_iter()
        .filter_map(|p| ffi::query_port(ctx, p).ok().map(|a| (p, a)))
        .find(|(_, a)| a.state == PORT_ACTIVE)
        .ok_or(RdmaError::NoActivePort { device: dev_name.to_string(), port: want_port })?;
    let mut table = gid_table(ctx, port, pattr.gid_tbl_len, pattr.link_layer);
    gids::add_netdevs(&crate::sysfs::infiniband_or_default(), dev_name, port, &mut table);
    let gid = match gid_index {
        Some(ix) => match table.iter().find(|g| g.index == ix) {
            Some(g) => g.clone(),
            None => {
                return Err(RdmaError::Gid {
                    device: dev_name.into(),
                    port,
                    what: format!(
                        "gid_index {ix} is empty or invalid (valid: {:?})",
                        table.iter().map(|g| g.index).collect::<Vec<_>>()
                    ),
                })
            }
        },
        None => match choose_gid(&table, pattr.link_layer == LINK_LAYER_ETHERNET, DATA_ADDRESS.get().copied()) {
            Some(g) => g.clone(),
            None if pattr.link_layer != LINK_LAYER_ETHERNET => {
                GidInfo { index: 0, gid: "::".into(), kind: GidKind::Ib, ipv4: false, raw: [0; 16], netdev: None }
            }
            None => {
                return Err(RdmaError::Gid {
                    device: dev_name.into(),
                    port,
                    what: "RoCE port has no GID (no IP address on its netdev?)".into(),
                })
            }
        },
    };
    let max_rd = raw.max_qp_rd_atom.min(raw.max_qp_init_rd_atom).clamp(1, 16) as u8;
    Ok(OpenDevice {
        ctx: Arc::clone(ctx),
        name: dev_name.to_string(),
        port,
        lid: pattr.lid,
        link_layer: pattr.link_layer,
        active_mtu: pattr.active_mtu,
        gid_index: gid.index,
        gid: gid.raw,
        max_rd_atomic: max_rd,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_devices_is_a_clear_error_on_hosts_without_rdma() {
        match device_list() {
            Ok(l) => assert!(!l.is_empty()),
            Err(e) => assert!(e.to_string().contains("no RDMA devices"), "{e}"),
        }
    }
}
