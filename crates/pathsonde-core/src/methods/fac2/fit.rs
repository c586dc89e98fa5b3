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

/// The noise scale `η = Var(R/r)·T` of `points` about the line `f`: the
/// span-weighted mean squared residual, times the mean span.  A train of
/// `T` seconds then scatters in `R / r` by `√(η / T)`, and its cross
/// traffic by `C·√(η / T)` (packet cross traffic seen over `T` varies as
/// `1/T`, which is also why points are weighted by span).  The caller
/// passes the near trains' points: the opening's short trains at rates far
/// above C follow the fluid line only roughly and would overstate the
/// noise near A.  `None` below three points.
pub(crate) fn noise_scale(points: &[Point], f: &FluidFit) -> Option<f64> {
    if points.len() < 3 {
        return None;
    }
    let m = 1.0 / f.capacity;
    let b = f.cross / f.capacity;
    let w_sum: f64 = points.iter().map(|p| p.w).sum();
    if w_sum.is_nan() || w_sum <= 0.0 {
        return None;
    }
    let n = points.len() as f64;
    let mean_w = w_sum / n;
    let ss: f64 = points
        .iter()
        .map(|p| {
            let e = p.y - (m * p.mbps + b);
            p.w / mean_w * e * e
        })
        .sum();
    // One degree of freedom for the level the line takes from them.
    let eta = ss / (n - 1.0) * mean_w;
    eta.is_finite().then_some(eta)
}

/// The relative standard error of the line's slope (of C) that the noise
/// scale `eta` implies for these points: each point of span `T` scatters in
/// `R / r` by `√(η / T)`, so the weighted slope's variance is
/// `η / Σ Tᵢ (Rᵢ − R̄)²`.  The fit's own standard error comes from the
/// residuals of a handful of far points and is itself that uncertain: with
/// a few short trains of big cross packets it can read a 30 % wrong slope
/// as 3 % sure.  The near trains' noise scale is measured over far more
/// time, and says what so few short points can resolve.  `None` without a
/// positive slope, spread or noise scale.
pub(crate) fn slope_rel_se_from_noise(points: &[Point], f: &FluidFit, eta: f64) -> Option<f64> {
    let w: f64 = points.iter().map(|p| p.w).sum();
    if !(eta > 0.0 && eta.is_finite() && w > 0.0 && f.capacity > 0.0) {
        return None;
    }
    let x_bar = points.iter().map(|p| p.w * p.mbps).sum::<f64>() / w;
    let sxx: f64 = points.iter().map(|p| p.w * (p.mbps - x_bar).powi(2)).sum();
    if sxx.is_nan() || sxx <= 0.0 {
        return None;
    }
    let rel = (eta / sxx).sqrt() * f.capacity;
    rel.is_finite().then_some(rel)
}

/// A when the user stated C (Mb/s): each point gives its own cross traffic,
/// `Xᵢ = C·yᵢ − Rᵢ`, so `Aᵢ = Rᵢ − C·(yᵢ − 1)`; A is their span-weighted mean
/// and its standard error comes from their weighted scatter.  Returns (A,
/// SE) in Mb/s, SE 0 for one point; `None` without points.
pub(crate) fn given_capacity(c_mbps: f64, points: &[Point]) -> Option<(f64, f64)> {
    let w: f64 = points.iter().map(|p| p.w).sum();
    if points.is_empty() || w.is_nan() || w <= 0.0 || c_mbps.is_nan() || c_mbps <= 0.0 {
        return None;
    }
    let a_i = |p: &Point| p.mbps - c_mbps * (p.y - 1.0);
    let mean = points.iter().map(|p| p.w * a_i(p)).sum::<f64>() / w;
    if points.len() < 2 {
        return Some((mean, 0.0));
    }
    // Weighted variance of one point, then of the mean with the effective
    // number of points (Kish).
    let n = points.len() as f64;
    let var = points
        .iter()
        .map(|p| p.w * (a_i(p) - mean).powi(2))
        .sum::<f64>()
        / w
        * n
        / (n - 1.0);
    let w2: f64 = points.iter().map(|p| p.w * p.w).sum();
    let n_eff = w * w / w2;
    let se = (var / n_eff).sqrt();
    (mean.is_finite() && se.is_finite()).then_some((mean, se))
}

/// [`given_capacity`] with censored points: a near train that was carried
/// (`true`) did not meet enough cross traffic to slow it, so its own
/// `Aᵢ = Rᵢ − C·(yᵢ − 1)` is only known to be at least `Rᵢ`.  Taking `Rᵢ`
/// would pull A down, dropping the train would push it up; each censored
/// point is instead replaced by the mean of its own scatter above `Rᵢ`,
/// `A + σᵢ·λ((Rᵢ − A)/σᵢ)` (λ the inverse Mills ratio, `σᵢ = C·√(η/Tᵢ)`
/// from the noise scale `eta`), and A is solved for by a few rounds of
/// that.  Without a noise scale it is [`given_capacity`].
pub(crate) fn given_capacity_censored(
    c_mbps: f64,
    points: &[(Point, bool)],
    eta: Option<f64>,
) -> Option<(f64, f64)> {
    let plain: Vec<Point> = points.iter().map(|p| p.0).collect();
    let (mut a, _) = given_capacity(c_mbps, &plain)?;
    let Some(eta) = eta.filter(|e| *e > 0.0 && e.is_finite()) else {
        return given_capacity(c_mbps, &plain);
    };
    if !points.iter().any(|p| p.1) {
        return given_capacity(c_mbps, &plain);
    }
    let mut imputed = plain.clone();
    for _ in 0..8 {
        for (k, (p, censored)) in points.iter().enumerate() {
            if !censored {
                continue;
            }
            let sd = c_mbps * (eta / p.w.max(1e-6)).sqrt();
            let a_i = a + sd * stats::normal_tail_mean((p.mbps - a) / sd);
            // As a point with Aᵢ = a_i: y such that R − C·(y − 1) = a_i.
            imputed[k].y = 1.0 + (p.mbps - a_i.max(p.mbps)) / c_mbps;
        }
        let (next, _) = given_capacity(c_mbps, &imputed)?;
        let done = (next - a).abs() <= 1e-6 * a.abs().max(1.0);
        a = next;
        if done {
            break;
        }
    }
    given_capacity(c_mbps, &imputed)
}

/// How much lower than A a near train reads because the tight link's queue
/// cannot go below empty (Mb/s).  Over a train sent `excess` above A for
/// `secs`, the queue is a random walk with drift `excess` and variance rate
/// `σ² = C²·η` (the cross traffic's burstiness, from the noise scale),
/// reflected at zero: early in the train, before the drift dominates, it
/// empties now and then, and what it would have owed below zero is never
/// given back.  The train arrives late by that debt over C, and its reading
/// of A is low by the debt over `secs`.  At 50 % Poisson load on the lab a
/// train that built 140 kbit of queue read 6 Mb/s low.
///
/// The debt is the walk's deepest point below its start, `M`, less the
/// queue the cross traffic had already built when the train arrived, `Q₀`:
/// a queue that was not empty absorbs the walk's dips without owing
/// anything.  `M` over a finite train (a Brownian motion's running maximum,
/// `P(M ≥ x) = Φ((−x − μT)/σ√T) + e^{−2μx/σ²}·Φ((−x + μT)/σ√T)`) is below
/// Lindley's `σ²/2μ` for short trains, and `Q₀` is, in the same diffusion
/// picture, exponential with mean `σ²/2A`.  So the debt is
/// `E[(M − Q₀)⁺] = ∫ P(M > x)·P(Q₀ < x) dx`.  Taking `Q₀ = 0`, as this
/// function did first, over-corrected busy paths: at 90 % Poisson load on
/// the synthetic path FAC² read 4.6 % high on average (issue 28's lean).
pub(crate) fn reflection_bias(
    c_mbps: f64,
    eta: f64,
    excess_mbps: f64,
    secs: f64,
    available_mbps: f64,
) -> f64 {
    if !(eta > 0.0 && secs > 0.0 && c_mbps > 0.0 && eta.is_finite()) {
        return 0.0;
    }
    let var = c_mbps * c_mbps * eta; // σ², Mb²/s
    let mu = excess_mbps.max(0.0);
    let s = (var * secs).sqrt(); // σ√T, Mb
    let q0_mean = if available_mbps > 0.0 {
        var / (2.0 * available_mbps)
    } else {
        f64::INFINITY
    };
    let exceed = |x: f64| {
        let a = stats::normal_cdf((-x - mu * secs) / s);
        let b = (-2.0 * mu * x / var).exp() * stats::normal_cdf((-x + mu * secs) / s);
        (a + b).min(1.0)
    };
    // P(Q₀ < x): with all the room in the world (A infinite) the queue is
    // always empty; with none (A ≤ 0) it never empties.
    let below = |x: f64| {
        if q0_mean <= 0.0 {
            1.0
        } else if q0_mean.is_finite() {
            1.0 - (-x / q0_mean).exp()
        } else {
            0.0
        }
    };
    // P(M > x) is below e^{−x/L} (L = σ²/2μ, Lindley's mean) and, past the
    // drift's reach μT, falls with Φ(−x/σ√T): it is negligible beyond the
    // smaller of 12·L and μT + 7·σ√T.
    let lindley = if mu > 0.0 {
        var / (2.0 * mu)
    } else {
        f64::INFINITY
    };
    let top = (12.0 * lindley).min(mu * secs + 7.0 * s);
    const STEPS: usize = 256;
    let h = top / STEPS as f64;
    // Simpson's rule over [0, top].
    let mut sum = 0.0;
    for k in 0..=STEPS {
        let x = k as f64 * h;
        let w = match k {
            0 => 1.0,
            _ if k == STEPS => 1.0,
            _ if k % 2 == 1 => 4.0,
            _ => 2.0,
        };
        sum += w * exceed(x) * below(x);
    }
    let debt = sum * h / 3.0;
    let bias = debt / secs;
    if bias.is_finite() {
        bias.max(0.0)
    } else {
        0.0
    }
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
    fn noise_scale_reads_the_scatter_and_given_capacity_the_level() {
        let mut pts: Vec<Point> = [1000.0, 90.0, 70.0, 60.0]
            .iter()
            .map(|&r| point(100.0, 50.0, r))
            .collect();
        let f = fit(&pts).unwrap();
        assert!(noise_scale(&pts, &f).unwrap() < 1e-20);
        let (a, se) = given_capacity(100.0, &pts).unwrap();
        assert!((a - 50.0).abs() < 1e-9 && se < 1e-9, "{a} {se}");
        pts[1].y += 0.02;
        pts[2].y -= 0.02;
        let f = fit(&pts).unwrap();
        assert!(noise_scale(&pts, &f).unwrap() > 1e-5);
        let (a, se) = given_capacity(100.0, &pts).unwrap();
        assert!((a - 50.0).abs() < 1.0 && se > 0.1, "{a} {se}");
        assert!(given_capacity(100.0, &[]).is_none());
    }

    #[test]
    fn the_reflection_bias_shrinks_as_the_train_builds_queue() {
        // 300 Mb/s, η such that 7 ms trains scatter by 16 Mb/s.
        let eta = (16.0f64 / 300.0).powi(2) * 0.007;
        let empty = f64::INFINITY; // A so large the queue never stands
        let near = reflection_bias(300.0, eta, 20.0, 0.007, empty);
        let far = reflection_bias(300.0, eta, 60.0, 0.007, empty);
        assert!(near > far && far > 0.0, "{near} {far}");
        // With an empty queue at the start and a long train it is
        // Lindley's σ²/2μ over T.
        let long = reflection_bias(300.0, eta, 20.0, 1.0, empty);
        let lindley = 300.0f64.powi(2) * eta / (2.0 * 20.0 * 1.0);
        assert!((long / lindley - 1.0).abs() < 0.01, "{long} {lindley}");
        // With no drift, the running maximum's mean: σ·√(2T/π), over T.
        let flat = reflection_bias(300.0, eta, 0.0, 0.007, empty);
        let expect = 16.0 * (2.0 / std::f64::consts::PI).sqrt();
        assert!((flat / expect - 1.0).abs() < 0.01, "{flat} {expect}");
        // A busy path's standing queue absorbs part of the debt: the less
        // room (A), the longer that queue and the smaller the bias.
        let busy = reflection_bias(300.0, eta, 20.0, 0.007, 30.0);
        let idle = reflection_bias(300.0, eta, 20.0, 0.007, 210.0);
        assert!(busy < idle && idle < near, "{busy} {idle} {near}");
        // Nothing without noise.
        assert_eq!(reflection_bias(300.0, 0.0, 20.0, 0.007, 100.0), 0.0);
    }

    #[test]
    fn censored_points_count_above_their_rate() {
        // Four trains read A = 50 ± noise; a fifth at 52 was carried.
        let mut pts: Vec<(Point, bool)> = [60.0, 58.0, 62.0, 59.0]
            .iter()
            .map(|&r| (point(100.0, 50.0, r), false))
            .collect();
        pts.push((
            Point {
                mbps: 52.0,
                y: 1.0,
                w: 1.0,
            },
            true,
        ));
        let plain: Vec<Point> = pts.iter().map(|p| p.0).collect();
        let (naive, _) = given_capacity(100.0, &plain).unwrap();
        let (a, _) = given_capacity_censored(100.0, &pts, Some(1e-4)).unwrap();
        // Face value pulls A toward 52; the censored reading sits higher.
        assert!(naive > 50.0 && a > naive, "{naive} {a}");
        assert_eq!(
            given_capacity_censored(100.0, &pts, None),
            given_capacity(100.0, &plain)
        );
    }

    #[test]
    fn a_falling_line_is_rejected() {
        let p = |mbps, y| Point { mbps, y, w: 1.0 };
        assert!(fit(&[p(10.0, 2.0), p(20.0, 1.5)]).is_none());
        assert!(fit(&[p(10.0, 2.0)]).is_none());
    }
}
