//! FAC² — feedback adaptive control, feedback asymptotic convergence
//! (Jin & Tierney, netest), as a sans-IO [`Method`].
//!
//! FAC² sends constant-rate trains of cars and compares the rate each train
//! arrived at with the rate it was sent at.  Below the available bandwidth A a
//! train arrives as fast as it left; above A the tight link's queue grows and
//! the train arrives at `r = R·C / (R + X)`, between A and R.  Feeding `r` back
//! as the next sending rate converges on A from above (the *asymptotic
//! convergence*), but slowly on a busy path: the error shrinks each train by a
//! factor of about the utilisation `X / C`.  This implementation therefore
//! also fits the straight line `R / r = R / C + X / C` through the trains sent
//! clearly above A, which yields C, X and A after two trains, and uses the fit
//! to place the remaining trains: a few more above A to pin the line down
//! (spread), and one at the fitted A to check it (verify).  See
//! `docs/methods/fac2.md` for the derivation, the stopping rule and the
//! meaning of the bounds.

mod config;
mod fit;
mod noise;
mod outliers;
mod queue;

pub use config::Fac2Config;

use crate::dispersion;
use crate::estimate::{Coalescing, Estimate, ProbeCost, RateSpread, TrainRecord};
use crate::method::Method;
use crate::observation::Observation;
use crate::plan::{ProbePlan, TrainSpec};
use crate::stats;
use crate::units::{BitRate, Bytes, DurationNs, TimeNs};
use fit::{FluidFit, Point};
use noise::{Limits, Noise, Planned};
use outliers::{Evidence, Reason};
use queue::{Overflow, QueueBudget};

/// Why a train was sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    /// The first train, at `max_rate`.
    Start,
    /// Classic FAC² feedback: the previous train's receiving rate.
    Feedback,
    /// Above the fitted A, to add a well-spread point to the fit.
    Spread,
    /// At the fitted A, to check it.
    Verify,
    /// Just clear of A, as long as the measured noise and the queue budget
    /// call for, to average the cross traffic (see `noise.rs`).
    Near,
    /// After a train that could not be measured.
    Retry,
    /// Between a rate that was carried and one that was lost.
    Bracket,
}

impl Role {
    fn describe(self) -> &'static str {
        match self {
            Role::Start => "opening",
            Role::Feedback => "feedback",
            Role::Spread => "spread",
            Role::Verify => "verify",
            Role::Near => "near",
            Role::Retry => "retry",
            Role::Bracket => "bracket",
        }
    }
}

/// What a train showed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    /// Arrived slower than it left (ratio below `1 − tolerance`): sent above A.
    Above,
    /// Arrived (nearly) as fast as it left.
    Carried,
    /// Too little arrived, or the stamps made no sense.
    Unusable,
}

#[derive(Debug, Clone)]
struct Train {
    record: TrainRecord,
    role: Role,
    class: Class,
    /// Achieved sending rate (b/s); the requested rate stands in when the send
    /// stamps could not give one.
    sent_bps: f64,
    recv_bps: Option<f64>,
    /// Receive-side span of the rate fit, seconds.
    recv_span: f64,
    /// How long the train lasted at its sending rate, seconds.
    secs: f64,
    loss: f64,
    /// A near train planned with `long_near_trains` at high load: it stays
    /// in the fit up to [`LONG_NEAR_MAX_LOSS`].
    long: bool,
    /// First and last send stamps (the sender's clock).
    send_window: Option<(TimeNs, TimeNs)>,
    /// Receive gaps between consecutive packets of one car (seconds, size of
    /// the later packet); empty when the receiver bunches arrivals.
    gaps: Vec<(f64, Bytes)>,
}

/// Why FAC² stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fac2Stop {
    /// The stopping rule was met: a train at the fitted A was carried and the
    /// fit was stable and tight.
    Converged,
    /// The first train, at `max_rate` (or as fast as the host could send),
    /// was carried: only `A ≥` that rate is known.
    LowerBound,
    /// `max_trains` trains (on a noisy path, the probe-time budget or
    /// `noisy_max_trains`) were spent without meeting the stopping rule.
    MaxTrains,
    /// `max_failed_trains` consecutive trains delivered too little to measure.
    NoMeasurement,
}

/// Target receive/send ratios for spread trains, in the order used.  Points
/// at ratios 0.9 and 0.95 sit just above A at any load, where the line is
/// read; the others add spread if the fit needs more points.
const SPREAD_RATIOS: [f64; 7] = [0.9, 0.95, 0.8, 0.93, 0.85, 0.75, 0.7];

/// Idle time asked for before a train, so that the previous train's queue
/// drains: at most this long (seconds) ...
const MAX_IDLE: f64 = 0.15;
/// ... and this much longer than the queue takes to drain at A.
const DRAIN_MARGIN: f64 = 1.25;

/// The spread ratio nearest 1: the train above A that builds the least queue.
const NEAREST_RATIO: f64 = 0.95;

/// Trains are never shortened below this fraction of `train_duration`.
const MIN_DURATION_SCALE: f64 = 0.125;

/// Trains are lengthened to at most this multiple of `train_duration`.
const MAX_DURATION_SCALE: f64 = 16.0;

/// A fit point with `R / r` at least this is far enough from A to pin the
/// slope of the line.
const FAR_RATIO: f64 = 1.5;

/// The probe-time budget applies while the fit's band is more than this
/// multiple of `max_relative_band`: a band a little too wide at the train
/// cap is reported as it is, a loose one buys more train time.
const NOISY_BAND: f64 = 1.5;

/// Below this share of C for A (above 75 % load), queues left by trains
/// above A drain slowly enough to disturb the next train.
const HIGH_LOAD_SHARE: f64 = 0.25;

/// At high load with `long_near_trains`: the least queue budget (bits),
/// 128 KB (half the lab's 256 KB queue; safe because the opening train at
/// `max_rate` overflowed, so the path holds at least the queue it built) ...
const MIN_QUEUE_BUDGET: f64 = 128.0 * 1024.0 * 8.0;
/// ... near trains placed this many standard deviations of the combined
/// noise (cross traffic at their length and the fit's error on A) above A ...
const LONG_NEAR_SIGMAS: f64 = 1.0;
/// ... and such a train stays in the fit with up to this share lost.
const LONG_NEAR_MAX_LOSS: f64 = 0.2;
/// ... near trains long enough that the cross traffic they meet scatters by
/// at most this share of A ...
const NEAR_NOISE_SHARE: f64 = 0.25;
/// ... and no longer than this (seconds).
const MAX_NEAR_SECS: f64 = 0.2;

/// Intra-car gaps: C is read at this quantile of the gaps (shortest first) ...
const GAP_QUANTILE: f64 = 0.25;
/// ... from at least this many gaps.
const MIN_GAPS: usize = 40;
/// Trains sent at least this multiple of A count as clearly above A for the
/// per-train cross-traffic estimate.
const CLEAR_ABOVE: f64 = 1.5;

/// A sending rate below 95 % of the requested one is worth a note.
const SHORTFALL: f64 = 0.95;

/// FAC² as a [`Method`].  Create with [`Fac2::new`], then drive it with
/// `next_plan` / `observe` until `next_plan` returns [`ProbePlan::Done`].
#[derive(Debug, Clone)]
pub struct Fac2 {
    cfg: Fac2Config,
    trains: Vec<Train>,
    /// The plan handed out and not yet observed, and why it was sent.
    pending: Option<(TrainSpec, Role)>,
    /// The next rate (b/s) and role, decided after the last observation.
    next: (f64, Role),
    stop: Option<Fac2Stop>,
    notes: Vec<String>,
    failed_in_a_row: u32,
    /// Multiplies the train duration after trains too short to measure.
    duration_scale: f64,
    /// The duration scale chosen for the next train from the measured noise,
    /// if any (overrides `duration_scale`).
    planned_scale: Option<f64>,
    noise_noted: bool,
    spreads: usize,
    /// The coarsest clock resolution known (configured or observed).
    resolution: DurationNs,
    cost: ProbeCost,
    first_send: Option<TimeNs>,
    last_send: Option<TimeNs>,
    bunching_noted: bool,
    /// ICIM coalescing detection: gaps and tiny gaps pooled over all trains,
    /// and the detector's reading of each train that showed coalescing.
    coalescing_gaps: (u64, u64),
    coalesced_trains: Vec<Coalescing>,
    shortfall_noted: bool,
    fast_arrival_noted: bool,
    stand_in_noted: bool,
    lengthen_noted: bool,
    queue_noted: bool,
    budget_noted: bool,
    /// What overflowing trains say about the path's queue.
    queue: QueueBudget,
    /// The A (b/s) the next train is planned around: the fit's, kept within
    /// the trains' bracket, or the fastest carried rate without a fit.
    a_ref: Option<f64>,
    host_limited: Option<String>,
}

impl Fac2 {
    pub fn new(cfg: Fac2Config) -> Self {
        let start = cfg.max_rate_bps();
        let resolution = DurationNs::from_ns(cfg.clock_resolution.ns().max(1));
        Fac2 {
            cfg,
            trains: Vec::new(),
            pending: None,
            next: (start, Role::Start),
            stop: None,
            notes: Vec::new(),
            failed_in_a_row: 0,
            duration_scale: 1.0,
            planned_scale: None,
            noise_noted: false,
            spreads: 0,
            resolution,
            cost: ProbeCost::default(),
            first_send: None,
            last_send: None,
            bunching_noted: false,
            coalescing_gaps: (0, 0),
            coalesced_trains: Vec::new(),
            shortfall_noted: false,
            fast_arrival_noted: false,
            stand_in_noted: false,
            lengthen_noted: false,
            queue_noted: false,
            budget_noted: false,
            queue: QueueBudget::default(),
            a_ref: None,
            host_limited: None,
        }
    }

    pub fn config(&self) -> &Fac2Config {
        &self.cfg
    }

    /// Why FAC² stopped, once it has.
    pub fn stop_reason(&self) -> Option<Fac2Stop> {
        self.stop
    }

    fn tol(&self) -> f64 {
        self.cfg.tolerance()
    }

    fn finish(&mut self, why: Fac2Stop) {
        if self.stop.is_none() {
            self.stop = Some(why);
        }
    }

    /// Points of the fluid line: trains clearly above A (ratio below
    /// `1 − fit_margin`) that lost little, less those the outlier screen sets
    /// aside (returned with the index of their train).
    /// With `exclude_latest` the most recent such train is left out (to see
    /// how much it moved the fit).
    fn screened_points(&self, exclude_latest: bool) -> (Vec<Point>, Vec<(usize, Reason)>) {
        let mut cand = self.candidates();
        if exclude_latest {
            cand.pop();
        }
        let pts: Vec<Point> = cand.iter().map(|c| c.1).collect();
        let s = outliers::screen(&pts, self.evidence());
        let aside = s
            .set_aside
            .into_iter()
            .map(|(k, why)| (cand[k].0, why))
            .collect();
        (s.kept, aside)
    }

    /// The trains that may be points of the fit, with their index.
    ///
    /// A near train enters whatever its ratio (see [`Fac2::in_fit`]) but
    /// only if it was sent above A: one planned from an early, wrong fit may
    /// have gone below A, where `R/r` is 1 and not on the line.  Which side
    /// it was sent on is judged by its *sending* rate against the line
    /// through the other points and the near trains (selecting on the rate,
    /// unlike selecting on the ratio, does not bias the line).
    fn candidates(&self) -> Vec<(usize, Point)> {
        let all: Vec<(usize, Point, bool)> = self
            .trains
            .iter()
            .enumerate()
            .filter(|(_, t)| self.in_fit(t) || self.censored_near(t))
            .filter_map(|(i, t)| {
                let r = t.recv_bps?;
                let p = Point {
                    mbps: t.sent_bps / 1e6,
                    y: t.sent_bps / r,
                    w: t.recv_span.max(1e-6),
                };
                Some((i, p, t.role == Role::Near))
            })
            .collect();
        let mut kept = all.clone();
        for _ in 0..2 {
            let pts: Vec<Point> = kept.iter().map(|c| c.1).collect();
            let Some(f) = fit::fit(&pts) else { break };
            let floor = f.available + self.tol() * f.capacity.max(0.0);
            // At high load the queue a train leaves drains only at A (a full
            // 256 KB queue takes 70 ms at 30 Mb/s), so a train sent below A
            // soon after one above it starts on a standing queue and arrives
            // slowed: every point must have been sent above the line's A.
            let high_load = f.available < HIGH_LOAD_SHARE * f.capacity;
            let next: Vec<_> = all
                .iter()
                .copied()
                .filter(|(_, p, near)| (!near && !high_load) || p.mbps > floor)
                .collect();
            if next.len() == kept.len() {
                break;
            }
            kept = next;
        }
        kept.into_iter().map(|(i, p, _)| (i, p)).collect()
    }

    fn fit_points(&self, exclude_latest: bool) -> Vec<Point> {
        self.screened_points(exclude_latest).0
    }

    /// What the trains outside the fit say, for the outlier screen.
    fn evidence(&self) -> Evidence {
        Evidence {
            carried_mbps: self.carried_max_recv().map(|c| c / 1e6),
            capacity_floor: self.capacity_proxy() / 1e6,
            tolerance: self.tol(),
        }
    }

    /// A stand-in for C (b/s) where only its scale matters: the fastest
    /// receiving rate of any train, or the unscreened fit's C if larger.
    fn capacity_proxy(&self) -> f64 {
        let fastest = self
            .trains
            .iter()
            .filter(|t| t.class != Class::Unusable)
            .filter_map(|t| t.recv_bps)
            .fold(0.0, f64::max);
        let pts: Vec<Point> = self.candidates().into_iter().map(|c| c.1).collect();
        fit::fit(&pts).map_or(fastest, |f| fastest.max(f.capacity * 1e6))
    }

    /// The fit (or, failing it, the gap-based C and the fastest carried
    /// rate) puts A below `HIGH_LOAD_SHARE` of C.
    fn high_load(&self) -> bool {
        if let Some(f) = self.fluid_fit(false) {
            return f.available < HIGH_LOAD_SHARE * f.capacity;
        }
        false
    }

    /// C (b/s) from the intra-car receive gaps of every train (see
    /// `dispersion::capacity_from_gaps`), or `None` when there are too few
    /// gaps or the receiver bunches arrivals.
    fn gap_capacity(&self) -> Option<f64> {
        let gaps: Vec<(f64, Bytes)> = self
            .trains
            .iter()
            .flat_map(|t| t.gaps.iter().copied())
            .collect();
        let tiny = self.resolution.max(DurationNs::from_ns(100));
        dispersion::capacity_from_gaps(&gaps, tiny, GAP_QUANTILE, MIN_GAPS).map(|c| c.bps())
    }

    /// A at high load from each clean train's own cross traffic given C:
    /// `X_i = C·R_i/r_i − R_i` for trains sent clearly above A (the queue
    /// busy throughout), averaged by receive span.  Returns (A, SE(A), n) in
    /// b/s.
    fn per_train_available(&self, c: f64, aside: &[(usize, Reason)]) -> Option<(f64, f64, usize)> {
        let clean: Vec<(f64, f64, f64)> = self
            .trains
            .iter()
            .enumerate()
            .filter(|(i, t)| {
                t.class == Class::Above
                    && t.loss <= self.cfg.max_fit_loss()
                    && !aside.iter().any(|(j, _)| j == i)
                    && t.sent_bps.is_finite()
                    && t.recv_span > 0.0
            })
            .filter_map(|(_, t)| {
                let r = t.recv_bps?;
                let x = c * t.sent_bps / r - t.sent_bps;
                x.is_finite().then_some((t.sent_bps, x, t.recv_span))
            })
            .collect();
        let mean = |pts: &[&(f64, f64, f64)]| -> Option<(f64, f64, usize)> {
            let w: f64 = pts.iter().map(|p| p.2).sum();
            if pts.len() < 2 || w <= 0.0 {
                return None;
            }
            let m = pts.iter().map(|p| p.1 * p.2).sum::<f64>() / w;
            let var = pts.iter().map(|p| p.2 * (p.1 - m).powi(2)).sum::<f64>() / w
                * pts.len() as f64
                / (pts.len() - 1) as f64;
            Some((m, (var / pts.len() as f64).sqrt(), pts.len()))
        };
        let all: Vec<&(f64, f64, f64)> = clean.iter().collect();
        let (x0, _, _) = mean(&all)?;
        let a0 = c - x0;
        for k in [CLEAR_ABOVE, 1.2] {
            let far: Vec<&(f64, f64, f64)> = clean.iter().filter(|p| p.0 >= k * a0).collect();
            if far.len() >= 3 {
                let (x, se, n) = mean(&far)?;
                return Some((c - x, se, n));
            }
        }
        None
    }

    /// Clean carried trains that the fit's candidate points do not
    /// contradict.  On one fluid FIFO every train clearly above A arrives
    /// faster than every carried train (less the slack a carried train may
    /// hide, 1.5 × tolerance × C).  One point that arrived slower is the odd
    /// one (the outlier screen sets it aside); a carried train that two or
    /// more points arrived slower than met a lull in the cross traffic, not
    /// room on the path, and is not used to bound A.
    fn consistent_carried(&self) -> impl Iterator<Item = &Train> {
        let slow: Vec<f64> = self
            .candidates()
            .iter()
            .map(|(_, p)| p.mbps * 1e6 / p.y)
            .collect();
        let slack = 1.5 * self.tol() * self.capacity_proxy();
        let max_loss = self.cfg.max_fit_loss();
        self.trains.iter().filter(move |t| {
            t.class == Class::Carried
                && t.loss <= max_loss
                && t.recv_bps
                    .is_some_and(|r| slow.iter().filter(|&&s| s < r - slack).count() <= 1)
        })
    }

    /// Duration (seconds) of the consistent carried train that arrived
    /// fastest.
    fn carried_max_secs(&self) -> Option<f64> {
        self.consistent_carried()
            .filter(|t| t.recv_bps.is_some())
            .max_by(|a, b| {
                a.recv_bps
                    .unwrap_or(0.0)
                    .total_cmp(&b.recv_bps.unwrap_or(0.0))
            })
            .map(|t| t.secs)
    }

    /// Fastest receiving rate among consistent carried trains (b/s).
    fn carried_max_recv(&self) -> Option<f64> {
        self.consistent_carried()
            .filter_map(|t| t.recv_bps)
            .reduce(f64::max)
    }

    /// The duration scale for a train at `rate`: the configured lengthening,
    /// cut so that a train above A builds at most the queue budget.
    fn scale_for(&self, rate: f64, role: Role) -> f64 {
        if role == Role::Start {
            return self.duration_scale;
        }
        match self.queue_scale(rate) {
            // Once the queue is sized, it (not the halving after an early
            // overflow, made when it was not) limits the train.
            Some(q) => self
                .planned_scale
                .unwrap_or(self.duration_scale.max(1.0))
                .min(q)
                .max(MIN_DURATION_SCALE),
            None => self.planned_scale.unwrap_or(self.duration_scale),
        }
    }

    /// Whether the measured noise, rather than the spread ratios and a
    /// doubling of the duration, places the next train: the fit is not tight
    /// with two points more than the stopping rule needs (and one more for
    /// every point set aside), and the spread phase is done.
    fn noise_rules(&self, f: &FluidFit) -> bool {
        let aside = self.screened_points(false).1.len();
        f.n > self.cfg.min_fit_points.max(3) as usize + 1 + aside
            && !self.needs_spread(f)
            && !self.fit_is_tight(f)
    }

    /// The scatter of the fit's points, once there are enough of them to
    /// judge it (see `noise.rs`).
    fn noise(&self, f: &FluidFit) -> Option<Noise> {
        Noise::from_fit(&self.fit_points(false), f)
    }

    /// `k` standard deviations of the cross rate (b/s) a train lasting
    /// `secs` meets, by the measured noise; 0 when it is not known.
    /// (Only once the noise places the trains; before, the trains' bracket
    /// stands as it is.)
    fn noise_slack(&self, f: Option<&FluidFit>, secs: f64, k: f64) -> f64 {
        f.filter(|f| self.noise_rules(f))
            .and_then(|f| {
                self.noise(f)
                    .map(|n| k * n.sd_cross(secs, f.capacity) * 1e6)
            })
            .unwrap_or(0.0)
    }

    /// The next train when the fit's points scatter: a far train if the
    /// slope limits A, else a near train as long as the noise calls for and
    /// the queue budget allows.
    fn plan_for_noise(&mut self, f: &FluidFit, noise: Noise, a_hat: f64) -> (f64, Role) {
        let base = self.cfg.train_duration.secs_f64().max(1e-6);
        let a = a_hat / 1e6;
        let long = self.long_near();
        let lim = Limits {
            min_secs: base,
            max_secs: if long {
                MAX_NEAR_SECS.max(base)
            } else {
                base * MAX_DURATION_SCALE
            },
            budget_mb: self
                .floored_budget_bits(a_hat)
                .or_else(|| self.queue.budget_bits(a_hat))
                .map(|b| b / 1e6),
            // Clear of the fit margin on average, so that a near train is
            // seldom one that only just looks slowed.
            min_excess: self.tol() * f.capacity.max(a),
            sigmas: if long {
                LONG_NEAR_SIGMAS
            } else {
                noise::NEAR_SIGMAS
            },
            se_in_budget: !long,
        };
        let span: f64 = self.fit_points(false).iter().map(|p| p.w).sum();
        let used = self.trains.len() as u32 + 1;
        let left = self.cfg.max_trains.max(used).saturating_sub(used).max(1);
        let target_se = self.cfg.max_relative_band() * a / 2.0;
        let mut wanted = noise::wanted_secs(f, span, target_se, left);
        if self.trains.len() as u32 + 1 >= self.cfg.max_trains {
            // Past the train count, on the probe-time budget: as long as the
            // time left and the queue allow.
            wanted = wanted.min(self.train_time_left().max(base));
        }
        if long {
            // Long enough that the cross traffic a train meets scatters by
            // at most NEAR_NOISE_SHARE of A: σ_X(T) = C·√(η/T).
            let sd = NEAR_NOISE_SHARE * a;
            let t_noise = if sd > 0.0 {
                noise.eta * (f.capacity / sd).powi(2)
            } else {
                MAX_NEAR_SECS
            };
            wanted = wanted
                .max(t_noise.min(MAX_NEAR_SECS))
                .min(self.train_time_left().max(base));
        }
        let near = noise::near_train(noise, f, a, wanted, lim);
        let far_last = self.trains.last().is_some_and(|t| t.role == Role::Spread);
        let plan = if !far_last && noise::slope_dominates(f, near.mbps - a) {
            let max = self.cfg.max_rate_bps() / 1e6;
            let rho = SPREAD_RATIOS[SPREAD_RATIOS.len() - 1];
            (
                noise::far_train(f, a, max, base / 4.0, base, rho, lim),
                Role::Spread,
            )
        } else {
            (near, Role::Near)
        };
        let (Planned { mbps, secs }, role) = plan;
        self.planned_scale = Some(secs / base);
        if !self.noise_noted {
            self.noise_noted = true;
            self.notes.push(format!(
                "after train {}: the fit's points scatter like cross traffic of ±{} over a 10 ms train; trains lengthened to average it, sized from that noise (near A, as long as the queue allows; short fast ones for the slope)",
                self.trains.len().saturating_sub(1),
                BitRate::from_mbps(noise.sd_cross(0.01, f.capacity))
            ));
        }
        (self.cfg.clamp_rate(mbps * 1e6), role)
    }

    /// How long the path should stay idle before the next train so that the
    /// queue the last train left drains at A: a train above A leaves about
    /// `(R − A)·T` (a lossy one, a full queue), which empties in that over
    /// A.  Without it a train at 90 % load starts on up to a full queue
    /// (70 ms of drain at 30 Mb/s on 256 KB) and arrives slowed even below
    /// A, and an overflow reads the queue too small.  With a margin for the
    /// cross traffic's own noise, at most `MAX_IDLE`.
    fn drain_time(&self) -> DurationNs {
        if !self.cfg.drain_idle {
            return DurationNs::ZERO;
        }
        let Some(last) = self.trains.last() else {
            return DurationNs::ZERO;
        };
        if last.class != Class::Above {
            return DurationNs::ZERO;
        }
        // Only at high load: below it a queue drains within the runner's own
        // gap (a full 256 KB queue in 7 ms at 270 Mb/s), and idling would only
        // cost time.
        let high_load = self
            .fluid_fit(false)
            .is_some_and(|f| f.available > 0.0 && f.available < HIGH_LOAD_SHARE * f.capacity);
        if !high_load {
            return DurationNs::ZERO;
        }
        let recv = last.recv_bps.unwrap_or(f64::INFINITY);
        let a = self.a_ref.unwrap_or(recv).min(recv);
        if !(a.is_finite() && a > 0.0) {
            return DurationNs::ZERO;
        }
        let built = (last.sent_bps - a).max(0.0) * last.secs;
        let full = self.queue.queue_bits(a);
        let left = if last.loss > self.cfg.max_fit_loss() {
            full.unwrap_or(((1.0 - last.loss) * last.sent_bps - a).max(0.0) * last.secs)
        } else {
            full.map_or(built, |q| built.min(q))
        };
        let secs = (DRAIN_MARGIN * left / a).clamp(0.0, MAX_IDLE);
        DurationNs::from_secs_f64(secs)
    }

    /// The largest duration scale the queue budget allows at `rate`, if any
    /// limits it.
    fn queue_scale(&self, rate: f64) -> Option<f64> {
        let a = self.a_ref?;
        let excess = rate - a;
        let secs = match self.floored_budget_bits(a) {
            Some(b) if excess > 0.0 => b / excess,
            _ => self.queue.max_secs(rate, a)?,
        };
        let base = self.cfg.train_duration.secs_f64();
        (base > 0.0).then(|| secs / base)
    }

    /// Whether near trains are sized for the noise with a floored queue
    /// budget (`long_near_trains`, at high load).
    /// The gate takes the fit with and without the latest train: both must
    /// put A below `HIGH_LOAD_SHARE` of C, so that one noisy train at 70 %
    /// load does not switch it on.
    fn long_near(&self) -> bool {
        self.cfg.long_near_trains
            && self.high_load()
            && self
                .fluid_fit(true)
                .is_some_and(|f| f.available < HIGH_LOAD_SHARE * f.capacity)
    }

    /// At high load with `long_near_trains`, the queue budget (bits) a train
    /// above A may build: half the queue the overflows tell, but never less
    /// than the largest queue a train built without loss, `(R − A)·T`, nor
    /// [`MIN_QUEUE_BUDGET`].  `None` otherwise (the plain budget applies).
    fn floored_budget_bits(&self, a_bps: f64) -> Option<f64> {
        if !(self.long_near() && a_bps.is_finite() && a_bps > 0.0) {
            return None;
        }
        let lossless = self
            .trains
            .iter()
            .filter(|t| t.class == Class::Above && t.loss <= self.cfg.max_fit_loss())
            .map(|t| (t.sent_bps - a_bps).max(0.0) * t.secs)
            .fold(0.0, f64::max);
        let floor = lossless.max(MIN_QUEUE_BUDGET);
        Some(
            self.queue
                .budget_bits(a_bps)
                .map_or(floor, |b| b.max(floor)),
        )
    }

    fn fluid_fit(&self, exclude_latest: bool) -> Option<FluidFit> {
        fit::fit(&self.fit_points(exclude_latest))
    }

    /// Highest sending rate among consistent carried trains (b/s).
    fn carried_max_sent(&self) -> Option<f64> {
        self.consistent_carried()
            .map(|t| t.sent_bps)
            .reduce(f64::max)
    }

    /// Lowest sending rate among trains sent above A (b/s).
    fn above_min_sent(&self) -> Option<f64> {
        self.trains
            .iter()
            .filter(|t| t.class == Class::Above)
            .map(|t| t.sent_bps)
            .reduce(f64::min)
    }

    /// The fit needs another point above A: too few points, none near A
    /// (ratio ≥ 0.8, so A is interpolated rather than extrapolated), or all
    /// at nearly the same ratio (less than 0.05 apart in `R / r`, or less
    /// than half what `max_rate` allows when it is close to A).
    fn needs_spread(&self, f: &FluidFit) -> bool {
        // R / r runs from 1 + 2·margin·A/C (the lowest rate a spread train
        // uses) to (max_rate + X)/C; ask for half of that reach, at most 0.05.
        let margin = 1.0 - self.cfg.fit_ratio();
        let reach =
            (self.cfg.max_rate_bps() / 1e6 - f.available * (1.0 + 2.0 * margin)) / f.capacity;
        let want = (0.5 * reach).clamp(0.0, 0.05);
        f.n < 3 || f.y_min > 1.25 || f.y_max - f.y_min < want
    }

    /// The fit's 95 % half-width on A is at most `max_relative_band` of A.
    fn fit_is_tight(&self, f: &FluidFit) -> bool {
        f.half_width()
            .is_some_and(|hw| hw <= self.cfg.max_relative_band() * f.available)
    }

    /// The fit part of the stopping rule: at least `min_fit_points`; the latest
    /// point moved A by at most `stability`; the fit is tight.
    /// Each point the outlier screen set aside raises the count by one:
    /// setting aside the farthest point narrows the band, and a path that
    /// produced one such point is not to be trusted on the fewest points.
    fn fit_is_settled(&self, f: &FluidFit) -> bool {
        let aside = self.screened_points(false).1.len();
        if f.n < self.cfg.min_fit_points.max(3) as usize + aside
            || f.available.is_nan()
            || f.available <= 0.0
        {
            return false;
        }
        let stable = self.fluid_fit(true).is_some_and(|p| {
            (f.available - p.available).abs() <= self.cfg.stability() * f.available
        });
        stable && self.fit_is_tight(f)
    }

    /// Reads one observation into a [`Train`].
    fn measure(&mut self, obs: &Observation, target: BitRate, role: Role) -> Train {
        let tol = self.tol();
        let uniq = dispersion::unique_packets(obs);
        let packets = uniq.len() as u64;
        let received = uniq.iter().filter(|p| p.received.is_some()).count() as u64;
        let bytes: Bytes = uniq.iter().map(|p| p.size).sum();
        let loss = if packets == 0 {
            1.0
        } else {
            (packets - received) as f64 / packets as f64
        };
        self.cost.bytes += bytes;
        self.cost.packets = self.cost.packets.saturating_add(packets);
        self.cost.trains = self.cost.trains.saturating_add(1);
        let send_window = uniq
            .iter()
            .map(|p| (p.sent, p.sent))
            .reduce(|a, b| (a.0.min(b.0), a.1.max(b.1)));
        for p in &uniq {
            self.first_send = Some(self.first_send.map_or(p.sent, |f| f.min(p.sent)));
            self.last_send = Some(self.last_send.map_or(p.sent, |l| l.max(p.sent)));
        }

        let sent = dispersion::sending_rate(obs).map(|f| f.rate.bps());
        let recv_fit = dispersion::receiving_rate(obs);
        let recv = recv_fit.map(|f| f.rate.bps());
        let recv_span = recv_fit.map_or(0.0, |f| f.span.secs_f64());
        let sent_bps = match sent {
            Some(s) => s,
            None => {
                let asked = obs.spec.rate.bps();
                if packets > 1 && asked.is_finite() && asked > 0.0 {
                    if !self.stand_in_noted {
                        self.stand_in_noted = true;
                        self.notes.push(format!(
                            "train {}: the send stamps gave no rate; the requested rate stands in for the sending rate",
                            obs.train
                        ));
                    }
                    asked
                } else {
                    f64::NAN
                }
            }
        };
        let target_bps = target.bps();
        if sent.is_some()
            && target_bps.is_finite()
            && sent_bps < SHORTFALL * target_bps
            && !self.shortfall_noted
        {
            self.shortfall_noted = true;
            self.notes.push(format!(
                "train {}: the sender achieved only {} of the requested {} (host or NIC limits pacing)",
                obs.train,
                BitRate::from_bps(sent_bps),
                target
            ));
        }

        // Arrival bunching.  A gap is "tiny" below a quarter of one packet's
        // wire time at the fastest rate this train could have reached, capped
        // at 1 µs (ICIM's threshold), and at least the receive clock's step.
        let fastest = [self.cfg.max_rate_bps(), sent_bps, recv.unwrap_or(0.0)]
            .into_iter()
            .filter(|v| v.is_finite())
            .fold(1.0, f64::max);
        let wire = self.cfg.packet_bytes().bits() as f64 / fastest;
        let tiny = DurationNs::from_secs_f64((wire / 4.0).min(1e-6))
            .max(obs.recv_clock.resolution)
            .max(DurationNs::from_ns(1));
        // ICIM's detector (gaps below 1 µs) runs on every train; either it
        // or the rate-aware test above switches this train to car/bunch-level
        // timing: no per-packet gaps (capacity from intra-car gaps) and no
        // per-car rates, only the least-squares slope over all cars, and the
        // following trains last at least 80 bunch periods.
        let coalescing = dispersion::coalescing(obs);
        if let Some(c) = coalescing {
            self.coalescing_gaps.0 += c.gaps;
            self.coalescing_gaps.1 += (c.share_tiny_gaps * c.gaps as f64).round() as u64;
            if c.detected {
                self.coalesced_trains.push(c);
                if let Some(p) = c.bunch_period {
                    // Trains span many bunches (Fac2Config::train_for); a
                    // period far above a NIC's coalescing delay (tens to a
                    // few hundred µs) is cars arriving apart, not an
                    // interrupt, so cap it at 250 µs.
                    let p = p.min(DurationNs::from_us(250));
                    if p > self.cfg.receiver_bunching {
                        self.cfg.receiver_bunching = p;
                    }
                }
            }
        }
        let detected = coalescing.is_some_and(|c| c.detected);
        let bunched = dispersion::bunching(obs, tiny).is_bunched() || detected;
        if bunched && !self.bunching_noted {
            self.bunching_noted = true;
            let what = match coalescing.filter(|c| c.detected) {
                Some(c) => format!(
                    "interrupt coalescing detected: {:.0} % of gaps below 1 µs, bunches every {} of about {:.1} packets",
                    c.share_tiny_gaps * 100.0,
                    c.bunch_period.unwrap_or(DurationNs::ZERO),
                    c.packets_per_bunch.unwrap_or(0.0)
                ),
                None => "interrupt coalescing or a coarse clock suspected".to_string(),
            };
            self.notes.push(format!(
                "train {}: the receiver bunches arrivals ({what}): switching to car/bunch-level timing — per-car rates are unreliable and are not reported, intra-car gaps are not used; the train rate, a slope over all cars, is used",
                obs.train
            ));
        }
        let car_rate_spread = if bunched {
            None
        } else {
            let rates: Vec<f64> = dispersion::car_rates(obs).iter().map(|r| r.bps()).collect();
            stats::summary(&rates).map(|s| RateSpread {
                min: BitRate::from_bps(s.min),
                median: BitRate::from_bps(s.median),
                max: BitRate::from_bps(s.max),
            })
        };

        let ratio = recv.map(|r| r / sent_bps);
        let class = match ratio {
            Some(q) if q.is_finite() && q > 0.0 => {
                if q >= 1.0 - tol {
                    Class::Carried
                } else {
                    Class::Above
                }
            }
            _ => Class::Unusable,
        };
        if ratio.is_some_and(|q| q > 1.05) && !self.fast_arrival_noted {
            self.fast_arrival_noted = true;
            self.notes.push(format!(
                "train {}: it arrived faster than it was sent ({:.1} %): the send stamps may not reflect when packets reached the wire",
                obs.train,
                (ratio.unwrap_or(1.0) - 1.0) * 100.0
            ));
        }

        Train {
            record: TrainRecord {
                train: obs.train,
                target_rate: target,
                sending_rate: BitRate::from_bps(if sent_bps.is_finite() { sent_bps } else { 0.0 }),
                receiving_rate: recv.map(BitRate::from_bps),
                car_rate_spread,
                packets,
                bytes,
                loss_fraction: loss,
                reading: None,
            },
            role,
            class,
            sent_bps,
            recv_bps: recv,
            recv_span,
            secs: if sent_bps.is_finite() && sent_bps > 0.0 {
                bytes.bits() as f64 / sent_bps
            } else {
                0.0
            },
            loss,
            long: false,
            send_window,
            gaps: if bunched {
                Vec::new()
            } else {
                dispersion::intra_car_gaps(obs)
            },
        }
    }

    /// Decides what to do after the latest train.
    fn decide(&mut self) {
        let tol = self.tol();
        let Some(last) = self.trains.last().cloned() else {
            return;
        };
        if last.class == Class::Unusable {
            self.failed_in_a_row += 1;
            let target = last.record.target_rate.bps();
            if self.failed_in_a_row >= self.cfg.max_failed_trains.max(1) {
                self.notes.push(format!(
                    "stopped after {} consecutive trains that delivered too little to measure",
                    self.failed_in_a_row
                ));
                self.finish(Fac2Stop::NoMeasurement);
            } else if last.loss >= 0.5 {
                let lower = self.cfg.clamp_rate(target / 2.0);
                self.notes.push(format!(
                    "train {}: {:.0} % lost, nothing measurable arrived; rate lowered to {}",
                    last.record.train,
                    last.loss * 100.0,
                    BitRate::from_bps(lower)
                ));
                self.next = (lower, Role::Retry);
            } else {
                self.duration_scale = (self.duration_scale * 2.0).min(16.0);
                self.notes.push(format!(
                    "train {}: its stamps gave no rate; retrying with a train {}× as long",
                    last.record.train, self.duration_scale
                ));
                self.next = (self.cfg.clamp_rate(target), Role::Retry);
            }
            self.check_train_limit();
            return;
        }
        self.failed_in_a_row = 0;
        self.planned_scale = None;

        if !self.trains.iter().any(|t| t.class == Class::Above) {
            self.all_carried_so_far();
            self.check_train_limit();
            return;
        }

        // A train above A that lost packets overflowed the path's queue.
        let lossy_now = last.class == Class::Above && last.loss > self.cfg.max_fit_loss();
        if lossy_now {
            let n = self.trains.len();
            let prev = (n >= 2).then(|| &self.trains[n - 2]);
            let after_overflow =
                prev.is_some_and(|p| p.class == Class::Above && p.loss > self.cfg.max_fit_loss());
            // What the previous train may have left in the queue: its rate
            // and length, and the idle time before this one.
            let before = prev.filter(|p| p.class == Class::Above).and_then(|p| {
                let (_, end) = p.send_window?;
                let (start, _) = last.send_window?;
                Some((p.sent_bps, p.secs, start.since(end).secs_f64().max(0.0)))
            });
            self.queue.record(Overflow {
                sent_bps: last.sent_bps,
                secs: last.secs,
                loss: last.loss,
                after_overflow,
                before,
            });
        }

        let lo = self.carried_max_sent();
        let hi = self.above_min_sent().unwrap_or(f64::INFINITY);
        // A line that puts A at or below zero (noisy points can) cannot
        // place trains: fall back to feedback until more points arrive.
        let fit = self.fluid_fit(false).filter(|f| f.available > 0.0);
        self.queue.set_capacity(fit.map(|f| f.capacity * 1e6));
        self.a_ref = match fit {
            Some(f) => {
                // The trains bracket A only up to the noise one train meets.
                let slack = self.noise_slack(Some(&f), self.cfg.train_duration.secs_f64(), 2.0);
                let raw = f.available * 1e6;
                let floor = lo.map_or(self.cfg.min_rate_bps(), |l| l - slack);
                let hi = hi + slack;
                Some(if floor <= hi {
                    raw.clamp(floor, hi)
                } else {
                    raw
                })
            }
            None => lo,
        };
        if lossy_now {
            self.note_overflow(&last);
        }
        let pts = self.fit_points(false);
        match fit {
            None if pts.len() >= 3 && pts.iter().all(|p| p.y < FAR_RATIO) => {
                // Points enough, but their line is unusable (A ≤ 0):
                // noisy points close together tilt the slope.  A short, fast
                // train — as fast as the queue budget allows — pins it.
                let slowest = pts
                    .iter()
                    .map(|p| p.mbps * 1e6 / p.y)
                    .fold(f64::INFINITY, f64::min);
                let a_low = 0.5 * slowest;
                let base = self.cfg.train_duration.secs_f64();
                let rate = match self.queue.budget_bits(a_low) {
                    Some(b) => a_low + b / (base / 4.0),
                    None => 2.0 * slowest,
                };
                self.planned_scale = Some(0.25);
                self.next = (self.cfg.clamp_rate(rate), Role::Spread);
            }
            None => {
                let cand = if last.class == Class::Above
                    && (self.in_fit(&last) || last.loss > self.cfg.max_fit_loss())
                {
                    // Classic FAC² feedback: send at the last receiving rate.
                    // (A lossy train's rate tends to A, which is fine here.)
                    last.recv_bps.unwrap_or(last.sent_bps)
                } else {
                    self.between_carried_and_slowed()
                };
                let cand = match lo {
                    // Never re-send at a rate already seen to pass.
                    Some(lo) if cand <= lo * (1.0 + tol) => self.between_carried_and_slowed(),
                    _ => cand,
                };
                self.next = (self.cfg.clamp_rate(cand), Role::Feedback);
            }
            Some(f) => {
                let a_hat = self.a_ref.unwrap_or(f.available * 1e6);
                let settled = self.fit_is_settled(&f);
                let noise = self.noise(&f);
                if last.role == Role::Verify && self.verified(&last, noise) && settled {
                    self.finish(Fac2Stop::Converged);
                    return;
                }
                if settled && !self.needs_spread(&f) && last.role != Role::Verify {
                    self.next = (self.cfg.clamp_rate(a_hat), Role::Verify);
                } else if let Some(n) = noise.filter(|_| self.noise_rules(&f)) {
                    self.next = self.plan_for_noise(&f, n, a_hat);
                } else {
                    if f.n >= 4
                        && !self.fit_is_tight(&f)
                        && self.duration_scale < MAX_DURATION_SCALE
                        && !lossy_now
                        && self.queue_allows_longer(&f, a_hat)
                    {
                        // The points scatter more than the band allows:
                        // cross traffic (or the receiver) is noisy on the
                        // scale of one train.  Longer trains average it.
                        self.duration_scale *= 2.0;
                        if !self.lengthen_noted {
                            self.lengthen_noted = true;
                            self.notes.push(format!(
                                "after train {}: the fit's points scatter (cross traffic varies from train to train); trains lengthened to average it",
                                last.record.train
                            ));
                        }
                    }
                    let r = self.spread_rate(&f, a_hat);
                    self.next = (r, Role::Spread);
                }
            }
        }
        self.check_train_limit();
    }

    /// A verification train passed: it was carried, or under measured noise
    /// its ratio fell short of `1 − tolerance` by less than two standard
    /// deviations of the ratio at its length.
    fn verified(&self, t: &Train, noise: Option<Noise>) -> bool {
        let slack = noise.map_or(0.0, |n| 2.0 * n.sd_ratio(t.secs));
        t.class == Class::Carried
            || t.recv_bps
                .is_some_and(|r| r / t.sent_bps >= 1.0 - self.tol() - slack)
    }

    /// After a train above A that overflowed the queue: without an A to size
    /// the queue by, halve the train duration; otherwise the queue budget
    /// shortens later trains, which is worth one note.
    fn note_overflow(&mut self, last: &Train) {
        let budget = self
            .a_ref
            .and_then(|a| self.queue.queue_bits(a).map(|q| (a, q)));
        match budget {
            None if last.role != Role::Start && self.duration_scale > MIN_DURATION_SCALE => {
                self.duration_scale = (self.duration_scale / 2.0).max(MIN_DURATION_SCALE);
                self.notes.push(format!(
                    "train {}: lost {:.1} % while above A (a short queue on the path); trains shortened to {:.0} % of the configured duration",
                    last.record.train,
                    last.loss * 100.0,
                    self.duration_scale * 100.0
                ));
            }
            Some((a, q)) if !self.queue_noted && last.role != Role::Start => {
                self.queue_noted = true;
                self.notes.push(format!(
                    "train {}: lost {:.1} % while above A: the path's queue holds about {:.0} KB (with A ≈ {}); later trains above A build at most half of it, by going nearer A or being cut short",
                    last.record.train,
                    last.loss * 100.0,
                    q / 8e3,
                    BitRate::from_bps(a)
                ));
            }
            _ => {}
        }
    }

    /// Lengthening helps only if the queue lets a train near A (at the
    /// spread ratio nearest 1) last longer than trains do now.
    fn queue_allows_longer(&self, f: &FluidFit, a_hat: f64) -> bool {
        let margin = 1.0 - self.cfg.fit_ratio();
        let near = self
            .cfg
            .clamp_rate((f.rate_for_ratio(NEAREST_RATIO) * 1e6).max(a_hat * (1.0 + 2.0 * margin)));
        self.queue_scale(near)
            .map_or(true, |q| q >= 2.0 * self.duration_scale)
    }

    /// Whether a train is a point of the fluid fit: sent clearly above A
    /// (its ratio below the fit margin), or a near train that was slowed at
    /// all (below `1 − tolerance`).  A near train was planned clear of A for
    /// the noise it meets, so its ratio is noise around a point of the line;
    /// keeping only those that happened to arrive below the fit margin would
    /// bias the line toward lower A.  A near train that was carried is
    /// evidence that A is above its rate (the fit was off), not a point.
    fn in_fit(&self, t: &Train) -> bool {
        let clear = t
            .recv_bps
            .is_some_and(|r| r / t.sent_bps < self.cfg.fit_ratio());
        (clear || t.role == Role::Near)
            && t.class == Class::Above
            && t.recv_bps.is_some()
            && t.loss <= self.fit_loss_limit(t)
    }

    /// The most loss a train may have and stay in the fit: `max_fit_loss`,
    /// or [`LONG_NEAR_MAX_LOSS`] for a long near train at high load.  A
    /// drop-tail queue that overflows drops probe and cross packets alike,
    /// so the probe still gets `C·R/(R + X)` of the link and its `R/r` stays
    /// on the line; leaving the lossy ones out keeps only the trains that
    /// met less cross traffic and pushes A up.
    fn fit_loss_limit(&self, t: &Train) -> f64 {
        if t.long {
            LONG_NEAR_MAX_LOSS.max(self.cfg.max_fit_loss())
        } else {
            self.cfg.max_fit_loss()
        }
    }

    /// A near train that was carried: planned above A, it met a lull in the
    /// cross traffic (its own A was above its rate).  Its ratio is the
    /// line's, censored at 1 (the queue cannot drain faster than it fills);
    /// keeping it at its measured ratio biases the line by a small fraction
    /// of the noise, leaving it out (keeping only the trains that met more
    /// cross traffic) by much more.  Like every near train it counts only if
    /// sent above the line's A (see [`Fac2::candidates`]).
    fn censored_near(&self, t: &Train) -> bool {
        t.role == Role::Near
            && t.class == Class::Carried
            && t.recv_bps.is_some()
            && t.loss <= self.cfg.max_fit_loss()
    }

    /// A rate between the fastest train that passed (or was only marginally
    /// slowed) and the slowest train that gave a fit point: their geometric
    /// mean, and at least a clear margin above the former, so that the next
    /// train lands clearly above A without a dropping queue.
    fn between_carried_and_slowed(&self) -> f64 {
        let margin = 1.0 - self.cfg.fit_ratio();
        let base = self
            .trains
            .iter()
            .filter(|t| {
                t.class != Class::Unusable && !self.in_fit(t) && t.loss <= self.cfg.max_fit_loss()
            })
            .map(|t| t.sent_bps)
            .reduce(f64::max)
            .unwrap_or(self.cfg.min_rate_bps());
        let upper = self
            .trains
            .iter()
            .filter(|t| t.class == Class::Above && t.sent_bps > base * (1.0 + margin))
            .map(|t| t.sent_bps)
            .reduce(f64::min)
            .unwrap_or(self.cfg.max_rate_bps());
        (base * upper).sqrt().max(base * (1.0 + 2.0 * margin))
    }

    /// The next spread train's rate: the rate the fit says gives the next
    /// target ratio, kept clearly above A, skipping targets that would repeat
    /// an existing point's rate (which happens when `max_rate` clamps them).
    fn spread_rate(&mut self, f: &FluidFit, a_hat: f64) -> f64 {
        let margin = 1.0 - self.cfg.fit_ratio();
        let existing: Vec<f64> = self
            .trains
            .iter()
            .filter(|t| self.in_fit(t))
            .map(|t| t.sent_bps)
            .collect();
        let rate_at = |rho: f64| {
            self.cfg
                .clamp_rate((f.rate_for_ratio(rho) * 1e6).max(a_hat * (1.0 + 2.0 * margin)))
        };
        let n = SPREAD_RATIOS.len();
        // Prefer a ratio whose train the queue budget lets last as long as
        // the others; failing that, any new one; failing that, the next.
        let options: Vec<(f64, bool)> = (0..n)
            .map(|i| {
                let r = rate_at(SPREAD_RATIOS[(self.spreads + i) % n]);
                let fits = self
                    .queue_scale(r)
                    .map_or(true, |q| q >= self.duration_scale);
                (r, fits)
            })
            .collect();
        for need_fit in [true, false] {
            for (i, &(r, fits)) in options.iter().enumerate() {
                if (fits || !need_fit) && !existing.iter().any(|&e| (e - r).abs() <= 0.02 * r) {
                    self.spreads += i + 1;
                    return r;
                }
            }
        }
        let r = rate_at(SPREAD_RATIOS[self.spreads % n]);
        self.spreads += 1;
        r
    }

    /// No train has yet been slowed by the path.
    fn all_carried_so_far(&mut self) {
        let tol = self.tol();
        let max = self.cfg.max_rate_bps();
        let Some(best) = self
            .trains
            .iter()
            .filter(|t| t.class == Class::Carried)
            .max_by(|a, b| a.sent_bps.total_cmp(&b.sent_bps))
            .cloned()
        else {
            return;
        };
        let asked_max = best.record.target_rate.bps() >= max * (1.0 - tol);
        if asked_max || best.sent_bps >= max * (1.0 - tol) {
            let got = BitRate::from_bps(best.recv_bps.unwrap_or(best.sent_bps));
            let msg = if best.sent_bps < SHORTFALL * max {
                format!(
                    "the sender reached only {} of the requested {} and the path carried all of it: A ≥ {}; the sending host, not the path, bounds this result",
                    BitRate::from_bps(best.sent_bps),
                    BitRate::from_bps(max),
                    got
                )
            } else {
                format!(
                    "the path carried everything sent at the maximum probe rate {}: A ≥ {}; raise --max-rate, or the host cannot send faster",
                    BitRate::from_bps(max),
                    got
                )
            };
            self.host_limited = Some(msg);
            self.finish(Fac2Stop::LowerBound);
        } else {
            // Carried below max_rate after failed trains higher up: probe
            // between what passed and what failed.
            let upper = self
                .trains
                .iter()
                .filter(|t| {
                    t.class == Class::Unusable && t.record.target_rate.bps() > best.sent_bps
                })
                .map(|t| t.record.target_rate.bps())
                .reduce(f64::min)
                .unwrap_or(max);
            self.next = (
                self.cfg.clamp_rate((best.sent_bps + upper) / 2.0),
                Role::Bracket,
            );
        }
    }

    fn check_train_limit(&mut self) {
        if self.stop.is_some() {
            return;
        }
        let n = self.trains.len() as u64;
        if n < u64::from(self.cfg.max_trains.max(1)) {
            return;
        }
        let hard = u64::from(self.cfg.noisy_max_trains.max(self.cfg.max_trains).max(1));
        if n < hard && self.noisy() && self.train_time_left() > 0.0 {
            if !self.budget_noted {
                self.budget_noted = true;
                self.notes.push(format!(
                    "the path is noisy at the trains' time scale: FAC² runs on a probe-time budget ({:.1} s of trains, at most {} trains) instead of stopping at {} trains",
                    self.cfg.noisy_train_time.secs_f64(),
                    hard,
                    self.cfg.max_trains
                ));
            }
            return;
        }
        self.finish(Fac2Stop::MaxTrains);
    }

    /// The fit's points scatter like cross traffic and its band is not yet
    /// tight (or they scatter so much that their line is unusable): more
    /// train time, not more of the same, is what the estimate needs.
    fn noisy(&self) -> bool {
        match self.fluid_fit(false).filter(|f| f.available > 0.0) {
            Some(f) => {
                self.noise(&f).is_some()
                    && f.half_width().map_or(true, |hw| {
                        hw > NOISY_BAND * self.cfg.max_relative_band() * f.available
                    })
            }
            None => self.fit_points(false).len() >= 3,
        }
    }

    /// Time at their sending rate the trains so far lasted (seconds).
    fn train_time(&self) -> f64 {
        self.trains.iter().map(|t| t.secs).sum()
    }

    /// What is left of the noisy path's probe-time budget (seconds).
    fn train_time_left(&self) -> f64 {
        self.cfg.noisy_train_time.secs_f64() - self.train_time()
    }

    /// Relative precision floor of any rate here: two clock steps over the
    /// shortest receive span among the fit's trains (never below 1e-6).
    fn precision_floor(&self) -> f64 {
        let span = self
            .trains
            .iter()
            .filter(|t| t.recv_span > 0.0 && t.class != Class::Unusable)
            .map(|t| t.recv_span)
            .fold(f64::INFINITY, f64::min);
        if span.is_finite() {
            (2.0 * self.resolution.secs_f64() / span).max(1e-6)
        } else {
            1e-6
        }
    }
}

impl Method for Fac2 {
    fn name(&self) -> &'static str {
        "fac2"
    }

    /// The next train, or `Done`.  Calling it again before `observe` hands out
    /// the same train (a runner may retry a plan it failed to send).
    fn next_plan(&mut self) -> ProbePlan {
        if self.stop.is_some() {
            return ProbePlan::Done;
        }
        if let Some((spec, _)) = self.pending {
            return ProbePlan::Train(spec);
        }
        let (rate, role) = self.next;
        let mut spec = self.cfg.train_for(
            BitRate::from_bps(rate),
            self.resolution,
            self.scale_for(rate, role),
        );
        spec.idle_before = self.drain_time();
        if self.cfg.gap_capacity && spec.packets_per_car < 2 && self.high_load() {
            // Intra-car gaps read C (see `gap_capacity`): at high load every
            // car gets two packets, at the same rate and duration.
            spec.packets_per_car = 2;
            spec.cars = spec.cars.div_ceil(2).max(self.cfg.min_cars.max(2));
        }
        self.pending = Some((spec, role));
        ProbePlan::Train(spec)
    }

    /// Reads one executed train.  Observations arriving after FAC² has
    /// stopped are ignored; one arriving without a plan handed out is taken
    /// as a train at its spec's rate.
    fn observe(&mut self, obs: &Observation) {
        if self.stop.is_some() {
            return;
        }
        let (target, role) = match self.pending.take() {
            Some((spec, role)) => (spec.rate, role),
            None if self.trains.is_empty() => (obs.spec.rate, Role::Start),
            None => (obs.spec.rate, Role::Retry),
        };
        let coarsest = obs
            .send_clock
            .resolution
            .max(obs.recv_clock.resolution)
            .min(DurationNs::from_ms(100));
        self.resolution = self.resolution.max(coarsest);
        let long = role == Role::Near && self.long_near();
        let mut train = self.measure(obs, target, role);
        train.long = long;
        self.trains.push(train);
        self.decide();
    }

    /// What FAC² noticed along the way; also in [`Estimate::notes`].
    fn notes(&self) -> Vec<String> {
        self.notes.clone()
    }

    fn estimate(&self) -> Option<Estimate> {
        if !self
            .trains
            .iter()
            .any(|t| t.class != Class::Unusable && t.recv_bps.is_some())
        {
            return None;
        }
        let tol = self.tol();
        let mut notes = self.notes.clone();
        let lo_all = self
            .trains
            .iter()
            .filter(|t| t.class == Class::Carried)
            .filter_map(|t| t.recv_bps)
            .reduce(f64::max);
        // Carried trains that the slowed ones contradict are left out (a
        // lull in the cross traffic), unless there is nothing else.
        let lo_r = self.carried_max_recv();
        // What a dropping queue lets through depends on how it drops and on
        // how the cross traffic reacts, not on the fluid relation, so only
        // trains that lost little bound A from above — and not those the
        // outlier screen set aside.
        let (kept, aside) = self.screened_points(false);
        // The slowest receiving rate among the fit's own points: each is a
        // train clearly slowed, so A lies below it.
        let hi_fit_point = kept
            .iter()
            .copied()
            .min_by(|a, b| (a.mbps / a.y).total_cmp(&(b.mbps / b.y)));
        let hi_fit = hi_fit_point.map(|p| p.mbps * 1e6 / p.y);
        for &(i, why) in &aside {
            let t = &self.trains[i];
            let r = BitRate::from_bps(t.recv_bps.unwrap_or(0.0));
            let what = match why {
                Reason::SlowerThanCarried { carried_mbps } => format!(
                    "slower than a carried train ({}), which one fluid FIFO cannot do",
                    BitRate::from_mbps(carried_mbps)
                ),
                Reason::Residual { z } => {
                    format!("{z:.0} standard errors off the line through the other points")
                }
            };
            notes.push(format!(
                "train {} (sent at {}) arrived at {}, {what}: set aside as an outlier (a host or cross-traffic hiccup) and kept out of the fit",
                t.record.train,
                BitRate::from_bps(t.sent_bps),
                r
            ));
        }
        let hi_r = self
            .trains
            .iter()
            .enumerate()
            .filter(|(i, t)| {
                t.class == Class::Above
                    && t.loss <= self.cfg.max_fit_loss()
                    && !aside.iter().any(|(j, _)| j == i)
            })
            .filter_map(|(_, t)| t.recv_bps)
            .reduce(f64::min);
        let floor = self.precision_floor();
        let fit = self.fluid_fit(false);
        let lossy = self
            .trains
            .iter()
            .filter(|t| t.class == Class::Above && t.loss > self.cfg.max_fit_loss())
            .count();
        if lossy > 0 {
            notes.push(format!(
                "{lossy} train(s) sent above A lost more than {:.1} % and were kept out of the fit (a dropping queue breaks the fluid relation)",
                self.cfg.max_fit_loss() * 100.0
            ));
        }

        let (available, low, high, capacity, cross) = if self.stop == Some(Fac2Stop::LowerBound) {
            let best = self
                .trains
                .iter()
                .filter(|t| t.class == Class::Carried)
                .max_by(|a, b| a.sent_bps.total_cmp(&b.sent_bps))?;
            let r = best.recv_bps?;
            notes.push(format!(
                "lower bound: A ≥ {}; the path carried the fastest train, so nothing bounds A from above",
                BitRate::from_bps(r)
            ));
            (r, r * (1.0 - tol), None, None, None)
        } else if let Some(f) = fit {
            let mut c = f.capacity;
            let mut x = f.cross;
            let mut a = f.available;
            if x < 0.0 {
                // The crossing of R/r = 1 is read among the points nearest A;
                // C = 1/slope is an extrapolation, so A is kept and C set to it.
                notes.push(format!(
                    "the fit implies negative cross traffic ({:.3} Mb/s), read as noise: X taken as 0 and C as the fitted A",
                    x
                ));
                x = 0.0;
                c = a;
            }
            if a <= 0.0 {
                // Trains were carried, or arrived at some rate: that is
                // evidence of room, which a line tilted by noise is not.
                match lo_all.or(hi_r) {
                    Some(r) => {
                        notes.push(format!(
                            "the fit implies no available bandwidth at all (noisy points tilt the line); A reported from the trains, {}",
                            BitRate::from_bps(r)
                        ));
                        a = r / 1e6;
                    }
                    None => {
                        notes.push(
                            "the fit implies no available bandwidth at all; A reported as 0".into(),
                        );
                        a = 0.0;
                    }
                }
            }
            a = a.min(c);
            let (c_bps, mut x_bps, mut a_bps) = (c * 1e6, x * 1e6, a * 1e6);
            let min_hw = floor * a_bps;
            let (low, high) = match f.half_width() {
                Some(hw) => {
                    let hw = (hw * 1e6).max(min_hw);
                    (a_bps - hw, a_bps + hw)
                }
                None => {
                    // Two points: the line is exact, so bound A by the trains
                    // instead — below the slowest train that was slowed, and
                    // above the fastest carried one less the slack a carried
                    // train may hide (tolerance × C).
                    let lo = lo_r.map_or(a_bps * (1.0 - tol), |l| l - tol * c_bps);
                    let hi = hi_r.unwrap_or(a_bps * (1.0 + tol));
                    (lo.min(a_bps - min_hw), hi.max(a_bps + min_hw))
                }
            };
            let (mut low, mut high) = (low, high);
            let slack = tol * c_bps.max(lo_r.unwrap_or(0.0));
            let fmt =
                |v: Option<f64>| v.map_or("-".to_string(), |v| BitRate::from_bps(v).to_string());
            // Carried trains (consistent with the slowed ones) above the
            // fitted A, or the fit's own points arriving below it, contradict
            // the fit directly: one fluid FIFO cannot do either.  The trains
            // are then the better evidence and A is reported from them.
            //
            // Under noisy cross traffic each train's rate varies by the noise
            // it met, and so does the fit: the disagreement must exceed
            // four standard deviations of both to count (the slowest of a
            // score of points is often two or three off by chance).
            let noise = self.noise(&f);
            let se_a = f.available_se * 1e6;
            let beyond = |sd_train: f64| 4.0 * (sd_train.powi(2) + se_a.powi(2)).sqrt();
            let low_noise = noise.map_or(0.0, |n| {
                let secs = self.carried_max_secs().unwrap_or(0.0);
                beyond(n.sd_cross(secs, f.capacity) * 1e6)
            });
            let high_noise = noise.map_or(0.0, |n| {
                hi_fit_point.map_or(0.0, |p| beyond(p.mbps * 1e6 / p.y * n.sd_ratio(p.w) / p.y))
            });
            let too_low = lo_r.is_some_and(|l| a_bps < l - 1.5 * slack - low_noise);
            let too_high = hi_fit.is_some_and(|h| a_bps > h * (1.0 + tol) + high_noise);
            if too_low || too_high {
                let fitted = a_bps;
                a_bps = match (lo_r, hi_fit) {
                    (Some(l), Some(h)) if too_high && l < h => 0.5 * (l + h),
                    (Some(l), _) if too_low => l,
                    (_, Some(h)) => h,
                    _ => a_bps,
                };
                low = lo_r.map_or(low, |l| l - slack).min(a_bps);
                high = hi_r.unwrap_or(high).max(a_bps * (1.0 + tol));
                x_bps = (c_bps - a_bps).max(0.0);
                notes.push(format!(
                    "the fit's A ({}) contradicts the trains (carried up to {}, clearly slowed from {}): A is reported from the trains, {}; the path may not behave as one fluid FIFO (bursty cross traffic, several tight links, or a host limit)",
                    BitRate::from_bps(fitted),
                    fmt(lo_r),
                    fmt(hi_fit),
                    BitRate::from_bps(a_bps),
                ));
            } else if hi_r.is_some_and(|h| a_bps > h * (1.0 + tol) + high_noise) {
                // A train near A arrived slower than the fit expects: a
                // weaker sign (cross traffic varies), only noted.
                notes.push(format!(
                    "the fit's A ({}) disagrees with the trains (carried up to {}, slowed from {}): the path may not behave as one fluid FIFO (bursty cross traffic, several tight links, or a host limit)",
                    BitRate::from_bps(a_bps),
                    fmt(lo_r),
                    fmt(hi_r),
                ));
            }
            (a_bps, low.max(0.0), Some(high), Some(c_bps), Some(x_bps))
        } else {
            match (lo_r.or(lo_all), hi_r) {
                (Some(l), Some(h)) => {
                    notes.push("no fluid fit (fewer than two clean trains above A): A is the fastest carried receiving rate, bounded above by the slowest slowed one".into());
                    (l, l * (1.0 - tol), Some(h.max(l * (1.0 + tol))), None, None)
                }
                (Some(l), None) => (l, l * (1.0 - tol), Some(l * (1.0 + tol)), None, None),
                (None, Some(h)) => {
                    notes.push("upper bound only: every measured train was slowed by the path and no fit was possible; A < the reported value".into());
                    (h, 0.0, Some(h), None, None)
                }
                (None, None) => return None,
            }
        };

        let (mut available, mut low, mut high, mut capacity, mut cross) =
            (available, low, high, capacity, cross);
        let known = self
            .cfg
            .known_capacity
            .map(|c| c.bps())
            .filter(|c| c.is_finite() && *c > 0.0 && self.stop != Some(Fac2Stop::LowerBound));
        let mut from_known = false;
        let near_points = self.near_fit_points(&aside);
        if let Some((c, (a, se, n))) = known
            .filter(|_| near_points.len() >= MIN_NEAR_POINTS_FOR_KNOWN_C)
            .and_then(|c| Some((c, available_given_capacity(c, &near_points)?)))
        {
            if a > 0.0 && a < HIGH_LOAD_SHARE * c {
                notes.push(format!(
                    "high load: C = {} as the runner knows it; A = C − the mean cross traffic the fit's {n} near trains met (the fit's own line, C = {}, gave A = {})",
                    BitRate::from_bps(c),
                    capacity.map_or("-".to_string(), |v| BitRate::from_bps(v).to_string()),
                    BitRate::from_bps(available)
                ));
                let hw = (stats::t_quantile_975(n.saturating_sub(1).max(1)) * se).max(floor * a);
                available = a;
                low = (a - hw).max(0.0);
                high = Some(a + hw);
                capacity = Some(c);
                cross = Some(c - a);
                from_known = true;
            }
        }
        if self.cfg.gap_capacity && !from_known && self.stop != Some(Fac2Stop::LowerBound) {
            if let Some(c_gap) = self.gap_capacity() {
                // Only where the fit itself says high load, and the gap-based
                // C agrees: at 10–70 % the fit is left alone.
                let high_load = fit.is_some_and(|f| f.available < HIGH_LOAD_SHARE * f.capacity)
                    && available < HIGH_LOAD_SHARE * c_gap;
                if high_load {
                    if let Some((a, se, n)) = self.per_train_available(c_gap, &aside) {
                        if a > 0.0 && a < HIGH_LOAD_SHARE * c_gap {
                            notes.push(format!(
                                "high load: C = {} from intra-car gaps; A = C − X̂ from the cross traffic each of {n} trains clearly above A met (fit's A was {})",
                                BitRate::from_bps(c_gap),
                                BitRate::from_bps(available)
                            ));
                            let hw = (stats::t_quantile_975(n.saturating_sub(1).max(1)) * se)
                                .max(floor * a);
                            available = a;
                            low = (a - hw).max(0.0);
                            high = Some(a + hw);
                            capacity = Some(c_gap);
                            cross = Some(c_gap - a);
                        }
                    }
                }
            }
        }

        match self.stop {
            Some(Fac2Stop::Converged) => notes.push(format!(
                "converged after {} trains: a train at the fitted A arrived within {:.1} % of its sending rate and the fluid fit through {} points is stable",
                self.trains.len(),
                tol * 100.0,
                fit.map_or(0, |f| f.n)
            )),
            Some(Fac2Stop::MaxTrains) => notes.push(format!(
                "stopped at the limit of {} trains without meeting the stopping rule",
                self.trains.len()
            )),
            Some(Fac2Stop::NoMeasurement) | Some(Fac2Stop::LowerBound) => {}
            None => notes.push(format!(
                "read before FAC² finished ({} trains so far)",
                self.trains.len()
            )),
        }

        let probe_span = match (self.first_send, self.last_send) {
            (Some(a), Some(b)) => b.since(a),
            _ => DurationNs::ZERO,
        };
        Some(Estimate {
            method: self.name().to_string(),
            available: BitRate::from_bps(available),
            low: BitRate::from_bps(low),
            high: high.map(BitRate::from_bps),
            capacity: capacity.map(BitRate::from_bps),
            cross_traffic: cross.map(BitRate::from_bps),
            cost: self.cost,
            probe_span,
            converged: self.stop == Some(Fac2Stop::Converged),
            host_limited: self.host_limited.clone(),
            trains: self.readings(&aside),
            notes,
            coalescing: self.coalescing_summary(),
        })
    }
}

/// Near trains among the fit's points needed before a known C replaces the
/// fit's (see [`Fac2Config::known_capacity`]).
const MIN_NEAR_POINTS_FOR_KNOWN_C: usize = 5;

/// A given the tight link's capacity `c` (b/s): `C − X̄`, where each fit
/// point met cross traffic `X = C·R/r − R` over its train (the fluid line
/// with its slope fixed at 1/C), averaged with the points' weights.  Returns
/// (A, SE(A), n) in b/s, or `None` with fewer than two points.
fn available_given_capacity(c: f64, points: &[Point]) -> Option<(f64, f64, usize)> {
    let n = points.len();
    let w: f64 = points.iter().map(|p| p.w).sum();
    if n < 2 || w.is_nan() || w <= 0.0 {
        return None;
    }
    let xs: Vec<(f64, f64)> = points
        .iter()
        .map(|p| (c * p.y - p.mbps * 1e6, p.w))
        .collect();
    let mean = xs.iter().map(|(x, w)| x * w).sum::<f64>() / w;
    let var = xs
        .iter()
        .map(|(x, wi)| wi * (x - mean).powi(2))
        .sum::<f64>()
        / w
        * n as f64
        / (n - 1) as f64;
    let a = c - mean;
    a.is_finite().then(|| (a, (var / n as f64).sqrt(), n))
}

impl Fac2 {
    /// The fit's points that are near trains (not set aside).  Near trains
    /// enter the fit by their sending rate, whatever their ratio; the other
    /// points enter only when clearly slowed, which at high load keeps the
    /// trains that met more cross traffic than average (lab, 90 %: A from
    /// those alone 10–50 % low).
    fn near_fit_points(&self, aside: &[(usize, Reason)]) -> Vec<Point> {
        self.candidates()
            .into_iter()
            .filter(|(i, _)| self.trains[*i].role == Role::Near)
            .filter(|(i, _)| !aside.iter().any(|(j, _)| j == i))
            .map(|(_, p)| p)
            .collect()
    }

    /// Every train's record with what FAC² made of it: its role, its class,
    /// and whether it is a point of the final fit, set aside by the outlier
    /// screen, or outside the fit.
    fn readings(&self, aside: &[(usize, Reason)]) -> Vec<TrainRecord> {
        let fit: Vec<usize> = self.candidates().into_iter().map(|(i, _)| i).collect();
        self.trains
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let class = match t.class {
                    Class::Above => "slowed",
                    Class::Carried => "carried",
                    Class::Unusable => "unusable",
                };
                let place = if aside.iter().any(|(j, _)| *j == i) {
                    "set aside as an outlier"
                } else if fit.contains(&i) {
                    "a point of the fit"
                } else {
                    "not in the fit"
                };
                let mut record = t.record.clone();
                record.reading = Some(format!(
                    "{} train, {class}{}: {place}",
                    t.role.describe(),
                    if t.long { ", long" } else { "" }
                ));
                record
            })
            .collect()
    }

    /// The coalescing detector's verdict over the whole run: the share of
    /// tiny gaps pooled over every train; detected when any train showed
    /// coalescing (slow trains, one packet per interrupt, do not show it),
    /// with the median bunch period and packets per bunch of those trains.
    fn coalescing_summary(&self) -> Option<Coalescing> {
        let (gaps, tiny) = self.coalescing_gaps;
        if gaps == 0 {
            return None;
        }
        let med = |f: &dyn Fn(&Coalescing) -> Option<f64>| {
            let xs: Vec<f64> = self.coalesced_trains.iter().filter_map(f).collect();
            stats::median(&xs)
        };
        Some(Coalescing {
            detected: !self.coalesced_trains.is_empty(),
            share_tiny_gaps: tiny as f64 / gaps as f64,
            gaps,
            bunch_period: med(&|c| c.bunch_period.map(|p| p.ns() as f64))
                .map(|ns| DurationNs::from_ns(ns.round() as i64)),
            packets_per_bunch: med(&|c| c.packets_per_bunch),
        })
    }
}

#[cfg(test)]
mod tests;
