//! Validation of a parsed scenario: what a single file can tell on its own,
//! before any hostfile is read. Errors name the field; the caller adds the line.

use super::{Field, GroupSpec, Mode, Op, Pattern, Scenario, Transport};
use crate::load::stress::Threads;
use crate::transport::rdma::RdmaParams;

/// Checks what a single file can tell on its own, before any hostfile is read.
pub(super) fn validate(s: &Scenario) -> Result<(), (Field, String)> {
    let run = &s.run;
    if run.duration.is_zero() {
        return Err((Field::run("duration"), "must be longer than 0s, e.g. \"10s\"".into()));
    }
    if run.interval.is_zero() || run.interval > run.duration {
        return Err((
            Field::run("interval"),
            format!("must be between 1ms and the duration ({})", humantime::format_duration(run.duration)),
        ));
    }
    if s.groups.is_empty() {
        return Err((Field::top("group"), "a scenario needs at least one [[group]]".into()));
    }
    for (i, g) in s.groups.iter().enumerate() {
        if let Some(j) = s.groups[..i].iter().position(|other| other.name == g.name) {
            return Err((Field::group(i, "name"), format!("`{}` is also the name of group {j}", g.name)));
        }
        if g.message_size.is_some_and(|m| m.bytes() == 0) {
            return Err((Field::group(i, "message_size"), "must be at least 1 byte".into()));
        }
        if g.streams == 0 {
            return Err((Field::group(i, "streams"), "must be at least 1".into()));
        }
        if g.mode == Mode::Latency && g.streams != 1 {
            return Err((
                Field::group(i, "streams"),
                "latency ping-pong runs one stream per flow; set streams = 1".into(),
            ));
        }
        check_selectors(g).map_err(|(key, m)| (Field::group(i, key), m))?;
        if g.pattern == Pattern::AllPairs && s.groups.len() > 1 {
            return Err((
                Field::group(i, "pattern"),
                "`all-pairs` runs in rounds of its own (one phase per round): give it a scenario without other groups"
                    .into(),
            ));
        }
        if g.cores.is_some() && g.numa.is_asked() {
            return Err((Field::group(i, "numa"), "give either `cores` or `numa`, not both".into()));
        }
        check_transport(g).map_err(|(key, m)| (Field::group(i, key), m))?;
    }
    if let Some(sw) = &s.sweep {
        sw.check(s).map_err(|(key, m)| (Field::sweep(key), m))?;
    }
    for (i, st) in s.stress.iter().enumerate() {
        if !(1..=100).contains(&st.load) {
            return Err((Field::stress(i, "load"), format!("{} is not a duty cycle; use 1 to 100 (percent)", st.load)));
        }
        if st.threads == Threads::Count(0) {
            return Err((Field::stress(i, "threads"), "must be at least 1, or \"all\"".into()));
        }
        if st.cores.is_some() && st.numa.is_asked() {
            return Err((Field::stress(i, "numa"), "give either `cores` or `numa`, not both".into()));
        }
    }
    s.check.validate().map_err(|(key, m)| (Field::check(key), m))
}

/// Each pattern takes its own selectors; a selector it ignores is a mistake.
fn check_selectors(g: &GroupSpec) -> Result<(), (&'static str, String)> {
    let allowed: &[&str] = match g.pattern {
        Pattern::FanIn | Pattern::OneToAll => &["senders", "receivers"],
        Pattern::Pairwise => &["ranks", "flows"],
        Pattern::AllToAll | Pattern::Ring | Pattern::AllPairs => &["ranks"],
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
            return Err((
                key,
                format!("does not apply to pattern `{}` (it takes: {})", g.pattern.name(), allowed.join(", ")),
            ));
        }
    }
    if g.pattern == Pattern::Explicit && g.flows.as_ref().is_none_or(Vec::is_empty) {
        return Err(("flows", "pattern `explicit` needs flows = [[src, dst], ...]".into()));
    }
    if g.pattern == Pattern::Pairwise && g.flows.is_some() && g.ranks.is_some() {
        return Err(("flows", "give either `ranks` or explicit `flows`, not both".into()));
    }
    Ok(())
}

/// Ops and knobs the group's transport has.
fn check_transport(g: &GroupSpec) -> Result<(), (&'static str, String)> {
    match g.transport {
        Transport::Tcp => {
            if g.op.is_some_and(|op| op != Op::Send) {
                return Err(("op", "tcp streams only `send`; write, read and atomics are RDMA operations".into()));
            }
            if g.rdma.is_some() {
                return Err(("rdma", "RDMA knobs need transport = \"rdma\"".into()));
            }
        }
        Transport::Rdma => {
            if let Some(knobs) = &g.rdma {
                let defaults = RdmaParams::default();
                if knobs.op != defaults.op || knobs.mode != defaults.mode || knobs.message_size != defaults.message_size
                {
                    return Err((
                        "rdma",
                        "set `op`, `mode` and `message_size` on the group itself, not in its rdma table".into(),
                    ));
                }
                if knobs.iterations.is_some() {
                    return Err((
                        "rdma",
                        "`iterations` (perftest's -n) does not apply to a run: every flow is measured over the \
                         phase's common window; set `duration` in [run]"
                            .into(),
                    ));
                }
            }
            // The knobs together with the group's op, mode and size (latency takes one QP).
            if let Some(params) = g.rdma_params() {
                params.validate().map_err(|e| ("rdma", e.to_string()))?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::scenario::tests::{err, FAN_IN};

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
