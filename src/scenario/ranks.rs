//! Rank selectors: `"all"`, `0`, `"1-3,5"` or `[1, 2, 3]`.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A set of ranks, resolved against the job size only when a plan is made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RankSet {
    All,
    /// Inclusive ranges in the order written.
    Ranges(Vec<(usize, usize)>),
}

impl RankSet {
    pub fn one(rank: usize) -> RankSet {
        RankSet::Ranges(vec![(rank, rank)])
    }

    pub fn parse(text: &str) -> Result<RankSet, BadRanks> {
        let text = text.trim();
        if text == "all" || text == "*" {
            return Ok(RankSet::All);
        }
        let bad = || BadRanks::NotASelector(text.to_string());
        let mut ranges = Vec::new();
        for part in text.split(',') {
            let part = part.trim();
            let (lo, hi) = part.split_once('-').unwrap_or((part, part));
            let lo: usize = lo.trim().parse().map_err(|_| bad())?;
            let hi: usize = hi.trim().parse().map_err(|_| bad())?;
            if lo > hi {
                return Err(BadRanks::Backwards(part.to_string()));
            }
            ranges.push((lo, hi));
        }
        Ok(RankSet::Ranges(ranges))
    }

    /// The ranks of this set in a job of `n` ranks, in order, without repeats.
    /// Errors name the first rank that does not exist.
    pub fn resolve(&self, n: usize) -> Result<Vec<usize>, BadRanks> {
        match self {
            RankSet::All => Ok((0..n).collect()),
            RankSet::Ranges(ranges) => {
                let mut out = Vec::new();
                let mut seen = vec![false; n];
                for &(lo, hi) in ranges {
                    if hi >= n {
                        return Err(BadRanks::NoSuchRank { rank: hi, ranks: n });
                    }
                    out.extend((lo..=hi).filter(|&r| !std::mem::replace(&mut seen[r], true)));
                }
                Ok(out)
            }
        }
    }
}

/// Why a rank selector does not read, or names a rank the job lacks.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BadRanks {
    #[error("`{0}` is not a rank selector; use \"all\", 3, \"1-3,5\" or [1, 2]")]
    NotASelector(String),
    #[error("rank range `{0}` runs backwards")]
    Backwards(String),
    #[error("rank {rank} does not exist: the hostfile has {ranks} host(s), ranks 0-{}", .ranks.saturating_sub(1))]
    NoSuchRank { rank: usize, ranks: usize },
}

impl fmt::Display for RankSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RankSet::All => f.write_str("all"),
            RankSet::Ranges(ranges) => {
                let parts: Vec<String> = ranges
                    .iter()
                    .map(|&(lo, hi)| if lo == hi { lo.to_string() } else { format!("{lo}-{hi}") })
                    .collect();
                f.write_str(&parts.join(","))
            }
        }
    }
}

impl Serialize for RankSet {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for RankSet {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            One(usize),
            List(Vec<usize>),
            Text(String),
        }
        match Raw::deserialize(d)? {
            Raw::One(r) => Ok(RankSet::one(r)),
            Raw::List(list) => Ok(RankSet::Ranges(list.into_iter().map(|r| (r, r)).collect())),
            Raw::Text(t) => RankSet::parse(&t).map_err(serde::de::Error::custom),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms() {
        assert_eq!(RankSet::parse("all").unwrap().resolve(3).unwrap(), [0, 1, 2]);
        assert_eq!(RankSet::parse("1-3,5").unwrap().resolve(6).unwrap(), [1, 2, 3, 5]);
        assert_eq!(RankSet::parse("2,1-2").unwrap().resolve(3).unwrap(), [2, 1]);
        assert_eq!(RankSet::parse("1-3,5").unwrap().to_string(), "1-3,5");
    }

    #[test]
    fn errors_say_what_is_valid() {
        assert_eq!(
            RankSet::parse("one").unwrap_err().to_string(),
            "`one` is not a rank selector; use \"all\", 3, \"1-3,5\" or [1, 2]"
        );
        assert_eq!(RankSet::parse("3-1").unwrap_err().to_string(), "rank range `3-1` runs backwards");
        assert_eq!(
            RankSet::one(4).resolve(4).unwrap_err().to_string(),
            "rank 4 does not exist: the hostfile has 4 host(s), ranks 0-3"
        );
    }
}
