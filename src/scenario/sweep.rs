//! `[sweep]`: run the scenario once per value of one parameter, one phase
//! per point, and compare every point with a baseline point.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::load::placement::Numa;
use crate::load::stress::Threads;
use crate::scenario::{Pattern, RankSet, Scenario, Transport};
use crate::units::ByteSize;

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
    /// Whether the group runs at all ("on"/"off"): cross traffic on vs off.
    #[serde(rename = "enabled")]
    Enabled,
    /// The group's thread placement relative to its NIC: near, far, any.
    #[serde(rename = "numa")]
    Numa,
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
            Parameter::Enabled => "enabled",
            Parameter::Numa => "numa",
        }
    }
}

impl SweepSpec {
    /// Problems visible without a hostfile: (key, message).
    pub fn check(&self, scenario: &Scenario) -> Result<(), (&'static str, String)> {
        if self.values.is_empty() {
            return Err(("values", "needs at least one value".into()));
        }
        if let Some(group) = &self.group {
            if !scenario.groups.iter().any(|g| &g.name == group) {
                let names: Vec<&str> = scenario.groups.iter().map(|g| g.name.as_str()).collect();
                return Err(("group", format!("no group is named `{group}` (groups: {})", names.join(", "))));
            }
        }
        if let Some(b) = &self.baseline {
            if !self.values.contains(b) {
                return Err(("baseline", format!("`{b}` is not one of the values")));
            }
        }
        if self.parameter == Parameter::Enabled && self.group.is_none() {
            return Err((
                "group",
                "sweeping `enabled` turns one group on and off; name it with group = \"...\"".into(),
            ));
        }
        if matches!(self.parameter, Parameter::StressThreads | Parameter::StressLoad) && scenario.stress.is_empty() {
            return Err(("parameter", format!("`{}` needs a [[stress]] table to vary", self.parameter.name())));
        }
        for value in &self.values {
            self.apply(scenario, value, usize::MAX).map_err(|m| ("values", m))?;
        }
        Ok(())
    }

    pub fn baseline(&self) -> &Value {
        self.baseline.as_ref().unwrap_or(&self.values[0])
    }

    /// The scenario at one point; `ranks` is the job size (for `senders`).
    pub fn apply(&self, scenario: &Scenario, value: &Value, ranks: usize) -> Result<Scenario, String> {
        let mut s = scenario.clone();
        let wanted = |name: &str| self.group.as_deref().is_none_or(|g| g == name);
        let number = || match value {
            Value::Number(n) => Ok(*n),
            Value::Text(t) => t.parse().map_err(|_| format!("`{t}` is not a whole number")),
        };
        match self.parameter {
            Parameter::MessageSize => {
                let size = match value {
                    Value::Number(n) => ByteSize(*n),
                    Value::Text(t) => ByteSize::parse(t)?,
                };
                if size.bytes() == 0 {
                    return Err("a message size must be at least 1 byte".into());
                }
                s.groups.iter_mut().filter(|g| wanted(&g.name)).for_each(|g| g.message_size = Some(size));
            }
            Parameter::Streams => {
                let n = u32::try_from(number()?).ok().filter(|&n| n >= 1).ok_or("streams must be 1 or more")?;
                s.groups.iter_mut().filter(|g| wanted(&g.name)).for_each(|g| g.streams = n);
            }
            Parameter::Senders => {
                let k = usize::try_from(number()?).ok().filter(|&k| k >= 1).ok_or("senders must be 1 or more")?;
                for g in s.groups.iter_mut().filter(|g| wanted(&g.name)) {
                    if g.pattern != Pattern::FanIn {
                        return Err(format!(
                            "sweeping `senders` needs a fan-in group; `{}` is {}",
                            g.name,
                            g.pattern.name()
                        ));
                    }
                    if ranks == usize::MAX {
                        continue; // checked again when the plan knows the job size
                    }
                    let receivers = g.receivers.clone().unwrap_or(RankSet::one(0)).resolve(ranks)?;
                    let all = g.senders.clone().unwrap_or(RankSet::All).resolve(ranks)?;
                    let senders: Vec<usize> = all.into_iter().filter(|r| !receivers.contains(r)).take(k).collect();
                    if senders.len() < k {
                        return Err(format!("{k} senders asked, but group `{}` has only {}", g.name, senders.len()));
                    }
                    g.senders = Some(RankSet::Ranges(senders.into_iter().map(|r| (r, r)).collect()));
                }
            }
            Parameter::StressThreads => match value {
                Value::Text(t) if t == "all" => s.stress.iter_mut().for_each(|st| st.threads = Threads::All),
                _ => match number()? {
                    0 => s.stress.clear(),
                    n => s.stress.iter_mut().for_each(|st| st.threads = Threads::Count(n as usize)),
                },
            },
            Parameter::StressLoad => match u8::try_from(number()?).ok().filter(|&l| l <= 100) {
                Some(0) => s.stress.clear(),
                Some(load) => s.stress.iter_mut().for_each(|st| st.load = load),
                None => return Err(format!("`{value}` is not a load; use 0 to 100 (percent)")),
            },
            Parameter::Transport => {
                let transport: Transport = from_text(value, "a transport (valid: tcp)")?;
                s.groups.iter_mut().filter(|g| wanted(&g.name)).for_each(|g| g.transport = transport);
            }
            Parameter::Numa => {
                let numa: Numa = from_text(value, "a NUMA placement (valid: near, far, any)")?;
                for g in s.groups.iter_mut().filter(|g| wanted(&g.name)) {
                    g.numa = numa;
                    g.cores = None;
                }
            }
            Parameter::Enabled => match value.to_string().as_str() {
                "on" | "1" | "true" => {}
                "off" | "0" | "false" => {
                    s.groups.retain(|g| !wanted(&g.name));
                    if s.groups.is_empty() {
                        return Err("turning the group off leaves no group to run".into());
                    }
                }
                other => return Err(format!("`{other}` is not on or off")),
            },
        }
        Ok(s)
    }
}

/// Reads a kebab-case enum the way the scenario file spells it.
fn from_text<T: serde::de::DeserializeOwned>(value: &Value, what: &str) -> Result<T, String> {
    serde_json::from_value(serde_json::Value::String(value.to_string())).map_err(|_| format!("`{value}` is not {what}"))
}
