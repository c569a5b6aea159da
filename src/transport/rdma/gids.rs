//! GID table entries and the auto-choice among them; a port's table as
//! sysfs shows it (Documentation/ABI/stable/sysfs-class-infiniband):
//! `ports/N/gids/I` the GID, `gid_attrs/types/I` "IB/RoCE v1" or "RoCE v2",
//! `gid_attrs/ndevs/I` the network interface the entry belongs to (RoCE
//! only). The verbs table lacks the interface; recorded trees have no verbs.

use std::net::IpAddr;
#[cfg(test)]
use std::net::Ipv6Addr;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// Kind of a GID table entry.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum GidKind {
    #[serde(rename = "IB")]
    Ib,
    #[serde(rename = "RoCE v1")]
    RoceV1,
    #[serde(rename = "RoCE v2")]
    RoceV2,
}

/// One non-empty GID table entry.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct GidInfo {
    pub index: u32,
    /// Printed as an IPv6 address (an IPv4-mapped one for RoCE on IPv4).
    pub gid: String,
    pub kind: GidKind,
    /// The address is IPv4-mapped (`::ffff:a.b.c.d`).
    pub ipv4: bool,
    #[serde(skip)]
    pub raw: [u8; 16],
    /// The network interface of the entry (sysfs `gid_attrs/ndevs`), RoCE only.
    #[serde(skip)]
    pub netdev: Option<String>,
}

pub(crate) fn is_ipv4_mapped(raw: &[u8; 16]) -> bool {
    raw[..10].iter().all(|&b| b == 0) && raw[10] == 0xff && raw[11] == 0xff
}

/// The GID a flow uses when none is asked for. InfiniBand: index 0. RoCE:
/// perftest's choice (`get_best_gid_index` in perftest's
/// src/perftest_communication.c walks the table keeping the best so far: an
/// IPv4-mapped entry beats a non-IPv4 one, else RoCE v2 beats v1, ties keep
/// the lower index), made among the entries of the interface that carries
/// `data_addr` (the hostfile's address of this rank) — the entries of that
/// very address when it is IPv4, so the VLAN's GID when the address is on a
/// VLAN. Both ends apply the same rule, so both use the same GID type.
pub(crate) fn choose_gid(table: &[GidInfo], roce: bool, data_addr: Option<IpAddr>) -> Option<&GidInfo> {
    if !roce {
        return table.iter().find(|g| g.index == 0).or(table.first());
    }
    let wanted = data_addr.map(|a| match a {
        IpAddr::V4(v4) => v4.to_ipv6_mapped().octets(),
        IpAddr::V6(v6) => v6.octets(),
    });
    let exact: Vec<&GidInfo> = table.iter().filter(|g| Some(g.raw) == wanted).collect();
    let carrier = exact.iter().find_map(|g| g.netdev.as_deref());
    let pool: Vec<&GidInfo> = match (data_addr, carrier) {
        (Some(IpAddr::V4(_)), _) if !exact.is_empty() => exact,
        (_, Some(netdev)) => table.iter().filter(|g| g.netdev.as_deref() == Some(netdev)).collect(),
        _ => table.iter().collect(),
    };
    let version = |g: &GidInfo| u8::from(g.kind == GidKind::RoceV2);
    pool.into_iter().reduce(
        |best, rival| {
            if (rival.ipv4 && !best.ipv4) || version(rival) > version(best) {
                rival
            } else {
                best
            }
        },
    )
}

/// The non-empty entries of `device` port `port` under `infiniband`
/// (…/class/infiniband), by index; entries whose type cannot be read are
/// left out, as the verbs table leaves them out. Runs read the table through
/// verbs (and only the interfaces here); tests read recorded trees with it.
#[cfg(test)]
pub(crate) fn table_at(infiniband: &Path, device: &str, port: u8, roce: bool) -> Vec<GidInfo> {
    let dir = infiniband.join(device).join("ports").join(port.to_string());
    let Ok(entries) = std::fs::read_dir(dir.join("gids")) else { return Vec::new() };
    let mut indices: Vec<u32> = entries.flatten().filter_map(|e| e.file_name().to_str()?.parse().ok()).collect();
    indices.sort_unstable();
    indices
        .into_iter()
        .filter_map(|index| {
            let raw = read(&dir.join("gids").join(index.to_string()))?.parse::<Ipv6Addr>().ok()?.octets();
            if raw == [0; 16] {
                return None;
            }
            let kind = match read(&dir.join("gid_attrs/types").join(index.to_string()))?.as_str() {
                "RoCE v2" => GidKind::RoceV2,
                _ if roce => GidKind::RoceV1,
                _ => GidKind::Ib,
            };
            Some(GidInfo {
                index,
                gid: Ipv6Addr::from(raw).to_string(),
                kind,
                ipv4: is_ipv4_mapped(&raw),
                raw,
                netdev: read(&dir.join("gid_attrs/ndevs").join(index.to_string())),
            })
        })
        .collect()
}

/// Fills in each entry's interface from sysfs (a verbs table has none).
pub(crate) fn add_netdevs(infiniband: &Path, device: &str, port: u8, table: &mut [GidInfo]) {
    let ndevs = infiniband.join(device).join("ports").join(port.to_string()).join("gid_attrs/ndevs");
    for g in table {
        g.netdev = read(&ndevs.join(g.index.to_string()));
    }
}

fn read(path: &Path) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_string())
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    const ROCE: bool = true;
    const IB: bool = false;

    fn g(index: u32, kind: GidKind, ip: &str) -> GidInfo {
        let a: Ipv6Addr = ip.parse().unwrap();
        GidInfo { index, gid: ip.into(), kind, ipv4: is_ipv4_mapped(&a.octets()), raw: a.octets(), netdev: None }
    }

    #[test]
    fn roce_walks_the_table_like_perftest() {
        let t = vec![
            g(0, GidKind::RoceV1, "fe80::1"),
            g(1, GidKind::RoceV2, "fe80::1"),
            g(2, GidKind::RoceV1, "::ffff:10.0.0.1"),
            g(3, GidKind::RoceV2, "::ffff:10.0.0.1"),
        ];
        let pick = |t: &[GidInfo]| choose_gid(t, ROCE, None).unwrap().index;
        assert_eq!(pick(&t), 3);
        assert_eq!(pick(&t[..2]), 1);
        // IPv4 first, then the RoCE version: v1 on IPv4 beats v2 on IPv6 ...
        assert_eq!(pick(&t[..3]), 2);
        // ... but the walk keeps the best so far: a v2 IPv6 entry after a v1 IPv4 one wins.
        assert_eq!(pick(&[t[2].clone(), t[1].clone()]), 1);
        assert_eq!(choose_gid(&t, IB, None).unwrap().index, 0); // InfiniBand: index 0
    }

    fn infiniband(host: &str) -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hosts").join(host).join("sys/class/infiniband")
    }

    fn table(host: &str, device: &str, roce: bool) -> Vec<GidInfo> {
        table_at(&infiniband(host), device, 1, roce)
    }

    fn pick(table: &[GidInfo], addr: Option<&str>) -> (u32, GidKind, String, Option<String>) {
        let g = choose_gid(table, ROCE, addr.map(|a| a.parse::<IpAddr>().unwrap())).unwrap();
        (g.index, g.kind, g.gid.clone(), g.netdev.clone())
    }

    #[test]
    fn the_roce_table_reads_types_and_interfaces() {
        let t = table("roce-gids", "mlx5_0", ROCE);
        assert_eq!(t.len(), 12);
        assert_eq!(t.iter().filter(|g| g.kind == GidKind::RoceV2).count(), 6);
        assert_eq!(t.iter().filter(|g| g.ipv4).count(), 8);
        let g5 = t.iter().find(|g| g.index == 5).unwrap();
        assert_eq!(
            (g5.gid.as_str(), g5.kind, g5.netdev.as_deref()),
            ("::ffff:10.0.12.1", GidKind::RoceV2, Some("ens1f0np0.12"))
        );
        let g6 = t.iter().find(|g| g.index == 6).unwrap();
        assert_eq!((g6.kind, g6.ipv4), (GidKind::RoceV1, false));
    }

    #[test]
    fn the_auto_choice_is_roce_v2_ipv4_of_the_data_address_interface() {
        let t = table("roce-gids", "mlx5_0", ROCE);
        let v2 = GidKind::RoceV2;
        // No address known: perftest's walk, the first RoCE v2 IPv4 entry.
        assert_eq!(pick(&t, None), (3, v2, "::ffff:10.0.11.1".into(), Some("ens1f0np0".into())));
        // The address on the VLAN: the VLAN's RoCE v2 entry, not the first one.
        assert_eq!(pick(&t, Some("10.0.12.1")), (5, v2, "::ffff:10.0.12.1".into(), Some("ens1f0np0.12".into())));
        // A secondary address of the untagged interface: its own entry.
        assert_eq!(pick(&t, Some("10.0.14.1")).0, 11);
        // An IPv6 data address: still RoCE v2 + IPv4, of the interface it is on.
        assert_eq!(pick(&t, Some("fd00::11:e42:a1ff:fe6b:1c2e")).0, 3);
        // An address on no RoCE interface (a management network): perftest's walk.
        assert_eq!(pick(&t, Some("192.168.1.7")).0, 3);
    }

    #[test]
    fn both_ends_choose_the_same_gid_type() {
        let mlx5 = table("roce-gids", "mlx5_0", ROCE);
        let rxe = table("rxe", "rxe0", ROCE);
        assert!(rxe.iter().all(|g| g.kind == GidKind::RoceV2 && g.netdev.as_deref() == Some("eth0")), "{rxe:?}");
        for addr in [None, Some("10.0.12.1")] {
            let a = choose_gid(&mlx5, ROCE, addr.map(|a| a.parse().unwrap())).unwrap();
            let b = choose_gid(&rxe, ROCE, Some("10.77.0.1".parse().unwrap())).unwrap();
            assert_eq!((a.kind, a.ipv4), (b.kind, b.ipv4), "{a:?} / {b:?}");
            assert_eq!((b.index, b.gid.as_str()), (1, "::ffff:10.77.0.1"));
        }
    }

    #[test]
    fn infiniband_gids_are_ib_and_the_choice_is_index_0() {
        let t = table("mlx5-ib", "mlx5_0", IB);
        assert_eq!(t.len(), 1);
        assert_eq!((t[0].kind, t[0].netdev.as_deref()), (GidKind::Ib, None));
        assert_eq!(choose_gid(&t, IB, Some("10.0.0.1".parse().unwrap())).unwrap().index, 0);
    }

    #[test]
    fn interfaces_join_a_verbs_table() {
        let mut t = table("roce-gids", "mlx5_0", ROCE);
        t.iter_mut().for_each(|g| g.netdev = None);
        add_netdevs(&infiniband("roce-gids"), "mlx5_0", 1, &mut t);
        assert_eq!(t.iter().filter(|g| g.netdev.as_deref() == Some("ens1f0np0.12")).count(), 2);
        add_netdevs(&infiniband("no-such-host"), "mlx5_0", 1, &mut t);
        assert!(t.iter().all(|g| g.netdev.is_none()));
    }
}
