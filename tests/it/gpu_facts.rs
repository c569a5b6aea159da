//! GPUs and their PCIe affinity to the RDMA NICs, read from recorded trees
//! built by tests/fixtures/hosts/build-gpu-trees.sh: a DGX-like host (two
//! sockets, two PCIe switches each, two GPUs and one NIC per switch, a
//! second NIC behind a cascaded switch) and a host whose only GPU is across
//! the socket from its NIC.

use std::path::PathBuf;

use fabricbench::hostfacts::{GpuFacts, HostFacts, PciLink};

fn facts(name: &str) -> HostFacts {
    HostFacts::under(&PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hosts").join(name))
}

fn gpus(name: &str) -> GpuFacts {
    *facts(name).gpus.unwrap_or_else(|| panic!("{name} has GPUs"))
}

#[test]
fn the_dgx_like_host_lists_its_gpus_by_bus_id() {
    let g = gpus("gpu-dgx");
    let bus: Vec<&str> = g.gpus.iter().map(|d| d.bus_id.as_str()).collect();
    assert_eq!(
        bus,
        [
            "0000:03:00.0",
            "0000:04:00.0",
            "0000:12:00.0",
            "0000:13:00.0",
            "0000:83:00.0",
            "0000:84:00.0",
            "0000:a3:00.0",
            "0000:a4:00.0"
        ]
    );
    assert!(g.gpus.iter().enumerate().all(|(i, d)| d.index == i && d.model == "NVIDIA H100 80GB HBM3"), "{g:?}");
    let numa: Vec<Option<u32>> = g.gpus.iter().map(|d| d.numa_node).collect();
    assert_eq!(numa, [Some(0), Some(0), Some(0), Some(0), Some(1), Some(1), Some(1), Some(1)]);
    assert_eq!(
        (g.driver.as_deref(), g.peer_memory.as_deref(), g.dma_buf),
        (Some("550.54.15"), Some("nvidia_peermem"), true)
    );
}

/// Every class of `nvidia-smi topo -m` appears, each where the tree puts it.
#[test]
fn every_nic_gpu_pair_has_its_topology_class() {
    use PciLink::*;
    let g = gpus("gpu-dgx");
    let rows: Vec<(&str, &[PciLink])> = g.nics.iter().map(|n| (n.nic.as_str(), &n.links[..])).collect();
    let expected: [(&str, [PciLink; 8]); 5] = [
        // Switch A's NIC: its switch's GPUs, the other switch of socket 0 through the root complex.
        ("mlx5_0", [Pix, Pix, Phb, Phb, Sys, Sys, Sys, Sys]),
        // Behind a second switch below switch A.
        ("mlx5_1", [Pxb, Pxb, Phb, Phb, Sys, Sys, Sys, Sys]),
        ("mlx5_2", [Phb, Phb, Pix, Pix, Sys, Sys, Sys, Sys]),
        // Socket 1 has a host bridge per switch.
        ("mlx5_3", [Sys, Sys, Sys, Sys, Pix, Pix, Node, Node]),
        ("mlx5_4", [Sys, Sys, Sys, Sys, Node, Node, Pix, Pix]),
    ];
    assert_eq!(rows.len(), expected.len(), "{rows:?}");
    for ((nic, links), (want_nic, want)) in rows.iter().zip(&expected) {
        assert_eq!((*nic, *links), (*want_nic, &want[..]));
    }
    // `gpu = "auto"`: each NIC's nearest GPU, the lowest index among equals.
    let auto: Vec<Option<usize>> = g.nics.iter().map(|n| n.nearest_gpu()).collect();
    assert_eq!(auto, [Some(0), Some(0), Some(2), Some(4), Some(6)]);
}

#[test]
fn a_gpu_across_the_socket_is_sys_and_still_paired() {
    let f = facts("gpu-across");
    let g = *f.gpus.clone().expect("one GPU");
    let [gpu] = &g.gpus[..] else { panic!("one GPU: {g:?}") };
    assert_eq!((gpu.bus_id.as_str(), gpu.numa_node), ("0000:81:00.0", Some(1)));
    assert_eq!(gpu.model, "NVIDIA [10de:2330]", "no /proc/driver/nvidia: the PCI ids");
    let [nic] = &g.nics[..] else { panic!("one NIC: {g:?}") };
    assert_eq!((nic.nic.as_str(), &nic.links[..], nic.nearest_gpu()), ("mlx5_0", &[PciLink::Sys][..], Some(0)));
    assert_eq!(g.peer_memory, None, "no peer-memory module loaded");
    assert!(!g.dma_buf, "kernel {:?}, driver {:?}: both too old", f.kernel, g.driver);
}

#[test]
fn hosts_without_gpus_have_none() {
    for name in ["mlx5-ib", "roce-gids", "two-nics", "rxe", "no-such-host"] {
        assert_eq!(facts(name).gpus, None, "{name}");
    }
}

/// The facts cross the wire (postcard) and run.json (JSON, where records
/// made before GPUs were read have no `gpus`).
#[test]
fn gpu_facts_cross_the_wire_and_old_records_still_read() {
    let f = facts("gpu-dgx");
    let bytes = postcard::to_stdvec(&f).unwrap();
    assert_eq!(postcard::from_bytes::<HostFacts>(&bytes).unwrap(), f);
    let json = serde_json::to_value(&f).unwrap();
    assert_eq!(json["gpus"]["nics"][1]["links"][0], "PXB");
    assert_eq!(serde_json::from_value::<HostFacts>(json).unwrap(), f);
    let mut old = serde_json::to_value(facts("two-nics")).unwrap();
    old.as_object_mut().unwrap().remove("gpus");
    assert_eq!(serde_json::from_value::<HostFacts>(old).unwrap(), facts("two-nics"));
}

#[test]
fn gpu_trees_render_as_facts_and_hosts_show_them() {
    for name in ["gpu-dgx", "gpu-across"] {
        insta::assert_snapshot!(format!("gpu_facts.{name}"), facts(name).to_string());
    }
}

#[test]
fn facts_shows_the_matrix_of_the_tree_fabricbench_sysfs_root_names() {
    let tree = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hosts/gpu-dgx/sys");
    let out = std::process::Command::new(crate::common::bin())
        .arg("facts")
        .env(fabricbench::sysfs::ROOT_ENV, &tree)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("GPUs: 8 · NVIDIA driver 550.54.15 · peer memory: nvidia_peermem"), "{text}");
    assert!(text.contains("  mlx5_1 PXB   PXB   PHB   PHB   SYS   SYS   SYS   SYS   GPU0\n"), "{text}");
}

/// `fabricbench hosts` warns of hosts on different NVIDIA drivers.
#[test]
fn a_different_nvidia_driver_is_named_among_the_differences() {
    let (dgx, across) = (facts("gpu-dgx"), facts("gpu-across"));
    let differ = fabricbench::hostfacts::differences(&[("a", &dgx), ("b", &across), ("c", &dgx)]);
    assert!(differ.contains(&"NVIDIA driver: 550.54.15 on a, c; 470.223.02 on b".to_string()), "{differ:?}");
    let alike = fabricbench::hostfacts::differences(&[("a", &dgx), ("c", &dgx)]);
    assert!(alike.is_empty(), "{alike:?}");
}
