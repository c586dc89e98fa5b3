//! FAC² parameters, and how a rate and a length become a train of cars.

use crate::plan::TrainSpec;
use crate::units::{BitRate, Bytes, DurationNs};
use serde::{Deserialize, Serialize};

/// Everything FAC² can be told.  `Default` suits a 1 Gb/s host with a
/// microsecond clock; a runner sets at least `max_rate` and the clock.
///
/// Nothing here describes the path: FAC² is blind unless the user states
/// the tight link's capacity (`known_capacity`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fac2Config {
    /// IP datagram size of every probe packet (headers included).  Default
    /// 1500 B.
    pub packet_size: Bytes,
    /// Resolution of the coarser of the send and receive clocks.  FAC² reads
    /// rates as slopes over cars, never from one packet gap, so this only
    /// sizes cars.  Default 1 µs; coarser steps seen in observations win.
    pub clock_resolution: DurationNs,
    /// Cars start at least this many clock resolutions apart.  Default 50.
    pub car_interval_resolutions: u32,
    /// Cars start at least this far apart, so that a pacing sender has time
    /// for per-car work.  Default 20 µs.
    pub min_car_interval: DurationNs,
    /// At most this many back-to-back packets per car.  Default 64.
    pub max_packets_per_car: u32,
    /// The ceiling of every train's rate, and the opening train's rate.  A
    /// path that carries it untouched yields only `A ≥ max_rate`.
    /// Default 1 Gb/s.
    pub max_rate: BitRate,
    /// The floor of every train's rate.  Default 100 kb/s.
    pub min_rate: BitRate,
    /// The queue budget: the most a train may add to the tight link's queue
    /// beyond what the path drains, judged from what FAC² knows of A when it
    /// plans the train (`(R − A_floor) · T`, with `A_floor = 0` before any
    /// train).  The opening train is this many bytes at `max_rate`, so it can
    /// never make a path with a larger queue drop anything.  Default 32 KiB,
    /// half of a small 64 KB router queue.
    #[serde(default = "default_queue_budget")]
    pub queue_budget: Bytes,
    /// The queue budget of near trains, which are planned against the
    /// line's A once it is known to a few per cent (and no lower than any
    /// rate the path carried).  Halved, down to `queue_budget / 2`, after
    /// every near train that lost packets: the path's queue is smaller than
    /// assumed.  Default 64 KiB, a quarter of a 256 KB router queue.
    #[serde(default = "default_near_budget")]
    pub near_budget: Bytes,
    /// A train whose receive/send ratio is at least `1 − tolerance` was
    /// carried (for the opening's and the lower trains' verdicts).
    /// Default 0.01.
    pub tolerance: f64,
    /// The stopping rule: the fit's 95 % half-width on A, relative to A, is
    /// at most this.  Default 0.08: a 95 % band of ±8 % is a standard error
    /// of about 4 %, a median error near 3 %.
    pub max_relative_band: f64,
    /// The stopping rule also needs at least this many near trains in the
    /// fit.  Default 4.
    #[serde(default = "default_min_near_trains")]
    pub min_near_trains: u32,
    /// Trains that lost more than this share stay out of the fit: a dropping
    /// queue breaks the fluid relation.  Default 0.01.
    pub max_fit_loss: f64,
    /// Probe bytes FAC² spends at most; at this budget it reports the band
    /// it has, marked unconverged if it is wider than `max_relative_band`.
    /// Default 2 MB.
    #[serde(default = "default_max_bytes")]
    pub max_bytes: Bytes,
    /// On fast paths the byte budget is this long at the fastest rate the
    /// path delivered, when that is more than `max_bytes`: 2 MB is 1.6 ms at
    /// 10 Gb/s.  Default 16 ms.
    #[serde(default = "default_max_probe_time")]
    pub max_probe_time: DurationNs,
    /// A near train lasts at most this long.  Default 40 ms.
    #[serde(default = "default_max_train_duration")]
    pub max_train_duration: DurationNs,
    /// A near train lasts at least this long (more when the receiver bunches
    /// arrivals: 16 bunch periods).  Default 2 ms.
    #[serde(default = "default_min_train_duration")]
    pub min_train_duration: DurationNs,
    /// Hard cap on trains.  Default 30.
    pub max_trains: u32,
    /// Stop after this many consecutive trains that delivered too little to
    /// measure.  Default 3.
    pub max_failed_trains: u32,
    /// The receiver's known interrupt-coalescing interval, if any (trains
    /// then span at least 16 such intervals).  Default 0 (unknown/none).
    pub receiver_bunching: DurationNs,
    /// The tight link's capacity as the user stated it (`--known-capacity`;
    /// never a lab's or a scenario's C).  With it, the line's slope is fixed
    /// at 1/C and A is the weighted mean of each train's `R − C·(R/r − 1)`.
    #[serde(default, alias = "capacity_hint")]
    pub known_capacity: Option<BitRate>,
}

impl Default for Fac2Config {
    fn default() -> Self {
        Fac2Config {
            packet_size: Bytes(1500),
            clock_resolution: DurationNs::from_us(1),
            car_interval_resolutions: 50,
            min_car_interval: DurationNs::from_us(20),
            max_packets_per_car: 64,
            max_rate: BitRate::from_gbps(1.0),
            min_rate: BitRate::from_kbps(100.0),
            queue_budget: default_queue_budget(),
            near_budget: default_near_budget(),
            tolerance: 0.01,
            max_relative_band: 0.08,
            min_near_trains: default_min_near_trains(),
            max_fit_loss: 0.01,
            max_bytes: default_max_bytes(),
            max_probe_time: default_max_probe_time(),
            max_train_duration: default_max_train_duration(),
            min_train_duration: default_min_train_duration(),
            max_trains: 30,
            max_failed_trains: 3,
            receiver_bunching: DurationNs::ZERO,
            known_capacity: None,
        }
    }
}

fn default_queue_budget() -> Bytes {
    Bytes(32 * 1024)
}
fn default_near_budget() -> Bytes {
    Bytes(64 * 1024)
}
fn default_min_near_trains() -> u32 {
    4
}
fn default_max_bytes() -> Bytes {
    Bytes(2_000_000)
}
fn default_max_probe_time() -> DurationNs {
    DurationNs::from_ms(16)
}
fn default_max_train_duration() -> DurationNs {
    DurationNs::from_ms(40)
}
fn default_min_train_duration() -> DurationNs {
    DurationNs::from_ms(2)
}

/// Smallest and largest packet sizes FAC² will plan (an IPv4+UDP header to
/// the largest IP datagram).
const PACKET_SIZE_RANGE: (u64, u64) = (28, 65_535);

/// A receiver that bunches arrivals gives a train one point per bunch; a
/// slope needs this many.
pub(crate) const BUNCHES: f64 = 16.0;

/// Fewest cars in any train: a receiving rate is a slope and needs points.
const MIN_CARS: u32 = 6;
/// Most cars in any train.
const MAX_CARS: u32 = 4096;

impl Fac2Config {
    /// The runner's clock resolution (the coarser of its send and receive clocks).
    pub fn with_clock_resolution(mut self, resolution: DurationNs) -> Self {
        self.clock_resolution = resolution;
        self
    }
    pub fn with_max_rate(mut self, rate: BitRate) -> Self {
        self.max_rate = rate;
        self
    }
    /// The receiver's interrupt-coalescing interval, when the runner knows it.
    pub fn with_receiver_bunching(mut self, interval: DurationNs) -> Self {
        self.receiver_bunching = interval;
        self
    }

    pub(crate) fn tolerance(&self) -> f64 {
        sane_fraction(self.tolerance, 0.01)
    }
    pub(crate) fn max_relative_band(&self) -> f64 {
        sane_fraction(self.max_relative_band, 0.08)
    }
    pub(crate) fn max_fit_loss(&self) -> f64 {
        sane_fraction(self.max_fit_loss, 0.01)
    }
    pub(crate) fn packet_bytes(&self) -> Bytes {
        Bytes(
            self.packet_size
                .get()
                .clamp(PACKET_SIZE_RANGE.0, PACKET_SIZE_RANGE.1),
        )
    }
    /// The queue budget in bits, at least two packets.
    pub(crate) fn budget_bits(&self) -> f64 {
        let floor = 2 * self.packet_bytes().get();
        self.queue_budget.get().max(floor).saturating_mul(8) as f64
    }
    /// The configured ceiling, or 1 Gb/s if it is not a positive finite rate.
    pub(crate) fn max_rate_bps(&self) -> f64 {
        let r = self.max_rate.bps();
        if r.is_finite() && r > 0.0 {
            r
        } else {
            1e9
        }
    }
    /// The configured floor, kept below the ceiling.
    pub(crate) fn min_rate_bps(&self) -> f64 {
        let r = self.min_rate.bps();
        let max = self.max_rate_bps();
        if r.is_finite() && r > 0.0 {
            r.min(max)
        } else {
            (1e5f64).min(max)
        }
    }
    /// Clamps a wished-for rate into `[min_rate, max_rate]`; NaN goes to the floor.
    pub(crate) fn clamp_rate(&self, bps: f64) -> f64 {
        if bps.is_nan() {
            return self.min_rate_bps();
        }
        bps.clamp(self.min_rate_bps(), self.max_rate_bps())
    }
    /// The near trains' starting budget in bits, at least the opening's.
    pub(crate) fn near_budget_bits(&self) -> f64 {
        (self.near_budget.get().saturating_mul(8) as f64).max(self.budget_bits())
    }
    /// The byte budget (bytes) once the path has carried `carried_bps`.
    pub(crate) fn byte_budget(&self, carried_bps: f64) -> f64 {
        let by_time = carried_bps.max(0.0) * self.max_probe_time.secs_f64() / 8.0;
        (self.max_bytes.get() as f64).max(if by_time.is_finite() { by_time } else { 0.0 })
    }
    /// Shortest and longest near train (seconds).
    pub(crate) fn duration_range(&self) -> (f64, f64) {
        let max = self.max_train_duration.secs_f64().max(1e-4);
        let min = self.min_train_duration.secs_f64().clamp(1e-5, max);
        (min, max)
    }
    /// The shortest train a receiver bunching arrivals every `bunching` can
    /// measure: [`BUNCHES`] bunches (none without bunching).
    pub(crate) fn bunched_secs(&self, bunching: DurationNs) -> f64 {
        BUNCHES * bunching.max(self.receiver_bunching).secs_f64()
    }

    /// The least time between car starts for a given clock resolution:
    /// `max(min_car_interval, car_interval_resolutions × resolution)`.
    pub(crate) fn min_car_spacing(&self, resolution: DurationNs) -> DurationNs {
        let by_clock = resolution
            .ns()
            .max(0)
            .saturating_mul(i64::from(self.car_interval_resolutions));
        DurationNs::from_ns(self.min_car_interval.ns().max(by_clock).max(1))
    }

    /// The train FAC² sends at `rate` for about `secs` seconds.
    ///
    /// Cars are just large enough that car starts are at least
    /// [`Fac2Config::min_car_spacing`] apart (the clock and the pacing timer
    /// stay small against a car interval), and never more than an eighth of
    /// the train, so that its receiving rate is a slope over at least
    /// [`MIN_CARS`] points; then enough cars to last `secs`.
    pub fn train_for(&self, rate: BitRate, resolution: DurationNs, secs: f64) -> TrainSpec {
        let bps = self.clamp_rate(rate.bps());
        let size = self.packet_bytes();
        let packet_secs = size.bits() as f64 / bps;
        let secs = if secs.is_finite() { secs.max(0.0) } else { 0.0 };
        let packets = (secs / packet_secs).ceil().max(f64::from(MIN_CARS));
        let spacing = self.min_car_spacing(resolution).secs_f64();
        let ppc = (spacing / packet_secs)
            .ceil()
            .min((packets / f64::from(MIN_CARS)).floor())
            .clamp(1.0, f64::from(self.max_packets_per_car.max(1)));
        // Whole cars, never more packets than asked for (the queue budget
        // sizes some trains), but never fewer than MIN_CARS.
        let cars = (packets / ppc)
            .floor()
            .clamp(f64::from(MIN_CARS), f64::from(MAX_CARS));
        // `as` saturates and maps NaN to 0; the clamps keep both in range.
        TrainSpec {
            packet_size: size,
            packets_per_car: (ppc as u32).max(1),
            cars: (cars as u32).max(MIN_CARS),
            rate: BitRate::from_bps(bps),
            idle_before: DurationNs::ZERO,
        }
    }
}

fn sane_fraction(x: f64, default: f64) -> f64 {
    if x.is_finite() && x > 0.0 && x < 1.0 {
        x
    } else {
        default
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cars_keep_their_interval_and_a_train_keeps_its_points() {
        let cfg = Fac2Config::default();
        let res = DurationNs::from_us(1);
        // 1 Gb/s for 10 ms: 12 µs packets, 50 µs spacing ⇒ 5 per car, 166 cars.
        let t = cfg.train_for(BitRate::from_gbps(1.0), res, 0.010);
        assert_eq!((t.packets_per_car, t.cars), (5, 166));
        // The 32 KiB opening at 1 Gb/s: 22 packets, still six cars or more.
        let t = cfg.train_for(BitRate::from_gbps(1.0), res, cfg.budget_bits() / 1e9);
        assert!(t.cars >= MIN_CARS, "{t:?}");
        assert!(t.total_bytes().get() <= 36_000, "{t:?}");
        // 100 Mb/s: one 120 µs packet per car.
        let t = cfg.train_for(BitRate::from_mbps(100.0), res, 0.010);
        assert_eq!((t.packets_per_car, t.cars), (1, 84));
        // Rates outside the band are clamped; nonsense goes to the floor.
        let t = cfg.train_for(BitRate::from_gbps(40.0), res, 0.001);
        assert_eq!(t.rate, cfg.max_rate);
        let t = cfg.train_for(BitRate::from_bps(f64::NAN), res, f64::NAN);
        assert_eq!(t.rate, cfg.min_rate);
        assert_eq!(t.cars, MIN_CARS);
    }

    #[test]
    fn the_budget_and_durations_are_sane_whatever_the_config() {
        let cfg = Fac2Config {
            queue_budget: Bytes(0),
            max_train_duration: DurationNs::ZERO,
            ..Fac2Config::default()
        };
        assert_eq!(cfg.budget_bits(), 2.0 * 1500.0 * 8.0);
        let (lo, hi) = cfg.duration_range();
        assert!(lo > 0.0 && lo <= hi, "{lo} {hi}");
        let d = Fac2Config::default();
        assert_eq!(d.duration_range(), (0.002, 0.040));
        assert!((d.bunched_secs(DurationNs::from_us(125)) - 0.002).abs() < 1e-12);
        // 2 MB, or 16 ms at a fast path's rate.
        assert_eq!(d.byte_budget(300e6), 2e6);
        assert_eq!(d.byte_budget(10e9), 2e7);
    }
}
