//! What a legal but huge run will cost, said before anything starts: its
//! length when it runs for hours, its flows when they are millions, a
//! rank that needs more sockets than this host may open, and more
//! data-path threads on this machine than its cores can start together;
//! for `plan`, how long the run takes, each group's flows, and the engines
//! each rank's TCP streams would use at most.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::hostfile::Host;
use crate::launch::choose::is_this_machine;
use crate::plan::{uneven_rails, BusiestRank, Pattern, Phase, Plan};
use crate::result::degraded::SKEW_FRACTION;
use crate::scenario::rails::Rails;
use crate::scenario::Scenario;

/// A run longer than this is announced with its length.
const LONG: Duration = Duration::from_secs(3600);
/// A run of more flows than this is announced with its count.
const MANY_FLOWS: usize = 1_000_000;
/// What setting up and tearing down a phase takes, roughly (launch aside).
const PHASE_OVERHEAD: Duration = Duration::from_secs(1);

/// How long a run's phases take, roughly: each its window and its setup
/// (the launch aside, which depends on the launcher and the hosts).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Length {
    pub phases: u32,
    /// Each phase's warm-up + duration.
    pub window: Duration,
}

impl Length {
    pub fn of(plan: &Plan, window: Duration) -> Length {
        Length { phases: u32::try_from(plan.phases.len()).unwrap_or(u32::MAX), window }
    }

    pub fn setup(self) -> Duration {
        PHASE_OVERHEAD.saturating_mul(self.phases)
    }

    pub fn total(self) -> Duration {
        self.window.saturating_mul(self.phases).saturating_add(self.setup())
    }
}

impl std::fmt::Display for Length {
    /// `63 phase(s) × 11s (warm-up + duration) + 1m 3s setup ≈ 12m 36s`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} phase(s) × {} (warm-up + duration) + {} setup ≈ {}",
            self.phases,
            humantime::format_duration(self.window),
            about(self.setup()),
            about(self.total())
        )
    }
}

/// A length as a person reads it: to the second, to the minute from an hour.
fn about(length: Duration) -> humantime::FormattedDuration {
    let seconds = length.as_secs_f64().round() as u64;
    let seconds = if seconds >= 3600 { (seconds + 30) / 60 * 60 } else { seconds };
    humantime::format_duration(Duration::from_secs(seconds))
}

/// One group over the run: its flows and the phases it is in.
struct GroupTally<'a> {
    name: &'a str,
    pattern: Pattern,
    flows: usize,
    phases: usize,
}

/// `plan`'s lines for each group, in the order they first run: its
/// pattern (and rails), its flows over the run and the phases it is in.
pub fn group_lines(plan: &Plan, scenario: &Scenario) -> Vec<String> {
    let mut groups: Vec<GroupTally> = Vec::new();
    for phase in &plan.phases {
        for group in &phase.groups {
            let flows = phase.flows.iter().filter(|f| f.group == group.index).count();
            match groups.iter_mut().find(|g| g.name == group.name) {
                Some(tally) => (tally.flows, tally.phases) = (tally.flows + flows, tally.phases + 1),
                None => groups.push(GroupTally { name: &group.name, pattern: group.pattern, flows, phases: 1 }),
            }
        }
    }
    groups
        .into_iter()
        .map(|GroupTally { name, pattern, flows, phases }| {
            let rails = scenario.groups.iter().find(|g| g.name == name).map_or(Rails::All, |g| g.rails());
            let rails = if rails == Rails::Same { format!(", rails = \"{}\"", rails.name()) } else { String::new() };
            let unit = if pattern == Pattern::AllPairs { "round(s)" } else { "phase(s)" };
            format!("group `{name}` ({}{rails}): {flows} flow(s) in {phases} {unit}", pattern.name())
        })
        .collect()
}

/// The note for a scenario whose groups join rails (`rails = "same"`) on
/// hosts that do not all have as many: which, and what it means.
pub fn rails_note(plan: &Plan, scenario: &Scenario) -> Option<String> {
    let group = scenario.groups.iter().find(|g| g.rails() == Rails::Same)?;
    uneven_rails(&plan.ranks).map(|uneven| format!("group `{}`: {uneven}", group.name))
}

/// The notes for `plan` with each phase's `window` (warm-up + duration)
/// on hosts allowing `open_files` descriptors a process.
pub fn notes(plan: &Plan, window: Duration, open_files: u64) -> Vec<String> {
    let mut notes = Vec::new();
    let phases = plan.phases.len() as u32;
    let length = Length::of(plan, window).total();
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
    let BusiestRank { rank, sockets } = plan.busiest_sockets();
    // Beside its streams a rank holds its control connection and a few files.
    if sockets + 64 > open_files {
        notes.push(format!(
            "rank {rank} ({}) needs {sockets} TCP sockets at once, and this host allows {open_files} open files a process; hosts with the same limit will fail that phase (raise `ulimit -n`, or use fewer streams)",
            plan.ranks[rank].host
        ));
    }
    notes
}

/// The kernel's default slice for one runnable thread (CFS's minimum
/// granularity, EEVDF's base slice, before their scaling by core count):
/// with N threads wanting each core, a thread waits about N slices for its
/// turn, which is how far apart their starts spread.
const SLICE: Duration = Duration::from_micros(750);

/// Which ranks (by rank) run on this machine: the only host whose cores
/// are known before the run.
pub fn local_ranks(hosts: &[Host]) -> Vec<bool> {
    hosts.iter().map(is_this_machine).collect()
}

/// What one rank's flow ends of a phase ask of its data path.
#[derive(Clone, Copy, Debug, Default)]
struct RankLanes {
    /// TCP streams and RDMA shards (`threads` per rail, one at least):
    /// they share the rank's engines, at most one per core.
    streams: u64,
    rdma_shards: u64,
}

impl RankLanes {
    fn lanes(self) -> u64 {
        self.streams + self.rdma_shards
    }

    /// Its data-path threads on a host of `cores` cores, at most.
    fn threads(self, cores: u64) -> u64 {
        self.lanes().min(cores)
    }

    /// What its engines run, for `plan`.
    fn describe(self) -> String {
        match (self.streams, self.rdma_shards) {
            (streams, 0) => format!("{streams} TCP stream(s)"),
            (0, shards) => format!("{shards} RDMA shard(s)"),
            (streams, shards) => format!("{streams} TCP stream(s) and {shards} RDMA shard(s)"),
        }
    }
}

/// The lanes of each rank of `phase` that `counted` picks.
fn rank_lanes(phase: &Phase, counted: impl Fn(usize) -> bool) -> BTreeMap<usize, RankLanes> {
    let mut ranks: BTreeMap<usize, RankLanes> = BTreeMap::new();
    for f in &phase.flows {
        for end in [f.src, f.dst].into_iter().filter(|&r| counted(r)) {
            let lanes = ranks.entry(end).or_default();
            match &phase.groups[f.group].rdma_request() {
                Some(rdma) => {
                    lanes.rdma_shards += rdma.rails().iter().map(|r| u64::from(r.knobs.threads.max(1))).sum::<u64>()
                }
                None => lanes.streams += u64::from(phase.groups[f.group].streams),
            }
        }
    }
    ranks
}

/// `plan`'s lines for the engines of `phase`: each rank with TCP streams
/// or RDMA shards, and how many engines (data-path threads) they
/// would use at most. An engine per core at most: min(lanes, `cores`) for
/// the ranks that are `local` (`cores`: this machine's); elsewhere the
/// host's cores are not known before the run, so the rule itself.
pub fn engine_lines(plan: &Plan, phase: &Phase, local: &[bool], cores: u64) -> Vec<String> {
    rank_lanes(phase, |_| true)
        .into_iter()
        .filter(|(_, lanes)| lanes.lanes() > 0)
        .map(|(rank, lanes)| {
            let at_most = match local.get(rank) == Some(&true) {
                true => format!("{} engine(s) ({cores} core(s) here)", lanes.lanes().min(cores)),
                false => format!("min({}, its cores) engine(s)", lanes.lanes()),
            };
            format!("  rank {rank:>4} ({})  {} on at most {at_most}", plan.ranks[rank].label(), lanes.describe())
        })
        .collect()
}

/// The warning for the phase whose data-path threads on this machine (the
/// ranks where `local` is true, summed) are too many for its `cores` to
/// start within the tolerated skew of a `duration` window; `None` when
/// every phase fits. The rule is docs/METRICS.md's "Degraded phases".
pub fn overload(plan: &Plan, local: &[bool], cores: usize, duration: Duration) -> Option<String> {
    let cores = cores.max(1) as u64;
    let limit = duration.mul_f64(SKEW_FRACTION);
    let most = (limit.as_nanos() / SLICE.as_nanos()) as u64 * cores;
    let (phase, threads, ranks) = plan
        .phases
        .iter()
        .map(|p| {
            let ranks = rank_lanes(p, |r| local.get(r) == Some(&true));
            let threads = ranks.values().map(|lanes| lanes.threads(cores)).sum::<u64>();
            (p, threads, ranks.len())
        })
        .max_by_key(|&(_, threads, _)| threads)?;
    if threads <= most {
        return None;
    }
    let turn = SLICE * u32::try_from(threads.div_ceil(cores)).unwrap_or(u32::MAX);
    Some(format!(
        "this machine would run {threads} data-path threads in phase {} `{}` ({ranks} local rank(s), {} flow(s)) on {cores} core(s): each waits about {} for a core, more than the {} ({:.0} % of the {} window) the flows may start apart, so the phase will be degraded; run at most {most} threads here (fewer ranks, flows or streams on this machine) or a window of at least {}",
        phase.index,
        phase.name,
        phase.flows.len(),
        humantime::format_duration(Duration::from_millis(turn.as_millis() as u64)),
        humantime::format_duration(Duration::from_millis(limit.as_millis() as u64)),
        SKEW_FRACTION * 100.0,
        humantime::format_duration(duration),
        humantime::format_duration(Duration::from_secs(turn.div_f64(SKEW_FRACTION).as_secs_f64().ceil() as u64)),
    ))
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

    fn on(hostfile: &str, scenario: &str) -> (Plan, Scenario) {
        let hosts = crate::hostfile::parse(hostfile, std::path::Path::new("hosts")).unwrap();
        let (scenario, _) = crate::scenario::parse(scenario, std::path::Path::new("s.toml")).unwrap();
        (crate::plan::build(&hosts, &scenario).unwrap(), scenario)
    }

    #[test]
    fn plan_says_each_groups_flows_and_the_runs_length() {
        let rails = "[run]\nduration = \"10s\"\nwarmup = \"2s\"\n[[group]]\nname = \"all\"\npattern = \"all-pairs\"\n";
        let (p, s) = on("node[01-64] slots=8\n", &format!("{rails}rails = \"same\"\nbidirectional = true\n"));
        assert_eq!(group_lines(&p, &s), ["group `all` (all-pairs, rails = \"same\"): 32256 flow(s) in 63 round(s)"]);
        let length = Length::of(&p, Duration::from_secs(12));
        assert_eq!(length.total(), Duration::from_secs(63 * 13));
        assert_eq!(length.to_string(), "63 phase(s) × 12s (warm-up + duration) + 1m 3s setup ≈ 13m 39s");
        // Without rails the same hosts are 512 ranks in 511 rounds.
        let (p, s) = on("node[01-64] slots=8\n", rails);
        assert_eq!(group_lines(&p, &s), ["group `all` (all-pairs): 130816 flow(s) in 511 round(s)"]);
        assert_eq!(
            Length::of(&p, Duration::from_secs(12)).to_string(),
            "511 phase(s) × 12s (warm-up + duration) + 8m 31s setup ≈ 1h 51m"
        );
        let fan = "[[group]]\nname = \"in\"\npattern = \"fan-in\"\n[[group]]\nname = \"ring\"\npattern = \"ring\"\n";
        let (p, s) = on("n[1-4]\n", fan);
        assert_eq!(
            group_lines(&p, &s),
            ["group `in` (fan-in): 3 flow(s) in 1 phase(s)", "group `ring` (ring): 4 flow(s) in 1 phase(s)"]
        );
    }

    #[test]
    fn rails_on_hosts_of_uneven_rails_are_noted_and_only_then() {
        let all_pairs = "[[group]]\nname = \"g\"\npattern = \"all-pairs\"\n";
        let same = format!("{all_pairs}rails = \"same\"\n");
        let (p, s) = on("a slots=8\nb slots=8\nc slots=7\n", &same);
        let note = rails_note(&p, &s).expect("c lacks rail 7");
        assert!(
            note.starts_with("group `g`: the hosts do not all have the same rails (ranks): 2 host(s) have 8, c has 7;"),
            "{note}"
        );
        assert_eq!(rails_note(&on("a slots=8\nb slots=8\n", &same).0, &s), None, "even rails");
        let (p, s) = on("a slots=8\nb slots=8\nc slots=7\n", all_pairs);
        assert_eq!(rails_note(&p, &s), None, "no rails asked");
    }

    #[test]
    fn a_small_run_has_nothing_to_say() {
        let p = plan(4, "[[group]]\nname = \"g\"\npattern = \"fan-in\"\n");
        assert_eq!(notes(&p, Duration::from_secs(6), 1024), Vec::<String>::new());
    }

    #[test]
    fn hours_and_sockets_are_announced() {
        let p = plan(9, "[[group]]\nname = \"g\"\npattern = \"fan-in\"\nstreams = 64\n");
        assert_eq!(p.busiest_sockets(), BusiestRank { rank: 0, sockets: 8 * 64 });
        let said = notes(&p, Duration::from_secs(2 * 3600), 256);
        assert_eq!(said.len(), 2, "{said:?}");
        assert_eq!(said[0], "this run takes about 2h 1s (1 phase(s) of 2h each)");
        assert!(
            said[1].starts_with("rank 0 (n0) needs 512 TCP sockets at once, and this host allows 256"),
            "{}",
            said[1]
        );
    }

    #[test]
    fn too_many_local_threads_for_the_cores_are_announced_with_what_to_change() {
        // TCP streams share a rank's engines: 32 ranks of 62 streams are 2 threads each.
        let p = plan(32, "[[group]]\nname = \"g\"\npattern = \"all-to-all\"\n");
        assert_eq!(overload(&p, &[true; 32], 2, Duration::from_secs(2)), None, "64 engines fit 2 cores");
        let p = plan(600, "[[group]]\nname = \"g\"\npattern = \"fan-in\"\n");
        let said = overload(&p, &[true; 600], 2, Duration::from_secs(2)).expect("601 engines on 2 cores");
        assert_eq!(
            said,
            "this machine would run 601 data-path threads in phase 0 `s` (600 local rank(s), 599 flow(s)) on 2 core(s): each waits about 225ms for a core, more than the 200ms (10 % of the 2s window) the flows may start apart, so the phase will be degraded; run at most 532 threads here (fewer ranks, flows or streams on this machine) or a window of at least 3s"
        );
    }

    #[test]
    fn plan_shows_each_ranks_engines_as_a_number_where_its_cores_are_known() {
        let p = plan(3, "[[group]]\nname = \"g\"\npattern = \"fan-in\"\nstreams = 4\n");
        let lines = engine_lines(&p, &p.phases[0], &[false, true, true], 2);
        assert_eq!(
            lines,
            [
                "  rank    0 (n0)  8 TCP stream(s) on at most min(8, its cores) engine(s)",
                "  rank    1 (n1)  4 TCP stream(s) on at most 2 engine(s) (2 core(s) here)",
                "  rank    2 (n2)  4 TCP stream(s) on at most 2 engine(s) (2 core(s) here)",
            ]
        );
        let one = engine_lines(&p, &p.phases[0], &[true; 3], 16);
        assert!(one[0].ends_with("8 TCP stream(s) on at most 8 engine(s) (16 core(s) here)"), "{one:?}");
    }

    #[test]
    fn rdma_shards_share_the_engines_with_tcp_streams() {
        let group = |name: &str, rdma: &str| format!("[[group]]\nname = \"{name}\"\npattern = \"fan-in\"\n{rdma}");
        let rdma = group("r", "transport = \"rdma\"\n[group.rdma]\nqps = 2\nthreads = 2\n");
        let both = plan(3, &format!("{}{rdma}", group("t", "streams = 3\n")));
        let lines = engine_lines(&both, &both.phases[0], &[true; 3], 2);
        assert_eq!(
            lines[0],
            "  rank    0 (n0)  6 TCP stream(s) and 4 RDMA shard(s) on at most 2 engine(s) (2 core(s) here)"
        );
        let alone = plan(3, &rdma);
        let lines = engine_lines(&alone, &alone.phases[0], &[false; 3], 2);
        assert_eq!(lines[1], "  rank    1 (n1)  2 RDMA shard(s) on at most min(2, its cores) engine(s)");
        let said = overload(&alone, &[true; 3], 1, Duration::from_millis(10)).expect("3 engines on 1 core, 10 ms");
        assert!(said.contains("would run 3 data-path threads"), "{said}");
    }

    #[test]
    fn the_thread_limit_is_cores_times_the_skew_tolerance_in_slices() {
        // 3 s: 300 ms of tolerated skew is 400 slices of 750 µs for one core;
        // a sender of one stream runs one engine; the receiver one a core.
        let fan_in = |ranks: usize| plan(ranks, "[[group]]\nname = \"g\"\npattern = \"fan-in\"\n");
        let window = Duration::from_secs(3);
        assert_eq!(overload(&fan_in(400), &[true; 400], 1, window), None, "400 ranks, one engine each");
        let said = overload(&fan_in(401), &[true; 401], 1, window).expect("401 > 400");
        assert!(said.contains("would run 401 data-path threads") && said.contains("at most 400 threads"), "{said}");
        assert_eq!(overload(&fan_in(401), &[true; 401], 2, window), None, "two cores take 800");
        // Only the ends on this machine count: the remote receiver's are its own host's.
        let mut local = vec![true; 401];
        local[0] = false;
        assert_eq!(overload(&fan_in(401), &local, 1, window), None, "400 sender engines");
    }
}
