//! Bursts whose sizes set the probe rate (the ICIM principle of Man,
//! Hasegawa & Murata, III.B–C, over UDP), as a sans-IO [`Method`].
//!
//! Two bursts sent `S` apart, the first of `N` packets of `P` bytes: the
//! tight link receives `N·P + X·S` bits while it can serve `C·S`, so the
//! second burst finds a queue — and arrives more than `S` after the first —
//! exactly when `N·P/S > C − X = A`.  The probe rate is set by the *number*
//! of packets in a burst, not by spacing packets, so the sender needs no
//! fine pacing, and a receiver that coalesces interrupts still delivers each
//! burst as a bunch whose timing is all the test needs (`S` is longer than
//! the coalescing delay).
//!
//! One measurement probes `k` rates `B_i` evenly spread over a search range
//! `(B_l, B_u)` with `k` consecutive bursts (plus a one-packet marker to
//! close the last interval).  The first burst `j` whose following interval
//! grew by more than `λ` is the first rate above `A`; the measurement's
//! result is the middle of `B_{j−1}` and `B_j` (ICIM takes `B_j`).  The next
//! range is centred on the result, half-width the larger of the 95 %
//! confidence half-width of the stored results and a tenth of the result;
//! a result on the range's edge means `A` moved out of it: the stored
//! results are dropped and the range doubled towards that side.
//!
//! The band `low..high` is Student's 95 % band over the stored results plus
//! half a step of the probed rates (see `Burst::band`); `converged` means
//! the stopping rule was met (the stored results' standard error small
//! enough over at least `min_results`) and A was not above every probed
//! rate.  A run that ends with fewer than two stored results (on a busy
//! path the range is reset again and again) reads A and its band from its
//! last ten measurements instead (`Burst::tail_band`); synthetic Poisson
//! paths, 300 Mb/s, FIFO and token bucket, 30 % and 70 % load, 20 runs
//! each: the band held the truth in 20, 16, 20 and 18 runs (see the blind
//! test).

use super::common::{self, Ledger};
use super::search_range::SearchRange;
use super::slot::PlanSlot;
use crate::dispersion;
use crate::estimate::Estimate;
use crate::method::Method;
use crate::observation::Observation;
use crate::plan::{CarSlot, ProbePlan, ScheduleSpec};
use crate::stats;
use crate::units::{BitRate, Bytes, DurationNs};

/// Measurements the band falls back on when the range was reset too often
/// to keep two results ([`Burst::tail_band`]).
const TAIL_RESULTS: usize = 10;
use serde::{Deserialize, Serialize};

/// The narrowest band burst claims, as a share of A each side: its
/// measured systematic error under smooth cross traffic (see `estimate`).
const BURST_BAND_FLOOR: f64 = 0.10;

/// Everything the burst method can be told.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BurstConfig {
    /// IP datagram size.  Default 1500 B.
    pub packet_size: Bytes,
    /// The highest rate probed.  Default 1 Gb/s.
    pub max_rate: BitRate,
    /// Rates probed per measurement (ICIM's k).  Default 4.
    pub points: u32,
    /// An interval grew when it arrived more than `λ` times as long as it
    /// was sent.  Default 1.01.
    pub lambda: f64,
    /// The first search range, as shares of `max_rate`.  Default 0.05, 0.5.
    pub initial_range: (f64, f64),
    /// An interval grew only if it also grew by more than this many packet
    /// times at the tight link (read from the bursts' own output gaps): one
    /// packet of cross traffic more or less in the queue moves an interval
    /// by one packet time, which at 300 Mb/s and 1500 B is 4 % of a 1 ms
    /// interval — far above `λ − 1`.  Default 2.
    pub noise_packets: f64,
    /// The fewest packets in the smallest burst (sets `S`).  Default 40.
    pub min_burst: u32,
    /// The most packets in a burst: a burst must fit the tight link's
    /// queue.  Default 128 (192 KB at 1500 B).
    pub max_burst: u32,
    /// The shortest interval between bursts, above any NIC's coalescing
    /// delay.  Default 200 µs.
    pub min_interval: DurationNs,
    /// Stop when the 95 % half-width of the stored results is at most this
    /// share of their mean, over at least `min_results`.  Default 0.05.
    pub target_band: f64,
    /// Default 8.
    pub min_results: u32,
    /// Give up after this many measurements.  Default 40.
    pub max_measurements: u32,
}

impl Default for BurstConfig {
    fn default() -> Self {
        BurstConfig {
            packet_size: Bytes(1500),
            max_rate: BitRate::from_gbps(1.0),
            points: 4,
            lambda: 1.01,
            initial_range: (0.05, 0.5),
            noise_packets: 2.0,
            min_burst: 40,
            max_burst: 128,
            min_interval: DurationNs::from_us(200),
            target_band: 0.05,
            min_results: 8,
            max_measurements: 40,
        }
    }
}

/// One measurement's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BurstResult {
    pub range: (BitRate, BitRate),
    pub result: BitRate,
    /// Below the range (the first interval already grew), above it (none
    /// grew), or inside.
    pub edge: Edge,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Edge {
    Lower,
    Inside,
    Upper,
}

/// The burst method.
#[derive(Debug, Clone)]
pub struct Burst {
    cfg: BurstConfig,
    ledger: Ledger,
    range: (f64, f64),
    slot: PlanSlot<()>,
    stored: Vec<f64>,
    history: Vec<BurstResult>,
    coalesced: bool,
    bunch_period: f64,
    failures: u32,
    converged: bool,
}

impl Burst {
    pub fn new(cfg: BurstConfig) -> Self {
        let max = common::sane_rate(cfg.max_rate, BitRate::from_gbps(1.0)).bps();
        let (a, b) = cfg.initial_range;
        let (a, b) = if a.is_finite() && b.is_finite() && 0.0 < a && a < b && b <= 1.0 {
            (a, b)
        } else {
            (0.05, 0.5)
        };
        Burst {
            ledger: Ledger::default(),
            range: (a * max, b * max),
            slot: PlanSlot::default(),
            stored: Vec::new(),
            history: Vec::new(),
            coalesced: false,
            bunch_period: 0.0,
            failures: 0,
            converged: false,
            cfg,
        }
    }

    /// Every measurement so far.
    pub fn history(&self) -> &[BurstResult] {
        &self.history
    }

    fn size(&self) -> Bytes {
        common::packet_bytes(self.cfg.packet_size)
    }
    fn max(&self) -> f64 {
        common::sane_rate(self.cfg.max_rate, BitRate::from_gbps(1.0)).bps()
    }
    fn floor(&self) -> f64 {
        self.max() * 1e-3
    }
    fn k(&self) -> usize {
        self.cfg.points.clamp(2, 16) as usize
    }

    /// The rates of the next measurement and the interval `S`, seconds.
    fn layout(&self) -> (Vec<u32>, f64) {
        let (lo, hi) = self.range;
        let k = self.k();
        let bits = self.size().bits() as f64;
        let min_b = f64::from(self.cfg.min_burst.clamp(1, 1000));
        let max_b = f64::from(self.cfg.max_burst.clamp(2, 5000)).max(min_b);
        let s = (min_b * bits / lo)
            .min(max_b * bits / hi)
            .max(self.cfg.min_interval.secs_f64().max(0.0))
            // Under coalescing, intervals of 20 bunch periods keep the
            // widened λ (two periods) near 1.1.
            .max(20.0 * self.bunch_period);
        let counts = (0..k)
            .map(|i| {
                let b = lo + (hi - lo) * i as f64 / (k - 1) as f64;
                ((b * s / bits).round() as u32).clamp(1, max_b as u32)
            })
            .collect();
        (counts, s)
    }

    fn plan(&self) -> ProbePlan {
        let (counts, s) = self.layout();
        let mut cars: Vec<CarSlot> = counts
            .iter()
            .enumerate()
            .map(|(i, &n)| CarSlot {
                offset: DurationNs::from_secs_f64(s * i as f64),
                packets: n,
            })
            .collect();
        cars.push(CarSlot {
            offset: DurationNs::from_secs_f64(s * counts.len() as f64),
            packets: 1,
        });
        ProbePlan::Schedule(ScheduleSpec {
            packet_size: self.size(),
            cars,
            idle_before: DurationNs::ZERO,
        })
    }

    /// Reads one measurement: `(result, edge)`, or `None` if unreadable.
    fn read(&self, obs: &Observation) -> Option<(f64, Edge)> {
        let cars = dispersion::cars(obs);
        let k = self.k();
        if cars.len() != k + 1 || cars.iter().all(|c| c.packets_received == 0) {
            return None;
        }
        let lambda = if self.cfg.lambda.is_finite() && self.cfg.lambda > 1.0 {
            self.cfg.lambda
        } else {
            1.01
        };
        // One packet time at the tight link: the median gap inside the
        // bursts (they cross it back to back).
        let gaps: Vec<f64> = dispersion::intra_car_gaps(obs)
            .iter()
            .map(|g| g.0)
            .filter(|g| *g > common::tiny_gap(obs).secs_f64())
            .collect();
        let packet_time = stats::median(&gaps).unwrap_or(0.0);
        let m = if self.cfg.noise_packets.is_finite() && self.cfg.noise_packets >= 0.0 {
            self.cfg.noise_packets
        } else {
            2.0
        };
        let floor = m * packet_time;
        let mut rates = Vec::with_capacity(k);
        let mut first_grown = None;
        for i in 0..k {
            let (a, b) = (&cars[i], &cars[i + 1]);
            let sent = b.first_sent.since(a.first_sent).secs_f64();
            if sent <= 0.0 {
                return None;
            }
            rates.push(a.bytes_sent.bits() as f64 / sent);
            // A burst that lost packets overflowed the queue: above A.
            let lost = a.packets_received < a.packets_sent;
            let (Some(ra), Some(rb)) = (a.first_received, b.first_received) else {
                if lost {
                    first_grown.get_or_insert(i);
                    continue;
                }
                return None;
            };
            let arrived = rb.since(ra).secs_f64();
            // Under coalescing a burst's stamp is late by up to one bunch
            // period: widen λ by two periods over the interval.
            let l = lambda.max(1.0 + 2.0 * self.bunch_period / sent);
            if lost || (arrived > l * sent && arrived - sent > floor) {
                first_grown.get_or_insert(i);
            }
        }
        Some(match first_grown {
            Some(0) => (rates[0], Edge::Lower),
            // ICIM takes B_j; the middle of the last rate that passed and
            // the first that did not halves the step's bias.
            Some(j) => ((rates[j - 1] + rates[j]) / 2.0, Edge::Inside),
            None => (rates[k - 1], Edge::Upper),
        })
    }

    fn update(&mut self, r: f64, edge: Edge) {
        let (lo, hi) = self.range;
        self.history.push(BurstResult {
            range: (BitRate::from_bps(lo), BitRate::from_bps(hi)),
            result: BitRate::from_bps(r),
            edge,
        });
        let range = SearchRange::new(BitRate::from_bps(lo), BitRate::from_bps(hi));
        let (floor, max) = (
            BitRate::from_bps(self.floor()),
            BitRate::from_bps(self.max()),
        );
        let next = match edge {
            Edge::Lower => {
                self.stored.clear();
                range.widened_down(floor)
            }
            Edge::Upper => {
                self.stored.clear();
                if hi >= self.max() * 0.999 {
                    // Already at the top: keep it as a result (A ≥ max).
                    self.stored.push(r);
                }
                range.widened_up(max)
            }
            Edge::Inside => {
                self.stored.push(r);
                // The sample's σ (none below two results: a tenth each side).
                let sd = stats::std_dev(&self.stored).unwrap_or(0.0);
                SearchRange::centred(
                    BitRate::from_bps(r),
                    sd,
                    self.stored.len(),
                    floor,
                    Some(max),
                )
            }
        };
        self.range = (next.low.bps(), next.high.bps());
        if self.range.1 - self.range.0 < self.range.1 * 0.01 {
            self.range.0 = self.range.1 * 0.9;
        }
    }

    /// The mean of the stored results and the half-width of the band the
    /// estimate reports: Student's 95 % band over the stored results (not
    /// 1.96: there are as few as `min_results`, and 1.96 understates the
    /// band by 20 % at eight), plus half the mean step between the rates a
    /// measurement probes.  Each result is the middle of the two probed
    /// rates that bracket A, so it is off by up to half a step however the
    /// cross traffic behaves; the ranges re-centre on the results, so the
    /// grid moves between measurements, but too little to average that away
    /// (synthetic Poisson path, 30 % load: the band without it held the
    /// truth in 35–65 % of runs).  The stopping rule still uses the plain
    /// standard error ([`Burst::stop_band`]).
    /// The stopping rule's band: 1.96 standard errors of the stored
    /// results' mean (unchanged, so the cost is).
    fn stop_band(&self) -> Option<(f64, f64)> {
        let m = stats::mean(&self.stored)?;
        let ci = stats::std_dev(&self.stored).map_or(f64::INFINITY, |sd| {
            1.96 * sd / (self.stored.len() as f64).sqrt()
        });
        Some((m, ci))
    }

    /// The band the estimate reports: over the stored results when there
    /// are two or more, else over the last [`TAIL_RESULTS`] measurements
    /// whatever their range ([`Burst::tail_band`]).
    fn band(&self) -> Option<(f64, f64, usize)> {
        match self.stored_band() {
            Some((m, ci)) if self.stored.len() >= 2 => Some((m, ci, self.stored.len())),
            _ => self.tail_band(),
        }
    }

    /// On a busy path a measurement lands on its range's edge so often
    /// (about 40 % of them at 70 % Poisson load) that the stored results
    /// are cleared again and again, and a run can end with none or one.
    /// The last measurements still say where A was: their mean and
    /// Student's band, each result taken at its value (an edge result is
    /// the edge rate, a bound A lies near), plus half a probe step.  Open
    /// only when fewer than three measurements were read at all.
    fn tail_band(&self) -> Option<(f64, f64, usize)> {
        let tail: Vec<&BurstResult> = self.history.iter().rev().take(TAIL_RESULTS).collect();
        if tail.len() < 3 {
            return None;
        }
        let xs: Vec<f64> = tail.iter().map(|h| h.result.bps()).collect();
        let m = stats::mean(&xs)?;
        let n = xs.len();
        let sd = stats::std_dev(&xs)?;
        // Each range is centred on the last result, so successive results
        // are not independent: count them as half as many.
        let n_eff = (n / 2).max(2);
        let ci = stats::t_quantile_975(n_eff - 1) * sd / (n_eff as f64).sqrt();
        let steps: Vec<f64> = tail
            .iter()
            .map(|h| (h.range.1.bps() - h.range.0.bps()) / (self.k() - 1) as f64)
            .collect();
        let half_step = stats::mean(&steps).map_or(0.0, |s| s / 2.0);
        Some((m, ci + half_step, n))
    }

    fn stored_band(&self) -> Option<(f64, f64)> {
        let m = stats::mean(&self.stored)?;
        let n = self.stored.len();
        let ci = stats::std_dev(&self.stored).map_or(f64::INFINITY, |sd| {
            stats::t_quantile_975(n.saturating_sub(1)) * sd / (n as f64).sqrt()
        });
        let steps: Vec<f64> = self
            .history
            .iter()
            .rev()
            .take(n)
            .map(|h| (h.range.1.bps() - h.range.0.bps()) / (self.k() - 1) as f64)
            .collect();
        let half_step = stats::mean(&steps).map_or(0.0, |s| s / 2.0);
        Some((m, ci + half_step))
    }
}

impl Method for Burst {
    fn name(&self) -> &'static str {
        "burst"
    }

    fn next_plan(&mut self) -> ProbePlan {
        if let Some(p) = self.slot.again() {
            return p;
        }
        let p = self.plan();
        self.slot.hand_out(p, ())
    }

    fn observe(&mut self, obs: &Observation) {
        if self.slot.take().is_none() {
            return;
        }
        let seen = self.ledger.record(obs, obs.spec.rate);
        if let Some(c) = seen.coalescing.filter(|c| c.detected) {
            let p = c.bunch_period.map_or(0.0, |p| p.secs_f64()).min(1e-3);
            self.bunch_period = self.bunch_period.max(p);
            if !self.coalesced {
                self.coalesced = true;
                self.ledger.note(format!(
                    "interrupt coalescing detected: bursts timed as bunches, λ widened by two bunch periods ({}) over the interval",
                    DurationNs::from_secs_f64(self.bunch_period)
                ));
            }
        }
        match self.read(obs) {
            Some((r, edge)) => {
                self.failures = 0;
                self.update(r, edge);
            }
            None => {
                self.failures += 1;
                if self.failures >= 3 {
                    self.slot.finish();
                    self.ledger
                        .note("three measurements in a row could not be read (loss)");
                }
            }
        }
        let min = self.cfg.min_results.max(2) as usize;
        if let Some((m, ci)) = self.stop_band() {
            let band = common::sane_fraction(self.cfg.target_band, 0.05);
            if self.stored.len() >= min && ci <= band * m {
                self.slot.finish();
                self.converged = true;
            }
        }
        if self.ledger.cost.trains >= self.cfg.max_measurements.max(1) {
            self.slot.finish();
        }
    }

    fn notes(&self) -> Vec<String> {
        self.ledger.notes.clone()
    }

    fn estimate(&self) -> Option<Estimate> {
        let (a, ci, n) = match self.band() {
            Some(b) => b,
            None => {
                // Nothing inside a range yet: the last result, unbounded.
                let last = self.history.last()?;
                (last.result.bps(), f64::INFINITY, 0)
            }
        };
        let mut notes = self.ledger.notes.clone();
        notes.push(if self.stored.len() >= 2 {
            format!(
                "{n} results since the last range reset, {} measurements in all",
                self.history.len()
            )
        } else {
            format!(
                "{} result(s) since the last range reset: A and its band are read from the last {n} of {} measurements",
                self.stored.len(),
                self.history.len()
            )
        });
        let at_top = a >= self.max() * 0.99;
        let host_limited = at_top.then(|| {
            format!(
                "no burst up to {} made the intervals grow; A is at least that",
                BitRate::from_bps(self.max())
            )
        });
        // The band also holds burst's systematic error: under smooth (CBR)
        // cross traffic it reads 4–10 % high with a nearly zero spread of
        // its own bursts (the lab's first blind sweep, docs/methods/burst.md:
        // its band then held the truth in 75 % of runs).
        let (low, high) = if ci.is_finite() {
            let (lo, hi) =
                common::floor_band_at(BURST_BAND_FLOOR, a, (a - ci).max(0.0), Some(a + ci));
            (lo, hi.map(BitRate::from_bps))
        } else {
            (0.0, None)
        };
        Some(Estimate {
            stopped: None,
            method: crate::method_name::MethodName::Burst,
            available: BitRate::from_bps(a),
            low: BitRate::from_bps(low),
            high: if at_top { None } else { high },
            capacity: None,
            cross_traffic: None,
            cost: self.ledger.cost,
            probe_span: self.ledger.probe_span(),
            converged: self.converged && !at_top,
            host_limited,
            trains: self.ledger.trains.clone(),
            notes,
            coalescing: self.ledger.coalescing(),
            host_evidence: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::methods::testpaths::{coalesced, fluid, mbps, poisson, rel_err, run};
    use crate::synthetic::FluidPathConfig;

    #[test]
    fn fluid_path_converges_near_a() {
        for load in [0.1, 0.3, 0.5, 0.7, 0.9] {
            let mut m = Burst::new(BurstConfig::default());
            let (e, truth) = run(&mut m, fluid(300.0, load));
            let e = e.unwrap();
            // The two-packet noise floor makes a burst's interval count as
            // grown only 2/N above A: up to ~13 % high at 90 % load.
            assert!(
                rel_err(&e, truth) < 0.15,
                "load {load}: {} vs {truth} {:?}",
                e.available,
                e.notes
            );
        }
    }

    /// Blind (burst never takes C), FIFO and token bucket, 30 % and 70 %
    /// load: an estimate every run, the median within 12 % of A (C is 43 % /
    /// 233 % above A, 2·A 100 %).  Scored with an open band as a miss
    /// (issue 28), burst's bands were open in 5, 14, 1 and 11 of 20 runs
    /// while a run that ended on a range's edge kept no results; read from
    /// the last measurements instead (`Burst::tail_band`) none is open, and
    /// they held the truth in 20, 16, 20 and 18 of 20.  The bar: at most 2
    /// open, the closed ones holding the truth in 75 %.
    #[test]
    fn blind_accuracy_and_band_coverage_fifo_and_token_bucket() {
        crate::methods::testpaths::assert_blind_coverage_with_open("burst", 0.12, 2, 0.75);
    }

    #[test]
    fn poisson_path_within_bounds() {
        for load in [0.1, 0.3, 0.5] {
            let errs: Vec<f64> = (1..=3)
                .map(|s| {
                    let mut m = Burst::new(BurstConfig::default());
                    let (e, truth) = run(&mut m, poisson(300.0, load, s));
                    rel_err(&e.unwrap(), truth)
                })
                .collect();
            assert!(
                stats::median(&errs).unwrap() < 0.15,
                "load {load}: {errs:?}"
            );
        }
    }

    #[test]
    fn coalescing_receiver_still_measures() {
        let mut m = Burst::new(BurstConfig::default());
        let (e, truth) = run(&mut m, coalesced(fluid(300.0, 0.3)));
        let e = e.unwrap();
        assert!(e.coalescing.unwrap().detected);
        assert!(e.host_limited.is_none());
        assert!(rel_err(&e, truth) < 0.25, "{} vs {truth}", e.available);
    }

    #[test]
    fn an_idle_path_reads_its_capacity() {
        let mut m = Burst::new(BurstConfig::default());
        let (e, truth) = run(&mut m, fluid(300.0, 0.0));
        let e = e.unwrap();
        assert!(rel_err(&e, truth) < 0.07, "{} {:?}", e.available, e.notes);
        assert!(e.host_limited.is_none());
    }

    #[test]
    fn a_fast_idle_path_hits_the_top() {
        let mut m = Burst::new(BurstConfig {
            max_rate: mbps(200.0),
            ..BurstConfig::default()
        });
        let (e, _) = run(&mut m, fluid(300.0, 0.0));
        let e = e.unwrap();
        assert!(e.host_limited.is_some());
        assert!(e.high.is_none());
    }

    #[test]
    fn all_lost_gives_no_estimate() {
        let cfg = FluidPathConfig {
            queue_limit: Some(Bytes::ZERO),
            ..fluid(300.0, 0.5)
        };
        let mut m = Burst::new(BurstConfig::default());
        let (e, _) = run(&mut m, cfg);
        assert!(e.is_none());
        assert_eq!(m.next_plan(), ProbePlan::Done);
    }
}
