//! How noisy the path is at a train's time scale, and the trains that noise
//! calls for.
//!
//! Cross traffic made of packets is not a fluid: Poisson packets of `s` bits
//! at rate `X`, seen over a train of duration `T`, average to a rate with
//! standard deviation `√(X·s/T)`.  Each point of the fluid line
//! `R/r = (R + X_T)/C` therefore scatters in `R/r` with a variance that falls
//! as `1/T`, which is also why the fit weighs points by their span.  The
//! *noise scale* `η = Var(R/r)·T` is read from the fit's residuals (weighted
//! by span), so it covers every source of scatter the trains actually showed
//! (cross traffic, the host, the receiver), not only Poisson arrivals.
//!
//! From `η` FAC² plans two kinds of train (see `docs/methods/fac2.md`):
//!
//! * **near** trains carry the level of the line, which is where A is read:
//!   as long as the queue budget allows, sent [`NEAR_SIGMAS`] standard
//!   deviations of the cross rate (at their own length, combined with the
//!   fit's error on A) plus `tolerance × C` above the fitted A — nearer,
//!   the queue would empty during the train now and then, or the train would
//!   look carried, and either biases the point;
//! * **far** trains pin the slope (C): short, fast trains that build as much
//!   queue as the budget allows.  A near point at a distance `d` above A
//!   turns a relative error `ε` of C into an error `d·ε` of A, so FAC² sends
//!   a far train when that part of the fit's variance dominates.

use super::fit::{FluidFit, Point};

/// Near trains are sent this many standard deviations of the cross rate
/// (over their own length) above A, on top of the fit margin.
pub(crate) const NEAR_SIGMAS: f64 = 2.0;

/// The scatter of the fit's points, as `η = Var(R/r) × seconds`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Noise {
    pub eta: f64,
}

impl Noise {
    /// Reads `η` from the residuals of the fit through `points` (weights are
    /// the points' spans in seconds).  Needs four points (two degrees of
    /// freedom); `None` when the line fits exactly.
    pub fn from_fit(points: &[Point], f: &FluidFit) -> Option<Noise> {
        if points.len() < 4 || f.capacity <= 0.0 {
            return None;
        }
        // The median of the span-weighted squared residuals, scaled to a
        // mean (a χ²₁ median is 0.455 of its mean) and for the two
        // parameters fitted: one train disturbed by something else must not
        // make every later train short.
        let mut r2: Vec<f64> = points
            .iter()
            .map(|p| p.w * (p.y - (p.mbps + f.cross) / f.capacity).powi(2))
            .collect();
        r2.sort_by(f64::total_cmp);
        let n = r2.len();
        let median = 0.5 * (r2[(n - 1) / 2] + r2[n / 2]);
        let eta = median / 0.455 * n as f64 / (n - 2) as f64;
        (eta.is_finite() && eta > 0.0).then_some(Noise { eta })
    }

    /// Standard deviation of `R/r` for a train lasting `secs`.
    pub fn sd_ratio(&self, secs: f64) -> f64 {
        (self.eta / secs.max(1e-6)).sqrt()
    }

    /// Standard deviation of the cross rate (Mb/s, same unit as `capacity`)
    /// a train lasting `secs` meets.
    pub fn sd_cross(&self, secs: f64, capacity: f64) -> f64 {
        capacity * self.sd_ratio(secs)
    }
}

/// A planned train: rate (Mb/s) and duration (seconds).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Planned {
    pub mbps: f64,
    pub secs: f64,
}

/// Limits on a train's duration and the queue it may build.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// Shortest and longest train (seconds).  Near trains are never
    /// shorter than `min_secs`: a short train near A is mostly noise.
    pub min_secs: f64,
    pub max_secs: f64,
    /// The queue a train above A may build (Mb, i.e. Mb/s × s), if known.
    pub budget_mb: Option<f64>,
    /// Least excess over A (Mb/s) that keeps the train clear of the fit
    /// margin.
    pub min_excess: f64,
    /// Standard deviations of the combined noise the excess carries
    /// ([`NEAR_SIGMAS`], or fewer for long near trains at high load).
    pub sigmas: f64,
    /// Whether the queue a near train builds is judged with A one standard
    /// error lower (off for long near trains at high load, whose budget is
    /// floored at a queue the path is known to hold).
    pub se_in_budget: bool,
}

/// The near train: the longest one, up to `wanted` seconds, whose excess
/// `min_excess + NEAR_SIGMAS·√(σ_X(T)² + se(A)²)` over the fitted A keeps
/// within the queue budget (the fit's own error counts: a train meant to be
/// above A must not land below it).
pub(crate) fn near_train(noise: Noise, f: &FluidFit, a: f64, wanted: f64, lim: Limits) -> Planned {
    let excess =
        |t: f64| lim.min_excess + lim.sigmas * noise.sd_cross(t, f.capacity).hypot(f.available_se);
    // The queue it builds is judged with A one standard error lower: the
    // fitted A is uncertain, and overflowing costs a train.
    let pad = if lim.se_in_budget {
        f.available_se
    } else {
        0.0
    };
    let builds = |t: f64| (excess(t) + pad) * t;
    let top = wanted.clamp(lim.min_secs, lim.max_secs.max(lim.min_secs));
    // Durations from `top` down by factors of √2; the first that fits wins.
    let mut t = top;
    while t > lim.min_secs && lim.budget_mb.is_some_and(|b| builds(t) > b) {
        t = (t / std::f64::consts::SQRT_2).max(lim.min_secs);
    }
    Planned {
        mbps: a + excess(t),
        secs: t,
    }
}

/// The far train: as fast as `max_mbps` allows while building at most the
/// queue budget in `short` seconds; without a budget, at the rate the fit
/// gives ratio `rho`.
pub(crate) fn far_train(
    f: &FluidFit,
    a: f64,
    max_mbps: f64,
    short: f64,
    base: f64,
    rho: f64,
    lim: Limits,
) -> Planned {
    match lim.budget_mb {
        Some(b) => {
            let mbps = (a + b / short).min(max_mbps).max(a + lim.min_excess);
            Planned {
                mbps,
                secs: (b / (mbps - a)).clamp(lim.min_secs, base),
            }
        }
        None => Planned {
            mbps: f.rate_for_ratio(rho).min(max_mbps),
            secs: base,
        },
    }
}

/// Whether a far train would help more than a near one: the part of the
/// fit's variance of A that comes from the slope, read at a near train's
/// excess `d`, `(d·se(m)/m)²`, is more than half of it.
pub(crate) fn slope_dominates(f: &FluidFit, d: f64) -> bool {
    let slope_part = (d * f.slope_rel_se).powi(2);
    slope_part > 0.5 * f.available_se.powi(2)
}

/// The train time each remaining train should last for the fit's standard
/// error on A to reach `target_se`, assuming it falls as `1/√(total span)`.
pub(crate) fn wanted_secs(f: &FluidFit, span_now: f64, target_se: f64, trains_left: u32) -> f64 {
    if target_se <= 0.0 || trains_left == 0 || f.available_se <= target_se {
        return 0.0;
    }
    let need = span_now * (f.available_se / target_se).powi(2) - span_now;
    need / f64::from(trains_left)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::methods::fac2::fit::fit;

    #[test]
    fn the_noise_scale_is_read_from_the_residuals() {
        // y = (R + 90)/300 ± 0.01 at 10 ms spans, alternating: the line
        // absorbs none of it, η ≈ 0.01²·0.01 = 1e-6 (times 8/6 for the two
        // fitted parameters, over 0.455 for the median of χ²₁... of a
        // constant, which the residuals here nearly are).
        let pts: Vec<Point> = [240.0, 250.0, 260.0, 270.0, 280.0, 290.0, 300.0, 310.0]
            .iter()
            .zip([1.0, -1.0, 1.0, -1.0, -1.0, 1.0, -1.0, 1.0])
            .map(|(&r, e)| Point {
                mbps: r,
                y: (r + 90.0) / 300.0 + 0.01 * e,
                w: 0.01,
            })
            .collect();
        let f = fit(&pts).unwrap();
        let n = Noise::from_fit(&pts, &f).unwrap();
        let want = 1e-6 * 8.0 / 6.0 / 0.455;
        assert!((n.eta / want - 1.0).abs() < 0.05, "{n:?} vs {want}");
        // σ falls as 1/√T; σ_X is C times σ of the ratio.
        assert!((n.sd_ratio(0.04) * 2.0 - n.sd_ratio(0.01)).abs() < 1e-12);
        assert!((n.sd_cross(0.01, 300.0) - 300.0 * n.sd_ratio(0.01)).abs() < 1e-12);
        // One wild point moves the median little.
        let mut wild = pts.clone();
        wild[3].y += 0.2;
        let g = fit(&wild).unwrap();
        assert!(Noise::from_fit(&wild, &g).unwrap().eta < 50.0 * n.eta);
    }

    #[test]
    fn near_trains_lengthen_until_the_queue_budget_binds() {
        let f = FluidFit {
            capacity: 300.0,
            cross: 270.0,
            available: 30.0,
            available_se: 3.0,
            n: 5,
            y_min: 1.1,
            y_max: 1.5,
            slope_rel_se: 0.1,
        };
        // η_X = 3.24 (Mb/s)²·s: 270 Mb/s of 1500 B Poisson packets.
        let noise = Noise {
            eta: 3.24 / 300f64.powi(2),
        };
        let lim = Limits {
            min_secs: 0.00125,
            max_secs: 0.16,
            budget_mb: Some(1.0),
            min_excess: 9.0,
            sigmas: NEAR_SIGMAS,
            se_in_budget: true,
        };
        let p = near_train(noise, &f, 30.0, 1.0, lim);
        assert!(
            (p.mbps - 30.0 + f.available_se) * p.secs <= 1.0 + 1e-9,
            "{p:?}"
        );
        assert!(p.secs >= 0.01 && p.secs < 0.08, "{p:?}");
        // A longer train would overflow the budget.
        let longer = p.secs * std::f64::consts::SQRT_2;
        let sd = noise.sd_cross(longer, 300.0).hypot(3.0);
        assert!((9.0 + NEAR_SIGMAS * sd + 3.0) * longer > 1.0);
        // No budget: as long as wanted.
        let p = near_train(
            noise,
            &f,
            30.0,
            0.1,
            Limits {
                budget_mb: None,
                ..lim
            },
        );
        assert!((p.secs - 0.1).abs() < 1e-12);
        // The far train builds the budget in 2.5 ms.
        let q = far_train(&f, 30.0, 600.0, 0.0025, 0.01, 0.7, lim);
        assert!(
            (q.mbps - 430.0).abs() < 1e-9 && (q.secs - 0.0025).abs() < 1e-9,
            "{q:?}"
        );
    }
}
