//! The gate's verdicts on the recorded host trees (tests/fixtures/hosts):
//! a port at the wrong rate, a port down, an error counter moving; and
//! whole gate runs (recorded run.json fixtures, their loopback flows and
//! hosts' facts replaced) judged on the NICs the run uses and on each
//! transport's own floor.

use std::path::{Path, PathBuf};

use super::*;
use crate::hostfacts::{HostFacts, RdmaDeviceFacts};
use crate::transport::rdma::counters::snapshot_at;

fn tree(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hosts").join(name)
}

fn shipped(name: &str) -> Profile {
    load(name, &[PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("profiles")]).unwrap()
}

fn readings<'a>(host: &str, devices: &'a [RdmaDeviceFacts], loopback: f64) -> HostReadings<'a> {
    let ports = devices.iter().flat_map(|d| d.ports.iter().map(move |p| (d.name.as_str(), p))).collect();
    let pcie = devices.iter().map(|d| (d.name.as_str(), d.pcie.as_ref())).collect();
    let rdma_loopbacks = vec![RdmaLoopback { on: Vec::new(), measured: Ok(loopback) }];
    HostReadings { host: host.into(), ports, pcie, rdma_loopbacks, ..HostReadings::default() }
}

#[test]
fn a_port_at_the_wrong_rate_fails_with_its_rate() {
    let facts = HostFacts::under(&tree("mlx5-ib"));
    let hdr = judge_host(&shipped("hdr-ib"), &readings("node17", &facts.rdma_devices, 195.0));
    assert!(hdr.passed, "{:?}", hdr.reasons);
    assert_eq!((hdr.ports.as_slice(), hdr.loopback_min_gbps), (&["mlx5_0/1".to_string()][..], Some(188.0)));
    let ndr = judge_host(&shipped("ndr-ib"), &readings("node17", &facts.rdma_devices, 195.0));
    assert!(!ndr.passed);
    assert_eq!(
        ndr.reasons,
        [
            "mlx5_0 port 1 at 200 Gb/s, expected 400 Gb/s",
            "mlx5_0 PCIe link trained at 16 GT/s x16, expected at least 32 GT/s x16",
            "RDMA loopback at 195 Gb/s, below 376 Gb/s (94% of line rate 400 Gb/s)"
        ]
    );
}

#[test]
fn a_port_down_fails_naming_the_device() {
    let facts = HostFacts::under(&tree("two-nics"));
    let ndr = Profile { pcie: None, ..shipped("ndr-ib") };
    let gate = judge_host(&ndr, &readings("node03", &facts.rdma_devices, 390.0));
    assert!(!gate.passed);
    assert_eq!(gate.ports, ["mlx5_0/1", "mlx5_1/1"]);
    assert!(gate.reasons.iter().any(|r| r.starts_with("mlx5_1 port 1 is DOWN")), "{:?}", gate.reasons);
    assert!(gate.reasons.iter().all(|r| !r.starts_with("mlx5_0")), "{:?}", gate.reasons);
}

#[test]
fn a_moving_error_counter_fails_and_a_data_counter_does_not() {
    let dir = std::env::temp_dir().join(format!("fb-gate-{}", std::process::id()));
    let class = dir.join("class/infiniband");
    copy(&tree("mlx5-ib").join("sys/class/infiniband/mlx5_0"), &class.join("mlx5_0"));
    let counters = class.join("mlx5_0/ports/1/counters");
    let before = snapshot_at(&class, "mlx5_0", 1).unwrap();
    std::fs::write(counters.join("symbol_error"), "12\n").unwrap();
    std::fs::write(counters.join("port_xmit_data"), "999999999\n").unwrap();
    let moved = before.moved_until(&snapshot_at(&class, "mlx5_0", 1).unwrap());
    let devices = HostFacts::under(&tree("mlx5-ib")).rdma_devices;
    let mut r = readings("node09", &devices, 195.0);
    r.moved = vec![moved];
    let gate = judge_host(&shipped("hdr-ib"), &r);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(gate.reasons, ["mlx5_0 port 1: counters/symbol_error rose by 12 during the gate"]);
    let line = &gate.judged[0];
    assert_eq!((line.passed, line.text.as_str()), (false, gate.reasons[0].as_str()), "the port's own line says it");
}

fn copy(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap().flatten() {
        let (path, target) = (entry.path(), to.join(entry.file_name()));
        match entry.file_type().unwrap() {
            t if t.is_dir() => copy(&path, &target),
            t if t.is_file() => _ = std::fs::copy(&path, &target).unwrap(),
            _ => {}
        }
    }
}

#[test]
fn rates_below_1_gbps_keep_3_significant_digits() {
    let texts: Vec<String> = [376.0, 187.456, 1.0, 0.63312, 0.0025, 0.0].map(gbps_text).to_vec();
    assert_eq!(texts, ["376 Gb/s", "187.46 Gb/s", "1 Gb/s", "0.633 Gb/s", "0.0025 Gb/s", "0 Gb/s"]);
}

#[test]
fn width_comes_from_the_rate_text() {
    assert_eq!(width_of("200 Gb/sec (4X HDR)"), Some(4));
    assert_eq!(width_of("2.5 Gb/sec (1X SDR)"), Some(1));
    assert_eq!(width_of("100 Gb/sec"), None);
    let mut port = HostFacts::under(&tree("mlx5-ib")).rdma_devices[0].ports[0].clone();
    port.rate = Some("200 Gb/sec (2X NDR)".into());
    let p = Profile { width: Some(4), ..shipped("hdr-ib") };
    assert_eq!(
        port_faults(&p, "mlx5_0", &port),
        [GateFault::WrongWidth { port: "mlx5_0 port 1".into(), width: Some(2), expected: 4 }]
    );
}

#[test]
fn an_unmeasured_loopback_or_unknown_line_rate_fails() {
    let p = shipped("tcp-loopback");
    let refused = Unmeasured::FlowFailed("connection refused".into());
    let none = HostReadings { host: "h".into(), tcp_loopback: Some(Err(refused)), ..HostReadings::default() };
    assert_eq!(judge_host(&p, &none).reasons, ["TCP loopback not measured: connection refused"]);
    let failed = HostReadings { tcp_loopback: Some(Err(Unmeasured::RunFailed("rank 1 died".into()))), ..none.clone() };
    assert_eq!(judge_host(&p, &failed).reasons, ["TCP loopback not measured: the gate run failed: rank 1 died"]);
    let fast = HostReadings { tcp_loopback: Some(Ok(20.0)), ..none.clone() };
    let gate = judge_host(&p, &fast);
    assert!(gate.passed && gate.loopback_gbps == Some(20.0) && gate.loopback_min_gbps == Some(1.0), "{gate:?}");
    let share = Profile { loopback_min: Some(LoopbackMin::OfLineRate(94.0)), ..p };
    let rdma_loopbacks = vec![RdmaLoopback { on: vec!["rxe0".into()], measured: Ok(20.0) }];
    let rdma = HostReadings { rdma_loopbacks, ..HostReadings::default() };
    assert_eq!(judge_host(&share, &rdma).reasons, [GateFault::NoLineRate.to_string()]);
}

/// A recorded gate-like run (`fixture`, under tests/fixtures) whose hosts
/// all have the recorded tree `host`, and whose first phase is one
/// loopback flow per rank at `gbps`.
fn recorded_run(fixture: &str, host: &str, gbps: f64) -> crate::result::RunResult {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(fixture);
    let mut run: crate::result::RunResult = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let facts = HostFacts::under(&tree(host));
    for probe in &mut run.probes {
        probe.facts = Some(Box::new(facts.clone()));
    }
    let phase = &mut run.phases[0];
    let flow = phase.flows[0].clone();
    let ranks = run.plan.ranks.iter();
    phase.flows = ranks.map(|r| crate::result::FlowResult { src: r.rank, dst: r.rank, gbps, ..flow.clone() }).collect();
    run
}

fn judged(gate: &crate::result::gate::HostGate) -> Vec<&str> {
    gate.judged.iter().map(|l| l.text.as_str()).collect()
}

/// Two NDR HCAs, the second DOWN (a spare, or storage on its own fabric):
/// a run that names no device uses the one its RDMA loopback opened
/// (mlx5_0, by its counters), or without them the one the transport would
/// open (the first ACTIVE port), and the DOWN one fails no host. (The
/// tree's mlx5_0 trained at x8: the PCIe link is judged on its own below.)
#[test]
fn a_host_with_an_unused_down_nic_passes() {
    let mut run = recorded_run("v3-rdma-fan-in.json", "two-nics", 390.0);
    let ndr = Profile { pcie: None, ..shipped("ndr-ib") };
    for opened in [true, false] {
        if !opened {
            run.phases[0].ranks.iter_mut().for_each(|r| r.rdma_counters.clear());
        }
        let verdict = judge_run(&ndr, &run, &Pinned::of(&run.plan));
        for h in &verdict.hosts {
            assert!(h.passed, "opened {opened}: {h:?}");
            assert_eq!(h.ports, ["mlx5_0/1"], "opened {opened}");
            let on = if opened { " on mlx5_0" } else { "" };
            let looped = format!("RDMA loopback{on} 390 Gb/s ≥ 376 Gb/s (94% of line rate 400 Gb/s)");
            assert_eq!(judged(h), ["mlx5_0 port 1 ACTIVE at 400 Gb/s 4X", looped.as_str()]);
        }
    }
}

/// A NIC that trained at x8 of x16 keeps its port ACTIVE at 400 Gb/s: the
/// profile's `pcie` fails its host on its own line, whether the link is
/// named or `best`; the unused NIC beside it (at x16, DOWN) is not judged,
/// and a device that tells no link (a virtual one) fails a profile that
/// asks for one.
#[test]
fn a_used_nic_on_a_downtrained_pcie_link_fails_naming_its_link() {
    let run = recorded_run("v3-rdma-fan-in.json", "two-nics", 390.0);
    let x8 = "mlx5_0 PCIe link trained at 32 GT/s x8 (of 32 GT/s x16)";
    for (profile, expected) in [(shipped("ndr-ib"), "at least 32 GT/s x16"), (shipped("roce-100g"), "its best")] {
        let h = &judge_run(&Profile { rate_gbps: Some(400.0), ..profile }, &run, &Pinned::of(&run.plan)).hosts[0];
        assert!(!h.passed, "{h:?}");
        assert_eq!(h.reasons, [format!("{x8}, expected {expected}")]);
        assert!(judged(h).contains(&format!("{x8}, expected {expected}").as_str()), "{h:?}");
        assert!(!judged(h).iter().any(|l| l.starts_with("mlx5_1")), "{h:?}");
    }
    let gen4 = Profile { pcie: Some(PcieFloor::AtLeast { gts: 16.0, width: 8 }), ..shipped("ndr-ib") };
    let h = &judge_run(&gen4, &run, &Pinned::of(&run.plan)).hosts[0];
    assert!(h.passed, "{h:?}");
    assert!(judged(h).contains(&"mlx5_0 PCIe link 32 GT/s x8 (of 32 GT/s x16), at least 16 GT/s x8"), "{h:?}");

    let mut virtual_nic = HostFacts::under(&tree("two-nics")).rdma_devices;
    virtual_nic.iter_mut().for_each(|d| d.pcie = None);
    let h = judge_host(&shipped("ndr-ib"), &readings("vm1", &virtual_nic[..1], 390.0));
    assert_eq!(h.reasons, ["mlx5_0 reports no PCIe link (a virtual device?), expected at least 32 GT/s x16"]);
}

/// A NIC the run uses (the hostfile's `devices=`) is held alone: at the
/// wrong rate, or down, it fails its host with its own line, and the
/// host's other NIC is not judged.
#[test]
fn a_used_nic_at_the_wrong_rate_fails_naming_it() {
    let mut hdr = recorded_run("v3-rdma-fan-in.json", "mlx5-ib", 195.0);
    hdr.plan.ranks.iter_mut().for_each(|r| r.devices = vec!["mlx5_0".into()]);
    let h = &judge_run(&shipped("ndr-ib"), &hdr, &Pinned::default()).hosts[0];
    assert!(!h.passed);
    assert_eq!(h.judged[0].text, "mlx5_0 port 1 at 200 Gb/s, expected 400 Gb/s");
    assert!(!h.judged[0].passed);
    let mut spare = recorded_run("v3-rdma-fan-in.json", "two-nics", 390.0);
    spare.plan.ranks.iter_mut().for_each(|r| r.devices = vec!["mlx5_1".into()]);
    let h = &judge_run(&shipped("ndr-ib"), &spare, &Pinned::default()).hosts[0];
    assert_eq!(h.ports, ["mlx5_1/1"]);
    assert_eq!(h.judged[0].text, "mlx5_1 port 1 is DOWN, expected ACTIVE; mlx5_1 port 1 at 10 Gb/s, expected 400 Gb/s");
}

/// A TCP-only run under an InfiniBand profile: no RDMA port is judged
/// (the host has two NICs, one DOWN), and its TCP loopback is held to the
/// profile's `tcp_loopback_min`, never to a share of the 400 Gb/s line rate.
#[test]
fn a_tcp_run_is_held_to_the_tcp_floor_not_the_line_rate() {
    let tcp = |gbps| recorded_run("v3-gate.json", "two-nics", gbps);
    let healthy = judge_run(&shipped("ndr-ib"), &tcp(38.2), &Pinned::default());
    for h in &healthy.hosts {
        assert!(h.passed, "{h:?}");
        assert!(h.ports.is_empty(), "{h:?}");
        assert_eq!(judged(h), ["TCP loopback 38.2 Gb/s ≥ 10 Gb/s (tcp_loopback_min)"]);
        assert_eq!((h.loopback_gbps, h.loopback_min_gbps), (Some(38.2), Some(10.0)));
    }
    let slow = judge_run(&shipped("ndr-ib"), &tcp(5.0), &Pinned::default());
    assert_eq!(slow.hosts[0].reasons, ["TCP loopback at 5 Gb/s, below 10 Gb/s (tcp_loopback_min)"]);
}

/// A run whose second RDMA group sends from GPU memory: the gate loops
/// that group back, GPU memory at both ends (its receiver's host memory
/// taken over by the sender's `cuda`), on the GPU it names; a run in host
/// memory loops back host memory.
#[test]
fn the_rdma_loopback_is_in_gpu_memory_when_a_group_is() {
    use crate::scenario::memory::{GpuChoice, Memory, MemorySides};
    let groups = "[[group]]\nname = \"host\"\npattern = \"pairwise\"\ntransport = \"rdma\"\nflows = [[0, 1]]\n\n\
        [[group]]\nname = \"gpu\"\npattern = \"pairwise\"\ntransport = \"rdma\"\nflows = [[1, 0]]\n\
        memory = { sender = \"cuda\", receiver = \"host\" }\ngpu = 3\n";
    let looped = |groups: &str| {
        let toml = format!("[run]\nname = \"g\"\nduration = \"1s\"\n\n{groups}");
        let (scenario, _) = crate::scenario::parse(&toml, Path::new("g.toml")).expect("valid");
        let hosts: Vec<crate::hostfile::Host> = ["h0", "h1"].map(crate::hostfile::Host::named).to_vec();
        plan(&crate::plan::build(&hosts, &scenario).unwrap()).unwrap()
    };
    let gate = looped(groups);
    let group = &gate.phases[0].groups[0];
    let rdma = group.rdma.as_ref().unwrap();
    assert_eq!((group.name.as_str(), gate.phases.len()), ("gate-rdma", 1));
    assert_eq!(rdma.memory, MemorySides { sender: Memory::Cuda, receiver: Memory::Cuda });
    assert_eq!(rdma.gpu, GpuChoice::Index(3));
    let cuda = |rank: &Vec<crate::plan::GpuAsk>| rank.iter().map(|a| a.memory).collect::<Vec<_>>();
    assert!(gate.gpu_asks().iter().all(|r| cuda(r) == [Memory::Cuda]), "every looping rank opens its GPU first");
    let host_only = looped(groups.split("\n\n").next().unwrap());
    assert_eq!(host_only.phases[0].groups[0].rdma.as_ref().unwrap().memory, MemorySides::default());
    assert!(host_only.gpu_asks().iter().all(Vec::is_empty));
}

/// An RDMA run on a host whose processes may lock 64 KiB (mlx5-ib's
/// /proc/self/limits: an ssh session limits.conf does not raise) fails it,
/// naming the limit, what its ranks register and how to raise it; the
/// same host with no limit passes and says what was held.
#[test]
fn a_locked_memory_limit_below_the_runs_buffers_fails_the_host() {
    let mut run = recorded_run("v3-rdma-fan-in.json", "mlx5-ib", 195.0);
    let pinned = Pinned::of(&run.plan);
    let needed = pinned.on("127.0.0.1");
    assert!(needed > 64 << 10, "the fan-in's receiver registers more than 64 KiB: {needed}");
    let h = &judge_run(&shipped("hdr-ib"), &run, &pinned).hosts[0];
    let want = format!(
        "locked memory is limited to 64 KiB (RLIMIT_MEMLOCK), below the {} its RDMA buffers register in one process: \
         raise it where fabricbench starts (`ulimit -l unlimited`",
        crate::hostfacts::LockedMemory::Bytes(needed)
    );
    assert!(!h.passed && h.reasons.len() == 1 && h.reasons[0].starts_with(&want), "{:?}", h.reasons);
    for probe in &mut run.probes {
        probe.facts.as_mut().unwrap().locked_memory = Some(crate::hostfacts::LockedMemory::Unlimited);
    }
    let h = &judge_run(&shipped("hdr-ib"), &run, &pinned).hosts[0];
    assert!(h.passed, "{:?}", h.reasons);
    let line = format!(
        "locked memory unlimited ≥ the {} its RDMA buffers register",
        crate::hostfacts::LockedMemory::Bytes(needed)
    );
    assert!(judged(h).contains(&line.as_str()), "{:?}", h.judged);
}

/// A host with a rank per NIC (`devices=mlx5_0` and `devices=mlx5_1`):
/// each NIC's loopback is judged alone and named, so a slow one fails the
/// host by its own name while the other's line says it passed.
#[test]
fn each_nics_loopback_is_judged_alone() {
    let mut run = recorded_run("v3-rdma-fan-in.json", "two-nics", 390.0);
    let node = run.plan.ranks[0].host.clone();
    for (rank, device) in [(0, "mlx5_0"), (1, "mlx5_1")] {
        run.plan.ranks[rank].host = node.clone();
        run.plan.ranks[rank].devices = vec![device.into()];
        run.phases[0].ranks[rank].rdma_counters.iter_mut().for_each(|c| c.device = device.into());
    }
    run.phases[0].flows[1].gbps = 301.2;
    let h = &judge_run(&shipped("ndr-ib"), &run, &Pinned::default()).hosts[0];
    assert_eq!(h.ports, ["mlx5_0/1", "mlx5_1/1"]);
    let texts = judged(h);
    assert!(texts.contains(&"RDMA loopback on mlx5_0 390 Gb/s ≥ 376 Gb/s (94% of line rate 400 Gb/s)"), "{texts:?}");
    let slow = "RDMA loopback on mlx5_1 at 301.2 Gb/s, below 376 Gb/s (94% of line rate 400 Gb/s)";
    assert!(h.reasons.iter().any(|r| r == slow), "{:?}", h.reasons);
    assert_eq!(h.loopback_gbps, Some(301.2), "the host's number is its slowest NIC's");
}
