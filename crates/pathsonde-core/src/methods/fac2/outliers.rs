//! Screening the fit's points for trains that do not belong to the fluid line.
//!
//! One train disturbed by something other than the path — a sender or
//! receiver that stalled for a moment, a burst of cross traffic much longer
//! than its neighbours' — is a point far off the line.  Least squares gives it
//! full say: at zero load a single train arriving 6 % slow turned a 99 Mb/s
//! path into C = 89, X = −12.  Two checks set such a train aside:
//!
//! * **It contradicts the carried trains.**  In the fluid model the receiving
//!   rate grows with the sending rate, so every train clearly above A arrives
//!   faster than every carried train (whose `r ≈ R ≤ A + tolerance·C`).  A
//!   point arriving slower than the fastest carried train, less the slack a
//!   carried train may hide (1.5 × tolerance × C), is impossible on one fluid
//!   FIFO.  If it is the only such point it is set aside — unless the line
//!   through the other points (when there are three or more) finds it within
//!   [`CONTRADICTION_CUT`] standard errors, i.e. cross traffic that varies
//!   this much is normal here.  If several points disagree with the carried
//!   train, the carried train is the odd one (it met a lull in the cross
//!   traffic); the caller leaves such carried trains out of the evidence.
//! * **Its residual is far beyond the others'.**  With at least five points,
//!   each point is compared with the line through the others (seven, for a
//!   point beyond the others' range of rates, such as the opening train at
//!   `max_rate`, judged by an extrapolation): a point more than
//!   [`RESIDUAL_CUT`] standard errors off it (the others' scatter plus the
//!   line's own uncertainty there) *and* more than [`RESIDUAL_FLOOR`] off in
//!   `R / r` is set aside — only the worst one.  The floor keeps noise-free
//!   paths, whose scatter is nearly zero, from shedding points over rounding;
//!   the cut is high because the scatter is judged on few degrees of freedom.

use super::fit::Point;
use crate::stats;

/// Standardised prediction residual beyond which a point is an outlier.
const RESIDUAL_CUT: f64 = 6.0;
/// Standardised residual beyond which a point that contradicts the carried
/// trains is set aside, when the other points are enough to judge scatter by.
const CONTRADICTION_CUT: f64 = 3.0;
/// Relative residual in `R / r` (≈ relative error of the receiving rate)
/// below which no point is an outlier, whatever the others' scatter.
const RESIDUAL_FLOOR: f64 = 0.01;
/// Fewest other points to judge a point beyond their range of rates by.
const EXTRAPOLATED_MIN_OTHERS: usize = 6;
/// A point is no outlier unless its relative residual is also this many times
/// the largest among the others.
const SPREAD_FACTOR: f64 = 4.0;
/// Fewest points for the residual check (the line through the other four
/// then has two degrees of freedom to judge scatter on).
const RESIDUAL_MIN_POINTS: usize = 5;

/// Why a point was set aside.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Reason {
    /// It arrived slower than a carried train (Mb/s of that carried train).
    SlowerThanCarried { carried_mbps: f64 },
    /// Its residual, in standard errors, against the line through the others.
    Residual { z: f64 },
}

/// What the screen kept and set aside.
#[derive(Debug, Clone, Default)]
pub(crate) struct Screen {
    pub kept: Vec<Point>,
    /// Indices into the screened slice, with the reason.
    pub set_aside: Vec<(usize, Reason)>,
}

/// What the trains outside the fit say about A.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Evidence {
    /// Fastest receiving rate (Mb/s) of a clean carried train that at most
    /// one of the points contradicts.
    pub carried_mbps: Option<f64>,
    /// A stand-in for C (Mb/s), for the slack: the fastest receiving rate of
    /// any train, or the fit's C if larger.
    pub capacity_floor: f64,
    pub tolerance: f64,
}

/// Screens the fit's points (see the module docs).
pub(crate) fn screen(points: &[Point], ev: Evidence) -> Screen {
    let mut aside: Vec<(usize, Reason)> = Vec::new();
    if let Some(carried) = ev.carried_mbps {
        let c = super::fit::fit(points)
            .map_or(0.0, |f| f.capacity)
            .max(ev.capacity_floor)
            .max(carried);
        let bar = carried - 1.5 * ev.tolerance * c;
        let slow: Vec<(usize, f64)> = points
            .iter()
            .enumerate()
            .map(|(i, p)| (i, p.mbps / p.y))
            .filter(|&(_, r)| r < bar)
            .filter(|&(i, _)| {
                let all: Vec<usize> = (0..points.len()).collect();
                loo_residual(points, &all, i).map_or(true, |z| z > CONTRADICTION_CUT)
            })
            .collect();
        if let [(i, _)] = slow[..] {
            aside.push((
                i,
                Reason::SlowerThanCarried {
                    carried_mbps: carried,
                },
            ));
        }
    }
    let remaining: Vec<usize> = (0..points.len())
        .filter(|i| !aside.iter().any(|(j, _)| j == i))
        .collect();
    if let Some((i, z)) = worst_residual(points, &remaining) {
        aside.push((i, Reason::Residual { z }));
    }
    aside.sort_by_key(|&(i, _)| i);
    let kept = (0..points.len())
        .filter(|i| !aside.iter().any(|(j, _)| j == i))
        .map(|i| points[i])
        .collect();
    Screen {
        kept,
        set_aside: aside,
    }
}

/// The point among `idx` whose leave-one-out residual is largest, if it is
/// beyond both [`RESIDUAL_CUT`] and [`RESIDUAL_FLOOR`].
fn worst_residual(points: &[Point], idx: &[usize]) -> Option<(usize, f64)> {
    if idx.len() < RESIDUAL_MIN_POINTS {
        return None;
    }
    idx.iter()
        .filter_map(|&i| loo_residual(points, idx, i).map(|z| (i, z)))
        .filter(|&(_, z)| z > RESIDUAL_CUT)
        .max_by(|a, b| a.1.total_cmp(&b.1))
}

/// How far point `i` lies off the line through the other points of `idx`, in
/// standard errors (the others' scatter at its weight plus the line's own
/// error at its rate); 0 within [`RESIDUAL_FLOOR`], `None` with fewer than
/// three other points (no scatter to judge by).
fn loo_residual(points: &[Point], idx: &[usize], i: usize) -> Option<f64> {
    let others: Vec<(f64, f64, f64)> = idx
        .iter()
        .filter(|&&j| j != i)
        .map(|&j| (points[j].mbps, points[j].y, points[j].w))
        .collect();
    if others.len() < 3 {
        return None;
    }
    let p = points[i];
    // A point beyond the others' rates (the opening train at max_rate, say)
    // is judged against an extrapolation of their line, whose error a few
    // degrees of freedom do not pin down: it takes more of them.
    let (lo, hi) = others
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), o| {
            (l.min(o.0), h.max(o.0))
        });
    if (p.mbps < lo || p.mbps > hi) && others.len() < EXTRAPOLATED_MIN_OTHERS {
        return None;
    }
    let f = stats::weighted_linear_fit(&others)?;
    let e = p.y - f.predict(p.mbps);
    // Not an outlier within the floor, nor within a few times the others'
    // largest relative residual (whatever their weights say).
    let others_worst = others
        .iter()
        .map(|o| ((o.1 - f.predict(o.0)) / o.1).abs())
        .fold(0.0, f64::max);
    if e.abs() <= p.y * RESIDUAL_FLOOR.max(SPREAD_FACTOR * others_worst) {
        return Some(0.0);
    }
    // Unit-weight variance of the others, with the weights normalised to sum
    // to their count as `weighted_linear_fit` does.
    let n = others.len() as f64;
    let sw: f64 = others.iter().map(|o| o.2).sum();
    let k = n / sw;
    let rss: f64 = others
        .iter()
        .map(|o| k * o.2 * (o.1 - f.predict(o.0)).powi(2))
        .sum();
    let s2 = rss / (n - 2.0);
    let line_var =
        f.intercept_se.powi(2) + p.mbps * p.mbps * f.slope_se.powi(2) + 2.0 * p.mbps * f.covariance;
    let var = s2 / (k * p.w.max(1e-12)) + line_var.max(0.0);
    Some(if var > 0.0 {
        e.abs() / var.sqrt()
    } else {
        f64::INFINITY
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn on_line(c: f64, x: f64, r: f64) -> Point {
        Point {
            mbps: r,
            y: (r + x) / c,
            w: 0.01,
        }
    }

    fn ev(carried: Option<f64>) -> Evidence {
        Evidence {
            carried_mbps: carried,
            capacity_floor: 0.0,
            tolerance: 0.01,
        }
    }

    #[test]
    fn a_train_slower_than_a_carried_one_is_set_aside() {
        // Zero load, C = 100: the train at 173 Mb/s arrived at 94.
        let mut pts = vec![on_line(100.0, 0.0, 300.0), on_line(100.0, 0.0, 173.0)];
        pts[1].y = 173.0 / 94.0;
        pts.push(on_line(100.0, 0.0, 106.0));
        let s = screen(&pts, ev(Some(100.0)));
        assert_eq!(s.kept.len(), 2);
        assert!(matches!(
            s.set_aside[..],
            [(1, Reason::SlowerThanCarried { .. })]
        ));
        // Without the carried train nothing says it is wrong (three points).
        assert!(screen(&pts, ev(None)).set_aside.is_empty());
    }

    #[test]
    fn when_several_points_disagree_with_the_carried_train_none_is_set_aside() {
        let pts: Vec<Point> = [300.0, 150.0, 120.0]
            .iter()
            .map(|&r| on_line(100.0, 30.0, r))
            .collect();
        // A "carried" train at 95 Mb/s on a 70 Mb/s path: it is the odd one.
        assert!(screen(&pts, ev(Some(95.0))).set_aside.is_empty());
    }

    #[test]
    fn a_far_residual_is_set_aside_but_noise_is_not() {
        let mut pts: Vec<Point> = [300.0, 90.0, 80.0, 85.0, 100.0, 75.0]
            .iter()
            .map(|&r| on_line(100.0, 30.0, r))
            .collect();
        // Small scatter everywhere.
        for (k, p) in pts.iter_mut().enumerate() {
            p.y *= 1.0 + 0.001 * ((k % 3) as f64 - 1.0);
        }
        assert!(screen(&pts, ev(None)).set_aside.is_empty());
        pts[3].y *= 1.06;
        let s = screen(&pts, ev(None));
        assert!(
            matches!(s.set_aside[..], [(3, Reason::Residual { .. })]),
            "{:?}",
            s.set_aside
        );
        assert_eq!(s.kept.len(), 5);
    }

    #[test]
    fn exact_points_lose_nothing() {
        let pts: Vec<Point> = [1000.0, 400.0, 200.0, 150.0, 130.0]
            .iter()
            .map(|&r| on_line(100.0, 60.0, r))
            .collect();
        assert!(screen(&pts, ev(Some(40.0))).set_aside.is_empty());
    }
}
