//! An RDMA write flow whose buffers are GPU memory, through the real CLI on
//! real verbs (Soft-RoCE in the project's VM: `scripts/test-rdma`), the
//! CUDA driver being the test double (tests/doubles/libcuda-double.c) named
//! by FABRICBENCH_LIBCUDA. Skipped without an RDMA device, unless
//! FABRICBENCH_REQUIRE_RDMA=1.
//!
//! What it proves: `memory`, `gpu` and `gpu_registration` reach each rank's
//! flow end; the buffer is allocated through the CUDA provider (the double's
//! cuMemAlloc / cuMemAllocManaged), registered with the NIC, moved by the
//! NIC, and freed through the provider; under `auto`, dma-buf is tried first
//! and its failure (the double exports none) leads to peer memory; what
//! each end used, and why, is in run.json; the GPU preflight decides the
//! registration before any end as setup then does it. The VM loads no
//! nvidia_peermem, so each run sees this host's /sys through a test-double
//! tree that adds one (`sysfs_with_peer_memory`).
//! What it cannot prove: the double's "device" memory is host memory, so
//! `ibv_reg_mr` on its address succeeds as it would for any host buffer.
//! Registering real device memory needs nvidia_peermem (or dma-buf from a
//! real driver); whether a NIC reaches a GPU needs a host with both.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::common::{text, Bench};
use crate::gate_rdma;
use crate::gpu_memory::double;
use crate::rdma_run::has_rdma;

const SCENARIO: &str = r#"
[run]
name = "gpu-write"
duration = "2s"
warmup = "500ms"
interval = "500ms"

[[group]]
name = "gpu"
pattern = "pairwise"
transport = "rdma"
flows = [[0, 1]]
message_size = "64K"
memory = { sender = "cuda", receiver = "cuda-managed" }

[group.rdma]
gpu_registration = "auto"
"#;

/// A TEST DOUBLE of sysfs under `dir`: every entry of this host's /sys
/// linked as it is (the RDMA devices, NUMA nodes, counters stay real),
/// except `module/`, which links every loaded module and adds a stand-in
/// `nvidia_peermem` folder (no such module is loaded; the CUDA double's
/// "device" memory is host memory, which registers without one).
fn sysfs_with_peer_memory(dir: &Path) -> PathBuf {
    let sys = dir.join("sys-double");
    std::fs::create_dir_all(sys.join("module/nvidia_peermem")).unwrap();
    for entry in std::fs::read_dir("/sys").unwrap().chain(std::fs::read_dir("/sys/module").unwrap()) {
        let path = entry.unwrap().path();
        let under = path.strip_prefix("/sys").unwrap();
        if under != Path::new("module") {
            std::os::unix::fs::symlink(&path, sys.join(under)).unwrap();
        }
    }
    sys
}

/// The two doubles every run here goes through: the CUDA driver's and the
/// sysfs tree with peer memory.
struct Doubles {
    library: PathBuf,
    sys: PathBuf,
}

impl Doubles {
    fn new(bench: &Bench) -> Doubles {
        Doubles { library: double("rdma", &[]), sys: sysfs_with_peer_memory(bench.dir.path()) }
    }

    /// `bench`'s command for `args` through both doubles (every local rank
    /// inherits the coordinator's environment).
    fn command(&self, bench: &Bench, args: &[&str]) -> Command {
        let mut command = bench.command(args);
        command.env("FABRICBENCH_LIBCUDA", &self.library).env(fabricbench::sysfs::ROOT_ENV, &self.sys);
        command
    }
}

/// `scenario` on two local ranks through the CUDA double and the sysfs
/// double; run.json's first flow.
fn gpu_run(scenario: &str) -> serde_json::Value {
    let bench = Bench::new();
    let doubles = Doubles::new(&bench);
    let scenario = bench.write("gpu.toml", scenario);
    let hostfile = bench.write("hosts", "127.0.0.1\n127.0.0.2\n");
    let (scenario, hostfile) = (scenario.to_str().unwrap(), hostfile.to_str().unwrap());
    let args = ["run", scenario, "-H", hostfile, "--export-json", "-", "--no-save", "--quiet"];
    let out = doubles.command(&bench, &args).output().expect("run fabricbench");
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(bench.leftovers(Duration::from_secs(2)).is_empty(), "processes left");
    let run: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stdout is one JSON document");
    run["phases"][0]["flows"][0].clone()
}

#[test]
fn a_write_flow_in_gpu_memory_registers_through_peer_memory_when_dma_buf_fails() {
    if !has_rdma() {
        return;
    }
    let flow = &gpu_run(SCENARIO);
    assert!(flow["tx_bytes"].as_u64().unwrap() > 0 && flow["gbps"].as_f64().unwrap() > 0.0, "{flow}");
    let gpu = &flow["gpu_memory"];
    let (sender, receiver) = (&gpu["sender"][0], &gpu["receiver"][0]);
    assert_eq!((&sender["memory"], &receiver["memory"]), (&"cuda".into(), &"cuda-managed".into()), "{gpu}");
    for end in [sender, receiver] {
        assert_eq!(end["registration"], "peermem", "{end}");
        // dma-buf was tried first and named why it failed.
        let why = end["why"].as_str().unwrap();
        assert!(why.starts_with("no dma-buf (") && why.contains("cuMemGetHandleForAddressRange"), "{why}");
        // The VM has no NVIDIA GPU in sysfs: auto falls back to GPU 0 and says so.
        assert_eq!(end["gpu"], 0, "{end}");
        assert_eq!(end["chosen"], "auto: no NIC–GPU affinity known on this host, so GPU 0", "{end}");
        assert!(end["provider"].as_str().unwrap().starts_with("CUDA GPU 0 ("), "{end}");
    }
}

/// `gpu_registration = "peermem"` where peer memory is loaded: the
/// preflight lets it through and setup registers that way without trying
/// dma-buf, and says it was asked for.
#[test]
fn forced_peer_memory_passes_the_preflight_and_is_what_setup_registers() {
    if !has_rdma() {
        return;
    }
    let flow = gpu_run(&SCENARIO.replace("gpu_registration = \"auto\"", "gpu_registration = \"peermem\""));
    assert!(flow["tx_bytes"].as_u64().unwrap() > 0, "{flow}");
    for end in [&flow["gpu_memory"]["sender"][0], &flow["gpu_memory"]["receiver"][0]] {
        assert_eq!(
            (&end["registration"], &end["why"]),
            (&"peermem".into(), &"asked for (gpu_registration = \"peermem\")".into()),
            "{end}"
        );
    }
}

/// The node gate of a run whose RDMA group sends from GPU memory loops
/// back GPU memory to GPU memory on one device (as `ib_write_bw
/// --use_cuda` against itself): the group's host end takes the GPU end's
/// memory, and the gate says device, GPU and memory per host. The GPU
/// preflight checks the gate's ends too: the sysfs double stands in for
/// peer memory, as for the flows above.
#[test]
fn the_gate_loops_back_gpu_memory_to_gpu_memory_on_one_device() {
    if !has_rdma() {
        return;
    }
    let bench = Bench::new();
    let doubles = Doubles::new(&bench);
    let (device, profile) = gate_rdma::rxe_profile(&bench);
    let memory = "memory = { sender = \"cuda\", receiver = \"host\" }";
    let scenario = bench.write("gated.toml", &gate_rdma::scenario(&device, memory));
    let hostfile = bench.write("hosts", gate_rdma::HOSTS);
    let (scenario, hostfile, profile) =
        (scenario.to_str().unwrap(), hostfile.to_str().unwrap(), profile.to_str().unwrap());
    let args = ["run", scenario, "-H", hostfile, "--gate", profile, "--gate-only", "--export-json", "-", "--no-save"];
    let out = gate_rdma::unless_degraded(|| doubles.command(&bench, &[&args[..], &["--quiet"]].concat()));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let run: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stdout is one JSON document");
    gate_rdma::passed_on(&run, &device);
    for h in run["gate"]["hosts"].as_array().unwrap() {
        let gpu = &h["loopback_gpu"];
        assert_eq!(gpu, &serde_json::json!({"gpus": [0], "sender": "cuda", "receiver": "cuda"}), "{h}");
    }
    for flow in run["phases"][0]["flows"].as_array().unwrap() {
        let gpu = &flow["gpu_memory"];
        assert_eq!(
            (&gpu["sender"][0]["memory"], &gpu["receiver"][0]["memory"]),
            (&"cuda".into(), &"cuda".into()),
            "{flow}"
        );
        assert!(flow["tx_bytes"].as_u64().unwrap() > 0, "{flow}");
    }
    assert!(bench.leftovers(Duration::from_secs(2)).is_empty(), "processes left");
}

/// Data validation in GPU memory: write, read and send flows (0, 1, 2) in
/// the double's "device" memory, every pattern written and read back
/// through the driver (cuMemcpyHtoD / cuMemcpyDtoH; the arena's CPU
/// pointer is never used for a provider's buffer). Clean, every flow
/// checks and finds nothing bad; with the test hook flipping byte 9 of the
/// read responder's slots (tests/it/data_validation.rs), flow 1 alone fails.
#[test]
fn data_validation_in_gpu_memory_goes_through_the_driver() {
    if !has_rdma() {
        return;
    }
    let bench = Bench::new();
    let doubles = Doubles::new(&bench);
    let groups: String = ["write", "read", "send"]
        .iter()
        .map(|op| {
            format!(
                "[[group]]\nname = \"{op}\"\npattern = \"explicit\"\ntransport = \"rdma\"\nop = \"{op}\"\n\
                 flows = [[1, 0]]\nmessage_size = \"4K\"\nmemory = \"cuda\"\nvalidate = true\n"
            )
        })
        .collect();
    let scenario = bench.write("dv.toml", &format!("[run]\nduration = \"1s\"\nwarmup = \"200ms\"\n{groups}"));
    let hostfile = bench.write("hosts", "127.0.0.1\n127.0.0.2\n");
    let (scenario, hostfile) = (scenario.to_str().unwrap(), hostfile.to_str().unwrap());
    for flipped in [None, Some(1)] {
        let mut cmd = doubles.command(&bench, &["run", scenario, "-H", hostfile, "--export-json", "-", "--no-save"]);
        if let Some(flow) = flipped {
            cmd.env("FABRICBENCH_TEST_DV_FLIP", format!("{flow}:9"));
        }
        let out = cmd.output().expect("run fabricbench");
        let stderr = text(&out.stderr);
        // Clean: 0, or 4 where the loaded emulation made the window short
        // (degraded is about time, not data); a flipped byte fails the run.
        let codes: &[i32] = if flipped.is_some() { &[1] } else { &[0, 4] };
        assert!(out.status.code().is_some_and(|c| codes.contains(&c)), "{flipped:?}: {stderr}");
        let run: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stdout is one JSON document");
        let flows = run["phases"][0]["flows"].as_array();
        for f in flows.unwrap_or_else(|| panic!("{flipped:?}: no phase measured: {stderr}")) {
            assert!(f["gpu_memory"]["sender"][0]["memory"] == "cuda", "{f}");
            assert!(f["dv_checked"].as_u64().unwrap() > 0, "{flipped:?}: {f}");
            match flipped == f["id"].as_u64() {
                true => assert_eq!(f["dv_first_bad"]["offset"], 9, "{f}"),
                false => assert_eq!(f["dv_errors"], 0, "{flipped:?}: {f}"),
            }
        }
    }
    assert!(bench.leftovers(Duration::from_secs(2)).is_empty(), "processes left");
}

/// GPU memory on either end, as a user asks for it without a `gpu` key: a
/// hostfile's `gpus=` is the GPU its host's end opens (run.json's `chosen`
/// says so and its `hosts` record the entry; the host without one resolves
/// `auto`), and `pair -m cuda,host` puts the sender in GPU memory and the
/// receiver in host memory (no GPU memory on its end).
#[test]
fn hostfile_gpus_and_pair_memory_sides_reach_each_end() {
    if !has_rdma() {
        return;
    }
    let bench = Bench::new();
    let doubles = Doubles::new(&bench);
    let run = |args: &[&str]| -> serde_json::Value {
        let mut command = doubles.command(&bench, args);
        let out = command.args(["--export-json", "-", "--no-save", "--no-progress"]).output().expect("run fabricbench");
        // 4: a window the loaded emulation made short (degraded is about time).
        assert!(out.status.code().is_some_and(|c| [0, 4].contains(&c)), "{args:?}: {}", text(&out.stderr));
        serde_json::from_slice(&out.stdout).expect("stdout is one JSON document")
    };
    let scenario = bench.write("gpu.toml", &SCENARIO.replace("duration = \"2s\"", "duration = \"1s\""));
    let hostfile = bench.write("hosts", "127.0.0.1 gpus=1\n127.0.0.2\n");
    let r = run(&["run", scenario.to_str().unwrap(), "-H", hostfile.to_str().unwrap()]);
    assert_eq!((&r["hosts"][0]["gpus"], r["hosts"][1].get("gpus")), (&serde_json::json!([1]), None), "{}", r["hosts"]);
    let gpu = &r["phases"][0]["flows"][0]["gpu_memory"];
    let (sender, receiver) = (&gpu["sender"][0], &gpu["receiver"][0]);
    assert_eq!((&sender["gpu"], sender["chosen"].as_str()), (&1.into(), Some("1 (this host's gpus= in the hostfile)")));
    assert_eq!(
        (&receiver["gpu"], receiver["chosen"].as_str()),
        (&0.into(), Some("auto: no NIC–GPU affinity known on this host, so GPU 0"))
    );

    // 1 s of 16 writes in flight: a loaded emulated VM moved nothing in 0.5 s of 128 (rxe drops
    // packets of deep queues and waits out a retransmit timeout).
    let pair: Vec<&str> =
        "pair localhost localhost write -s 64K -t 16 -D 1 -m cuda,host --use_cuda=1".split(' ').collect();
    let flow = &run(&pair)["phases"][0]["flows"][0];
    assert!(flow["tx_bytes"].as_u64().unwrap() > 0, "{flow}");
    let gpu = &flow["gpu_memory"];
    assert_eq!((&gpu["sender"][0]["memory"], &gpu["sender"][0]["gpu"]), (&"cuda".into(), &1.into()), "{flow}");
    assert!(gpu.get("receiver").is_none(), "the receiver is in host memory: {flow}");
    assert!(bench.leftovers(Duration::from_secs(2)).is_empty(), "processes left");
}
