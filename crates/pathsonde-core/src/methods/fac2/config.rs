//! FAC² parameters and how they turn a rate into a train.

use crate::plan::TrainSpec;
use crate::units::{BitRate, Bytes, DurationNs};
use serde::{Deserialize, Serialize};

/// Everything FAC² can be told.  `Default` gives values that suit a 1 Gb/s
/// host with a microsecond clock; a runner should at least call
/// [`Fac2Config::with_clock_resolution`] and [`Fac2Config::with_max_rate`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fac2Config {
    /// IP datagram size of every probe packet (headers included).  Large
    /// packets mean fewer packets per car at a given rate and less per-packet
    /// host work.  Default 1500 B.
    pub packet_size: Bytes,
    /// Resolution of the coarser of the send and receive clocks.  FAC² never
    /// relies on one packet gap, only on car spacing and slopes over whole
    /// trains, so this only sizes cars.  Default 1 µs; the method also adopts
    /// any coarser resolution it sees in an observation.
    pub clock_resolution: DurationNs,
    /// Cars start at least this many clock resolutions apart, so that the
    /// clock's quantisation is a small fraction of every car interval.
    /// Default 50.
    pub car_interval_resolutions: u32,
    /// Cars start at least this far apart regardless of the clock, so that a
    /// pacing sender has time to do per-car work.  Default 20 µs.
    pub min_car_interval: DurationNs,
    /// At most this many back-to-back packets per car: a car is one burst at
    /// the sender's line rate, and a bottleneck queue must absorb it (the
    /// maximum burst size of the netest paper).  Default 64 (≈ 96 KB).
    pub max_packets_per_car: u32,
    /// How long a train lasts at its sending rate.  The rate is a slope over
    /// the whole train, so a receiver that bunches arrivals into intervals of
    /// `q` disturbs it by roughly `q / duration / √cars`.  Default 10 ms.
    pub train_duration: DurationNs,
    /// The receiver's known interrupt-coalescing interval, if any; trains are
    /// then made to last at least 80 times it.  Default 0 (unknown/none).
    pub receiver_bunching: DurationNs,
    /// Fewest cars in a train (enough points for a slope).  Default 16.
    pub min_cars: u32,
    /// Most cars in a train.  Default 4096.
    pub max_cars: u32,
    /// The first train's rate and the ceiling of every train.  A path that
    /// carries a train at this rate untouched yields only the lower bound
    /// `A ≥ max_rate`.  Default 1 Gb/s.
    pub max_rate: BitRate,
    /// The floor of every train's rate.  Default 100 kb/s.
    pub min_rate: BitRate,
    /// A train whose receive/send rate ratio is at least `1 − tolerance` was
    /// carried; below that it was sent above A.  Default 0.01.
    pub tolerance: f64,
    /// A train enters the fit only if its ratio is below `1 − fit_margin`
    /// (and below `1 − tolerance`).  Close to A the tight link's queue empties
    /// now and then under bursty cross traffic, so the ratio there bends away
    /// from the fluid line; a margin of 0.03 keeps fit points at least 3 % of
    /// C above A.  Default 0.03.
    pub fit_margin: f64,
    /// The stopping rule needs at least this many fit points (3 at least:
    /// two points always lie on a line and say nothing of their scatter).
    /// Default 4, so that the scatter is judged on two degrees of freedom.
    pub min_fit_points: u32,
    /// The fit is stable when adding its latest point moved A by at most this
    /// fraction.  Default 0.01.
    pub stability: f64,
    /// The fit's 95 % half-width on A, relative to A, must be at most this
    /// before FAC² stops.  Default 0.05.
    pub max_relative_band: f64,
    /// Trains that lost more than this fraction stay out of the fit: a
    /// dropping queue breaks the fluid relation.  Default 0.01.
    pub max_fit_loss: f64,
    /// Stop after this many trains even without meeting the stopping rule —
    /// unless the path is noisy (see `noisy_train_time`).  Default 24.
    pub max_trains: u32,
    /// On a noisy path (the fit's points scatter like cross traffic and the
    /// band is not yet tight) FAC² runs on a budget of probe time instead of
    /// `max_trains`: it goes on while the trains so far lasted less than this
    /// in all (time at their sending rate), up to `noisy_max_trains`.  High
    /// load needs it: at 90 % of 300 Mb/s, Poisson cross traffic varies by
    /// ±18 Mb/s over 10 ms, 60 % of A.  Default 2 s.
    #[serde(default = "default_noisy_train_time")]
    pub noisy_train_time: DurationNs,
    /// The hard cap on trains on a noisy path.  Default 64.
    #[serde(default = "default_noisy_max_trains")]
    pub noisy_max_trains: u32,
    /// Stop after this many consecutive trains that delivered too little to
    /// measure.  Default 3.
    pub max_failed_trains: u32,
    /// At high load, ask for an idle gap before a train so that the queue
    /// the previous train left drains first (`TrainSpec::idle_before`).  It
    /// helped on the synthetic path (90 % load median 5.3 → 3.0 %) but not on
    /// the lab (8 runs at 90 %: median 57 % with it, 31 % without), so it is
    /// off by default until the lab says otherwise.
    #[serde(default)]
    pub drain_idle: bool,
    /// At high load (the fit puts A below 25 % of C): cars of at least two
    /// packets, C from the intra-car receive gaps, and A = C − X̂ from each
    /// clean train's own cross traffic.  Lab at 90 %: medians 13–36 % over
    /// three sweeps (31–34 % without); one 70 % sweep of two had a 5.9 %
    /// median, so it stays off by default until more runs say otherwise.
    #[serde(default)]
    pub gap_capacity: bool,
    /// At high load (the fit with and without the latest train puts A below
    /// 25 % of C): near trains sized for the noise (long enough that the
    /// cross traffic they meet scatters by at most a quarter of A, up to
    /// 200 ms and the probe time left), placed one standard deviation of the
    /// combined noise above A rather than two, a queue budget never below
    /// the largest queue a train built without loss nor below 128 KB, and
    /// such near trains kept in the fit up to 20 % loss (a drop-tail queue
    /// drops probe and cross packets alike, so `R/r` stays on the line).
    /// Lab, 300 Mb/s, 15 runs a load: 90 % median 3.9 % (30 % without),
    /// 70 % median 2.7 %.  On by default.
    #[serde(default = "default_long_near_trains")]
    pub long_near_trains: bool,
    /// The tight link's capacity as the user stated it (`--known-capacity`,
    /// through `MethodSettings::known_capacity`; never a lab's or a
    /// scenario's C).  Only at high load
    /// (`A = C − X̂` below 25 % of C) is it used: the fit's slope (1/C) rests
    /// there on points that differ by a few per cent in `R/r`, and every
    /// 10 % of error in C moves A by about a third of `R/r − 1` times C.
    /// With C known and at least five near trains in the fit, A = C − the
    /// weighted mean of `C·R/r − R` over those near trains.  Lab, 300 Mb/s,
    /// 90 % load, 38 runs re-read: median |error| 9.0 % with the fitted C,
    /// 5.3 % with the known one (docs/methods/fac2.md).
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
            train_duration: DurationNs::from_ms(10),
            receiver_bunching: DurationNs::ZERO,
            min_cars: 16,
            max_cars: 4096,
            max_rate: BitRate::from_gbps(1.0),
            min_rate: BitRate::from_kbps(100.0),
            tolerance: 0.01,
            fit_margin: 0.03,
            min_fit_points: 4,
            stability: 0.01,
            max_relative_band: 0.02,
            max_fit_loss: 0.01,
            max_trains: 24,
            noisy_train_time: default_noisy_train_time(),
            noisy_max_trains: default_noisy_max_trains(),
            max_failed_trains: 3,
            drain_idle: false,
            gap_capacity: false,
            long_near_trains: default_long_near_trains(),
            known_capacity: None,
        }
    }
}

fn default_noisy_train_time() -> DurationNs {
    DurationNs::from_secs(2)
}

fn default_long_near_trains() -> bool {
    true
}

fn default_noisy_max_trains() -> u32 {
    64
}

/// Smallest and largest packet sizes FAC² will plan (an IPv4+UDP header to
/// the largest IP datagram).
const PACKET_SIZE_RANGE: (u64, u64) = (28, 65_535);

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
    /// The ratio below which a train enters the fit.
    pub(crate) fn fit_ratio(&self) -> f64 {
        1.0 - sane_fraction(self.fit_margin, 0.03).max(self.tolerance())
    }
    pub(crate) fn stability(&self) -> f64 {
        sane_fraction(self.stability, 0.01)
    }
    pub(crate) fn max_relative_band(&self) -> f64 {
        sane_fraction(self.max_relative_band, 0.05)
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

    /// The least time between car starts for a given clock resolution:
    /// `max(min_car_interval, car_interval_resolutions × resolution)`.
    pub fn min_car_spacing(&self, resolution: DurationNs) -> DurationNs {
        let by_clock = resolution
            .ns()
            .max(0)
            .saturating_mul(i64::from(self.car_interval_resolutions));
        DurationNs::from_ns(self.min_car_interval.ns().max(by_clock).max(1))
    }

    /// The train FAC² sends to probe `rate`.
    ///
    /// Cars are made just large enough that consecutive car starts are at
    /// least [`Fac2Config::min_car_spacing`] apart at this rate (so the clock
    /// and the pacing timer are small against a car interval), capped at
    /// `max_packets_per_car` (so a car stays a burst the path can absorb).
    /// Then enough cars are sent to last `train_duration × duration_scale`
    /// (`duration_scale` in [1/64, 64]; at least 80 receiver-coalescing
    /// intervals), between `min_cars` and `max_cars`.  The car interval is deliberately *not* made longer than
    /// the receiver's coalescing interval: the receive rate is a slope over all
    /// cars, which tolerates several cars sharing one interrupt, whereas fewer,
    /// bigger cars would mean bigger bursts and fewer points.
    pub fn train_for(
        &self,
        rate: BitRate,
        resolution: DurationNs,
        duration_scale: f64,
    ) -> TrainSpec {
        let bps = self.clamp_rate(rate.bps());
        let size = self.packet_bytes();
        let packet_secs = size.bits() as f64 / bps;
        let spacing = self.min_car_spacing(resolution).secs_f64();
        let ppc = (spacing / packet_secs)
            .ceil()
            .clamp(1.0, f64::from(self.max_packets_per_car.max(1)));
        let car_secs = ppc * packet_secs;
        let scale = if duration_scale.is_finite() {
            duration_scale.clamp(1.0 / 64.0, 64.0)
        } else {
            1.0
        };
        let duration = (self.train_duration.secs_f64() * scale)
            .max(80.0 * self.receiver_bunching.secs_f64())
            .max(0.0);
        let min_cars = self.min_cars.max(2);
        let max_cars = self.max_cars.max(min_cars);
        let cars = (duration / car_secs)
            .ceil()
            .clamp(f64::from(min_cars), f64::from(max_cars));
        // `as` saturates and maps NaN to 0; the clamps above keep both in range
        // for any finite input, and the `max(1)` covers the rest.
        TrainSpec {
            packet_size: size,
            packets_per_car: (ppc as u32).max(1),
            cars: (cars as u32).max(min_cars),
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
    fn cars_grow_with_rate_so_car_intervals_stay_long() {
        let cfg = Fac2Config::default();
        let res = DurationNs::from_us(1);
        // 1 Gb/s: 12 µs per packet, 50 µs spacing ⇒ 5 packets per car, 60 µs apart.
        let t = cfg.train_for(BitRate::from_gbps(1.0), res, 1.0);
        assert_eq!(t.packets_per_car, 5);
        assert_eq!(t.car_interval().unwrap(), DurationNs::from_us(60));
        assert_eq!(t.cars, 167);
        // 100 Mb/s: one 120 µs packet per car, 84 cars for 10 ms.
        let t = cfg.train_for(BitRate::from_mbps(100.0), res, 1.0);
        assert_eq!((t.packets_per_car, t.cars), (1, 84));
        // 10 Mb/s: 1.2 ms per car, min_cars decides.
        let t = cfg.train_for(BitRate::from_mbps(10.0), res, 1.0);
        assert_eq!((t.packets_per_car, t.cars), (1, 16));
        // A coarse 10 µs clock needs 500 µs between car starts.
        let t = cfg.train_for(BitRate::from_gbps(1.0), DurationNs::from_us(10), 1.0);
        assert_eq!(t.packets_per_car, 42);
        // Rates outside the band are clamped; nonsense goes to the floor.
        let t = cfg.train_for(BitRate::from_gbps(40.0), res, 1.0);
        assert_eq!(t.rate, cfg.max_rate);
        let t = cfg.train_for(BitRate::from_bps(f64::NAN), res, f64::NAN);
        assert_eq!(t.rate, cfg.min_rate);
        assert_eq!(t.cars, 16);
    }

    #[test]
    fn burst_cap_and_coalescing_floor() {
        let cfg = Fac2Config {
            max_rate: BitRate::from_gbps(100.0),
            ..Fac2Config::default()
        }
        .with_receiver_bunching(DurationNs::from_us(250));
        let t = cfg.train_for(BitRate::from_gbps(100.0), DurationNs::from_us(1), 1.0);
        assert_eq!(t.packets_per_car, 64);
        // 20 ms (80 × 250 µs) of 7.68 µs cars.
        assert_eq!(t.cars, 2605);
    }
}
