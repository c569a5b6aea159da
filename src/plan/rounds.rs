//! All-pairs in rounds: the circle method of round-robin tournaments. Every
//! pair of ranks meets exactly once, the pairs of a round are disjoint (each
//! rank is in at most one pair), so a round measures each of its links alone.

use super::patterns::Pairs;

/// The `(src, dst)` pairs of each round. n ranks give n − 1 rounds of n/2 pairs when
/// n is even; when n is odd, n rounds of (n − 1)/2 pairs, one rank idle in
/// each (it meets the empty slot of the circle).
pub fn circle(ranks: &[usize]) -> Vec<Pairs> {
    if ranks.len() < 2 {
        return Vec::new();
    }
    let mut slots: Vec<Option<usize>> = ranks.iter().copied().map(Some).collect();
    if slots.len() % 2 == 1 {
        slots.push(None);
    }
    let n = slots.len();
    (0..n - 1)
        .map(|round| {
            // Slot 0 stays; the others turn one place per round.
            let at = |i: usize| if i == 0 { slots[0] } else { slots[1 + (i - 1 + round) % (n - 1)] };
            (0..n / 2)
                .filter_map(|i| match (at(i), at(n - 1 - i)) {
                    // Each turning rank visits every slot once: the first half
                    // sends, the second half receives, so when one direction is
                    // measured every rank sends in about half its pairs. The
                    // fixed rank alternates.
                    (Some(a), Some(b)) => Some(if i > 0 || round % 2 == 0 { (a, b) } else { (b, a) }),
                    _ => None,
                })
                .collect()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    fn check(n: usize) {
        let ranks: Vec<usize> = (0..n).collect();
        let rounds = circle(&ranks);
        assert_eq!(rounds.len(), if n.is_multiple_of(2) { n - 1 } else { n }, "n = {n}");
        let mut seen = BTreeSet::new();
        let mut sends = vec![0usize; n];
        for round in &rounds {
            assert_eq!(round.len(), n / 2, "n = {n}: pairs per round");
            let mut busy = BTreeSet::new();
            for &(a, b) in round {
                assert_ne!(a, b);
                assert!(busy.insert(a) && busy.insert(b), "n = {n}: rank twice in a round {round:?}");
                assert!(seen.insert((a.min(b), a.max(b))), "n = {n}: pair {a}-{b} twice");
                sends[a] += 1;
            }
            assert_eq!(n - busy.len(), n % 2, "n = {n}: exactly one idle rank when n is odd");
        }
        assert_eq!(seen.len(), n * (n - 1) / 2, "n = {n}: every pair once");
        // Each rank sends in half of its n − 1 pairs, give or take one.
        for (rank, &s) in sends.iter().enumerate() {
            assert!(s.abs_diff(n - 1 - s) <= 2, "n = {n}: rank {rank} sends {s} of {}", n - 1);
        }
    }

    #[test]
    fn every_pair_once_in_disjoint_rounds() {
        for n in 2..=41 {
            check(n);
        }
        assert!(circle(&[7]).is_empty());
    }

    #[test]
    fn keeps_the_ranks_given() {
        let rounds = circle(&[3, 5, 9]);
        let all: BTreeSet<(usize, usize)> = rounds.iter().flatten().map(|&(a, b)| (a.min(b), a.max(b))).collect();
        assert_eq!(all, BTreeSet::from([(3, 5), (3, 9), (5, 9)]));
    }
}
