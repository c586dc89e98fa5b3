//! FAC² — feedback adaptive control, feedback asymptotic convergence
//! (Jin & Tierney, netest), as a sans-IO [`Method`].
//!
//! A train sent at `R` above the available bandwidth `A = C − X` arrives at
//! `r = R·C/(R + X)`, between A and R; below A it arrives as it left.
//! Feeding `r` back as the next rate converges on A from above (the
//! paper's asymptotic convergence); the straight line `R/r = R/C + X/C`
//! through the trains above A accelerates it.  The algorithm, one train at
//! a time:
//!
//! ```text
//! opening   train 0: Q bytes at max_rate                    (opening.rs)
//!           carried?  longer ones at max_rate until one of 4 ms is
//!                     carried → A ≥ max_rate (LowerBound)
//! feedback  next at the last receiving rate until the line has 2 points
//! lower     one train at ¾ of the line's A: the floor A cannot be below
//! near      repeat: fit the line (fit.rs, readout.rs); stop when its
//!           95 % band on A is within ±max_relative_band with ≥ 3 near
//!           trains (stopping.rs); else a train just clear of the line's
//!           A, as long as the queue budget over the floor allows (near.rs)
//! budget    stop at max_bytes or max_trains with the band there is
//! ```
//!
//! Every train is sized so that it adds at most the queue budget `Q`
//! (32 KiB) to the tight link's queue beyond what FAC² knows the path
//! drains: the measurement cannot make a path with a larger queue drop
//! anyone's packets.  See `docs/methods/fac2.md`.

mod capacity;
mod config;
mod estimate;
mod fit;
mod near;
mod notes;
mod opening;
mod outliers;
mod readout;
mod stopping;
mod train;

pub use config::Fac2Config;
pub use stopping::Fac2Stop;

use crate::estimate::Estimate;
use crate::method::Method;
use crate::methods::common::Ledger;
use crate::observation::Observation;
use crate::plan::{ProbePlan, TrainSpec};
use crate::units::{BitRate, DurationNs};
use notes::{Notes, Topic};
use outliers::Reason;
use readout::Readout;
use train::{Class, Role, Train};

/// Halvings of a train that arrived in too few bunches (2⁸: from 26 µs at
/// 10 Gb/s to 7 ms).
const MAX_BUNCHED_RETRIES: u32 = 8;

/// Lower trains tried before going on without a carried floor.
const LOWER_TRIES: usize = 2;

/// A train that arrived at less than this share of its sending rate was
/// clearly above A.  At high load a train twice A arrives only about
/// `A/C` slower, and queue noise moves a train's ratio by a per cent or two,
/// so only a clear slowdown bounds A from above.
const CLEARLY_SLOWED: f64 = 0.95;

/// A carried train is no floor of A when a train of more packets, slowed
/// and not dropping, arrived below this share of the carried train's rate:
/// in the fluid model a slowed train arrives at or above A, so the two
/// disagree, and the longer train averaged more cross traffic.
const CONTRADICTED: f64 = 0.9;

/// A sending rate below this share of `max_rate` is the host's limit.
const SHORTFALL: f64 = 0.95;

/// FAC² as a [`Method`].  Create with [`Fac2::new`], then drive it with
/// `next_plan` / `observe` until `next_plan` returns [`ProbePlan::Done`].
#[derive(Debug, Clone)]
pub struct Fac2 {
    cfg: Fac2Config,
    trains: Vec<Train>,
    ledger: Ledger,
    notes: Notes,
    /// The train to send next (or being carried), and why.
    next: Option<(TrainSpec, Role)>,
    stop: Option<Fac2Stop>,
    failed_in_a_row: u32,
    /// The coarsest clock step known (configured or observed).
    resolution: DurationNs,
    /// The receiver's bunch period, once seen.
    bunching: DurationNs,
    host_limited: Option<String>,
    /// The near trains' queue budget (bits), halved after a lossy one.
    near_budget: f64,
    bunched_retries: u32,
    /// The budget that stopped it was the train cap, not the bytes.
    train_cap_hit: bool,
}

impl Fac2 {
    pub fn new(cfg: Fac2Config) -> Self {
        let resolution = DurationNs::from_ns(cfg.clock_resolution.ns().max(1));
        let first = opening::first(&cfg, resolution);
        let cfg_near_budget = cfg.near_budget_bits();
        Fac2 {
            next: Some((first, Role::Opening)),
            cfg,
            trains: Vec::new(),
            ledger: Ledger::default(),
            notes: Notes::default(),
            stop: None,
            failed_in_a_row: 0,
            resolution,
            bunching: DurationNs::ZERO,
            host_limited: None,
            near_budget: cfg_near_budget,
            bunched_retries: 0,
            train_cap_hit: false,
        }
    }

    pub fn config(&self) -> &Fac2Config {
        &self.cfg
    }

    /// Why FAC² stopped, once it has.
    pub fn stop_reason(&self) -> Option<Fac2Stop> {
        self.stop
    }

    fn finish(&mut self, why: Fac2Stop) {
        self.stop.get_or_insert(why);
        self.next = None;
    }

    /// The fastest rate a train below the line was carried at (b/s): the
    /// floor of A.  Near trains are left out; a carried one met a lull.  So
    /// is a short train that a longer one contradicts ([`CONTRADICTED`]):
    /// a few packets pass untouched through a lull of the cross traffic, or
    /// through a shaper's token bucket (the lab's 1 Gb/s tbf passed a
    /// 6-packet jumbo feedback train at 1.17 Gb/s, and every near train went
    /// above the link's capacity, at 1.27-1.79 Gb/s, arriving at 0.76-1.0:
    /// a band of ±189 % for an A of 706, at 63c8f29).
    fn carried_floor(&self) -> Option<f64> {
        let max_loss = self.cfg.max_fit_loss();
        let contradicted = |c: &Train| {
            self.trains.iter().any(|t| {
                t.class == Class::Above
                    && t.packets > c.packets
                    && t.loss <= max_loss
                    && t.recv_bps.is_some_and(|r| r < CONTRADICTED * c.sent_bps)
            })
        };
        self.trains
            .iter()
            .filter(|t| t.class == Class::Carried && t.role != Role::Near)
            .filter(|t| !contradicted(t))
            .map(|t| t.sent_bps)
            .reduce(f64::max)
    }

    /// The slowest receiving rate of a train clearly slowed (b/s): in the
    /// fluid model every such train arrives at or above A.  Near trains are
    /// left out: they sit so close to A that one meeting a burst of cross
    /// traffic arrives below it.
    fn slowed_ceiling(&self) -> Option<f64> {
        self.trains
            .iter()
            .filter(|t| t.class == Class::Above)
            .filter(|t| t.role != Role::Near && t.role != Role::Lower)
            .filter(|t| t.loss <= self.cfg.max_fit_loss())
            .filter(|t| t.ratio_y().is_some_and(|y| y > 1.0 / CLEARLY_SLOWED))
            .filter_map(|t| t.recv_bps)
            .reduce(f64::min)
    }

    /// The algorithm box of the module docs, run after every train.
    fn step(&mut self) {
        let Some(last) = self.trains.last().cloned() else {
            return;
        };
        if last.class == Class::Unusable && last.bunched && last.loss < 0.5 {
            // It arrived, but in too few bunches to read a rate from: the
            // same bytes at half the rate span twice the time, within the
            // budget, until the train spans enough bunches.
            self.bunched_retries += 1;
            if self.bunched_retries <= MAX_BUNCHED_RETRIES {
                let spec = self.budgeted(last.target_bps / 2.0, 0.0);
                self.notes.once(
                    Topic::BunchedRetry,
                    format!(
                        "train {}: it arrived in too few bunches to read a rate from; the same bytes go at half the rate until a train spans enough of them",
                        last.index
                    ),
                );
                self.next = Some((spec, Role::Retry));
                return;
            }
        }
        if last.class == Class::Unusable {
            self.failed_in_a_row += 1;
            if self.failed_in_a_row >= self.cfg.max_failed_trains.max(1) {
                self.notes.once(
                    Topic::NoMeasurement,
                    format!(
                        "stopped after {} trains in a row delivered too little to measure (the path drops them, or the receiver is not answering)",
                        self.failed_in_a_row
                    ),
                );
                return self.finish(Fac2Stop::NoMeasurement);
            }
            // Too little arrived: try half the rate, within the budget.
            let spec = self.budgeted(last.target_bps / 2.0, 0.0);
            self.notes.once(
                Topic::Retry,
                format!(
                    "train {}: too little arrived to measure; rate lowered to {}",
                    last.index, spec.rate
                ),
            );
            self.next = Some((spec, Role::Retry));
            return;
        }
        self.failed_in_a_row = 0;
        if self.trains.iter().all(|t| t.class != Class::Above) {
            return self.opening();
        }
        let readout = readout::read(&self.trains, &self.cfg);
        if readout
            .as_ref()
            .is_some_and(|r| stopping::band_is_narrow(r, &self.cfg))
        {
            return self.finish(Fac2Stop::Converged);
        }
        let (spec, role) = self.place(readout.as_ref());
        let spent = self.ledger.cost.bytes.get();
        let budget = self.byte_budget();
        if stopping::budget_spent(
            &self.cfg,
            budget,
            spent,
            self.trains.len(),
            spec.total_bytes().get(),
        ) {
            self.notes.once(
                Topic::Budget,
                format!(
                    "the probe budget ({}, {} trains) ended the run before the band reached ±{:.0} % of A: the cross traffic varies more over the trains' lengths than that budget can average",
                    crate::units::Bytes(budget as u64),
                    self.cfg.max_trains,
                    self.cfg.max_relative_band() * 100.0
                ),
            );
            self.train_cap_hit = self.trains.len() >= self.cfg.max_trains.max(1) as usize;
            return self.finish(Fac2Stop::Budget);
        }
        self.next = Some((spec, role));
    }

    /// Nothing has been slowed yet: confirm at `max_rate`, or probe above
    /// the fastest rate carried after failed trains.
    fn opening(&mut self) {
        let max = self.cfg.max_rate_bps();
        let tol = self.cfg.tolerance();
        let Some(best) = self
            .trains
            .iter()
            .filter(|t| t.class == Class::Carried)
            .max_by(|a, b| a.sent_bps.total_cmp(&b.sent_bps))
            .cloned()
        else {
            return;
        };
        let at_max = best.target_bps >= max * (1.0 - tol);
        if !at_max {
            // Carried below max_rate after failed trains: go up again.
            let spec = self.budgeted(best.sent_bps * 2.0, best.sent_bps);
            self.next = Some((spec, Role::Retry));
            return;
        }
        let longest = self
            .trains
            .iter()
            .filter(|t| t.class == Class::Carried && t.target_bps >= max * (1.0 - tol))
            .map(|t| t.secs)
            .fold(0.0, f64::max);
        match opening::confirm(&self.cfg, self.resolution, longest) {
            Some(spec) => self.next = Some((spec, Role::Opening)),
            None => {
                let got =
                    BitRate::from_bps(best.recv_bps.unwrap_or(best.sent_bps).min(best.sent_bps));
                self.host_limited = Some(if best.sent_bps < SHORTFALL * max {
                    format!(
                        "the sender reached only {} of the requested {} and the path carried all of it: A ≥ {got}; the sending host, not the path, bounds this result",
                        BitRate::from_bps(best.sent_bps),
                        BitRate::from_bps(max)
                    )
                } else {
                    format!(
                        "the path carried everything sent at the maximum probe rate {}: A ≥ {got}; raise --max-rate, or the host cannot send faster",
                        BitRate::from_bps(max)
                    )
                });
                self.finish(Fac2Stop::LowerBound);
            }
        }
    }

    /// The next train once something was slowed.
    fn place(&mut self, readout: Option<&Readout>) -> (TrainSpec, Role) {
        let carried = self.carried_floor();
        let ceiling = self.slowed_ceiling();
        let last = self.trains.last().expect("placed after a train").clone();
        let line = readout.filter(|r| r.available.is_finite() && r.available > 0.0);
        if readout.is_some() && line.is_none() {
            self.notes.once(
                Topic::BadFit,
                "the line through the trains put A at or below zero (noisy points tilt it); trains went on between the fastest rate carried and the slowest arrival",
            );
        }
        if readout.is_none() && last.class == Class::Above && carried.is_none() {
            // Classic FAC² feedback until the line has two points.
            let rate = last.recv_bps.unwrap_or(last.sent_bps);
            return (self.budgeted(rate, 0.0), Role::Feedback);
        }
        // Where A is believed to be: the line's A within what the trains
        // showed (at or above a carried rate, at or below a slowed arrival),
        // else between the two.
        // A near train that was carried says the line's A is low (or met a
        // lull): the next one goes above it, as classic FAC² would.
        // (Carried here means it met no queue at all: `Train::met_no_queue`.)
        let near_carried = (last.role == Role::Near && last.met_no_queue(self.cfg.tolerance()))
            .then_some(last.sent_bps);
        let lo = carried.unwrap_or(0.0).max(near_carried.unwrap_or(0.0));
        let hi = ceiling.unwrap_or(f64::INFINITY).max(lo);
        let between = |lo: f64| {
            if hi.is_finite() {
                (lo * hi).sqrt()
            } else {
                2.0 * lo
            }
        };
        // Once near trains carry the line, it is trusted over one short
        // train's slowdown (at high load a short train below A arrives a
        // little slow as its own load deepens the queue).
        let a = match line {
            Some(r) if r.near >= 2 => r.available.max(lo),
            Some(r) if r.available > hi / 8.0 => r.available.clamp(lo, hi),
            _ => match (carried, ceiling) {
                (Some(_), _) => between(lo),
                (None, Some(hi)) => hi / 4.0,
                (None, None) => last.sent_bps / 2.0,
            },
        };

        // After a carried near train the line is behind (it was drawn
        // through trains that read A low): halve the distance, in ratio, to
        // the slowest clear arrival, as a bisection would, rather than creep
        // up from it one margin at a time.
        let believed = a;
        let a = match near_carried {
            Some(r) if hi.is_finite() => a.max(between(r)),
            _ => a,
        };
        let lowers = self.trains.iter().filter(|t| t.role == Role::Lower).count();
        if carried.is_none() && lowers < LOWER_TRIES {
            return (self.budgeted(opening::LOWER_SHARE * a, 0.0), Role::Lower);
        }
        let fallback;
        let r = match line {
            Some(r) => r,
            None => {
                fallback = Readout {
                    available: a,
                    se: 0.0,
                    half_width: None,
                    capacity: self
                        .trains
                        .iter()
                        .filter_map(|t| t.recv_bps)
                        .fold(a, f64::max),
                    capacity_rel_se: f64::INFINITY,
                    short_line: false,
                    cross: 0.0,
                    eta: None,
                    points: 0,
                    near: 0,
                    set_aside: Vec::new(),
                };
                &fallback
            }
        };
        // The floor the budget is judged against: what was carried, or the
        // line's A less one standard error once the line can judge it.
        // Once two near trains carry the line, trains are sized against its
        // A itself: they then build about the whole budget, which keeps the
        // queue's reflection bias small (`fit::reflection_bias`), and a
        // train that overflows halves the budget.
        // The bisection's step up is a guess, not knowledge: the floor
        // stays at what was believed before it.
        let floor = lo.max(if r.near >= 2 {
            believed
        } else if r.half_width.is_some() {
            believed - r.se
        } else {
            0.0
        });
        // No near train takes more than an eighth of the byte budget, so
        // that the band is judged on several of them.
        let budget = self.byte_budget();
        let left = (budget - self.ledger.cost.bytes.get() as f64).min(budget / 8.0);
        let t = near::place(
            &self.cfg,
            r,
            a,
            near::Room {
                budget_bits: self.near_budget,
                floor,
                secs: self.cfg.duration_range(),
                bunched_secs: self.cfg.bunched_secs(self.bunching),
                bytes_left: left,
            },
        );
        if t.budget_bound {
            self.notes.once(
                Topic::QueueBudget,
                format!(
                    "near trains are kept short enough to add at most {:.0} KiB to the tight link's queue (the queue budget) while A is uncertain",
                    self.near_budget / 8.0 / 1024.0
                ),
            );
        }
        let mut spec = self
            .cfg
            .train_for(BitRate::from_bps(t.rate_bps), self.resolution, t.secs);
        spec.idle_before = train::drain_idle(last.excess_bits(r.capacity), floor.max(0.5 * a));
        (spec, Role::Near)
    }

    /// The byte budget: `max_bytes`, or `max_probe_time` at the fastest
    /// rate the path delivered, if more.
    fn byte_budget(&self) -> f64 {
        self.cfg.byte_budget(self.fastest_delivered())
    }

    /// The budget FAC²'s defaults would have given this run (b): what its
    /// band floor was measured at, whatever `--max-bytes` asked.
    fn default_byte_budget(&self) -> f64 {
        Fac2Config::default().byte_budget(self.fastest_delivered())
    }

    /// The fastest rate the path delivered a usable train at (b/s).
    fn fastest_delivered(&self) -> f64 {
        self.trains
            .iter()
            .filter(|t| t.class != Class::Unusable)
            .filter_map(|t| t.recv_bps)
            .fold(0.0, f64::max)
    }

    fn budgeted(&self, rate: f64, a_floor: f64) -> TrainSpec {
        opening::budgeted(&self.cfg, self.resolution, self.bunching, rate, a_floor)
    }

    /// What one observation says, and the notes it calls for.
    fn record(&mut self, obs: &Observation, spec: TrainSpec, role: Role) {
        self.resolution = self
            .resolution
            .max(obs.send_clock.resolution)
            .max(obs.recv_clock.resolution);
        let seen = self.ledger.record(obs, spec.rate);
        // Bunch ends once the receiver is known to bunch and the train
        // spans enough bunches to read them (`Train::read`).
        let span = spec.duration().map_or(0.0, |d| d.secs_f64());
        let bunch_ends =
            self.bunching > DurationNs::ZERO && span >= 0.99 * self.cfg.bunched_secs(self.bunching);
        let train = Train::read(
            obs,
            &seen,
            role,
            spec.rate.bps(),
            self.cfg.tolerance(),
            bunch_ends,
        );
        if seen.sending.is_none() && seen.packets.len() > 1 {
            self.notes.once(
                Topic::NoSendRate,
                format!(
                    "train {}: the send stamps gave no rate; the requested rate stands in",
                    obs.train
                ),
            );
        }
        if let Some(c) = seen.coalescing.filter(|c| c.detected) {
            // A period far above a NIC's coalescing delay is cars arriving
            // apart, not an interrupt: cap it at 250 µs.
            if let Some(p) = c.bunch_period {
                self.bunching = self.bunching.max(p.min(DurationNs::from_us(250)));
            }
            self.notes.once(
                Topic::Bunching,
                format!(
                    "train {}: the receiver bunches arrivals ({:.0} % of gaps below 1 µs, bunches every {}): later trains span at least 16 bunches and are read at the bunch ends",
                    obs.train,
                    c.share_tiny_gaps * 100.0,
                    c.bunch_period.unwrap_or(DurationNs::ZERO)
                ),
            );
        }
        if train.ratio_y().is_some_and(|y| y < 1.0 / 1.05) {
            self.notes.once(
                Topic::FastArrival,
                format!(
                    "train {}: it arrived faster than it was sent: the send stamps may not reflect when packets reached the wire",
                    obs.train
                ),
            );
        }
        if train.class == Class::Above && train.loss > self.cfg.max_fit_loss() {
            self.notes.once(
                Topic::Lossy,
                format!(
                    "train {}: lost {:.1} % and stays out of the fit (a dropping queue breaks the fluid relation)",
                    obs.train,
                    train.loss * 100.0
                ),
            );
        }
        if role == Role::Near && train.loss > 0.0 {
            let floor = self.cfg.budget_bits() / 2.0;
            if self.near_budget > floor {
                self.near_budget = (self.near_budget / 2.0).max(floor);
                self.notes.once(
                    Topic::QueueShrunk,
                    format!(
                        "train {}: a near train lost packets, so the path's queue is smaller than assumed: later near trains add at most {:.0} KiB",
                        obs.train,
                        self.near_budget / 8.0 / 1024.0
                    ),
                );
            }
        }
        if let Some(rec) = self.ledger.trains.last_mut() {
            rec.reading = Some(role.describe().to_string());
            // The trace shows the rate FAC² used (at bunch ends, if so).
            rec.receiving_rate = train.recv_bps.map(BitRate::from_bps);
        }
        self.trains.push(train);
    }
}

impl Method for Fac2 {
    fn name(&self) -> &'static str {
        "fac2"
    }

    /// The furthest of the three things that stop FAC²: bytes against the
    /// byte budget, trains against the train cap, and the band against the
    /// width asked.  The band narrows as 1/√(trains), so its square tracks
    /// trains linearly, which keeps an ETA drawn from it honest.
    fn progress(&self) -> Option<f64> {
        if self.stop.is_some() {
            return Some(1.0);
        }
        let bytes = self.ledger.cost.bytes.get() as f64 / self.byte_budget().max(1.0);
        let trains = self.trains.len() as f64 / f64::from(self.cfg.max_trains.max(1));
        let band = readout::read(&self.trains, &self.cfg)
            .and_then(|r| {
                let hw = r.half_width.filter(|&hw| hw > 0.0 && r.available > 0.0)?;
                Some((self.cfg.max_relative_band() * r.available / hw).powi(2))
            })
            .unwrap_or(0.0);
        Some(bytes.max(trains).max(band).clamp(0.0, 0.99))
    }

    fn next_plan(&mut self) -> ProbePlan {
        match (self.stop, self.next) {
            (None, Some((spec, _))) => ProbePlan::Train(spec),
            _ => ProbePlan::Done,
        }
    }

    fn observe(&mut self, obs: &Observation) {
        let Some((spec, role)) = self.next.take() else {
            return;
        };
        if self.stop.is_some() {
            return;
        }
        self.record(obs, spec, role);
        self.step();
    }

    fn notes(&self) -> Vec<String> {
        self.ledger
            .notes
            .iter()
            .map(String::as_str)
            .chain(self.notes.texts())
            .map(str::to_string)
            .collect()
    }

    fn estimate(&self) -> Option<Estimate> {
        estimate::assemble(self)
    }
}

#[cfg(test)]
mod tests;
