//! One phase's endpoint exchange: which ranks have published their flow
//! ends, what each rank still waits for, and which ranks are connected.
//!
//! A rank is sent its peers (the far ends of its own flows) as soon as every
//! one of them is published and the rank has its Setup, not once every
//! rank's are. A rank whose peers are known when it joins gets Welcome,
//! Setup and Peers in one write and answers Endpoints and Ready without
//! waiting for the slowest rank: at 16 384 ranks that is about 30 % fewer
//! writes on both sides and a round trip per rank (docs/PERFORMANCE.md).
//! So Ready may come while other ranks still publish; Start still waits
//! for every Ready.

use crate::control::gather::Gather;
use crate::control::wire::FlowEndpoint;
use crate::plan::Phase;
use crate::scenario::rdma::ConnectMethod;
use crate::transport::Side;

/// A rank whose peers are all known, and those peers (the far ends of its
/// flows): what it is sent next.
pub(super) struct Known {
    pub rank: usize,
    pub peers: Vec<FlowEndpoint>,
}

pub(super) struct Wiring {
    /// Each flow's published ends (flow ids are 0..flows): sender, receiver.
    ends: Vec<[Option<FlowEndpoint>; 2]>,
    /// Each flow's two ranks: sender, receiver.
    ranks: Vec<[usize; 2]>,
    /// Each rank's ends, in plan order: its flow and its side of it.
    mine: Vec<Vec<(usize, Side)>>,
    /// How many far ends of its flows each rank still waits for.
    waiting: Vec<usize>,
    /// The rank was sent its Setup; the rank was sent its peers.
    set_up: Vec<bool>,
    sent: Vec<bool>,
    published: Gather<()>,
    ready: Gather<()>,
    /// Every rank's peers wait for every rank's endpoints: a phase with
    /// rdma_cm flows, whose active end starts a 10 s handshake when it has
    /// its peers and whose passive end answers only once it has its own.
    together: bool,
}

impl Wiring {
    /// The exchange of `phase` (none: a plan without it, nothing to wire).
    pub fn new(phase: Option<&Phase>, ranks: usize) -> Wiring {
        let (flows, groups) = phase.map_or((&[][..], &[][..]), |p| (&p.flows[..], &p.groups[..]));
        let mut mine = vec![Vec::new(); ranks];
        for (i, flow) in flows.iter().enumerate() {
            mine[flow.src].push((i, Side::Sender));
            mine[flow.dst].push((i, Side::Receiver));
        }
        let together = groups.iter().any(|g| g.rdma.as_ref().is_some_and(|r| r.knobs.connect == ConnectMethod::RdmaCm));
        Wiring {
            ends: vec![[None, None]; flows.len()],
            ranks: flows.iter().map(|f| [f.src, f.dst]).collect(),
            waiting: mine.iter().map(Vec::len).collect(),
            mine,
            set_up: vec![false; ranks],
            sent: vec![false; ranks],
            published: Gather::new(ranks),
            ready: Gather::new(ranks),
            together,
        }
    }

    /// `rank` was sent its Setup: its peers, if they are all known now.
    pub fn set_up(&mut self, rank: usize) -> Option<Vec<FlowEndpoint>> {
        self.set_up[rank] = true;
        self.due(rank).then(|| self.peers_of(rank))
    }

    /// Whether `rank` has published its ends already.
    pub fn has_published(&self, rank: usize) -> bool {
        self.published.has(rank)
    }

    /// `rank`'s own ends (checked against the plan, published once): the
    /// ranks whose peers are all known now, with their peers.
    pub fn publish(&mut self, rank: usize, list: Vec<FlowEndpoint>) -> Vec<Known> {
        for e in list {
            if let Some(end) = self.ends.get_mut(e.flow as usize) {
                let side = side_index(e.side);
                end[side] = Some(e);
            }
        }
        let all = self.published.put(rank, ());
        let mut known = Vec::new();
        for i in 0..self.mine[rank].len() {
            let (flow, side) = self.mine[rank][i];
            let far = self.ranks[flow][1 - side_index(side)];
            self.waiting[far] -= 1;
            if self.due(far) {
                known.push(Known { rank: far, peers: self.peers_of(far) });
            }
        }
        if all {
            for r in 0..self.sent.len() {
                if self.due(r) {
                    known.push(Known { rank: r, peers: self.peers_of(r) });
                }
            }
        }
        known
    }

    /// `rank` connected its flows: whether every rank has now; an error if
    /// it was never sent its peers.
    pub fn ready(&mut self, rank: usize) -> Result<bool, EarlyReady> {
        if !self.sent[rank] {
            return Err(EarlyReady);
        }
        Ok(self.ready.put(rank, ()))
    }

    pub fn all_published(&self) -> bool {
        self.published.complete()
    }

    /// Ranks that have not published, or (once all have) not said Ready.
    pub fn missing(&self) -> Vec<usize> {
        if self.all_published() {
            self.ready.missing()
        } else {
            self.published.missing()
        }
    }

    /// Whether `rank`'s peers are to be sent now (once).
    fn due(&self, rank: usize) -> bool {
        let known = if self.together { self.all_published() } else { self.waiting[rank] == 0 };
        known && self.set_up[rank] && !self.sent[rank]
    }

    /// The published far ends of `rank`'s flows, in plan order; marks them sent.
    fn peers_of(&mut self, rank: usize) -> Vec<FlowEndpoint> {
        self.sent[rank] = true;
        self.mine[rank].iter().filter_map(|&(flow, side)| self.ends[flow][1 - side_index(side)].clone()).collect()
    }
}

fn side_index(side: Side) -> usize {
    match side {
        Side::Sender => 0,
        Side::Receiver => 1,
    }
}

/// A rank said Ready before it was sent its peers.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("said Ready before it was sent its peers")]
pub struct EarlyReady;
