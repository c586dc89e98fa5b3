//! Packet pairs at the bottleneck gap (Strauss, Katabi & Kaashoek, Spruce),
//! as a sans-IO [`Method`].
//!
//! Two packets of `s` bytes enter the tight link (capacity `C`) `g_in = s·8/C`
//! apart: exactly the time the link needs for the first.  If the link is
//! busy, whatever cross traffic arrived in between is served between them,
//! so they leave `g_out = g_in + X·g_in/C` apart and
//!
//! ```text
//! A = C − X = C · (1 − (g_out − g_in) / g_in)
//! ```
//!
//! One pair samples the cross traffic over one `g_in`; Spruce averages many
//! pairs sent at exponentially distributed intervals (Poisson sampling sees
//! time averages).  `C` comes from [`MethodSettings::known_capacity`] or from
//! a capacity probe of back-to-back pairs (the shortest intra-pair receive
//! gaps, [`dispersion::capacity_from_gaps`]).  Pairs leave the sender at
//! whatever gap `g_s` it achieved; the estimate uses the measured `g_s`:
//! `A = C − (C·g_out − s·8)/g_s`, which is Spruce's formula when `g_s = g_in`.
//!
//! [`MethodSettings::known_capacity`]: crate::methods::registry::MethodSettings

use super::common::{self, Ledger};
use crate::dispersion;
use crate::estimate::Estimate;
use crate::method::Method;
use crate::observation::Observation;
use crate::plan::{CarSlot, ProbePlan, ScheduleSpec};
use crate::stats;
use crate::synthetic::SplitMix64;
use crate::units::{BitRate, Bytes, DurationNs};
use serde::{Deserialize, Serialize};

/// Everything the pair method can be told.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairConfig {
    /// IP datagram size of every probe packet.  Default 1500 B.
    pub packet_size: Bytes,
    /// The tight link's capacity, when known; otherwise it is probed.
    pub capacity: Option<BitRate>,
    /// Pairs per batch.  Default 200.
    pub pairs: u32,
    /// Batches are sent until the 95 % confidence half-width of the mean is
    /// at most this share of it ...  Default 0.05.
    pub target_band: f64,
    /// ... or this many batches were sent.  Default 10 (2000 pairs, about
    /// 2 s at the default interval).
    pub max_batches: u32,
    /// The band is not trusted before this many batches: cross traffic
    /// that comes in bursts (timer-driven senders, a busy host) lands
    /// between a pair's packets rarely but heavily, and a few hundred pairs
    /// that missed every burst look tight and read ≈ C (lab at 90 % load:
    /// 294 Mb/s for A = 31 after one batch).  Default 3.
    #[serde(default = "default_min_batches")]
    pub min_batches: u32,
    /// Mean of the exponential interval between pair starts.  Default 1 ms
    /// (200 pairs sample 0.2 s; at 1500 B the probe averages 24 Mb/s).
    pub mean_interval: DurationNs,
    /// Back-to-back pairs in the capacity probe.  Default 100.
    pub capacity_pairs: u32,
    /// A pair counts only if its achieved send gap is within this factor
    /// of `g_in` (either way).  Default 2.
    pub max_gap_factor: f64,
    /// Seed of the interval generator (a runner may vary it per run).
    pub seed: u64,
}

impl Default for PairConfig {
    fn default() -> Self {
        PairConfig {
            packet_size: Bytes(1500),
            capacity: None,
            pairs: 200,
            target_band: 0.05,
            max_batches: 10,
            min_batches: default_min_batches(),
            mean_interval: DurationNs::from_ms(1),
            capacity_pairs: 100,
            max_gap_factor: 2.0,
            seed: 0x5EED,
        }
    }
}

fn default_min_batches() -> u32 {
    3
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Capacity,
    Pairs,
}

/// The pair method.
#[derive(Debug, Clone)]
pub struct Pair {
    cfg: PairConfig,
    ledger: Ledger,
    capacity: Option<f64>,
    capacity_measured: bool,
    pending: Option<(ProbePlan, Stage)>,
    rng: SplitMix64,
    samples: Vec<f64>,
    unusable_pairs: u32,
    coalesced: bool,
    done: bool,
    capacity_tries: u32,
    batches: u32,
    band_met: bool,
    bunched_pairs: u32,
    received_pairs: u32,
}

impl Pair {
    pub fn new(cfg: PairConfig) -> Self {
        let capacity = cfg
            .capacity
            .filter(|c| c.bps().is_finite() && c.bps() > 0.0)
            .map(|c| c.bps());
        Pair {
            ledger: Ledger::default(),
            capacity,
            capacity_measured: false,
            pending: None,
            rng: SplitMix64::new(cfg.seed),
            samples: Vec::new(),
            unusable_pairs: 0,
            coalesced: false,
            done: false,
            capacity_tries: 0,
            batches: 0,
            band_met: false,
            bunched_pairs: 0,
            received_pairs: 0,
            cfg,
        }
    }

    /// Per-pair samples of A (b/s), in the order the pairs were sent.
    pub fn samples(&self) -> &[f64] {
        &self.samples
    }

    fn size(&self) -> Bytes {
        common::packet_bytes(self.cfg.packet_size)
    }

    fn mean_interval(&self) -> f64 {
        let s = self.cfg.mean_interval.secs_f64();
        if s.is_finite() && s > 0.0 {
            s
        } else {
            1e-3
        }
    }

    fn capacity_plan(&mut self) -> ScheduleSpec {
        let n = self.cfg.capacity_pairs.clamp(20, 5000);
        let mean = self.mean_interval();
        let mut t = 0.0;
        let cars = (0..n)
            .map(|_| {
                let c = CarSlot {
                    offset: DurationNs::from_secs_f64(t),
                    packets: 2,
                };
                t += self.rng.exponential(mean);
                c
            })
            .collect();
        ScheduleSpec {
            packet_size: self.size(),
            cars,
            idle_before: DurationNs::ZERO,
        }
    }

    fn pairs_plan(&mut self, c: f64) -> ScheduleSpec {
        let n = self.cfg.pairs.clamp(10, 20_000);
        let g_in = common::wire_secs(self.size(), BitRate::from_bps(c));
        let mean = self.mean_interval().max(4.0 * g_in);
        let mut t = 0.0;
        let mut cars = Vec::with_capacity(2 * n as usize);
        for _ in 0..n {
            cars.push(CarSlot {
                offset: DurationNs::from_secs_f64(t),
                packets: 1,
            });
            cars.push(CarSlot {
                offset: DurationNs::from_secs_f64(t + g_in),
                packets: 1,
            });
            // The next pair starts after this one's second packet.
            t += g_in + self.rng.exponential(mean);
        }
        ScheduleSpec {
            packet_size: self.size(),
            cars,
            idle_before: DurationNs::ZERO,
        }
    }

    fn observe_capacity(&mut self, obs: &Observation) {
        let gaps = dispersion::intra_car_gaps(obs);
        match dispersion::capacity_from_gaps(&gaps, common::tiny_gap(obs), 0.25, 20) {
            Some(c) => {
                self.capacity = Some(c.bps());
                self.capacity_measured = true;
                self.ledger.note(format!(
                    "capacity {c} from the shortest receive gaps of {} back-to-back pairs",
                    gaps.len()
                ));
            }
            None => {
                self.capacity_tries += 1;
                self.ledger.note(
                    "the capacity probe gave no capacity (too few pairs arrived, or the receiver bunches arrivals)",
                );
                if self.capacity_tries >= 2 {
                    self.done = true;
                }
            }
        }
    }

    fn observe_pairs(&mut self, obs: &Observation) {
        let Some(c) = self.capacity else {
            return;
        };
        let size_bits = self.size().bits() as f64;
        let g_in = size_bits / c;
        let factor = if self.cfg.max_gap_factor.is_finite() && self.cfg.max_gap_factor > 1.0 {
            self.cfg.max_gap_factor
        } else {
            2.0
        };
        let pk = dispersion::unique_packets(obs);
        let tiny = common::tiny_gap(obs).secs_f64();
        // Cars 2k and 2k+1 form pair k.
        for w in pk.windows(2) {
            let (a, b) = (&w[0], &w[1]);
            if a.car % 2 != 0 || b.car != a.car.wrapping_add(1) {
                continue;
            }
            let (Some(ra), Some(rb)) = (a.received, b.received) else {
                self.unusable_pairs += 1;
                continue;
            };
            self.received_pairs += 1;
            let g_s = b.sent.since(a.sent).secs_f64();
            let g_out = (i128::from(rb.ns()) - i128::from(ra.ns())) as f64 / 1e9;
            if g_out <= tiny {
                // Two packets cannot leave a link of capacity C closer than
                // s·8/C: the receiver stamped them in one bunch.
                self.bunched_pairs += 1;
                self.unusable_pairs += 1;
                continue;
            }
            if g_s <= 0.0 || g_s > factor * g_in || g_s < g_in / factor {
                self.unusable_pairs += 1;
                continue;
            }
            let a_i = c - (c * g_out - b.size.bits() as f64) / g_s;
            if a_i.is_finite() {
                self.samples.push(a_i);
            }
        }
        self.batches += 1;
        // ICIM's rule on pairs: more than a third of the pairs bunched.
        if self.bunched_pairs * 3 > self.received_pairs && self.received_pairs >= 4 {
            if !self.coalesced {
                self.ledger.note(format!(
                    "{} of {} pairs arrived in one bunch: the receiver coalesces interrupts",
                    self.bunched_pairs, self.received_pairs
                ));
            }
            self.coalesced = true;
        }
        let band = common::sane_fraction(self.cfg.target_band, 0.05);
        if let Some((m, se)) = self.mean_a() {
            if self.samples.len() >= 30
                && self.batches >= self.cfg.min_batches.max(1)
                && 1.96 * se <= band * m.abs()
            {
                self.band_met = true;
                self.done = true;
            }
        }
        if self.received_pairs == 0 || self.coalesced || self.batches >= self.cfg.max_batches.max(1)
        {
            self.done = true;
        }
    }

    fn mean_a(&self) -> Option<(f64, f64)> {
        let m = stats::mean(&self.samples)?;
        let sd = stats::std_dev(&self.samples).unwrap_or(0.0);
        Some((m, sd / (self.samples.len() as f64).sqrt()))
    }
}

impl Method for Pair {
    fn name(&self) -> &'static str {
        "pair"
    }

    fn next_plan(&mut self) -> ProbePlan {
        if self.done {
            return ProbePlan::Done;
        }
        if let Some((p, _)) = &self.pending {
            return p.clone();
        }
        let (plan, stage) = match self.capacity {
            None => (ProbePlan::Schedule(self.capacity_plan()), Stage::Capacity),
            Some(c) => (ProbePlan::Schedule(self.pairs_plan(c)), Stage::Pairs),
        };
        self.pending = Some((plan.clone(), stage));
        plan
    }

    fn observe(&mut self, obs: &Observation) {
        if self.done {
            return;
        }
        let Some((_, stage)) = self.pending.take() else {
            return;
        };
        let seen = self.ledger.record(obs, obs.spec.rate);
        if seen.coalesced() {
            self.ledger.note(
                "interrupt coalescing detected: single-packet gaps are the interrupt's, not the link's",
            );
        }
        match stage {
            Stage::Capacity => self.observe_capacity(obs),
            Stage::Pairs => {
                self.coalesced |= seen.coalesced();
                self.observe_pairs(obs)
            }
        }
    }

    fn notes(&self) -> Vec<String> {
        self.ledger.notes.clone()
    }

    fn estimate(&self) -> Option<Estimate> {
        let c = self.capacity?;
        let (mean, se) = self.mean_a()?;
        let a = mean.clamp(0.0, c);
        let half = 1.96 * se;
        let mut notes = self.ledger.notes.clone();
        let n = self.samples.len();
        let asked = self.cfg.pairs.clamp(10, 20_000) as usize * self.batches as usize;
        notes.push(format!(
            "{n} of {asked} pairs usable ({} unusable: lost, mis-paced or bunched)",
            self.unusable_pairs
        ));
        if !self.capacity_measured {
            notes.push(format!(
                "capacity {} given, not measured",
                BitRate::from_bps(c)
            ));
        }
        let host_limited = self.coalesced.then(|| {
            "receiver interrupt coalescing: a pair's output gap cannot be read, so this estimate is not trustworthy".to_string()
        });
        // The gap rule over all arrivals cannot see bunching of sparse pairs
        // (half the gaps are between pairs); the pair rule can.
        let mut coalescing = self.ledger.coalescing();
        if let Some(c) = coalescing.as_mut() {
            c.detected |= self.coalesced;
        }
        Some(Estimate {
            method: "pair".into(),
            available: BitRate::from_bps(a),
            low: BitRate::from_bps((mean - half).clamp(0.0, c)),
            high: Some(BitRate::from_bps((mean + half).clamp(0.0, c))),
            capacity: Some(BitRate::from_bps(c)),
            cross_traffic: Some(BitRate::from_bps(c - a)),
            cost: self.ledger.cost,
            probe_span: self.ledger.probe_span(),
            converged: self.band_met && !self.coalesced,
            host_limited,
            trains: self.ledger.trains.clone(),
            notes,
            coalescing,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::methods::testpaths::{coalesced, fluid, mbps, poisson, rel_err, run};
    use crate::synthetic::FluidPathConfig;

    fn with_c(c: f64) -> Pair {
        Pair::new(PairConfig {
            capacity: Some(mbps(c)),
            ..PairConfig::default()
        })
    }

    #[test]
    fn fluid_path_with_known_capacity_is_exact() {
        for load in [0.1, 0.5, 0.9] {
            let mut m = with_c(300.0);
            let (e, truth) = run(&mut m, fluid(300.0, load));
            let e = e.unwrap();
            assert!(rel_err(&e, truth) < 0.01, "load {load}: {}", e.available);
            assert!(e.converged);
        }
    }

    #[test]
    fn high_load_runs_out_of_pairs_and_says_so() {
        let mut m = with_c(300.0);
        let (e, truth) = run(&mut m, poisson(300.0, 0.9, 1));
        let e = e.unwrap();
        assert!(!e.converged);
        assert_eq!(e.cost.trains, 10);
        // The band is honest: wide, and holding the truth.
        assert!(
            e.low.bps() <= truth && truth <= e.high.unwrap().bps(),
            "{e:?}"
        );
    }

    #[test]
    fn poisson_path_averages_to_a() {
        // Per-pair samples scatter widely (one pair sees 0, 1, 2 ... cross
        // packets); up to 2000 pairs average to within 10 % of A up to 50 %
        // load, with the probed capacity as well.
        for load in [0.1, 0.3, 0.5] {
            for seed in 1..=3 {
                let mut m = with_c(300.0);
                let (e, truth) = run(&mut m, poisson(300.0, load, seed));
                let e = e.unwrap();
                assert!(
                    rel_err(&e, truth) < 0.10,
                    "load {load} seed {seed}: {} vs {truth}",
                    e.available
                );
                let mut m = Pair::new(PairConfig::default());
                let (e, truth) = run(&mut m, poisson(300.0, load, seed));
                let e = e.unwrap();
                let c = e.capacity.unwrap().mbps();
                assert!((c - 300.0).abs() < 3.0, "{c}");
                assert!(
                    rel_err(&e, truth) < 0.12,
                    "probed C, load {load} seed {seed}: {} vs {truth}",
                    e.available
                );
            }
        }
    }

    #[test]
    fn an_idle_path_reads_capacity() {
        let mut m = Pair::new(PairConfig::default());
        let (e, truth) = run(&mut m, fluid(300.0, 0.0));
        let e = e.unwrap();
        assert!(rel_err(&e, truth) < 0.01, "{}", e.available);
        // The capacity probe and the minimum three batches.
        assert_eq!(e.cost.trains, 4, "{:?}", e.notes);
        assert!(e.converged);
    }

    #[test]
    fn coalescing_is_flagged_untrusted() {
        let mut m = with_c(300.0);
        let (e, _) = run(&mut m, coalesced(fluid(300.0, 0.3)));
        let e = e.expect("still an estimate, flagged");
        assert!(e.host_limited.is_some());
        assert!(!e.converged);
        assert!(e.coalescing.unwrap().detected);
        // Without a known C the bunched capacity probe gives nothing.
        let mut m = Pair::new(PairConfig::default());
        let (e, _) = run(&mut m, coalesced(fluid(300.0, 0.3)));
        assert!(e.is_none());
        assert_eq!(m.next_plan(), ProbePlan::Done);
    }

    #[test]
    fn all_lost_gives_no_estimate() {
        let cfg = FluidPathConfig {
            queue_limit: Some(Bytes::ZERO),
            ..fluid(300.0, 0.5)
        };
        let mut m = with_c(300.0);
        let (e, _) = run(&mut m, cfg);
        assert!(e.is_none());
        assert_eq!(m.next_plan(), ProbePlan::Done);
    }
}
