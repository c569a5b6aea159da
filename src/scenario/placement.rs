//! Where the scenario asks threads to run: explicit cores, or the NUMA node
//! near (or far from) the device the traffic uses. `load::placement`
//! resolves a request on a host and pins threads to it.

use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Numa {
    /// Not given: `near` for RDMA groups (perftest users pin near the NIC
    /// by hand), `any` for everything else; the plan decides.
    #[default]
    Auto,
    /// Wherever the scheduler puts them (no pinning).
    Any,
    /// Cores of the device's NUMA node.
    Near,
    /// Cores of the other NUMA nodes.
    Far,
}

impl Numa {
    /// What `Auto` means for threads driving an RDMA device (`rdma`) or not.
    pub fn or_default_for(self, rdma: bool) -> Numa {
        match self {
            Numa::Auto if rdma => Numa::Near,
            Numa::Auto => Numa::Any,
            asked => asked,
        }
    }

    /// Given explicitly (anything but `Auto` and `Any`).
    pub fn is_asked(self) -> bool {
        !matches!(self, Numa::Auto | Numa::Any)
    }
}

/// A placement request from the scenario.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Placement {
    pub cores: Option<Vec<usize>>,
    pub numa: Numa,
}
