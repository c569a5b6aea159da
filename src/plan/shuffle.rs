//! A seeded random order that anyone can reproduce from the docs alone
//! (docs/CONGESTION.md): SplitMix64 (Steele, Lea and Flood, OOPSLA 2014)
//! drives a Fisher–Yates shuffle. Written out rather than taken from `rand`,
//! whose generators and shuffles may change between its versions: a seed in
//! a scenario file must give the same ranks in every fabricbench.

/// SplitMix64: each call adds the golden-ratio increment and mixes.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in 0..bound: the high 64 bits of next × bound (Lemire's
    /// multiply-shift; its bias is below 2⁻⁴⁰ for any job size).
    fn below(&mut self, bound: usize) -> usize {
        ((u128::from(self.next()) * bound as u128) >> 64) as usize
    }
}

/// `items` in the order of seed `seed`: for i from the last index down to
/// 1, swap item i with item `below(i + 1)`.
pub fn permutation<T: Copy>(items: &[T], seed: u64) -> Vec<T> {
    let mut out = items.to_vec();
    let mut rng = SplitMix64(seed);
    for i in (1..out.len()).rev() {
        out.swap(i, rng.below(i + 1));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix_matches_its_reference_output() {
        // The first outputs of SplitMix64 seeded with 0, as its reference C code gives them.
        let mut rng = SplitMix64(0);
        assert_eq!(rng.next(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(rng.next(), 0x6E78_9E6A_A1B9_65F4);
    }

    #[test]
    fn a_seed_gives_one_permutation_of_the_same_items() {
        let ranks: Vec<usize> = (0..64).collect();
        let a = permutation(&ranks, 7);
        assert_eq!(a, permutation(&ranks, 7), "the same seed, the same order");
        assert_ne!(a, permutation(&ranks, 8), "another seed, another order");
        assert_ne!(a, ranks, "a shuffle of 64 ranks moves some");
        let mut sorted = a.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, ranks, "every rank once");
    }
}
