//! The hold-error histogram: how far each release fell from its target
//! hold, kept in fixed 1-µs bins of atomic counters so the releaser records a
//! packet without a lock or an allocation, and read back as quantiles.

use pathsonde_core::DurationNs;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

/// Resolution and range of the hold-error histogram (1 µs bins up to 20 ms;
/// later releases land in the last bin and in `max`).
const HIST_BIN_NS: i64 = 1_000;
const HIST_MIN_NS: i64 = -1_000_000;
const HIST_BINS: usize = 21_001;

/// Distribution of (actual hold − target hold), read from the relay's own
/// clock between its arrival stamp and the moment it writes the packet back.
/// Negative means released early (the adaptive lead overshot).  It leaves out
/// what the relay cannot see (its reader's wake-up, the write-back's
/// forwarding), which [`super::DEFAULT_FIXED_CORRECTION`] accounts for on average.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HoldError {
    pub samples: u64,
    pub median: DurationNs,
    pub p99: DurationNs,
    pub max: DurationNs,
}

/// Counts of hold errors by bin, plus the largest seen (the last bin is
/// open-ended, so its midpoint would understate a stall).
pub(super) struct HoldHistogram {
    bins: Box<[AtomicU64]>,
    max_late_ns: AtomicI64,
}

impl HoldHistogram {
    pub(super) fn new() -> Self {
        HoldHistogram {
            bins: (0..HIST_BINS).map(|_| AtomicU64::new(0)).collect(),
            max_late_ns: AtomicI64::new(i64::MIN),
        }
    }

    /// Counts one release that was `late_ns` after its target (negative:
    /// early).
    pub(super) fn record(&self, late_ns: i64) {
        let bin = ((late_ns - HIST_MIN_NS).max(0) / HIST_BIN_NS) as usize;
        self.bins[bin.min(HIST_BINS - 1)].fetch_add(1, Ordering::Relaxed);
        self.max_late_ns.fetch_max(late_ns, Ordering::Relaxed);
    }

    /// Median, 99th percentile (bin midpoints, ±0.5 µs) and maximum, or
    /// `None` before the first release.
    pub(super) fn summary(&self) -> Option<HoldError> {
        let counts: Vec<u64> = self
            .bins
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .collect();
        let total: u64 = counts.iter().sum();
        if total == 0 {
            return None;
        }
        let at = |q: f64| {
            let rank = ((total as f64 * q).ceil() as u64).clamp(1, total);
            let mut seen = 0;
            for (i, c) in counts.iter().enumerate() {
                seen += c;
                if seen >= rank {
                    // The bin's midpoint: ±0.5 µs.
                    return DurationNs::from_ns(
                        HIST_MIN_NS + i as i64 * HIST_BIN_NS + HIST_BIN_NS / 2,
                    );
                }
            }
            DurationNs::from_ns(HIST_MIN_NS + HIST_BINS as i64 * HIST_BIN_NS)
        };
        Some(HoldError {
            samples: total,
            median: at(0.5),
            p99: at(0.99),
            max: DurationNs::from_ns(self.max_late_ns.load(Ordering::Relaxed)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hold_error_quantiles_from_histogram() {
        let h = HoldHistogram::new();
        assert!(h.summary().is_none());
        for i in 0..100 {
            h.record(i * 1_000 + 300);
        }
        h.record(50_000_000);
        let h = h.summary().unwrap();
        assert_eq!(h.samples, 101);
        assert_eq!(h.median.ns(), 50_500);
        assert_eq!(h.p99.ns(), 99_500);
        assert_eq!(h.max.ns(), 50_000_000);
    }
}
