//! A deterministic synthetic path for testing train-based methods.
//!
//! [`FluidPath`] carries a [`TrainSpec`] across one modelled bottleneck and
//! returns the [`Observation`] a runner would, with exact (or deliberately
//! degraded) timestamps.  It is pure: no clock, no I/O, no OS entropy.  Given
//! the same configuration (seed included) and the same sequence of trains it
//! returns the same observations, bit for bit.
//!
//! # What it models
//!
//! * **Sender.**  Car `k` is scheduled at the spec's car offset, plus an
//!   optional uniform send jitter in `[0, send_jitter]`.  Its packets leave
//!   back to back at the sender's line rate `L`; a car cannot start before the
//!   previous one has finished serialising, so asking for more than `L` yields
//!   back-to-back cars at `L` (a host-limited sender).  The send stamp is the
//!   instant a packet starts onto the wire.
//! * **Bottleneck.**  One FIFO of capacity `C` shared by the probe packets and
//!   *fluid* cross traffic of rate `X`: cross traffic arrives as a continuous
//!   flow, so the work in the queue (the backlog `W`, in bytes) grows at
//!   `X − C` while positive and the queue serves at `C`.  A probe packet whose
//!   last bit reaches the queue at `t` waits for all the work ahead of it —
//!   earlier probe bytes and the cross traffic that arrived before it — and
//!   leaves at `t + (W + size) / C`.  For a long train at rate `R > C − X` the
//!   queue never empties and probe bytes leave at `R·C / (R + X)`; below
//!   `C − X` the queue drains between cars and the train leaves at `R`.
//! * **Cross-traffic noise.**  Optionally the cross rate in each
//!   `noise_interval` slot is `X·(1 + e)`, `e` uniform with standard deviation
//!   `cross_noise` (clamped so the rate stays ≥ 0), drawn from a hash of the
//!   seed and the slot number.
//! * **Packet-level Poisson cross traffic** (optional, `poisson_cross`):
//!   instead of a fluid, cross traffic arrives as packets of one fixed size
//!   with exponential gaps (mean rate X, seeded); each adds its size to the
//!   backlog at its arrival instant (drop-tail at the queue limit).  Over a
//!   train of duration `T` the cross rate it meets then varies with standard
//!   deviation `√(X·s/T)` — the noise a real path's Poisson cross traffic
//!   adds, which `cross_noise` does not reproduce.  `cross_noise` is ignored
//!   in this mode.
//! * **Token-bucket tight link** (optional, `bucket`): the tight link is a
//!   shaper of rate `C` with a bucket of `B` bytes, as Linux tbf is, rather
//!   than a wire of rate `C`.  Tokens accrue at `C` up to `B` while the queue
//!   is empty; a packet that finds tokens for all its bytes leaves at once
//!   (at the rate it arrived, the sender's line rate), otherwise it waits for
//!   them.  Modelled as a backlog that may go negative down to `−B` (spare
//!   tokens): a packet leaves `max(0, W + size)/C` after it arrives.  After
//!   an idle moment the first `B` bytes of a back-to-back train pass at the
//!   sender's line rate; with `B` = two frames (the lab's tbf) a back-to-back
//!   *pair* is not spread by the link at all.  Cross traffic consumes tokens
//!   alike.
//! * **Finite queue.**  Optionally at most `queue_limit` bytes of work: a probe
//!   packet that would exceed it is dropped (drop-tail), and fluid above it is
//!   discarded.
//! * **Receiver.**  A propagation delay, then optional periodic coalescing:
//!   arrivals are released (and stamped) at the next multiple of the
//!   coalescing interval on the receiver's clock, all with the same stamp.
//! * **Clocks.**  Send and receive stamps each carry their own offset and are
//!   truncated to their clock's resolution.
//!
//! # What it does not model
//!
//! Packetised cross traffic other than Poisson (without `poisson_cross`,
//! single-packet dispersion is never disturbed by a cross packet slipping
//! between probe packets), more than one hop, link
//! layer framing, loss anywhere but the bottleneck queue, reordering in the
//! network, adaptive (timer-armed) coalescing, the sender's own timer slack
//! beyond the uniform jitter, and cross traffic that reacts to the probe (TCP).
//! Between trains the path idles for `train_gap`, plus the plan's
//! `idle_before`.

use crate::estimate::Estimate;
use crate::method::Method;
use crate::observation::{ClockInfo, ClockSource, Observation, PacketRecord};
use crate::path::ProbePath;
use crate::plan::{ProbePlan, ScheduleSpec, TrainSpec};
use crate::runner;
use crate::units::{BitRate, Bytes, DurationNs, TimeNs};

/// A tiny, seeded pseudo-random generator (Steele, Lea & Flood's SplitMix64).
///
/// Good enough for test noise, fully determined by its seed, and free of any
/// dependency or OS entropy.
#[derive(Debug, Clone)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    pub const fn new(seed: u64) -> Self {
        SplitMix64 { state: seed }
    }
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix64(self.state)
    }
    /// Uniform in `[0, 1)`.
    pub fn next_f64(&mut self) -> f64 {
        unit_f64(self.next_u64())
    }

    /// A generator for stream `stream` of `seed`: one seed can feed many
    /// independent generators (one per flow, say) without any two starting
    /// from nearby states, which for SplitMix64 would make them overlap.
    pub fn for_stream(seed: u64, stream: u64) -> Self {
        SplitMix64::new(mix64(
            seed ^ mix64(stream.wrapping_add(0x243F_6A88_85A3_08D3)),
        ))
    }

    /// Uniform in `[0, n)`; 0 when `n` is 0.  Multiply-shift rather than `%`,
    /// so that there is no modulo bias worth speaking of.
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// Exponentially distributed with the given mean (inverse transform).
    /// Always finite: the uniform draw is taken from `(0, 1]`.
    pub fn exponential(&mut self, mean: f64) -> f64 {
        -mean * (1.0 - self.next_f64()).ln()
    }

    /// Pareto (type I) with the given shape `α` and scale `x_m`: `P(X > x) =
    /// (x_m / x)^α` for `x ≥ x_m`.  The uniform draw is taken from `(0, 1]`,
    /// so the largest value is `x_m · 2^(53/α)`: finite for shapes above
    /// 0.06.
    pub fn pareto(&mut self, shape: f64, scale: f64) -> f64 {
        scale * (1.0 - self.next_f64()).powf(-1.0 / shape)
    }
}

/// The SplitMix64 output function: a good 64-bit mixer.
fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn unit_f64(x: u64) -> f64 {
    (x >> 11) as f64 / (1u64 << 53) as f64
}

/// Safety cap on the packets one synthetic train may hold (memory, test time).
/// A spec asking for more is truncated to its first cars.
pub const MAX_SYNTHETIC_PACKETS: u64 = 2_000_000;

/// Everything that defines a [`FluidPath`].  Build with [`FluidPathConfig::new`]
/// and adjust fields with struct-update syntax.
#[derive(Debug, Clone, PartialEq)]
pub struct FluidPathConfig {
    /// Bottleneck capacity C.
    pub capacity: BitRate,
    /// Mean cross-traffic rate X at the bottleneck.
    pub cross_traffic: BitRate,
    /// The sender NIC's line rate L: the rate inside a car, and the most the
    /// sender can achieve.
    pub sender_line_rate: BitRate,
    /// Each car starts late by a uniform amount in `[0, send_jitter]`.
    pub send_jitter: DurationNs,
    /// Bottleneck queue size; `None` for unbounded.
    pub queue_limit: Option<Bytes>,
    /// Relative standard deviation of the cross rate per `noise_interval` slot.
    pub cross_noise: f64,
    pub noise_interval: DurationNs,
    /// Packet-level Poisson cross traffic: packets of this size with
    /// exponential gaps at mean rate `cross_traffic` (seeded by `seed`).
    /// `None` (the default) for fluid cross traffic.
    pub poisson_cross: Option<Bytes>,
    /// The tight link is a token bucket of rate `capacity` and this depth
    /// (see the module docs); `None` (the default) for a plain FIFO served
    /// at `capacity`.
    pub bucket: Option<Bytes>,
    pub send_clock: ClockInfo,
    pub recv_clock: ClockInfo,
    /// Added to every send stamp (the sender clock's epoch).
    pub send_clock_offset: DurationNs,
    /// Added to every receive stamp (the receiver clock's epoch).
    pub recv_clock_offset: DurationNs,
    pub propagation_delay: DurationNs,
    /// Idle time between the end of one train and the start of the next.
    pub train_gap: DurationNs,
    pub seed: u64,
}

impl FluidPathConfig {
    /// A clean path: sender at 10·C, no noise, unbounded queue, no coalescing,
    /// 1 ns clocks with different arbitrary offsets, 20 ms one-way delay.
    pub fn new(capacity: BitRate, cross_traffic: BitRate) -> Self {
        let exact = ClockInfo {
            source: ClockSource::Simulated,
            resolution: DurationNs::from_ns(1),
        };
        FluidPathConfig {
            capacity,
            cross_traffic,
            sender_line_rate: capacity.scale(10.0),
            send_jitter: DurationNs::ZERO,
            queue_limit: None,
            cross_noise: 0.0,
            noise_interval: DurationNs::from_us(100),
            poisson_cross: None,
            bucket: None,
            send_clock: exact,
            recv_clock: exact,
            send_clock_offset: DurationNs::from_secs(1_700_000_000),
            recv_clock_offset: DurationNs::from_ns(-3_141_592_653),
            propagation_delay: DurationNs::from_ms(20),
            train_gap: DurationNs::from_ms(50),
            seed: 1,
        }
    }

    /// `C − X`, the available bandwidth the configuration intends.
    pub fn available(&self) -> BitRate {
        self.capacity - self.cross_traffic
    }
}

/// A single-bottleneck path with fluid cross traffic (see the module docs).
#[derive(Debug, Clone)]
pub struct FluidPath {
    cfg: FluidPathConfig,
    /// Path time (seconds) up to which the queue state is known.
    t_queue: f64,
    /// Work in the bottleneck queue at `t_queue`, in bytes; negative (down
    /// to minus the bucket) for spare tokens of a token-bucket tight link.
    backlog: f64,
    /// Path time at which the next train may start (after the gap).
    idle_from: f64,
    jitter: SplitMix64,
    /// Cross-traffic bytes offered while trains occupied the bottleneck, and
    /// the seconds they occupied it: the ground truth for noisy runs.
    window_cross_bytes: f64,
    window_secs: f64,
    /// Poisson mode: the generator of cross-packet gaps, the arrival time of
    /// the next cross packet, and the cross bytes offered up to `t_queue`.
    cross_rng: SplitMix64,
    next_cross: f64,
    cross_offered: f64,
    /// Poisson cross packets the full queue dropped, and the largest
    /// backlog (bytes) the queue reached: what a probe did to the others.
    cross_dropped: u64,
    peak_backlog: f64,
}

impl FluidPath {
    /// # Panics
    /// If the capacity or the sender line rate is not a positive finite rate:
    /// such a path cannot carry anything and is a bug in the test.
    pub fn new(cfg: FluidPathConfig) -> Self {
        for (what, r) in [
            ("capacity", cfg.capacity),
            ("sender line rate", cfg.sender_line_rate),
        ] {
            assert!(
                r.bps() > 0.0 && r.bps().is_finite(),
                "synthetic path {what} must be positive and finite, got {r}"
            );
        }
        let jitter = SplitMix64::new(cfg.seed ^ 0x6A09_E667_F3BC_C908);
        let mut cross_rng = SplitMix64::for_stream(cfg.seed, 0x506F_6973);
        let next_cross = match Self::poisson_gap_mean(&cfg) {
            Some(mean) => cross_rng.exponential(mean),
            None => f64::INFINITY,
        };
        FluidPath {
            cfg,
            t_queue: 0.0,
            backlog: 0.0,
            idle_from: 0.0,
            jitter,
            window_cross_bytes: 0.0,
            window_secs: 0.0,
            cross_rng,
            next_cross,
            cross_offered: 0.0,
            cross_dropped: 0,
            peak_backlog: 0.0,
        }
    }

    /// Mean gap (seconds) between Poisson cross packets, if that mode is on
    /// and the rate is positive.
    fn poisson_gap_mean(cfg: &FluidPathConfig) -> Option<f64> {
        let size = cfg.poisson_cross?.get() as f64 * 8.0;
        let x = cfg.cross_traffic.bps();
        (size > 0.0 && x.is_finite() && x > 0.0).then(|| size / x)
    }

    /// The lowest the backlog can go: minus the token bucket's depth (0 for
    /// a FIFO).
    fn floor(&self) -> f64 {
        -self.cfg.bucket.map_or(0.0, |b| b.get() as f64)
    }

    pub fn config(&self) -> &FluidPathConfig {
        &self.cfg
    }

    /// The nominal available bandwidth `C − X`.
    pub fn available(&self) -> BitRate {
        self.cfg.available()
    }

    /// The mean cross-traffic rate offered at the bottleneck while the trains
    /// carried so far occupied it (from each train's first arrival at the
    /// queue to its last departure).  With noise this differs from the nominal
    /// X; `C` minus it is the available bandwidth over the window the
    /// measurement covered.  `None` before any train.
    pub fn offered_cross_rate(&self) -> Option<BitRate> {
        (self.window_secs > 0.0)
            .then(|| BitRate::from_bps(self.window_cross_bytes * 8.0 / self.window_secs))
    }

    /// Poisson cross packets dropped at the full queue so far.
    pub fn cross_dropped(&self) -> u64 {
        self.cross_dropped
    }

    /// The largest backlog (bytes) the tight link's queue has held so far.
    pub fn peak_backlog(&self) -> Bytes {
        Bytes(self.peak_backlog.max(0.0).round() as u64)
    }

    /// `C` minus [`FluidPath::offered_cross_rate`].
    pub fn window_available(&self) -> Option<BitRate> {
        self.offered_cross_rate().map(|x| self.cfg.capacity - x)
    }

    /// Cross-traffic rate (bytes/s) in noise slot `k`.
    fn cross_rate_in_slot(&self, k: i64) -> f64 {
        let x = self.cfg.cross_traffic.bps().max(0.0) / 8.0;
        if self.cfg.cross_noise <= 0.0 {
            return x;
        }
        let u = unit_f64(mix64(
            self.cfg.seed ^ mix64((k as u64).wrapping_add(0x3C6E_F372_FE94_F82B)),
        ));
        let e = self.cfg.cross_noise * 3f64.sqrt() * (2.0 * u - 1.0);
        (x * (1.0 + e)).max(0.0)
    }

    /// Splits `[from, to)` into pieces of constant cross rate and calls
    /// `f(duration, rate_bytes_per_s)` for each.
    fn for_each_segment(&self, from: f64, to: f64, mut f: impl FnMut(f64, f64)) {
        let iv = self.cfg.noise_interval.secs_f64();
        if self.cfg.cross_noise <= 0.0 || iv <= 0.0 {
            if to > from {
                f(to - from, self.cross_rate_in_slot(0));
            }
            return;
        }
        let mut t = from;
        while t < to {
            let mut k = (t / iv).floor() as i64;
            let mut end = (k + 1) as f64 * iv;
            if end <= t {
                // Rounding put `t` on a slot boundary: move to the next slot.
                k += 1;
                end = (k + 1) as f64 * iv;
            }
            let end = end.min(to);
            f(end - t, self.cross_rate_in_slot(k));
            t = end;
        }
    }

    /// Moves the queue state forward to path time `to`.
    fn advance(&mut self, to: f64) {
        if to <= self.t_queue {
            return;
        }
        if let Some(mean) = Self::poisson_gap_mean(&self.cfg) {
            self.advance_poisson(to, mean);
            return;
        }
        let c = self.cfg.capacity.bps() / 8.0;
        let limit = self.cfg.queue_limit.map(|b| b.get() as f64);
        let floor = self.floor();
        let mut w = self.backlog;
        self.for_each_segment(self.t_queue, to, |d, x| {
            // With a constant net inflow the backlog moves linearly until it
            // hits zero (or a full bucket, or the limit) and stays there.
            w = (w + (x - c) * d).max(floor);
            if let Some(l) = limit {
                w = w.min(l);
            }
        });
        self.backlog = w;
        self.t_queue = to;
    }

    /// [`FluidPath::advance`] with Poisson cross packets: the queue drains at
    /// C between arrivals and every cross packet adds its size (drop-tail).
    fn advance_poisson(&mut self, to: f64, mean_gap: f64) {
        let c = self.cfg.capacity.bps() / 8.0;
        let limit = self.cfg.queue_limit.map(|b| b.get() as f64);
        let size = self.cfg.poisson_cross.map_or(0.0, |b| b.get() as f64);
        let floor = self.floor();
        let mut t = self.t_queue;
        let mut w = self.backlog;
        while self.next_cross <= to {
            let at = self.next_cross.max(t);
            w = (w - c * (at - t)).max(floor);
            t = at;
            if limit.map_or(true, |l| w.max(0.0) + size <= l) {
                w += size;
                self.peak_backlog = self.peak_backlog.max(w);
            } else {
                self.cross_dropped += 1;
            }
            self.cross_offered += size;
            self.next_cross = at + self.cross_rng.exponential(mean_gap);
        }
        self.backlog = (w - c * (to - t)).max(floor);
        self.t_queue = to;
    }

    fn cross_bytes(&self, from: f64, to: f64) -> f64 {
        let mut total = 0.0;
        self.for_each_segment(from, to, |d, x| total += d * x);
        total
    }

    fn stamp(t: f64, offset: DurationNs, clock: &ClockInfo) -> TimeNs {
        let ns = DurationNs::from_secs_f64(t)
            .ns()
            .saturating_add(offset.ns());
        let res = clock.resolution.ns();
        let ns = if res > 1 {
            ns.div_euclid(res) * res
        } else {
            ns
        };
        TimeNs::from_ns(ns)
    }

    /// Sends one train across the path and reports what a runner would.
    pub fn carry(&mut self, spec: &TrainSpec, train: u32) -> Observation {
        let sched = ScheduleSpec::from_train(spec);
        let packets = self.carry_cars(&sched);
        self.observation(train, *spec, None, packets)
    }

    /// Sends one schedule (chirp, pairs, bursts) across the path.
    pub fn carry_schedule(&mut self, sched: &ScheduleSpec, train: u32) -> Observation {
        let packets = self.carry_cars(sched);
        self.observation(train, sched.summary(), Some(sched.clone()), packets)
    }

    fn observation(
        &self,
        train: u32,
        spec: TrainSpec,
        schedule: Option<ScheduleSpec>,
        packets: Vec<PacketRecord>,
    ) -> Observation {
        Observation {
            train,
            spec,
            schedule,
            packets,
            send_clock: self.cfg.send_clock,
            recv_clock: self.cfg.recv_clock,
        }
    }

    fn carry_cars(&mut self, sched: &ScheduleSpec) -> Vec<PacketRecord> {
        let cfg = self.cfg.clone();
        let size = sched.packet_size.get() as f64;
        let line = cfg.sender_line_rate.bps() / 8.0;
        let cap = cfg.capacity.bps() / 8.0;
        // Whole cars only, up to the packet cap.
        let mut budget = MAX_SYNTHETIC_PACKETS;
        let slots: Vec<_> = sched
            .cars
            .iter()
            .take_while(|c| {
                let n = u64::from(c.packets);
                let fits = n <= budget;
                budget = budget.saturating_sub(n);
                fits
            })
            .copied()
            .collect();
        let wire = size / line;
        let limit = cfg.queue_limit.map(|b| b.get() as f64);
        // The runner's own gap, plus any idle time the plan asks for; the queue
        // drains during both (`advance` below serves it at C).
        let t0 = self.idle_from
            + cfg.train_gap.secs_f64().max(0.0)
            + sched.idle_before.secs_f64().max(0.0);
        let total: u64 = slots.iter().map(|c| u64::from(c.packets)).sum();
        let mut packets = Vec::with_capacity(total as usize);
        let mut seq = 0u32;
        let mut prev_car_end = t0;
        let mut first_arrival: Option<f64> = None;
        let mut last_event = t0;
        let mut offered_at_first: Option<f64> = None;
        for (k, slot) in slots.iter().enumerate() {
            let ppc = u64::from(slot.packets);
            let offset = slot.offset.secs_f64().max(0.0);
            let jitter = cfg.send_jitter.secs_f64().max(0.0) * self.jitter.next_f64();
            let start = (t0 + offset + jitter).max(prev_car_end);
            for j in 0..ppc {
                let tx = start + j as f64 * wire;
                let arrive = tx + wire;
                first_arrival.get_or_insert(arrive);
                self.advance(arrive);
                offered_at_first.get_or_insert(self.cross_offered);
                let received = if limit.is_some_and(|l| self.backlog.max(0.0) + size > l) {
                    last_event = last_event.max(arrive);
                    None
                } else {
                    // Spare tokens (a negative backlog) let the packet leave
                    // as soon as it has arrived.
                    let depart = arrive + (self.backlog + size).max(0.0) / cap;
                    self.backlog += size;
                    self.peak_backlog = self.peak_backlog.max(self.backlog);
                    last_event = last_event.max(depart);
                    Some(Self::stamp(
                        depart + cfg.propagation_delay.secs_f64(),
                        cfg.recv_clock_offset,
                        &cfg.recv_clock,
                    ))
                };
                packets.push(PacketRecord {
                    seq,
                    car: k as u32,
                    size: sched.packet_size,
                    sent: Self::stamp(tx, cfg.send_clock_offset, &cfg.send_clock),
                    received,
                });
                seq += 1;
            }
            prev_car_end = start + ppc as f64 * wire;
        }
        let end = last_event.max(prev_car_end);
        if Self::poisson_gap_mean(&cfg).is_some() {
            // Cross bytes offered from the first arrival (the queue state is
            // known up to the last arrival) to the last departure.
            self.advance(end);
            if let (Some(fa), Some(b)) = (first_arrival, offered_at_first) {
                self.window_cross_bytes += self.cross_offered - b;
                self.window_secs += end - fa;
            }
        } else if let Some(fa) = first_arrival {
            self.window_cross_bytes += self.cross_bytes(fa, end);
            self.window_secs += end - fa;
        }
        self.advance(end);
        self.idle_from = end;
        packets
    }
}

impl ProbePath for FluidPath {
    /// The model carries every plan.
    type Error = std::convert::Infallible;

    /// Carries a train or a schedule; [`ProbePlan::Done`] (which the runner
    /// never passes) carries nothing and reports an empty observation.
    fn carry(&mut self, plan: &ProbePlan, index: u32) -> Result<Observation, Self::Error> {
        Ok(match plan {
            ProbePlan::Train(spec) => self.carry(spec, index),
            ProbePlan::Schedule(sched) => self.carry_schedule(sched, index),
            ProbePlan::Done => {
                let nothing = TrainSpec {
                    packet_size: Bytes::ZERO,
                    packets_per_car: 0,
                    cars: 0,
                    rate: BitRate::ZERO,
                    idle_before: DurationNs::ZERO,
                };
                self.observation(index, nothing, None, Vec::new())
            }
        })
    }
}

/// Runs `method` over `path` (a [`FluidPath`] or a wrapper around one)
/// through [`runner::run`] until it says `Done` or `max_plans` plans have
/// been carried, and returns its answer: `None` when it gave none, or one
/// of A ≤ 0.
pub fn drive<P: ProbePath + ?Sized>(
    method: &mut dyn Method,
    path: &mut P,
    max_plans: u32,
) -> Option<Estimate> {
    runner::run(method, path, runner::Limits::plans(max_plans), &mut |_| {})
        .ok()?
        .estimate
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dispersion;
    use crate::path::{Coalescing, FaultInjector, Faults};
    use crate::plan::CarSlot;

    fn spec(rate_mbps: f64, ppc: u32, cars: u32) -> TrainSpec {
        TrainSpec {
            packet_size: Bytes(1500),
            packets_per_car: ppc,
            cars,
            rate: BitRate::from_mbps(rate_mbps),
            idle_before: DurationNs::ZERO,
        }
    }

    #[test]
    fn splitmix_is_deterministic_and_uniform() {
        let mut a = SplitMix64::new(7);
        let mut b = SplitMix64::new(7);
        let xs: Vec<f64> = (0..10_000).map(|_| a.next_f64()).collect();
        assert!(xs.iter().all(|&x| (0.0..1.0).contains(&x)));
        assert_eq!(xs[123], {
            for _ in 0..123 {
                b.next_f64();
            }
            b.next_f64()
        });
        let m = xs.iter().sum::<f64>() / xs.len() as f64;
        assert!((m - 0.5).abs() < 0.01);
    }

    #[test]
    fn splitmix_draws_have_their_distributions() {
        let mut r = SplitMix64::new(11);
        let n = 100_000;
        let e: Vec<f64> = (0..n).map(|_| r.exponential(3.0)).collect();
        assert!(e.iter().all(|x| x.is_finite() && *x >= 0.0));
        assert!((e.iter().sum::<f64>() / n as f64 - 3.0).abs() < 0.05);
        let p: Vec<f64> = (0..n).map(|_| r.pareto(2.0, 5.0)).collect();
        assert!(p.iter().all(|x| *x >= 5.0));
        let above = p.iter().filter(|x| **x > 10.0).count() as f64 / n as f64;
        assert!((above - 0.25).abs() < 0.01, "{above}");
        assert!((0..1000).all(|_| r.below(7) < 7));
        assert_eq!(r.below(0), 0);
        let (mut a, mut b) = (SplitMix64::for_stream(1, 0), SplitMix64::for_stream(1, 1));
        assert_ne!(a.next_u64(), b.next_u64());
        assert_eq!(
            SplitMix64::for_stream(1, 1).next_u64(),
            SplitMix64::for_stream(1, 1).next_u64()
        );
    }

    #[test]
    fn train_above_available_leaves_at_the_fluid_rate() {
        // C = 100, X = 40 ⇒ A = 60; R = 90 ⇒ r = 90·100/130.
        let mut p = FluidPath::new(FluidPathConfig::new(
            BitRate::from_mbps(100.0),
            BitRate::from_mbps(40.0),
        ));
        let obs = p.carry(&spec(90.0, 2, 100), 0);
        let r = dispersion::receiving_rate(&obs).unwrap().rate.mbps();
        let s = dispersion::sending_rate(&obs).unwrap().rate.mbps();
        assert!((s - 90.0).abs() < 1e-3, "{s}");
        assert!((r - 90.0 * 100.0 / 130.0).abs() < 1e-3, "{r}");
        assert_eq!(obs.received_packets(), 200);
    }

    #[test]
    fn train_below_available_keeps_its_rate() {
        let mut p = FluidPath::new(FluidPathConfig::new(
            BitRate::from_mbps(100.0),
            BitRate::from_mbps(40.0),
        ));
        let obs = p.carry(&spec(50.0, 1, 100), 0);
        let r = dispersion::receiving_rate(&obs).unwrap().rate.mbps();
        assert!((r - 50.0).abs() < 1e-3, "{r}");
        // Intra-car the packets cross the bottleneck back to back: C·L/(L+X).
        let obs = p.carry(&spec(50.0, 4, 50), 1);
        let cr = dispersion::car_rates(&obs);
        let want = 100.0 * 1000.0 / 1040.0;
        assert!(
            cr.iter().all(|c| (c.mbps() - want).abs() < 1e-3),
            "{:?}",
            cr[0]
        );
    }

    #[test]
    fn a_slow_sender_sends_back_to_back_at_its_line_rate() {
        let cfg = FluidPathConfig {
            sender_line_rate: BitRate::from_mbps(300.0),
            ..FluidPathConfig::new(BitRate::from_gbps(1.0), BitRate::from_mbps(100.0))
        };
        let mut p = FluidPath::new(cfg);
        let obs = p.carry(&spec(1000.0, 4, 50), 0);
        let s = dispersion::sending_rate(&obs).unwrap().rate.mbps();
        assert!((s - 300.0).abs() < 1e-3, "{s}");
    }

    #[test]
    fn a_short_queue_drops_and_clamps_the_probe_to_the_available_rate() {
        let cfg = FluidPathConfig {
            queue_limit: Some(Bytes(30_000)),
            ..FluidPathConfig::new(BitRate::from_mbps(100.0), BitRate::from_mbps(50.0))
        };
        let mut p = FluidPath::new(cfg);
        let obs = p.carry(&spec(500.0, 1, 4000), 0);
        assert!(obs.lost_packets() > 0);
        let r = dispersion::receiving_rate(&obs).unwrap().rate.mbps();
        // Fluid never overflows on its own (X < C), so once full the queue
        // admits the probe only as fast as C − X drains it.
        assert!((r - 50.0).abs() < 1.5, "{r}");
        let none = FluidPath::new(FluidPathConfig {
            queue_limit: Some(Bytes::ZERO),
            ..FluidPathConfig::new(BitRate::from_mbps(100.0), BitRate::from_mbps(50.0))
        })
        .carry(&spec(50.0, 1, 10), 0);
        assert_eq!(none.received_packets(), 0);
    }

    #[test]
    fn coalescing_stamps_share_interrupt_instants() {
        let cfg = FluidPathConfig::new(BitRate::from_gbps(1.0), BitRate::from_mbps(100.0));
        let mut p = Coalescing::new(FluidPath::new(cfg), DurationNs::from_us(125));
        let obs = ProbePath::carry(&mut p, &ProbePlan::Train(spec(500.0, 4, 100)), 0).unwrap();
        for pk in &obs.packets {
            let r = pk.received.unwrap().ns();
            assert_eq!(r.rem_euclid(125_000), 0);
        }
        assert!(dispersion::bunching(&obs, DurationNs::from_ns(1)).is_bunched());
        let r = dispersion::receiving_rate(&obs).unwrap().rate.mbps();
        assert!((r - 500.0).abs() / 500.0 < 0.01, "{r}");
    }

    #[test]
    fn same_seed_same_observation() {
        let cfg = FluidPathConfig {
            cross_noise: 0.3,
            send_jitter: DurationNs::from_us(5),
            seed: 99,
            ..FluidPathConfig::new(BitRate::from_mbps(100.0), BitRate::from_mbps(50.0))
        };
        let plan = ProbePlan::Train(spec(80.0, 2, 50));
        let carry = |cfg: &FluidPathConfig| {
            let mut p =
                FaultInjector::new(FluidPath::new(cfg.clone()), Faults::scrambled(cfg.seed));
            ProbePath::carry(&mut p, &plan, 3).unwrap()
        };
        let a = carry(&cfg);
        assert_eq!(a, carry(&cfg));
        assert_ne!(a, carry(&FluidPathConfig { seed: 100, ..cfg }));
    }

    #[test]
    fn noise_averages_to_the_nominal_cross_rate() {
        let cfg = FluidPathConfig {
            cross_noise: 0.5,
            ..FluidPathConfig::new(BitRate::from_mbps(100.0), BitRate::from_mbps(50.0))
        };
        let mut p = FluidPath::new(cfg);
        for i in 0..20 {
            p.carry(&spec(80.0, 1, 500), i);
        }
        let x = p.offered_cross_rate().unwrap().mbps();
        assert!((x - 50.0).abs() < 1.0, "{x}");
    }

    #[test]
    fn poisson_cross_traffic_is_noisy_at_a_trains_time_scale() {
        // C = 300, X = 90 Mb/s of 1500 B Poisson packets: over 10 ms the
        // cross rate a train meets varies by √(X·s/T) ≈ 10 Mb/s, so the
        // receiving rate of a train at 240 Mb/s varies by several Mb/s, while
        // the long-run mean stays the fluid one.
        let cfg = FluidPathConfig {
            poisson_cross: Some(Bytes(1500)),
            seed: 5,
            ..FluidPathConfig::new(BitRate::from_mbps(300.0), BitRate::from_mbps(90.0))
        };
        let mut p = FluidPath::new(cfg.clone());
        let rates: Vec<f64> = (0..60)
            .map(|i| {
                let obs = p.carry(&spec(240.0, 1, 200), i);
                dispersion::receiving_rate(&obs).unwrap().rate.mbps()
            })
            .collect();
        let mean = rates.iter().sum::<f64>() / rates.len() as f64;
        let sd = (rates.iter().map(|r| (r - mean).powi(2)).sum::<f64>() / 59.0).sqrt();
        let fluid = 240.0 * 300.0 / 330.0;
        assert!((mean - fluid).abs() < 3.0, "mean {mean} vs {fluid}");
        assert!(sd > 2.0 && sd < 15.0, "sd {sd}");
        let x = p.offered_cross_rate().unwrap().mbps();
        assert!((x - 90.0).abs() < 6.0, "{x}");
        // Seeded: the same configuration gives the same train.
        let a = FluidPath::new(cfg.clone()).carry(&spec(240.0, 1, 50), 0);
        let b = FluidPath::new(cfg).carry(&spec(240.0, 1, 50), 0);
        assert_eq!(a, b);
    }

    #[test]
    fn a_token_bucket_lets_the_first_frames_through_at_line_rate() {
        // 300 Mb/s tbf with a two-frame bucket, sender at 10 Gb/s, idle:
        // the first two packets of a back-to-back train pass at the
        // sender's 1.2 µs, the rest at C's 40 µs; the train as a whole
        // arrives at C.
        let bucketed = FluidPathConfig {
            bucket: Some(Bytes(3000)),
            sender_line_rate: BitRate::from_gbps(10.0),
            ..FluidPathConfig::new(BitRate::from_mbps(300.0), BitRate::ZERO)
        };
        let gaps = |cfg: &FluidPathConfig| -> Vec<f64> {
            let mut p = FluidPath::new(cfg.clone());
            let mut out = Vec::new();
            // Twice: idle time between trains refills the bucket.
            for train in 0..2 {
                let obs = p.carry(&spec(100_000.0, 50, 1), train);
                let g = dispersion::intra_car_gaps(&obs);
                out.extend(g.iter().take(4).map(|g| g.0 * 1e6));
            }
            out
        };
        let b = gaps(&bucketed);
        for train in b.chunks(4) {
            assert!((train[0] - 1.2).abs() < 0.01, "{b:?}");
            for g in &train[2..] {
                assert!((g - 40.0).abs() < 0.01, "{b:?}");
            }
            // The third packet waits for the tokens the second one lacked.
            assert!(train[1] > 30.0 && train[1] < 40.0, "{b:?}");
        }
        let mut p = FluidPath::new(bucketed.clone());
        let obs = p.carry(&spec(100_000.0, 200, 1), 0);
        let r = dispersion::receiving_rate(&obs).unwrap().rate.mbps();
        assert!((r - 300.0).abs() < 4.0, "{r}");
        // Without a bucket the same train is spread from the first pair on.
        let fifo = FluidPathConfig {
            bucket: None,
            ..bucketed.clone()
        };
        assert!(gaps(&fifo).iter().all(|g| (g - 40.0).abs() < 0.01));
        // A long train above A still leaves at the fluid rate: the bucket
        // only shifts its first bytes.
        let loaded = FluidPathConfig {
            cross_traffic: BitRate::from_mbps(100.0),
            ..bucketed
        };
        let obs = FluidPath::new(loaded).carry(&spec(290.0, 1, 2000), 0);
        let r = dispersion::receiving_rate(&obs).unwrap().rate.mbps();
        let fluid = 290.0 * 300.0 / 390.0;
        assert!((r - fluid).abs() < 1.0, "{r} vs {fluid}");
    }

    #[test]
    fn degenerate_specs_do_not_panic() {
        let mut p = FluidPath::new(FluidPathConfig::new(
            BitRate::from_mbps(100.0),
            BitRate::from_mbps(50.0),
        ));
        for s in [
            spec(0.0, 1, 10),
            spec(-5.0, 2, 3),
            spec(f64::NAN, 1, 4),
            spec(10.0, 0, 10),
            spec(10.0, 3, 0),
            TrainSpec {
                packet_size: Bytes::ZERO,
                ..spec(10.0, 2, 2)
            },
        ] {
            let _ = p.carry(&s, 0);
        }
    }

    #[test]
    fn a_schedule_and_the_same_train_cross_the_path_alike() {
        // A constant-rate train carried as itself and as an explicit schedule
        // gives the same packets; the schedule's observation keeps it.
        let cfg = FluidPathConfig::new(BitRate::from_mbps(100.0), BitRate::from_mbps(40.0));
        let t = spec(90.0, 2, 50);
        let sched = ScheduleSpec::from_train(&t);
        let a = FluidPath::new(cfg.clone()).carry(&t, 0);
        let b = FluidPath::new(cfg).carry_schedule(&sched, 0);
        assert_eq!(a.packets, b.packets);
        assert_eq!(b.schedule.as_ref(), Some(&sched));
        // Offsets are whole nanoseconds, so the nominal rate is 90 Mb/s to 1e-5.
        assert!((b.spec.rate.mbps() - 90.0).abs() < 1e-3, "{}", b.spec.rate);
    }

    #[test]
    fn a_pair_closer_than_the_bottleneck_gap_leaves_at_its_gap() {
        // Two 1500 B packets 10 us apart into an idle 100 Mb/s link (120 us
        // per packet) leave 120 us apart: the capacity gap.
        let mut p = FluidPath::new(FluidPathConfig::new(
            BitRate::from_mbps(100.0),
            BitRate::ZERO,
        ));
        let sched = ScheduleSpec {
            packet_size: Bytes(1500),
            cars: vec![
                CarSlot {
                    offset: DurationNs::ZERO,
                    packets: 1,
                },
                CarSlot {
                    offset: DurationNs::from_us(10),
                    packets: 1,
                },
            ],
            idle_before: DurationNs::ZERO,
        };
        let obs = p.carry_schedule(&sched, 0);
        let r: Vec<i64> = obs
            .packets
            .iter()
            .map(|p| p.received.unwrap().ns())
            .collect();
        assert!((r[1] - r[0] - 120_000).abs() <= 1, "{r:?}");
        assert_eq!(obs.packets[1].car, 1);
    }
}
