//! Small, exact statistics helpers shared by the methods.
//!
//! All functions take plain slices, ignore nothing silently (NaN in, `None`
//! out) and never panic on empty input.

use serde::{Deserialize, Serialize};

/// Arithmetic mean; `None` when empty or any value is NaN.
pub fn mean(xs: &[f64]) -> Option<f64> {
    if xs.is_empty() || xs.iter().any(|x| x.is_nan()) {
        return None;
    }
    Some(xs.iter().sum::<f64>() / xs.len() as f64)
}

/// Sample standard deviation (n − 1 in the denominator); `None` for fewer than 2 values.
pub fn std_dev(xs: &[f64]) -> Option<f64> {
    if xs.len() < 2 {
        return None;
    }
    let m = mean(xs)?;
    let var = xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (xs.len() - 1) as f64;
    Some(var.sqrt())
}

fn sorted(xs: &[f64]) -> Option<Vec<f64>> {
    if xs.is_empty() || xs.iter().any(|x| x.is_nan()) {
        return None;
    }
    let mut v = xs.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    Some(v)
}

/// The `q`-quantile (0 ≤ q ≤ 1) by linear interpolation between order statistics.
pub fn quantile(xs: &[f64], q: f64) -> Option<f64> {
    let v = sorted(xs)?;
    Some(quantile_sorted(&v, q))
}

fn quantile_sorted(v: &[f64], q: f64) -> f64 {
    let q = q.clamp(0.0, 1.0);
    let pos = q * (v.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    let frac = pos - lo as f64;
    v[lo] + (v[hi] - v[lo]) * frac
}

pub fn median(xs: &[f64]) -> Option<f64> {
    quantile(xs, 0.5)
}

/// Minimum, median and maximum, plus count: the spread a report prints.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub n: usize,
    pub min: f64,
    pub median: f64,
    pub max: f64,
}

pub fn summary(xs: &[f64]) -> Option<Summary> {
    let v = sorted(xs)?;
    Some(Summary {
        n: v.len(),
        min: v[0],
        median: quantile_sorted(&v, 0.5),
        max: v[v.len() - 1],
    })
}

/// Ordinary least-squares line `y = intercept + slope · x`, with the standard
/// errors of both coefficients so callers can state bounds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct LinearFit {
    pub slope: f64,
    pub intercept: f64,
    /// Standard error of the slope (0 for an exact fit or n = 2).
    pub slope_se: f64,
    /// Standard error of the intercept.
    pub intercept_se: f64,
    /// Covariance of slope and intercept estimates.
    pub covariance: f64,
    pub n: usize,
}

impl LinearFit {
    pub(crate) fn predict(&self, x: f64) -> f64 {
        self.intercept + self.slope * x
    }
}

/// Fits a line through `(x, y)` points; `None` with fewer than 2 points, NaNs,
/// or all x equal.
pub(crate) fn linear_fit(points: &[(f64, f64)]) -> Option<LinearFit> {
    let weighted: Vec<(f64, f64, f64)> = points.iter().map(|&(x, y)| (x, y, 1.0)).collect();
    weighted_linear_fit(&weighted)
}

/// Weighted least-squares line through `(x, y, w)` points, `w` ≥ 0 being each
/// point's relative precision (inverse variance, up to a common factor).
///
/// The common factor is estimated from the weighted residuals, so the
/// standard errors mean the same as [`linear_fit`]'s; with equal weights the
/// result equals [`linear_fit`]'s.  `None` with fewer than 2 points of
/// positive weight, non-finite input, or all x equal.
pub(crate) fn weighted_linear_fit(points: &[(f64, f64, f64)]) -> Option<LinearFit> {
    if points
        .iter()
        .any(|(x, y, w)| !x.is_finite() || !y.is_finite() || !w.is_finite() || *w < 0.0)
    {
        return None;
    }
    let pts: Vec<(f64, f64, f64)> = points.iter().copied().filter(|p| p.2 > 0.0).collect();
    let n = pts.len();
    if n < 2 {
        return None;
    }
    let sw: f64 = pts.iter().map(|p| p.2).sum();
    let mx = pts.iter().map(|p| p.2 * p.0).sum::<f64>() / sw;
    let my = pts.iter().map(|p| p.2 * p.1).sum::<f64>() / sw;
    // Normalise the weights to sum to n so that the residual variance is on
    // the scale of an unweighted fit.
    let k = n as f64 / sw;
    let sxx: f64 = pts.iter().map(|p| k * p.2 * (p.0 - mx).powi(2)).sum();
    if sxx.is_nan() || sxx <= f64::EPSILON * mx.abs().max(1.0) {
        return None;
    }
    let sxy: f64 = pts.iter().map(|p| k * p.2 * (p.0 - mx) * (p.1 - my)).sum();
    let slope = sxy / sxx;
    let intercept = my - slope * mx;
    let nf = n as f64;
    let (slope_se, intercept_se, covariance) = if n > 2 {
        let rss: f64 = pts
            .iter()
            .map(|p| k * p.2 * (p.1 - intercept - slope * p.0).powi(2))
            .sum();
        let s2 = rss / (nf - 2.0);
        let var_slope = s2 / sxx;
        let var_intercept = s2 * (1.0 / nf + mx * mx / sxx);
        (var_slope.sqrt(), var_intercept.sqrt(), -mx * var_slope)
    } else {
        (0.0, 0.0, 0.0)
    };
    Some(LinearFit {
        slope,
        intercept,
        slope_se,
        intercept_se,
        covariance,
        n,
    })
}

/// Two-sided 95 % quantile of Student's t distribution with `df` degrees of
/// freedom (the factor that turns a standard error into a 95 % half-width).
///
/// Tabulated for small `df`, where it matters most (a fit through 3 points has
/// 1 degree of freedom and a factor of 12.7, not 1.96); interpolated between
/// entries; 1.96 in the limit.  `df = 0` has no finite quantile and returns
/// `f64::INFINITY`.
pub(crate) fn t_quantile_975(df: usize) -> f64 {
    const TABLE: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042,
    ];
    match df {
        0 => f64::INFINITY,
        1..=30 => TABLE[df - 1],
        // Beyond 30 the quantile is close to 1.96 + 2.4/df.
        _ => 1.96 + 2.4 / df as f64,
    }
}

/// The mean of a standard normal variable above `z`, `E[Z | Z > z] =
/// φ(z) / (1 − Φ(z))` (the inverse Mills ratio).  A measurement known only
/// to lie above a threshold (a censored one) is replaced by it.  Computed
/// from the complementary error function (Numerical Recipes' Chebyshev
/// fit, relative error below 1.2·10⁻⁷); for large `z` it tends to `z`.
pub(crate) fn normal_tail_mean(z: f64) -> f64 {
    if z.is_nan() {
        return f64::NAN;
    }
    if z > 30.0 {
        // Asymptotically z + 1/z.
        return z + 1.0 / z;
    }
    let pdf = (-0.5 * z * z).exp() / (2.0 * std::f64::consts::PI).sqrt();
    let tail = 0.5 * erfc(z / std::f64::consts::SQRT_2);
    if tail <= 0.0 {
        z + 1.0 / z
    } else {
        pdf / tail
    }
}

/// The standard normal distribution function `Φ(x)`, from [`erfc`]
/// (absolute error below 10⁻⁷).
pub(crate) fn normal_cdf(x: f64) -> f64 {
    0.5 * erfc(-x / std::f64::consts::SQRT_2)
}

/// The complementary error function (Numerical Recipes' `erfcc`).
fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98
                                + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let r = t * poly.exp();
    if x >= 0.0 {
        r
    } else {
        2.0 - r
    }
}

/// A logistic curve `p(x) = 1 / (1 + e^{−(x − location)/scale})` fitted to
/// counts of successes and failures at several `x`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct LogisticFit {
    /// Where the curve passes one half.
    pub location: f64,
    /// How gradually it rises (x units; 0→1 takes about 8 scales).
    pub scale: f64,
}

/// Maximum-likelihood logistic fit of `(x, successes, failures)` points.
///
/// For each scale on a geometric grid from `min_scale` upwards (about 200
/// times wider at the top) the log-likelihood is concave in the location,
/// which a golden-section search over the points' span finds; the best pair
/// wins.  The scale floor keeps data that a step separates perfectly (where
/// the likelihood grows without bound as the step sharpens) at a finite,
/// middle location.  `None` unless some point has a success share of at
/// least one half and some point one below it (otherwise no crossing lies
/// inside the data), or when `min_scale` is not a positive number.
pub(crate) fn logistic_fit(points: &[(f64, u32, u32)], min_scale: f64) -> Option<LogisticFit> {
    let pts: Vec<(f64, f64, f64)> = points
        .iter()
        .filter(|(x, s, f)| x.is_finite() && u64::from(*s) + u64::from(*f) > 0)
        .map(|&(x, s, f)| (x, f64::from(s), f64::from(f)))
        .collect();
    let above = pts.iter().any(|p| p.1 >= p.2);
    let below = pts.iter().any(|p| p.1 < p.2);
    if !(above && below && min_scale.is_finite() && min_scale > 0.0) {
        return None;
    }
    let (lo, hi) = pts
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), p| {
            (l.min(p.0), h.max(p.0))
        });
    let log_lik = |mu: f64, scale: f64| -> f64 {
        pts.iter()
            .map(|&(x, s, f)| {
                let z = (x - mu) / scale;
                // ln p = −ln(1 + e^{−z}), ln (1 − p) = −ln(1 + e^{z}).
                -s * softplus(-z) - f * softplus(z)
            })
            .sum()
    };
    const GOLDEN: f64 = 0.381_966_011_250_105_1;
    let mut best: Option<(f64, LogisticFit)> = None;
    for k in 0..40 {
        let scale = min_scale * 1.145_f64.powi(k);
        let (mut a, mut b) = (lo, hi);
        for _ in 0..80 {
            let m1 = a + (b - a) * GOLDEN;
            let m2 = b - (b - a) * GOLDEN;
            if log_lik(m1, scale) > log_lik(m2, scale) {
                b = m2;
            } else {
                a = m1;
            }
        }
        let location = (a + b) / 2.0;
        let l = log_lik(location, scale);
        if best.as_ref().map_or(true, |(bl, _)| l > *bl) {
            best = Some((l, LogisticFit { location, scale }));
        }
    }
    best.map(|(_, f)| f)
}

/// `ln(1 + e^x)` without overflow.
fn softplus(x: f64) -> f64 {
    if x > 30.0 {
        x
    } else {
        x.exp().ln_1p()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn logistic_fit_finds_the_half_way_point() {
        // Counts from p(x) = 1/(1 + e^{−(x − 30)/4}), 100 trials per point.
        let pts: Vec<(f64, u32, u32)> = [18.0, 24.0, 28.0, 33.0, 40.0, 60.0]
            .iter()
            .map(|&x: &f64| {
                let p = 1.0 / (1.0 + (-(x - 30.0) / 4.0).exp());
                let s = (p * 100.0).round() as u32;
                (x, s, 100 - s)
            })
            .collect();
        let f = logistic_fit(&pts, 0.1).unwrap();
        assert!((f.location - 30.0).abs() < 0.2, "{f:?}");
        assert!((f.scale - 4.0).abs() < 0.4, "{f:?}");
        // A perfect step: the location falls between the two sides.
        let f = logistic_fit(&[(10.0, 0, 9), (20.0, 9, 0)], 0.5).unwrap();
        assert!(f.location > 10.0 && f.location < 20.0, "{f:?}");
        // One side only, a zero scale floor: no fit.
        assert_eq!(logistic_fit(&[(10.0, 0, 9), (20.0, 3, 6)], 0.5), None);
        assert_eq!(logistic_fit(&[(1.0, 1, 0), (2.0, 0, 1)], 0.0), None);
        assert_eq!(logistic_fit(&[(f64::NAN, 1, 0), (1.0, 0, 1)], 0.5), None);
    }

    proptest! {
        #[test]
        fn logistic_fit_lands_inside_the_data(pts in proptest::collection::vec((0.0f64..100.0, 0u32..20, 0u32..20), 0..16)) {
            if let Some(f) = logistic_fit(&pts, 0.5) {
                let lo = pts.iter().map(|p| p.0).fold(f64::INFINITY, f64::min);
                let hi = pts.iter().map(|p| p.0).fold(f64::NEG_INFINITY, f64::max);
                prop_assert!(f.location >= lo - 1e-9 && f.location <= hi + 1e-9);
                prop_assert!(f.scale >= 0.5 && f.scale.is_finite());
            }
        }
    }

    #[test]
    fn quantiles_interpolate() {
        let xs = [4.0, 1.0, 3.0, 2.0];
        assert_eq!(median(&xs), Some(2.5));
        assert_eq!(quantile(&xs, 0.0), Some(1.0));
        assert_eq!(quantile(&xs, 1.0), Some(4.0));
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[f64::NAN]), None);
        let s = summary(&xs).unwrap();
        assert_eq!((s.min, s.median, s.max, s.n), (1.0, 2.5, 4.0, 4));
    }

    #[test]
    fn mean_and_std_dev() {
        assert_eq!(mean(&[1.0, 2.0, 3.0]), Some(2.0));
        assert_eq!(std_dev(&[1.0, 2.0, 3.0]), Some(1.0));
        assert_eq!(std_dev(&[1.0]), None);
    }

    #[test]
    fn exact_line_is_recovered() {
        let pts: Vec<(f64, f64)> = (0..10).map(|i| (i as f64, 3.0 + 0.5 * i as f64)).collect();
        let f = linear_fit(&pts).unwrap();
        assert!((f.slope - 0.5).abs() < 1e-12);
        assert!((f.intercept - 3.0).abs() < 1e-12);
        assert!(f.slope_se < 1e-9);
        assert!(linear_fit(&[(1.0, 1.0), (1.0, 2.0)]).is_none());
    }

    #[test]
    fn noisy_line_has_standard_errors() {
        let pts = [(0.0, 0.1), (1.0, 0.9), (2.0, 2.1), (3.0, 2.9)];
        let f = linear_fit(&pts).unwrap();
        assert!((f.slope - 0.96).abs() < 1e-9);
        assert!(f.slope_se > 0.0 && f.intercept_se > 0.0);
    }

    #[test]
    fn weighted_fit_matches_unweighted_with_equal_weights_and_follows_weights() {
        let pts = [(0.0, 0.1), (1.0, 0.9), (2.0, 2.1), (3.0, 2.9)];
        let a = linear_fit(&pts).unwrap();
        let w: Vec<(f64, f64, f64)> = pts.iter().map(|p| (p.0, p.1, 7.0)).collect();
        let b = weighted_linear_fit(&w).unwrap();
        for (u, v) in [
            (a.slope, b.slope),
            (a.intercept, b.intercept),
            (a.slope_se, b.slope_se),
            (a.intercept_se, b.intercept_se),
            (a.covariance, b.covariance),
        ] {
            assert!((u - v).abs() < 1e-12, "{u} vs {v}");
        }
        // A heavy point pulls the line through itself.
        let heavy = [
            (0.0, 0.0, 1.0),
            (1.0, 1.0, 1.0),
            (2.0, 5.0, 1e9),
            (3.0, 3.0, 1.0),
        ];
        let f = weighted_linear_fit(&heavy).unwrap();
        assert!((f.predict(2.0) - 5.0).abs() < 1e-3);
        assert!(weighted_linear_fit(&[(0.0, 1.0, 1.0), (1.0, 2.0, 0.0)]).is_none());
        assert!(weighted_linear_fit(&[(0.0, 1.0, -1.0), (1.0, 2.0, 1.0)]).is_none());
    }

    #[test]
    fn t_quantiles_shrink_towards_normal() {
        assert_eq!(t_quantile_975(1), 12.706);
        assert!(t_quantile_975(0).is_infinite());
        assert!((t_quantile_975(31) - 2.04).abs() < 0.01);
        assert!((t_quantile_975(10_000) - 1.96).abs() < 0.001);
        for df in 1..200 {
            assert!(t_quantile_975(df + 1) <= t_quantile_975(df));
        }
    }

    proptest! {
        #[test]
        fn quantile_stays_within_range(xs in prop::collection::vec(-1e9f64..1e9, 1..50), q in 0.0f64..1.0) {
            let v = quantile(&xs, q).unwrap();
            let lo = xs.iter().cloned().fold(f64::INFINITY, f64::min);
            let hi = xs.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            prop_assert!(v >= lo && v <= hi);
        }
    }

    #[test]
    fn normal_tail_mean_matches_known_values() {
        // E[Z | Z > 0] = √(2/π); E[Z | Z > 1] = 1.5251; large z → z + 1/z.
        assert!((normal_tail_mean(0.0) - (2.0 / std::f64::consts::PI).sqrt()).abs() < 1e-6);
        assert!((normal_tail_mean(1.0) - 1.525_135).abs() < 1e-5);
        assert!((normal_tail_mean(-3.0) - 0.004_432).abs() < 1e-5);
        assert!((normal_tail_mean(8.0) - 8.1211).abs() < 1e-3);
        assert!(normal_tail_mean(f64::NAN).is_nan());
    }
}
