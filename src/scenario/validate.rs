//! Validation of a parsed scenario: what a single file can tell on its own,
//! before any hostfile is read. Errors name the field; the caller adds the line.

use std::time::Duration;

use super::limits::{
    self, Machine, MAX_FLOWS, MAX_NAME, MAX_REPEATS, MAX_SAMPLES, MAX_STREAMS, MAX_WINDOW, MIN_INTERVAL,
    THREADS_PER_CORE,
};
use super::rdma::{atomic_size_error, ATOMIC_SIZE, GROUP_KEYS, RETIRED_KEYS};
use super::stress::Threads;
use super::sweep::{PointError, SweepSpec};
use super::{
    BadField, BadKey, Field, GroupSpec, Mode, Op, Pattern, RunSpec, Scenario, Section, Source, StressTable, Transport,
};

/// A group's own key (`op`, `mode`, `message_size`, `memory`, `gpu`) inside
/// its `[group.rdma]` table, whatever its value: the table holds knobs only
/// and refuses it, so the error shows where it goes. A retired knob is
/// refused with what took its place.
pub(super) fn check_rdma_tables(source: &Source) -> Result<(), BadField> {
    for i in 0..source.groups() {
        for (key, instead) in RETIRED_KEYS {
            if source.group_rdma_value(i, key).is_some() {
                return Err(BadField::new(
                    Field::group_rdma(i, key),
                    format!("`{key}` is no longer a knob: {instead}"),
                ));
            }
        }
        for key in GROUP_KEYS {
            if let Some(value) = source.group_rdma_value(i, key) {
                return Err(BadField::new(
                    Field::group_rdma(i, key),
                    format!(
                        "`{key}` is the group's, not a knob of its rdma table: write `{key} = {value}` in the \
                         [[group]] table itself (beside `transport`), above [group.rdma]"
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// Checks what a single file can tell on its own, before any hostfile is
/// read; `machine` stands in for the ranks' hosts in the stress bounds.
pub(super) fn validate(s: &Scenario, machine: &Machine) -> Result<(), BadField> {
    check_run(&s.run).map_err(|e| e.within(Section::Run))?;
    if s.groups.is_empty() {
        return Err(BadField::new(Field::top("group"), "a scenario needs at least one [[group]]"));
    }
    for (i, g) in s.groups.iter().enumerate() {
        if let Some(j) = s.groups[..i].iter().position(|other| other.name == g.name) {
            return Err(BadField::new(Field::group(i, "name"), format!("`{}` is also the name of group {j}", g.name)));
        }
        check_sizes(g).map_err(|e| e.within(Section::Group(i)))?;
        check_streams(g).map_err(|e| e.within(Section::Group(i)))?;
        check_selectors(g).map_err(|e| e.within(Section::Group(i)))?;
        if g.pattern == Pattern::AllPairs && s.groups.len() > 1 {
            return Err(BadField::new(
                Field::group(i, "pattern"),
                "`all-pairs` runs in rounds of its own (one phase per round): give it a scenario without other groups",
            ));
        }
        if g.cores.is_some() && g.numa.is_asked() {
            return Err(BadField::new(Field::group(i, "numa"), "give either `cores` or `numa`, not both"));
        }
        check_transport(g).map_err(|e| e.within(Section::Group(i)))?;
        super::rate::check_group(g).map_err(|e| e.within(Section::Group(i)))?;
        super::dv::check(g).map_err(|e| e.within(Section::Group(i)))?;
    }
    for (i, st) in s.stress.iter().enumerate() {
        check_stress(st, machine).map_err(|e| e.within(Section::Stress(i)))?;
    }
    // Before the sweep's own checks: a congestion run takes no sweep at all.
    super::congestion::check(s)?;
    if let Some(sw) = &s.sweep {
        sw.check(s).map_err(|e| e.within(Section::Sweep))?;
        check_points(sw, s, machine).map_err(|e| BadField::new(Field::sweep("values"), e.to_string()))?;
    }
    s.check.validate().map_err(|e| e.within(Section::Check))
}

/// `[run]`: a name fit for a folder, and a window long enough to sample
/// and short enough that its arithmetic cannot overflow. Public so that a
/// window changed after parsing (`run --duration`) is held to the same.
pub fn check_run(run: &RunSpec) -> Result<(), BadKey> {
    let name_ok = run.name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if run.name.is_empty() || run.name.len() > MAX_NAME || !name_ok {
        let shown: String = run.name.chars().take(MAX_NAME).flat_map(char::escape_default).collect();
        return Err(BadKey::new(
            "name",
            format!("`{shown}` cannot name a results folder: use 1 to {MAX_NAME} of A-Z a-z 0-9 . _ -"),
        ));
    }
    let week = humantime::format_duration(MAX_WINDOW);
    if run.duration.is_zero() {
        return Err(BadKey::new("duration", "must be longer than 0s, e.g. \"10s\"".into()));
    }
    if run.duration > MAX_WINDOW {
        return Err(BadKey::new("duration", format!("must be at most {week}; run a longer soak as several runs")));
    }
    if run.warmup > MAX_WINDOW {
        return Err(BadKey::new("warmup", format!("must be at most {week}")));
    }
    if run.interval < MIN_INTERVAL || run.interval > run.duration {
        return Err(BadKey::new(
            "interval",
            format!("must be between 1ms and the duration ({})", humantime::format_duration(run.duration)),
        ));
    }
    if !(1..=MAX_REPEATS).contains(&run.repeat) {
        return Err(BadKey::new(
            "repeat",
            format!("{} repeats asked; give 1 to {MAX_REPEATS} (each phase runs that many times)", run.repeat),
        ));
    }
    let samples = run.duration.as_nanos().div_ceil(run.interval.as_nanos());
    if samples > MAX_SAMPLES {
        let shortest = Duration::from_nanos((run.duration.as_nanos().div_ceil(MAX_SAMPLES)) as u64);
        return Err(BadKey::new(
            "interval",
            format!(
                "gives {samples} samples of the {} window; a phase takes at most {MAX_SAMPLES}: use an interval of at least {}",
                humantime::format_duration(run.duration),
                humantime::format_duration(shortest.max(MIN_INTERVAL))
            ),
        ));
    }
    Ok(())
}

/// A group's sizes: what its transport sends as asked, and what a rank can hold.
fn check_sizes(g: &GroupSpec) -> Result<(), BadKey> {
    if g.name.is_empty() || g.name.chars().count() > MAX_NAME || g.name.chars().any(char::is_control) {
        return Err(BadKey::new(
            "name",
            format!("must be 1 to {MAX_NAME} characters, none of them control characters"),
        ));
    }
    if g.message_size.is_some_and(|m| m.bytes() == 0) {
        return Err(BadKey::new("message_size", "must be at least 1 byte".into()));
    }
    if let Some(m) = g.message_size.filter(|m| m.bytes() != ATOMIC_SIZE && g.effective_op().is_atomic()) {
        return Err(BadKey::new("message_size", atomic_size_error(m)));
    }
    let size = g.effective_message_size();
    let limits::MessageSizes { largest, why: valid } = limits::message_sizes(g.transport);
    if size.bytes() > largest {
        return Err(BadKey::new("message_size", format!("{size} is too large: {valid}")));
    }
    if g.streams == 0 || g.streams > MAX_STREAMS {
        return Err(BadKey::new(
            "streams",
            format!("{} is outside 1..={MAX_STREAMS} (connections per flow)", g.streams),
        ));
    }
    if let Some(flows) = g.flows.as_ref().filter(|f| f.len() > MAX_FLOWS) {
        return Err(BadKey::new("flows", format!("lists {} flows; a group takes at most {MAX_FLOWS}", flows.len())));
    }
    Ok(())
}

/// `streams` is TCP's parallel connections of a bandwidth flow: refused
/// where nothing would apply it, rather than shown in results it did not shape.
fn check_streams(g: &GroupSpec) -> Result<(), BadKey> {
    if g.streams == 1 {
        return Ok(());
    }
    if g.mode == Mode::Latency {
        return Err(BadKey::new("streams", "latency ping-pong runs one stream per flow; set streams = 1".into()));
    }
    if g.transport == Transport::Rdma {
        return Err(BadKey::new(
            "streams",
            format!(
                "is {}, but an RDMA flow has no streams (they are TCP connections); set streams = 1 and ask \
                 for parallelism with rdma.qps (queue pairs per flow) or rdma.threads",
                g.streams
            ),
        ));
    }
    Ok(())
}

/// `[[stress]]`: a duty cycle, and burners the machine can hold.
fn check_stress(st: &StressTable, machine: &Machine) -> Result<(), BadKey> {
    if !(1..=100).contains(&st.load) {
        return Err(BadKey::new("load", format!("{} is not a duty cycle; use 1 to 100 (percent)", st.load)));
    }
    let most = THREADS_PER_CORE * machine.cores;
    let burners = match st.threads {
        Threads::Count(0) => return Err(BadKey::new("threads", "must be at least 1, or \"all\"".into())),
        Threads::Count(n) if n > most => {
            return Err(BadKey::new(
                "threads",
                format!(
                    "{n} burners are more than {THREADS_PER_CORE} per core of this machine ({} cores: at most {most}); \"all\" runs one per core of each rank",
                    machine.cores
                ),
            ))
        }
        Threads::Count(n) => n,
        Threads::All => machine.cores,
    };
    if st.cores.is_some() && st.numa.is_asked() {
        return Err(BadKey::new("numa", "give either `cores` or `numa`, not both".into()));
    }
    let (Some(memory), Some(total)) = (st.memory, machine.memory) else { return Ok(()) };
    if (burners as u128) * u128::from(memory.bytes()) > u128::from(total / 2) {
        return Err(BadKey::new(
            "memory",
            format!(
                "{burners} burner(s) × {memory} is more than half of this machine's memory ({:.1} GiB); lower `memory` or `threads`",
                total as f64 / f64::from(1u32 << 30)
            ),
        ));
    }
    Ok(())
}

/// Every sweep point within the same bounds as the scenario itself (a
/// point may change a size, a transport or the stress).
fn check_points(sweep: &SweepSpec, s: &Scenario, machine: &Machine) -> Result<(), BadPoint> {
    for point in sweep.points(s, usize::MAX)? {
        let at = match point.by {
            None => format!("{}={}", sweep.parameter.name(), point.value),
            Some(by) => format!(
                "{}={} {}={by}",
                sweep.parameter.name(),
                point.value,
                sweep.by.as_ref().map_or("", |b| b.parameter.name())
            ),
        };
        for g in &point.scenario.groups {
            check_sizes(g)
                .and_then(|()| check_streams(g))
                .and_then(|()| super::rate::check_group(g))
                .map_err(|error| BadPoint::Group { at: at.clone(), group: g.name.clone(), error })?;
        }
        for st in &point.scenario.stress {
            check_stress(st, machine).map_err(|error| BadPoint::Stress { at: at.clone(), error })?;
        }
    }
    Ok(())
}

/// A sweep point the scenario's own bounds refuse: where (`at`: the
/// parameters' values) and which key.
#[derive(Debug, thiserror::Error)]
enum BadPoint {
    #[error(transparent)]
    Point(#[from] PointError),
    #[error("at {at}, group `{group}`: `{}` {}", .error.key, .error.reason)]
    Group { at: String, group: String, error: BadKey },
    #[error("at {at}, stress `{}`: {}", .error.key, .error.reason)]
    Stress { at: String, error: BadKey },
}

/// Each pattern takes its own selectors; a selector it ignores is a mistake.
fn check_selectors(g: &GroupSpec) -> Result<(), BadKey> {
    let allowed: &[&str] = match g.pattern {
        Pattern::FanIn | Pattern::OneToAll => &["senders", "receivers"],
        Pattern::Pairwise => &["ranks", "flows"],
        Pattern::AllToAll
        | Pattern::Ring
        | Pattern::RandomRing
        | Pattern::AllPairs
        | Pattern::Bisection
        | Pattern::Mesh => &["ranks"],
        Pattern::Explicit => &["flows"],
    };
    let given = [
        ("senders", g.senders.is_some()),
        ("receivers", g.receivers.is_some()),
        ("ranks", g.ranks.is_some()),
        ("flows", g.flows.is_some()),
    ];
    for (key, present) in given {
        if present && !allowed.contains(&key) {
            return Err(BadKey::new(
                key,
                format!("does not apply to pattern `{}` (it takes: {})", g.pattern.name(), allowed.join(", ")),
            ));
        }
    }
    if g.seed.is_some() && g.pattern != Pattern::RandomRing {
        return Err(BadKey::new(
            "seed",
            format!("only `random-ring` takes a seed; `{}` has no random order", g.pattern.name()),
        ));
    }
    if g.pattern == Pattern::Explicit && g.flows.as_ref().is_none_or(Vec::is_empty) {
        return Err(BadKey::new("flows", "pattern `explicit` needs flows = [[src, dst], ...]".into()));
    }
    if g.pattern == Pattern::Pairwise && g.flows.is_some() && g.ranks.is_some() {
        return Err(BadKey::new("flows", "give either `ranks` or explicit `flows`, not both".into()));
    }
    Ok(())
}

/// Ops and knobs the group's transport has.
fn check_transport(g: &GroupSpec) -> Result<(), BadKey> {
    match g.transport {
        Transport::Tcp => {
            if g.op.is_some_and(|op| op != Op::Send) {
                return Err(BadKey::new(
                    "op",
                    "tcp streams only `send`; write, read and atomics are RDMA operations".into(),
                ));
            }
            if g.rdma.is_some() {
                return Err(BadKey::new("rdma", "RDMA knobs need transport = \"rdma\"".into()));
            }
            if let Some(key) = g.memory.filter(|m| m.any_gpu()).map(|_| "memory").or(g.gpu.as_ref().map(|_| "gpu")) {
                return Err(BadKey::new(
                    key,
                    "GPU memory is registered with an RDMA NIC: it needs transport = \"rdma\" (TCP streams send \
                     from host memory)"
                        .into(),
                ));
            }
            let max = u32::from(limits::MAX_DSCP);
            if let Some(dscp) = g.dscp.filter(|&d| d > max) {
                return Err(BadKey::new(
                    "dscp",
                    format!("{dscp} is outside 0..={max} (the 6-bit DSCP; e.g. 46 for EF, 26 for AF31)"),
                ));
            }
        }
        Transport::Rdma => {
            if g.dscp.is_some() {
                return Err(BadKey::new(
                    "dscp",
                    "is for TCP groups; an RDMA group sets rdma.traffic_class (RoCE sends traffic_class >> 2 \
                     as the DSCP, so DSCP 26 is traffic_class = 104)"
                        .into(),
                ));
            }
            if let Some(knobs) = &g.rdma {
                if knobs.iterations.is_some() {
                    return Err(BadKey::new(
                        "rdma",
                        "`iterations` (perftest's -n) does not apply to a run: every flow is measured over the \
                         phase's common window; set `duration` in [run]"
                            .into(),
                    ));
                }
            }
            // The knobs together with the group's op, mode and size (latency takes one QP).
            if let Some(params) = g.rdma_params() {
                params.validate().map_err(|e| BadKey::new("rdma", e.to_string()))?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::tests::{err, FAN_IN};

    /// A 2-core machine with 8 GiB, whatever this one has.
    const SMALL: Machine = Machine { cores: 2, memory: Some(8 << 30) };

    fn err_on(machine: &Machine, text: &str) -> String {
        let s: Scenario = toml::from_str(text).expect("scenario parses");
        validate(&s, machine).expect_err("scenario is refused").reason
    }

    #[test]
    fn the_window_is_sampled_in_milliseconds() {
        let e = err(&FAN_IN.replace("interval = \"1s\"", "interval = \"1ns\""));
        assert_eq!(e, "s.toml:6: [run]: field `interval`: must be between 1ms and the duration (3s)");
        let e = err(&FAN_IN.replace("\"3s\"", "\"200s\"").replace("interval = \"1s\"", "interval = \"1ms\""));
        assert_eq!(
            e,
            "s.toml:6: [run]: field `interval`: gives 200000 samples of the 3m 20s window; a phase takes at most 100000: use an interval of at least 2ms"
        );
    }

    #[test]
    fn durations_cannot_overflow_the_window() {
        let e = err(&FAN_IN.replace("\"3s\"", "\"8days\""));
        assert_eq!(e, "s.toml:4: [run]: field `duration`: must be at most 7days; run a longer soak as several runs");
        let e = err(&FAN_IN.replace("\"500ms\"", "\"500000years\""));
        assert_eq!(e, "s.toml:5: [run]: field `warmup`: must be at most 7days");
    }

    #[test]
    fn traffic_classes_are_bounded_per_transport() {
        let tcp = |dscp: u32| FAN_IN.replace("senders = \"1-3\"", &format!("senders = \"1-3\"\ndscp = {dscp}"));
        assert_eq!(
            err(&tcp(64)),
            "s.toml:14: group \"incast\": field `dscp`: 64 is outside 0..=63 (the 6-bit DSCP; e.g. 46 for EF, 26 for AF31)"
        );
        parse_ok(&tcp(63));
        let rdma = tcp(26).replace("senders", "transport = \"rdma\"\nsenders");
        let e = err(&rdma);
        assert!(e.starts_with("s.toml:15: group \"incast\": field `dscp`: is for TCP groups"), "{e}");
        assert!(e.contains("traffic_class = 104"), "says what to use instead: {e}");
        let table = |knob: &str| {
            FAN_IN.replace("senders = \"1-3\"", "senders = \"1-3\"\ntransport = \"rdma\"")
                + "[group.rdma]\n"
                + knob
                + "\n"
        };
        assert_eq!(
            err(&table("traffic_class = 256")),
            "s.toml:15: group \"incast\": field `rdma`: invalid RDMA parameter traffic_class: 256 is outside 0..=255 (the GRH traffic class; RoCE sends traffic_class >> 2 as the DSCP, e.g. 104 for DSCP 26)"
        );
        assert_eq!(
            err(&table("service_level = 16")),
            "s.toml:15: group \"incast\": field `rdma`: invalid RDMA parameter service_level: 16 is outside 0..=15 (the InfiniBand service level, 4 bits)"
        );
        let e = err(&table("connect = \"rdma-cm\""));
        assert!(e.contains("unknown variant `rdma-cm`, expected `verbs` or `rdma_cm`"), "{e}");
        parse_ok(&table("traffic_class = 255\nservice_level = 15"));
        parse_ok(&table("connect = \"rdma_cm\""));
    }

    #[test]
    fn message_sizes_are_what_the_transport_sends() {
        let e = err(&FAN_IN.replace("\"64K\"", "\"1T\""));
        assert_eq!(
            e,
            "s.toml:11: group \"incast\": field `message_size`: 1024G is too large: TCP messages are 1 B to 4 MiB (each stream sends from one buffer that size)"
        );
        parse_ok(&FAN_IN.replace("\"64K\"", "\"4M\""));
        let rdma = FAN_IN.replace("\"64K\"", "\"2G\"").replace("senders", "transport = \"rdma\"\nsenders");
        let e = err(&rdma);
        assert_eq!(
            e,
            "s.toml:11: group \"incast\": field `message_size`: 2G is too large: RDMA messages are 1 B to 1 GiB (one work request, the RC limit of most HCAs)"
        );
        parse_ok(&rdma.replace("\"2G\"", "\"1G\""));
    }

    #[test]
    fn ud_is_send_of_one_packet() {
        let ud = FAN_IN.replace("senders", "transport = \"rdma\"\nop = \"send\"\nsenders")
            + "[group.rdma]\nconnection = \"UD\"\n";
        parse_ok(&ud.replace("\"64K\"", "\"4K\""));
        let e = err(&ud);
        assert_eq!(
            e,
            "s.toml:16: group \"incast\": field `rdma`: invalid RDMA parameter message_size: 65536 B is above UD's largest message, 4096 B (one packet at the largest path MTU)"
        );
        let e = err(&ud.replace("\"64K\"", "\"1K\"").replace("op = \"send\"", "op = \"write\""));
        assert_eq!(
            e,
            "s.toml:16: group \"incast\": field `rdma`: invalid RDMA parameter op: connection UD carries send only (like ib_send_bw -c UD); write needs RC"
        );
        let e = err(&ud.replace("\"UD\"", "\"XRC\""));
        assert!(e.contains("unknown variant `XRC`, expected one of `RC`, `rc`, `UD`, `ud`"), "{e}");
    }

    #[test]
    fn atomics_move_8_bytes() {
        let atomic = FAN_IN.replace("senders", "transport = \"rdma\"\nop = \"fetch_add\"\nsenders");
        let e = err(&atomic);
        assert_eq!(
            e,
            "s.toml:11: group \"incast\": field `message_size`: 64K: atomics (fetch_add, cmp_swap) move one 8-byte operand; give 8 or leave the size out"
        );
        parse_ok(&atomic.replace("\"64K\"", "8"));
        parse_ok(&atomic.replace("message_size = \"64K\"\n", ""));
    }

    fn parse_ok(text: &str) {
        crate::scenario::parse(text, std::path::Path::new("s.toml")).expect("scenario is valid");
    }

    #[test]
    fn streams_and_flows_per_group_are_bounded() {
        let e = err(&FAN_IN.replace("senders = \"1-3\"", "senders = \"1-3\"\nstreams = 100000"));
        assert_eq!(
            e,
            "s.toml:14: group \"incast\": field `streams`: 100000 is outside 1..=1024 (connections per flow)"
        );
        let mut s: Scenario =
            toml::from_str("run.name = \"r\"\n[[group]]\nname = \"x\"\npattern = \"explicit\"\nflows = [[0, 1]]\n")
                .unwrap();
        s.groups[0].flows = Some(vec![[0, 1]; MAX_FLOWS + 1]);
        assert_eq!(
            validate(&s, &SMALL),
            Err(BadField::new(Field::group(0, "flows"), "lists 1048577 flows; a group takes at most 1048576"))
        );
    }

    #[test]
    fn rdma_groups_refuse_streams_naming_group_and_field() {
        let rdma = FAN_IN.replace("senders = \"1-3\"", "senders = \"1-3\"\ntransport = \"rdma\"\nstreams = 4");
        let e = err(&rdma);
        assert!(
            e.starts_with("s.toml:15: group \"incast\": field `streams`: is 4, but an RDMA flow has no streams"),
            "{e}"
        );
        assert!(e.contains("rdma.qps"), "says what to use instead: {e}");
        // Swept into RDMA: the point that would ignore it is named.
        let swept = FAN_IN.replace("senders = \"1-3\"", "senders = \"1-3\"\nstreams = 4")
            + "[sweep]\nparameter = \"transport\"\nvalues = [\"tcp\", \"rdma\"]\n";
        let e = err(&swept);
        assert!(e.contains("at transport=rdma, group `incast`: `streams` is 4, but an RDMA flow"), "{e}");
        let tcp = FAN_IN.replace("senders = \"1-3\"", "senders = \"1-3\"\nstreams = 4");
        crate::scenario::parse(&tcp, std::path::Path::new("s.toml")).expect("TCP takes streams");
    }

    #[test]
    fn stress_fits_the_machine() {
        let stress = |table: &str| format!("{FAN_IN}\n[[stress]]\n{table}\n");
        let e = err_on(&SMALL, &stress("threads = 9"));
        assert_eq!(
            e,
            "9 burners are more than 4 per core of this machine (2 cores: at most 8); \"all\" runs one per core of each rank"
        );
        let e = err_on(&SMALL, &stress("threads = \"all\"\nmemory = \"3G\""));
        assert_eq!(
            e,
            "2 burner(s) × 3G is more than half of this machine's memory (8.0 GiB); lower `memory` or `threads`"
        );
        let s: Scenario = toml::from_str(&stress("threads = 8\nmemory = \"512M\"")).unwrap();
        validate(&s, &SMALL).unwrap();
        // Through the file, on whatever machine runs the test.
        let e = err(&stress("threads = 1000000000"));
        assert!(
            e.starts_with("s.toml:16: stress 0: field `threads`: 1000000000 burners are more than 4 per core"),
            "{e}"
        );
    }

    #[test]
    fn sweeps_are_bounded_point_by_point() {
        let values: Vec<String> = (1..=10_001).map(|n| n.to_string()).collect();
        let sweep = |body: &str| format!("{FAN_IN}\n[sweep]\n{body}\n");
        let e = err(&sweep(&format!("parameter = \"streams\"\nvalues = [{}]", values.join(","))));
        assert_eq!(
            e,
            "s.toml:17: [sweep]: field `values`: give 10001 points (one phase each); a sweep takes at most 10000"
        );
        let e = err(&sweep("parameter = \"message_size\"\nvalues = [\"64K\", \"8M\"]"));
        assert_eq!(
            e,
            "s.toml:17: [sweep]: field `values`: at message_size=8M, group `incast`: `message_size` 8M is too large: TCP messages are 1 B to 4 MiB (each stream sends from one buffer that size)"
        );
        let e = err(&sweep("parameter = \"streams\"\nvalues = [1, 2000]"));
        assert!(
            e.ends_with("at streams=2000, group `incast`: `streams` 2000 is outside 1..=1024 (connections per flow)"),
            "{e}"
        );
    }

    #[test]
    fn names_fit_a_folder_and_a_terminal() {
        let e = err(&FAN_IN.replace("name = \"fan\"", "name = \"../a b\""));
        assert_eq!(
            e,
            "s.toml:3: [run]: field `name`: `../a b` cannot name a results folder: use 1 to 64 of A-Z a-z 0-9 . _ -"
        );
        let e = err(&FAN_IN.replace("name = \"fan\"", &format!("name = \"{}\"", "n".repeat(65))));
        assert!(e.ends_with("cannot name a results folder: use 1 to 64 of A-Z a-z 0-9 . _ -"), "{e}");
        let e = err(&FAN_IN.replace("name = \"incast\"", "name = \"in\\u001b[2Jcast\""));
        assert_eq!(e, "s.toml:9: group \"in\\u{1b}[2Jcast\": field `name`: must be 1 to 64 characters, none of them control characters");
        let text = FAN_IN.replace("name = \"fan\"\n", "");
        let (s, _) = crate::scenario::parse(&text, std::path::Path::new("dir/my test (2).toml")).unwrap();
        assert_eq!(s.run.name, "my-test--2-");
    }

    #[test]
    fn selector_for_other_pattern_is_named() {
        let e = err(&FAN_IN.replace("pattern = \"fan-in\"", "pattern = \"ring\""));
        assert_eq!(
            e,
            "s.toml:13: group \"incast\": field `senders`: does not apply to pattern `ring` (it takes: ranks)"
        );
    }

    #[test]
    fn zero_values_are_rejected() {
        let e = err(&FAN_IN.replace("\"3s\"", "\"0s\""));
        assert_eq!(e, "s.toml:4: [run]: field `duration`: must be longer than 0s, e.g. \"10s\"");
        let e = err(&FAN_IN.replace("\"64K\"", "0"));
        assert_eq!(e, "s.toml:11: group \"incast\": field `message_size`: must be at least 1 byte");
    }

    #[test]
    fn explicit_needs_flows_and_groups_need_names() {
        let e = err("[[group]]\nname = \"x\"\npattern = \"explicit\"\n");
        assert_eq!(e, "s.toml:1: group \"x\": field `flows`: pattern `explicit` needs flows = [[src, dst], ...]");
        let e = err("[run]\nduration = \"1s\"\n");
        assert!(e.starts_with("s.toml:1:1: missing field `group`"), "{e}");
    }

    #[test]
    fn latency_takes_one_stream() {
        let e = err(&FAN_IN.replace("senders = \"1-3\"", "senders = \"1-3\"\nmode = \"latency\"\nstreams = 2"));
        assert_eq!(
            e,
            "s.toml:15: group \"incast\": field `streams`: latency ping-pong runs one stream per flow; set streams = 1"
        );
    }

    #[test]
    fn duplicate_group_names() {
        let text = format!("{FAN_IN}\n[[group]]\nname = \"incast\"\npattern = \"ring\"\n");
        assert_eq!(err(&text), "s.toml:16: group \"incast\": field `name`: `incast` is also the name of group 0");
    }
}
