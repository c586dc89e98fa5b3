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
//! time averages).  Pairs leave the sender at whatever gap `g_s` it
//! achieved; the estimate uses the measured `g_s`: `A = C − (C·g_out −
//! s·8)/g_s`, which is Spruce's formula when `g_s = g_in`.
//!
//! # Capacity, blind
//!
//! `C` comes from [`MethodSettings::known_capacity`] (the user's
//! `--known-capacity`) or, by default, from a capacity probe of a few short
//! back-to-back trains.  Not pairs: a tight link that is a token bucket
//! (Linux tbf; many shaped access links) lets a back-to-back pair through at
//! the sender's line rate whenever it has a frame of tokens to spare, which
//! after any idle moment it has — the lab's tbf (a bucket of two frames)
//! read 1.12–1.22 Gb/s for a 300 Mb/s link that way, and the pairs then
//! gave A = 0.  Each train is long enough to outlast such a burst
//! allowance; its first `capacity_skip_gaps` receive gaps are set aside and
//! `C` is a high quantile of the per-gap rates of the rest
//! ([`dispersion::intra_car_gaps_split`], [`dispersion::capacity_from_gaps`]):
//! a gap with a cross packet inside only reads lower.  On a FIFO link the
//! skipped gaps would have read the same, so the probe is right on both.
//!
//! # Band and refusal
//!
//! `low..high` is the mean's 95 % band: the wider of the per-pair samples'
//! and the batch means' (pairs within a batch are correlated by cross-traffic
//! bursts), plus the probed `C`'s own spread (half the inter-quartile range
//! of its tail-gap rates; A moves about one for one with `C`).  `converged`
//! means the band is trustworthy: the stopping rule met (the band narrow
//! enough after at least `min_batches`), no coalescing.  When the
//! mean comes out at or below 0 — the pairs say the link is saturated, or
//! more likely that `C` is wrong — there is no estimate, and
//! [`Method::notes`] says why: a 0 is not a finding.
//!
//! [`MethodSettings::known_capacity`]: crate::methods::registry::MethodSettings

use super::common::{self, Ledger};
use super::slot::PlanSlot;
use crate::dispersion;
use crate::estimate::Estimate;
use crate::method::Method;
use crate::observation::Observation;
use crate::plan::{CarSlot, ProbePlan, ScheduleSpec};
use crate::rng::SplitMix64;
use crate::stats;
use crate::units::{BitRate, Bytes, DurationNs};
use serde::{Deserialize, Serialize};

/// Everything the pair method can be told.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct PairConfig {
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
    /// Packets sent back to back just before each pair's first packet,
    /// so that the tight link is busy when the pair arrives.  A token-bucket
    /// link (the lab's tbf, with one frame of tokens to spare after any idle
    /// moment) otherwise serves one cross packet between the pair from its
    /// spare tokens, invisibly: the synthetic Poisson path behind a two-frame
    /// bucket read A 29 % high at 30 % load and 57 % high at 70 % with the
    /// true C.  The lead packets spend the spare tokens; on a FIFO link they
    /// only make sure the queue does not empty between the pair's packets
    /// (Spruce's assumption).  Default 2 (a bucket of up to three frames).
    #[serde(default = "default_lead_packets")]
    pub lead_packets: u32,
    /// Mean of the exponential interval between pair starts.  Default 1 ms
    /// (200 pairs sample 0.2 s; at 1500 B the probe averages 24 Mb/s).
    pub mean_interval: DurationNs,
    /// Back-to-back trains in the capacity probe.  Default 6.
    #[serde(default = "default_capacity_trains")]
    pub capacity_trains: u32,
    /// Packets per capacity train.  Default 30: with 5 gaps skipped, 24
    /// gaps a train, 144 in all, for 270 KB at 1500 B.
    #[serde(default = "default_capacity_train_packets")]
    pub capacity_train_packets: u32,
    /// Receive gaps at the head of each capacity train that are not used
    /// for `C`: a token bucket's burst allowance (the lab's tbf lets one
    /// frame more than a FIFO through at line rate after an idle moment).
    /// Default 5, enough for a bucket of about five frames.
    #[serde(default = "default_capacity_skip_gaps")]
    pub capacity_skip_gaps: u32,
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
            lead_packets: default_lead_packets(),
            capacity_trains: default_capacity_trains(),
            capacity_train_packets: default_capacity_train_packets(),
            capacity_skip_gaps: default_capacity_skip_gaps(),
            max_gap_factor: 2.0,
            seed: 0x5EED,
        }
    }
}

fn default_min_batches() -> u32 {
    3
}
fn default_lead_packets() -> u32 {
    2
}
fn default_capacity_trains() -> u32 {
    6
}
fn default_capacity_train_packets() -> u32 {
    30
}
fn default_capacity_skip_gaps() -> u32 {
    5
}

/// Mean idle time before each capacity train: long enough for a token
/// bucket to refill (so every train meets the worst case, a full bucket)
/// and for the previous train to drain at any C above 10 Mb/s.
const CAPACITY_TRAIN_IDLE: f64 = 5e-3;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Capacity,
    Pairs,
}

/// The pair method.
#[derive(Debug, Clone)]
pub(crate) struct Pair {
    cfg: PairConfig,
    ledger: Ledger,
    capacity: Option<f64>,
    capacity_measured: bool,
    /// Relative spread of the capacity probe's tail-gap rates (half the
    /// inter-quartile range over the median); 0 when C was given.
    capacity_spread: f64,
    slot: PlanSlot<Stage>,
    rng: SplitMix64,
    samples: Vec<f64>,
    /// Mean of each batch's samples (batches with none left out).
    batch_means: Vec<f64>,
    unusable_pairs: u32,
    coalesced: bool,
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
            capacity_spread: 0.0,
            slot: PlanSlot::default(),
            rng: SplitMix64::new(cfg.seed),
            samples: Vec::new(),
            batch_means: Vec::new(),
            unusable_pairs: 0,
            coalesced: false,
            capacity_tries: 0,
            batches: 0,
            band_met: false,
            bunched_pairs: 0,
            received_pairs: 0,
            cfg,
        }
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
        let n = self.cfg.capacity_trains.clamp(2, 100);
        let packets = self.capacity_train_packets();
        let mut t = 0.0;
        let cars = (0..n)
            .map(|_| {
                let c = CarSlot {
                    offset: DurationNs::from_secs_f64(t),
                    packets,
                };
                t += CAPACITY_TRAIN_IDLE / 2.0 + self.rng.exponential(CAPACITY_TRAIN_IDLE / 2.0);
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
        // The lead packets would raise the probe's mean rate: stretch the
        // interval to keep it at two packets per `mean_interval` (1 ms:
        // 24 Mb/s at 1500 B), which a 90 % loaded 300 Mb/s link can carry.
        let per_pair = f64::from(2 + self.lead()) / 2.0;
        let mean = (self.mean_interval() * per_pair).max(4.0 * g_in);
        let mut t = 0.0;
        let lead = self.lead();
        // The second packet follows the first by about g_in: the car's
        // `lead` packets leave back to back at the sender's line rate L
        // before the first, so it is scheduled lead·g_in/4 later as well
        // (g_s is g_in … 1.5·g_in for L ≥ 4·C; the estimate uses the
        // measured g_s, which is exact while the queue stays busy).
        let second = g_in * (1.0 + f64::from(lead) / 4.0);
        let mut cars = Vec::with_capacity(2 * n as usize);
        for _ in 0..n {
            cars.push(CarSlot {
                offset: DurationNs::from_secs_f64(t),
                packets: 1 + lead,
            });
            cars.push(CarSlot {
                offset: DurationNs::from_secs_f64(t + second),
                packets: 1,
            });
            // The next pair starts after this one's second packet.
            t += second + self.rng.exponential(mean);
        }
        ScheduleSpec {
            packet_size: self.size(),
            cars,
            idle_before: DurationNs::ZERO,
        }
    }

    /// Packets per capacity train: at least the skipped gaps plus four.
    fn capacity_train_packets(&self) -> u32 {
        let skip = self.capacity_skip();
        self.cfg.capacity_train_packets.clamp(skip + 5, 1000)
    }

    fn lead(&self) -> u32 {
        self.cfg.lead_packets.min(16)
    }

    fn capacity_skip(&self) -> u32 {
        self.cfg.capacity_skip_gaps.min(100)
    }

    fn observe_capacity(&mut self, obs: &Observation) {
        let skip = self.capacity_skip();
        let (head, tail) = dispersion::intra_car_gaps_split(obs, skip);
        let tiny = common::tiny_gap(obs);
        match dispersion::capacity_from_gaps(&tail, tiny, 0.25, 20) {
            Some(c) => {
                self.capacity = Some(c.bps());
                self.capacity_measured = true;
                self.capacity_spread = gap_rate_spread(&tail, tiny);
                self.ledger.note(format!(
                    "capacity {c} from the short receive gaps of {} back-to-back trains ({} gaps, the first {skip} of each train skipped)",
                    self.cfg.capacity_trains.clamp(2, 100),
                    tail.len()
                ));
                // Say so when the head passed much faster: a token bucket's
                // burst allowance, which a pair probe would have read as C.
                // (A FIFO never spaces them closer than s·8/C: the highest
                // head rates are C.)
                if let Some(h) = dispersion::capacity_from_gaps(&head, tiny, 0.1, 4) {
                    if h.bps() > 1.5 * c.bps() {
                        self.ledger.note(format!(
                            "the first gaps of each train passed at {h}: the tight link lets a burst through (a token bucket), so back-to-back pairs would misread C"
                        ));
                    }
                }
            }
            None => {
                self.capacity_tries += 1;
                self.ledger.note(
                    "the capacity probe gave no capacity (too few pairs arrived, or the receiver bunches arrivals)",
                );
                if self.capacity_tries >= 2 {
                    self.slot.finish();
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
        let before = self.samples.len();
        // The last packet of car 2k and car 2k+1 form pair k.
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
        if let Some(m) = stats::mean(&self.samples[before..]) {
            self.batch_means.push(m);
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
                self.slot.finish();
            }
        }
        if self.received_pairs == 0 || self.coalesced || self.batches >= self.cfg.max_batches.max(1)
        {
            self.slot.finish();
        }
    }

    /// Why there is no estimate although pairs were read, if so: a mean at
    /// or below 0 is not a measurement of a saturated link that pairs could
    /// stand behind (more often `C` is wrong), so the method declines.
    fn refusal(&self) -> Option<String> {
        let (m, _) = self.mean_a()?;
        let c = self.capacity?;
        let why = if self.coalesced {
            "the receiver coalesces interrupts, so the pairs' output gaps are the interrupt's"
        } else {
            "a pair method cannot tell a saturated link from a wrong C"
        };
        (m <= 0.0).then(|| {
            format!(
                "no estimate: the pairs' mean A is {} for C = {} ({}); {why}",
                BitRate::from_bps(m),
                BitRate::from_bps(c),
                if self.capacity_measured {
                    "probed"
                } else {
                    "given"
                }
            )
        })
    }

    /// The 95 % half-width of the mean A: the larger of the per-pair
    /// samples' (1.96 standard errors) and the batch means' (Student's t
    /// over their spread).  Pairs of one batch are not independent draws of
    /// the time-average A — cross-traffic bursts longer than a pair interval
    /// reach several pairs — so the batch means, each over 0.2 s, show
    /// variance the per-pair errors miss (synthetic Poisson path, 30 % load:
    /// 85–90 % coverage from the per-pair band alone).  Plus the probed C's
    /// spread: A moves about one for one with C.
    fn half_width(&self) -> Option<f64> {
        let (_, se) = self.mean_a()?;
        let k = self.batch_means.len();
        let batch = (k >= 2)
            .then(|| {
                stats::std_dev(&self.batch_means)
                    .map(|sd| stats::t_quantile_975(k - 1) * sd / (k as f64).sqrt())
            })
            .flatten()
            .unwrap_or(0.0);
        let c = self.capacity.unwrap_or(0.0);
        Some((1.96 * se).max(batch) + self.capacity_spread * c)
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
        if let Some(p) = self.slot.again() {
            return p;
        }
        let (plan, stage) = match self.capacity {
            None => (ProbePlan::Schedule(self.capacity_plan()), Stage::Capacity),
            Some(c) => (ProbePlan::Schedule(self.pairs_plan(c)), Stage::Pairs),
        };
        self.slot.hand_out(plan, stage)
    }

    fn observe(&mut self, obs: &Observation) {
        let Some(stage) = self.slot.take() else {
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
        let mut notes = self.ledger.notes.clone();
        notes.extend(self.refusal());
        notes
    }

    fn estimate(&self) -> Option<Estimate> {
        let c = self.capacity?;
        let (mean, _) = self.mean_a()?;
        if self.refusal().is_some() {
            return None;
        }
        let a = mean.clamp(0.0, c);
        let half = self.half_width()?;
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
        // No narrower than the truth's own wander (common::floor_band).
        let (low, high) = common::floor_band(
            mean,
            (mean - half).clamp(0.0, c),
            Some((mean + half).clamp(0.0, c)),
        );
        Some(Estimate {
            stopped: None,
            method: crate::method_name::MethodName::Pair,
            available: BitRate::from_bps(a),
            low: BitRate::from_bps(low),
            high: high.map(|h| BitRate::from_bps(h.min(c))),
            capacity: Some(BitRate::from_bps(c)),
            cross_traffic: Some(BitRate::from_bps(c - a)),
            cost: self.ledger.cost,
            probe_span: self.ledger.probe_span(),
            converged: self.band_met && !self.coalesced,
            host_limited,
            trains: self.ledger.trains.clone(),
            notes,
            coalescing,
            host_evidence: None,
        })
    }
}

/// Half the inter-quartile range of the per-gap rates over their median:
/// how far the capacity probe's gaps disagree (0 when too few).
fn gap_rate_spread(gaps: &[(f64, Bytes)], tiny: DurationNs) -> f64 {
    let rates: Vec<f64> = gaps
        .iter()
        .filter(|g| g.0 > tiny.secs_f64())
        .map(|g| g.1.bits() as f64 / g.0)
        .collect();
    match (
        stats::quantile(&rates, 0.25),
        stats::quantile(&rates, 0.5),
        stats::quantile(&rates, 0.75),
    ) {
        (Some(q1), Some(m), Some(q3)) if m > 0.0 => ((q3 - q1) / 2.0 / m).min(1.0),
        _ => 0.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::methods::testpaths::{
        assert_blind_coverage, coalesced, fluid, mbps, poisson, poisson_bucket, rel_err, run,
    };
    use crate::synthetic::FluidPathConfig;

    fn known_capacity(c: f64) -> Pair {
        Pair::new(PairConfig {
            capacity: Some(mbps(c)),
            ..PairConfig::default()
        })
    }

    fn blind() -> Pair {
        Pair::new(PairConfig::default())
    }

    #[test]
    fn fluid_path_with_known_capacity_is_exact() {
        for load in [0.1, 0.5, 0.9] {
            let mut m = known_capacity(300.0);
            let (e, truth) = run(&mut m, fluid(300.0, load));
            let e = e.unwrap();
            assert!(rel_err(&e, truth) < 0.01, "load {load}: {}", e.available);
            assert!(e.converged, "load {load}: {:?}", e.host_evidence);
        }
    }

    #[test]
    fn high_load_runs_out_of_pairs_and_says_so() {
        let mut m = blind();
        let (e, truth) = run(&mut m, poisson(300.0, 0.9, 1));
        let e = e.unwrap();
        assert!(!e.converged);
        // The capacity probe and ten batches.
        assert_eq!(e.cost.trains, 11);
        // The band is honest: wide, and holding the truth.
        assert!(
            e.low.bps() <= truth && truth <= e.high.unwrap().bps(),
            "{e:?}"
        );
    }

    /// Blind, FIFO and token bucket, 30 % and 70 % load: an estimate every
    /// run, within 12 % of A — which C (43 % / 233 % above A), 2·A or 0
    /// would all miss — and C probed to 1 %.
    #[test]
    fn blind_on_fifo_and_token_bucket_paths() {
        for load in [0.3, 0.7] {
            for seed in 1..=5 {
                for (kind, cfg) in [
                    ("fifo", poisson(300.0, load, seed)),
                    ("bucket", poisson_bucket(300.0, load, seed)),
                ] {
                    let mut m = blind();
                    let (e, truth) = run(&mut m, cfg);
                    let e = e.unwrap_or_else(|| panic!("{kind} {load} {seed}: {:?}", m.notes()));
                    let c = e.capacity.unwrap().mbps();
                    assert!((c - 300.0).abs() < 3.0, "{kind} {load} {seed}: C {c}");
                    assert!(
                        rel_err(&e, truth) < 0.12,
                        "{kind} load {load} seed {seed}: {} vs {truth}",
                        e.available
                    );
                }
            }
        }
    }

    #[test]
    fn the_capacity_probe_sees_through_a_token_bucket_and_says_so() {
        let mut m = blind();
        let (e, _) = run(&mut m, poisson_bucket(300.0, 0.3, 1));
        let e = e.unwrap();
        assert!((e.capacity.unwrap().mbps() - 300.0).abs() < 3.0);
        assert!(
            e.notes.iter().any(|n| n.contains("token bucket")),
            "{:?}",
            e.notes
        );
        // Bounded cost: the probe is at most 0.3 MB.
        assert!(e.trains[0].bytes.get() <= 300_000, "{:?}", e.trains[0]);
        // A FIFO link gives no such note.
        let (e, _) = run(&mut blind(), poisson(300.0, 0.3, 1));
        assert!(!e.unwrap().notes.iter().any(|n| n.contains("token bucket")));
    }

    /// The band holds the truth in at least 90 % of blind runs on the
    /// Poisson paths, FIFO and token bucket, at 30 % and 70 % load.
    #[test]
    fn blind_band_coverage() {
        assert_blind_coverage("pair", 0.1);
    }

    #[test]
    fn an_idle_path_reads_capacity() {
        let mut m = blind();
        let (e, truth) = run(&mut m, fluid(300.0, 0.0));
        let e = e.unwrap();
        assert!(rel_err(&e, truth) < 0.01, "{}", e.available);
        // The capacity probe and the minimum three batches.
        assert_eq!(e.cost.trains, 4, "{:?}", e.notes);
        assert!(e.converged);
    }

    #[test]
    fn a_wrong_known_capacity_gives_no_estimate_rather_than_zero() {
        // Told C = 1 Gb/s on a 300 Mb/s path at 70 % load: every pair's
        // output gap holds far more than 1 Gb/s leaves room for, the mean A
        // is below 0, and the method declines, saying why, instead of
        // reporting 0.
        let mut m = known_capacity(1000.0);
        let (e, _) = run(&mut m, poisson(300.0, 0.7, 1));
        assert!(e.is_none(), "{e:?}");
        assert!(
            m.notes().iter().any(|n| n.contains("no estimate")),
            "{:?}",
            m.notes()
        );
    }

    #[test]
    fn coalescing_with_known_capacity_is_flagged_or_declined() {
        // Bunched pairs read nonsense (here a mean A below 0): the method
        // declines and says coalescing is why; an estimate, if any, would
        // be flagged and not converged.
        let mut m = known_capacity(300.0);
        let (e, _) = run(&mut m, coalesced(fluid(300.0, 0.3)));
        match e {
            Some(e) => {
                assert!(e.host_limited.is_some());
                assert!(!e.converged);
                assert!(e.coalescing.unwrap().detected);
            }
            None => assert!(
                m.notes().iter().any(|n| n.contains("coalesces")),
                "{:?}",
                m.notes()
            ),
        }
    }

    #[test]
    fn coalescing_blind_declines_and_says_why() {
        for cfg in [
            coalesced(fluid(300.0, 0.3)),
            coalesced(poisson_bucket(300.0, 0.3, 1)),
        ] {
            let mut m = blind();
            let (e, _) = run(&mut m, cfg);
            assert!(e.is_none(), "{e:?}");
            assert_eq!(m.next_plan(), ProbePlan::Done);
            assert!(
                m.notes().iter().any(|n| n.contains("bunches arrivals")),
                "{:?}",
                m.notes()
            );
        }
    }

    #[test]
    fn all_lost_gives_no_estimate() {
        let cfg = FluidPathConfig {
            queue_limit: Some(Bytes::ZERO),
            ..fluid(300.0, 0.5)
        };
        let mut m = blind();
        let (e, _) = run(&mut m, cfg);
        assert!(e.is_none());
        assert_eq!(m.next_plan(), ProbePlan::Done);
    }
}
