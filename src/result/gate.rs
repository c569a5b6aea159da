//! run.json's `gate`: each host's verdict from the node gate that ran
//! before the pairs (docs/ACCEPTANCE.md, "The node gate"). Optional and
//! additive: runs without a gate, and older files, have none.

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GateResult {
    /// The profile the hosts were held to (its name or path).
    pub profile: String,
    /// One per host, in the hostfile's order.
    pub hosts: Vec<HostGate>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HostGate {
    pub host: String,
    /// False: the host was left out of the pairs, for `reasons`.
    pub passed: bool,
    /// The RDMA ports held to the profile, `device/port`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<String>,
    /// The slowest of its loopback flows, Gb/s (`None`: not measured).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loopback_gbps: Option<f64>,
    /// What the loopback had to reach, Gb/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loopback_min_gbps: Option<f64>,
    /// Why it failed, one line each ("mlx5_2 port 1 at 200 Gb/s, expected 400 Gb/s").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<String>,
}

impl GateResult {
    /// The hosts that failed the gate.
    pub fn failed(&self) -> impl Iterator<Item = &HostGate> {
        self.hosts.iter().filter(|h| !h.passed)
    }
}
