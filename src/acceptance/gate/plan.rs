//! The gate as a run: one loopback phase per transport the run uses, in
//! which each host's ranks send to themselves (RDMA: loopback on the same
//! device; TCP: to the rank's own data address), all hosts at once; and the
//! verdict per host read back from that run's result (its probes' port
//! facts, its ranks' counters, its flows' rates).

use std::collections::BTreeSet;

use crate::acceptance::gate::{judge_host, HostReadings, Locked, Pinned, Profile, RdmaLoopback, Unmeasured};
use crate::hostfacts::{PortFacts, RdmaDeviceFacts};
use crate::plan::{Flow, GroupPlan, Phase, Plan};
use crate::result::gate::{GateResult, GpuLoopback, HostGate};
use crate::result::gpu_memory::FlowGpuMemory;
use crate::result::{PhaseResult, RunResult, RunStatus};
use crate::scenario::memory::{Memory, MemorySides};
use crate::scenario::{Mode, Pattern, Transport};
use crate::transport::rdma::GpuMemoryUse;

/// The gate's plan over the main plan's ranks: per transport, the first
/// bandwidth group of that transport, unpaced, looping on every host's
/// first rank (and on every rank bound to its own devices). `None` when
/// the run has no bandwidth group to loop back.
pub fn plan(main: &Plan) -> Option<Plan> {
    let looping: Vec<usize> =
        main.ranks.iter().filter(|r| r.slot == 0 || !r.devices.is_empty()).map(|r| r.rank).collect();
    let mut groups: Vec<GroupPlan> = Vec::new();
    for g in main.phases.iter().flat_map(|p| &p.groups).filter(|g| g.mode == Mode::Bandwidth) {
        let name = match g.transport {
            Transport::Tcp => "gate-tcp",
            Transport::Rdma => "gate-rdma",
        };
        let pattern = Pattern::Explicit;
        let looped = GroupPlan { index: 0, name: name.into(), pattern, rate: None, schedule: None, ..g.clone() };
        match groups.iter_mut().find(|h| h.transport == g.transport) {
            None => groups.push(looped),
            // The run puts RDMA buffers in GPU memory: the gate loops that memory back.
            Some(first) if !in_gpu(first) && in_gpu(g) => *first = looped,
            Some(_) => {}
        }
    }
    for rdma in groups.iter_mut().filter_map(|g| g.rdma.as_mut()) {
        rdma.memory = gpu_to_gpu(rdma.memory);
    }
    let phases: Vec<Phase> = groups
        .into_iter()
        .enumerate()
        .map(|(index, group)| Phase {
            index,
            name: format!("{} loopback", group.name),
            flows: looping
                .iter()
                .enumerate()
                .map(|(id, &r)| Flow { id: id as u32, group: 0, src: r, dst: r })
                .collect(),
            groups: vec![group],
            stress: Vec::new(),
            sweep: None,
            congestion: None,
            repeat: None,
        })
        .collect();
    (!phases.is_empty()).then(|| Plan { ranks: main.ranks.clone(), phases })
}

fn in_gpu(group: &GroupPlan) -> bool {
    group.rdma.as_ref().is_some_and(|r| r.memory.any_gpu())
}

/// A group with GPU memory at one end loops back with GPU memory at both,
/// as `ib_write_bw --use_cuda` does against itself: the other end takes
/// the GPU end's kind. Host memory at both ends stays host memory.
fn gpu_to_gpu(memory: MemorySides) -> MemorySides {
    let pick = |own: Memory, other: Memory| if own.is_gpu() { own } else { other };
    MemorySides { sender: pick(memory.sender, memory.receiver), receiver: pick(memory.receiver, memory.sender) }
}

/// Each host's verdict from the gate run's result, in the hostfile's
/// order; `pinned`: what the run's RDMA flows register on each host.
pub fn judge_run(profile: &Profile, gate: &RunResult, pinned: &Pinned) -> GateResult {
    let mut hosts: Vec<&str> = Vec::new();
    for r in &gate.plan.ranks {
        if !hosts.contains(&r.host.as_str()) {
            hosts.push(&r.host);
        }
    }
    GateResult {
        profile: profile.name.clone(),
        hosts: hosts.into_iter().map(|h| judge_one(profile, gate, h, pinned.on(h))).collect(),
        retried: None,
    }
}

fn judge_one(profile: &Profile, gate: &RunResult, host: &str, pinned: u64) -> HostGate {
    let ranks: BTreeSet<usize> = gate.plan.ranks.iter().filter(|r| r.host == host).map(|r| r.rank).collect();
    let facts = gate.probes.iter().filter(|p| ranks.contains(&p.rank)).find_map(|p| p.facts.as_ref());
    let groups: Vec<&GroupPlan> = gate.plan.phases.iter().flat_map(|p| &p.groups).collect();
    let runs = |t: Transport| groups.iter().any(|g| g.transport == t);
    let mut readings = HostReadings { host: host.to_string(), ..HostReadings::default() };
    let named = named_devices(gate, &ranks, &groups);
    let (loopback_devices, loopback_gpu) = looped_on(gate, &ranks);
    match facts {
        Some(f) => {
            let used = UsedNics { named: &named, opened: &loopback_devices, rdma: runs(Transport::Rdma) };
            ports_of(&f.rdma_devices, &used, &groups, &mut readings)
        }
        None if runs(Transport::Rdma) || !named.is_empty() => {
            readings.unknown_ports = Some("the host sent no facts of its devices".into())
        }
        None => {}
    }
    readings.moved = gate
        .phases
        .iter()
        .flat_map(|p| &p.ranks)
        .filter(|r| ranks.contains(&r.rank))
        .flat_map(|r| r.rdma_counters.iter().cloned())
        .collect();
    // An RDMA run's limit is held to what the run registers there; a limit unknown is not guessed at.
    let limit = facts.and_then(|f| f.locked_memory).filter(|_| runs(Transport::Rdma) && pinned > 0);
    readings.locked = limit.map(|limit| Locked { limit, needed: pinned });
    let looped = |t: Transport| runs(t).then(|| loopback(gate, &ranks, t));
    if profile.loopback_min.is_some() && runs(Transport::Rdma) {
        readings.rdma_loopbacks = rdma_loopbacks(gate, &ranks);
    }
    readings.tcp_loopback = profile.tcp_loopback_min.and_then(|_| looped(Transport::Tcp));
    HostGate { loopback_devices, loopback_gpu, ..judge_host(profile, &readings) }
}

/// What these ranks' loopback ran on: the RDMA devices whose counters
/// they read (their flows' ports), and the GPUs and memory of their
/// flows' ends when in GPU memory.
fn looped_on(gate: &RunResult, ranks: &BTreeSet<usize>) -> (Vec<String>, Option<GpuLoopback>) {
    let mut devices: Vec<String> = Vec::new();
    let counted = gate.phases.iter().flat_map(|p| &p.ranks).filter(|r| ranks.contains(&r.rank));
    for d in counted.flat_map(|r| &r.rdma_counters) {
        if !devices.contains(&d.device) {
            devices.push(d.device.clone());
        }
    }
    let ends: Vec<_> = gate.phases.iter().flat_map(|p| &p.flows).filter(|f| ranks.contains(&f.src)).collect();
    let used = |side: fn(&FlowGpuMemory) -> &Vec<GpuMemoryUse>| {
        ends.iter().filter_map(|f| f.gpu_memory.as_ref()).flat_map(side).collect::<Vec<_>>()
    };
    let (sender, receiver) = (used(|g| &g.sender), used(|g| &g.receiver));
    let (Some(tx), Some(rx)) = (sender.first(), receiver.first()) else { return (devices, None) };
    let mut gpus: Vec<usize> = sender.iter().chain(&receiver).map(|u| u.gpu).collect();
    gpus.sort_unstable();
    gpus.dedup();
    (devices, Some(GpuLoopback { gpus, sender: tx.memory, receiver: rx.memory }))
}

/// The devices the run names for these ranks: the hostfile's `devices=`,
/// else the RDMA groups' `device`/`devices`.
fn named_devices(gate: &RunResult, ranks: &BTreeSet<usize>, groups: &[&GroupPlan]) -> BTreeSet<String> {
    let mut named: BTreeSet<String> =
        gate.plan.ranks.iter().filter(|r| ranks.contains(&r.rank)).flat_map(|r| r.devices.iter().cloned()).collect();
    if named.is_empty() {
        for rdma in groups.iter().filter_map(|g| g.rdma.as_ref()) {
            named.extend(rdma.knobs.device.iter().chain(&rdma.knobs.devices).cloned());
        }
    }
    named
}

/// The NICs a host's run uses, as far as the gate can tell.
struct UsedNics<'n> {
    /// The hostfile's `devices=` for its ranks, else the groups' `device`/`devices`.
    named: &'n BTreeSet<String>,
    /// The devices its RDMA loopback opened (whose counters it read).
    opened: &'n [String],
    /// Whether the run has an RDMA group at all.
    rdma: bool,
}

/// The ports held to the profile: only those the run uses, so that a NIC
/// it leaves alone (storage, management, a spare that is down) fails no
/// host. The named devices' ports; with none named, the devices the RDMA
/// loopback opened, else the port the transport would open (the first
/// ACTIVE one), else — no port ACTIVE — every port, each naming itself. A
/// run without RDMA holds no port to a rate; a named device the host
/// lacks is a fault either way. The groups' `port`, when set, narrows it.
fn ports_of<'a>(
    devices: &'a [RdmaDeviceFacts],
    used: &UsedNics,
    groups: &[&GroupPlan],
    readings: &mut HostReadings<'a>,
) {
    let only_port = groups.iter().find_map(|g| g.rdma.as_ref()?.knobs.port);
    readings.missing.extend(used.named.iter().filter(|n| !devices.iter().any(|d| &d.name == *n)).cloned());
    if !used.rdma {
        return;
    }
    let all: Vec<(&'a str, &'a PortFacts)> = devices
        .iter()
        .flat_map(|d| d.ports.iter().map(move |p| (d.name.as_str(), p)))
        .filter(|(_, p)| only_port.is_none_or(|n| n == p.port))
        .collect();
    let on = |names: &dyn Fn(&str) -> bool| all.iter().filter(|(d, _)| names(d)).copied().collect::<Vec<_>>();
    readings.ports = if !used.named.is_empty() {
        on(&|d| used.named.contains(d))
    } else if !used.opened.is_empty() {
        on(&|d| used.opened.iter().any(|o| o == d))
    } else {
        let first_active = all.iter().find(|(_, p)| only_port.is_some() || p.state.as_deref() == Some("ACTIVE"));
        first_active.map_or(all.clone(), |&used| vec![used])
    };
    readings.pcie = devices
        .iter()
        .filter(|d| readings.ports.iter().any(|(name, _)| *name == d.name))
        .map(|d| (d.name.as_str(), d.pcie.as_ref()))
        .collect();
}

/// Each of these ranks' RDMA loopback, alone, on the devices whose
/// counters it read: a host with a rank per NIC has each NIC judged on
/// its own. One without a NIC named when no rank's loopback has a flow.
fn rdma_loopbacks(gate: &RunResult, ranks: &BTreeSet<usize>) -> Vec<RdmaLoopback> {
    let rdma: Vec<&PhaseResult> =
        gate.phases.iter().filter(|p| p.groups.iter().any(|g| g.transport == Transport::Rdma)).collect();
    let looping = ranks.iter().filter(|&&r| rdma.iter().flat_map(|p| &p.flows).any(|f| f.src == r));
    let mut out: Vec<RdmaLoopback> = looping
        .map(|&rank| {
            let mut on: Vec<String> = Vec::new();
            let counted = rdma.iter().flat_map(|p| &p.ranks).filter(|r| r.rank == rank);
            for d in counted.flat_map(|r| &r.rdma_counters) {
                if !on.contains(&d.device) {
                    on.push(d.device.clone());
                }
            }
            RdmaLoopback { on, measured: loopback(gate, &BTreeSet::from([rank]), Transport::Rdma) }
        })
        .collect();
    if out.is_empty() {
        out.push(RdmaLoopback { on: Vec::new(), measured: loopback(gate, ranks, Transport::Rdma) });
    }
    out
}

/// The slowest loopback flow of these ranks over `transport`, or why there is none.
fn loopback(gate: &RunResult, ranks: &BTreeSet<usize>, transport: Transport) -> Result<f64, Unmeasured> {
    let over = |p: &&PhaseResult| p.groups.iter().any(|g| g.transport == transport);
    let flows: Vec<_> =
        gate.phases.iter().filter(over).flat_map(|p| &p.flows).filter(|f| ranks.contains(&f.src)).collect();
    if let Some(error) = flows.iter().find_map(|f| f.error.as_deref()) {
        return Err(Unmeasured::FlowFailed(error.to_string()));
    }
    match flows.iter().map(|f| f.gbps).reduce(f64::min) {
        Some(gbps) => Ok(gbps),
        None => Err(match &gate.status {
            RunStatus::Failed { error } => Unmeasured::RunFailed(error.clone()),
            _ => Unmeasured::NoFlow,
        }),
    }
}
