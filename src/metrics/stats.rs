//! Small statistics over per-flow numbers: fairness and spread.

/// Jain's fairness index, (Σx)² / (n·Σx²): 1 when all are equal, 1/n when one
/// takes everything. `None` for no values or all zero.
pub fn jain(values: &[f64]) -> Option<f64> {
    let sum: f64 = values.iter().sum();
    let squares: f64 = values.iter().map(|x| x * x).sum();
    (squares > 0.0).then(|| sum * sum / (values.len() as f64 * squares))
}

/// Σ values, 0.0 when there are none: `Iterator::sum` of no f64 is −0.0
/// (IEEE's additive identity), which reports would print as "-0.0".
pub fn total(values: impl IntoIterator<Item = f64>) -> f64 {
    values.into_iter().fold(0.0, |sum, x| sum + x)
}

pub fn mean(values: &[f64]) -> Option<f64> {
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

/// Population standard deviation.
pub fn stdev(values: &[f64]) -> Option<f64> {
    let m = mean(values)?;
    Some((values.iter().map(|x| (x - m).powi(2)).sum::<f64>() / values.len() as f64).sqrt())
}

/// Coefficient of variation, stdev / mean.
pub fn cov(values: &[f64]) -> Option<f64> {
    let m = mean(values)?;
    (m > 0.0).then(|| stdev(values).unwrap_or(0.0) / m)
}

pub fn min(values: &[f64]) -> Option<f64> {
    values.iter().copied().reduce(f64::min)
}

pub fn max(values: &[f64]) -> Option<f64> {
    values.iter().copied().reduce(f64::max)
}

/// The `q`-th percentile (0 < q ≤ 100) by nearest rank: the smallest value
/// with at least q % of the values at or below it (NaNs are left out).
pub fn percentile(values: &[f64], q: f64) -> Option<f64> {
    let mut sorted: Vec<f64> = values.iter().copied().filter(|v| !v.is_nan()).collect();
    if sorted.is_empty() {
        return None;
    }
    sorted.sort_by(f64::total_cmp);
    let rank = (q / 100.0 * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

/// The middle value (the mean of the two middle ones for an even count).
pub fn median(values: &[f64]) -> Option<f64> {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(sorted[n / 2]),
        _ => Some((sorted[n / 2 - 1] + sorted[n / 2]) / 2.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_total_of_nothing_prints_as_zero() {
        assert_eq!(format!("{:.1}", total([])), "0.0", "not -0.0, as Iterator::sum gives");
        assert_eq!(format!("{:.1}", std::iter::empty::<f64>().sum::<f64>()), "-0.0", "why `total` exists");
        assert_eq!(total([1.5, 2.5]), 4.0);
    }

    #[test]
    fn percentile_by_nearest_rank() {
        let values: Vec<f64> = (1..=200).rev().map(f64::from).collect();
        assert_eq!(percentile(&values, 1.0), Some(2.0), "1 % of 200 values: the 2nd smallest");
        assert_eq!(percentile(&values, 99.0), Some(198.0));
        assert_eq!(percentile(&[5.0, 1.0], 1.0), Some(1.0), "few values: the smallest");
        assert_eq!(percentile(&[], 50.0), None);
    }

    #[test]
    fn median_of_odd_even_and_none() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn jain_bounds() {
        assert_eq!(jain(&[5.0, 5.0, 5.0]), Some(1.0));
        assert_eq!(jain(&[9.0, 0.0, 0.0]), Some(1.0 / 3.0));
        assert_eq!(jain(&[]), None);
        assert_eq!(jain(&[0.0]), None);
    }

    #[test]
    fn spread() {
        assert_eq!(stdev(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]), Some(2.0));
        assert_eq!(cov(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]), Some(0.4));
        assert_eq!(cov(&[0.0, 0.0]), None);
        assert_eq!((min(&[3.0, 1.0]), max(&[3.0, 1.0])), (Some(1.0), Some(3.0)));
    }
}
