//! What a method asks the path to carry next.

use crate::units::{BitRate, Bytes, DurationNs};
use serde::{Deserialize, Serialize};

/// The next probe a method wants sent, or `Done`.
///
/// New probe shapes (chirps, pairs, bursts) join this enum as the methods that
/// need them land; every runner (real path, lab, simulator) must then learn to
/// carry them, which the compiler enforces.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub enum ProbePlan {
    /// A constant-rate train of cars.
    Train(TrainSpec),
    /// The method has finished; read [`crate::Method::estimate`].
    Done,
}

/// A train of `cars` cars, each `packets_per_car` back-to-back packets of
/// `packet_size` bytes, whose cars start at a constant spacing so that the
/// train's average rate is `rate`.
///
/// Sizes are IP datagram sizes (IP and UDP headers included, link header not):
/// the bytes a router queues.  A runner sends `packet_size - headers` of UDP payload.
///
/// `idle_before` asks the runner to keep the path idle for at least that long
/// before the first car (on top of whatever gap the runner leaves anyway), so
/// that a queue left by the previous train can drain; zero (the default) asks
/// for nothing.  The car schedule starts after the pause, and the send stamps
/// a runner reports remain the achieved times.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TrainSpec {
    pub packet_size: Bytes,
    pub packets_per_car: u32,
    pub cars: u32,
    pub rate: BitRate,
    #[serde(default)]
    pub idle_before: DurationNs,
}

impl TrainSpec {
    pub fn car_bytes(&self) -> Bytes {
        Bytes(self.packet_size.get() * u64::from(self.packets_per_car))
    }
    pub fn total_packets(&self) -> u64 {
        u64::from(self.packets_per_car) * u64::from(self.cars)
    }
    pub fn total_bytes(&self) -> Bytes {
        Bytes(self.packet_size.get() * self.total_packets())
    }
    /// Time from one car's start to the next car's start.
    pub fn car_interval(&self) -> Option<DurationNs> {
        self.rate.time_to_send(self.car_bytes())
    }
    /// Scheduled start of car `index` relative to the train's start.
    pub fn car_offset(&self, index: u32) -> Option<DurationNs> {
        let bits = self.car_bytes().bits() as f64 * f64::from(index);
        if !self.rate.is_positive() {
            return None;
        }
        Some(DurationNs::from_secs_f64(bits / self.rate.bps()))
    }
    /// Nominal duration of the whole train at its rate.
    pub fn duration(&self) -> Option<DurationNs> {
        self.rate.time_to_send(self.total_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn car_spacing_gives_the_train_rate() {
        let t = TrainSpec {
            packet_size: Bytes(1500),
            packets_per_car: 4,
            cars: 10,
            rate: BitRate::from_mbps(100.0),
            idle_before: DurationNs::ZERO,
        };
        assert_eq!(t.car_bytes(), Bytes(6000));
        assert_eq!(t.car_interval().unwrap(), DurationNs::from_us(480));
        assert_eq!(t.car_offset(3).unwrap(), DurationNs::from_us(1440));
        assert_eq!(t.total_packets(), 40);
        assert_eq!(t.duration().unwrap(), DurationNs::from_us(4800));
    }
}
