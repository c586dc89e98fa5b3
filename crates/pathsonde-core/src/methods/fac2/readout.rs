//! What the trains so far say about A: which trains are points of the
//! fluid line, the line through them (or, with a known C, the level), and
//! how sure it is.

use super::capacity;
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
    /// C's relative standard error: the line's slope's, the queue gaps'
    /// (2 %) where they read it, 0 for the user's.  `estimate.rs` reports
    /// no C the trains cannot resolve.
    pub capacity_rel_se: f64,
    /// The line's far trains are too short for the fluid relation
    /// ([`LINE_MIN_PACKETS`]): its C is not reported, whatever its error.
    pub short_line: bool,
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
        .filter(|t| t.role != Role::Lower)
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
        let near_left = next.iter().filter(|(t, _)| t.role == Role::Near).count();
        // A line drawn mostly by far points can put every near train below
        // its A; then it is the line that is off, and nothing is dropped.
        if next.len() == kept.len() || near_left < 2 {
            break;
        }
        kept = next;
    }
    kept
}

/// Near trains that met a burst of cross traffic far beyond the others'
/// scatter, left out of the level.  Each near train reads its own
/// `Aᵢ = Rᵢ − C·(yᵢ − 1)`; scaled by `√Tᵢ` (the cross traffic a train sees
/// scatters as `1/√T`) and compared with their median by the median
/// absolute deviation, a reading more than [`BURST_CUT`] robust standard
/// deviations off is a burst, not the path — one such train at 30 % load
/// on the lab read 150 Mb/s where the others read 200–215.  Censored
/// (carried) trains are never dropped, nor anything below five trains.
fn without_bursts(c_mbps: f64, pts: Vec<(Point, bool)>) -> Vec<(Point, bool)> {
    if pts.len() < 5 {
        return pts;
    }
    let scaled: Vec<f64> = pts
        .iter()
        .map(|(p, _)| p.mbps - c_mbps * (p.y - 1.0))
        .collect();
    let Some(mid) = stats::median(&scaled) else {
        return pts;
    };
    let mean_w = pts.iter().map(|(p, _)| p.w).sum::<f64>() / pts.len() as f64;
    let z: Vec<f64> = pts
        .iter()
        .zip(&scaled)
        .map(|((p, _), a)| (a - mid) * (p.w / mean_w).sqrt())
        .collect();
    let abs: Vec<f64> = z.iter().map(|v| v.abs()).collect();
    let Some(mad) = stats::median(&abs).filter(|m| *m > 0.0) else {
        return pts;
    };
    let sd = 1.4826 * mad;
    pts.into_iter()
        .zip(z)
        .filter(|((_, censored), z)| *censored || z.abs() <= BURST_CUT * sd)
        .map(|(p, _)| p)
        .collect()
}

/// Relative error of the C read from the opening's queue gaps.
const GAP_C_REL_SE: f64 = 0.02;

/// The noise scale from near points' own scatter about their level given C
/// (Mb/s): `η = Var(Aᵢ)·T / C²`, span-weighted.  `None` below three points.
fn near_scatter(c_mbps: f64, pts: &[Point]) -> Option<f64> {
    if pts.len() < 3 {
        return None;
    }
    let (a, _) = fit::given_capacity(c_mbps, pts)?;
    let n = pts.len() as f64;
    let eta = pts
        .iter()
        .map(|p| {
            let e = (p.mbps - c_mbps * (p.y - 1.0) - a) / c_mbps;
            p.w * e * e
        })
        .sum::<f64>()
        / (n - 1.0);
    (eta.is_finite() && eta > 0.0).then_some(eta)
}

/// Fewest packets a far train (one that gives the line's slope its
/// leverage) needs for its dispersion to follow the fluid relation: below
/// this, how many cross packets happen to fall between its few probes
/// decides its rate.  As many gaps as the queue-gap reading of C needs.
const LINE_MIN_PACKETS: usize = capacity::MIN_GAPS + 1;

/// C's relative standard error from a line whose far trains are too short,
/// where no noise scale says better.
const SHORT_LINE_REL_SE: f64 = 0.25;
/// The most a short line's slope error is taken to be.
const MAX_SHORT_LINE_REL_SE: f64 = 0.5;

/// The relative error of C from a line whose far points (the trains that
/// give its slope leverage; near trains sit by A and give none) are, by
/// their median, shorter than [`LINE_MIN_PACKETS`]: one such train's own
/// scatter, `√(η / T)` for its span `T`, capped at
/// [`MAX_SHORT_LINE_REL_SE`] ([`SHORT_LINE_REL_SE`] without a noise
/// scale).  Not divided among the points as noise would be: how many cross
/// packets fall between a train's few probes biases them all alike, and
/// the fit's residuals cannot show it.  With 9000-byte probes the queue
/// budget's 32 KiB is four packets: in the 40 runs of
/// `fac2::tests::short_far_trains_leave_c_unreported_not_wrong` (1 Gb/s,
/// 9000-byte Poisson cross traffic behind a two-frame bucket) such lines put
/// C at 0.66–1.52 times the truth, 20 of them more than 20 % off, while
/// their own fit claimed 1–10 %; A's band, which leans on C, held the truth
/// in 37 of them, and with this error in 39.  Such a line's C is not
/// reported at all (`short_line`), whatever error this gives it: a short
/// line's bias does not show in any error it can compute.
/// `None` when the far trains are long enough.
fn short_line_rel_se(kept: &[(&Train, Point)], eta: Option<f64>) -> Option<f64> {
    let far: Vec<&(&Train, Point)> = kept.iter().filter(|(t, _)| t.role != Role::Near).collect();
    let packets: Vec<f64> = far.iter().map(|(t, _)| t.packets as f64).collect();
    stats::median(&packets).filter(|m| *m < LINE_MIN_PACKETS as f64)?;
    let spans: Vec<f64> = far.iter().map(|(_, p)| p.w).collect();
    let own = match (eta, stats::median(&spans)) {
        (Some(e), Some(t)) if e > 0.0 && t > 0.0 => (e / t).sqrt(),
        _ => SHORT_LINE_REL_SE,
    };
    Some(own.min(MAX_SHORT_LINE_REL_SE))
}

/// The cross traffic's noise scale as the opening's busy-queue gaps read
/// it (`capacity::gap_noise`; the median over openings that were clearly
/// slowed).  Near trains' scatter understates it where they meet an empty
/// queue now and then, and a band drawn from that scatter alone claims more
/// than the trains know: on the lab at 300 Mb/s and 70 % Poisson load both
/// runs of 20 that called themselves converged missed the truth (−9.0 %,
/// +17.2 %; `docs/methods/data/precision-lab-1c09fa5.json`).
fn gap_noise(trains: &[Train]) -> Option<f64> {
    let gaps: Vec<f64> = trains
        .iter()
        .filter(|t| t.class == Class::Above && t.ratio_y().is_some_and(|y| y >= OPENING_BUSY))
        .filter_map(|t| t.gap_noise)
        .collect();
    stats::median(&gaps)
}

/// An opening slowed to this share of its rate or more crossed a queue that
/// stayed busy (it arrived at most two-thirds as fast as it left).
const OPENING_BUSY: f64 = 1.5;

/// Robust standard deviations beyond which a near train met a burst.
const BURST_CUT: f64 = 3.5;

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
        .filter(|t| {
            t.class == Class::Carried && t.role != Role::Near && t.loss <= cfg.max_fit_loss()
        })
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
    let near_censored: Vec<(Point, bool)> = kept
        .iter()
        .filter(|(t, _)| t.role == Role::Near)
        .map(|(t, p)| (*p, t.met_no_queue(cfg.tolerance())))
        .collect();
    let line = fit::fit(&pts);
    let near_censored = match line.as_ref() {
        Some(f) => without_bursts(f.capacity, near_censored),
        None => near_censored,
    };
    let near = near_pts.len();
    let eta = line.as_ref().and_then(|f| fit::noise_scale(&near_pts, f));
    if let Some(c) = cfg.known_capacity.map(|c| c.bps()).filter(|c| *c > 0.0) {
        let (a, se) = fit::given_capacity(c / 1e6, &pts)?;
        let n = pts.len();
        return Some(Readout {
            available: a * 1e6,
            se: se * 1e6,
            half_width: (n >= 3).then(|| stats::t_quantile_975(n - 1) * se * 1e6),
            capacity: c,
            capacity_rel_se: 0.0,
            short_line: false,
            cross: c - a * 1e6,
            eta,
            points: n,
            near,
            set_aside,
        });
    }
    // The line's slope (1/C) comes from all its points, the far ones giving
    // it leverage; its level near A from the near trains alone.  A line
    // through a cluster of near points and a few short, noisy far ones can
    // miss the cluster's own level; each near train read with the line's C,
    // `Aᵢ = Rᵢ − C·(yᵢ − 1)`, does not, and an error in C moves `Aᵢ` only by
    // the train's distance from A times that error.  C itself comes from the
    // opening's queue gaps when they agree (`capacity.rs`); a line that puts
    // A at or below zero is tilted by noise, and its C is not used.
    let sane = line.filter(|f| f.available > 0.0);
    if near >= 2 {
        let gaps: Vec<(f64, crate::units::Bytes)> = trains
            .iter()
            .flat_map(|t| t.queue_gaps.iter().copied())
            .collect();
        let gap = capacity::from_gaps(&gaps, cfg.clock_resolution);
        let gap_c = gap.map(|g| g.capacity / 1e6);
        let c = capacity::reconcile(
            sane.map(|f| (f.capacity, f.slope_rel_se)),
            gap.map(|g| capacity::GapReading {
                capacity: g.capacity / 1e6,
                ..g
            }),
        )?;
        // With the gaps' C the slope's error no longer counts.  With the
        // line's, it is the fit's own, or what the near trains' noise scale
        // says its few far points can resolve, if more; and at least one far
        // train's own scatter when those trains are too short to follow the
        // fluid relation (`short_line_rel_se`).
        let line_c = sane.is_some() && Some(c) != gap_c;
        let slope_rel_se = match sane {
            Some(f) if line_c => eta
                .and_then(|e| fit::slope_rel_se_from_noise(&pts, &f, e))
                .map_or(f.slope_rel_se, |m| m.max(f.slope_rel_se)),
            _ => GAP_C_REL_SE,
        };
        let short = line_c.then(|| short_line_rel_se(&kept, eta)).flatten();
        let slope_rel_se = short.map_or(slope_rel_se, |s| s.max(slope_rel_se));
        // Without a sane line, the noise scale comes from the near trains'
        // own scatter about their level.
        let eta = match (sane, eta) {
            (Some(_), Some(e)) => Some(e),
            _ => near_scatter(c, &near_pts),
        };
        let (mut a, mut se_level) = fit::given_capacity_censored(c, &near_censored, eta)?;
        let mut mean_bias = 0.0;
        if let Some(eta) = eta {
            // Undo the queue's reflection at zero (see `fit::reflection_bias`),
            // judged at the level just read; twice, as the level moves.
            for _ in 0..2 {
                let corrected: Vec<(Point, bool)> = near_censored
                    .iter()
                    .map(|&(p, censored)| {
                        if censored {
                            return (p, censored);
                        }
                        let bias = fit::reflection_bias(c, eta, p.mbps - a, p.w, a);
                        (
                            Point {
                                y: p.y - bias / c,
                                ..p
                            },
                            censored,
                        )
                    })
                    .collect();
                (a, se_level) = fit::given_capacity_censored(c, &corrected, Some(eta))?;
            }
            let w: f64 = near_censored.iter().map(|(p, _)| p.w).sum();
            mean_bias = near_censored
                .iter()
                .filter(|(_, censored)| !censored)
                .map(|(p, _)| p.w * fit::reflection_bias(c, eta, p.mbps - a, p.w, a))
                .sum::<f64>()
                / w;
            // The scatter of a handful of trains (and imputed censored ones)
            // can understate the noise by chance, and near A the queue's
            // emptying hides part of it (`gap_noise`); the noise scale says
            // what the trains' total length supports: C·√(η / ΣT), with η
            // no smaller than the opening's gaps read.  The correction
            // above keeps the near trains' own η: the gaps' carry the
            // receiver's timing noise too, which would over-correct.
            let eta_band = gap_noise(trains).map_or(eta, |g| g.max(eta));
            se_level = se_level.max(c * (eta_band / w).sqrt());
        }
        let w: f64 = near_pts.iter().map(|p| p.w).sum();
        let y_bar = near_pts.iter().map(|p| p.w * p.y).sum::<f64>() / w;
        // The level's own error, the slope's (times the trains' distance
        // from A) and half the reflection correction, which rests on a
        // model of the queue.
        let se = se_level
            .hypot(c * slope_rel_se * (y_bar - 1.0).abs())
            .hypot(0.5 * mean_bias);
        return Some(Readout {
            available: a * 1e6,
            se: se * 1e6,
            half_width: (near >= 3).then(|| stats::t_quantile_975(near - 1) * se * 1e6),
            capacity: c * 1e6,
            capacity_rel_se: slope_rel_se,
            short_line: short.is_some(),
            cross: (c - a) * 1e6,
            eta,
            points: pts.len(),
            near,
            set_aside,
        });
    }
    let f = sane?;
    let short = short_line_rel_se(&kept, eta);
    Some(Readout {
        available: f.available * 1e6,
        se: f.available_se * 1e6,
        half_width: f.half_width().map(|h| h * 1e6),
        capacity: f.capacity * 1e6,
        capacity_rel_se: short.map_or(f.slope_rel_se, |s| s.max(f.slope_rel_se)),
        short_line: short.is_some(),
        cross: f.cross * 1e6,
        eta,
        points: f.n,
        near,
        set_aside,
    })
}
