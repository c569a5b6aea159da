//! Who is to blame for failing links: a host whose every link failed is the
//! suspect (not each of its links); a failing link between hosts that pass
//! elsewhere is a suspect link. Pure, on the links measured.

use std::collections::BTreeMap;

/// One measured link (unordered pair of ranks) and whether it failed a check.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Link {
    pub a: usize,
    pub b: usize,
    pub failed: bool,
}

/// Whether a flow between two ranks is on a suspect.
pub(crate) type OnLink = Box<dyn Fn(usize, usize) -> bool>;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Finding {
    /// Every link of this rank failed (and it has at least two).
    Host(usize),
    /// This link failed; neither end is a suspect host.
    Link(usize, usize),
    /// Every link failed: no host or link stands out.
    Fabric,
    /// With a topology (`switches`): failing links no host explains all may
    /// cross this uplink, or one of these; `links` are those failing links.
    Uplinks { uplinks: Vec<crate::topology::Uplink>, links: Vec<(usize, usize)> },
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
    let mut findings: Vec<Finding> = hosts.iter().map(|&h| Finding::Host(h)).collect();
    findings.extend(
        failed
            .iter()
            .filter(|l| !hosts.contains(&l.a) && !hosts.contains(&l.b))
            .map(|l| Finding::Link(l.a.min(l.b), l.a.max(l.b))),
    );
    findings
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
        assert_eq!(localise(&links), [Finding::Host(2)]);
        let links = all_pairs(3, |a, b| a == 0 || b == 0);
        assert_eq!(localise(&links), [Finding::Host(0)]);
    }

    #[test]
    fn a_single_failing_pair_is_a_suspect_link() {
        let links = all_pairs(6, |a, b| (a, b) == (1, 4));
        assert_eq!(localise(&links), [Finding::Link(1, 4)]);
        // Reported with the lower rank first whatever the direction measured.
        let links = [Link { a: 5, b: 3, failed: true }, Link { a: 3, b: 4, failed: false }];
        assert_eq!(localise(&links), [Finding::Link(3, 5)]);
        // Two ranks, one link: the link, not either host.
        assert_eq!(localise(&[Link { a: 0, b: 1, failed: true }]), [Finding::Link(0, 1)]);
    }

    #[test]
    fn a_bad_host_and_an_unrelated_bad_link() {
        let links = all_pairs(6, |a, b| a == 5 || b == 5 || (a, b) == (0, 1));
        assert_eq!(localise(&links), [Finding::Host(5), Finding::Link(0, 1)]);
    }

    #[test]
    fn some_failing_links_of_a_host_name_the_links() {
        let links = all_pairs(5, |a, b| (a, b) == (0, 1) || (a, b) == (0, 2));
        assert_eq!(localise(&links), [Finding::Link(0, 1), Finding::Link(0, 2)]);
    }

    #[test]
    fn everything_failing_blames_no_one() {
        assert_eq!(localise(&all_pairs(4, |_, _| true)), [Finding::Fabric]);
        assert_eq!(localise(&all_pairs(4, |_, _| false)), []);
    }
}
