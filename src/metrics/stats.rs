//! Small statistics over per-flow numbers: fairness and spread.

/// Jain's fairness index, (Σx)² / (n·Σx²): 1 when all are equal, 1/n when one
/// takes everything. `None` for no values or all zero.
pub fn jain(values: &[f64]) -> Option<f64> {
    let sum: f64 = values.iter().sum();
    let squares: f64 = values.iter().map(|x| x * x).sum();
    (squares > 0.0).then(|| sum * sum / (values.len() as f64 * squares))
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

#[cfg(test)]
mod tests {
    use super::*;

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
