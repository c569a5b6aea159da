//! Every number a run is summarised by, named once: its name in run.json,
//! its unit, its label in a table, and which way is better. Repeats,
//! sweeps, compare and every report speak of numbers through [`Metric`].

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// One kind of number, named in run.json (`repeats[].numbers[].metric`,
/// `sweep.points[].groups[].metric`) by [`Metric::name`]; those names
/// never change.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Metric {
    /// A phase's aggregate, Gb/s.
    AggregateGbps,
    /// A receiver of several senders, Gb/s.
    ReceiverGbps,
    /// Any item's bandwidth, Gb/s, the item naming what it is of (compare).
    Gbps,
    /// Messages per second, millions (RDMA).
    Mpps,
    LatencyMin,
    LatencyTypical,
    /// Sweeps wrote this figure as `p99_us` (see [`sweep_name`]).
    LatencyP99,
    LatencyP999,
    /// One rank's worker process, user + system.
    WorkerCpu,
    /// The busiest worker process among the ranks.
    MaxWorkerCpu,
}

/// The p99's name in sweeps written so far, read as [`Metric::LatencyP99`].
const SWEEP_P99: &str = "p99_us";

impl Metric {
    pub const ALL: [Metric; 10] = [
        Metric::AggregateGbps,
        Metric::ReceiverGbps,
        Metric::Gbps,
        Metric::Mpps,
        Metric::LatencyMin,
        Metric::LatencyTypical,
        Metric::LatencyP99,
        Metric::LatencyP999,
        Metric::WorkerCpu,
        Metric::MaxWorkerCpu,
    ];

    /// Its name in run.json and the CSV exports.
    pub fn name(self) -> &'static str {
        match self {
            Metric::AggregateGbps => "aggregate_gbps",
            Metric::ReceiverGbps => "receiver_gbps",
            Metric::Gbps => "gbps",
            Metric::Mpps => "mpps",
            Metric::LatencyMin => "latency_min_us",
            Metric::LatencyTypical => "latency_typical_us",
            Metric::LatencyP99 => "latency_p99_us",
            Metric::LatencyP999 => "latency_p999_us",
            Metric::WorkerCpu => "worker_cpu_pct",
            Metric::MaxWorkerCpu => "max_worker_cpu_pct",
        }
    }

    /// The metric a name of either vocabulary stands for.
    pub fn named(name: &str) -> Option<Metric> {
        match name {
            SWEEP_P99 => Some(Metric::LatencyP99),
            _ => Metric::ALL.into_iter().find(|m| m.name() == name),
        }
    }

    /// The unit its values are in.
    pub fn unit(self) -> &'static str {
        match self {
            Metric::AggregateGbps | Metric::ReceiverGbps | Metric::Gbps => "Gb/s",
            Metric::Mpps => "Mpps",
            Metric::LatencyMin | Metric::LatencyTypical | Metric::LatencyP99 | Metric::LatencyP999 => "µs",
            Metric::WorkerCpu => "% of a core",
            Metric::MaxWorkerCpu => "% of one core",
        }
    }

    /// What a table calls it.
    pub fn label(self) -> &'static str {
        match self {
            Metric::AggregateGbps => "aggregate",
            Metric::ReceiverGbps => "receiver",
            Metric::Gbps => "bandwidth",
            Metric::Mpps => "message rate",
            Metric::LatencyMin => "latency min",
            Metric::LatencyTypical => "latency typical",
            Metric::LatencyP99 => "latency p99",
            Metric::LatencyP999 => "latency p99.9",
            Metric::WorkerCpu => "worker CPU",
            Metric::MaxWorkerCpu => "busiest worker CPU",
        }
    }

    /// Bandwidth and message rate: more is better; latency and CPU: less.
    pub fn higher_is_better(self) -> bool {
        matches!(self, Metric::AggregateGbps | Metric::ReceiverGbps | Metric::Gbps | Metric::Mpps)
    }

    pub fn is_latency(self) -> bool {
        matches!(self, Metric::LatencyMin | Metric::LatencyTypical | Metric::LatencyP99 | Metric::LatencyP999)
    }
}

impl Serialize for Metric {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for Metric {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Metric, D::Error> {
        let name = String::deserialize(d)?;
        Metric::named(&name).ok_or_else(|| {
            let known: Vec<&str> = Metric::ALL.iter().map(|m| m.name()).collect();
            D::Error::custom(format!("unknown metric `{name}`; the metrics are {}", known.join(", ")))
        })
    }
}

/// A sweep cell's metric as sweeps have always written it: the p99 as
/// `p99_us`, every other by its own name; read in either vocabulary.
pub mod sweep_name {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use super::{Metric, SWEEP_P99};

    pub fn serialize<S: Serializer>(metric: &Metric, s: S) -> Result<S::Ok, S::Error> {
        match metric {
            Metric::LatencyP99 => s.serialize_str(SWEEP_P99),
            other => other.serialize(s),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Metric, D::Error> {
        Metric::deserialize(d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize, Deserialize)]
    struct Cell {
        #[serde(with = "sweep_name")]
        metric: Metric,
    }

    #[test]
    fn both_vocabularies_read_and_each_writes_its_own_name() {
        for name in ["\"latency_p99_us\"", "\"p99_us\""] {
            assert_eq!(serde_json::from_str::<Metric>(name).unwrap(), Metric::LatencyP99, "{name}");
        }
        assert_eq!(serde_json::to_string(&Metric::LatencyP99).unwrap(), "\"latency_p99_us\"");
        let cell: Cell = serde_json::from_str(r#"{"metric":"latency_p99_us"}"#).unwrap();
        assert_eq!(serde_json::to_string(&cell).unwrap(), r#"{"metric":"p99_us"}"#);
        let cell = Cell { metric: Metric::AggregateGbps };
        assert_eq!(serde_json::to_string(&cell).unwrap(), r#"{"metric":"aggregate_gbps"}"#);
        for metric in Metric::ALL {
            let written = serde_json::to_string(&metric).unwrap();
            assert_eq!(written, format!("\"{}\"", metric.name()));
            assert_eq!(serde_json::from_str::<Metric>(&written).unwrap(), metric);
        }
        let unknown = serde_json::from_str::<Metric>("\"p50_us\"").unwrap_err().to_string();
        assert!(unknown.contains("unknown metric `p50_us`; the metrics are aggregate_gbps,"), "{unknown}");
    }
}
