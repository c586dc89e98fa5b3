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
//! * **Receiver.**  A propagation delay.  A receiver that coalesces
//!   interrupts is a wrapper around any path ([`crate::path::Coalescing`]),
//!   as are damaged records ([`crate::path::FaultInjector`]).
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

pub mod multihop;
use crate::rng::{mix64, unit_f64, SplitMix64};

/// Safety cap on the packets one synthetic train may hold (memory, test time).
/// A spec asking for more is truncated to its first cars.
pub(crate) const MAX_SYNTHETIC_PACKETS: u64 = 2_000_000;

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
    pub fn carry_train(&mut self, spec: &TrainSpec, train: u32) -> Observation {
        let sched = ScheduleSpec::from_train(spec);
        let packets = self.carry_cars(&sched);
        self.observation(train, *spec, None, packets)
    }

    /// Sends one schedule (chirp, pairs, bursts) across the path.
    pub(crate) fn carry_schedule(&mut self, sched: &ScheduleSpec, train: u32) -> Observation {
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
            receiver_drops: None,
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
            ProbePlan::Train(spec) => self.carry_train(spec, index),
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
mod tests;
