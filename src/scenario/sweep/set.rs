//! What one sweep point changes in a copy of the scenario: each
//! parameter's value read and set on the groups (or stress tables) it names.

use crate::scenario::rails::Rails;
use crate::scenario::rate::Rate;
use crate::scenario::rdma::{CompletionMode, RdmaKnobs};
use crate::scenario::stress::Threads;
use crate::scenario::{GroupSpec, Pattern, RankSet, Scenario, Transport};
use crate::units::ByteSize;

use super::{Parameter, PointError, Value};

/// The value read as a whole number.
pub(super) fn whole_number(value: &Value) -> Result<u64, PointError> {
    match value {
        Value::Number(n) => Ok(*n),
        Value::Text(t) => t.parse().map_err(|_| PointError::NotWhole(t.clone())),
    }
}

/// The value read as a message size (a number of bytes, or "64KiB").
pub(super) fn message_size(value: &Value) -> Result<ByteSize, PointError> {
    let size = match value {
        Value::Number(n) => ByteSize(*n),
        Value::Text(t) => ByteSize::parse(t)?,
    };
    if size.bytes() == 0 {
        return Err(PointError::EmptyMessage);
    }
    Ok(size)
}

/// The value read as a rate, which needs its unit.
pub(super) fn rate(value: &Value) -> Result<Rate, PointError> {
    match value {
        Value::Text(t) => Ok(Rate::parse(t)?),
        Value::Number(n) => Err(PointError::RateWithoutUnit(*n)),
    }
}

/// Keeps `k` senders of fan-in group `g` in a job of `ranks` (`usize::MAX`
/// while the job size is not known: checked again when the plan knows it).
pub(super) fn set_senders(g: &mut GroupSpec, k: usize, ranks: usize) -> Result<(), PointError> {
    if g.pattern != Pattern::FanIn {
        return Err(PointError::SendersNeedFanIn { group: g.name.clone(), pattern: g.pattern.name() });
    }
    // The first N of every rank would be the receiver's own host's other
    // rails, which rails = "same" leaves out: the user names the rail's.
    if g.rails == Some(Rails::Same) && g.senders.is_none() {
        return Err(PointError::SendersOnRails { group: g.name.clone() });
    }
    if ranks == usize::MAX {
        return Ok(());
    }
    let receivers = g.receivers.clone().unwrap_or(RankSet::one(0)).resolve(ranks)?;
    let all = g.senders.clone().unwrap_or(RankSet::All).resolve(ranks)?;
    let senders: Vec<usize> = all.into_iter().filter(|r| !receivers.contains(r)).take(k).collect();
    if senders.len() < k {
        return Err(PointError::TooFewSenders { asked: k, group: g.name.clone(), has: senders.len() });
    }
    g.senders = Some(RankSet::Ranges(senders.into_iter().map(|r| (r, r)).collect()));
    Ok(())
}

/// Every stress table's threads ("all" or a count; 0 drops the stress).
pub(super) fn set_stress_threads(s: &mut Scenario, value: &Value) -> Result<(), PointError> {
    match value {
        Value::Text(t) if t == "all" => s.stress.iter_mut().for_each(|st| st.threads = Threads::All),
        _ => match whole_number(value)? {
            0 => s.stress.clear(),
            n => s.stress.iter_mut().for_each(|st| st.threads = Threads::Count(n as usize)),
        },
    }
    Ok(())
}

/// Every stress table's load in percent (0 drops the stress).
pub(super) fn set_stress_load(s: &mut Scenario, value: &Value) -> Result<(), PointError> {
    match u8::try_from(whole_number(value)?).ok().filter(|&l| l <= 100) {
        Some(0) => s.stress.clear(),
        Some(load) => s.stress.iter_mut().for_each(|st| st.load = load),
        None => return Err(PointError::NotALoad(value.to_string())),
    }
    Ok(())
}

pub(super) fn set_transport(g: &mut GroupSpec, transport: Transport) {
    g.transport = transport;
    if transport == Transport::Tcp {
        // TCP streams send: the RDMA op and knobs stay with the RDMA points.
        g.op = None;
        g.rdma = None;
    }
}

/// Keeps or drops `group` (every group when none is named).
pub(super) fn set_enabled(s: &mut Scenario, group: Option<&str>, value: &Value) -> Result<(), PointError> {
    match value.to_string().as_str() {
        "on" | "1" | "true" => {}
        "off" | "0" | "false" => {
            s.groups.retain(|g| group.is_some_and(|name| name != g.name));
            if s.groups.is_empty() {
                return Err(PointError::NoGroupLeft);
            }
        }
        other => return Err(PointError::NotOnOrOff(other.to_string())),
    }
    Ok(())
}

/// Sets one [group.rdma] knob of RDMA group `g`, and checks the knobs it ends with.
pub(super) fn set_group_knob(g: &mut GroupSpec, knob: Parameter, value: &Value) -> Result<(), PointError> {
    set_knob(knob, g.rdma.get_or_insert_with(RdmaKnobs::default), value)?;
    let params = g.rdma_params().unwrap_or_default();
    params.validate().map_err(|error| PointError::Knob {
        group: g.name.clone(),
        knob: knob.name(),
        value: value.to_string(),
        error,
    })
}

/// Sets one [group.rdma] knob; `number` reads the value as a whole number.
pub(super) fn set_knob(knob: Parameter, rdma: &mut RdmaKnobs, value: &Value) -> Result<(), PointError> {
    let n = || u32::try_from(whole_number(value)?).map_err(|_| PointError::TooLarge(value.to_string()));
    match knob {
        Parameter::Qps => rdma.qps = n()?,
        Parameter::PostList => rdma.post_list = n()?,
        Parameter::TxDepth => rdma.tx_depth = n()?,
        Parameter::CqModeration => rdma.cq_moderation = n()?,
        Parameter::InlineSize => rdma.inline_size = Some(n()?),
        Parameter::Completion => {
            rdma.completion = from_text::<CompletionMode>(value, "a completion mode (valid: busy, event)")?
        }
        other => return Err(PointError::NotAKnob(other.name())),
    }
    Ok(())
}

/// Reads a kebab-case enum the way the scenario file spells it.
pub(super) fn from_text<T: serde::de::DeserializeOwned>(value: &Value, what: &'static str) -> Result<T, PointError> {
    serde_json::from_value(serde_json::Value::String(value.to_string()))
        .map_err(|_| PointError::NotA { value: value.to_string(), what })
}
