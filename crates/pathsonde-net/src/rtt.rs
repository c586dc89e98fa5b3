//! Round-trip time samples and their summary.

use pathsonde_core::{stats, DurationNs};
use serde::Serialize;

/// Min / median / max of a set of RTT samples.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RttSummary {
    pub samples: usize,
    pub min: DurationNs,
    pub median: DurationNs,
    pub max: DurationNs,
}

impl RttSummary {
    /// `None` when there are no samples.
    pub fn from_samples(samples: &[DurationNs]) -> Option<Self> {
        let ns: Vec<f64> = samples.iter().map(|d| d.ns() as f64).collect();
        let s = stats::summary(&ns)?;
        Some(RttSummary {
            samples: s.n,
            min: DurationNs::from_ns(s.min as i64),
            median: DurationNs::from_ns(s.median.round() as i64),
            max: DurationNs::from_ns(s.max as i64),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_of_samples() {
        let s: Vec<DurationNs> = [30, 10, 20]
            .iter()
            .map(|&u| DurationNs::from_us(u))
            .collect();
        let r = RttSummary::from_samples(&s).unwrap();
        assert_eq!(r.samples, 3);
        assert_eq!(r.min, DurationNs::from_us(10));
        assert_eq!(r.median, DurationNs::from_us(20));
        assert_eq!(r.max, DurationNs::from_us(30));
        assert!(RttSummary::from_samples(&[]).is_none());
    }
}
