//! The shape of a tree launch (`--tree-radix K`), as OpenMPI's tree spawn:
//! the launcher starts at most K workers, each of them starts at most K of
//! the rest, and so on, so no process opens more than K ssh sessions and a
//! launch takes about log_K(N) ssh round trips instead of N sessions from
//! one machine. Pure: no I/O.

use serde::{Deserialize, Serialize};

use crate::hostfile::Host;

/// A worker to start and the workers it starts in turn.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Subtree {
    pub rank: usize,
    pub host: Host,
    pub below: Vec<Subtree>,
}

impl Subtree {
    /// Ranks in this subtree, itself included.
    pub fn size(&self) -> usize {
        1 + self.below.iter().map(Subtree::size).sum::<usize>()
    }
}

/// Splits the ranks `first..` (rank `first + k` on `hosts[k]`) into at
/// most `radix` subtrees of nearly equal size; the first rank of each
/// contiguous share roots it. Each worker is told only its own subtree, so
/// the specs of a whole launch carry O(N log N) hosts, not O(N²).
pub fn split(first: usize, hosts: &[Host], radix: usize) -> Vec<Subtree> {
    let radix = radix.max(1);
    let mut out = Vec::new();
    let (mut rank, mut rest) = (first, hosts);
    for share in (1..=radix.min(hosts.len())).rev() {
        let (chunk, tail) = rest.split_at(rest.len().div_ceil(share));
        let (host, below) = chunk.split_first().expect("chunks are not empty");
        out.push(Subtree { rank, host: host.clone(), below: split(rank + 1, below, radix) });
        (rank, rest) = (rank + chunk.len(), tail);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The hosts of ranks 1..=n.
    fn hosts(n: usize) -> Vec<Host> {
        (1..=n).map(|r| Host::named(&format!("h{}", r + 1))).collect()
    }

    fn depth(t: &[Subtree]) -> usize {
        t.iter().map(|s| 1 + depth(&s.below)).max().unwrap_or(0)
    }

    fn flatten(t: &[Subtree], out: &mut Vec<usize>) {
        for s in t {
            out.push(s.rank);
            flatten(&s.below, out);
        }
    }

    #[test]
    fn every_rank_once_at_most_radix_children_logarithmic_depth() {
        for (n, radix, most_deep) in [(7, 2, 3), (7, 7, 1), (100, 4, 4), (9999, 32, 3), (1, 3, 1), (0, 2, 0)] {
            let tree = split(1, &hosts(n), radix);
            let mut seen = Vec::new();
            flatten(&tree, &mut seen);
            assert_eq!(seen, (1..=n).collect::<Vec<_>>(), "n {n} radix {radix}: each rank once, in order");
            assert!(tree.len() <= radix);
            assert!(depth(&tree) <= most_deep, "n {n} radix {radix}: depth {}", depth(&tree));
            assert_eq!(tree.iter().map(Subtree::size).sum::<usize>(), n);
        }
    }

    #[test]
    fn shares_are_balanced() {
        let tree = split(1, &hosts(10), 3);
        assert_eq!(tree.iter().map(Subtree::size).collect::<Vec<_>>(), [4, 3, 3]);
        assert_eq!(tree.iter().map(|s| s.rank).collect::<Vec<_>>(), [1, 5, 8]);
        assert_eq!(tree[0].below.iter().map(|s| s.rank).collect::<Vec<_>>(), [2, 3, 4]);
    }
}
