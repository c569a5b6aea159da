//! Who is to blame for failing links: a host whose every link failed is the
//! suspect (not each of its links); a failing link between hosts that pass
//! elsewhere is a suspect link. On hosts of several ranks (one per NIC on a
//! rail fabric), a rank failing alone is its NIC, all of them the host.
//! Pure, on the links measured.

use std::collections::BTreeMap;

/// One measured link (unordered pair of ranks) and whether it failed a check.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Link {
    pub a: usize,
    pub b: usize,
    pub failed: bool,
}

impl Link {
    pub fn pair(&self) -> RankPair {
        RankPair::of(self.a, self.b)
    }
}

/// The two ranks a link joins as a key, lower first, so that a flow either
/// way (and a check of either) finds the same link.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RankPair {
    pub low: usize,
    pub high: usize,
}

impl RankPair {
    pub fn of(a: usize, b: usize) -> RankPair {
        RankPair { low: a.min(b), high: a.max(b) }
    }

    pub fn has(self, rank: usize) -> bool {
        self.low == rank || self.high == rank
    }

    /// The end that is not `rank` (`rank` being one of the two).
    pub fn other(self, rank: usize) -> usize {
        if self.low == rank {
            self.high
        } else {
            self.low
        }
    }

    pub fn ends(self) -> [usize; 2] {
        [self.low, self.high]
    }
}

/// Whether a flow between two ranks is on a suspect.
pub(crate) type OnLink = Box<dyn Fn(usize, usize) -> bool>;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Finding {
    /// Every link of each of these ranks failed (at least two each): one
    /// rank, or every rank of a host that has several ([`by_host`]).
    Host(Vec<usize>),
    /// Every link of this rank failed while other ranks of its host passed:
    /// the NIC it uses alone, or its cable ([`by_host`]).
    Nic(usize),
    /// This link failed; neither end is a suspect host.
    Link(RankPair),
    /// Every link failed: no host or link stands out.
    Fabric,
    /// With a topology (`switches`): failing links no host explains all may
    /// cross this uplink, or one of these; `links` are those failing links.
    Uplinks { uplinks: Vec<crate::topology::Uplink>, links: Vec<RankPair> },
    /// With a topology: every host on this leaf (`ranks`) is a suspect host.
    Leaf { leaf: crate::topology::SwitchName, ranks: Vec<usize> },
}

pub fn localise(links: &[Link]) -> Vec<Finding> {
    let failed: Vec<&Link> = links.iter().filter(|l| l.failed).collect();
    if failed.is_empty() {
        return Vec::new();
    }
    if links.len() > 1 && failed.len() == links.len() {
        return vec![Finding::Fabric];
    }
    // rank -> (links measured, links failed)
    let mut tally: BTreeMap<usize, (usize, usize)> = BTreeMap::new();
    for l in links {
        for end in [l.a, l.b] {
            let t = tally.entry(end).or_default();
            t.0 += 1;
            t.1 += usize::from(l.failed);
        }
    }
    // One link alone cannot tell its two ends apart: a host needs two.
    let hosts: Vec<usize> =
        tally.iter().filter(|(_, &(measured, bad))| measured >= 2 && bad == measured).map(|(&r, _)| r).collect();
    let mut findings: Vec<Finding> = hosts.iter().map(|&h| Finding::Host(vec![h])).collect();
    findings.extend(
        failed.iter().filter(|l| !hosts.contains(&l.a) && !hosts.contains(&l.b)).map(|l| Finding::Link(l.pair())),
    );
    findings
}

/// The rank findings of [`localise`] by host (`host_of`: each rank's host,
/// by rank): where every measured rank of a host of several failed, the
/// host once; where only some did, each of those ranks' NICs. A host of one
/// rank stays as it is.
pub fn by_host(findings: Vec<Finding>, links: &[Link], host_of: &dyn Fn(usize) -> Option<String>) -> Vec<Finding> {
    let failed: Vec<usize> =
        findings.iter().filter_map(|f| if let Finding::Host(r) = f { r.first().copied() } else { None }).collect();
    let mut measured: Vec<usize> = links.iter().flat_map(|l| [l.a, l.b]).collect();
    measured.sort_unstable();
    measured.dedup();
    let mut out = Vec::new();
    let mut named = Vec::new();
    for finding in findings {
        let Finding::Host(ranks) = &finding else {
            out.push(finding);
            continue;
        };
        let Some(host) = ranks.first().and_then(|&r| host_of(r)) else {
            out.push(finding);
            continue;
        };
        let siblings: Vec<usize> = measured.iter().copied().filter(|&r| host_of(r).as_ref() == Some(&host)).collect();
        if siblings.len() < 2 {
            out.push(finding);
        } else if !siblings.iter().all(|r| failed.contains(r)) {
            out.extend(ranks.iter().map(|&r| Finding::Nic(r)));
        } else if !named.contains(&host) {
            named.push(host);
            out.push(Finding::Host(siblings));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every pair of `n` ranks, failed where `bad` says so.
    fn all_pairs(n: usize, bad: impl Fn(usize, usize) -> bool) -> Vec<Link> {
        let mut links = Vec::new();
        for a in 0..n {
            for b in a + 1..n {
                links.push(Link { a, b, failed: bad(a, b) });
            }
        }
        links
    }

    #[test]
    fn a_host_whose_links_all_fail_is_the_suspect() {
        let links = all_pairs(6, |a, b| a == 2 || b == 2);
        assert_eq!(localise(&links), [Finding::Host(vec![2])]);
        let links = all_pairs(3, |a, b| a == 0 || b == 0);
        assert_eq!(localise(&links), [Finding::Host(vec![0])]);
    }

    #[test]
    fn a_single_failing_pair_is_a_suspect_link() {
        let links = all_pairs(6, |a, b| (a, b) == (1, 4));
        assert_eq!(localise(&links), [Finding::Link(RankPair::of(1, 4))]);
        // Reported with the lower rank first whatever the direction measured.
        let links = [Link { a: 5, b: 3, failed: true }, Link { a: 3, b: 4, failed: false }];
        assert_eq!(localise(&links), [Finding::Link(RankPair::of(3, 5))]);
        // Two ranks, one link: the link, not either host.
        assert_eq!(localise(&[Link { a: 0, b: 1, failed: true }]), [Finding::Link(RankPair::of(0, 1))]);
    }

    #[test]
    fn a_bad_host_and_an_unrelated_bad_link() {
        let links = all_pairs(6, |a, b| a == 5 || b == 5 || (a, b) == (0, 1));
        assert_eq!(localise(&links), [Finding::Host(vec![5]), Finding::Link(RankPair::of(0, 1))]);
    }

    #[test]
    fn some_failing_links_of_a_host_name_the_links() {
        let links = all_pairs(5, |a, b| (a, b) == (0, 1) || (a, b) == (0, 2));
        assert_eq!(localise(&links), [Finding::Link(RankPair::of(0, 1)), Finding::Link(RankPair::of(0, 2))]);
    }

    /// Ranks 2k and 2k+1 are host k's two NICs.
    fn two_nics(r: usize) -> Option<String> {
        Some(format!("node{}", r / 2))
    }

    #[test]
    fn a_rank_failing_beside_a_passing_one_of_its_host_is_its_nic() {
        // Rails: NIC k of each of 4 hosts meets NIC k of the others; rank 5 (node2's second) is bad.
        let links: Vec<Link> = all_pairs(8, |_, _| false).into_iter().filter(|l| l.a % 2 == l.b % 2).collect();
        let bad: Vec<Link> = links.iter().map(|l| Link { failed: l.a == 5 || l.b == 5, ..*l }).collect();
        assert_eq!(by_host(localise(&bad), &bad, &two_nics), [Finding::Nic(5)]);
    }

    #[test]
    fn every_rank_of_a_host_failing_is_the_host_once() {
        let links: Vec<Link> = all_pairs(8, |_, _| false).into_iter().filter(|l| l.a % 2 == l.b % 2).collect();
        let bad: Vec<Link> =
            links.iter().map(|l| Link { failed: [l.a, l.b].iter().any(|r| r / 2 == 1), ..*l }).collect();
        assert_eq!(by_host(localise(&bad), &bad, &two_nics), [Finding::Host(vec![2, 3])]);
        // A host of one rank is as before.
        let one = all_pairs(4, |a, b| a == 1 || b == 1);
        assert_eq!(by_host(localise(&one), &one, &|r| Some(format!("h{r}"))), [Finding::Host(vec![1])]);
    }

    #[test]
    fn everything_failing_blames_no_one() {
        assert_eq!(localise(&all_pairs(4, |_, _| true)), [Finding::Fabric]);
        assert_eq!(localise(&all_pairs(4, |_, _| false)), []);
    }
}
