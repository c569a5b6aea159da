//! The record of a host, read from recorded trees (tests/fixtures/hosts/):
//! hardware this machine lacks — an InfiniBand HCA with a LID, a RoCE NIC
//! with many GIDs, two NICs on two NUMA nodes, Soft-RoCE — read the way a
//! real host's /proc and /sys are; and the transport's and the placement's
//! sysfs readers (rates, counters, NUMA nodes) on the same trees.

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
    // An ssh session without a memlock line in limits.conf: 64 KiB hard.
    assert_eq!(f.locked_memory, Some(fabricbench::hostfacts::LockedMemory::Bytes(65536)));
    assert!(f.to_string().contains("locked memory 64 KiB"), "{f}");
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

/// `fabricbench hosts` warns of what differs between hosts (a node on
/// another kernel or firmware), naming each value's hosts; hosts alike, or
/// a fact one host could not read, say nothing.
#[test]
fn facts_that_differ_between_hosts_are_named_with_their_hosts() {
    let (ib, roce, two) = (facts("mlx5-ib"), facts("roce-gids"), facts("two-nics"));
    let alike = fabricbench::hostfacts::differences(&[("n1", &ib), ("n2", &ib)]);
    assert!(alike.is_empty(), "{alike:?}");
    let mut older = ib.clone();
    older.kernel = Some("5.14.0-284.11.1.el9_2.x86_64".into());
    older.rdma_devices[0].firmware = Some("20.36.1010".into());
    older.cores = None;
    let firmware = format!("{} firmware", ib.rdma_devices[0].hca_type.as_deref().unwrap());
    let differ = fabricbench::hostfacts::differences(&[("n1", &ib), ("n2", &older), ("n3", &ib)]);
    assert_eq!(
        differ,
        [
            "kernel: 5.14.0-362.8.1.el9_3.x86_64 on n1, n3; 5.14.0-284.11.1.el9_2.x86_64 on n2".to_string(),
            format!("{firmware}: {} on n1, n3; 20.36.1010 on n2", ib.rdma_devices[0].firmware.as_deref().unwrap()),
        ],
        "what n2 could not read is not compared"
    );
    // Three recorded hosts of different makes differ in many facts, each named once.
    let many = fabricbench::hostfacts::differences(&[("ib", &ib), ("roce", &roce), ("two", &two)]);
    println!("{}", many.join("\n"));
    let named: Vec<&str> = many.iter().map(|l| l.split(':').next().unwrap()).collect();
    let mut unique = named.clone();
    unique.dedup();
    assert_eq!(named, unique);
}

/// The sysfs folder of a recorded host, and its class/infiniband.
fn sys(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hosts").join(name).join("sys")
}

fn infiniband(name: &str) -> PathBuf {
    fabricbench::sysfs::infiniband(&sys(name))
}

#[test]
fn line_rates_parse_from_every_recorded_port() {
    use fabricbench::transport::rdma::probe::sysfs_rate_at;
    let rate = |host: &str, dev: &str| {
        let rate = sysfs_rate_at(&infiniband(host), dev, 1).expect("a rate file");
        (rate.text, rate.gbps)
    };
    assert_eq!(rate("mlx5-ib", "mlx5_0"), ("HDR 4X = 200 Gb/s".to_string(), Some(200.0)));
    assert_eq!(rate("roce-gids", "mlx5_0"), ("EDR 4X = 100 Gb/s".to_string(), Some(100.0)));
    assert_eq!(rate("two-nics", "mlx5_0"), ("NDR 4X = 400 Gb/s".to_string(), Some(400.0)));
    // The DOWN port reports the slowest speed the link would train to.
    assert_eq!(rate("two-nics", "mlx5_1"), ("SDR 4X = 8 Gb/s".to_string(), Some(8.0)));
    assert_eq!(rate("rxe", "rxe0"), ("SDR 1X = 2 Gb/s".to_string(), Some(2.0)));
    assert_eq!(sysfs_rate_at(&infiniband("mlx5-ib"), "mlx5_0", 2), None, "no port 2");
}

#[test]
fn ib_data_counters_are_4_byte_words_and_hw_counters_are_read() {
    use fabricbench::transport::rdma::counters::{bytes_per_unit, snapshot_at};
    let ib = snapshot_at(&infiniband("mlx5-ib"), "mlx5_0", 1).unwrap();
    assert_eq!(ib.values["counters/port_xmit_data"], 2_500_000_000);
    let bytes = |key: &str| ib.values[key] * bytes_per_unit(key).unwrap_or(1);
    assert_eq!(bytes("counters/port_xmit_data"), 10_000_000_000, "octets/4 on the wire, bytes here");
    assert_eq!(bytes("counters/port_xmit_packets"), 9_765_625, "packets stay packets");
    assert_eq!(bytes_per_unit("hw_counters/rx_write_requests"), None);
    assert_eq!(ib.values["hw_counters/local_ack_timeout_err"], 3);
    assert!(!ib.values.contains_key("hw_counters/lifespan"), "a setting, not a counter");
    let roce = snapshot_at(&infiniband("roce-gids"), "mlx5_0", 1).unwrap();
    assert_eq!((roce.values["hw_counters/np_cnp_sent"], roce.values["hw_counters/rp_cnp_handled"]), (17, 15));
    let rxe = snapshot_at(&infiniband("rxe"), "rxe0", 1).unwrap();
    assert_eq!((rxe.values["hw_counters/sent_pkts"], rxe.values.get("counters/port_xmit_data")), (1_048_576, None));
}

#[test]
fn numa_placement_picks_the_devices_node() {
    use fabricbench::load::placement::resolve_at;
    use fabricbench::scenario::placement::{Numa, Placement};
    use fabricbench::transport::rdma::probe::numa_node_at;
    let node = |dev: &str| numa_node_at(&infiniband("two-nics"), dev).map(|n| n as usize);
    assert_eq!((node("mlx5_0"), node("mlx5_1")), (Some(0), Some(1)));
    assert_eq!(numa_node_at(&infiniband("rxe"), "rxe0"), None, "Soft-RoCE has no bus device");
    let at = |numa, dev| resolve_at(&Placement { cores: None, numa }, node(dev), &sys("two-nics")).unwrap().cores;
    let node0: Vec<usize> = (0..28).chain(56..84).collect();
    let node1: Vec<usize> = (28..56).chain(84..112).collect();
    assert_eq!(at(Numa::Near, "mlx5_0"), node0);
    assert_eq!(at(Numa::Near, "mlx5_1"), node1);
    assert_eq!(at(Numa::Far, "mlx5_1"), node0);
    assert!(at(Numa::Any, "mlx5_1").is_empty());
}

#[test]
fn facts_read_the_tree_fabricbench_sysfs_root_names() {
    let run = |root: &std::path::Path, command: &str| {
        std::process::Command::new(crate::common::bin())
            .args([command, "--json"])
            .env(fabricbench::sysfs::ROOT_ENV, root)
            .output()
            .unwrap()
    };
    let out = run(&sys("two-nics"), "facts");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let facts: HostFacts = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<&str> = facts.rdma_devices.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, ["mlx5_0", "mlx5_1"], "the tree's devices, not this host's");
    assert_eq!((facts.cores, facts.numa_nodes), (Some(112), Some(2)));

    for command in ["facts", "probe"] {
        let out = run(std::path::Path::new("/no/such/tree"), command);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{command}");
        assert!(
            err.contains(
                "FABRICBENCH_SYSFS_ROOT=/no/such/tree: no such folder (it must name a folder laid out like /sys"
            ),
            "{command}: {err}"
        );
    }
}
