//! `--tolerance`: how much worse than the baseline each kind of number may
//! get before it is a regression, e.g. `gbps=5%,latency=10%`, or one
//! percentage for every kind (`5%`, the form from before there were kinds).

use std::fmt;
use std::str::FromStr;

use thiserror::Error;

use crate::result::Metric;

/// The largest tolerance accepted, %: ten times worse still passing is
/// already no check at all.
const MAX_PCT: f64 = 1000.0;

/// What a number measures, for its tolerance and its direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Bandwidth (aggregate, receiver, flow), Gb/s: higher is better.
    Gbps,
    /// Message rate of RDMA flows, Mpps: higher is better.
    Mpps,
    /// Latency flows' min, typical, p99, p99.9, µs: lower is better.
    Latency,
    /// Worker CPU, % of one core: lower is better.
    Cpu,
}

impl Kind {
    pub const ALL: [Kind; 4] = [Kind::Gbps, Kind::Mpps, Kind::Latency, Kind::Cpu];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Gbps => "gbps",
            Kind::Mpps => "mpps",
            Kind::Latency => "latency",
            Kind::Cpu => "cpu",
        }
    }

    /// The kind whose tolerance judges `metric`.
    pub fn of(metric: Metric) -> Kind {
        match metric {
            Metric::AggregateGbps | Metric::ReceiverGbps | Metric::Gbps => Kind::Gbps,
            Metric::Mpps => Kind::Mpps,
            Metric::LatencyMin | Metric::LatencyTypical | Metric::LatencyP99 | Metric::LatencyP999 => Kind::Latency,
            Metric::WorkerCpu | Metric::MaxWorkerCpu => Kind::Cpu,
        }
    }

    fn names() -> String {
        Kind::ALL.map(Kind::name).join(", ")
    }
}

/// A tolerance in % per kind.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tolerances([f64; 4]);

impl Default for Tolerances {
    /// gbps=5%,mpps=5%,latency=10%,cpu=20%: latency and CPU move more
    /// from run to run than bandwidth does.
    fn default() -> Tolerances {
        Tolerances([5.0, 5.0, 10.0, 20.0])
    }
}

impl Tolerances {
    pub fn of(&self, kind: Kind) -> f64 {
        self.0[kind as usize]
    }
}

#[derive(Debug, Error, PartialEq)]
pub enum ToleranceError {
    #[error("`{text}` is not a percentage; write e.g. 5% or gbps=5%,latency=10%")]
    NotPercent { text: String },
    #[error("`{text}`: a tolerance must be from 0% to {MAX_PCT}%")]
    OutOfRange { text: String },
    #[error("`{kind}` is not a kind of number; the kinds are {}", Kind::names())]
    UnknownKind { kind: String },
    #[error("`{kind}` is given twice")]
    Twice { kind: String },
}

impl FromStr for Tolerances {
    type Err = ToleranceError;

    /// `5%` sets every kind; `gbps=5%,latency=10%` the named ones (the
    /// others keep their default); `5%,latency=10%` both.
    fn from_str(text: &str) -> Result<Tolerances, ToleranceError> {
        let mut every = None;
        let mut named: Vec<(Kind, f64)> = Vec::new();
        for part in text.split(',') {
            match part.split_once('=') {
                None => every = Some(percent(part)?),
                Some((kind, value)) => {
                    let kind = kind.trim();
                    let found = Kind::ALL
                        .into_iter()
                        .find(|k| k.name().eq_ignore_ascii_case(kind))
                        .ok_or_else(|| ToleranceError::UnknownKind { kind: kind.to_string() })?;
                    if named.iter().any(|(k, _)| *k == found) {
                        return Err(ToleranceError::Twice { kind: found.name().to_string() });
                    }
                    named.push((found, percent(value)?));
                }
            }
        }
        let mut tolerances = every.map_or_else(Tolerances::default, |pct| Tolerances([pct; 4]));
        for (kind, pct) in named {
            tolerances.0[kind as usize] = pct;
        }
        Ok(tolerances)
    }
}

/// `5%` or `5` → 5.0, within 0 … [`MAX_PCT`].
fn percent(text: &str) -> Result<f64, ToleranceError> {
    let n: f64 = text
        .trim()
        .trim_end_matches('%')
        .trim()
        .parse()
        .map_err(|_| ToleranceError::NotPercent { text: text.trim().to_string() })?;
    if !(0.0..=MAX_PCT).contains(&n) {
        return Err(ToleranceError::OutOfRange { text: text.trim().to_string() });
    }
    Ok(n)
}

impl fmt::Display for Tolerances {
    /// `gbps 5%, mpps 5%, latency 10%, cpu 20%`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = Kind::ALL.iter().map(|&k| format!("{} {}%", k.name(), self.of(k))).collect();
        f.write_str(&parts.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<[f64; 4], ToleranceError> {
        text.parse::<Tolerances>().map(|t| t.0)
    }

    #[test]
    fn one_percentage_sets_every_kind() {
        assert_eq!(parse("5%"), Ok([5.0; 4]));
        assert_eq!(parse(" 7.5 "), Ok([7.5; 4]));
    }

    #[test]
    fn named_kinds_set_only_themselves() {
        assert_eq!(parse("gbps=2%,latency=30%"), Ok([2.0, 5.0, 30.0, 20.0]));
        assert_eq!(parse("CPU=50"), Ok([5.0, 5.0, 10.0, 50.0]));
        assert_eq!(parse("latency=30%,1%"), Ok([1.0, 1.0, 30.0, 1.0]), "named wins over the bare one");
    }

    #[test]
    fn bad_input_names_what_is_wrong_and_what_is_valid() {
        let e = parse("bw=5%").unwrap_err();
        assert_eq!(e.to_string(), "`bw` is not a kind of number; the kinds are gbps, mpps, latency, cpu");
        assert_eq!(parse("gbps=fast").unwrap_err(), ToleranceError::NotPercent { text: "fast".into() });
        assert_eq!(parse("latency=-1%").unwrap_err(), ToleranceError::OutOfRange { text: "-1%".into() });
        assert_eq!(parse("2000%").unwrap_err(), ToleranceError::OutOfRange { text: "2000%".into() });
        assert_eq!(parse("gbps=1,gbps=2").unwrap_err(), ToleranceError::Twice { kind: "gbps".into() });
        assert!(parse("").is_err());
    }
}
