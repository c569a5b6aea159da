//! A run as it goes in the OpenMetrics text format, for `run --metrics`
//! (served by [`crate::report::scrape`]): launch, phases, the aggregate and
//! each flow's rate of the last closed interval, what the flap detector
//! found in each ended phase, its failed flows, and the latency flows of
//! the last ended phase that had any. docs/METRICS.md defines each family.
//!
//! Fed by the same [`Recorded`] changes the results folder journals, so a
//! scrape says what the journal says, as soon as it says it.

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::{Registry, Unit};

use crate::plan::Phase;
use crate::result::{flaps, PhaseResult, RunResult};
use crate::run::record::Recorded;

/// Flows of the running phase with a series of their own: an all-to-all
/// of N hosts has N² flows, and a scrape must stay small. The rest are in
/// the aggregate only, and `fabricbench_flows` says how many there are.
pub const MAX_FLOW_SERIES: usize = 256;

/// The content type of what [`Live::encode`] writes.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

type GaugeF = Gauge<f64, AtomicU64>;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PhaseLabels {
    phase: usize,
    phase_name: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FlowLabels {
    phase: usize,
    flow: u32,
    group: String,
    /// The sending host.
    host: String,
    /// The receiving host.
    peer: String,
}

/// A latency flow of the last ended phase that had any, by its ends: the
/// same pair keeps its series through repeats and sweeps (and `watch`'s windows).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PathLabels {
    group: String,
    src_rank: usize,
    dst_rank: usize,
    host: String,
    peer: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LatencyLabels {
    #[prometheus(flatten)]
    path: PathLabels,
    quantile: &'static str,
}

/// A suspect of the last window `watch` judged, by its label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SuspectLabels {
    suspect: String,
}

/// What happened to a suspect, or to the workers, as `watch` logs it.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EventLabels {
    event: String,
}

/// Every family `run --metrics` and `watch --metrics` serve, updated as
/// the run records (and as `watch` judges its windows).
pub struct Live {
    registry: Registry,
    ranks: Gauge,
    ranks_joined: Gauge,
    phases: Gauge,
    phases_done: Counter,
    intervals: Counter,
    stopping: Gauge,
    running: Family<PhaseLabels, Gauge>,
    flows: Family<PhaseLabels, Gauge>,
    rate: Family<PhaseLabels, GaugeF>,
    flow_rate: Family<FlowLabels, GaugeF>,
    phase_rate: Family<PhaseLabels, GaugeF>,
    dips: Family<PhaseLabels, Gauge>,
    link_events: Family<PhaseLabels, Gauge>,
    failed_flows: Family<PhaseLabels, Gauge>,
    latency: Family<LatencyLabels, GaugeF>,
    lost: Family<PathLabels, GaugeF>,
    windows: Counter,
    suspects: Family<SuspectLabels, Gauge>,
    events: Family<EventLabels, Counter>,
}

impl Live {
    /// The families of the run named `name` from `scenario_file`, before it starts.
    pub fn new(name: &str, scenario_file: &str) -> Live {
        let mut registry = Registry::with_prefix("fabricbench");
        let info = Info::new(vec![("name", name.to_string()), ("scenario", scenario_file.to_string())]);
        registry.register("run", "The run: its name and scenario file", info);
        let live = Live {
            registry,
            ranks: Gauge::default(),
            ranks_joined: Gauge::default(),
            phases: Gauge::default(),
            phases_done: Counter::default(),
            intervals: Counter::default(),
            stopping: Gauge::default(),
            running: Family::default(),
            flows: Family::default(),
            rate: Family::default(),
            flow_rate: Family::default(),
            phase_rate: Family::default(),
            dips: Family::default(),
            link_events: Family::default(),
            failed_flows: Family::default(),
            latency: Family::default(),
            lost: Family::default(),
            windows: Counter::default(),
            suspects: Family::default(),
            events: Family::default(),
        };
        live.registered()
    }

    fn registered(mut self) -> Live {
        let r = &mut self.registry;
        r.register("ranks", "Ranks (worker processes) in the plan", self.ranks.clone());
        r.register("ranks_joined", "Ranks connected to rank 0", self.ranks_joined.clone());
        r.register("phases", "Phases in the plan", self.phases.clone());
        r.register("phases_done", "Phases that ended", self.phases_done.clone());
        r.register("intervals", "Measurement intervals closed, all phases", self.intervals.clone());
        r.register("stopping", "1 once a stop signal is ending the run", self.stopping.clone());
        r.register("phase_running", "1 while the phase warms up or measures, 0 after", self.running.clone());
        r.register("flows", "Flows in the phase", self.flows.clone());
        let bits = || Unit::Other("bits_per_second".into());
        let help = "Aggregate rate of the phase's last closed interval";
        r.register_with_unit("rate", help, bits(), self.rate.clone());
        let help = "A flow's rate in the running phase's last closed interval (at most 256 flows)";
        r.register_with_unit("flow_rate", help, bits(), self.flow_rate.clone());
        let help = "The ended phase's aggregate rate, as run.json's aggregate_gbps";
        r.register_with_unit("phase_rate", help, bits(), self.phase_rate.clone());
        r.register("dips", "Intervals of an ended phase's flows below the flap threshold", self.dips.clone());
        r.register("link_events", "Link events the ranks' counters showed in an ended phase", self.link_events.clone());
        r.register("failed_flows", "Flows of an ended phase that ended with an error", self.failed_flows.clone());
        let help = "Half round trip of a latency flow in the last ended phase with latency flows (at most 256 flows)";
        r.register_with_unit("flow_latency", help, Unit::Seconds, self.latency.clone());
        let help = "Share of an open-loop latency flow's probes whose echo never came, in the last ended phase with latency flows";
        r.register_with_unit("flow_lost", help, Unit::Other("ratio".into()), self.lost.clone());
        r.register("watch_windows", "Windows `watch` measured and judged", self.windows.clone());
        let help = "1 for each suspect of the last window `watch` judged (its label names it)";
        r.register("watch_suspect", help, self.suspects.clone());
        let help = "Events `watch` logged: a suspect appeared, persists or cleared, the workers failed or rejoined";
        r.register("watch_events", help, self.events.clone());
        self
    }

    /// Takes in what the run recorded; `run` holds it already.
    pub fn record(&self, run: &RunResult, what: Recorded<'_>) {
        match what {
            Recorded::Started => {
                self.ranks.set(count(run.plan.ranks.len()));
                self.phases.set(count(run.plan.phases.len()));
            }
            Recorded::Joined { joined, .. } => {
                self.ranks_joined.set(count(joined));
            }
            Recorded::PhaseStarted { phase } => {
                let Some(planned) = run.plan.phases.get(phase) else { return };
                self.running.get_or_create(&labels(planned)).set(1);
                self.flows.get_or_create(&labels(planned)).set(count(planned.flows.len()));
            }
            Recorded::Interval { phase, gbps, flows, .. } => {
                let Some(planned) = run.plan.phases.get(phase) else { return };
                self.intervals.inc();
                self.rate.get_or_create(&labels(planned)).set(gbps * 1e9);
                for (labels, gbps) in flow_labels(run, planned).zip(flows) {
                    self.flow_rate.get_or_create(&labels).set(gbps * 1e9);
                }
            }
            Recorded::Phase(ended) => self.phase_ended(run, ended.index),
            Recorded::Probe(_) => {}
            Recorded::Stopping { .. } => {
                self.stopping.set(1);
            }
        }
    }

    /// A phase ended: its own rate and flaps stay, its flows' series go.
    fn phase_ended(&self, run: &RunResult, index: usize) {
        let (Some(planned), Some(ended)) = (run.plan.phases.get(index), run.phases.iter().find(|p| p.index == index))
        else {
            return;
        };
        self.phases_done.inc();
        self.running.get_or_create(&labels(planned)).set(0);
        self.phase_rate.get_or_create(&labels(planned)).set(ended.aggregate_gbps * 1e9);
        for labels in flow_labels(run, planned) {
            self.flow_rate.remove(&labels);
        }
        let found = flaps::of_phase(run, ended);
        self.dips.get_or_create(&labels(planned)).set(count(found.flows.iter().map(|f| f.dips).sum()));
        self.link_events.get_or_create(&labels(planned)).set(count(found.links.len()));
        let failed = ended.flows.iter().filter(|f| f.error.is_some()).count();
        self.failed_flows.get_or_create(&labels(planned)).set(count(failed));
        self.latency_of(ended);
    }

    /// The phase's latency flows (the first [`MAX_FLOW_SERIES`]) replace
    /// the last phase's, where it has any.
    fn latency_of(&self, ended: &PhaseResult) {
        let mut measured = ended.flows.iter().filter_map(|f| Some((f, f.latency?))).take(MAX_FLOW_SERIES).peekable();
        if measured.peek().is_none() {
            return;
        }
        self.latency.clear();
        self.lost.clear();
        for (flow, summary) in measured {
            let path = PathLabels {
                group: flow.group.clone(),
                src_rank: flow.src,
                dst_rank: flow.dst,
                host: flow.src_host.clone(),
                peer: flow.dst_host.clone(),
            };
            for (quantile, us) in [("0.5", summary.typical_us), ("0.99", summary.p99_us), ("0.999", summary.p999_us)] {
                self.latency.get_or_create(&LatencyLabels { path: path.clone(), quantile }).set(us * 1e-6);
            }
            if let Some(probes) = &flow.probes {
                self.lost.get_or_create(&path).set(probes.lost_ratio);
            }
        }
    }

    /// `watch` judged a window: these are its suspects now.
    pub fn judged(&self, open: &[&str]) {
        self.windows.inc();
        self.suspects.clear();
        for suspect in open {
            self.suspects.get_or_create(&SuspectLabels { suspect: suspect.to_string() }).set(1);
        }
    }

    /// `watch` logged an event of this kind.
    pub fn event(&self, event: &str) {
        self.events.get_or_create(&EventLabels { event: event.to_string() }).inc();
    }

    /// The families as they stand, in the OpenMetrics text format, `# EOF` last.
    pub fn encode(&self) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry).expect("a String takes every write");
        text
    }
}

fn labels(phase: &Phase) -> PhaseLabels {
    PhaseLabels { phase: phase.index, phase_name: phase.name.clone() }
}

/// The labels of the phase's first [`MAX_FLOW_SERIES`] flows, in flow order.
fn flow_labels<'a>(run: &'a RunResult, phase: &'a Phase) -> impl Iterator<Item = FlowLabels> + 'a {
    let host = |rank: usize| run.plan.ranks.get(rank).map_or_else(|| format!("rank {rank}"), |r| r.host.clone());
    phase.flows.iter().take(MAX_FLOW_SERIES).map(move |flow| FlowLabels {
        phase: phase.index,
        flow: flow.id,
        group: phase.groups.get(flow.group).map_or_else(String::new, |g| g.name.clone()),
        host: host(flow.src),
        peer: host(flow.dst),
    })
}

/// A count as a gauge's value (saturating: no plan comes near it).
fn count(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::histogram::LatencySummary;
    use crate::result::testing::{flow, phase};
    use crate::result::FlowResult;
    use crate::scenario::Mode;
    use crate::{hostfile, plan, scenario};

    /// A run of one phase on `hosts` hosts (h1, h2, …) in `pattern`, planned.
    fn planned(hosts: usize, pattern: &str) -> RunResult {
        let names: Vec<String> = (1..=hosts).map(|k| format!("h{k}")).collect();
        let hosts = hostfile::parse(&names.join("\n"), Path::new("hosts")).unwrap();
        let text = format!("[run]\nname = \"soak\"\n\n[[group]]\nname = \"in\"\npattern = \"{pattern}\"\n");
        let (scenario, _) = scenario::parse(&text, Path::new("s.toml")).unwrap();
        let plan = plan::build(&hosts, &scenario).unwrap();
        RunResult::new("s.toml".into(), scenario, hosts, plan)
    }

    fn lines(live: &Live) -> Vec<String> {
        live.encode().lines().filter(|l| !l.starts_with('#')).map(str::to_string).collect()
    }

    #[test]
    fn a_run_reads_as_it_goes_and_its_ended_phase_keeps_its_rate_and_dips() {
        let mut run = planned(3, "fan-in");
        let live = Live::new("soak", "s.toml");
        live.record(&run, Recorded::Started);
        live.record(&run, Recorded::Joined { joined: 2, total: 3 });
        live.record(&run, Recorded::PhaseStarted { phase: 0 });
        live.record(&run, Recorded::Interval { phase: 0, interval: 1, gbps: 3.0, flows: &[1.0, 2.0] });
        let text = live.encode();
        assert!(text.ends_with("# EOF\n"), "{text}");
        for line in [
            r#"fabricbench_run_info{name="soak",scenario="s.toml"} 1"#,
            "fabricbench_ranks 3",
            "fabricbench_ranks_joined 2",
            "fabricbench_phases 1",
            "fabricbench_intervals_total 1",
            r#"fabricbench_phase_running{phase="0",phase_name="soak"} 1"#,
            r#"fabricbench_flows{phase="0",phase_name="soak"} 2"#,
            r#"fabricbench_rate_bits_per_second{phase="0",phase_name="soak"} 3000000000.0"#,
            r#"fabricbench_flow_rate_bits_per_second{phase="0",flow="1",group="in",host="h3",peer="h1"} 2000000000.0"#,
        ] {
            assert!(lines(&live).iter().any(|l| l == line), "no `{line}` in\n{text}");
        }
        assert!(text.contains("# UNIT fabricbench_rate_bits_per_second bits_per_second"), "{text}");

        // The phase ends: a flow fell to a tenth of its median once.
        let mut dipped = flow(0, 1, 0, 1.0);
        dipped.interval_gbps = vec![1.0, 1.0, 0.1, 1.0];
        run.phases.push(PhaseResult { aggregate_gbps: 2.5, ..phase(vec![dipped], Vec::new()) });
        live.record(&run, Recorded::Phase(&run.phases[0]));
        let after = lines(&live);
        for line in [
            "fabricbench_phases_done_total 1",
            r#"fabricbench_phase_running{phase="0",phase_name="soak"} 0"#,
            r#"fabricbench_phase_rate_bits_per_second{phase="0",phase_name="soak"} 2500000000.0"#,
            r#"fabricbench_dips{phase="0",phase_name="soak"} 1"#,
            r#"fabricbench_link_events{phase="0",phase_name="soak"} 0"#,
        ] {
            assert!(after.iter().any(|l| l == line), "no `{line}` in\n{}", live.encode());
        }
        assert!(!after.iter().any(|l| l.starts_with("fabricbench_flow_rate")), "{after:#?}");
        live.record(&run, Recorded::Stopping { reason: "SIGTERM" });
        assert!(lines(&live).iter().any(|l| l == "fabricbench_stopping 1"));
    }

    #[test]
    fn an_all_to_all_serves_its_first_flows_alone_and_every_flow_in_the_aggregate() {
        let run = planned(18, "all-to-all");
        let flows = run.plan.phases[0].flows.len();
        assert_eq!(flows, 18 * 17);
        let live = Live::new("soak", "s.toml");
        live.record(&run, Recorded::PhaseStarted { phase: 0 });
        let rates = vec![1.0; flows];
        live.record(&run, Recorded::Interval { phase: 0, interval: 1, gbps: flows as f64, flows: &rates });
        let lines = lines(&live);
        let series = lines.iter().filter(|l| l.starts_with("fabricbench_flow_rate_bits_per_second{")).count();
        assert_eq!(series, MAX_FLOW_SERIES);
        assert!(lines.contains(&format!(r#"fabricbench_flows{{phase="0",phase_name="soak"}} {flows}"#)), "{lines:#?}");
    }

    /// A latency flow from rank `src` to rank 0 whose half round trip
    /// has this median, p99 and p99.9, µs.
    fn latency_flow(id: u32, src: usize, [typical_us, p99_us, p999_us]: [f64; 3]) -> FlowResult {
        let summary = LatencySummary {
            samples: 1000,
            min_us: 1.0,
            max_us: 9.0,
            typical_us,
            mean_us: 2.0,
            stdev_us: 0.5,
            p99_us,
            p999_us,
        };
        FlowResult { mode: Mode::Latency, latency: Some(summary), ..flow(id, src, 0, 0.0) }
    }

    fn ended(run: &mut RunResult, live: &Live, index: usize, flows: Vec<FlowResult>) {
        run.phases.push(PhaseResult { index, ..phase(flows, Vec::new()) });
        live.record(run, Recorded::Phase(run.phases.last().unwrap()));
    }

    /// Repeated latency phases make a probe mesh: each ended phase's
    /// latency flows replace the last ones, a phase without any leaves them,
    /// and a flow that failed is counted.
    #[test]
    fn the_last_ended_latency_phase_serves_each_flows_quantiles() {
        let mut run = planned(3, "fan-in");
        let once = run.plan.phases[0].clone();
        run.plan.phases = (0..3).map(|index| Phase { index, ..once.clone() }).collect();
        let live = Live::new("soak", "s.toml");
        ended(&mut run, &live, 0, vec![latency_flow(0, 1, [2.5, 4.0, 8.0]), latency_flow(1, 2, [3.0, 5.0, 9.0])]);
        let series = |live: &Live| -> Vec<String> {
            lines(live).into_iter().filter(|l| l.starts_with("fabricbench_flow_latency_seconds{")).collect()
        };
        let first = series(&live);
        assert_eq!(first.len(), 6, "{first:#?}");
        let h2 =
            r#"fabricbench_flow_latency_seconds{group="in",src_rank="1",dst_rank="0",host="h2",peer="h1",quantile="#;
        let value = |series: &[String], quantile: &str| -> Option<f64> {
            let line = series.iter().find(|l| l.starts_with(&format!("{h2}\"{quantile}\"}} ")))?;
            line.rsplit(' ').next()?.parse().ok()
        };
        for (quantile, us) in [("0.5", 2.5), ("0.99", 4.0), ("0.999", 8.0)] {
            let seconds = value(&first, quantile).unwrap_or_else(|| panic!("no {quantile} of h2 in {first:#?}"));
            assert!((seconds - us * 1e-6).abs() < 1e-15, "{quantile}: {seconds} s, not {us} µs");
        }
        let mut failed = flow(2, 1, 0, 0.0);
        failed.error = Some("peer lost".into());
        ended(&mut run, &live, 1, vec![failed]);
        assert_eq!(series(&live), first, "a phase without latency flows keeps the last ones");
        assert!(lines(&live).contains(&r#"fabricbench_failed_flows{phase="1",phase_name="soak"} 1"#.to_string()));
        ended(&mut run, &live, 2, vec![latency_flow(0, 1, [2.0, 3.0, 4.0])]);
        let last = series(&live);
        assert_eq!(last.len(), 3, "the pair from h3 left with its phase: {last:#?}");
        assert!(value(&last, "0.5").is_some_and(|s| (s - 2e-6).abs() < 1e-15), "{last:#?}");
    }

    #[test]
    fn an_interval_of_a_phase_not_in_the_plan_changes_nothing() {
        let run = planned(2, "pairwise");
        let live = Live::new("soak", "s.toml");
        let before = live.encode();
        live.record(&run, Recorded::Interval { phase: 7, interval: 1, gbps: 1.0, flows: &[1.0] });
        live.record(&run, Recorded::PhaseStarted { phase: 7 });
        assert_eq!(live.encode(), before);
    }
}
