//! run.json's `gate`: each host's verdict from the node gate that ran
//! before the pairs (docs/ACCEPTANCE.md, "The node gate"). Optional and
//! additive: runs without a gate, and older files, have none.

use serde::{Deserialize, Serialize};

use crate::scenario::memory::Memory;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GateResult {
    /// The profile the hosts were held to (its name or path).
    pub profile: String,
    /// One per host, in the hostfile's order.
    pub hosts: Vec<HostGate>,
    /// Why the gate ran once more: the reasons its run was degraded (a
    /// window that cannot be trusted judges no host), so these verdicts are
    /// the next run's. Absent when no run of it was degraded, and in older runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retried: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HostGate {
    pub host: String,
    /// False: the host was left out of the pairs, for `reasons`.
    pub passed: bool,
    /// The RDMA ports held to the profile, `device/port`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<String>,
    /// The slowest of its loopback flows, Gb/s: the RDMA loopback's when
    /// the run has one, else the TCP loopback's (`None`: not measured).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loopback_gbps: Option<f64>,
    /// What the loopback had to reach, Gb/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loopback_min_gbps: Option<f64>,
    /// The RDMA devices its loopback ran on (each flow's sender and
    /// receiver on the same one). Absent for TCP, and in older runs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub loopback_devices: Vec<String>,
    /// A loopback in GPU memory (the run's RDMA groups put their buffers
    /// there): its GPUs and memory. Absent in host memory, and in older runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loopback_gpu: Option<GpuLoopback>,
    /// Why it failed, one line each ("mlx5_2 port 1 at 200 Gb/s, expected 400 Gb/s").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<String>,
    /// Everything judged, one line each, passed or not, with the
    /// expectation its number met: each port held ("mlx5_0 port 1 ACTIVE
    /// at 400 Gb/s 4X"), the locked-memory limit on an RDMA run, each
    /// loopback ("TCP loopback 38.2 Gb/s ≥ 10 Gb/s (tcp_loopback_min)",
    /// "RDMA loopback on mlx5_0 …"). Absent in older runs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub judged: Vec<GateLine>,
}

/// One thing the gate judged on a host, and how it came out.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GateLine {
    pub passed: bool,
    pub text: String,
}

/// A loopback from GPU memory to GPU memory through one NIC, as
/// `ib_write_bw --use_cuda` runs it against itself.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuLoopback {
    /// The GPUs its ends' buffers were on (CUDA's numbers), each once.
    pub gpus: Vec<usize>,
    /// The memory its sender sent from and its receiver received into.
    pub sender: Memory,
    pub receiver: Memory,
}

impl GpuLoopback {
    /// `GPU 0 cuda`, `GPU 0,1 cuda to cuda-managed`.
    pub fn text(&self) -> String {
        let gpus = self.gpus.iter().map(ToString::to_string).collect::<Vec<_>>().join(",");
        match self.sender == self.receiver {
            true => format!("GPU {gpus} {}", self.sender.name()),
            false => format!("GPU {gpus} {} to {}", self.sender.name(), self.receiver.name()),
        }
    }
}

impl GateResult {
    /// The hosts that failed the gate.
    pub fn failed(&self) -> impl Iterator<Item = &HostGate> {
        self.hosts.iter().filter(|h| !h.passed)
    }
}
