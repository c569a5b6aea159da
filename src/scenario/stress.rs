//! What a `[[stress]]` table asks of a rank's CPU burners; `load::stress`
//! runs them.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::scenario::placement::Placement;
use crate::units::ByteSize;

/// What a rank's burners do (from a `[[stress]]` table).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StressSpec {
    pub threads: Threads,
    pub placement: Placement,
    /// Duty cycle per thread, percent (1..=100).
    pub load: u8,
    /// Per thread: stream over a buffer of this size (memory bandwidth).
    pub memory: Option<ByteSize>,
}

/// How many burner threads: a count, or one per online core.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Threads {
    Count(usize),
    All,
}

/// The control wire's form: binary formats cannot tell a number from a
/// string without a tag.
#[derive(Serialize, Deserialize)]
enum WireThreads {
    Count(usize),
    All,
}

impl Serialize for Threads {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match (self, s.is_human_readable()) {
            (Threads::Count(n), true) => s.serialize_u64(*n as u64),
            (Threads::All, true) => s.serialize_str("all"),
            (Threads::Count(n), false) => WireThreads::Count(*n).serialize(s),
            (Threads::All, false) => WireThreads::All.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for Threads {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        if !d.is_human_readable() {
            return Ok(match WireThreads::deserialize(d)? {
                WireThreads::Count(n) => Threads::Count(n),
                WireThreads::All => Threads::All,
            });
        }
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Count(usize),
            Text(String),
        }
        match Raw::deserialize(d)? {
            Raw::Count(n) => Ok(Threads::Count(n)),
            Raw::Text(t) if t == "all" => Ok(Threads::All),
            Raw::Text(t) => {
                Err(serde::de::Error::custom(format!("`{t}` is not a thread count; use a number or \"all\"")))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_cross_the_wire() {
        for t in [Threads::Count(3), Threads::All] {
            let bytes = postcard::to_stdvec(&t).unwrap();
            assert_eq!(postcard::from_bytes::<Threads>(&bytes).unwrap(), t);
        }
    }

    #[test]
    fn threads_parse() {
        #[derive(Deserialize)]
        struct T {
            t: Threads,
        }
        assert_eq!(toml::from_str::<T>("t = 3").unwrap().t, Threads::Count(3));
        assert_eq!(toml::from_str::<T>("t = \"all\"").unwrap().t, Threads::All);
        assert!(toml::from_str::<T>("t = \"many\"").is_err());
    }
}
