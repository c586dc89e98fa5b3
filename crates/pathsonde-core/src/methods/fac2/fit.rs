//! The fluid relation and its straight-line fit.
//!
//! A train sent at `R` into a FIFO of capacity `C` that also carries fluid
//! cross traffic `X` leaves it, once `R > A = C − X`, at `r = R·C / (R + X)`.
//! Inverted, `R / r = R / C + X / C`: a straight line in `R` with slope `1/C`
//! and intercept `X/C`.  Every train sent clearly above A is a point on it;
//! two points give C and X, and `A = C − X` is where the line crosses
//! `R / r = 1`.

use crate::stats;

/// One point of the fluid line: the rate a train was sent at and the ratio
/// `R / r` it suffered, with `R` in Mb/s (keeps the fit well conditioned).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Point {
    pub mbps: f64,
    pub y: f64,
    /// Relative weight: the time the train kept the tight link busy (its
    /// receive span).  Cross traffic is averaged over that time, so a train
    /// twice as long carries half the variance.
    pub w: f64,
}

/// The line through the points, read as path properties (all in Mb/s).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct FluidFit {
    pub capacity: f64,
    pub cross: f64,
    /// `(1 − intercept) / slope`: where the line reaches `R / r = 1`.
    pub available: f64,
    /// Standard error of `available` (delta method), 0 for two points.
    pub available_se: f64,
    pub n: usize,
    /// Smallest `R / r` among the points (how close to A the nearest point is).
    pub y_min: f64,
    pub y_max: f64,
    /// Relative standard error of the slope (`se(m) / m`, i.e. of C).
    pub slope_rel_se: f64,
}

impl FluidFit {
    /// 95 % half-width on A (t-distribution with n − 2 degrees of freedom);
    /// `None` with two points, where the line is exact and says nothing of
    /// its own uncertainty.
    pub fn half_width(&self) -> Option<f64> {
        (self.n > 2).then(|| stats::t_quantile_975(self.n - 2) * self.available_se)
    }

    /// The `R` (Mb/s) at which the line predicts a receive/send ratio `rho`.
    pub fn rate_for_ratio(&self, rho: f64) -> f64 {
        self.capacity / rho - self.cross
    }
}

/// Fits the fluid line (weighted least squares).  `None` with fewer than two points, points that do
/// not spread in `R`, or a slope that is not positive (no capacity can
/// explain it).
pub(crate) fn fit(points: &[Point]) -> Option<FluidFit> {
    let xyw: Vec<(f64, f64, f64)> = points.iter().map(|p| (p.mbps, p.y, p.w)).collect();
    let f = stats::weighted_linear_fit(&xyw)?;
    let m = f.slope;
    let b = f.intercept;
    if m <= 0.0 || !m.is_finite() || !b.is_finite() {
        return None;
    }
    let capacity = 1.0 / m;
    let cross = b / m;
    let available = (1.0 - b) / m;
    // A = (1 − b)/m: ∂A/∂m = −A/m, ∂A/∂b = −1/m, so
    // Var A = (A²·Var m + Var b + 2A·Cov(m, b)) / m².
    let var = (available * available * f.slope_se * f.slope_se
        + f.intercept_se * f.intercept_se
        + 2.0 * available * f.covariance)
        / (m * m);
    let available_se = var.max(0.0).sqrt();
    if ![capacity, cross, available, available_se]
        .iter()
        .all(|v| v.is_finite())
    {
        return None;
    }
    let y_min = points.iter().map(|p| p.y).fold(f64::INFINITY, f64::min);
    let y_max = points.iter().map(|p| p.y).fold(f64::NEG_INFINITY, f64::max);
    Some(FluidFit {
        capacity,
        cross,
        available,
        available_se,
        n: points.len(),
        y_min,
        y_max,
        slope_rel_se: f.slope_se / m,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(c: f64, x: f64, r: f64) -> Point {
        Point {
            mbps: r,
            y: r / (r * c / (r + x)),
            w: 1.0,
        }
    }

    #[test]
    fn two_exact_points_give_the_path() {
        let f = fit(&[point(100.0, 70.0, 1000.0), point(100.0, 70.0, 60.0)]).unwrap();
        assert!((f.capacity - 100.0).abs() < 1e-9);
        assert!((f.cross - 70.0).abs() < 1e-9);
        assert!((f.available - 30.0).abs() < 1e-9);
        assert_eq!(f.half_width(), None);
        assert!((f.rate_for_ratio(0.9) - (100.0 / 0.9 - 70.0)).abs() < 1e-9);
    }

    #[test]
    fn noisy_points_carry_a_standard_error() {
        let mut pts = vec![
            point(100.0, 50.0, 1000.0),
            point(100.0, 50.0, 90.0),
            point(100.0, 50.0, 70.0),
            point(100.0, 50.0, 60.0),
        ];
        pts[2].y += 0.01;
        let f = fit(&pts).unwrap();
        assert!(f.available_se > 0.0);
        let hw = f.half_width().unwrap();
        assert!((f.available - 50.0).abs() < hw, "{f:?} ±{hw}");
    }

    #[test]
    fn a_falling_line_is_rejected() {
        let p = |mbps, y| Point { mbps, y, w: 1.0 };
        assert!(fit(&[p(10.0, 2.0), p(20.0, 1.5)]).is_none());
        assert!(fit(&[p(10.0, 2.0)]).is_none());
    }
}
