//! How far the mean of a few repeats can be trusted: the sample mean,
//! the sample standard deviation and a two-sided 95 % confidence
//! interval from Student's t distribution (repeats are few, so the normal
//! distribution's 1.96 would claim intervals far too narrow: at 5 repeats
//! the t quantile is 2.776).

use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, StudentsT};

use crate::metrics::stats;

/// The confidence level of every interval, as a fraction.
pub const LEVEL: f64 = 0.95;

/// Repeats' values of one number and how they spread. All fields are in
/// the unit of the number itself.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    /// How many values (repeats) it is over: at least 2.
    pub n: usize,
    pub mean: f64,
    /// Sample standard deviation (divided by n − 1).
    pub stdev: f64,
    pub min: f64,
    pub max: f64,
    /// Half the 95 % interval's width: t(0.975, n − 1) · stdev / √n.
    pub ci95_half: f64,
    /// mean − ci95_half and mean + ci95_half.
    pub ci95_low: f64,
    pub ci95_high: f64,
}

impl Spread {
    /// `None` for fewer than two values (no spread to speak of) or any
    /// value that is not a finite number.
    pub fn of(values: &[f64]) -> Option<Spread> {
        let n = values.len();
        if n < 2 || values.iter().any(|v| !v.is_finite()) {
            return None;
        }
        let mean = stats::mean(values)?;
        let stdev = (values.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt();
        let ci95_half = t_quantile(n - 1)? * stdev / (n as f64).sqrt();
        Some(Spread {
            n,
            mean,
            stdev,
            min: stats::min(values)?,
            max: stats::max(values)?,
            ci95_half,
            ci95_low: mean - ci95_half,
            ci95_high: mean + ci95_half,
        })
    }

    /// Whether the two intervals share a point.
    pub fn overlaps(&self, other: &Spread) -> bool {
        self.ci95_low <= other.ci95_high && other.ci95_low <= self.ci95_high
    }

    pub fn contains(&self, value: f64) -> bool {
        (self.ci95_low..=self.ci95_high).contains(&value)
    }
}

/// The two-sided 95 % quantile of Student's t with `df` degrees of freedom.
fn t_quantile(df: usize) -> Option<f64> {
    let t = StudentsT::new(0.0, 1.0, df as f64).ok()?;
    Some(t.inverse_cdf(1.0 - (1.0 - LEVEL) / 2.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Against the printed tables (e.g. NIST/SEMATECH e-Handbook 1.3.6.7.2).
    #[test]
    fn t_quantiles_match_the_tables() {
        for (df, table) in [(1, 12.706), (2, 4.303), (4, 2.776), (9, 2.262), (29, 2.045), (99, 1.984)] {
            let t = t_quantile(df).unwrap();
            assert!((t - table).abs() < 5e-4, "df {df}: {t} vs {table}");
        }
    }

    #[test]
    fn spread_of_five_values() {
        let s = Spread::of(&[10.0, 12.0, 11.0, 13.0, 9.0]).unwrap();
        assert_eq!((s.n, s.mean, s.min, s.max), (5, 11.0, 9.0, 13.0));
        // Σ(x − 11)² = 10, / 4 → stdev √2.5; half width 2.776 · √2.5 / √5.
        assert!((s.stdev - 2.5f64.sqrt()).abs() < 1e-12);
        assert!((s.ci95_half - 2.776445 * 0.5f64.sqrt()).abs() < 1e-5, "{}", s.ci95_half);
        assert!(s.contains(11.0) && !s.contains(13.0));
        assert!((s.ci95_low + s.ci95_high) / 2.0 - s.mean < 1e-12);
    }

    #[test]
    fn no_spread_from_one_value_or_a_nan() {
        assert_eq!(Spread::of(&[3.0]), None);
        assert_eq!(Spread::of(&[3.0, f64::NAN]), None);
        let same = Spread::of(&[4.0, 4.0]).unwrap();
        assert_eq!((same.stdev, same.ci95_half), (0.0, 0.0));
    }

    #[test]
    fn overlap_is_symmetric_and_touching_counts() {
        let a = Spread::of(&[1.0, 2.0, 3.0]).unwrap();
        let b = Spread::of(&[10.0, 11.0, 12.0]).unwrap();
        assert!(!a.overlaps(&b) && !b.overlaps(&a));
        let c = Spread::of(&[2.0, 3.0, 4.0]).unwrap();
        assert!(a.overlaps(&c) && c.overlaps(&a));
    }
}
