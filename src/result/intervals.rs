//! A phase's intervals as they happen. At every boundary after the first,
//! each rank sends what each of its flow ends moved since the one before
//! (in the order of [`ends_by_rank`]) and how long that took. Rank 0
//! closes interval k once every rank has sent it, hands each flow's Gb/s
//! for it on, and keeps only running sums: its memory stays the same
//! however long the window (the lag between the fastest and the slowest
//! rank aside). The launcher journals each closed interval and puts the
//! series back into the phase's result when it ends ([`Series`]).

use std::collections::VecDeque;

use crate::plan::Phase;
use crate::result::PhaseResult;
use crate::scenario::Mode;
use crate::transport::{Counts, Side};
use crate::units::gbps;

/// What is wrong with a rank's reading of an interval (the caller names the rank and phase).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BadReading {
    #[error("rank {rank} is not in the job")]
    NotInJob { rank: usize },
    #[error("sent interval {interval} where {next} was next")]
    OutOfOrder { interval: u32, next: u32 },
    #[error("sent interval {interval} of a window of {last}")]
    PastWindow { interval: u32, last: u32 },
    #[error("sent {sent} readings for interval {interval}, but has {has} flow ends")]
    WrongEnds { sent: usize, interval: u32, has: usize },
    #[error("sent interval {interval} lasting {span_ns} ns")]
    NegativeSpan { interval: u32, span_ns: i64 },
}

/// Each rank's flow ends, in the order the rank is set up with them (flow
/// order, a sender end before a receiver end).
pub fn ends_by_rank(phase: &Phase, ranks: usize) -> Vec<Vec<End>> {
    let mut ends = vec![Vec::new(); ranks];
    for (i, flow) in phase.flows.iter().enumerate() {
        if let Some(src) = ends.get_mut(flow.src) {
            src.push(End { flow: i, side: Side::Sender });
        }
        if let Some(dst) = ends.get_mut(flow.dst) {
            dst.push(End { flow: i, side: Side::Receiver });
        }
    }
    ends
}

/// One flow end a rank plays: the flow's index among its phase's flows,
/// and which side of it the rank is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct End {
    pub flow: usize,
    pub side: Side,
}

/// One closed interval: the bandwidth flows' sum and every flow's own, Gb/s.
#[derive(Clone, Debug, PartialEq)]
pub struct Closed {
    pub interval: u32,
    pub gbps: f64,
    pub flows: Vec<f64>,
}

/// One rank's reading of one interval.
struct Reading {
    span_ns: i64,
    ends: Vec<Counts>,
}

/// One interval not closed yet: the readings of the ranks that sent it.
struct Pending {
    readings: Vec<Option<Reading>>,
    sent: usize,
}

/// Rank 0's view of one phase's intervals.
pub struct PhaseIntervals {
    /// Per rank, how many flow ends it has.
    ends: Vec<usize>,
    /// Per flow, its sender's and its receiver's end (rank, index among
    /// the rank's ends).
    at: Vec<[Option<(usize, usize)>; 2]>,
    /// Per flow, whether it is counted at its receiver first
    /// (`GroupPlan::counted_at_receiver`), else at its sender.
    receiver_first: Vec<bool>,
    bandwidth: Vec<bool>,
    /// Intervals in the window: none past it is taken.
    last: u32,
    /// Per rank, the interval it sends next (they come in order).
    next: Vec<u32>,
    closed: u32,
    /// Intervals `closed + 1`…, each with every rank's reading so far.
    pending: VecDeque<Pending>,
    /// Per rank and end, what it moved over the closed intervals.
    sums: Vec<Vec<Counts>>,
    /// Per rank, the length of the closed intervals on its clock, ns.
    spans_ns: Vec<i64>,
}

impl PhaseIntervals {
    /// `intervals` is how many the window has.
    pub fn new(phase: &Phase, ranks: usize, intervals: u32) -> PhaseIntervals {
        let ends = ends_by_rank(phase, ranks);
        let mut at: Vec<[Option<(usize, usize)>; 2]> = vec![[None; 2]; phase.flows.len()];
        for (rank, list) in ends.iter().enumerate() {
            for (e, &End { flow, side }) in list.iter().enumerate() {
                at[flow][usize::from(side == Side::Receiver)] = Some((rank, e));
            }
        }
        PhaseIntervals {
            at,
            receiver_first: phase.flows.iter().map(|f| phase.groups[f.group].counted_at_receiver()).collect(),
            bandwidth: phase.flows.iter().map(|f| phase.groups[f.group].mode == Mode::Bandwidth).collect(),
            sums: ends.iter().map(|e| vec![Counts::default(); e.len()]).collect(),
            ends: ends.iter().map(Vec::len).collect(),
            last: intervals,
            next: vec![1; ranks],
            closed: 0,
            pending: VecDeque::new(),
            spans_ns: vec![0; ranks],
        }
    }

    /// Takes `rank`'s reading of `interval`; the intervals it closes, in
    /// order. An error names what is wrong with the reading.
    pub fn take(
        &mut self,
        rank: usize,
        interval: u32,
        span_ns: i64,
        ends: Vec<Counts>,
    ) -> Result<Vec<Closed>, BadReading> {
        let Some(&next) = self.next.get(rank) else { return Err(BadReading::NotInJob { rank }) };
        let has = self.ends[rank];
        if interval != next {
            return Err(BadReading::OutOfOrder { interval, next });
        }
        if interval > self.last {
            return Err(BadReading::PastWindow { interval, last: self.last });
        }
        if ends.len() != has {
            return Err(BadReading::WrongEnds { sent: ends.len(), interval, has });
        }
        if span_ns < 0 {
            return Err(BadReading::NegativeSpan { interval, span_ns });
        }
        self.next[rank] += 1;
        let at = (interval - self.closed - 1) as usize;
        let ranks = self.next.len();
        while self.pending.len() <= at {
            self.pending.push_back(Pending { readings: (0..ranks).map(|_| None).collect(), sent: 0 });
        }
        let pending = &mut self.pending[at];
        pending.readings[rank] = Some(Reading { span_ns, ends });
        pending.sent += 1;
        let mut closed = Vec::new();
        while self.pending.front().is_some_and(|p| p.sent == ranks) {
            closed.push(self.close_front(|_| true));
        }
        Ok(closed)
    }

    /// The phase is over: closes what every rank for which `present` holds
    /// has sent (the others were lost), in order, up to the first gap.
    pub fn finish(&mut self, present: impl Fn(usize) -> bool) -> Vec<Closed> {
        let mut closed = Vec::new();
        while self
            .pending
            .front()
            .is_some_and(|p| p.readings.iter().enumerate().all(|(r, x)| x.is_some() || !present(r)))
        {
            closed.push(self.close_front(&present));
        }
        self.pending.clear();
        closed
    }

    fn close_front(&mut self, present: impl Fn(usize) -> bool) -> Closed {
        let Pending { readings, .. } = self.pending.pop_front().expect("a pending interval");
        self.closed += 1;
        for (rank, reading) in readings.iter().enumerate() {
            let Some(reading) = reading.as_ref().filter(|_| present(rank)) else { continue };
            self.spans_ns[rank] = self.spans_ns[rank].saturating_add(reading.span_ns);
            for (sum, moved) in self.sums[rank].iter_mut().zip(&reading.ends) {
                *sum = sum.saturating_add(*moved);
            }
        }
        let flows: Vec<f64> = self
            .at
            .iter()
            .zip(&self.receiver_first)
            .map(|(&[tx, rx], &receiver_first)| {
                let counted = if receiver_first { [rx, tx] } else { [tx, rx] };
                counted
                    .iter()
                    .flatten()
                    .find_map(|&(rank, e)| {
                        let reading = readings[rank].as_ref().filter(|_| present(rank))?;
                        Some(gbps(reading.ends[e].bytes, reading.span_ns as f64 / 1e9))
                    })
                    .unwrap_or(0.0)
            })
            .collect();
        let total = flows.iter().zip(&self.bandwidth).filter(|(_, &b)| b).map(|(g, _)| g).sum();
        Closed { interval: self.closed, gbps: total, flows }
    }

    /// Intervals closed: the common window is that many, from boundary 0.
    pub fn closed(&self) -> u32 {
        self.closed
    }

    /// What flow `flow`'s `side` end moved over the closed intervals.
    pub fn moved(&self, flow: usize, side: Side) -> Option<Counts> {
        let (rank, e) = self.at.get(flow)?[usize::from(side == Side::Receiver)]?;
        Some(self.sums[rank][e])
    }

    /// The closed intervals' length on `rank`'s clock, seconds.
    pub fn span_s(&self, rank: usize) -> f64 {
        self.spans_ns.get(rank).map_or(0.0, |&ns| ns as f64 / 1e9)
    }
}

/// The launcher's copy of the running phase's closed intervals, put back
/// into its result when it ends: 8 bytes per flow per interval.
#[derive(Debug, Default)]
pub struct Series {
    phase: Option<usize>,
    aggregate: Vec<f64>,
    flows: Vec<Vec<f64>>,
}

impl Series {
    /// The next interval of `phase` closed (they come in order): the
    /// aggregate and each flow's Gb/s.
    pub fn push(&mut self, phase: usize, gbps: f64, flows: &[f64]) {
        if self.phase != Some(phase) {
            *self = Series { phase: Some(phase), ..Series::default() };
        }
        self.aggregate.push(gbps);
        self.flows.resize_with(flows.len(), Vec::new);
        for (series, &g) in self.flows.iter_mut().zip(flows) {
            series.push(g);
        }
    }

    /// Puts the phase's intervals into its result (in flow order, as the
    /// phase's flows are), and forgets them.
    pub fn fill(&mut self, result: &mut PhaseResult) {
        let Series { phase, aggregate, flows } = std::mem::take(self);
        if phase != Some(result.index) {
            return;
        }
        result.interval_gbps = aggregate;
        for (flow, series) in result.flows.iter_mut().zip(flows) {
            flow.interval_gbps = series;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::{hostfile, plan, scenario};

    /// Phase 0 of a fan-in on `ranks` ranks: flow k goes from rank k+1 to rank 0.
    fn fan_in(ranks: usize) -> Phase {
        let hosts: String = (1..=ranks).map(|i| format!("h{i}\n")).collect();
        let hosts = hostfile::parse(&hosts, Path::new("hosts")).unwrap();
        let (s, _) = scenario::parse("[[group]]\nname = \"g\"\npattern = \"fan-in\"\n", Path::new("s.toml")).unwrap();
        plan::build(&hosts, &s).unwrap().phases.remove(0)
    }

    const S: i64 = 1_000_000_000;

    #[test]
    fn an_interval_closes_once_every_rank_has_sent_it() {
        let mut iv = PhaseIntervals::new(&fan_in(3), 3, 10);
        // Rank 1 runs ahead; rank 0 receives flows 0 and 1, counting them.
        assert_eq!(iv.take(1, 1, S, vec![Counts { bytes: 7, messages: 1 }]), Ok(vec![]));
        assert_eq!(iv.take(1, 2, S, vec![Counts { bytes: 7, messages: 1 }]), Ok(vec![]));
        assert_eq!(
            iv.take(
                0,
                1,
                S,
                vec![Counts { bytes: 1_000_000_000, messages: 10 }, Counts { bytes: 500_000_000, messages: 5 }]
            ),
            Ok(vec![])
        );
        let closed = iv.take(2, 1, S, vec![Counts { bytes: 9, messages: 1 }]).unwrap();
        assert_eq!(closed, [Closed { interval: 1, gbps: 12.0, flows: vec![8.0, 4.0] }]);
        assert_eq!(
            iv.take(0, 2, 2 * S, vec![Counts { bytes: 1_000_000_000, messages: 10 }, Counts { bytes: 0, messages: 0 }]),
            Ok(vec![])
        );
        let closed = iv.take(2, 2, S, vec![Counts { bytes: 9, messages: 1 }]).unwrap();
        assert_eq!(closed, [Closed { interval: 2, gbps: 4.0, flows: vec![4.0, 0.0] }], "over rank 0's 2 s");
        assert_eq!(iv.closed(), 2);
        assert_eq!(iv.moved(0, Side::Receiver), Some(Counts { bytes: 2_000_000_000, messages: 20 }));
        assert_eq!(iv.moved(0, Side::Sender), Some(Counts { bytes: 14, messages: 2 }));
        assert_eq!(iv.moved(1, Side::Sender), Some(Counts { bytes: 18, messages: 2 }));
        assert_eq!((iv.span_s(0), iv.span_s(1)), (3.0, 2.0));
    }

    #[test]
    fn the_end_closes_what_the_ranks_left_sent_up_to_the_first_gap() {
        let mut iv = PhaseIntervals::new(&fan_in(3), 3, 10);
        for k in 1..=3 {
            iv.take(1, k, S, vec![Counts { bytes: 125_000_000, messages: 1 }]).unwrap();
        }
        iv.take(2, 1, S, vec![Counts { bytes: 250_000_000, messages: 1 }]).unwrap();
        iv.take(2, 2, S, vec![Counts { bytes: 250_000_000, messages: 1 }]).unwrap();
        // The receiver, rank 0, was lost: the senders count, and interval 3
        // (rank 2 never sent it) stays open.
        let closed = iv.finish(|rank| rank != 0);
        assert_eq!(
            closed,
            [
                Closed { interval: 1, gbps: 3.0, flows: vec![1.0, 2.0] },
                Closed { interval: 2, gbps: 3.0, flows: vec![1.0, 2.0] }
            ]
        );
        assert_eq!(iv.closed(), 2);
        assert_eq!(iv.moved(0, Side::Sender), Some(Counts { bytes: 250_000_000, messages: 2 }));
        assert_eq!(iv.finish(|_| true), [], "nothing is left pending");
    }

    #[test]
    fn the_flows_move_into_the_result_of_their_phase_only() {
        let mut series = Series::default();
        series.push(0, 3.0, &[1.0, 2.0]);
        series.push(0, 4.0, &[1.5, 2.5]);
        let fixture = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/v3-fan-in.json");
        let run: crate::result::RunResult = serde_json::from_str(&std::fs::read_to_string(fixture).unwrap()).unwrap();
        let mut phase = run.phases[0].clone();
        phase.index = 1;
        series.fill(&mut phase);
        assert_eq!(phase.interval_gbps, run.phases[0].interval_gbps, "another phase's intervals are not its own");
        series.push(0, 3.0, &[1.0, 2.0]);
        phase.index = 0;
        series.fill(&mut phase);
        assert_eq!(phase.interval_gbps, [3.0]);
        assert_eq!(phase.flows[0].interval_gbps, [1.0]);
        assert_eq!(phase.flows[1].interval_gbps, [2.0]);
    }
}
