//! The record of a host, read from recorded trees (tests/fixtures/hosts/):
//! hardware this machine lacks — an InfiniBand HCA with a LID, a RoCE NIC
//! with many GIDs, two NICs on two NUMA nodes, Soft-RoCE — read the way a
//! real host's /proc and /sys are.

use std::path::PathBuf;

use fabricbench::hostfacts::HostFacts;

fn facts(name: &str) -> HostFacts {
    HostFacts::under(&PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hosts").join(name))
}

#[test]
fn an_infiniband_hca_with_its_lid() {
    let f = facts("mlx5-ib");
    assert_eq!(f.kernel.as_deref(), Some("5.14.0-362.8.1.el9_3.x86_64"));
    assert_eq!(f.os.as_deref(), Some("Rocky Linux 9.3 (Blue Onyx)"));
    assert_eq!(f.cpu_model.as_deref(), Some("Intel(R) Xeon(R) Gold 6338 CPU @ 2.00GHz"));
    assert_eq!((f.cores, f.numa_nodes), (Some(64), Some(2)));
    assert_eq!(f.rdma_core, Some(46));
    assert_eq!(f.libibverbs.as_deref(), Some("/usr/lib64/libibverbs.so.1.14.46.0"));
    let [d] = &f.rdma_devices[..] else { panic!("one device: {f:?}") };
    assert_eq!(d.name, "mlx5_0");
    assert_eq!(d.driver.as_deref(), Some("mlx5_core"));
    assert_eq!(d.firmware.as_deref(), Some("20.39.1002"));
    assert_eq!((d.hca_type.as_deref(), d.board_id.as_deref()), (Some("MT4123"), Some("MT_0000000222")));
    assert_eq!((d.vendor_id.as_deref(), d.vendor_part_id.as_deref()), (Some("0x15b3"), Some("0x101b")));
    assert_eq!(d.pci.as_deref(), Some("0000:3b:00.0"));
    assert_eq!(d.netdevs, ["ib0"]);
    let [p] = &d.ports[..] else { panic!("one port: {d:?}") };
    assert_eq!((p.state.as_deref(), p.link_layer.as_deref()), (Some("ACTIVE"), Some("InfiniBand")));
    assert_eq!((p.rate.as_deref(), p.rate_gbps), (Some("200 Gb/sec (4X HDR)"), Some(200.0)));
    assert_eq!((p.lid, p.gids), (Some(0x1a), 1));
}

#[test]
fn a_roce_nic_counts_only_the_gids_in_use() {
    let f = facts("roce-gids");
    let p = &f.rdma_devices[0].ports[0];
    assert_eq!(p.link_layer.as_deref(), Some("Ethernet"));
    assert_eq!(p.lid, None, "RoCE has no LID");
    assert_eq!(p.gids, 12, "12 of the table's 64 entries are set");
    assert_eq!(f.rdma_devices[0].netdevs, ["ens1f0np0"]);
    assert_eq!((f.numa_nodes, f.rdma_core), (Some(8), Some(39)));
}

#[test]
fn two_nics_each_with_their_own_facts() {
    let f = facts("two-nics");
    let names: Vec<&str> = f.rdma_devices.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, ["mlx5_0", "mlx5_1"]);
    let pci: Vec<_> = f.rdma_devices.iter().map(|d| d.pci.clone().unwrap()).collect();
    assert_eq!(pci, ["0000:17:00.0", "0000:ca:00.0"]);
    let states: Vec<_> = f.rdma_devices.iter().map(|d| d.ports[0].state.clone().unwrap()).collect();
    assert_eq!(states, ["ACTIVE", "DOWN"]);
    assert_eq!(f.rdma_devices[1].ports[0].lid, None, "a DOWN port's LID 0 is no LID");
    assert_eq!(f.rdma_devices[0].ports[0].rate_gbps, Some(400.0));
}

#[test]
fn soft_roce_has_no_driver_or_board() {
    let f = facts("rxe");
    assert_eq!((f.cores, f.numa_nodes), (Some(2), Some(1)));
    assert_eq!(f.kernel.as_deref(), Some("6.1.0-57-amd64"));
    let d = &f.rdma_devices[0];
    assert_eq!((d.driver.as_ref(), d.firmware.as_ref(), d.board_id.as_ref(), d.pci.as_ref()), (None, None, None, None));
    assert_eq!(d.netdevs, ["eth0"], "Soft-RoCE names its interface in `parent`");
    assert_eq!(d.ports[0].rate_gbps, Some(2.5));
    assert_eq!(d.ports[0].gids, 2);
}

#[test]
fn a_missing_tree_is_unknown_not_an_error() {
    // No node folder either: a kernel without NUMA.
    let f = facts("no-such-host");
    assert_eq!(f, HostFacts::default());
    assert!(f.to_string().starts_with("unknown · Linux unknown"), "{f}");
}

#[test]
fn every_tree_renders_as_hosts_shows_it() {
    for name in ["mlx5-ib", "roce-gids", "two-nics", "rxe"] {
        insta::assert_snapshot!(format!("host_facts.{name}"), facts(name).to_string());
    }
}
