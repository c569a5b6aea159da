//! `[check]` in a scenario and `--check` on the command line: what a run
//! must reach to pass. One grammar for both: a rule is a subject and a
//! threshold, `flow >= 93% of best`; in `[check]` the key is the subject and
//! the value the threshold (or a list of them).

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::BadKey;

/// What a rule is checked on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Subject {
    /// Every flow of every phase (for all-pairs: each pair, each direction measured).
    Flow,
    /// Each rank's sending and receiving rate in every phase it sends or receives in.
    Host,
    /// Each receiving rank's aggregate in every phase (the incast view).
    Receiver,
    /// Each group's aggregate in every phase.
    Group,
    /// Each latency flow's typical (median) half round trip.
    Latency,
    /// Each latency flow's 99th percentile half round trip.
    P99,
    /// Each flow's share of messages lost: the probes of an open-loop
    /// latency flow whose echo never came, the datagrams of a UD flow.
    Loss,
}

/// A limit, with what it is relative to. Percentages are kept as written.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Threshold {
    /// At least this many Gb/s.
    Gbps(f64),
    /// At least this % of the best value of the same subject (ClusterKit's 93 %).
    OfBest(f64),
    /// At least this % of the port's line rate.
    OfLineRate(f64),
    /// Latency: at most this multiple of the smallest latency measured.
    TimesMin(f64),
    /// Latency: at most this many µs.
    Micros(f64),
    /// Loss: at most this % of the messages.
    Share(f64),
}

/// One check: `subject >= threshold` (`<=` for latency, p99 and loss).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rule {
    pub subject: Subject,
    pub threshold: Threshold,
}

/// `[check]`: thresholds per subject, and the ports' line rate when no probe
/// can tell it (TCP over Ethernet or IPoIB).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CheckSpec {
    #[serde(deserialize_with = "one_or_many", skip_serializing_if = "Vec::is_empty")]
    pub flow: Vec<Threshold>,
    #[serde(deserialize_with = "one_or_many", skip_serializing_if = "Vec::is_empty")]
    pub host: Vec<Threshold>,
    #[serde(deserialize_with = "one_or_many", skip_serializing_if = "Vec::is_empty")]
    pub receiver: Vec<Threshold>,
    #[serde(deserialize_with = "one_or_many", skip_serializing_if = "Vec::is_empty")]
    pub group: Vec<Threshold>,
    #[serde(deserialize_with = "one_or_many", skip_serializing_if = "Vec::is_empty")]
    pub latency: Vec<Threshold>,
    #[serde(deserialize_with = "one_or_many", skip_serializing_if = "Vec::is_empty")]
    pub p99: Vec<Threshold>,
    #[serde(deserialize_with = "one_or_many", skip_serializing_if = "Vec::is_empty")]
    pub loss: Vec<Threshold>,
    /// Line rate of every port, Gb/s, for `% of line rate`.
    #[serde(with = "rate_text", skip_serializing_if = "Option::is_none")]
    pub line_rate: Option<f64>,
}

const SUBJECTS: &str = "flow, host, receiver, group, latency, p99, loss";
const THRESHOLDS: &str = "a rate (\"9 Gb/s\"), a share of the best (\"93% of best\"), of the port's line rate \
     (\"90% of line rate\"), for latency and p99 a time (\"500us\", \"1 ms\") or a multiple of the smallest \
     (\"1.5x min\"), for loss a share of the messages (\"2%\")";
/// The longest latency a rule may allow: a minute, in µs.
const MAX_MICROS: f64 = 60e6;

impl Subject {
    pub fn name(self) -> &'static str {
        match self {
            Subject::Flow => "flow",
            Subject::Host => "host",
            Subject::Receiver => "receiver",
            Subject::Group => "group",
            Subject::Latency => "latency",
            Subject::P99 => "p99",
            Subject::Loss => "loss",
        }
    }

    /// Whether the rule is a ceiling (`<=`: latency, p99, loss) rather
    /// than a floor (`>=`: rates).
    pub fn is_ceiling(self) -> bool {
        matches!(self, Subject::Latency | Subject::P99 | Subject::Loss)
    }

    /// The unit of the values a rule on this subject checks.
    pub fn unit(self) -> &'static str {
        match self {
            Subject::Latency | Subject::P99 => "µs",
            Subject::Loss => "%",
            _ => "Gb/s",
        }
    }

    fn parse(text: &str) -> Result<Subject, BadRule> {
        Ok(match text {
            "flow" | "pair" => Subject::Flow,
            "host" => Subject::Host,
            "receiver" => Subject::Receiver,
            "group" => Subject::Group,
            "latency" => Subject::Latency,
            "p99" => Subject::P99,
            "loss" => Subject::Loss,
            _ => return Err(BadRule::NotASubject(text.to_string())),
        })
    }

    /// Bandwidths must reach their limit; latencies and losses must stay under theirs.
    fn operator(self) -> &'static str {
        if self.is_ceiling() {
            "<="
        } else {
            ">="
        }
    }

    /// Whether `threshold` means something for this subject.
    fn accepts(self, threshold: Threshold) -> Result<(), BadRule> {
        let ok = match (self, threshold) {
            (Subject::Latency | Subject::P99, t) => matches!(t, Threshold::TimesMin(_) | Threshold::Micros(_)),
            (Subject::Loss, t) => matches!(t, Threshold::Share(_)),
            (_, Threshold::TimesMin(_) | Threshold::Micros(_) | Threshold::Share(_)) => false,
            (Subject::Group, Threshold::OfLineRate(_)) => false,
            _ => true,
        };
        if ok {
            return Ok(());
        }
        Err(BadRule::DoesNotApply { subject: self, threshold })
    }

    /// The thresholds this subject takes, for the error that refuses another.
    fn takes(self) -> &'static str {
        match self {
            Subject::Latency | Subject::P99 => {
                "a time, e.g. \"500us\" or \"1 ms\", or a multiple of the smallest latency, e.g. \"1.5x min\""
            }
            Subject::Loss => "a share of the messages, e.g. \"2%\"",
            Subject::Group => "a rate (\"40 Gb/s\") or a share of the best (\"93% of best\")",
            _ => "a rate (\"9 Gb/s\"), \"93% of best\" or \"90% of line rate\"",
        }
    }
}

impl Threshold {
    pub fn parse(text: &str) -> Result<Threshold, BadThreshold> {
        let text = text.trim();
        let bad = || BadThreshold::NotAThreshold(text.to_string());
        let t = text.trim().to_ascii_lowercase();
        let percent = |p: &str| -> Result<f64, BadThreshold> {
            let n = p.trim().strip_suffix('%').ok_or_else(bad)?.trim().parse::<f64>().map_err(|_| bad())?;
            if !(n > 0.0 && n <= 100.0) {
                return Err(BadThreshold::Percentage(text.to_string()));
            }
            Ok(n)
        };
        let threshold = if let Some(p) = t.strip_suffix("of best") {
            Threshold::OfBest(percent(p)?)
        } else if let Some(p) = t.strip_suffix("of line rate").or_else(|| t.strip_suffix("of line")) {
            Threshold::OfLineRate(percent(p)?)
        } else if let Some(m) = t.strip_suffix("min") {
            let m = m.trim().trim_end_matches(['x', '×']).trim();
            let n: f64 = m.parse().map_err(|_| bad())?;
            if !(n >= 1.0 && n.is_finite()) {
                return Err(BadThreshold::Multiple(text.to_string()));
            }
            Threshold::TimesMin(n)
        } else if let Some(us) = micros(&t) {
            if !(us > 0.0 && us <= MAX_MICROS) {
                return Err(BadThreshold::Time(text.to_string()));
            }
            Threshold::Micros(us)
        } else if let Some(p) = t.strip_suffix('%') {
            let p: f64 = p.trim().parse().map_err(|_| bad())?;
            if !(0.0..100.0).contains(&p) {
                return Err(BadThreshold::Share(text.to_string()));
            }
            Threshold::Share(p)
        } else {
            Threshold::Gbps(parse_rate(text).map_err(|_| bad())?)
        };
        Ok(threshold)
    }
}

/// A time in µs when `t` (lower case) is a number and a time unit:
/// `500us`, `500 µs`, `1.5 ms`, `2s` (`9 gb/s` is none).
fn micros(t: &str) -> Option<f64> {
    [("us", 1.0), ("µs", 1.0), ("μs", 1.0), ("ms", 1e3), ("ns", 1e-3), ("s", 1e6)]
        .into_iter()
        .find_map(|(unit, scale)| Some(t.strip_suffix(unit)?.trim().parse::<f64>().ok()? * scale))
}

/// A rate with its unit: `9 Gb/s`, `9Gbps`, `400 Mb/s`, `400mbit`; in Gb/s.
pub fn parse_rate(text: &str) -> Result<f64, BadGbps> {
    let t = text.trim().to_ascii_lowercase();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let value: f64 = number.parse().map_err(|_| BadGbps::NotARate(text.to_string()))?;
    let gbps = match unit.trim() {
        "gb/s" | "gbps" | "gbit/s" | "gbit" => value,
        "mb/s" | "mbps" | "mbit/s" | "mbit" => value / 1e3,
        "tb/s" | "tbps" | "tbit/s" | "tbit" => value * 1e3,
        _ => return Err(BadGbps::NoUnit(text.to_string())),
    };
    if gbps <= 0.0 {
        return Err(BadGbps::NotAboveZero(text.to_string()));
    }
    // Hundreds of digits overflow to infinity, which prints as `inf Gb/s`:
    // run.json could not be read back.
    if !gbps.is_finite() {
        return Err(BadGbps::TooLarge { start: text.chars().take(20).collect() });
    }
    Ok(gbps)
}

impl Rule {
    /// `SUBJECT >= THRESHOLD` (`<=` for latency), e.g. `flow >= 93% of best`.
    pub fn parse(text: &str) -> Result<Rule, BadRule> {
        let Some((at, op)) = [">=", "<="].iter().find_map(|op| text.find(op).map(|at| (at, *op))) else {
            return Err(BadRule::NotACheck(text.to_string()));
        };
        let subject = Subject::parse(text[..at].trim())?;
        if op != subject.operator() {
            return Err(BadRule::WrongOperator { text: text.to_string(), subject });
        }
        let threshold = Threshold::parse(&text[at + 2..])?;
        subject.accepts(threshold)?;
        Ok(Rule { subject, threshold })
    }
}

impl CheckSpec {
    pub fn is_empty(&self) -> bool {
        self.rules().is_empty() && self.line_rate.is_none()
    }

    /// Every rule, in subject order.
    pub fn rules(&self) -> Vec<Rule> {
        [
            (Subject::Flow, &self.flow),
            (Subject::Host, &self.host),
            (Subject::Receiver, &self.receiver),
            (Subject::Group, &self.group),
            (Subject::Latency, &self.latency),
            (Subject::P99, &self.p99),
            (Subject::Loss, &self.loss),
        ]
        .into_iter()
        .flat_map(|(subject, list)| list.iter().map(move |&threshold| Rule { subject, threshold }))
        .collect()
    }

    /// Adds a rule given on the command line.
    pub fn push(&mut self, rule: Rule) {
        let list = match rule.subject {
            Subject::Flow => &mut self.flow,
            Subject::Host => &mut self.host,
            Subject::Receiver => &mut self.receiver,
            Subject::Group => &mut self.group,
            Subject::Latency => &mut self.latency,
            Subject::P99 => &mut self.p99,
            Subject::Loss => &mut self.loss,
        };
        list.push(rule.threshold);
    }

    /// Each threshold fits its subject; errors carry the key.
    pub fn validate(&self) -> Result<(), BadKey> {
        for rule in self.rules() {
            rule.subject.accepts(rule.threshold).map_err(|e| BadKey::new(rule.subject.name(), e.to_string()))?;
        }
        Ok(())
    }
}

/// Why a check (`SUBJECT >= THRESHOLD`) does not read, or pairs a subject
/// with a threshold it cannot take.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum BadRule {
    #[error(
        "`{0}` is not a check; write SUBJECT >= THRESHOLD, e.g. \"flow >= 93% of best\", \"receiver >= 40 Gb/s\", \
         \"latency <= 1.5x min\""
    )]
    NotACheck(String),
    #[error("`{0}` is not a check subject; use one of {SUBJECTS}")]
    NotASubject(String),
    #[error("`{text}`: `{}` checks are written with `{}`", .subject.name(), .subject.operator())]
    WrongOperator { text: String, subject: Subject },
    #[error("`{threshold}` does not apply to `{}` (it takes {})", .subject.name(), .subject.takes())]
    DoesNotApply { subject: Subject, threshold: Threshold },
    #[error(transparent)]
    Threshold(#[from] BadThreshold),
}

/// Why a threshold does not read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BadThreshold {
    #[error("`{0}` is not a threshold; use {THRESHOLDS}")]
    NotAThreshold(String),
    #[error("`{0}`: the percentage must be above 0 and at most 100")]
    Percentage(String),
    #[error("`{0}`: the multiple must be at least 1")]
    Multiple(String),
    #[error("`{0}`: the time must be above 0 and at most a minute")]
    Time(String),
    #[error("`{0}`: a loss share must be at least 0% and below 100%")]
    Share(String),
}

/// Why a rate in Gb/s (`line_rate`, `--line-rate`) does not read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BadGbps {
    #[error("`{0}` is not a rate; write e.g. \"25 Gb/s\"")]
    NotARate(String),
    #[error("`{0}` has no rate unit; write e.g. \"25 Gb/s\" or \"400 Mb/s\"")]
    NoUnit(String),
    #[error("`{0}`: a rate must be above 0")]
    NotAboveZero(String),
    /// Only its first 20 characters are shown.
    #[error("`{start}…` is too large a rate")]
    TooLarge { start: String },
}

impl fmt::Display for Threshold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Threshold::Gbps(g) => write!(f, "{g} Gb/s"),
            Threshold::OfBest(p) => write!(f, "{p}% of best"),
            Threshold::OfLineRate(p) => write!(f, "{p}% of line rate"),
            Threshold::TimesMin(m) => write!(f, "{m}x min"),
            Threshold::Micros(us) => write!(f, "{us} µs"),
            Threshold::Share(p) => write!(f, "{p}%"),
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} {}", self.subject.name(), self.subject.operator(), self.threshold)
    }
}

impl Serialize for Threshold {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Threshold {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Threshold::parse(&String::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

impl Serialize for Rule {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Rule {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Rule::parse(&String::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

/// A threshold or a list of them.
fn one_or_many<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Threshold>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        One(String),
        Many(Vec<String>),
    }
    let raw = Raw::deserialize(d)
        .map_err(|_| serde::de::Error::custom(format!("expected a threshold or a list of them; use {THRESHOLDS}")))?;
    let texts = match raw {
        Raw::One(t) => vec![t],
        Raw::Many(list) => list,
    };
    texts.iter().map(|t| Threshold::parse(t).map_err(serde::de::Error::custom)).collect()
}

/// `line_rate = "25 Gb/s"`, kept in run.json the same way.
mod rate_text {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(rate: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
        match rate {
            Some(g) => s.collect_str(&format_args!("{g} Gb/s")),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
        let text = String::deserialize(d)?;
        super::parse_rate(&text).map(Some).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_parse_and_print_back() {
        for (text, shown) in [
            ("flow >= 93% of best", "flow >= 93% of best"),
            ("pair>=9Gb/s", "flow >= 9 Gb/s"),
            ("receiver >= 400 Mb/s", "receiver >= 0.4 Gb/s"),
            ("host >= 90 % of line rate", "host >= 90% of line rate"),
            ("flow >= 90% of line", "flow >= 90% of line rate"),
            ("latency <= 1.5x min", "latency <= 1.5x min"),
            ("group >= 40 Gbps", "group >= 40 Gb/s"),
            ("p99 <= 500us", "p99 <= 500 µs"),
            ("p99<=1.5 ms", "p99 <= 1500 µs"),
            ("latency <= 20 µs", "latency <= 20 µs"),
            ("p99 <= 2x min", "p99 <= 2x min"),
            ("loss <= 2%", "loss <= 2%"),
            ("loss <= 0 %", "loss <= 0%"),
        ] {
            assert_eq!(Rule::parse(text).unwrap().to_string(), shown, "{text}");
        }
        let rule = Rule::parse("flow >= 93% of best").unwrap();
        assert_eq!(rule, Rule { subject: Subject::Flow, threshold: Threshold::OfBest(93.0) });
    }

    #[test]
    fn an_infinite_rate_is_refused() {
        // Found by fuzzing (fuzz/corpus/check/infinite): it printed as `inf Gb/s`.
        let huge = format!("1{} Tb/s", "0".repeat(400));
        assert_eq!(parse_rate(&huge).unwrap_err().to_string(), "`10000000000000000000…` is too large a rate");
        assert!(Rule::parse(&format!("flow >= {huge}")).unwrap_err().to_string().contains("is not a threshold"));
    }

    #[test]
    fn bad_rules_say_what_is_valid() {
        let rule_err = |text: &str| Rule::parse(text).unwrap_err().to_string();
        assert!(rule_err("flow 9").contains("write SUBJECT >= THRESHOLD"));
        assert_eq!(
            rule_err("link >= 9 Gb/s"),
            "`link` is not a check subject; use one of flow, host, receiver, group, latency, p99, loss"
        );
        assert_eq!(rule_err("loss >= 2%"), "`loss >= 2%`: `loss` checks are written with `<=`");
        assert!(rule_err("loss <= 2 Gb/s").contains("(it takes a share of the messages, e.g. \"2%\")"));
        assert!(rule_err("flow >= 500us").contains("does not apply to `flow`"));
        assert!(rule_err("flow >= 2%").contains("does not apply to `flow`"));
        assert_eq!(Threshold::parse("100%").unwrap_err(), BadThreshold::Share("100%".into()));
        assert_eq!(
            Threshold::parse("-1%").unwrap_err().to_string(),
            "`-1%`: a loss share must be at least 0% and below 100%"
        );
        for time in ["0us", "61 s", "nan us", "1e400 ms"] {
            assert_eq!(
                Threshold::parse(time).unwrap_err().to_string(),
                format!("`{time}`: the time must be above 0 and at most a minute")
            );
        }
        assert_eq!(rule_err("flow <= 9 Gb/s"), "`flow <= 9 Gb/s`: `flow` checks are written with `>=`");
        assert_eq!(
            rule_err("latency <= 9 Gb/s"),
            "`9 Gb/s` does not apply to `latency` (it takes a time, e.g. \"500us\" or \"1 ms\", or a multiple of the \
             smallest latency, e.g. \"1.5x min\")"
        );
        assert!(rule_err("group >= 90% of line rate").contains("does not apply to `group`"));
        assert!(rule_err("flow >= 9").contains("`9` is not a threshold; use a rate"));
        assert_eq!(
            Threshold::parse("120% of best").unwrap_err().to_string(),
            "`120% of best`: the percentage must be above 0 and at most 100"
        );
        assert_eq!(Threshold::parse("0.5x min").unwrap_err(), BadThreshold::Multiple("0.5x min".into()));
        assert_eq!(
            Threshold::parse("0.5x min").unwrap_err().to_string(),
            "`0.5x min`: the multiple must be at least 1"
        );
    }

    #[test]
    fn check_table_takes_one_or_many() {
        let spec: CheckSpec =
            toml::from_str("flow = [\"93% of best\", \"9 Gb/s\"]\nreceiver = \"30 Gb/s\"\nline_rate = \"25 Gb/s\"")
                .unwrap();
        assert_eq!(spec.flow, [Threshold::OfBest(93.0), Threshold::Gbps(9.0)]);
        assert_eq!(spec.line_rate, Some(25.0));
        let rules: Vec<String> = spec.rules().iter().map(Rule::to_string).collect();
        assert_eq!(rules, ["flow >= 93% of best", "flow >= 9 Gb/s", "receiver >= 30 Gb/s"]);
        let back = toml::to_string(&spec).unwrap();
        assert_eq!(toml::from_str::<CheckSpec>(&back).unwrap(), spec);
        assert!(toml::from_str::<CheckSpec>("flows = \"9 Gb/s\"")
            .unwrap_err()
            .to_string()
            .contains("unknown field `flows`"));
    }
}
