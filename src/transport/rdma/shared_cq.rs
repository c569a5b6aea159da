//! Completion queues that the shards of many flows share: the shards one
//! engine steps poll one CQ per device (more once one is full), not one
//! each, so an engine with a thousand shards polls a few CQs, not a
//! thousand.
//!
//! A shard polls its share: first what earlier polls of the CQ by the
//! other shards left in its inbox, then the CQ itself, whose completions of
//! the other shards' QPs go to their inboxes by QP number. The shards of a
//! CQ run on one engine, so its lock is never contended (it is there so
//! that a wrong assignment is slow, not unsound). Busy-poll only: in event
//! mode each shard keeps its own CQ and completion channel, which its
//! engine's epoll waits on.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::sync::{Arc, Mutex, MutexGuard};

use sideway::ibverbs::completion::BasicCompletionQueue;

use super::ffi::{Cq, Wc};

/// A shared CQ holds at least this many completions (the device's
/// `max_cqe` permitting), so that most groups need one.
const CQ_ENTRIES: u32 = 16_384;

/// Which shared CQ a shard polls, as its caller groups shards: the shards
/// of one group (on one device) share a CQ, and must run on one engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CqGroup(pub u32);

/// The shared CQs of the flows one rank prepares for a phase, by device
/// context and group: the one each group fills now.
#[derive(Default)]
pub struct CqPool {
    filling: HashMap<(usize, CqGroup), Arc<Mutex<Hub>>>,
}

/// A flow's shards, about to be made on a device: what their caller
/// groups them by.
pub struct ShardsOn<'a> {
    pub device: &'a str,
    /// The device's NUMA node, where the host has one.
    pub node: Option<i32>,
    pub shards: usize,
}

/// How the flows a rank prepares share CQs: the pool, and the group of
/// each of a flow's shards (its CQ's), which the caller chooses once it
/// knows the flow's device.
pub struct Sharing<'a> {
    pub pool: &'a mut CqPool,
    pub groups: &'a mut dyn FnMut(ShardsOn) -> Vec<CqGroup>,
}

/// The CQ a shard polls: its own, or its share of one.
pub(crate) enum ShardCq {
    Own(Cq),
    Shared(CqShare),
}

/// One shard's share of a shared CQ; leaving it drops its QPs' routes.
pub(crate) struct CqShare {
    hub: Arc<Mutex<Hub>>,
    member: usize,
}

struct Hub {
    cq: Cq,
    /// Completions not yet promised to a member's QPs.
    room: u32,
    routes: Routes,
}

/// Which member each QP's completions go to, and what waits for each.
#[derive(Default)]
struct Routes {
    member_of: HashMap<u32, usize>,
    inboxes: Vec<VecDeque<Wc>>,
    scratch: Vec<Wc>,
}

impl CqPool {
    /// A share of group `group`'s CQ on context `context` for a shard that
    /// may have `need` completions outstanding and polls `batch` at once;
    /// `make(entries)` creates a CQ (made with QP numbers in its
    /// completions) when the group has none with room left. What a poll
    /// needs is allocated here: polling allocates nothing.
    pub(crate) fn share<E>(
        &mut self,
        (context, group): (usize, CqGroup),
        (need, batch): (u32, usize),
        max_entries: u32,
        make: impl FnOnce(u32) -> Result<Cq, E>,
    ) -> Result<CqShare, E> {
        let fits = |hub: &Arc<Mutex<Hub>>| lock(hub).room >= need;
        let hub = match self.filling.get(&(context, group)).filter(|hub| fits(hub)) {
            Some(hub) => hub.clone(),
            None => {
                let entries = need.max(CQ_ENTRIES).min(max_entries.max(1));
                let hub = Hub { cq: make(entries)?, room: entries, routes: Routes::default() };
                let hub = Arc::new(Mutex::new(hub));
                self.filling.insert((context, group), hub.clone());
                hub
            }
        };
        let member = {
            let mut h = lock(&hub);
            h.room = h.room.saturating_sub(need);
            if h.routes.scratch.len() < batch {
                h.routes.scratch.resize(batch, Wc::default());
            }
            h.routes.join(need as usize)
        };
        Ok(CqShare { hub, member })
    }
}

fn lock(hub: &Mutex<Hub>) -> MutexGuard<'_, Hub> {
    // A member that panicked mid-poll left the routes whole (no step of
    // `Routes` can panic half-way): carry on.
    hub.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl CqShare {
    /// The CQ, for the member's QPs to be created on.
    pub(crate) fn handle(&self) -> Arc<BasicCompletionQueue> {
        lock(&self.hub).cq.handle().clone()
    }

    /// Routes QP `qp_num`'s completions to this member.
    pub(crate) fn add_qp(&self, qp_num: u32) {
        lock(&self.hub).routes.member_of.insert(qp_num, self.member);
    }

    /// Takes up to `out.len()` of this member's completions: those waiting
    /// for it, then those the CQ has.
    fn poll(&self, out: &mut [Wc]) -> io::Result<usize> {
        let mut hub = lock(&self.hub);
        let Hub { cq, routes, .. } = &mut *hub;
        let n = routes.take(self.member, out);
        if n == out.len() {
            return Ok(n);
        }
        let room = (out.len() - n).min(routes.scratch.len());
        let polled = cq.poll(&mut routes.scratch[..room])?;
        Ok(routes.sort(self.member, polled, out, n))
    }
}

impl Drop for CqShare {
    fn drop(&mut self) {
        lock(&self.hub).routes.leave(self.member);
    }
}

impl Routes {
    /// A new member, whose inbox holds `need` (what it may have outstanding).
    fn join(&mut self, need: usize) -> usize {
        self.inboxes.push(VecDeque::with_capacity(need));
        self.inboxes.len() - 1
    }

    /// Forgets `member`'s QPs: their completions still in the CQ are
    /// dropped when polled (the member's QPs are gone).
    fn leave(&mut self, member: usize) {
        self.member_of.retain(|_, m| *m != member);
        self.inboxes[member] = VecDeque::new();
    }

    /// Moves into `out` what waits for `member`; how many.
    fn take(&mut self, member: usize, out: &mut [Wc]) -> usize {
        let inbox = &mut self.inboxes[member];
        let n = inbox.len().min(out.len());
        for (slot, wc) in out.iter_mut().zip(inbox.drain(..n)) {
            *slot = wc;
        }
        n
    }

    /// Sorts the first `polled` completions of `scratch`: `member`'s into
    /// `out` after its first `n`, the other members' into their inboxes,
    /// those of QPs no member has any more dropped. How many `out` holds.
    /// No more were polled than `out` has room for, so all of `member`'s fit.
    fn sort(&mut self, member: usize, polled: usize, out: &mut [Wc], mut n: usize) -> usize {
        for wc in &self.scratch[..polled] {
            match self.member_of.get(&wc.qp_num) {
                Some(&m) if m == member => {
                    out[n] = *wc;
                    n += 1;
                }
                Some(&m) => self.inboxes[m].push_back(*wc),
                None => {}
            }
        }
        n
    }
}

impl ShardCq {
    /// The CQ, for the shard's QPs to be created on.
    pub(crate) fn handle(&self) -> Arc<BasicCompletionQueue> {
        match self {
            ShardCq::Own(cq) => cq.handle().clone(),
            ShardCq::Shared(share) => share.handle(),
        }
    }

    /// Takes up to `out.len()` of the shard's completions without blocking.
    pub(crate) fn poll(&mut self, out: &mut [Wc]) -> io::Result<usize> {
        match self {
            ShardCq::Own(cq) => cq.poll(out),
            ShardCq::Shared(share) => share.poll(out),
        }
    }

    /// Whether it waits on a completion channel (never a shared CQ).
    pub(crate) fn is_event_driven(&self) -> bool {
        matches!(self, ShardCq::Own(cq) if cq.is_event_driven())
    }

    /// Event mode: requests a notification for the next completion.
    pub(crate) fn arm(&self) -> io::Result<()> {
        match self {
            ShardCq::Own(cq) if cq.is_event_driven() => cq.arm(),
            _ => Ok(()),
        }
    }

    /// Event mode: takes the events waiting on the channel.
    pub(crate) fn take_events(&mut self) -> io::Result<()> {
        match self {
            ShardCq::Own(cq) => cq.take_events(),
            ShardCq::Shared(_) => Ok(()),
        }
    }

    /// Event mode: the completion channel's fd, for an engine's poll.
    pub(crate) fn channel_fd(&self) -> Option<std::os::fd::RawFd> {
        match self {
            ShardCq::Own(cq) => cq.channel_fd(),
            ShardCq::Shared(_) => None,
        }
    }

    /// What names the shared CQ it polls, if any: the shards of one CQ
    /// run on one engine.
    pub(crate) fn shared_id(&self) -> Option<usize> {
        match self {
            ShardCq::Own(_) => None,
            ShardCq::Shared(share) => Some(Arc::as_ptr(&share.hub) as usize),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wc(qp_num: u32, wr_id: u64) -> Wc {
        Wc { wr_id, qp_num, ..Wc::default() }
    }

    fn ids(wcs: &[Wc]) -> Vec<u64> {
        wcs.iter().map(|w| w.wr_id).collect()
    }

    #[test]
    fn completions_reach_the_member_whose_qp_they_are_in_order() {
        let mut r = Routes::default();
        let (a, b) = (r.join(4), r.join(4));
        r.member_of.extend([(10, a), (11, a), (20, b)]);
        r.scratch = vec![wc(10, 1), wc(20, 2), wc(11, 3), wc(20, 4)];
        let mut out = [Wc::default(); 4];
        let n = r.sort(a, 4, &mut out, 0);
        assert_eq!(ids(&out[..n]), [1, 3], "a's own, in CQ order");
        assert_eq!(r.take(b, &mut out), 2, "b's waited in its inbox");
        assert_eq!(ids(&out[..2]), [2, 4]);
        assert_eq!(r.take(b, &mut out), 0, "taken once");
    }

    #[test]
    fn an_inbox_gives_no_more_than_there_is_room_for() {
        let mut r = Routes::default();
        let (a, b) = (r.join(4), r.join(4));
        r.member_of.extend([(1, a), (2, b)]);
        r.scratch = vec![wc(2, 1), wc(2, 2), wc(2, 3)];
        let mut out = [Wc::default(); 3];
        assert_eq!(r.sort(a, 3, &mut out, 0), 0);
        let mut two = [Wc::default(); 2];
        assert_eq!(r.take(b, &mut two), 2);
        assert_eq!(ids(&two), [1, 2]);
        assert_eq!(r.take(b, &mut two), 1);
        assert_eq!(two[0].wr_id, 3, "the rest stays, in order");
    }

    #[test]
    fn a_member_that_left_is_forgotten_and_its_completions_dropped() {
        let mut r = Routes::default();
        let (a, b) = (r.join(4), r.join(4));
        r.member_of.extend([(1, a), (2, b)]);
        r.inboxes[b].push_back(wc(2, 9));
        r.leave(b);
        assert!(r.inboxes[b].is_empty(), "its inbox goes with it");
        r.scratch = vec![wc(2, 1), wc(1, 2), wc(77, 3)];
        let mut out = [Wc::default(); 3];
        let n = r.sort(a, 3, &mut out, 0);
        assert_eq!(ids(&out[..n]), [2], "b's and an unknown QP's completions are dropped");
        assert!(r.inboxes[b].is_empty());
    }
}
