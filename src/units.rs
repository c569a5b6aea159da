//! Units as HPC tools write them: binary sizes (`4K` = 4096, like perftest)
//! and bandwidth in Gb/s (1e9 bit/s).

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A byte count written as `65536`, `64K`, `1M`, `2MiB` (all binary multiples).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ByteSize(pub u64);

impl ByteSize {
    pub fn parse(text: &str) -> Result<ByteSize, BadSize> {
        parse_size::Config::new()
            .with_binary()
            .parse_size(text.trim())
            .map(ByteSize)
            .map_err(|reason| BadSize { text: text.to_string(), reason })
    }

    pub fn bytes(self) -> u64 {
        self.0
    }
}

/// A size that does not read: the text as given and the parser's reason.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("`{text}` is not a size ({reason}); use bytes or K/M/G, e.g. 65536, 64K, 1M")]
pub struct BadSize {
    pub text: String,
    pub reason: parse_size::Error,
}

impl fmt::Display for ByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [(u64, &str); 3] = [(1 << 30, "G"), (1 << 20, "M"), (1 << 10, "K")];
        for (scale, suffix) in UNITS {
            if self.0 >= scale && self.0.is_multiple_of(scale) {
                return write!(f, "{}{suffix}", self.0 / scale);
            }
        }
        write!(f, "{}", self.0)
    }
}

impl Serialize for ByteSize {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(self.0)
    }
}

impl<'de> Deserialize<'de> for ByteSize {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // Binary formats (the control wire) carry the plain number.
        if !d.is_human_readable() {
            return u64::deserialize(d).map(ByteSize);
        }
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Number(u64),
            Text(String),
        }
        match Raw::deserialize(d)? {
            Raw::Number(n) => Ok(ByteSize(n)),
            Raw::Text(t) => ByteSize::parse(&t).map_err(serde::de::Error::custom),
        }
    }
}

/// Bits per second in Gb/s (1e9), the unit every table uses.
pub fn gbps(bytes: u64, seconds: f64) -> f64 {
    if seconds <= 0.0 {
        return 0.0;
    }
    bytes as f64 * 8.0 / seconds / 1e9
}

/// Significant digits every shown measurement keeps at least.
const SIGNIFICANT: i32 = 3;
/// Beyond this many decimals a value is shown as `0.000…` of its places:
/// nothing a fabric measures is that small, and the text stays bounded.
const MAX_PLACES: usize = 12;

/// A measurement as the tables show it: `places` decimals, or as many more
/// as keep 3 significant digits, so a small value never rounds to nothing
/// (0.00712 Gb/s with 2 places shows `0.00712`, not `0.01`).
pub fn number(value: f64, places: usize) -> String {
    let magnitude = value.abs();
    if magnitude == 0.0 || !magnitude.is_finite() {
        return format!("{value:.places$}");
    }
    // Decimals that leave SIGNIFICANT digits after the first nonzero one.
    let needed = SIGNIFICANT - 1 - magnitude.log10().floor() as i32;
    let places = places.max(usize::try_from(needed).unwrap_or(0).min(MAX_PLACES));
    format!("{value:.places$}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_multiples_like_perftest() {
        assert_eq!(ByteSize::parse("4K").unwrap(), ByteSize(4096));
        assert_eq!(ByteSize::parse("64KiB").unwrap(), ByteSize(65536));
        assert_eq!(ByteSize::parse("1M").unwrap(), ByteSize(1 << 20));
        assert_eq!(ByteSize::parse("123").unwrap(), ByteSize(123));
        assert_eq!(
            ByteSize::parse("lots").unwrap_err().to_string(),
            "`lots` is not a size (invalid digit found in string); use bytes or K/M/G, e.g. 65536, 64K, 1M"
        );
    }

    #[test]
    fn display_round_trips() {
        for text in ["4K", "1M", "3G", "1000"] {
            assert_eq!(ByteSize::parse(text).unwrap().to_string(), text);
        }
    }

    #[test]
    fn gbps_is_decimal() {
        assert_eq!(gbps(125_000_000, 1.0), 1.0);
        assert_eq!(gbps(1, 0.0), 0.0);
    }

    #[test]
    fn numbers_keep_three_significant_digits() {
        // perftest's 64 B post-list run: 0.007095 Gb/s (0.0070949… as an f64).
        assert_eq!(number(0.007095, 2), "0.00709");
        assert_eq!(number(0.00712, 2), "0.00712");
        assert_eq!(number(0.25, 2), "0.250");
        assert_eq!(number(0.0014, 6), "0.001400", "enough places already");
        assert_eq!(number(95.123, 2), "95.12");
        assert_eq!(number(12345.6, 0), "12346");
        assert_eq!(number(42.0, 0), "42.0");
        assert_eq!(number(-0.0123, 3), "-0.0123");
        assert_eq!(number(0.0, 3), "0.000");
        assert_eq!(number(f64::NAN, 2), "NaN");
        assert_eq!(number(1e-300, 2).len(), "0.".len() + MAX_PLACES, "bounded");
    }
}
