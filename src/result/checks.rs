//! How a run measured up to its checks (`[check]`): every outcome, the
//! hosts and links suspected, and what retesting them alone showed.

use serde::{Deserialize, Serialize};

use crate::plan::FlowId;
use crate::result::PhaseResult;
use crate::scenario::Rule;
use crate::topology::{SwitchName, Uplink, UplinkCable, Way};

/// How the run measured up to its checks.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Acceptance {
    /// True when every check passed (or failed only in the run and passed when retested alone).
    pub passed: bool,
    pub rules: Vec<Rule>,
    /// The ports' line rate used by `% of line rate`, Gb/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line_rate_gbps: Option<f64>,
    /// One outcome per rule and item checked.
    pub checks: Vec<CheckOutcome>,
    /// Hosts and links to blame, worst first.
    pub suspects: Vec<Suspect>,
    /// The phases that retested suspects alone, after the run.
    pub retest_phases: Vec<PhaseResult>,
    /// With a topology: each uplink the measured links' paths may cross
    /// (absent without one).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub uplinks: Vec<UplinkOutcome>,
}

impl Acceptance {
    /// Whether a suspect names this uplink (alone or as one of several)
    /// and its retest did not clear it.
    /// Whether a host or NIC suspect not cleared by its retest stands for `rank`.
    pub fn suspects_rank(&self, rank: usize) -> bool {
        self.suspects.iter().any(|s| s.kind.own_ranks().contains(&rank) && !matches!(s.retest, Retest::Cleared { .. }))
    }

    pub fn suspects_uplink(&self, uplink: &Uplink) -> bool {
        self.suspects.iter().any(|s| {
            matches!(&s.kind, SuspectKind::Uplink { uplinks, .. } if uplinks.contains(uplink))
                && !matches!(s.retest, Retest::Cleared { .. })
        })
    }
}

/// One leaf–spine uplink and the links (of all-pairs and pairwise) whose
/// paths may cross it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct UplinkOutcome {
    #[serde(flatten)]
    pub uplink: Uplink,
    /// Links measured whose paths may cross it.
    pub links: usize,
    /// Those of them that failed a flow rule, by rank, lower rank first.
    pub failed: Vec<[usize; 2]>,
    /// The lowest Gb/s of their bandwidth flows (`None`: none measured bandwidth).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_gbps: Option<f64>,
    /// How many cables join its leaf and spine, as the topology counts
    /// them (`None`: a file written before it was kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cables: Option<u32>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CheckOutcome {
    pub rule: Rule,
    #[serde(flatten)]
    pub item: Checked,
    /// The measured value: Gb/s (µs for latency); `null` when there is none.
    pub value: Option<f64>,
    /// The limit it had to reach, in the same unit; `null` when unknown.
    pub limit: Option<f64>,
    pub verdict: Verdict,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// What one outcome is about.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "item", rename_all = "snake_case")]
pub enum Checked {
    Flow {
        phase: usize,
        flow: FlowId,
        src: usize,
        dst: usize,
    },
    /// A rank's sending (`tx`) or receiving (`rx`) rate in one phase.
    Host {
        phase: usize,
        rank: usize,
        direction: Direction,
    },
    Receiver {
        phase: usize,
        rank: usize,
    },
    Group {
        phase: usize,
        group: String,
    },
    /// The rule as a whole, when it could not be checked on anything.
    Rule,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    Tx,
    Rx,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Pass,
    Fail,
    /// Failed in the run, passed when its suspect was retested alone.
    Cleared,
    /// Could not be evaluated (the note says why); counts as not passed.
    Unknown,
}

/// A host or link blamed for failing flow checks.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Suspect {
    #[serde(flatten)]
    pub kind: SuspectKind,
    /// Why it is suspected, in words.
    pub evidence: String,
    pub retest: Retest,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "suspect", rename_all = "snake_case")]
pub enum SuspectKind {
    /// Every link of this host failed: of each of its ranks where it has
    /// several (`ranks`, one per NIC on a rail fabric; `rank` is the first).
    Host {
        rank: usize,
        host: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        ranks: Vec<usize>,
    },
    /// Every link of this rank failed while other ranks of its host passed:
    /// the NIC it uses alone, or the cable from it, where known.
    Nic(NicEnd),
    /// A NIC suspect whose own link (its interface, or its RDMA port) went
    /// down or recovered from errors during the run (`link_events` of
    /// them): the physical link, the cable or optic from it to `cable`
    /// (its leaf and port, where known), rather than the NIC.
    Cable {
        #[serde(flatten)]
        end: NicEnd,
        link_events: usize,
    },
    /// This link failed while both its hosts passed elsewhere.
    Link { a: usize, b: usize, a_host: String, b_host: String },
    /// Every link failed: no one host or link stands out (the threshold, or the whole fabric).
    Fabric,
    /// With a topology: failing links between leaves that all may cross
    /// this leaf–spine uplink, or one of these when the paths cannot tell
    /// them apart (`pairs`: the links it explains, by rank).
    /// `one_way`: the way along it (`spine1 → leaf2`) every failing flow
    /// may have gone while the other way passed, where the flows say so.
    /// `cables`: the cables of those uplinks by their switch ports, where
    /// the topology names them (ibnetdiscover); one cable is the suspect
    /// itself.
    Uplink {
        uplinks: Vec<Uplink>,
        pairs: Vec<[usize; 2]>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        one_way: Vec<Way>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        cables: Vec<UplinkCable>,
    },
    /// With a topology: every host on this leaf (`ranks`) failed every link,
    /// their same-leaf links too: the switch, not each host.
    Leaf { leaf: SwitchName, ranks: Vec<usize> },
}

impl SuspectKind {
    /// The ranks a host, NIC or cable suspect stands for (a host's every
    /// rank, a NIC's one); none for a link or switch.
    pub fn own_ranks(&self) -> Vec<usize> {
        match self {
            SuspectKind::Host { rank, ranks, .. } if ranks.is_empty() => vec![*rank],
            SuspectKind::Host { ranks, .. } => ranks.clone(),
            SuspectKind::Nic(end) | SuspectKind::Cable { end, .. } => vec![end.rank],
            _ => Vec::new(),
        }
    }
}

/// The NIC of a NIC or cable suspect: the rank that uses it alone, its
/// host, its device (`nic`; else its data address) and the leaf and port
/// its cable goes to (`cable`), where known.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NicEnd {
    pub rank: usize,
    pub host: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nic: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cable: Option<String>,
}

impl NicEnd {
    /// `node03 mlx5_1 (rank 5)`, or `node03 of rank 5` where it has no name.
    pub fn named(&self) -> String {
        match &self.nic {
            Some(nic) => format!("{} {nic} (rank {})", self.host, self.rank),
            None => format!("{} of rank {}", self.host, self.rank),
        }
    }
}

/// What retesting a suspect alone showed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum Retest {
    /// Not retested; says why (`--no-retest`, no healthy partner, the run failed).
    NotRun { reason: String },
    /// Failed again alone, in `retest_phases[phase]`: it is bad.
    Confirmed { phase: usize, gbps: f64 },
    /// Passed alone, in `retest_phases[phase]`: the run's failure did not repeat.
    Cleared { phase: usize, gbps: f64 },
    /// An uplink's links failed again in `retest_phases[phase]`, but so did
    /// the links avoiding it: neither confirmed nor cleared (`reason`).
    Inconclusive { phase: usize, reason: String },
}
