//! Hosts that cannot keep up: a sender with a packet-rate ceiling and late
//! wake-ups, a receiver with a processing budget that drops what it cannot
//! take, and stamps moved by the hosts' timing — wrapped around any path.
//!
//! Jin & Tierney (system capability effects) show each of these bending
//! what a bandwidth tool reads at high speed.  The wrapper changes what the
//! inner path carries (the sender's real timing reaches the path's queues,
//! as on a real host), then hands the method its own plan back with the
//! achieved stamps, so a method sees exactly what a real runner would
//! report.  Seeded and pure, like every path in core.

use super::ProbePath;
use crate::observation::Observation;
use crate::plan::{CarSlot, ProbePlan, ScheduleSpec};
use crate::rng::SplitMix64;
use crate::units::{DurationNs, TimeNs};

/// What the hosts at the two ends cannot do.  `Default` is a perfect pair
/// of hosts: the wrapper then changes nothing.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct HostLimits {
    /// The sender emits at most this many packets per second (its per-packet
    /// cost): a car of `n` packets takes `n / send_pps` to leave, and the
    /// next car cannot start before.  `None`: no ceiling.
    pub send_pps: Option<f64>,
    /// Each car starts late by a uniform amount in `[0, send_jitter]` (late
    /// wake-ups); later cars wait behind it.
    pub send_jitter: DurationNs,
    /// The receiver takes at most this many packets per second off its
    /// queue; `None`: as many as arrive.
    pub recv_pps: Option<f64>,
    /// Packets the receiver can hold waiting (its socket buffer); an arrival
    /// that finds it full is dropped by the host and counted.
    pub recv_queue: u32,
    /// Each receive stamp is late by a uniform amount in `[0, stamp_noise]`.
    pub stamp_noise: DurationNs,
    pub seed: u64,
}

/// A path whose hosts are limited by [`HostLimits`].
#[derive(Debug, Clone)]
pub struct HostModel<P> {
    inner: P,
    limits: HostLimits,
    rng: SplitMix64,
}

impl<P> HostModel<P> {
    pub fn new(inner: P, limits: HostLimits) -> Self {
        HostModel {
            inner,
            rng: SplitMix64::for_stream(limits.seed, 0x4057),
            limits,
        }
    }

    pub fn inner(&self) -> &P {
        &self.inner
    }

    fn uniform(&mut self, max: DurationNs) -> i64 {
        if max.ns() <= 0 {
            0
        } else {
            (self.rng.next_f64() * max.ns() as f64) as i64
        }
    }

    /// The schedule the sender really keeps, one packet a car when it has a
    /// ceiling, and for each of its cars the planned car it belongs to.
    fn as_sent(&mut self, plan: &ScheduleSpec) -> (ScheduleSpec, Vec<u32>) {
        let per_packet = self.limits.send_pps.filter(|p| p.is_finite() && *p > 0.0);
        let step = per_packet.map_or(0, |pps| (1e9 / pps).ceil() as i64);
        let mut cars = Vec::with_capacity(plan.cars.len());
        let mut owner = Vec::with_capacity(plan.cars.len());
        let mut free = 0i64;
        for (k, slot) in plan.cars.iter().enumerate() {
            let start = (slot.offset.ns() + self.uniform(self.limits.send_jitter)).max(free);
            if per_packet.is_some() {
                for i in 0..i64::from(slot.packets) {
                    cars.push(CarSlot {
                        offset: DurationNs::from_ns(start + i * step),
                        packets: 1,
                    });
                    owner.push(k as u32);
                }
                free = start + i64::from(slot.packets) * step;
            } else {
                cars.push(CarSlot {
                    offset: DurationNs::from_ns(start),
                    packets: slot.packets,
                });
                owner.push(k as u32);
                free = start;
            }
        }
        (
            ScheduleSpec {
                packet_size: plan.packet_size,
                cars,
                idle_before: plan.idle_before,
            },
            owner,
        )
    }

    /// The receiver's budget and clock applied to arrivals.
    fn receive(&mut self, obs: &mut Observation) {
        if let Some(pps) = self.limits.recv_pps.filter(|p| p.is_finite() && *p > 0.0) {
            let service = (1e9 / pps).ceil() as i64;
            let mut order: Vec<usize> = (0..obs.packets.len())
                .filter(|&i| obs.packets[i].received.is_some())
                .collect();
            order.sort_by_key(|&i| obs.packets[i].received);
            // Departure times of the packets still waiting, oldest first.
            let mut waiting: std::collections::VecDeque<i64> = Default::default();
            let mut busy_until = i64::MIN;
            let mut dropped = 0u64;
            for i in order {
                let Some(at) = obs.packets[i].received.map(TimeNs::ns) else {
                    continue;
                };
                while waiting.front().is_some_and(|&d| d <= at) {
                    waiting.pop_front();
                }
                if waiting.len() >= self.limits.recv_queue.max(1) as usize {
                    obs.packets[i].received = None;
                    dropped += 1;
                    continue;
                }
                busy_until = busy_until.max(at) + service;
                waiting.push_back(busy_until);
            }
            obs.receiver_drops = Some(obs.receiver_drops.unwrap_or(0) + dropped);
        }
        if self.limits.stamp_noise.ns() > 0 {
            for i in 0..obs.packets.len() {
                let late = self.uniform(self.limits.stamp_noise);
                if let Some(t) = obs.packets[i].received.as_mut() {
                    *t = TimeNs::from_ns(t.ns().saturating_add(late));
                }
            }
        }
    }
}

impl<P: ProbePath> ProbePath for HostModel<P> {
    type Error = P::Error;

    fn carry(&mut self, plan: &ProbePlan, index: u32) -> Result<Observation, P::Error> {
        let (Some(planned), Some(summary)) = (plan.schedule(), plan.summary()) else {
            return self.inner.carry(plan, index);
        };
        let (sent, owner) = self.as_sent(&planned);
        let mut obs = self.inner.carry(&ProbePlan::Schedule(sent), index)?;
        for p in &mut obs.packets {
            p.car = owner.get(p.car as usize).copied().unwrap_or(p.car);
        }
        obs.spec = summary;
        obs.schedule = match plan {
            ProbePlan::Schedule(s) => Some(s.clone()),
            _ => None,
        };
        self.receive(&mut obs);
        Ok(obs)
    }

    fn exhausted(&self) -> bool {
        self.inner.exhausted()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dispersion;
    use crate::synthetic::{FluidPath, FluidPathConfig};
    use crate::units::{BitRate, Bytes};
    use crate::TrainSpec;

    fn train(mbps: f64) -> ProbePlan {
        ProbePlan::Train(TrainSpec {
            packet_size: Bytes(1500),
            packets_per_car: 4,
            cars: 50,
            rate: BitRate::from_mbps(mbps),
            idle_before: DurationNs::ZERO,
        })
    }

    fn path() -> FluidPath {
        FluidPath::new(FluidPathConfig::new(
            BitRate::from_gbps(10.0),
            BitRate::ZERO,
        ))
    }

    #[test]
    fn a_perfect_host_changes_nothing() {
        let mut plain = path();
        let mut wrapped = HostModel::new(path(), HostLimits::default());
        let a = plain.carry(&train(800.0), 0).unwrap();
        let b = wrapped.carry(&train(800.0), 0).unwrap();
        assert_eq!(a, b);
    }

    #[test]
    fn a_sender_ceiling_caps_the_rate_and_keeps_the_plan_and_cars() {
        // 50 kpps of 1500 B = 600 Mb/s.
        let limits = HostLimits {
            send_pps: Some(50_000.0),
            ..HostLimits::default()
        };
        let mut p = HostModel::new(path(), limits);
        let obs = p.carry(&train(2000.0), 0).unwrap();
        assert_eq!(obs.spec.rate, BitRate::from_mbps(2000.0));
        assert_eq!(obs.schedule, None);
        assert_eq!(obs.packets.len(), 200);
        assert_eq!(dispersion::cars(&obs).len(), 50);
        let sent = dispersion::sending_rate(&obs).unwrap().rate.mbps();
        assert!((sent - 600.0).abs() < 10.0, "{sent}");
        // Below the ceiling the plan is kept.
        let obs = p.carry(&train(300.0), 1).unwrap();
        let sent = dispersion::sending_rate(&obs).unwrap().rate.mbps();
        assert!((sent - 300.0).abs() < 3.0, "{sent}");
    }

    #[test]
    fn a_slow_receiver_drops_and_counts_and_noise_moves_stamps_late() {
        let limits = HostLimits {
            recv_pps: Some(40_000.0),
            recv_queue: 16,
            ..HostLimits::default()
        };
        let mut p = HostModel::new(path(), limits);
        let obs = p.carry(&train(1000.0), 0).unwrap();
        let drops = obs.receiver_drops.unwrap();
        assert!(drops > 0 && drops == obs.lost_packets(), "{drops}");
        let noisy = HostLimits {
            stamp_noise: DurationNs::from_us(300),
            ..HostLimits::default()
        };
        let a = path().carry(&train(100.0), 0).unwrap();
        let b = HostModel::new(path(), noisy)
            .carry(&train(100.0), 0)
            .unwrap();
        let moved = a
            .packets
            .iter()
            .zip(&b.packets)
            .map(|(x, y)| y.received.unwrap().ns() - x.received.unwrap().ns())
            .collect::<Vec<_>>();
        assert!(moved.iter().all(|&d| (0..=300_000).contains(&d)));
        assert!(moved.iter().any(|&d| d > 100_000));
        assert_eq!(b.receiver_drops, None);
    }
}
