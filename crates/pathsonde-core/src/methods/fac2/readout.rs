//! What the trains so far say about A: which trains are points of the
//! fluid line, the line through them (or, with a known C, the level), and
//! how sure it is.

use super::config::Fac2Config;
use super::fit::{self, Point};
use super::outliers::{self, Evidence, Reason};
use super::train::{Class, Role, Train};
use crate::stats;

/// A, its uncertainty and what else the line gives, in b/s.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Readout {
    pub available: f64,
    /// Standard error of A; 0 when two points fix the line exactly.
    pub se: f64,
    /// 95 % half-width on A; `None` when the points cannot judge their own
    /// scatter (two points, or one with a known C).
    pub half_width: Option<f64>,
    /// C: the fitted one, or the user's.
    pub capacity: f64,
    pub cross: f64,
    /// The noise scale `η = Var(R/r)·T` (see `fit::noise_scale`).
    pub eta: Option<f64>,
    pub points: usize,
    /// Near trains among the points.
    pub near: usize,
    /// Points set aside by the outlier screen: (train index, why).
    pub set_aside: Vec<(u32, Reason)>,
}

/// The trains that may be points: measured, little lost, and either
/// clearly slowed or a near train.  A near train counts whatever its ratio —
/// it was planned clear of A, so its ratio is noise about the line, and
/// keeping only those that happened to arrive slow would bias the line low —
/// unless it went out below the line's own A (an early line put it there),
/// where `R / r` is 1 and not on the line.  Which side it went on is judged
/// by its sending rate, which does not bias the line.
fn candidates<'a>(trains: &'a [Train], cfg: &Fac2Config) -> Vec<(&'a Train, Point)> {
    let all: Vec<(&Train, Point)> = trains
        .iter()
        .filter(|t| t.loss <= cfg.max_fit_loss() && t.recv_span > 0.0)
        .filter(|t| t.class == Class::Above || (t.role == Role::Near && t.class != Class::Unusable))
        .filter_map(|t| {
            Some((
                t,
                Point {
                    mbps: t.sent_bps / 1e6,
                    y: t.ratio_y()?,
                    w: t.recv_span.max(1e-6),
                },
            ))
        })
        .collect();
    let mut kept = all.clone();
    for _ in 0..2 {
        let pts: Vec<Point> = kept.iter().map(|c| c.1).collect();
        let Some(f) = fit::fit(&pts) else { break };
        let next: Vec<_> = all
            .iter()
            .filter(|(t, p)| t.role != Role::Near || p.mbps > f.available)
            .cloned()
            .collect();
        if next.len() == kept.len() {
            break;
        }
        kept = next;
    }
    kept
}

/// Reads A from `trains`; `None` until the line can be drawn.
pub(crate) fn read(trains: &[Train], cfg: &Fac2Config) -> Option<Readout> {
    let cand = candidates(trains, cfg);
    let pts: Vec<Point> = cand.iter().map(|c| c.1).collect();
    let fastest = trains
        .iter()
        .filter(|t| t.class != Class::Unusable)
        .filter_map(|t| t.recv_bps)
        .fold(0.0, f64::max);
    let carried = trains
        .iter()
        .filter(|t| t.class == Class::Carried && t.role != Role::Near && t.loss <= cfg.max_fit_loss())
        .filter_map(|t| t.recv_bps)
        .reduce(f64::max);
    let screen = outliers::screen(
        &pts,
        Evidence {
            carried_mbps: carried.map(|c| c / 1e6),
            capacity_floor: fit::fit(&pts).map_or(fastest, |f| fastest.max(f.capacity * 1e6)) / 1e6,
            tolerance: cfg.tolerance(),
        },
    );
    let set_aside: Vec<(u32, Reason)> = screen
        .set_aside
        .iter()
        .map(|&(k, why)| (cand[k].0.index, why))
        .collect();
    let kept: Vec<(&Train, Point)> = cand
        .iter()
        .enumerate()
        .filter(|(k, _)| !screen.set_aside.iter().any(|(j, _)| j == k))
        .map(|(_, c)| *c)
        .collect();
    let pts = screen.kept;
    let near_pts: Vec<Point> = kept
        .iter()
        .filter(|(t, _)| t.role == Role::Near)
        .map(|c| c.1)
        .collect();
    let near = near_pts.len();
    let line = fit::fit(&pts);
    let eta = line.as_ref().and_then(|f| fit::noise_scale(&near_pts, f));
    if let Some(c) = cfg.known_capacity.map(|c| c.bps()).filter(|c| *c > 0.0) {
        let (a, se) = fit::given_capacity(c / 1e6, &pts)?;
        let n = pts.len();
        return Some(Readout {
            available: a * 1e6,
            se: se * 1e6,
            half_width: (n >= 3).then(|| stats::t_quantile_975(n - 1) * se * 1e6),
            capacity: c,
            cross: c - a * 1e6,
            eta,
            points: n,
            near,
            set_aside,
        });
    }
    let f = line?;
    // The line's slope (1/C) comes from all its points, the far ones giving
    // it leverage; its level near A from the near trains alone.  A line
    // through a cluster of near points and a few short, noisy far ones can
    // miss the cluster's own level; each near train read with the line's C,
    // `Aᵢ = Rᵢ − C·(yᵢ − 1)`, does not, and an error in C moves `Aᵢ` only by
    // the train's distance from A times that error.
    if near >= 2 {
        let c = f.capacity;
        let (a, se_level) = fit::given_capacity(c, &near_pts)?;
        let w: f64 = near_pts.iter().map(|p| p.w).sum();
        let y_bar = near_pts.iter().map(|p| p.w * p.y).sum::<f64>() / w;
        let se = se_level.hypot(c * f.slope_rel_se * (y_bar - 1.0).abs());
        return Some(Readout {
            available: a * 1e6,
            se: se * 1e6,
            half_width: (near >= 3).then(|| stats::t_quantile_975(near - 1) * se * 1e6),
            capacity: c * 1e6,
            cross: (c - a) * 1e6,
            eta,
            points: f.n,
            near,
            set_aside,
        });
    }
    Some(Readout {
        available: f.available * 1e6,
        se: f.available_se * 1e6,
        half_width: f.half_width().map(|h| h * 1e6),
        capacity: f.capacity * 1e6,
        cross: f.cross * 1e6,
        eta,
        points: f.n,
        near,
        set_aside,
    })
}
