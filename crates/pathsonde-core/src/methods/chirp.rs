//! Chirps (Ribeiro, Riedi, Baraniuk, Navratil & Cottrell, pathChirp), as a
//! sans-IO [`Method`].
//!
//! A chirp is `N` packets whose gaps shrink geometrically: gap `k` is
//! `Δ_k = Δ_1 / γ^(k−1)` (spread factor `γ`), so packet `k` is sent at the
//! instantaneous rate `R_k = s·8 / Δ_k`, sweeping from a low rate to a high
//! one in one chirp.  While `R_k` is below the available bandwidth the
//! queueing delay `q_k` (one-way delay less the chirp's smallest) only
//! rises on cross-traffic bursts and falls back: a terminated *excursion*.
//! Once `R_k` exceeds `A` for good the delay keeps rising to the end of the
//! chirp.  Each chirp gives an estimate
//!
//! ```text
//! D = Σ_k E_k Δ_k / Σ_k Δ_k
//! ```
//!
//! where `E_k = R_k` on the rising steps of terminated excursions (the rate
//! that momentarily exceeded what was free), and `E_k = R_l` elsewhere,
//! `R_l` being the rate at which the final, unterminated excursion began
//! (the highest rate if none).  pathChirp takes `R_l` itself; this
//! implementation takes `R_l/√γ`, the geometric middle of the last rate that
//! fit and the first that did not, which removes a systematic over-estimate
//! of up to `γ − 1`.  Chirps are averaged (smoothing) until the 95 %
//! confidence band of the mean is narrow enough.
//!
//! Each step of a chirp is a car of `car_packets` packets sent back to back
//! (default 2), read by its last packet's delay, so that a tight link that
//! is a token bucket shows its queue from the first step above A
//! ([`ChirpConfig::car_packets`]).
//!
//! Blind by default: chirps are cut at `C` only when the user gave one
//! (`--known-capacity`).  The band `low..high` is the wider of the chirps'
//! and the schedules' 95 % bands plus the rate grid's half step (see
//! `Chirp::half_width`); `converged` means the stopping rule was met, no
//! host limit was seen and most chirps were not cut at a known C.
//! Synthetic Poisson path, 30 % and 70 % load, 20 runs each, FIFO and
//! behind a two-frame bucket: the band held the truth in 95–100 % of runs
//! (docs/methods/chirp.md).

use super::common::{self, Ledger};
use super::slot::PlanSlot;
use crate::estimate::Estimate;
use crate::method::Method;
use crate::observation::Observation;
use crate::plan::ProbePlan;
use crate::stats;
use crate::units::{BitRate, Bytes, DurationNs};
use serde::{Deserialize, Serialize};

/// Everything the chirp method can be told.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct ChirpConfig {
    /// IP datagram size.  Default 1500 B.
    pub packet_size: Bytes,
    /// The highest instantaneous rate of a chirp.  Default 1 Gb/s.
    pub max_rate: BitRate,
    /// The lowest, as a fraction of `max_rate`.  Default 0.01.
    pub min_rate_share: f64,
    /// Spread factor γ.  Default 1.1.
    pub spread: f64,
    /// An excursion ends when the delay falls back below its peak rise
    /// divided by this (pathChirp's F).  pathChirp uses 1.5; with packet
    /// cross traffic that ends the final excursion on every dip, so `R_l`
    /// lands too high (synthetic Poisson path at 300 Mb/s: +5 % at 10 %
    /// load, +30 % at 50 %, +115 % at 90 %).  Default 4 (−6 … +12 %).
    pub decrease_factor: f64,
    /// Excursions shorter than this many steps are ignored (pathChirp's
    /// L).  Default 8: with cars, a cross-traffic burst lifts a few steps'
    /// delays at rates below A, and pathChirp's 5 counted those as the rate
    /// that "momentarily exceeded what was free", pulling the estimate low
    /// at high load (synthetic Poisson path, 70 % load, 20 seeds: −8.5 %
    /// with 5, −1.2 % with 8; 3 gave −21 %, 10 and 12 the same as 8).
    pub busy_length: u32,
    /// Packets sent back to back for each step of a chirp (a car), whose
    /// last packet's delay is the step's reading.  A tight link that is a
    /// token bucket of depth `b` (Linux tbf; many shaped access links)
    /// behaves as a FIFO whose queue may fall to `−b`: after any idle
    /// moment the bucket is full, and a single packet passes without delay
    /// until the chirp's excess over A has used up `b − s` — the lab's tbf
    /// (b = two frames) at 30 % load read +87 % that way.  A car of `k`
    /// packets with `k·s ≥ b` spends the whole bucket itself: below A the
    /// bucket refills between cars (at `C − X = A`) and the car's last
    /// packet waits no longer than the car's own transmission; above A it
    /// does not refill, and the last packet's delay grows from the first
    /// step on — the onset lands at A behind a bucket as on a FIFO link.
    /// The rates are the cars' rates.  Default 2 (buckets of up to two
    /// frames, as the lab's); 1 is pathChirp's single packets.  Synthetic
    /// Poisson path, 300 Mb/s, 20 seeds, FIFO / two-frame bucket: median
    /// |error| 2.2 / 2.1 % at 30 % load and 8.1 / 8.2 % at 70 % (single
    /// packets: 1.8 / 33.0 % and 5.8 / 19.6 %).
    #[serde(default = "default_car_packets")]
    pub car_packets: u32,
    /// Chirps per schedule.  Default 20 (with cars of 2, as many packets
    /// as pathChirp's 40 single-packet chirps).
    pub chirps: u32,
    /// Idle time after each chirp, as a multiple of its duration (at least
    /// 2 ms).  Default 1.
    pub idle_ratio: f64,
    /// Schedules are sent until the 95 % band of the mean is at most this
    /// share of it ...  Default 0.05.
    pub target_band: f64,
    /// ... or this many schedules were sent.  Default 5.
    pub max_schedules: u32,
    /// The tight link's capacity, when the user stated it
    /// (`--known-capacity`, `MethodSettings::known_capacity`); blind runs
    /// leave it `None` and nothing is cut.  No chirp's estimate may exceed it: behind a
    /// token bucket with tokens to spare the queue does not grow until a
    /// chirp is well past C (the lab's tbf: a median 437 Mb/s for C = 297),
    /// and such a chirp says only that A ≤ C.  Default none.
    #[serde(default)]
    pub capacity: Option<BitRate>,
}

impl Default for ChirpConfig {
    fn default() -> Self {
        ChirpConfig {
            packet_size: Bytes(1500),
            max_rate: BitRate::from_gbps(1.0),
            min_rate_share: 0.01,
            spread: 1.1,
            decrease_factor: 4.0,
            busy_length: 8,
            car_packets: default_car_packets(),
            chirps: 20,
            idle_ratio: 1.0,
            target_band: 0.05,
            max_schedules: 5,
            capacity: None,
        }
    }
}

fn default_car_packets() -> u32 {
    2
}

/// The estimate of one chirp from its queueing delays `q` (one per packet)
/// and gaps `gaps` (seconds, one fewer), with packet size `bits`.
pub(crate) fn chirp_estimate(
    q: &[f64],
    gaps: &[f64],
    bits: f64,
    spread: f64,
    f: f64,
    l: usize,
) -> Option<f64> {
    let n = q.len();
    if n < 3 || gaps.len() + 1 != n || gaps.iter().any(|g| g.is_nan() || *g <= 0.0) {
        return None;
    }
    let rate = |k: usize| bits / gaps[k];
    // E_k for k in 0..n−1 (gap k is between packets k and k+1); None = "R_l".
    let mut e: Vec<Option<f64>> = vec![None; n - 1];
    let mut last_start: Option<usize> = None;
    let mut i = 0;
    while i + 1 < n {
        if q[i + 1] <= q[i] {
            i += 1;
            continue;
        }
        // An excursion starts at i: find where it ends.
        let mut peak = 0.0f64;
        let mut end = None;
        for j in i + 1..n {
            let rise = q[j] - q[i];
            peak = peak.max(rise);
            if j > i + 1 && rise < peak / f {
                end = Some(j);
                break;
            }
        }
        match end {
            Some(j) => {
                if j - i >= l {
                    for k in i..j {
                        if q[k + 1] > q[k] {
                            e[k] = Some(rate(k));
                        }
                    }
                }
                i = j;
            }
            None => {
                last_start = Some(i);
                break;
            }
        }
    }
    let r_l = match last_start {
        Some(k) => rate(k) / spread.sqrt(),
        None => rate(n - 2),
    };
    if let Some(k) = last_start {
        for slot in e.iter_mut().skip(k) {
            *slot = None;
        }
    }
    let total: f64 = gaps.iter().sum();
    let weighted: f64 = e.iter().zip(gaps).map(|(v, g)| v.unwrap_or(r_l) * g).sum();
    let d = weighted / total;
    d.is_finite().then_some(d)
}

/// The chirp method.
#[derive(Debug, Clone)]
pub(crate) struct Chirp {
    cfg: ChirpConfig,
    ledger: Ledger,
    slot: PlanSlot<()>,
    per_chirp: Vec<f64>,
    /// The mean of each schedule's chirps (schedules with none left out).
    schedule_means: Vec<f64>,
    /// Chirps whose estimate exceeded the known capacity and was cut to it.
    above_capacity: u32,
    discarded: u32,
    /// Chirps discarded because the sender did not hold their spacing.
    mispaced: u32,
    schedules: u32,
    coalesced: bool,
    band_met: bool,
    /// The rates the next chirps sweep, `(lowest, highest)` b/s, once a
    /// schedule has read A (see [`Chirp::narrow_range`]); `None`: the
    /// configured `max_rate·min_rate_share .. max_rate`.
    range: Option<(f64, f64)>,
}

impl Chirp {
    pub fn new(cfg: ChirpConfig) -> Self {
        Chirp {
            cfg,
            ledger: Ledger::default(),
            slot: PlanSlot::default(),
            per_chirp: Vec::new(),
            schedule_means: Vec::new(),
            above_capacity: 0,
            discarded: 0,
            mispaced: 0,
            schedules: 0,
            coalesced: false,
            band_met: false,
            range: None,
        }
    }

    fn size(&self) -> Bytes {
        common::packet_bytes(self.cfg.packet_size)
    }
    /// Packets per step (car).
    fn car(&self) -> u32 {
        self.cfg.car_packets.clamp(1, 16)
    }
    /// Bits per step: a car's.
    fn step_bits(&self) -> f64 {
        (self.size().bits() * u64::from(self.car())) as f64
    }
    fn spread(&self) -> f64 {
        if self.cfg.spread.is_finite() && self.cfg.spread > 1.01 && self.cfg.spread < 4.0 {
            self.cfg.spread
        } else {
            1.1
        }
    }

    /// The 95 % half-width of the mean of the chirps: the larger of the
    /// chirps' own (1.96 standard errors) and the schedule means'
    /// (Student's t over their spread).  The chirps of one schedule are not
    /// independent draws — one cross-traffic burst spans several chirps,
    /// and the idle time between them is as long as a chirp — so their
    /// standard error understates the band: on the synthetic FIFO Poisson
    /// path (300 Mb/s, blind) it held the truth in 85 % of runs at 30 %
    /// load and 70 % at 70 %.  Plus the rate grid's resolution: a chirp's
    /// onset is known only to one step of its rates (a factor γ), and
    /// `R_l/√γ` is the step's middle, so each chirp is off by up to a
    /// factor `√γ` in a direction the chirps share — averaging does not
    /// remove it (FIFO, 70 % load: 80 % coverage without it).
    fn half_width(&self) -> Option<f64> {
        let n = self.per_chirp.len();
        let sd = stats::std_dev(&self.per_chirp).unwrap_or(0.0);
        let chirps = 1.96 * sd / (n.max(1) as f64).sqrt();
        let k = self.schedule_means.len();
        let schedules = match (k >= 2, stats::std_dev(&self.schedule_means)) {
            (true, Some(sd)) => stats::t_quantile_975(k - 1) * sd / (k as f64).sqrt(),
            _ => 0.0,
        };
        let grid = stats::mean(&self.per_chirp)? * (self.spread().sqrt() - 1.0);
        (n > 0).then_some(chirps.max(schedules) + grid)
    }

    /// After a schedule, the next chirps sweep `A/4 .. 3·A` around the mean
    /// so far (no higher than `max_rate`), not `max_rate·min_rate_share ..
    /// max_rate`: a chirp's fast end at the 1 Gb/s default floods a slow
    /// path for every chirp (the lab at 100 Mb/s and 90 % load: probe rate
    /// 2.5 × A, about 5,900 packets dropped at the tight link per run), and
    /// the rates far below A only say what the first schedule said.
    fn narrow_range(&mut self) {
        let Some(m) = stats::mean(&self.per_chirp).filter(|m| m.is_finite() && *m > 0.0) else {
            return;
        };
        let top = common::sane_rate(self.cfg.max_rate, BitRate::from_gbps(1.0)).bps();
        let hi = (3.0 * m).min(top);
        let lo = (m / 4.0).min(hi / 2.0);
        self.range = Some((lo, hi));
    }

    /// The known capacity (b/s), if a sane one was given.
    fn capacity(&self) -> Option<f64> {
        self.cfg
            .capacity
            .map(|c| c.bps())
            .filter(|c| c.is_finite() && *c > 0.0)
    }

    /// Gaps of one chirp, seconds.
    fn gaps(&self) -> Vec<f64> {
        let top = common::sane_rate(self.cfg.max_rate, BitRate::from_gbps(1.0)).bps();
        let (max, share) = match self.range {
            Some((lo, hi)) => (hi, lo / hi),
            None => (top, common::sane_fraction(self.cfg.min_rate_share, 0.01)),
        };
        let g = self.spread();
        let steps = ((1.0 / share).ln() / g.ln()).ceil().clamp(2.0, 500.0) as usize;
        let first = self.step_bits() / (max * share);
        (0..=steps).map(|k| first / g.powi(k as i32)).collect()
    }

    fn plan(&self) -> ProbePlan {
        let gaps = self.gaps();
        let k = self.car();
        let mut offs = vec![(DurationNs::ZERO, k)];
        let mut t = 0.0;
        for g in &gaps {
            t += g;
            offs.push((DurationNs::from_secs_f64(t), k));
        }
        let ratio = if self.cfg.idle_ratio.is_finite() && self.cfg.idle_ratio >= 0.0 {
            self.cfg.idle_ratio
        } else {
            1.0
        };
        let idle = DurationNs::from_secs_f64((t * ratio).max(2e-3));
        let n = self.cfg.chirps.clamp(1, 1000) as usize;
        ProbePlan::Schedule(common::schedule_of_groups(
            self.size(),
            &vec![offs; n],
            idle,
            DurationNs::ZERO,
        ))
    }

    fn read(&mut self, obs: &Observation) {
        let per = self.gaps().len() as u32 + 1;
        let pk = crate::dispersion::unique_packets(obs);
        let tiny = common::tiny_gap(obs);
        let bits = self.step_bits();
        let k = self.car() as usize;
        let f = if self.cfg.decrease_factor.is_finite() && self.cfg.decrease_factor > 1.0 {
            self.cfg.decrease_factor
        } else {
            1.5
        };
        let l = self.cfg.busy_length.clamp(1, 100) as usize;
        let planned = self.gaps();
        // Chirps by index, from the packets present (a runner's car numbers
        // are not trusted to be dense or small).
        let mut by_chirp: std::collections::BTreeMap<u32, Vec<crate::observation::PacketRecord>> =
            std::collections::BTreeMap::new();
        for p in &pk {
            by_chirp.entry(p.car / per).or_default().push(*p);
        }
        for these in by_chirp.into_values() {
            if these.len() != per as usize * k || these.iter().any(|p| p.received.is_none()) {
                self.discarded += 1;
                continue;
            }
            // Each car's last packet (by sequence): it queued behind the
            // rest of its car, so its delay does not depend on the tokens
            // a bucket had to spare.
            let mut lasts: Vec<crate::observation::PacketRecord> = Vec::with_capacity(per as usize);
            for p in &these {
                match lasts.last_mut() {
                    Some(l) if l.car == p.car => {
                        if p.seq > l.seq {
                            *l = *p;
                        }
                    }
                    _ => lasts.push(*p),
                }
            }
            if lasts.len() != per as usize {
                self.discarded += 1;
                continue;
            }
            let d = common::owds(&lasts, tiny, false);
            let q: Vec<f64> = d.iter().map(|o| o.delay).collect();
            // Achieved send gaps: what the queue saw.
            let gaps: Vec<f64> = d.windows(2).map(|w| w[1].sent - w[0].sent).collect();
            // A chirp the sender could not shape (a late packet, then a
            // catch-up burst) is not a chirp: its rates are the host's.
            let off = gaps
                .iter()
                .zip(&planned)
                .filter(|(g, p)| (**g - **p).abs() > 0.5 * **p)
                .count();
            if off * 10 > gaps.len() {
                self.mispaced += 1;
                self.discarded += 1;
                continue;
            }
            match chirp_estimate(&q, &gaps, bits, self.spread(), f, l) {
                Some(v) => match self.capacity() {
                    Some(c) if v > c => {
                        self.above_capacity += 1;
                        self.per_chirp.push(c);
                    }
                    _ => self.per_chirp.push(v),
                },
                None => self.discarded += 1,
            }
        }
    }
}

impl Method for Chirp {
    fn name(&self) -> &'static str {
        "chirp"
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
        let (share, pairs) = common::bunched_share(&seen.packets, common::tiny_gap(obs));
        let bunched = seen.coalesced() || (pairs >= 10 && share > 0.2);
        if bunched && !self.coalesced {
            self.coalesced = true;
            self.ledger.note(
                "interrupt coalescing detected: a chirp's per-packet delays are the interrupt's, so its excursions cannot be read",
            );
        }
        let before = self.per_chirp.len();
        self.read(obs);
        if let Some(m) = stats::mean(&self.per_chirp[before..]) {
            self.schedule_means.push(m);
        }
        self.schedules += 1;
        self.narrow_range();
        let band = common::sane_fraction(self.cfg.target_band, 0.05);
        if let (Some(m), Some(sd)) = (
            stats::mean(&self.per_chirp),
            stats::std_dev(&self.per_chirp),
        ) {
            if 1.96 * sd / (self.per_chirp.len() as f64).sqrt() <= band * m {
                self.band_met = true;
                self.slot.finish();
            }
        }
        if self.coalesced || self.schedules >= self.cfg.max_schedules.max(1) {
            self.slot.finish();
        }
        if self.per_chirp.is_empty() && self.schedules >= 2 {
            self.slot.finish();
            if self.mispaced > 0 {
                self.ledger.note(format!(
                    "{} chirps discarded: the sending host could not hold their spacing",
                    self.mispaced
                ));
            }
        }
    }

    fn notes(&self) -> Vec<String> {
        self.ledger.notes.clone()
    }

    fn estimate(&self) -> Option<Estimate> {
        let m = stats::mean(&self.per_chirp)?;
        let n = self.per_chirp.len();
        let half = self.half_width()?;
        let mut notes = self.ledger.notes.clone();
        notes.push(format!(
            "{n} chirps averaged, {} discarded (loss or too short)",
            self.discarded
        ));
        // Chirps are cut only when a capacity is known.
        if let (cut @ 1.., Some(c)) = (self.above_capacity, self.capacity()) {
            notes.push(format!(
                "{cut} of {n} chirps read more than the known capacity {} and were cut to it: the queue did not grow until the chirp was past C, as behind a token bucket with tokens to spare (docs/methods/chirp.md); those chirps bound A only from above",
                BitRate::from_bps(c)
            ));
        }
        let total = self.mispaced + n as u32;
        let host_limited = if self.coalesced {
            Some("receiver interrupt coalescing: chirp excursions need per-packet delays, so this estimate is not trustworthy".to_string())
        } else if self.mispaced * 2 > total {
            Some(format!(
                "the sending host could not hold the chirp spacing: {} of {total} chirps discarded",
                self.mispaced
            ))
        } else {
            None
        };
        let max = common::sane_rate(self.cfg.max_rate, BitRate::from_gbps(1.0));
        if m >= max.bps() * 0.95 {
            notes.push(format!(
                "A is near the chirps' highest rate {max}: raise --max-rate for an upper bound"
            ));
        }
        // No narrower than the truth's own wander (common::floor_band).
        let (low, high) = common::floor_band(m, (m - half).max(0.0), Some(m + half));
        Some(Estimate {
            stopped: None,
            method: crate::method_name::MethodName::Chirp,
            available: BitRate::from_bps(m),
            low: BitRate::from_bps(low),
            high: high.map(BitRate::from_bps),
            capacity: None,
            cross_traffic: None,
            cost: self.ledger.cost,
            probe_span: self.ledger.probe_span(),
            // Mostly cut chirps give an upper bound, not a measurement.
            converged: self.band_met
                && host_limited.is_none()
                && self.above_capacity * 2 <= n as u32,
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
    use crate::methods::testpaths::{
        assert_blind_coverage, assert_flagged_or_explained, coalesced, fluid, poisson, rel_err, run,
    };
    use crate::synthetic::FluidPathConfig;

    #[test]
    fn a_single_rising_excursion_gives_its_start_rate() {
        // Delays flat then rising from packet 5: R_l = rate of gap 5 / √γ.
        let gaps: Vec<f64> = (0..10).map(|k| 1e-3 / 1.1f64.powi(k)).collect();
        let q: Vec<f64> = (0..11)
            .map(|k| if k <= 5 { 0.0 } else { (k - 5) as f64 * 1e-5 })
            .collect();
        let d = chirp_estimate(&q, &gaps, 12_000.0, 1.1, 1.5, 5).unwrap();
        let want = 12_000.0 / gaps[5] / 1.1f64.sqrt();
        assert!((d - want).abs() / want < 1e-9, "{d} vs {want}");
        // A flat chirp: the highest rate.
        let d = chirp_estimate(&[0.0; 11], &gaps, 12_000.0, 1.1, 1.5, 5).unwrap();
        assert!((d - 12_000.0 / gaps[9]).abs() < 1e-6);
        assert!(chirp_estimate(&[0.0; 3], &gaps, 1.0, 1.1, 1.5, 5).is_none());
    }

    #[test]
    fn a_terminated_excursion_pulls_the_estimate_down() {
        let gaps: Vec<f64> = vec![1e-3; 12];
        // A bump over packets 2..9 that falls back, then flat.
        let q = [
            0.0, 0.0, 0.0, 1.0, 2.0, 3.0, 4.0, 3.0, 1.0, 0.0, 0.0, 0.0, 0.0,
        ];
        let d = chirp_estimate(&q, &gaps, 12_000.0, 1.1, 1.5, 5).unwrap();
        // Every gap is the same rate (12 Mb/s): rising steps and "elsewhere"
        // both give 12 Mb/s.
        assert!((d - 12e6).abs() < 1.0);
    }

    #[test]
    fn fluid_and_poisson_paths() {
        for load in [0.1, 0.3, 0.5, 0.7, 0.9] {
            let mut m = Chirp::new(ChirpConfig::default());
            let (e, truth) = run(&mut m, fluid(300.0, load));
            let e = e.unwrap();
            assert!(
                rel_err(&e, truth) < 0.06,
                "fluid load {load}: {}",
                e.available
            );
        }
        for load in [0.1, 0.3, 0.5, 0.7] {
            let errs: Vec<f64> = (1..=3)
                .map(|s| {
                    let mut m = Chirp::new(ChirpConfig::default());
                    let (e, truth) = run(&mut m, poisson(300.0, load, s));
                    rel_err(&e.unwrap(), truth)
                })
                .collect();
            assert!(
                stats::median(&errs).unwrap() < 0.1,
                "poisson load {load}: {errs:?}"
            );
        }
    }

    /// Blind, FIFO Poisson path at 30 % and 70 % load: an estimate every
    /// run, each within 12 % of A (C is 43 % / 233 % above A, 2·A 100 %),
    /// and the band holding the truth in at least 90 % of 20 runs — on a
    /// FIFO link and behind the lab's two-frame token bucket.
    #[test]
    fn blind_fifo_accuracy_and_band_coverage() {
        for load in [0.3, 0.7] {
            for seed in 1..=5 {
                let mut m = Chirp::new(ChirpConfig::default());
                let (e, truth) = run(&mut m, poisson(300.0, load, seed));
                let e = e.unwrap_or_else(|| panic!("{load} {seed}: {:?}", m.notes()));
                assert!(rel_err(&e, truth) < 0.12, "{load} {seed}: {}", e.available);
            }
        }
        assert_blind_coverage("chirp", 0.1);
    }

    #[test]
    fn a_chirp_never_reads_more_than_a_known_capacity() {
        // The runner says C = 200 Mb/s on a 300 Mb/s path at 10 % load, as
        // a link that lets probes burst past its rate looks: every chirp
        // reads about 270 and is cut to 200, and the estimate says why.
        let told = |c: f64| {
            Chirp::new(ChirpConfig {
                max_rate: BitRate::from_mbps(600.0),
                capacity: Some(BitRate::from_mbps(c)),
                ..ChirpConfig::default()
            })
        };
        let (e, _) = run(&mut told(200.0), fluid(300.0, 0.1));
        let e = e.unwrap();
        assert!((e.available.mbps() - 200.0).abs() < 1e-6, "{}", e.available);
        assert!(!e.converged);
        assert!(
            e.notes.iter().any(|n| n.contains("known capacity")),
            "{:?}",
            e.notes
        );
        // With the true C given, nothing is cut.
        let (e, truth) = run(&mut told(300.0), fluid(300.0, 0.1));
        let e = e.unwrap();
        assert!(rel_err(&e, truth) < 0.06, "{} vs {truth}", e.available);
        assert!(!e.notes.iter().any(|n| n.contains("known capacity")));
    }

    #[test]
    fn an_idle_path_reads_its_capacity() {
        // No cross traffic: the final excursion starts where the chirp
        // crosses C.
        let mut m = Chirp::new(ChirpConfig::default());
        let (e, truth) = run(&mut m, fluid(300.0, 0.0));
        let e = e.unwrap();
        assert!(rel_err(&e, truth) < 0.06, "{}", e.available);
        assert!(e.converged);
    }

    #[test]
    fn a_sender_that_cannot_shape_chirps_is_flagged() {
        // Cars up to 60 µs late: the fast end of every chirp (24 µs gaps
        // between cars of two) is mis-shaped.
        let cfg = FluidPathConfig {
            send_jitter: DurationNs::from_us(60),
            ..fluid(300.0, 0.3)
        };
        let mut m = Chirp::new(ChirpConfig::default());
        let (e, _) = run(&mut m, cfg);
        assert_flagged_or_explained(e, &m, "could not hold");
    }

    #[test]
    fn coalescing_is_flagged() {
        let mut m = Chirp::new(ChirpConfig::default());
        let (e, _) = run(&mut m, coalesced(fluid(300.0, 0.3)));
        let e = e.unwrap();
        assert!(e.host_limited.is_some());
        assert!(!e.converged);
        assert!(e.notes.iter().any(|n| n.contains("coalescing")));
        // One schedule is enough to tell.
        assert_eq!(e.cost.trains, 1);
    }

    #[test]
    fn all_lost_gives_no_estimate() {
        let cfg = FluidPathConfig {
            queue_limit: Some(Bytes::ZERO),
            ..fluid(300.0, 0.5)
        };
        let mut m = Chirp::new(ChirpConfig::default());
        let (e, _) = run(&mut m, cfg);
        assert!(e.is_none());
        assert_eq!(m.next_plan(), ProbePlan::Done);
    }
}

#[cfg(test)]
mod debug {
    use super::*;
    use crate::methods::testpaths::{poisson, run};

    #[test]
    #[ignore]
    fn debug_chirp() {
        let env = |k: &str, d: f64| {
            std::env::var(k)
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(d)
        };
        for load in [0.1, 0.3, 0.5, 0.7, 0.9] {
            let mut s = Vec::new();
            for seed in 1..=4 {
                let mut m = Chirp::new(ChirpConfig {
                    decrease_factor: env("F", 4.0),
                    busy_length: env("L", 5.0) as u32,
                    spread: env("G", 1.1),
                    ..ChirpConfig::default()
                });
                let (e, truth) = run(&mut m, poisson(300.0, load, seed));
                s.push(e.unwrap().available.bps() / truth - 1.0);
            }
            println!(
                "load {load}: signed {:?}",
                s.iter()
                    .map(|x| (x * 1000.0).round() / 10.0)
                    .collect::<Vec<_>>()
            );
        }
    }
}
