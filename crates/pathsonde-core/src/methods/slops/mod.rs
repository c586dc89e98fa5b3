//! SLoPS — self-loading periodic streams (Jain & Dovrolis, pathload), as a
//! sans-IO [`Method`].
//!
//! A periodic stream of `K` packets sent at rate `R` above the available
//! bandwidth `A` fills the tight link's queue for as long as it lasts, so its
//! one-way delays (OWDs) grow; below `A` they do not.  SLoPS reads the trend
//! of each stream's OWDs with two tests over group medians (the pairwise
//! comparison test, PCT, and the pairwise difference test, PDT), sends
//! *fleets* of `N` streams at one rate and lets the fleet vote, and
//! binary-searches `R` until the bracket around `A` is narrower than a set
//! resolution.  Rates where the fleet cannot make up its mind form the *grey
//! region*: `A` varied across it while the fleet was sent.  The answer is a
//! range `[low, high]`.  See `docs/methods/slops.md`.

mod trend;

pub use trend::{classify, Trend, TrendThresholds};

use super::common::{self, Ledger, Seen};
use super::slot::PlanSlot;
use crate::dispersion;
use crate::estimate::{Estimate, Stopped};
use crate::method::Method;
use crate::observation::Observation;
use crate::plan::{ProbePlan, ScheduleSpec, TrainSpec};
use crate::stats;
use crate::units::{BitRate, Bytes, DurationNs};
use serde::{Deserialize, Serialize};

/// Everything SLoPS can be told.  `Default` suits 100 Mb/s – 1 Gb/s paths.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct SlopsConfig {
    /// IP datagram size of every probe packet.  Default 1500 B.
    pub packet_size: Bytes,
    /// The highest rate probed; the opening train goes at it.  Default 1 Gb/s.
    pub max_rate: BitRate,
    /// Packets per stream (pathload's K).  Default 100.
    pub stream_packets: u32,
    /// Streams per fleet (pathload's N).  Default 12.
    pub streams_per_fleet: u32,
    /// A fleet says `R > A` (or `R < A`) when at least this share of its
    /// classified streams show an increasing (non-increasing) trend
    /// (pathload's f).  Default 0.7.
    pub fleet_fraction: f64,
    /// PCT/PDT thresholds of the trend tests.
    pub thresholds: TrendThresholds,
    /// The search stops when `high − low` is at most this share of their
    /// middle (pathload's ω, relative here so that one setting suits 30 and
    /// 900 Mb/s).  Default 0.04.
    pub resolution: f64,
    /// ... or at most this many b/s.  Default 0.5 Mb/s.
    pub min_resolution: BitRate,
    /// With a grey region, the search stops when both gaps between the grey
    /// region and the bracket are at most this share of the middle
    /// (pathload's χ).  Default 0.06.
    pub grey_resolution: f64,
    /// Cars (back-to-back groups) start at least this far apart, so that a
    /// pacing sender can hold the spacing; above `packet·8/min_car_interval`
    /// a stream is sent as cars of several packets.  Default 20 µs.
    pub min_car_interval: DurationNs,
    /// Idle time between streams of a fleet, as a multiple of a stream's
    /// duration (at least 1 ms), so that the queue a stream built drains.
    /// Default 1.
    pub stream_idle_ratio: f64,
    /// A stream that lost more than this share counts as increasing (its
    /// queue overflowed).  Default 0.1.
    pub heavy_loss: f64,
    /// Packets in the opening train (at `max_rate`, cars of two), whose
    /// arrival rate bounds the search from above.  Default 120.
    pub opening_packets: u32,
    /// Give up after this many fleets.  Default 16.
    pub max_fleets: u32,
    /// Probe bytes to spend at most (`--max-bytes`): no fleet starts that
    /// would pass it.  Default none (the fleet cap bounds the run).
    #[serde(default)]
    pub max_bytes: Option<Bytes>,
}

impl Default for SlopsConfig {
    fn default() -> Self {
        SlopsConfig {
            packet_size: Bytes(1500),
            max_rate: BitRate::from_gbps(1.0),
            stream_packets: 100,
            streams_per_fleet: 12,
            fleet_fraction: 0.7,
            thresholds: TrendThresholds::default(),
            resolution: 0.04,
            min_resolution: BitRate::from_mbps(0.5),
            grey_resolution: 0.06,
            min_car_interval: DurationNs::from_us(20),
            stream_idle_ratio: 1.0,
            heavy_loss: 0.1,
            opening_packets: 120,
            max_fleets: 16,
            max_bytes: None,
        }
    }
}

/// What a fleet said about its rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum FleetVerdict {
    /// `R > A`: most streams' delays grew.
    Above,
    /// `R < A`: most streams' delays did not grow.
    Below,
    /// Neither held: `R` is in the grey region.
    Grey,
    /// Too few streams could be classified.
    Unusable,
}

/// One fleet, as the trace keeps it.
impl FleetVerdict {
    /// The verdict in words, for traces and reports.
    pub fn describe(self) -> &'static str {
        match self {
            FleetVerdict::Above => "above A",
            FleetVerdict::Below => "below A",
            FleetVerdict::Grey => "grey region",
            FleetVerdict::Unusable => "unusable",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct FleetRecord {
    /// The rate asked for.
    pub target: BitRate,
    /// The median of the streams' achieved sending rates.
    pub rate: BitRate,
    pub increasing: u32,
    pub non_increasing: u32,
    pub ambiguous: u32,
    pub verdict: FleetVerdict,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Pending {
    Opening(BitRate),
    Fleet {
        target: BitRate,
        cars_per_stream: u32,
        streams: u32,
        /// Planned time between car starts, seconds.
        car_interval: f64,
    },
}

/// SLoPS as a [`Method`].
#[derive(Debug, Clone)]
pub(crate) struct Slops {
    cfg: SlopsConfig,
    ledger: Ledger,
    slot: PlanSlot<Pending>,
    opened: bool,
    /// Highest rate known below A (b/s).
    rmin: f64,
    /// Lowest rate known above A, and whether a fleet confirmed it (the
    /// opening train only suggests it).
    rmax: f64,
    rmax_confirmed: bool,
    grey: Option<(f64, f64)>,
    fleets: Vec<FleetRecord>,
    stream_packets: u32,
    converged: bool,
    /// Why it stopped (for `--precision` reports).
    stopped: Option<Stopped>,
    lower_bound: bool,
    capacity: Option<BitRate>,
    unusable_in_a_row: u32,
    irregular_fleets: u32,
    /// The shortest time between car starts now in use (seconds): starts at
    /// `min_car_interval` and doubles each time a fleet's streams could not
    /// be sent evenly, so a busy host gets fewer, larger cars to pace.
    car_interval_floor: f64,
}

/// The car interval stops doubling here: cars of 16 packets at 1 Gb/s.
const MAX_CAR_INTERVAL_SECS: f64 = 400e-6;

impl Slops {
    pub fn new(cfg: SlopsConfig) -> Self {
        let max = common::sane_rate(cfg.max_rate, BitRate::from_gbps(1.0)).bps();
        let k = cfg.stream_packets.clamp(16, 2000);
        Slops {
            ledger: Ledger::default(),
            slot: PlanSlot::default(),
            opened: false,
            rmin: 0.0,
            rmax: max,
            rmax_confirmed: false,
            grey: None,
            fleets: Vec::new(),
            stream_packets: k,
            converged: false,
            stopped: None,
            lower_bound: false,
            capacity: None,
            unusable_in_a_row: 0,
            irregular_fleets: 0,
            car_interval_floor: cfg.min_car_interval.secs_f64().max(0.0),
            cfg,
        }
    }

    /// Every fleet so far.
    #[cfg(test)]
    pub fn fleets(&self) -> &[FleetRecord] {
        &self.fleets
    }

    fn max_rate(&self) -> f64 {
        common::sane_rate(self.cfg.max_rate, BitRate::from_gbps(1.0)).bps()
    }
    fn size(&self) -> Bytes {
        common::packet_bytes(self.cfg.packet_size)
    }
    fn omega(&self) -> f64 {
        common::sane_fraction(self.cfg.resolution, 0.04)
    }
    fn chi(&self) -> f64 {
        common::sane_fraction(self.cfg.grey_resolution, 0.06)
    }

    /// Width below which the bracket `[a, b]` is resolved, with share `w`.
    fn resolved(&self, a: f64, b: f64, w: f64) -> bool {
        let floor = common::sane_rate(self.cfg.min_resolution, BitRate::from_mbps(0.5)).bps();
        (b - a) <= (w * (a + b) / 2.0).max(floor)
    }

    fn opening_plan(&self) -> ProbePlan {
        let n = self.cfg.opening_packets.clamp(20, 2000);
        ProbePlan::Train(TrainSpec {
            packet_size: self.size(),
            packets_per_car: 2,
            cars: n.div_ceil(2),
            rate: BitRate::from_bps(self.max_rate()),
            idle_before: DurationNs::ZERO,
        })
    }

    /// A fleet of streams at `rate`, as one schedule.
    fn fleet_plan(&self, rate: f64) -> (ScheduleSpec, u32, f64) {
        let size = self.size();
        let wire = common::wire_secs(size, BitRate::from_bps(rate));
        let min_iv = self.car_interval_floor;
        let ppc = ((min_iv / wire).ceil() as u32).clamp(1, 16);
        let k = self.stream_packets;
        let cars = k.div_ceil(ppc).max(2);
        let iv = wire * f64::from(ppc);
        let stream: Vec<(DurationNs, u32)> = (0..cars)
            .map(|i| (DurationNs::from_secs_f64(iv * f64::from(i)), ppc))
            .collect();
        let dur = iv * f64::from(cars);
        let ratio = if self.cfg.stream_idle_ratio.is_finite() && self.cfg.stream_idle_ratio >= 0.0 {
            self.cfg.stream_idle_ratio
        } else {
            1.0
        };
        let gap = DurationNs::from_secs_f64((dur * ratio).max(1e-3) + iv);
        let n = self.cfg.streams_per_fleet.clamp(1, 64);
        let groups = vec![stream; n as usize];
        (
            common::schedule_of_groups(size, &groups, gap, DurationNs::ZERO),
            cars,
            iv,
        )
    }

    /// The next fleet's rate, or `None` when the search is over.
    fn next_rate(&self) -> Option<f64> {
        let (lo, hi) = (self.rmin, self.rmax);
        if !self.rmax_confirmed && self.resolved(lo, hi, self.omega()) {
            return Some(hi);
        }
        if let Some((gl, gh)) = self.grey {
            let below = gl - lo;
            let above = hi - gh;
            return Some(if below >= above {
                (lo + gl) / 2.0
            } else {
                (gh + hi) / 2.0
            });
        }
        Some((lo + hi) / 2.0)
    }

    fn check_done(&mut self) {
        let (lo, hi) = (self.rmin, self.rmax);
        let max = self.max_rate();
        if lo >= max * (1.0 - self.omega()) {
            self.lower_bound = true;
            self.finish(
                false,
                Stopped::LowerBound,
                "every fleet up to the highest rate was carried",
            );
            return;
        }
        if self.rmax_confirmed && self.resolved(lo, hi, self.omega()) {
            self.finish(
                true,
                Stopped::TargetReached,
                "the bracket reached the resolution",
            );
            return;
        }
        if let Some((gl, gh)) = self.grey {
            let w = self.chi() * (lo + hi) / 2.0;
            if self.rmax_confirmed && gl - lo <= w && hi - gh <= w {
                self.finish(
                    true,
                    Stopped::TargetReached,
                    "the grey region fills the bracket",
                );
                return;
            }
        }
        if self.fleets.len() as u32 >= self.cfg.max_fleets.max(1) {
            self.finish(false, Stopped::ProbeCap, "the fleet limit was reached");
        }
        if let Some(budget) = self.cfg.max_bytes {
            // What the next fleet would cost at the current stream length.
            let next = u64::from(self.cfg.streams_per_fleet.clamp(1, 64))
                * u64::from(self.stream_packets)
                * self.cfg.packet_size.get();
            if self.ledger.cost.bytes.get().saturating_add(next) > budget.get() {
                self.finish(false, Stopped::ByteBudget, "the byte budget was spent");
            }
        }
        if self.unusable_in_a_row >= 3 {
            self.finish(
                false,
                Stopped::NoMeasurement,
                "three fleets in a row could not be classified",
            );
        }
    }

    fn finish(&mut self, converged: bool, stopped: Stopped, why: &str) {
        if self.slot.is_done() {
            return;
        }
        self.slot.finish();
        self.converged = converged;
        self.stopped = Some(stopped);
        self.ledger
            .note(format!("stopped after {} fleets: {why}", self.fleets.len()));
    }

    fn observe_opening(&mut self, obs: &Observation, seen: &Seen) {
        let max = self.max_rate();
        let sent = seen.sending.map_or(max, |s| s.bps());
        if seen.loss > 0.1 {
            self.ledger.note(format!(
                "opening train lost {:.0} % of its packets (a short queue at the tight link)",
                seen.loss * 100.0
            ));
        }
        let gaps = dispersion::intra_car_gaps(obs);
        self.capacity = dispersion::capacity_from_gaps(&gaps, common::tiny_gap(obs), 0.25, 20);
        match seen.receiving {
            Some(r) if r.bps() < 0.95 * sent => {
                // In the fluid model a train above A arrives at
                // R·C/(R + X) > A; the margin covers cross-traffic noise.
                self.rmax = (r.bps() * 1.3).min(max);
                self.ledger.note(format!(
                    "opening train at {} arrived at {}: searching below {}",
                    BitRate::from_bps(sent),
                    r,
                    BitRate::from_bps(self.rmax)
                ));
            }
            Some(_) => {
                self.rmax = max.min(sent.max(max * 0.5));
            }
            None => {
                self.ledger.note(
                    "the opening train could not be measured; searching up to the maximum rate",
                );
            }
        }
        if sent < 0.95 * max {
            // Back-to-back cars at max_rate were beyond the host; streams
            // at lower rates may not be, and each fleet records the rate it
            // achieved, so the search is not capped here.
            self.ledger.note(format!(
                "the opening train reached only {} of {}: the sending host may bound the result",
                BitRate::from_bps(sent),
                BitRate::from_bps(max)
            ));
        }
    }

    fn observe_fleet(
        &mut self,
        obs: &Observation,
        seen: &Seen,
        target: f64,
        (cps, streams): (u32, u32),
        car_interval: f64,
    ) {
        let coalesced = seen.coalesced();
        // Under coalescing a bunch end is late by up to one bunch period.
        let floor = seen
            .coalescing
            .filter(|c| c.detected)
            .and_then(|c| c.bunch_period)
            .map_or(0.0, |p| p.secs_f64().min(1e-3));
        let tiny = common::tiny_gap(obs);
        let th = self.cfg.thresholds.sane();
        let (mut inc, mut flat, mut amb) = (0u32, 0u32, 0u32);
        let mut rates = Vec::new();
        let mut few_points = 0u32;
        let mut irregular_streams = 0u32;
        for s in 0..streams {
            let lo = s * cps;
            let hi = lo + cps;
            let pk: Vec<_> = seen
                .packets
                .iter()
                .filter(|p| p.car >= lo && p.car < hi)
                .copied()
                .collect();
            if pk.iter().all(|p| p.received.is_none()) {
                // Nothing arrived: a dead path says nothing about A.
                amb += 1;
                continue;
            }
            if let Some(r) = stream_send_rate(&pk) {
                rates.push(r);
            }
            if common::send_irregular(&pk, car_interval) {
                // A late car and the catch-up burst after it make their own
                // delay trend: the stream says nothing about A.
                amb += 1;
                irregular_streams += 1;
                continue;
            }
            let lost = pk.iter().filter(|p| p.received.is_none()).count() as f64 / pk.len() as f64;
            if lost > common::sane_fraction(self.cfg.heavy_loss, 0.1) {
                inc += 1;
                continue;
            }
            let d = common::owds(&pk, tiny, coalesced);
            let delays: Vec<f64> = d.iter().map(|o| o.delay).collect();
            match classify(&delays, &th, floor) {
                Trend::Increasing => inc += 1,
                Trend::NonIncreasing => flat += 1,
                Trend::Ambiguous => amb += 1,
                Trend::TooFew => {
                    amb += 1;
                    few_points += 1;
                }
            }
        }
        if coalesced && few_points * 2 > streams && self.stream_packets < 800 {
            self.stream_packets = (self.stream_packets * 2).min(800);
            self.ledger.note(format!(
                "interrupt coalescing leaves too few bunches per stream: streams lengthened to {} packets",
                self.stream_packets
            ));
        }
        if irregular_streams * 2 > streams {
            self.irregular_fleets += 1;
            self.ledger.note(
                "the sender could not hold the stream spacing (a busy host): such streams are not counted",
            );
        }
        let widened = irregular_streams * 2 > streams && self.widen_cars(car_interval);
        let rate = stats::median(&rates).unwrap_or(target);
        let classified = inc + flat;
        let f = common::sane_fraction(self.cfg.fleet_fraction, 0.7).max(0.5);
        let verdict = if classified < (streams / 3).max(2) {
            FleetVerdict::Unusable
        } else if f64::from(inc) >= f * f64::from(classified) {
            FleetVerdict::Above
        } else if f64::from(flat) >= f * f64::from(classified) {
            FleetVerdict::Below
        } else {
            FleetVerdict::Grey
        };
        if let Some(t) = self.ledger.trains.last_mut() {
            t.reading = Some(format!(
                "fleet at {} (streams sent at {}): {inc} increasing, {flat} not, {amb} unclassified: {}",
                BitRate::from_bps(target),
                BitRate::from_bps(rate),
                verdict.describe()
            ));
        }
        self.fleets.push(FleetRecord {
            target: BitRate::from_bps(target),
            rate: BitRate::from_bps(rate),
            increasing: inc,
            non_increasing: flat,
            ambiguous: amb,
            verdict,
        });
        self.update(rate, verdict, widened);
    }

    /// After a fleet the sender could not pace: cars start at least twice
    /// as far apart from now on (more packets per car at the same rate), as
    /// pathload lengthens its period when the host cannot keep it.  The
    /// fleet's unusable verdict then does not count towards giving up, since
    /// the next fleet is sent differently.
    fn widen_cars(&mut self, car_interval: f64) -> bool {
        let next = (car_interval.max(self.car_interval_floor) * 2.0).min(MAX_CAR_INTERVAL_SECS);
        if !(next.is_finite() && next > self.car_interval_floor * 1.01) {
            return false;
        }
        self.car_interval_floor = next;
        self.ledger.note(format!(
            "cars start at least {:.0} µs apart from now on, so that the sender can hold the spacing",
            next * 1e6
        ));
        true
    }

    /// Moves the bracket by one fleet's verdict at its achieved rate `r`.
    /// `retry` marks an unusable fleet whose successor is sent differently
    /// (wider cars), which does not count towards giving up.
    fn update(&mut self, r: f64, verdict: FleetVerdict, retry: bool) {
        let w = self.omega();
        match verdict {
            FleetVerdict::Above => {
                self.unusable_in_a_row = 0;
                if r <= self.rmin {
                    // A fell since the fleet that put rmin there.
                    self.rmin = (r * (1.0 - 2.0 * w)).max(0.0);
                }
                self.rmax = r;
                self.rmax_confirmed = true;
                if let Some((gl, gh)) = self.grey {
                    self.grey = (gl < r).then_some((gl, gh.min(r)));
                }
            }
            FleetVerdict::Below => {
                self.unusable_in_a_row = 0;
                self.rmin = r;
                if r >= self.rmax * (1.0 - w) {
                    if self.rmax_confirmed {
                        // A rose since the fleet that put rmax there.
                        self.rmax = (r * (1.0 + 2.0 * w)).min(self.max_rate());
                        self.rmax_confirmed = false;
                    } else {
                        self.rmax = (self.rmax * 2.0).min(self.max_rate()).max(r);
                    }
                }
                if let Some((gl, gh)) = self.grey {
                    self.grey = (gh > r).then_some((gl.max(r), gh));
                }
            }
            FleetVerdict::Grey => {
                self.unusable_in_a_row = 0;
                let (gl, gh) = self.grey.unwrap_or((r, r));
                self.grey = Some((gl.min(r), gh.max(r)));
                if r >= self.rmax {
                    self.rmax = (r * (1.0 + 2.0 * w)).min(self.max_rate());
                    self.rmax_confirmed = false;
                }
                if r <= self.rmin {
                    self.rmin = (r * (1.0 - 2.0 * w)).max(0.0);
                }
            }
            FleetVerdict::Unusable if retry => {}
            FleetVerdict::Unusable => {
                self.unusable_in_a_row += 1;
            }
        }
        self.check_done();
    }
}

impl Slops {
    /// The rate at which half the classified streams see an increasing
    /// delay: a logistic curve of the share of increasing streams against
    /// the rate the streams achieved, fitted by maximum likelihood to every
    /// usable fleet's counts.  Each stream met its own A (the cross traffic
    /// varies from stream to stream), so this is the median A over the
    /// streams.  It uses every fleet's vote, where the bracket's middle uses
    /// only the two fleets at its ends, each a vote of about ten streams.
    /// The curve is no steeper than 0.5 % of the bracket's middle, so a
    /// clean step lands between its two sides.  `None` when no fleet lies on
    /// either side of one half.
    fn crossing(&self) -> Option<f64> {
        let pts: Vec<(f64, u32, u32)> = self
            .fleets
            .iter()
            .filter(|f| f.verdict != FleetVerdict::Unusable)
            .map(|f| (f.rate.bps(), f.increasing, f.non_increasing))
            .collect();
        let middle = (self.rmin + self.rmax) / 2.0;
        stats::logistic_fit(&pts, 0.005 * middle.max(1e3)).map(|f| f.location)
    }
}

/// A stream's achieved sending rate: the bits sent before its last car over
/// the time from its first car's start to its last's.
fn stream_send_rate(pk: &[crate::observation::PacketRecord]) -> Option<f64> {
    let first_car = pk.iter().map(|p| p.car).min()?;
    let last_car = pk.iter().map(|p| p.car).max()?;
    if first_car == last_car {
        return None;
    }
    let start = pk
        .iter()
        .filter(|p| p.car == first_car)
        .map(|p| p.sent)
        .min()?;
    let end = pk
        .iter()
        .filter(|p| p.car == last_car)
        .map(|p| p.sent)
        .min()?;
    let bits: u64 = pk
        .iter()
        .filter(|p| p.car != last_car)
        .map(|p| p.size.bits())
        .sum();
    let secs = end.since(start).secs_f64();
    (secs > 0.0).then(|| bits as f64 / secs)
}

impl Method for Slops {
    fn name(&self) -> &'static str {
        "slops"
    }

    fn next_plan(&mut self) -> ProbePlan {
        if let Some(plan) = self.slot.again() {
            return plan;
        }
        if !self.opened {
            let plan = self.opening_plan();
            let target = BitRate::from_bps(self.max_rate());
            return self.slot.hand_out(plan, Pending::Opening(target));
        }
        let Some(rate) = self.next_rate() else {
            self.slot.finish();
            return ProbePlan::Done;
        };
        let rate = rate.max(1e3);
        let (sched, cps, iv) = self.fleet_plan(rate);
        let streams = self.cfg.streams_per_fleet.clamp(1, 64);
        self.slot.hand_out(
            ProbePlan::Schedule(sched),
            Pending::Fleet {
                target: BitRate::from_bps(rate),
                cars_per_stream: cps,
                streams,
                car_interval: iv,
            },
        )
    }

    fn observe(&mut self, obs: &Observation) {
        let Some(pending) = self.slot.take() else {
            // Unsolicited: nothing to attribute it to.
            return;
        };
        match pending {
            Pending::Opening(target) => {
                let seen = self.ledger.record(obs, target.min(obs.spec.rate));
                self.opened = true;
                self.observe_opening(obs, &seen);
            }
            Pending::Fleet {
                target,
                cars_per_stream,
                streams,
                car_interval,
            } => {
                // The trace records the schedule's average (streams and
                // the idle time between them); the fleet records the rate.
                let seen = self.ledger.record(obs, obs.spec.rate);
                if seen.coalesced() {
                    self.ledger.note(
                        "interrupt coalescing detected: one-way delays read from the last packet of each bunch",
                    );
                }
                self.observe_fleet(
                    obs,
                    &seen,
                    target.bps(),
                    (cars_per_stream, streams),
                    car_interval,
                );
            }
        }
    }

    fn notes(&self) -> Vec<String> {
        self.ledger.notes.clone()
    }

    fn estimate(&self) -> Option<Estimate> {
        let decided = self
            .fleets
            .iter()
            .any(|f| f.verdict != FleetVerdict::Unusable);
        if !decided {
            return None;
        }
        let low = self.rmin;
        let mut notes = self.ledger.notes.clone();
        if let Some((gl, gh)) = self.grey {
            notes.push(format!(
                "grey region {} – {}: fleets there neither clearly above nor below A",
                BitRate::from_bps(gl),
                BitRate::from_bps(gh)
            ));
        }
        let irregular = self.irregular_fleets * 3 >= (self.fleets.len() as u32).max(1)
            && self.irregular_fleets > 0;
        let (available, high, mut host_limited) = if self.lower_bound {
            notes.push(format!(
                "A ≥ {}: raise --max-rate, or the host cannot send faster",
                BitRate::from_bps(low)
            ));
            (
                low,
                None,
                Some(format!(
                    "every fleet up to {} was carried; A is at least that",
                    BitRate::from_bps(low)
                )),
            )
        } else {
            let high = self.rmax;
            let middle = self
                .crossing()
                .filter(|c| *c >= low && *c <= high)
                .unwrap_or((low + high) / 2.0);
            (middle, Some(BitRate::from_bps(high)), None)
        };
        if irregular && host_limited.is_none() {
            host_limited = Some(format!(
                "the sending host could not pace the streams evenly in {} of {} fleets",
                self.irregular_fleets,
                self.fleets.len()
            ));
        }
        let coalescing = self.ledger.coalescing();
        if coalescing.is_some_and(|c| c.detected) {
            notes.push(
                "trusted under coalescing: the delay trend was read from bunch ends (IC-aware SLoPS)"
                    .into(),
            );
        }
        // No narrower than the truth's own wander over the window.
        let (low, high) = super::common::floor_band(available, low, high.map(BitRate::bps));
        Some(Estimate {
            stopped: self.stopped,
            method: crate::method_name::MethodName::Slops,
            available: BitRate::from_bps(available),
            low: BitRate::from_bps(low),
            high: high.map(BitRate::from_bps),
            capacity: self.capacity,
            cross_traffic: None,
            cost: self.ledger.cost,
            probe_span: self.ledger.probe_span(),
            converged: self.converged,
            host_limited,
            trains: self.ledger.trains.clone(),
            notes,
            coalescing,
            host_evidence: None,
        })
    }
}

#[cfg(test)]
mod tests;
