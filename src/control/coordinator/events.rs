//! What the coordinator gives out: frames for a connection, what the
//! driver does with one, and the events the launcher is told.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::control::wire::{ToWorker, Window};
use crate::hostfacts::lldp::LldpOutput;
use crate::result::{PhaseResult, RankProbe};

use super::ConnId;

#[derive(Clone, Debug, PartialEq)]
pub enum Output {
    Send(ConnId, ToWorker),
    /// The connection said a valid Hello: read frames of every size from
    /// it now (until then, one Hello-sized frame).
    Admit(ConnId),
    /// Drop the connection (after sending what was queued to it).
    Close(ConnId),
    Event(Event),
}

/// What the launcher is told, as it happens.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Event {
    /// A connection was refused; the run goes on.
    Rejected {
        conn: ConnId,
        reason: String,
    },
    Joined {
        rank: usize,
        host: String,
        joined: usize,
        total: usize,
    },
    PhaseStarted {
        phase: usize,
        name: String,
        window: Window,
    },
    /// One interval every rank has sent (they come in order, from 1): the
    /// bandwidth flows' sum and each flow's own, in the phase's flow
    /// order, Gb/s. Rank 0 keeps none of them.
    Progress {
        phase: usize,
        interval: u32,
        gbps: f64,
        flows: Vec<f64>,
    },
    /// A rank's RDMA inventory arrived (once per rank, soon after it joined).
    Probed(RankProbe),
    /// A rank's `lldpctl -f json` text, or why it has none (only when the
    /// coordinator was asked to gather them).
    Neighbours {
        rank: usize,
        host: String,
        lldp: LldpOutput,
    },
    PhaseDone(Box<PhaseResult>),
    Finished,
    Failed(RunFailure),
}

/// Why a run ended early, naming the rank and host where one is to blame.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunFailure {
    pub rank: Option<usize>,
    pub host: Option<String>,
    pub message: String,
    /// The rank refused before any end was made (the GPU preflight):
    /// nothing ran.
    #[serde(default)]
    pub refused: bool,
}

impl std::error::Error for RunFailure {}

impl fmt::Display for RunFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.rank, &self.host) {
            (Some(rank), Some(host)) => write!(f, "rank {rank} ({host}): {}", self.message),
            (Some(rank), None) => write!(f, "rank {rank}: {}", self.message),
            _ => f.write_str(&self.message),
        }
    }
}
