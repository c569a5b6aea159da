//! Offered load: a group's `rate` (per flow, in bits or messages per
//! second) and an open-loop latency group's `schedule`. The sender paces
//! itself to the rate; the bounds keep a pacer's arithmetic meaningful
//! (docs/METRICS.md, "Offered load").

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::rdma::Connection;
use super::{BadKey, GroupSpec, Mode, Op, Transport};

/// The slowest bit rate a flow may ask for: 1 Mb/s.
pub const MIN_BITS_PER_S: f64 = 1e6;
/// The fastest: 10 Tb/s, beyond any link a host has.
pub const MAX_BITS_PER_S: f64 = 1e13;
/// The slowest message rate: 1 message per second.
pub const MIN_MSGS_PER_S: f64 = 1.0;
/// The fastest: 100 M messages per second, beyond what one flow posts.
pub const MAX_MSGS_PER_S: f64 = 1e8;

/// What one flow of a group offers per second.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Rate {
    /// Bits per second of payload (1e9 = 1 Gb/s).
    Bits(f64),
    /// Messages per second.
    Messages(f64),
}

/// When an open-loop latency probe sends its next message.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Schedule {
    /// Evenly spaced, 1/rate apart.
    #[default]
    Constant,
    /// Exponential gaps of mean 1/rate (a Poisson process), seeded by flow.
    Poisson,
}

const EXAMPLES: &str = "e.g. \"2 Gb/s\", \"400 Mb/s\", \"100k msg/s\"";

impl Rate {
    /// `2 Gb/s`, `400 Mb/s`, `500 kb/s`, `100k msg/s`, `1M msg/s`, `2500 msg/s`.
    pub fn parse(text: &str) -> Result<Rate, BadRate> {
        let t = text.trim().to_ascii_lowercase();
        let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
        let (number, unit) = t.split_at(split);
        let value: f64 = number.parse().map_err(|_| BadRate::NotARate(text.to_string()))?;
        let unit = unit.trim();
        let bits = |scale: f64| Rate::Bits(value * scale);
        let rate = match unit {
            "tb/s" | "tbps" | "tbit/s" => bits(1e12),
            "gb/s" | "gbps" | "gbit/s" => bits(1e9),
            "mb/s" | "mbps" | "mbit/s" => bits(1e6),
            "kb/s" | "kbps" | "kbit/s" => bits(1e3),
            _ => {
                let (prefix, rest) = match unit.chars().next() {
                    Some('k') => (1e3, &unit[1..]),
                    Some('m') if !unit.starts_with("msg") => (1e6, &unit[1..]),
                    _ => (1.0, unit),
                };
                match rest.trim() {
                    "msg/s" | "msgs/s" | "messages/s" => Rate::Messages(value * prefix),
                    _ => return Err(BadRate::NoUnit(text.to_string())),
                }
            }
        };
        rate.check().map(|()| rate).map_err(|why| BadRate::Bounds { text: text.to_string(), why })
    }

    /// Within the bounds above.
    fn check(self) -> Result<(), OutOfBounds> {
        let (value, lo, hi, shown) = match self {
            Rate::Bits(b) => (b, MIN_BITS_PER_S, MAX_BITS_PER_S, "bit rate is 1 Mb/s to 10 Tb/s"),
            Rate::Messages(m) => (m, MIN_MSGS_PER_S, MAX_MSGS_PER_S, "message rate is 1 to 100M msg/s"),
        };
        if value <= 0.0 {
            return Err(OutOfBounds::NotAboveZero { shown });
        }
        if !(lo..=hi).contains(&value) {
            return Err(OutOfBounds::Outside { shown });
        }
        Ok(())
    }

    /// Messages per second for messages of `message_size` bytes.
    pub fn messages_per_s(self, message_size: u64) -> f64 {
        match self {
            Rate::Bits(b) => b / (8.0 * message_size.max(1) as f64),
            Rate::Messages(m) => m,
        }
    }
}

/// Why a group's `rate` does not read, or lies outside a flow's bounds.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BadRate {
    #[error("`{0}` is not a rate; write {EXAMPLES}")]
    NotARate(String),
    #[error("`{0}` has no known rate unit (Tb/s, Gb/s, Mb/s, kb/s, or msg/s with k or M); write {EXAMPLES}")]
    NoUnit(String),
    #[error("`{text}`: {why}")]
    Bounds { text: String, why: OutOfBounds },
}

/// A rate outside a flow's bounds; `shown` says the bounds of its kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum OutOfBounds {
    #[error("a rate must be above 0 (a flow's {shown})")]
    NotAboveZero { shown: &'static str },
    #[error("out of bounds: a flow's {shown}")]
    Outside { shown: &'static str },
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Rate::Bits(b) if b >= 1e9 => write!(f, "{} Gb/s", b / 1e9),
            Rate::Bits(b) => write!(f, "{} Mb/s", b / 1e6),
            Rate::Messages(m) if m >= 1e6 && (m / 1e6).fract() == 0.0 => write!(f, "{}M msg/s", m / 1e6),
            Rate::Messages(m) if m >= 1e3 && (m / 1e3).fract() == 0.0 => write!(f, "{}k msg/s", m / 1e3),
            Rate::Messages(m) => write!(f, "{m} msg/s"),
        }
    }
}

impl Serialize for Rate {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for Rate {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Rate::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// `rate` and `schedule`: a message rate the pacer can keep, and a
/// schedule only where probes go open-loop.
pub(super) fn check_group(g: &GroupSpec) -> Result<(), BadKey> {
    if g.schedule.is_some() {
        if g.mode != Mode::Latency {
            return Err(BadKey::new(
                "schedule",
                "`schedule` is for open-loop latency groups (mode = \"latency\" with a rate); a bandwidth group \
                 paces itself to its `rate` alone"
                    .into(),
            ));
        }
        if g.rate.is_none() {
            return Err(BadKey::new(
                "schedule",
                "open-loop latency needs a `rate`, e.g. rate = \"10k msg/s\" (without one, latency is ping-pong)"
                    .into(),
            ));
        }
    }
    let Some(rate) = g.rate else { return Ok(()) };
    if g.mode == Mode::Latency && g.transport == Transport::Rdma {
        // The k-th echo answers the k-th probe: the initiator needs
        // messages the target echoes, delivered in order.
        if g.effective_op() != Op::Send {
            return Err(BadKey::new(
                "rate",
                format!(
                    "open-loop RDMA latency (a latency group with a rate) sends probes the target echoes: set op = \
                     \"send\" (this group's op is {}), or drop `rate` for ping-pong",
                    g.effective_op().name()
                ),
            ));
        }
        if g.rdma.as_ref().is_some_and(|r| r.connection == Connection::Ud) {
            return Err(BadKey::new(
                "rate",
                "open-loop RDMA latency needs RC (echoes matched to probes by order; UD may drop or reorder): \
                 drop connection = \"UD\", or drop `rate` for ping-pong"
                    .into(),
            ));
        }
    }
    let size = g.effective_message_size().bytes();
    let per_s = rate.messages_per_s(size);
    if !(MIN_MSGS_PER_S..=MAX_MSGS_PER_S).contains(&per_s) {
        return Err(BadKey::new(
            "rate",
            format!(
                "{rate} in messages of {size} B is {} msg/s; a flow's message rate is 1 to 100M msg/s: change \
                 `rate` or `message_size`",
                crate::units::number(per_s, 2)
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_parse_in_every_unit_and_print_back() {
        for (text, rate, shown) in [
            ("2 Gb/s", Rate::Bits(2e9), "2 Gb/s"),
            ("400Mb/s", Rate::Bits(4e8), "400 Mb/s"),
            ("10 mbit/s", Rate::Bits(1e7), "10 Mb/s"),
            ("1500 kb/s", Rate::Bits(1.5e6), "1.5 Mb/s"),
            ("100k msg/s", Rate::Messages(1e5), "100k msg/s"),
            ("1M msg/s", Rate::Messages(1e6), "1M msg/s"),
            ("2500 msg/s", Rate::Messages(2500.0), "2500 msg/s"),
            ("250 msg/s", Rate::Messages(250.0), "250 msg/s"),
        ] {
            let parsed = Rate::parse(text).unwrap();
            assert_eq!(parsed, rate, "{text}");
            assert_eq!(parsed.to_string(), shown, "{text}");
            assert_eq!(Rate::parse(shown).unwrap(), rate, "{shown} reads back");
        }
    }

    #[test]
    fn bad_rates_say_what_is_valid() {
        let e = Rate::parse("0 Gb/s").unwrap_err().to_string();
        assert!(e.contains("a rate must be above 0 (a flow's bit rate is 1 Mb/s to 10 Tb/s)"), "{e}");
        let e = Rate::parse("5 furlongs").unwrap_err().to_string();
        assert!(e.contains("`5 furlongs` has no known rate unit (Tb/s, Gb/s, Mb/s, kb/s, or msg/s"), "{e}");
        let e = Rate::parse("fast").unwrap_err().to_string();
        assert!(e.contains("`fast` is not a rate; write e.g. \"2 Gb/s\""), "{e}");
        let e = Rate::parse("20 Tb/s").unwrap_err().to_string();
        assert!(e.contains("`20 Tb/s`: out of bounds: a flow's bit rate is 1 Mb/s to 10 Tb/s"), "{e}");
        let e = Rate::parse("500M msg/s").unwrap_err().to_string();
        assert!(e.contains("out of bounds: a flow's message rate is 1 to 100M msg/s"), "{e}");
        let e = Rate::parse("100 kb/s").unwrap_err().to_string();
        assert!(e.contains("out of bounds"), "{e}");
    }

    #[test]
    fn bits_become_messages_of_the_flows_size() {
        assert_eq!(Rate::Bits(1e9).messages_per_s(125_000), 1000.0);
        assert_eq!(Rate::Messages(10.0).messages_per_s(1 << 20), 10.0);
    }

    #[test]
    fn scenario_rates_are_checked_naming_group_and_field() {
        use crate::scenario::tests::{err, FAN_IN};
        let with = |lines: &str| FAN_IN.replace("senders = \"1-3\"", &format!("senders = \"1-3\"\n{lines}"));
        let e = err(&with("rate = \"0 Mb/s\""));
        assert!(e.starts_with("s.toml:14:8: `0 Mb/s`: a rate must be above 0"), "{e}");
        let e = err(&with("rate = \"3 parsecs/s\""));
        assert!(
            e.contains("`3 parsecs/s` has no known rate unit (Tb/s, Gb/s, Mb/s, kb/s, or msg/s with k or M)"),
            "{e}"
        );
        let e = err(&with("rate = \"11 Tb/s\""));
        assert!(e.contains("`11 Tb/s`: out of bounds: a flow's bit rate is 1 Mb/s to 10 Tb/s"), "{e}");
        let e = err(&with("rate = \"1 Mb/s\"").replace("\"64K\"", "\"4M\""));
        assert!(
            e.contains(
                "group \"incast\": field `rate`: 1 Mb/s in messages of 4194304 B is 0.0298 msg/s; a flow's \
                        message rate is 1 to 100M msg/s"
            ),
            "{e}"
        );
        let latency = |lines: &str| with(&format!("mode = \"latency\"\n{lines}"));
        let e = err(&latency("rate = \"1k msg/s\"\nschedule = \"bursty\""));
        assert!(e.contains("unknown variant `bursty`, expected `constant` or `poisson`"), "{e}");
        let e = err(&latency("schedule = \"poisson\""));
        assert!(e.contains("group \"incast\": field `schedule`: open-loop latency needs a `rate`"), "{e}");
        let e = err(&with("rate = \"1 Gb/s\"\nschedule = \"constant\""));
        assert!(e.contains("field `schedule`: `schedule` is for open-loop latency groups"), "{e}");
        let e = err(&latency("rate = \"1k msg/s\"\ntransport = \"rdma\""));
        assert!(e.contains("field `rate`: open-loop RDMA latency (a latency group with a rate) sends probes"), "{e}");
        assert!(e.contains("set op = \"send\" (this group's op is write)"), "{e}");
        let rdma_send = "rate = \"1k msg/s\"\ntransport = \"rdma\"\nop = \"send\"";
        let ud = latency(&format!("{rdma_send}\nrdma = {{ connection = \"UD\" }}")).replace("\"64K\"", "\"2\"");
        let e = err(&ud);
        assert!(e.contains("field `rate`: open-loop RDMA latency needs RC"), "{e}");
        let (s, _) = crate::scenario::parse(&latency(rdma_send), std::path::Path::new("s.toml")).unwrap();
        assert_eq!(s.groups[0].rate, Some(Rate::Messages(1000.0)), "send over RC goes open-loop");
    }

    #[test]
    fn a_sweep_over_rate_sets_each_point_and_checks_it() {
        use crate::scenario::tests::{err, FAN_IN};
        let sweep = |values: &str| format!("{FAN_IN}\n[sweep]\nparameter = \"rate\"\nvalues = [{values}]\n");
        let (s, _) = crate::scenario::parse(&sweep("\"10 Mb/s\", \"2 Gb/s\""), std::path::Path::new("s.toml")).unwrap();
        let points = s.sweep.as_ref().unwrap().points(&s, 4).unwrap();
        let rates: Vec<_> = points.iter().map(|p| p.scenario.groups[0].rate).collect();
        assert_eq!(rates, [Some(Rate::Bits(1e7)), Some(Rate::Bits(2e9))]);
        let e = err(&sweep("\"10 Mb/s\", 500"));
        assert!(e.contains("[sweep]: field `values`: `500` has no unit; write a rate, e.g. \"2 Gb/s\""), "{e}");
        let e = err(&sweep("\"10 Mb/s\", \"0 Mb/s\""));
        assert!(e.contains("`0 Mb/s`: a rate must be above 0"), "{e}");
        let e = err(&sweep("\"1 Mb/s\"").replace("\"64K\"", "\"4M\""));
        assert!(e.contains("at rate=1 Mb/s, group `incast`: `rate` 1 Mb/s in messages of 4194304 B"), "{e}");
    }
}
