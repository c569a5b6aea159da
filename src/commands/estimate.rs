//! What a legal but huge run will cost, said before anything starts: its
//! length when it runs for hours, its flows when they are millions, and a
//! rank that needs more sockets than this host may open.

use std::time::Duration;

use crate::plan::Plan;

/// A run longer than this is announced with its length.
const LONG: Duration = Duration::from_secs(3600);
/// A run of more flows than this is announced with its count.
const MANY_FLOWS: usize = 1_000_000;
/// What setting up and tearing down a phase takes, roughly (launch aside).
const PHASE_OVERHEAD: Duration = Duration::from_secs(1);

/// The notes for `plan` with each phase's `window` (warm-up + duration)
/// on hosts allowing `open_files` descriptors a process.
pub fn notes(plan: &Plan, window: Duration, open_files: u64) -> Vec<String> {
    let mut notes = Vec::new();
    let phases = plan.phases.len() as u32;
    let length = (window + PHASE_OVERHEAD).saturating_mul(phases);
    if length > LONG {
        notes.push(format!(
            "this run takes about {} ({phases} phase(s) of {} each)",
            humantime::format_duration(Duration::from_secs(length.as_secs())),
            humantime::format_duration(window)
        ));
    }
    let flows: usize = plan.phases.iter().map(|p| p.flows.len()).sum();
    if flows > MANY_FLOWS {
        notes.push(format!("this run has {flows} flows in {phases} phase(s); rank 0 gathers a report for each"));
    }
    let (rank, sockets) = plan.busiest_sockets();
    // Beside its streams a rank holds its control connection and a few files.
    if sockets + 64 > open_files {
        notes.push(format!(
            "rank {rank} ({}) needs {sockets} TCP sockets at once, and this host allows {open_files} open files a process; hosts with the same limit will fail that phase (raise `ulimit -n`, or use fewer streams)",
            plan.ranks[rank].host
        ));
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hostfile::Host;

    fn plan(ranks: usize, scenario: &str) -> Plan {
        let hosts: Vec<Host> = (0..ranks).map(|i| Host::named(&format!("n{i}"))).collect();
        let (scenario, _) = crate::scenario::parse(scenario, std::path::Path::new("s.toml")).unwrap();
        crate::plan::build(&hosts, &scenario).unwrap()
    }

    #[test]
    fn a_small_run_has_nothing_to_say() {
        let p = plan(4, "[[group]]\nname = \"g\"\npattern = \"fan-in\"\n");
        assert_eq!(notes(&p, Duration::from_secs(6), 1024), Vec::<String>::new());
    }

    #[test]
    fn hours_and_sockets_are_announced() {
        let p = plan(9, "[[group]]\nname = \"g\"\npattern = \"fan-in\"\nstreams = 64\n");
        assert_eq!(p.busiest_sockets(), (0, 8 * 64));
        let said = notes(&p, Duration::from_secs(2 * 3600), 256);
        assert_eq!(said.len(), 2, "{said:?}");
        assert_eq!(said[0], "this run takes about 2h 1s (1 phase(s) of 2h each)");
        assert!(
            said[1].starts_with("rank 0 (n0) needs 512 TCP sockets at once, and this host allows 256"),
            "{}",
            said[1]
        );
    }
}
