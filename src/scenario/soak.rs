//! `[soak]`: what a long run watches for. `flap` is the share of a flow's
//! own median Gb/s below which an interval is a dip (report::tables::flaps marks
//! them; it fails nothing: a check does that).

use serde::{Deserialize, Deserializer, Serialize, Serializer};

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SoakSpec {
    /// `flap = "50%"`: an interval below this share of its flow's median
    /// is a dip; unset, 50 %.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flap: Option<FlapShare>,
}

impl SoakSpec {
    /// Nothing set: the run did not ask for the detector (it still runs).
    pub fn is_default(&self) -> bool {
        *self == SoakSpec::default()
    }

    /// The threshold, % of a flow's median.
    pub fn flap_pct(&self) -> f64 {
        self.flap.unwrap_or_default().0
    }
}

/// A share of the median, in percent: above 0, below 100 (at 100 % half of
/// every steady flow's intervals would be dips).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FlapShare(pub f64);

impl Default for FlapShare {
    fn default() -> Self {
        FlapShare(50.0)
    }
}

impl FlapShare {
    pub fn parse(text: &str) -> Result<FlapShare, BadFlapShare> {
        let not_a_share = || BadFlapShare::NotAShare(text.to_string());
        let number = text.trim().strip_suffix('%').ok_or_else(not_a_share)?;
        let pct: f64 = number.trim().parse().map_err(|_| not_a_share())?;
        if !(1.0..=99.0).contains(&pct) {
            return Err(BadFlapShare::OutOfRange(text.to_string()));
        }
        Ok(FlapShare(pct))
    }
}

/// What a `flap` share takes, said by every error about one.
const EXPECTED_SHARE: &str = "write a share of the flow's median between 1% and 99%, e.g. \"50%\"";

/// Why a `flap` share (`[soak]`, `--flap`) does not read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BadFlapShare {
    #[error("`{0}` is not a share: {EXPECTED_SHARE}")]
    NotAShare(String),
    #[error("`{0}` is out of range: {EXPECTED_SHARE}")]
    OutOfRange(String),
}

impl Serialize for FlapShare {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&format_args!("{}%", self.0))
    }
}

impl<'de> Deserialize<'de> for FlapShare {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        FlapShare::parse(&String::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::tests::{err, FAN_IN};

    #[test]
    fn shares_parse_and_print_back() {
        for (text, pct) in [("50%", 50.0), (" 70 %", 70.0), ("1%", 1.0), ("99%", 99.0), ("12.5%", 12.5)] {
            assert_eq!(FlapShare::parse(text), Ok(FlapShare(pct)), "{text}");
        }
        let spec: SoakSpec = toml::from_str("flap = \"70%\"").unwrap();
        assert_eq!(toml::to_string(&spec).unwrap().trim(), "flap = \"70%\"");
        assert!(SoakSpec::default().is_default());
    }

    #[test]
    fn an_eight_hour_soak_fits_the_bounds() {
        let soak = FAN_IN.replace("\"3s\"", "\"8h\"") + "\n[soak]\nflap = \"70%\"\n";
        let (s, _) = crate::scenario::parse(&soak, std::path::Path::new("s.toml")).expect("8 h at 1 s intervals");
        assert_eq!((s.run.duration.as_secs(), s.soak.flap_pct()), (8 * 3600, 70.0));
        let e = err(&soak.replace("interval = \"1s\"", "interval = \"100ms\""));
        assert!(e.contains("gives 288000 samples") && e.contains("use an interval of at least 288ms"), "{e}");
    }

    #[test]
    fn bad_shares_name_line_field_and_what_is_valid() {
        for (bad, why) in [
            ("0%", "out of range"),
            ("100%", "out of range"),
            ("-5%", "out of range"),
            ("50", "not a share"),
            ("half", "not a share"),
            ("NaN%", "out of range"),
        ] {
            let e = err(&format!("{FAN_IN}\n[soak]\nflap = \"{bad}\"\n"));
            assert!(e.contains("s.toml:") && e.contains(why), "{bad}: {e}");
            assert!(e.contains("between 1% and 99%, e.g. \"50%\""), "{bad}: {e}");
        }
        let e = err(&format!("{FAN_IN}\n[soak]\nflap = 50\n"));
        assert!(e.contains("s.toml:") && e.contains("string"), "{e}");
        let e = err(&format!("{FAN_IN}\n[soak]\nflaps = \"50%\"\n"));
        assert!(e.contains("unknown field `flaps`, expected `flap`"), "{e}");
    }
}
