//! Pairs with `rails = "same"`: rank k of a host is on rail k (its slot,
//! bound to the k-th NIC of `devices=`), and only rail k of one host meets
//! rail k of another. Each pattern pairs HOSTS as it pairs ranks, then
//! every rail both hosts of a pair have runs between them; fan-in keeps
//! the senders whose rail the receiving rank has (docs/SCENARIOS.md,
//! "Rails").

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use super::patterns::{cross, expand as rank_pairs, select, with_reverse, Pairs};
use super::rounds::circle;
use super::RankInfo;
use crate::scenario::rails::not_for;
use crate::scenario::{BadKey, GroupSpec, Pattern, RankSet};

/// Where a rank is: its host (by the hostfile's name) and its rail (slot).
#[derive(PartialEq, Eq)]
struct Place<'a> {
    host: &'a str,
    rail: u32,
}

fn place(rank: &RankInfo) -> Place<'_> {
    Place { host: rank.host.as_str(), rail: rank.slot }
}

/// The hosts of some ranks, in the order of their first rank, each with
/// those of its ranks by rail.
struct Hosts {
    rails: Vec<BTreeMap<u32, usize>>,
    /// Each of those ranks' host.
    host_of: HashMap<usize, usize>,
}

impl Hosts {
    fn of(members: &[usize], ranks: &[RankInfo]) -> Hosts {
        let mut by_name: HashMap<&str, usize> = HashMap::new();
        let mut hosts = Hosts { rails: Vec::new(), host_of: HashMap::new() };
        for &rank in members {
            let Place { host: name, rail } = place(&ranks[rank]);
            let next = hosts.rails.len();
            let host = *by_name.entry(name).or_insert(next);
            if host == next {
                hosts.rails.push(BTreeMap::new());
            }
            // A host named on two lines repeats its slots: its first rank of a rail stands for it.
            hosts.rails[host].entry(rail).or_insert(rank);
            hosts.host_of.insert(rank, host);
        }
        hosts
    }

    /// Each host's first rank: what a pattern pairs in its place.
    fn firsts(&self) -> Vec<usize> {
        self.rails.iter().filter_map(|rails| rails.values().min().copied()).collect()
    }

    /// Every pair of hosts (each named by one of its ranks) as the pairs of
    /// the rails both have, rail by rail, in the pair's direction.
    fn join(&self, pairs: &[(usize, usize)]) -> Pairs {
        let mut out = Pairs::new();
        for (a, b) in pairs {
            let (Some(&a), Some(&b)) = (self.host_of.get(a), self.host_of.get(b)) else { continue };
            if a == b {
                continue;
            }
            let (a, b) = (&self.rails[a], &self.rails[b]);
            out.extend(a.iter().filter_map(|(rail, &src)| b.get(rail).map(|&dst| (src, dst))));
        }
        out
    }
}

/// All-pairs' rounds of hosts (the circle method over each host's first
/// rank: H − 1 rounds for an even H, H with one host idle for an odd),
/// each pair of hosts on every rail both have at once.
pub(super) fn rounds(members: &[usize], ranks: &[RankInfo]) -> Vec<Pairs> {
    let hosts = Hosts::of(members, ranks);
    circle(&hosts.firsts()).iter().map(|round| hosts.join(round)).collect()
}

/// Bisection's pairs of hosts (each named by its first rank of `ranks`)
/// on every rail both hosts have.
pub(super) fn widen(g: &GroupSpec, pairs: Pairs, ranks: &[RankInfo]) -> Result<Pairs, BadKey> {
    let members = select("ranks", &g.ranks, RankSet::All, ranks.len())?;
    Ok(Hosts::of(&members, ranks).join(&pairs))
}

/// Fan-in's and pairwise's pairs of one rail on two hosts.
pub(super) fn expand(g: &GroupSpec, ranks: &[RankInfo]) -> Result<Pairs, BadKey> {
    let n = ranks.len();
    match (g.pattern, &g.flows) {
        (Pattern::FanIn, _) => {
            // Not given: every rail of rank 0's host, as receivers = 0 is the
            // first host where a host runs one rank.
            let home = ranks.first().map(|r| r.host.as_str());
            let home_ranks = ranks.iter().filter(|r| Some(r.host.as_str()) == home);
            let default = RankSet::Ranges(home_ranks.map(|r| (r.rank, r.rank)).collect());
            let receivers = select("receivers", &g.receivers, default, n)?;
            let senders = select("senders", &g.senders, RankSet::All, n)?;
            Ok(cross(&senders, &receivers, false).into_iter().filter(|&pair| one_rail(ranks, pair)).collect())
        }
        (Pattern::Pairwise, Some(_)) => {
            let pairs = rank_pairs(g, n)?;
            match pairs.iter().find(|&&pair| !one_rail(ranks, pair)) {
                Some(&(src, dst)) => Err(BadKey::new("flows", off_rail(&ranks[src], &ranks[dst]))),
                None => Ok(pairs),
            }
        }
        (Pattern::Pairwise, None) => {
            let members = select("ranks", &g.ranks, RankSet::All, n)?;
            let hosts = Hosts::of(&members, ranks);
            let firsts = hosts.firsts();
            if firsts.len() % 2 == 1 {
                return Err(BadKey::new(
                    "ranks",
                    format!(
                        "pairwise with rails = \"same\" pairs hosts (host i with host i + H/2) and needs an even \
                         number of hosts, got {}",
                        firsts.len()
                    ),
                ));
            }
            let half = firsts.len() / 2;
            let pairs: Pairs = (0..half).map(|i| (firsts[i], firsts[i + half])).collect();
            Ok(with_reverse(hosts.join(&pairs), g.bidirectional))
        }
        (pattern, _) => Err(BadKey::new("rails", not_for(pattern))),
    }
}

/// Whether two ranks are one rail of two hosts.
pub(super) fn one_rail(ranks: &[RankInfo], (src, dst): (usize, usize)) -> bool {
    let (a, b) = (place(&ranks[src]), place(&ranks[dst]));
    a.host != b.host && a.rail == b.rail
}

fn off_rail(src: &RankInfo, dst: &RankInfo) -> String {
    format!(
        "flow [{}, {}] joins rank {} ({}, rail {}) and rank {} ({}, rail {}): with rails = \"same\" every pair \
         listed is one rail of two hosts",
        src.rank, dst.rank, src.rank, src.host, src.slot, dst.rank, dst.host, dst.slot
    )
}

/// Hosts of the job that do not all have as many rails (ranks) as most:
/// `rails = "same"` joins two of them only on the rails both have.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnevenRails {
    /// The rail count most hosts have, and how many hosts have it.
    pub most: u32,
    pub hosts_with_most: usize,
    /// The others, in hostfile order, with their rail counts.
    pub others: Vec<HostRails>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostRails {
    pub host: String,
    pub rails: u32,
}

/// At most this many of the other hosts are named.
const NAMED: usize = 8;

/// `None` when every host of the job has as many rails.
pub fn uneven_rails(ranks: &[RankInfo]) -> Option<UnevenRails> {
    let mut hosts: Vec<HostRails> = Vec::new();
    for r in ranks {
        if !hosts.iter().any(|h| h.host == r.host) {
            hosts.push(HostRails { host: r.host.clone(), rails: r.slots });
        }
    }
    let mut counts: BTreeMap<u32, usize> = BTreeMap::new();
    hosts.iter().for_each(|h| *counts.entry(h.rails).or_default() += 1);
    // Ties go to the larger rail count: the hosts that have a rail are the rule.
    let (&most, &hosts_with_most) = counts.iter().max_by_key(|&(&rails, &hosts)| (hosts, rails))?;
    let others: Vec<HostRails> = hosts.into_iter().filter(|h| h.rails != most).collect();
    (!others.is_empty()).then_some(UnevenRails { most, hosts_with_most, others })
}

impl fmt::Display for UnevenRails {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let named: Vec<String> =
            self.others.iter().take(NAMED).map(|h| format!("{} has {}", h.host, h.rails)).collect();
        let more = match self.others.len().saturating_sub(NAMED) {
            0 => String::new(),
            left => format!(" and {left} more host(s) differ"),
        };
        write!(
            f,
            "the hosts do not all have the same rails (ranks): {} host(s) have {}, {}{more}; rails = \"same\" joins \
             two hosts only on the rails both have, so a rail one host lacks is not measured to it",
            self.hosts_with_most,
            self.most,
            named.join(", ")
        )
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::path::Path;

    use super::*;
    use crate::plan::{build_on, Fabric, Plan};

    /// The plan of one group (`keys` added) on `hostfile`, or its error as
    /// the command prints it.
    fn plan_on(hostfile: &str, keys: &str, fabric: Option<&crate::topology::Topology>) -> Result<Plan, String> {
        let hosts = crate::hostfile::parse(hostfile, Path::new("hosts")).unwrap();
        let text = format!("[[group]]\nname = \"g\"\n{keys}\n");
        let (s, source) = crate::scenario::parse(&text, Path::new("s.toml")).map_err(|e| e.to_string())?;
        let fabric = fabric.map(|t| Fabric::new(t, &hosts));
        build_on(&hosts, &s, fabric.as_ref()).map_err(|bad| source.explain(&bad))
    }

    fn plan(hostfile: &str, keys: &str) -> Result<Plan, String> {
        plan_on(hostfile, keys, None)
    }

    /// Every flow of every phase as (src, dst).
    fn flows(plan: &Plan) -> Vec<(usize, usize)> {
        plan.phases.iter().flat_map(|p| p.flows.iter().map(|f| (f.src, f.dst))).collect()
    }

    /// Every flow joins one rail (slot) of two hosts.
    fn assert_one_rail_each(plan: &Plan) {
        for (src, dst) in flows(plan) {
            let (a, b) = (&plan.ranks[src], &plan.ranks[dst]);
            assert_ne!(a.host, b.host, "{src} -> {dst}: one host");
            assert_eq!(a.slot, b.slot, "{src} -> {dst}: two rails");
        }
    }

    const RAILS_64X8: &str = "node[01-64] slots=8\n";

    #[test]
    fn all_pairs_of_64_hosts_of_8_rails_is_63_rounds_of_every_rail_of_32_host_pairs() {
        let p = plan(RAILS_64X8, "pattern = \"all-pairs\"\nrails = \"same\"").unwrap();
        assert_eq!(p.ranks.len(), 512);
        assert_eq!(p.phases.len(), 63, "a round-robin of 64 hosts, not of 512 ranks (511)");
        assert_eq!(p.phases[0].name, "round 1/63");
        for phase in &p.phases {
            // 32 pairs of hosts, 8 rails each; every rank in one flow of the round.
            assert_eq!(phase.flows.len(), 32 * 8, "{}", phase.name);
            let ends: BTreeSet<usize> = phase.flows.iter().flat_map(|f| [f.src, f.dst]).collect();
            assert_eq!(ends.len(), 512, "{}: a rank twice in a round", phase.name);
        }
        assert_eq!(flows(&p).len(), 64 * 63 / 2 * 8);
        assert_one_rail_each(&p);
        // Every rail of every pair of hosts exactly once.
        let key = |(a, b): (usize, usize)| (a.min(b) / 8, a.max(b) / 8, a % 8);
        assert_eq!(flows(&p).into_iter().map(key).collect::<BTreeSet<_>>().len(), 64 * 63 / 2 * 8);
        let both = plan(RAILS_64X8, "pattern = \"all-pairs\"\nrails = \"same\"\nbidirectional = true").unwrap();
        assert_eq!((both.phases.len(), flows(&both).len()), (63, 64 * 63 * 8));
        assert_one_rail_each(&both);
    }

    #[test]
    fn all_pairs_of_an_odd_host_count_idles_one_host_a_round() {
        let p = plan("n[1-5] slots=2\n", "pattern = \"all-pairs\"\nrails = \"same\"").unwrap();
        assert_eq!(p.phases.len(), 5);
        for phase in &p.phases {
            assert_eq!(phase.flows.len(), 2 * 2, "{}: two pairs of hosts, two rails", phase.name);
            let hosts: BTreeSet<&str> =
                phase.flows.iter().flat_map(|f| [f.src, f.dst]).map(|r| p.ranks[r].host.as_str()).collect();
            assert_eq!(hosts.len(), 4, "{}: one host idle", phase.name);
        }
        assert_eq!(flows(&p).len(), 5 * 4 / 2 * 2);
        assert_one_rail_each(&p);
    }

    #[test]
    fn rails_all_is_the_plan_without_the_key() {
        for keys in ["pattern = \"all-pairs\"", "pattern = \"fan-in\"", "pattern = \"pairwise\"\nbidirectional = true"]
        {
            let given = plan("a slots=2\nb slots=2\n", &format!("{keys}\nrails = \"all\"")).unwrap();
            assert_eq!(given, plan("a slots=2\nb slots=2\n", keys).unwrap(), "{keys}");
        }
        // Without rails all-pairs pairs ranks: same-host and cross-rail pairs included.
        let ranks = plan("a slots=2\nb slots=2\n", "pattern = \"all-pairs\"").unwrap();
        assert_eq!(ranks.phases.len(), 3);
        assert!(flows(&ranks).contains(&(0, 1)) || flows(&ranks).contains(&(1, 0)), "{:?}", flows(&ranks));
    }

    #[test]
    fn hosts_of_fewer_rails_are_joined_on_the_rails_both_have_and_said() {
        let hostfile = "a slots=2\nb slots=1\nc slots=2\n"; // ranks a: 0 1, b: 2, c: 3 4
        let p = plan(hostfile, "pattern = \"all-pairs\"\nrails = \"same\"").unwrap();
        assert_eq!(p.phases.len(), 3);
        let mut pairs: Vec<(usize, usize)> = flows(&p).into_iter().map(|(a, b)| (a.min(b), a.max(b))).collect();
        pairs.sort_unstable();
        assert_eq!(pairs, [(0, 2), (0, 3), (1, 4), (2, 3)]);
        let uneven = uneven_rails(&p.ranks).unwrap();
        assert_eq!(uneven.others, [HostRails { host: "b".into(), rails: 1 }]);
        assert_eq!(
            uneven.to_string(),
            "the hosts do not all have the same rails (ranks): 2 host(s) have 2, b has 1; rails = \"same\" joins two \
             hosts only on the rails both have, so a rail one host lacks is not measured to it"
        );
        assert_eq!(uneven_rails(&plan(RAILS_64X8, "pattern = \"fan-in\"").unwrap().ranks), None);
    }

    #[test]
    fn fan_in_takes_each_rail_into_the_receiving_hosts_rank_of_that_rail() {
        let hostfile = "a slots=2\nb slots=2\nc slots=2\n"; // a: 0 1, b: 2 3, c: 4 5
        let p = plan(hostfile, "pattern = \"fan-in\"\nrails = \"same\"").unwrap();
        assert_eq!(flows(&p), [(2, 0), (4, 0), (3, 1), (5, 1)], "the receiver is rank 0's host, every rail");
        let p = plan(hostfile, "pattern = \"fan-in\"\nrails = \"same\"\nreceivers = 0").unwrap();
        assert_eq!(flows(&p), [(2, 0), (4, 0)], "receivers given: those ranks only");
        let p = plan(hostfile, "pattern = \"fan-in\"\nrails = \"same\"\nreceivers = 3\nsenders = \"0-2\"").unwrap();
        assert_eq!(flows(&p), [(1, 3)]);
    }

    #[test]
    fn pairwise_pairs_host_i_with_host_i_plus_half_on_every_rail() {
        let hostfile = "n[1-4] slots=2\n";
        let p = plan(hostfile, "pattern = \"pairwise\"\nrails = \"same\"").unwrap();
        assert_eq!(flows(&p), [(0, 4), (1, 5), (2, 6), (3, 7)]);
        let p = plan(hostfile, "pattern = \"pairwise\"\nrails = \"same\"\nbidirectional = true").unwrap();
        assert_eq!(flows(&p).len(), 8);
        assert_one_rail_each(&p);
        let e = plan("n[1-3] slots=2\n", "pattern = \"pairwise\"\nrails = \"same\"").unwrap_err();
        assert_eq!(
            e,
            "s.toml:1: group \"g\": field `ranks`: pairwise with rails = \"same\" pairs hosts (host i with host i + \
             H/2) and needs an even number of hosts, got 3"
        );
        let p = plan(hostfile, "pattern = \"pairwise\"\nrails = \"same\"\nflows = [[0, 2], [5, 7]]").unwrap();
        assert_eq!(flows(&p), [(0, 2), (5, 7)]);
        let e = plan(hostfile, "pattern = \"pairwise\"\nrails = \"same\"\nflows = [[0, 2], [0, 3]]").unwrap_err();
        assert_eq!(
            e,
            "s.toml:5: group \"g\": field `flows`: flow [0, 3] joins rank 0 (n1, rail 0) and rank 3 (n2, rail 1): \
             with rails = \"same\" every pair listed is one rail of two hosts"
        );
        let e = plan(hostfile, "pattern = \"pairwise\"\nrails = \"same\"\nflows = [[0, 1]]").unwrap_err();
        assert!(e.contains("flow [0, 1] joins rank 0 (n1, rail 0) and rank 1 (n1, rail 1)"), "{e}");
    }

    #[test]
    fn a_mesh_pairs_each_rail_with_itself_on_every_other_host() {
        let hostfile = "node[01-08] slots=2\n";
        let all = plan_on(hostfile, "pattern = \"mesh\"", None).unwrap();
        let pairs = flows(&all);
        assert_eq!(pairs.len(), 2 * 28, "28 pairs of hosts, each on both rails");
        assert!(pairs.iter().all(|&(a, b)| a < b && a % 2 == b % 2 && a / 2 != b / 2), "{pairs:?}");
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/topology/fat-tree.toml");
        let fat_tree = crate::topology::read(&path, None).unwrap();
        let meshed = flows(&plan_on(hostfile, "pattern = \"mesh\"", Some(&fat_tree)).unwrap());
        let across: Vec<(usize, usize)> = meshed.iter().copied().filter(|&(a, b)| a / 8 != b / 8).collect();
        assert_eq!(
            across,
            [(0, 8), (1, 9), (2, 10), (3, 11)],
            "two pairs of hosts across the spine (leaf2 has two uplinks), on both rails"
        );
        assert_eq!(meshed.len() - across.len(), 2 * 2 * 6, "two leaves of four hosts, both rails");
    }

    #[test]
    fn bisection_runs_every_rail_of_the_host_pairs_it_chooses() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/topology/fat-tree.toml");
        let fat_tree = crate::topology::read(&path, None).unwrap();
        // node01-04 on leaf1 (ranks 0-7), node05-08 on leaf2 (ranks 8-15).
        let hostfile = "node[01-08] slots=2\n";
        let hosts = plan_on(hostfile, "pattern = \"bisection\"", Some(&fat_tree)).unwrap();
        assert_eq!(flows(&hosts), [(0, 8), (2, 10)], "one rank a host: rail 0");
        let rails = plan_on(hostfile, "pattern = \"bisection\"\nrails = \"same\"", Some(&fat_tree)).unwrap();
        assert_eq!(flows(&rails), [(0, 8), (1, 9), (2, 10), (3, 11)]);
    }
}
