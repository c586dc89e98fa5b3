//! An estimate scored against the truth, and the summary of many: the one
//! definition of "error", "band coverage" and "drops caused" behind every
//! accuracy table pathsonde prints (`lab run`, `compare`, `sim run`, the
//! docs' scripts read the same fields).
//!
//! The truth comes from whoever knows it (the lab's generators and qdisc
//! counters, the simulator's links); it is never shown to a method.

use crate::estimate::Estimate;
use crate::stats;
use crate::units::BitRate;
use serde::{Deserialize, Serialize};

/// One estimate against the truth over its own window.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Score {
    /// `(estimate − truth) / truth`, signed.
    pub error: f64,
    /// Whether the estimate's band covered the truth ([`Estimate::band_covers`]:
    /// an open band is a miss);
    /// `None` for an estimate that has no band (RFC 9097's maximum IP-layer
    /// capacity is one number): band coverage does not apply to it.
    pub in_band: Option<bool>,
}

impl Score {
    /// `None` when the truth is not positive: a path with nothing available
    /// has no relative error to score.
    pub fn of(estimate: &Estimate, truth: BitRate) -> Option<Score> {
        truth.is_positive().then(|| Score {
            error: relative_error(estimate.available, truth),
            in_band: Some(estimate.band_covers(truth)),
        })
    }
}

/// `(estimate − truth) / truth`, the truth read as no less than 1 b/s so a
/// path with nothing available gives a large error rather than a division
/// by zero.
pub fn relative_error(estimate: BitRate, truth: BitRate) -> f64 {
    (estimate.bps() - truth.bps()) / truth.bps().max(1.0)
}

/// What a summary needs of one run: its score (`None` when the run gave no
/// estimate) and the packets its probes made the bottleneck drop (`None`
/// when unknown).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Scored {
    pub score: Option<Score>,
    pub drops_caused: Option<f64>,
}

impl Scored {
    /// A run that gave an estimate with this signed `error` and band verdict.
    pub fn estimate(error: f64, in_band: bool, drops_caused: Option<f64>) -> Scored {
        Scored {
            score: Some(Score {
                error,
                in_band: Some(in_band),
            }),
            drops_caused,
        }
    }

    /// A run that gave an estimate without a band (a capacity maximum):
    /// it counts towards every error statistic, never towards band coverage.
    pub fn unbanded(error: f64, drops_caused: Option<f64>) -> Scored {
        Scored {
            score: Some(Score {
                error,
                in_band: None,
            }),
            drops_caused,
        }
    }
}

/// Accuracy over many runs: medians and tails of |error|, band coverage and
/// drops caused.  Every statistic is `None` where no run informs it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Accuracy {
    /// Runs summarised.
    pub runs: usize,
    /// Runs that gave a scored estimate.
    pub estimates: usize,
    pub mean_abs_error: Option<f64>,
    pub median_abs_error: Option<f64>,
    /// 90th percentile of |error| (linear interpolation).
    pub p90_abs_error: Option<f64>,
    pub max_abs_error: Option<f64>,
    pub mean_signed_error: Option<f64>,
    /// Share of the runs with a banded estimate whose band held the truth
    /// (`None` when no run had a band).
    pub band_coverage: Option<f64>,
    /// Median and most packets dropped because the probes were there, over
    /// the runs whose drops are known.
    pub drops_caused_median: Option<f64>,
    pub drops_caused_max: Option<f64>,
}

impl Accuracy {
    pub fn of(runs: impl IntoIterator<Item = Scored>) -> Accuracy {
        let mut n = 0;
        let mut signed = Vec::new();
        let mut held = 0usize;
        let mut banded = 0usize;
        let mut drops = Vec::new();
        for r in runs {
            n += 1;
            if let Some(s) = r.score {
                signed.push(s.error);
                if let Some(b) = s.in_band {
                    banded += 1;
                    held += usize::from(b);
                }
            }
            drops.extend(r.drops_caused);
        }
        let abs: Vec<f64> = signed.iter().map(|e| e.abs()).collect();
        Accuracy {
            runs: n,
            estimates: signed.len(),
            mean_abs_error: stats::mean(&abs),
            median_abs_error: stats::median(&abs),
            p90_abs_error: stats::quantile(&abs, 0.9),
            max_abs_error: stats::quantile(&abs, 1.0),
            mean_signed_error: stats::mean(&signed),
            band_coverage: (banded > 0).then(|| held as f64 / banded as f64),
            drops_caused_median: stats::median(&drops),
            drops_caused_max: stats::quantile(&drops, 1.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statistics_of_a_few_runs() {
        let a = Accuracy::of([
            Scored::estimate(0.05, true, Some(0.0)),
            Scored::estimate(-0.10, false, Some(4.0)),
            Scored::estimate(0.01, true, None),
            Scored::default(),
        ]);
        assert_eq!((a.runs, a.estimates), (4, 3));
        assert!((a.median_abs_error.unwrap() - 0.05).abs() < 1e-12);
        assert!((a.max_abs_error.unwrap() - 0.10).abs() < 1e-12);
        assert!((a.mean_signed_error.unwrap() + 0.04 / 3.0).abs() < 1e-12);
        assert!((a.band_coverage.unwrap() - 2.0 / 3.0).abs() < 1e-12);
        assert_eq!(
            (a.drops_caused_median, a.drops_caused_max),
            (Some(2.0), Some(4.0))
        );
    }

    #[test]
    fn an_estimate_without_a_band_is_scored_but_not_covered() {
        let a = Accuracy::of([
            Scored::unbanded(0.02, Some(10.0)),
            Scored::unbanded(-0.04, Some(30.0)),
        ]);
        assert_eq!((a.runs, a.estimates), (2, 2));
        assert!((a.median_abs_error.unwrap() - 0.03).abs() < 1e-12);
        assert_eq!(a.band_coverage, None);
        assert_eq!(a.drops_caused_median, Some(20.0));
        // Mixed with banded runs, coverage counts only those.
        let b = Accuracy::of([
            Scored::unbanded(0.02, None),
            Scored::estimate(0.1, false, None),
            Scored::estimate(0.1, true, None),
        ]);
        assert_eq!(b.band_coverage, Some(0.5));
    }

    #[test]
    fn no_estimate_informs_nothing() {
        let a = Accuracy::of([Scored::default(); 3]);
        assert_eq!((a.runs, a.estimates), (3, 0));
        assert_eq!(a.median_abs_error, None);
        assert_eq!(a.band_coverage, None);
    }

    #[test]
    fn a_path_with_nothing_available_scores_nothing() {
        let e = Estimate {
            stopped: None,
            method: crate::method_name::MethodName::Pair,
            available: BitRate::from_mbps(10.0),
            low: BitRate::from_mbps(9.0),
            high: None,
            capacity: None,
            cross_traffic: None,
            cost: Default::default(),
            probe_span: Default::default(),
            converged: true,
            host_limited: None,
            trains: vec![],
            notes: vec![],
            coalescing: None,
            host_evidence: None,
        };
        assert!(Score::of(&e, BitRate::ZERO).is_none());
        let s = Score::of(&e, BitRate::from_mbps(8.0)).unwrap();
        assert!((s.error - 0.25).abs() < 1e-12);
        assert!((relative_error(BitRate::from_bps(5.0), BitRate::ZERO) - 5.0).abs() < 1e-12);
    }
}
