//! A flow's shards as engine tasks: each shard (its QPs and their CQ) is
//! one lane that an engine steps beside many others — a bandwidth
//! sender or receiver, or one side of a latency flow (one shard). The
//! shards of one flow share its resources (device, PD, memory), which go
//! when the last of them closes.

use std::os::fd::RawFd;
use std::sync::Arc;

use mio::unix::SourceFd;
use mio::{Interest, Registry, Token};

use super::connect::{ConnectedFlow, FlowResources, Shard, Step};
use super::error::RdmaError;
use super::latency::PingPong;
use super::open_loop::Prober;
use super::receive::{passive_step, Receiver};
use super::stream::Sender;
use crate::histogram::Histogram;
use crate::plan::Mode;
use crate::transport::task::{FlowTask, Turn};
use crate::transport::{FlowCounters, Side};

/// What a shard does on its side of the flow.
enum Work {
    Send(Sender),
    Receive(Receiver),
    /// The target of one-sided ops (bandwidth or latency).
    Passive,
    /// Latency: one side of a ping-pong.
    PingPong(PingPong),
    /// Latency: the initiator of open-loop probes (its schedules make it large).
    Probe(Box<Prober>),
}

/// One shard of a flow, run by an engine.
pub(super) struct ShardTask {
    // Drop order: the shard's QPs and CQ before the flow's resources.
    pub(super) shard: Shard,
    work: Work,
    counters: Arc<FlowCounters>,
    pub(super) res: Arc<FlowResources>,
}

impl ConnectedFlow {
    /// The flow as one task per shard, all counting into `counters` (the
    /// rail's lane); a bandwidth flow's rate, where it has one, split
    /// evenly over them; a latency flow's, its open-loop probes'.
    pub fn tasks(self, counters: Arc<FlowCounters>) -> Vec<Box<dyn FlowTask>> {
        let tasks = self.shard_tasks(counters);
        tasks.into_iter().map(|task| Box::new(task) as Box<dyn FlowTask>).collect()
    }

    pub(super) fn shard_tasks(mut self, counters: Arc<FlowCounters>) -> Vec<ShardTask> {
        let pace = self.task_pace();
        let shards = std::mem::take(&mut self.res.shards);
        let res = Arc::new(self.res);
        let one_sided = !res.params.op.needs_receives();
        let latency = res.params.mode == Mode::Latency;
        shards
            .into_iter()
            .map(|shard| {
                let work = match (res.side, latency, res.pace) {
                    // Open loop: the flow's rate is its probes' (latency has one shard).
                    (Side::Sender, true, Some(per_s)) => Work::Probe(Box::new(Prober::new(&res, &shard, per_s))),
                    (_, true, _) => PingPong::new(&res, &shard).map_or(Work::Passive, Work::PingPong),
                    (Side::Sender, false, _) => Work::Send(Sender::new(&res, &shard, pace)),
                    (Side::Receiver, false, _) if one_sided => Work::Passive,
                    (Side::Receiver, false, _) => Work::Receive(Receiver::new(&res, &shard)),
                };
                ShardTask { shard, work, counters: counters.clone(), res: res.clone() }
            })
            .collect()
    }

    /// The messages per second each of its tasks posts (`None`: unpaced).
    pub fn task_pace(&self) -> Option<f64> {
        self.res.pace.map(|per_s| per_s / self.res.shards.len().max(1) as f64)
    }
}

impl ShardTask {
    /// One step of its work; an error ends it (`Turn::Done` is then `Ok`).
    pub(super) fn turn(&mut self, stop: bool) -> Result<Turn, RdmaError> {
        let on = Step { res: &self.res, shard: &mut self.shard, counters: &self.counters };
        match &mut self.work {
            Work::Send(sender) => sender.step(on, stop),
            Work::Receive(receiver) => receiver.step(on, stop),
            Work::Passive => passive_step(on, stop),
            Work::PingPong(ping_pong) => ping_pong.step(on, stop),
            Work::Probe(prober) => prober.step(on, stop),
        }
    }

    /// Ends it: the round trips it recorded, when it is a latency initiator.
    pub(super) fn finish(self) -> Option<Histogram> {
        match self.work {
            Work::PingPong(ping_pong) => ping_pong.round_trips(),
            Work::Probe(prober) => prober.round_trips(),
            Work::Send(_) | Work::Receive(_) | Work::Passive => None,
        }
    }
}

impl FlowTask for ShardTask {
    /// Event mode: the CQ's completion channel wakes the engine.
    fn register(&mut self, registry: &Registry, token: Token) -> std::io::Result<()> {
        match self.shard.cq.channel_fd() {
            Some(fd) => registry.register(&mut SourceFd(&(fd as RawFd)), token, Interest::READABLE),
            None => Ok(()),
        }
    }

    fn progress(&mut self, stop: bool) -> Turn {
        self.turn(stop).unwrap_or_else(|e| Turn::Done(Err(e.into())))
    }

    fn close(self: Box<Self>) -> Option<Histogram> {
        self.finish()
    }

    fn latency(&self) -> bool {
        matches!(self.work, Work::PingPong(_) | Work::Probe(_))
    }

    fn polls_itself(&self) -> bool {
        !self.shard.cq.is_event_driven()
    }

    fn poll_group(&self) -> Option<usize> {
        self.shard.cq.shared_id()
    }
}
