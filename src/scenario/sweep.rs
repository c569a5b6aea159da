//! `[sweep]`: run the scenario once per value of one parameter (or per
//! pair of values of two, `[sweep.by]`: a matrix), one phase per point, and
//! compare every point with a baseline point.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::scenario::limits::MAX_SWEEP_POINTS;
use crate::scenario::placement::Numa;
use crate::scenario::rate::BadRate;
use crate::scenario::rdma::InvalidParam;
use crate::scenario::{BadKey, BadRanks, GroupSpec, Scenario, Transport};
use crate::units::BadSize;

mod set;
use set::{
    from_text, message_size, rate, set_enabled, set_group_knob, set_senders, set_stress_load, set_stress_threads,
    set_transport, whole_number,
};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SweepSpec {
    pub parameter: Parameter,
    pub values: Vec<Value>,
    /// The group whose parameter changes (default: every group).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// The point the others are compared with (default: the first value).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<Value>,
    /// A second axis: every value above is run at every value of this one
    /// (rows × columns); each column is compared with its own baseline row.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<SweepAxis>,
}

/// `[sweep.by]`: the columns of a two-parameter sweep.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SweepAxis {
    pub parameter: Parameter,
    pub values: Vec<Value>,
    /// The group whose parameter changes (default: every group it applies to).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
}

/// One point of a sweep: its values and the scenario that runs there.
pub struct Point<'a> {
    pub value: &'a Value,
    /// The value of the `by` axis (two-parameter sweeps).
    pub by: Option<&'a Value>,
    pub scenario: Scenario,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Parameter {
    #[serde(rename = "message_size")]
    MessageSize,
    #[serde(rename = "streams")]
    Streams,
    /// How many of a fan-in's senders take part (the first N).
    #[serde(rename = "senders")]
    Senders,
    /// Burner threads of every [[stress]] (0: no stress at that point).
    #[serde(rename = "stress.threads")]
    StressThreads,
    /// Duty cycle of every [[stress]] (0: no stress at that point).
    #[serde(rename = "stress.load")]
    StressLoad,
    #[serde(rename = "transport")]
    Transport,
    /// Offered load per flow (`rate`): a load→latency curve when swept on a
    /// background group beside an open-loop latency probe.
    #[serde(rename = "rate")]
    Rate,
    /// Whether the group runs at all ("on"/"off"): cross traffic on vs off.
    #[serde(rename = "enabled")]
    Enabled,
    /// The group's thread placement relative to its NIC: near, far, any.
    #[serde(rename = "numa")]
    Numa,
    /// RDMA groups' knobs ([group.rdma]): QPs per flow, WRs per doorbell,
    /// busy or event completion, send queue depth, signal every Nth WR,
    /// largest inline message.
    #[serde(rename = "qps", alias = "rdma.qps")]
    Qps,
    #[serde(rename = "post_list", alias = "rdma.post_list")]
    PostList,
    #[serde(rename = "completion", alias = "rdma.completion")]
    Completion,
    #[serde(rename = "tx_depth", alias = "rdma.tx_depth")]
    TxDepth,
    #[serde(rename = "cq_moderation", alias = "rdma.cq_moderation")]
    CqModeration,
    #[serde(rename = "inline_size", alias = "rdma.inline_size")]
    InlineSize,
}

/// A value as written: a number or a string.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Value {
    Number(u64),
    Text(String),
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Number(n) => write!(f, "{n}"),
            Value::Text(t) => f.write_str(t),
        }
    }
}

impl Parameter {
    pub fn name(self) -> &'static str {
        match self {
            Parameter::MessageSize => "message_size",
            Parameter::Streams => "streams",
            Parameter::Senders => "senders",
            Parameter::StressThreads => "stress.threads",
            Parameter::StressLoad => "stress.load",
            Parameter::Transport => "transport",
            Parameter::Rate => "rate",
            Parameter::Enabled => "enabled",
            Parameter::Numa => "numa",
            Parameter::Qps => "qps",
            Parameter::PostList => "post_list",
            Parameter::Completion => "completion",
            Parameter::TxDepth => "tx_depth",
            Parameter::CqModeration => "cq_moderation",
            Parameter::InlineSize => "inline_size",
        }
    }
}

impl SweepSpec {
    /// Problems visible without a hostfile: (key, message).
    pub fn check(&self, scenario: &Scenario) -> Result<(), BadKey> {
        let points = self.values.len().saturating_mul(self.by.as_ref().map_or(1, |by| by.values.len()));
        if points > MAX_SWEEP_POINTS {
            return Err(BadKey::new(
                "values",
                format!("give {points} points (one phase each); a sweep takes at most {MAX_SWEEP_POINTS}"),
            ));
        }
        check_axis(scenario, self.parameter, &self.values, self.group.as_deref())?;
        if let Some(b) = &self.baseline {
            if !self.values.contains(b) {
                return Err(BadKey::new("baseline", format!("`{b}` is not one of the values")));
            }
        }
        if let Some(by) = &self.by {
            check_axis(scenario, by.parameter, &by.values, by.group.as_deref())
                .map_err(|e| BadKey::new("by", e.to_string()))?;
            if by.parameter == self.parameter {
                return Err(BadKey::new(
                    "by",
                    format!("sweeps `{}` twice; give the columns another parameter", by.parameter.name()),
                ));
            }
        }
        self.points(scenario, usize::MAX).map(drop).map_err(|e| BadKey::new("values", e.to_string()))
    }

    pub fn baseline(&self) -> &Value {
        self.baseline.as_ref().unwrap_or(&self.values[0])
    }

    /// Every point in run order (row by row); `ranks` is the job size (for
    /// `senders`; `usize::MAX` when not known yet).
    pub fn points<'a>(&'a self, scenario: &Scenario, ranks: usize) -> Result<Vec<Point<'a>>, PointError> {
        let mut out = Vec::new();
        for value in &self.values {
            let row = apply(self.parameter, self.group.as_deref(), scenario, value, ranks)?;
            match &self.by {
                None => out.push(Point { value, by: None, scenario: row }),
                Some(by) => {
                    for column in &by.values {
                        let scenario = apply(by.parameter, by.group.as_deref(), &row, column, ranks).map_err(|e| {
                            PointError::At {
                                parameter: self.parameter.name(),
                                value: value.to_string(),
                                by: by.parameter.name(),
                                column: column.to_string(),
                                error: Box::new(e),
                            }
                        })?;
                        out.push(Point { value, by: Some(column), scenario });
                    }
                }
            }
        }
        Ok(out)
    }
}

/// One axis' own problems: values present, group known, parameter applicable.
fn check_axis(scenario: &Scenario, parameter: Parameter, values: &[Value], group: Option<&str>) -> Result<(), BadKey> {
    if values.is_empty() {
        return Err(BadKey::new("values", "needs at least one value".into()));
    }
    if let Some(group) = group {
        if !scenario.groups.iter().any(|g| g.name == group) {
            let names: Vec<&str> = scenario.groups.iter().map(|g| g.name.as_str()).collect();
            return Err(BadKey::new("group", format!("no group is named `{group}` (groups: {})", names.join(", "))));
        }
    }
    if parameter == Parameter::Enabled && group.is_none() {
        return Err(BadKey::new(
            "group",
            "sweeping `enabled` turns one group on and off; name it with group = \"...\"".into(),
        ));
    }
    if matches!(parameter, Parameter::StressThreads | Parameter::StressLoad) && scenario.stress.is_empty() {
        return Err(BadKey::new("parameter", format!("`{}` needs a [[stress]] table to vary", parameter.name())));
    }
    for value in values {
        apply(parameter, group, scenario, value, usize::MAX).map_err(|e| BadKey::new("values", e.to_string()))?;
    }
    Ok(())
}

/// Why a sweep's value cannot be set in the scenario (the caller names
/// `values` and the point).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum PointError {
    #[error("`{0}` is not a whole number")]
    NotWhole(String),
    #[error(transparent)]
    Size(#[from] BadSize),
    #[error("a message size must be at least 1 byte")]
    EmptyMessage,
    #[error("streams must be 1 or more")]
    NoStreams,
    #[error("senders must be 1 or more")]
    NoSenders,
    #[error("sweeping `senders` needs a fan-in group; `{group}` is {pattern}")]
    SendersNeedFanIn { group: String, pattern: &'static str },
    #[error(transparent)]
    Ranks(#[from] BadRanks),
    #[error("{asked} senders asked, but group `{group}` has only {has}")]
    TooFewSenders { asked: usize, group: String, has: usize },
    #[error(
        "sweeping `senders` of group `{group}` with rails = \"same\" needs its senders listed: the sweep takes \
         the first N of them, and those of the receiver's rail on other hosts are the ones that can send \
         (e.g. senders = \"8,16,24\" with eight ranks a host)"
    )]
    SendersOnRails { group: String },
    #[error("`{0}` is not a load; use 0 to 100 (percent)")]
    NotALoad(String),
    #[error("`{value}` is not {what}")]
    NotA { value: String, what: &'static str },
    #[error(transparent)]
    Rate(#[from] BadRate),
    #[error("`{0}` has no unit; write a rate, e.g. \"2 Gb/s\" or \"10k msg/s\"")]
    RateWithoutUnit(u64),
    #[error("turning the group off leaves no group to run")]
    NoGroupLeft,
    #[error("`{0}` is not on or off")]
    NotOnOrOff(String),
    #[error("sweeping `{0}` needs an RDMA group (transport = \"rdma\")")]
    NeedsRdma(&'static str),
    #[error("group `{group}` at {knob}={value}: {error}")]
    Knob { group: String, knob: &'static str, value: String, error: InvalidParam },
    #[error("`{0}` is too large")]
    TooLarge(String),
    #[error("`{0}` is not a [group.rdma] knob")]
    NotAKnob(&'static str),
    /// A point of a two-axis sweep: the row's and the column's value.
    #[error("at {parameter}={value}, {by}={column}: {error}")]
    At { parameter: &'static str, value: String, by: &'static str, column: String, error: Box<PointError> },
}

/// The scenario with `parameter` set to `value` in `group` (default: every
/// group it applies to); `ranks` is the job size (for `senders`).
fn apply(
    parameter: Parameter,
    group: Option<&str>,
    scenario: &Scenario,
    value: &Value,
    ranks: usize,
) -> Result<Scenario, PointError> {
    let mut s = scenario.clone();
    let wanted = |g: &&mut GroupSpec| group.is_none_or(|name| name == g.name);
    let number = || whole_number(value);
    match parameter {
        Parameter::MessageSize => {
            let size = message_size(value)?;
            s.groups.iter_mut().filter(wanted).for_each(|g| g.message_size = Some(size));
        }
        Parameter::Streams => {
            let n = u32::try_from(number()?).ok().filter(|&n| n >= 1).ok_or(PointError::NoStreams)?;
            s.groups.iter_mut().filter(wanted).for_each(|g| g.streams = n);
        }
        Parameter::Senders => {
            let k = usize::try_from(number()?).ok().filter(|&k| k >= 1).ok_or(PointError::NoSenders)?;
            s.groups.iter_mut().filter(wanted).try_for_each(|g| set_senders(g, k, ranks))?;
        }
        Parameter::StressThreads => set_stress_threads(&mut s, value)?,
        Parameter::StressLoad => set_stress_load(&mut s, value)?,
        Parameter::Transport => {
            let transport: Transport = from_text(value, "a transport (valid: tcp, rdma)")?;
            s.groups.iter_mut().filter(wanted).for_each(|g| set_transport(g, transport));
        }
        Parameter::Rate => {
            let rate = rate(value)?;
            s.groups.iter_mut().filter(wanted).for_each(|g| g.rate = Some(rate));
        }
        Parameter::Numa => {
            let numa: Numa = from_text(value, "a NUMA placement (valid: near, far, any)")?;
            for g in s.groups.iter_mut().filter(wanted) {
                g.numa = numa;
                g.cores = None;
            }
        }
        Parameter::Enabled => set_enabled(&mut s, group, value)?,
        knob => {
            let mut rdma_groups =
                s.groups.iter_mut().filter(wanted).filter(|g| g.transport == Transport::Rdma).peekable();
            if rdma_groups.peek().is_none() {
                return Err(PointError::NeedsRdma(knob.name()));
            }
            rdma_groups.try_for_each(|g| set_group_knob(g, knob, value))?;
        }
    }
    Ok(s)
}
