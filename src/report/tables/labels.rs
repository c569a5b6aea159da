//! Names of checked items and suspects as people read them, shared by every
//! table, the HTML report and the JUnit file.

use crate::result::{Checked, Direction, Retest, RunResult, Suspect, SuspectKind};

/// `h1 (rank 0)` for a rank of the run.
pub fn rank(run: &RunResult, rank: usize) -> String {
    match run.plan.ranks.get(rank) {
        Some(r) => format!("{} (rank {rank})", r.label()),
        None => format!("rank {rank}"),
    }
}

fn host(run: &RunResult, rank: usize) -> String {
    run.plan.ranks.get(rank).map_or_else(|| format!("rank {rank}"), |r| r.label())
}

/// The phase's name, e.g. `round 3/5`.
pub fn phase(run: &RunResult, index: usize) -> String {
    run.phases.iter().find(|p| p.index == index).map_or_else(|| format!("phase {index}"), |p| p.name.clone())
}

/// What a check was about, e.g. `round 2/5: flow 1 h3 → h6`.
pub fn checked(run: &RunResult, item: &Checked) -> String {
    match item {
        Checked::Flow { phase: p, flow, src, dst } => {
            format!("{}: flow {flow} {} → {}", phase(run, *p), host(run, *src), host(run, *dst))
        }
        Checked::Host { phase: p, rank: r, direction } => {
            let way = match direction {
                Direction::Tx => "sending",
                Direction::Rx => "receiving",
            };
            format!("{}: host {} {way}", phase(run, *p), rank(run, *r))
        }
        Checked::Receiver { phase: p, rank: r } => format!("{}: receiver {}", phase(run, *p), rank(run, *r)),
        Checked::Group { phase: p, group } => format!("{}: group {group}", phase(run, *p)),
        Checked::Rule => "(the rule as a whole)".to_string(),
    }
}

/// `host h3`, `NIC node17 mlx5_3 (rank 5) or its cable to rail3 port 17`,
/// `cable of NIC node17 mlx5_3 (rank 5) to rail3 port 17`, `link h2 – h5`,
/// `the fabric`, `uplink leaf3 ↔ spine1` (`… (spine1 → leaf3 only)` when
/// one way failed), `leaf switch leaf3`.
pub fn suspect(s: &Suspect) -> String {
    match &s.kind {
        SuspectKind::Host { rank, host, ranks } => match &ranks[..] {
            [] => format!("host {host} (rank {rank})"),
            all => format!("host {host} (all {} of its NICs: ranks {})", all.len(), listed(all, ", ")),
        },
        SuspectKind::Nic(end) => match &end.cable {
            Some(to) => format!("NIC {} or its cable to {to}", end.named()),
            None => format!("NIC {}", end.named()),
        },
        SuspectKind::Cable { end, .. } => match &end.cable {
            Some(to) => format!("cable of NIC {} to {to}", end.named()),
            None => format!("cable of NIC {}", end.named()),
        },
        SuspectKind::Link { a_host, b_host, .. } => format!("link {a_host} – {b_host}"),
        SuspectKind::Fabric => "the fabric".to_string(),
        SuspectKind::Uplink { uplinks, one_way, cables, .. } => {
            let named = match (&uplinks[..], &cables[..]) {
                ([_], [cable]) => format!("uplink cable {cable}"),
                ([one], _) => format!("uplink {one}"),
                (several, _) => format!("one of uplinks {}", listed(several, ", ")),
            };
            match one_way.is_empty() {
                true => named,
                false => format!("{named} ({} only)", listed(one_way, " or ")),
            }
        }
        SuspectKind::Leaf { leaf, .. } => format!("leaf switch {leaf}"),
    }
}

fn listed<T: ToString>(items: &[T], between: &str) -> String {
    items.iter().map(ToString::to_string).collect::<Vec<_>>().join(between)
}

/// What the retest showed, in words.
pub fn retest(r: &Retest) -> String {
    match r {
        Retest::NotRun { reason } => format!("not retested ({reason})"),
        Retest::Confirmed { gbps, .. } => format!("BAD: failed again alone ({gbps:.3} Gb/s)"),
        Retest::Cleared { gbps, .. } => format!("cleared: passed alone ({gbps:.3} Gb/s)"),
        Retest::Inconclusive { reason, .. } => format!("inconclusive: {reason}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result::NicEnd;
    use crate::topology::{SwitchName, Uplink, UplinkCable, Way};

    fn suspect_of(kind: SuspectKind) -> Suspect {
        Suspect { kind, evidence: String::new(), retest: Retest::NotRun { reason: "not retested".into() } }
    }

    fn uplink_suspect(uplinks: &[(&str, &str)], one_way: &[(&str, &str)]) -> Suspect {
        let name = |s: &str| SwitchName(s.into());
        suspect_of(SuspectKind::Uplink {
            uplinks: uplinks.iter().map(|&(leaf, spine)| Uplink { leaf: name(leaf), spine: name(spine) }).collect(),
            pairs: vec![[0, 4]],
            one_way: one_way.iter().map(|&(from, to)| Way { from: name(from), to: name(to) }).collect(),
            cables: Vec::new(),
        })
    }

    #[test]
    fn a_nic_or_cable_suspect_names_its_device_and_cable_and_a_host_its_nics() {
        let nic = |nic: Option<&str>, cable: Option<&str>| {
            let (nic, cable) = (nic.map(str::to_string), cable.map(str::to_string));
            suspect(&suspect_of(SuspectKind::Nic(NicEnd { rank: 5, host: "node03".into(), nic, cable })))
        };
        assert_eq!(nic(Some("mlx5_1"), None), "NIC node03 mlx5_1 (rank 5)");
        assert_eq!(
            nic(Some("mlx5_1"), Some("rail1 port 3")),
            "NIC node03 mlx5_1 (rank 5) or its cable to rail1 port 3"
        );
        assert_eq!(nic(None, None), "NIC node03 of rank 5");
        let cable = |cable: Option<&str>| {
            let (nic, cable) = (Some("mlx5_1".to_string()), cable.map(str::to_string));
            let end = NicEnd { rank: 5, host: "node03".into(), nic, cable };
            suspect(&suspect_of(SuspectKind::Cable { end, link_events: 2 }))
        };
        assert_eq!(cable(Some("rail1 port 3")), "cable of NIC node03 mlx5_1 (rank 5) to rail1 port 3");
        assert_eq!(cable(None), "cable of NIC node03 mlx5_1 (rank 5)");
        let host =
            |ranks: Vec<usize>| suspect(&suspect_of(SuspectKind::Host { rank: 2, host: "node02".into(), ranks }));
        assert_eq!(host(vec![]), "host node02 (rank 2)");
        assert_eq!(host(vec![2, 3]), "host node02 (all 2 of its NICs: ranks 2, 3)");
    }

    #[test]
    fn an_uplink_suspect_names_the_one_way_that_failed() {
        assert_eq!(suspect(&uplink_suspect(&[("leaf3", "spine1")], &[])), "uplink leaf3 ↔ spine1");
        let one = uplink_suspect(&[("leaf3", "spine1")], &[("spine1", "leaf3")]);
        assert_eq!(suspect(&one), "uplink leaf3 ↔ spine1 (spine1 → leaf3 only)");
        let two =
            uplink_suspect(&[("leaf1", "spine1"), ("leaf2", "spine1")], &[("leaf1", "spine1"), ("spine1", "leaf2")]);
        assert_eq!(
            suspect(&two),
            "one of uplinks leaf1 ↔ spine1, leaf2 ↔ spine1 (leaf1 → spine1 or spine1 → leaf2 only)"
        );
    }

    #[test]
    fn an_uplink_of_one_cable_is_named_as_that_cable() {
        let with = |ports: &[(u32, u32)]| {
            let mut one = uplink_suspect(&[("leaf3", "spine1")], &[("spine1", "leaf3")]);
            let SuspectKind::Uplink { uplinks, cables, .. } = &mut one.kind else { unreachable!() };
            let uplink = &uplinks[0];
            cables.extend(ports.iter().map(|&(leaf_port, spine_port)| UplinkCable {
                uplink: uplink.clone(),
                leaf_port,
                spine_port,
            }));
            suspect(&one)
        };
        assert_eq!(with(&[(35, 3)]), "uplink cable leaf3 port 35 ↔ spine1 port 3 (spine1 → leaf3 only)");
        assert_eq!(with(&[(35, 3), (36, 4)]), "uplink leaf3 ↔ spine1 (spine1 → leaf3 only)", "two cables: the uplink");
    }
}
