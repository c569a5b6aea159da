//! The receiving side of a bandwidth shard: counts receives (send,
//! send-with-imm, write-with-imm) and posts them again at once, so the
//! sender never meets an empty receive queue for long (RNR); and the
//! passive end of one-sided ops, which only keeps its memory registered.

use std::time::Instant;

use super::connect::{wr_qp, FlowResources, Shard, Step};
use super::error::RdmaError;
use super::ffi::Wc;
use super::stream::{poll_err, positions, wc_error, EVENT_NAP};
use super::validate::SlotCheck;
use crate::plan::{Connection, Op, UD_GRH};
use crate::transport::task::Turn;
use crate::transport::FlowCounters;

/// The receiving side of one shard of a bandwidth flow.
pub(super) struct Receiver {
    /// Receives to count before it is done (`iterations` per QP).
    target: Option<u64>,
    received: u64,
    pos_of: Vec<usize>,
    /// Receives completed per QP in this step, to post again.
    consumed: Vec<usize>,
    wcs: Vec<Wc>,
    check: Option<SlotCheck>,
    armed: bool,
}

impl Receiver {
    pub(super) fn new(res: &FlowResources, shard: &Shard) -> Receiver {
        let p = &res.params;
        Receiver {
            target: p.knobs.iterations.map(|t| t * shard.qps.len() as u64),
            received: 0,
            pos_of: positions(shard),
            consumed: vec![0; shard.qps.len()],
            wcs: vec![Wc::default(); p.knobs.poll_batch as usize],
            check: SlotCheck::of(res),
            armed: false,
        }
    }

    /// One step: poll the CQ once, check and post again what completed.
    pub(super) fn step(&mut self, Step { res, shard, counters }: Step, stop: bool) -> Result<Turn, RdmaError> {
        if stop {
            return Ok(Turn::Done(Ok(())));
        }
        if std::mem::take(&mut self.armed) {
            shard.cq.take_events().map_err(|e| poll_err(res, e))?;
        }
        let mut n = shard.cq.poll(&mut self.wcs).map_err(|e| poll_err(res, e))?;
        if n == 0 && shard.cq.is_event_driven() {
            // Armed, then polled once more: a receive that landed before
            // the arm is taken now, any later one wakes the channel.
            shard.cq.arm().map_err(|e| poll_err(res, e))?;
            self.armed = true;
            n = shard.cq.poll(&mut self.wcs).map_err(|e| poll_err(res, e))?;
            if n == 0 {
                return Ok(Turn::Wait(Some(Instant::now() + EVENT_NAP)));
            }
        }
        if n == 0 {
            return Ok(Turn::Again);
        }
        self.complete(res, shard, counters, n)?;
        Ok(match self.target.is_some_and(|t| self.received >= t) {
            true => Turn::Done(Ok(())),
            false => Turn::Again,
        })
    }

    /// Counts the `n` receives just polled, checks their slots where the
    /// flow validates, and posts as many again on each QP.
    fn complete(
        &mut self,
        res: &FlowResources,
        shard: &mut Shard,
        counters: &FlowCounters,
        n: usize,
    ) -> Result<(), RdmaError> {
        let msg = res.params.effective_message_size();
        let write_imm = res.params.op == Op::WriteImm;
        // A UD receive's byte count includes the GRH ahead of the message.
        let grh = if res.params.knobs.connection == Connection::Ud { UD_GRH as u32 } else { 0 };
        let mut bytes = 0u64;
        for wc in &self.wcs[..n] {
            if wc.status != 0 {
                return Err(wc_error(res, wc));
            }
            let k = self.pos_of.get(wr_qp(wc.wr_id)).copied().unwrap_or(usize::MAX);
            if let Some(c) = self.consumed.get_mut(k) {
                *c += 1;
            }
            bytes += if write_imm { msg } else { u64::from(wc.byte_len.saturating_sub(grh)) };
        }
        for (k, q) in shard.qps.iter_mut().enumerate() {
            let consumed = std::mem::take(&mut self.consumed[k]);
            if consumed == 0 {
                continue;
            }
            // Before the slot can take another message.
            if let Some(check) = &mut self.check {
                check.check(res, (q.index, q.local_off), consumed as u64, counters)?;
            }
            q.qp.post_recvs(consumed).map_err(|e| RdmaError::Post {
                flow: res.label.clone(),
                qp: q.index,
                what: "receives",
                reason: e.to_string(),
            })?;
        }
        counters.add(bytes, n as u64);
        self.received += n as u64;
        Ok(())
    }
}

/// The passive end of one-sided ops: nothing to do until the stop; then,
/// where the flow validates writes, what the last writes left in each slot.
pub(super) fn passive_step(Step { res, shard, counters }: Step, stop: bool) -> Result<Turn, RdmaError> {
    if !stop {
        return Ok(Turn::Wait(None));
    }
    if let Some(mut check) = SlotCheck::of(res) {
        check.check_all(res, shard, counters)?;
    }
    Ok(Turn::Done(Ok(())))
}
