//! What a method asks the path to carry next.

use crate::units::{BitRate, Bytes, DurationNs};
use serde::{Deserialize, Serialize};

/// The next probe a method wants sent, or `Done`.
///
/// Two shapes cover every method: a constant-rate [`TrainSpec`] (FAC², SLoPS
/// streams, IGI/PTR trains) and a [`ScheduleSpec`] whose cars start at
/// explicit offsets (chirps, packet pairs, bursts).  A runner needs to carry
/// only schedules: [`ProbePlan::schedule`] turns a train into one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub enum ProbePlan {
    /// A constant-rate train of cars.
    Train(TrainSpec),
    /// Cars at explicit offsets.
    Schedule(ScheduleSpec),
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
    pub(crate) fn car_bytes(&self) -> Bytes {
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
    pub(crate) fn car_offset(&self, index: u32) -> Option<DurationNs> {
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

impl ProbePlan {
    /// The plan as cars at explicit offsets, or `None` for [`ProbePlan::Done`].
    pub fn schedule(&self) -> Option<ScheduleSpec> {
        match self {
            ProbePlan::Train(spec) => Some(ScheduleSpec::from_train(spec)),
            ProbePlan::Schedule(s) => Some(s.clone()),
            ProbePlan::Done => None,
        }
    }

    /// The constant-rate summary an [`crate::Observation`] carries: the train
    /// itself, or a schedule's [`ScheduleSpec::summary`].
    pub fn summary(&self) -> Option<TrainSpec> {
        match self {
            ProbePlan::Train(spec) => Some(*spec),
            ProbePlan::Schedule(s) => Some(s.summary()),
            ProbePlan::Done => None,
        }
    }
}

/// Most packets a schedule may hold; runners refuse larger ones (the wire's
/// own per-train limit is the same).
pub(crate) const MAX_SCHEDULE_PACKETS: u64 = 100_000;

/// One car of a schedule: `packets` back-to-back packets whose first leaves
/// `offset` after the schedule's start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CarSlot {
    pub offset: DurationNs,
    pub packets: u32,
}

/// A probe of cars at explicit start offsets, every packet `packet_size`
/// bytes (IP datagram size, as in [`TrainSpec`]).  Chirps (one packet a car,
/// gaps shrinking geometrically), packet pairs (two-packet cars at Poisson
/// offsets, or one-packet cars a set gap apart) and bursts (large cars) are
/// all schedules.  Offsets must not decrease; a car due before the previous
/// one has left leaves as soon as it can, and the achieved send stamps are
/// what the method sees.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScheduleSpec {
    pub packet_size: Bytes,
    pub cars: Vec<CarSlot>,
    /// As [`TrainSpec::idle_before`].
    #[serde(default)]
    pub idle_before: DurationNs,
}

impl ScheduleSpec {
    /// The constant-rate train as a schedule.
    pub fn from_train(spec: &TrainSpec) -> ScheduleSpec {
        let cars = (0..spec.cars)
            .map(|k| CarSlot {
                offset: spec.car_offset(k).unwrap_or(DurationNs::ZERO),
                packets: spec.packets_per_car,
            })
            .collect();
        ScheduleSpec {
            packet_size: spec.packet_size,
            cars,
            idle_before: spec.idle_before,
        }
    }

    pub fn total_packets(&self) -> u64 {
        self.cars.iter().map(|c| u64::from(c.packets)).sum()
    }

    pub fn total_bytes(&self) -> Bytes {
        Bytes(self.packet_size.get() * self.total_packets())
    }

    /// Offset of the last car (zero for an empty schedule).
    pub fn span(&self) -> DurationNs {
        self.cars.last().map_or(DurationNs::ZERO, |c| c.offset)
    }

    /// The rate the schedule asks for on average: the bits of every car but
    /// the last over the time from the first car's start to the last's.  For
    /// a constant-rate train this is exactly its rate.  Zero when the
    /// schedule has fewer than two cars or no span.
    pub(crate) fn nominal_rate(&self) -> BitRate {
        let (Some(first), Some(last)) = (self.cars.first(), self.cars.last()) else {
            return BitRate::ZERO;
        };
        let span = last.offset.ns() - first.offset.ns();
        if self.cars.len() < 2 || span <= 0 {
            return BitRate::ZERO;
        }
        let packets: u64 = self.cars[..self.cars.len() - 1]
            .iter()
            .map(|c| u64::from(c.packets))
            .sum();
        let bits = (self.packet_size.get() * packets * 8) as f64;
        BitRate::from_bps(bits / (span as f64 * 1e-9))
    }

    /// A constant-rate description for reports and for code that reads
    /// [`crate::Observation::spec`]: the packet size, the largest car, the
    /// number of cars and the nominal rate.
    pub fn summary(&self) -> TrainSpec {
        TrainSpec {
            packet_size: self.packet_size,
            packets_per_car: self.cars.iter().map(|c| c.packets).max().unwrap_or(0),
            cars: u32::try_from(self.cars.len()).unwrap_or(u32::MAX),
            rate: self.nominal_rate(),
            idle_before: self.idle_before,
        }
    }

    /// Why a runner should refuse this schedule, if it should.
    pub fn check(&self) -> Result<(), ScheduleError> {
        if self.cars.is_empty() {
            return Err(ScheduleError::NoCars);
        }
        if self.cars.iter().any(|c| c.packets == 0) {
            return Err(ScheduleError::EmptyCar);
        }
        let packets = self.total_packets();
        if packets > MAX_SCHEDULE_PACKETS {
            // Say what would fit: the same schedule at the rate that keeps
            // it within the limit for as long.
            let fits = BitRate::from_bps(
                self.nominal_rate().bps() * MAX_SCHEDULE_PACKETS as f64 / packets as f64,
            );
            return Err(ScheduleError::TooManyPackets { packets, fits });
        }
        if self.cars.windows(2).any(|w| w[1].offset < w[0].offset) {
            return Err(ScheduleError::OffsetsDecrease);
        }
        if self.cars[0].offset.ns() < 0 {
            return Err(ScheduleError::StartsBeforeZero);
        }
        Ok(())
    }
}

/// Why a schedule cannot be carried ([`ProbeSchedule::check`]).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ScheduleError {
    #[error("schedule has no cars")]
    NoCars,
    #[error("schedule has a car of zero packets")]
    EmptyCar,
    /// More packets than one train may hold; `fits` is the rate at which the
    /// same schedule would fit, for as long.
    #[error("a train of {packets} packets is more than the {MAX_SCHEDULE_PACKETS} one train may hold: probe at a lower maximum rate (about {fits} or less)")]
    TooManyPackets { packets: u64, fits: BitRate },
    #[error("schedule offsets decrease")]
    OffsetsDecrease,
    #[error("schedule starts before zero")]
    StartsBeforeZero,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_train_as_a_schedule_keeps_its_rate_and_shape() {
        let t = TrainSpec {
            packet_size: Bytes(1500),
            packets_per_car: 4,
            cars: 10,
            rate: BitRate::from_mbps(100.0),
            idle_before: DurationNs::from_us(7),
        };
        let s = ProbePlan::Train(t).schedule().unwrap();
        assert_eq!(s.cars.len(), 10);
        assert_eq!(s.cars[3].offset, DurationNs::from_us(1440));
        assert_eq!(s.total_packets(), 40);
        assert!((s.nominal_rate().mbps() - 100.0).abs() < 1e-9);
        let sum = s.summary();
        assert_eq!(sum.packets_per_car, 4);
        assert_eq!(sum.cars, 10);
        assert_eq!(sum.idle_before, DurationNs::from_us(7));
        assert!(s.check().is_ok());
        assert_eq!(ProbePlan::Done.schedule(), None);
    }

    #[test]
    fn bad_schedules_are_refused() {
        let slot = |us, packets| CarSlot {
            offset: DurationNs::from_us(us),
            packets,
        };
        let mk = |cars| ScheduleSpec {
            packet_size: Bytes(1000),
            cars,
            idle_before: DurationNs::ZERO,
        };
        assert!(mk(vec![]).check().is_err());
        assert!(mk(vec![slot(0, 1), slot(5, 0)]).check().is_err());
        assert!(mk(vec![slot(10, 1), slot(5, 1)]).check().is_err());
        assert!(mk(vec![slot(0, 60_000), slot(5, 60_000)]).check().is_err());
        let chirp = mk(vec![slot(0, 1), slot(80, 1), slot(120, 1)]);
        assert!(chirp.check().is_ok());
        // 2 packets of 8000 bits over 120 us.
        assert!((chirp.nominal_rate().mbps() - 16000.0 / 120.0).abs() < 1e-6);
    }

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
