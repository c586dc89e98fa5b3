//! The one-way-delay trend of one stream: PCT and PDT over group medians.
//!
//! The delays of a stream are split into `Γ = ⌊√n⌋` consecutive groups and
//! each group is replaced by its median, which removes single-packet noise
//! (a cross packet slipping in, a late stamp).  Over the medians `m₁ … m_Γ`:
//!
//! * **PCT** (pairwise comparison test): the share of consecutive pairs with
//!   `m_k > m_{k−1}`.  About ½ for a flat random sequence, 1 for a steadily
//!   rising one.
//! * **PDT** (pairwise difference test): `(m_Γ − m₁) / Σ |m_k − m_{k−1}|`,
//!   the net rise over the total movement.  About 0 for a flat sequence, 1
//!   for a monotone rising one; insensitive to how many small steps there were.
//!
//! PCT catches a rise made of many small steps; PDT one made of a few large
//! ones.  Each votes increasing, non-increasing or ambiguous; the stream is
//! increasing when one test says so and the other does not contradict it,
//! and likewise for non-increasing.

use serde::{Deserialize, Serialize};

/// Thresholds of the two tests.  pathload publishes 0.66/0.54 (PCT) and
/// 0.55/0.45 (PDT); on the synthetic Poisson path those call a stream
/// non-increasing until `R` is well above `A` (a random walk has PCT ≈ ½),
/// and SLoPS over-estimated by 5–14 % at 50–90 % load.  The defaults here,
/// 0.6/0.5 and 0.4/0.3, remove that bias (see `docs/methods/slops.md`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TrendThresholds {
    /// PCT above this: increasing.  Default 0.6.
    pub pct_increasing: f64,
    /// PCT below this: non-increasing.  Default 0.5.
    pub pct_flat: f64,
    /// PDT above this: increasing.  Default 0.4.
    pub pdt_increasing: f64,
    /// PDT below this: non-increasing.  Default 0.3.
    pub pdt_flat: f64,
}

impl Default for TrendThresholds {
    fn default() -> Self {
        TrendThresholds {
            pct_increasing: 0.6,
            pct_flat: 0.5,
            pdt_increasing: 0.4,
            pdt_flat: 0.3,
        }
    }
}

impl TrendThresholds {
    /// The thresholds, with nonsensical pairs replaced by the defaults.
    pub fn sane(&self) -> TrendThresholds {
        let d = TrendThresholds::default();
        let ok = |lo: f64, hi: f64| lo.is_finite() && hi.is_finite() && lo <= hi;
        TrendThresholds {
            pct_increasing: if ok(self.pct_flat, self.pct_increasing) {
                self.pct_increasing
            } else {
                d.pct_increasing
            },
            pct_flat: if ok(self.pct_flat, self.pct_increasing) {
                self.pct_flat
            } else {
                d.pct_flat
            },
            pdt_increasing: if ok(self.pdt_flat, self.pdt_increasing) {
                self.pdt_increasing
            } else {
                d.pdt_increasing
            },
            pdt_flat: if ok(self.pdt_flat, self.pdt_increasing) {
                self.pdt_flat
            } else {
                d.pdt_flat
            },
        }
    }
}

/// A stream's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Trend {
    Increasing,
    NonIncreasing,
    /// The tests disagree or both sit between their thresholds.
    Ambiguous,
    /// Fewer than 16 delays: not enough for four groups.
    TooFew,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Vote {
    Up,
    Flat,
    Unsure,
}

/// The group medians of `delays` (`⌊√n⌋` groups of consecutive values).
pub(crate) fn group_medians(delays: &[f64]) -> Vec<f64> {
    let n = delays.len();
    let g = (n as f64).sqrt().floor() as usize;
    if g == 0 {
        return Vec::new();
    }
    (0..g)
        .filter_map(|k| {
            let lo = k * n / g;
            let hi = (k + 1) * n / g;
            crate::stats::median(&delays[lo..hi])
        })
        .collect()
}

/// PCT and PDT of a sequence of group medians.
pub(crate) fn pct_pdt(m: &[f64]) -> Option<(f64, f64)> {
    if m.len() < 2 {
        return None;
    }
    let steps = m.len() - 1;
    let ups = m.windows(2).filter(|w| w[1] > w[0]).count();
    let pct = ups as f64 / steps as f64;
    let total: f64 = m.windows(2).map(|w| (w[1] - w[0]).abs()).sum();
    let pdt = if total > 0.0 {
        (m[m.len() - 1] - m[0]) / total
    } else {
        0.0
    };
    Some((pct, pdt))
}

/// Classifies one stream's one-way delays (in send order, any unit, any
/// offset).  A net rise of the group medians no larger than `floor` (same
/// unit) is within the timing error and counts as non-increasing: under
/// interrupt coalescing a bunch end's stamp is late by up to one bunch
/// period, and when the packet spacing nearly divides that period the
/// lateness drifts slowly across a stream, which PCT and PDT would read as a
/// trend.
pub fn classify(delays: &[f64], th: &TrendThresholds, floor: f64) -> Trend {
    if delays.len() < 16 || delays.iter().any(|d| !d.is_finite()) {
        return Trend::TooFew;
    }
    let m = group_medians(delays);
    let Some((pct, pdt)) = pct_pdt(&m) else {
        return Trend::TooFew;
    };
    if floor > 0.0 && (m[m.len() - 1] - m[0]).abs() <= floor {
        return Trend::NonIncreasing;
    }
    let vote = |x: f64, up: f64, flat: f64| {
        if x > up {
            Vote::Up
        } else if x < flat {
            Vote::Flat
        } else {
            Vote::Unsure
        }
    };
    let a = vote(pct, th.pct_increasing, th.pct_flat);
    let b = vote(pdt, th.pdt_increasing, th.pdt_flat);
    match (a, b) {
        (Vote::Up, Vote::Up) | (Vote::Up, Vote::Unsure) | (Vote::Unsure, Vote::Up) => {
            Trend::Increasing
        }
        (Vote::Flat, Vote::Flat) | (Vote::Flat, Vote::Unsure) | (Vote::Unsure, Vote::Flat) => {
            Trend::NonIncreasing
        }
        _ => Trend::Ambiguous,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rising_flat_and_falling_streams() {
        let th = TrendThresholds::default();
        let rising: Vec<f64> = (0..100).map(|i| i as f64 * 1e-6).collect();
        assert_eq!(classify(&rising, &th, 0.0), Trend::Increasing);
        let flat = vec![5e-3; 100];
        assert_eq!(classify(&flat, &th, 0.0), Trend::NonIncreasing);
        let falling: Vec<f64> = rising.iter().rev().copied().collect();
        assert_eq!(classify(&falling, &th, 0.0), Trend::NonIncreasing);
        // A saw-tooth (cars of several packets) with no net rise.
        let saw: Vec<f64> = (0..100).map(|i| (i % 4) as f64 * 1e-6).collect();
        assert_eq!(classify(&saw, &th, 0.0), Trend::NonIncreasing);
        assert_eq!(classify(&rising[..10], &th, 0.0), Trend::TooFew);
        let mut bad = rising.clone();
        bad[3] = f64::NAN;
        assert_eq!(classify(&bad, &th, 0.0), Trend::TooFew);
        // A rise of 99 µs within a 125 µs timing floor is no trend.
        assert_eq!(classify(&rising, &th, 125e-6), Trend::NonIncreasing);
        assert_eq!(classify(&rising, &th, 50e-6), Trend::Increasing);
    }

    #[test]
    fn a_rise_in_a_few_big_steps_is_caught_by_pdt() {
        // Flat with three jumps: PCT ≈ 3/9, PDT = 1.
        let d: Vec<f64> = (0..100).map(|i| ((i / 30) as f64) * 1e-3).collect();
        let (pct, pdt) = pct_pdt(&group_medians(&d)).unwrap();
        assert!(pct < 0.54 && (pdt - 1.0).abs() < 1e-12, "{pct} {pdt}");
        // The tests disagree: ambiguous, not increasing.
        assert_eq!(
            classify(&d, &TrendThresholds::default(), 0.0),
            Trend::Ambiguous
        );
    }

    #[test]
    fn group_medians_cover_every_value() {
        let d: Vec<f64> = (0..50).map(f64::from).collect();
        let m = group_medians(&d);
        assert_eq!(m.len(), 7);
        assert!(m.windows(2).all(|w| w[1] > w[0]));
    }
}
