//! The note beside latency measured on hosts whose clock is slow to read:
//! every sample there includes one read (docs/METRICS.md, "What every
//! host is"), which a reader comparing with perftest must know.

use std::collections::BTreeSet;

use crate::result::{PhaseResult, RunResult};

/// `NOTE: …` when a host of the phase's latency flows reads its clock
/// slowly; one entry per host.
pub fn line(run: &RunResult, p: &PhaseResult) -> Option<String> {
    let timed: BTreeSet<&str> = p
        .flows
        .iter()
        .filter(|f| f.latency.is_some())
        .flat_map(|f| [f.src_host.as_str(), f.dst_host.as_str()])
        .collect();
    let mut slow: Vec<String> = Vec::new();
    for probe in run.probes.iter().filter(|probe| timed.contains(probe.host.as_str())) {
        let Some(clock) = probe.facts.as_ref().map(|f| &f.clock).filter(|c| c.is_slow()) else { continue };
        let said = format!(
            "{} ({:.0} ns a read, clocksource {})",
            probe.host,
            clock.read_ns.unwrap_or_default(),
            clock.source.as_deref().unwrap_or("unknown")
        );
        if !slow.contains(&said) {
            slow.push(said);
        }
    }
    (!slow.is_empty()).then(|| {
        format!(
            "NOTE: every latency sample includes one clock read, slow on {}: perftest reads the CPU's cycle \
             counter instead, so compare there with care",
            slow.join(", ")
        )
    })
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::histogram::LatencySummary;
    use crate::hostfacts::{ClockFacts, HostFacts};
    use crate::result::testing::{flow, phase};
    use crate::result::RankProbe;
    use crate::{hostfile, plan, scenario};

    fn probe(rank: usize, host: &str, source: &str, read_ns: f64) -> RankProbe {
        let clock = ClockFacts { source: Some(source.into()), constant_counter: Some(true), read_ns: Some(read_ns) };
        let facts = HostFacts { clock, ..HostFacts::default() };
        RankProbe { rank, host: host.into(), devices: Vec::new(), error: None, facts: Some(Box::new(facts)) }
    }

    fn run_with(probes: Vec<RankProbe>) -> RunResult {
        let hosts = hostfile::parse("h1\nh2", Path::new("hosts")).unwrap();
        let (scenario, _) =
            scenario::parse("[[group]]\nname = \"in\"\npattern = \"pairwise\"\n", Path::new("s")).unwrap();
        let plan = plan::build(&hosts, &scenario).unwrap();
        RunResult { probes, ..RunResult::new("s".into(), scenario, hosts, plan) }
    }

    #[test]
    fn latency_on_a_host_with_a_slow_clock_says_so_once_and_bandwidth_does_not() {
        let summary = LatencySummary {
            samples: 10,
            min_us: 1.0,
            max_us: 9.0,
            typical_us: 2.0,
            mean_us: 2.0,
            stdev_us: 0.1,
            p99_us: 3.0,
            p999_us: 4.0,
        };
        let timed = phase(vec![crate::result::FlowResult { latency: Some(summary), ..flow(0, 0, 1, 0.0) }], Vec::new());
        let hpet =
            run_with(vec![probe(0, "h1", "hpet", 2612.4), probe(1, "h1", "hpet", 2612.4), probe(2, "h2", "tsc", 21.0)]);
        assert_eq!(
            line(&hpet, &timed).as_deref(),
            Some(
                "NOTE: every latency sample includes one clock read, slow on h1 (2612 ns a read, clocksource hpet): \
                 perftest reads the CPU's cycle counter instead, so compare there with care"
            )
        );
        assert_eq!(line(&hpet, &phase(vec![flow(0, 0, 1, 9.0)], Vec::new())), None, "no latency, no note");
        let fast = run_with(vec![probe(0, "h1", "tsc", 20.0), probe(1, "h2", "tsc", 21.0)]);
        assert_eq!(line(&fast, &timed), None);
    }
}
