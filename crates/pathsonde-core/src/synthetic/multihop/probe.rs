//! The multi-hop synthetic path as a [`ProbePath`] for the end-to-end
//! methods: a train or schedule crosses every link (the same FIFO links,
//! shapers and Poisson cross traffic as the `hops` trains) and each packet's
//! arrival at the far end is its receive stamp.  No ICMP is involved, so the
//! routers' rate limits play no part.  This is the path where the tight link
//! (least available bandwidth) and the narrow link (least capacity) are two
//! links, which a single-link model cannot show.

use super::MultiHopPath;
use crate::observation::{ClockInfo, ClockSource, Observation, PacketRecord};
use crate::path::ProbePath;
use crate::plan::{ProbePlan, ScheduleSpec, TrainSpec};
use crate::units::{BitRate, Bytes, DurationNs, TimeNs};

impl MultiHopPath {
    /// Carries one schedule end to end; `index` numbers the observation.
    fn carry_probe(&mut self, sched: &ScheduleSpec, index: u32) -> Vec<PacketRecord> {
        let line = self.cfg.line_rate.bps();
        let start = self.now + sched.idle_before.ns() as f64;
        let bits = sched.packet_size.bits() as f64;
        // (seq, car, sent, arrival at the next link's queue; NaN once dropped)
        let mut packets: Vec<(u32, u32, f64, f64)> = Vec::new();
        let mut free = start;
        let mut seq = 0u32;
        for (car, slot) in sched.cars.iter().enumerate() {
            for _ in 0..slot.packets {
                let at = (start + slot.offset.ns() as f64).max(free);
                free = at + bits * 1e9 / line;
                packets.push((seq, car as u32, at, free));
                seq += 1;
            }
        }
        for hop in 0..self.cfg.links.len() {
            let delay = self.cfg.links[hop].delay.ns() as f64;
            for pkt in packets.iter_mut().filter(|p| !p.3.is_nan()) {
                pkt.3 = self
                    .cross_link(hop, pkt.3, bits)
                    .map_or(f64::NAN, |t| t + delay);
            }
        }
        let last = packets
            .iter()
            .filter(|p| !p.3.is_nan())
            .map(|p| p.3)
            .fold(free, f64::max);
        self.now = last;
        self.train = self.train.max(index + 1);
        packets
            .into_iter()
            .map(|(seq, car, sent, arrived)| PacketRecord {
                seq,
                car,
                size: sched.packet_size,
                sent: TimeNs::from_ns(sent as i64),
                received: (!arrived.is_nan()).then(|| TimeNs::from_ns(arrived as i64)),
            })
            .collect()
    }
}

impl ProbePath for MultiHopPath {
    /// The model carries every plan.
    type Error = std::convert::Infallible;

    fn carry(&mut self, plan: &ProbePlan, index: u32) -> Result<Observation, Self::Error> {
        let (spec, schedule, packets) = match plan {
            ProbePlan::Train(spec) => {
                let sched = ScheduleSpec::from_train(spec);
                (*spec, None, self.carry_probe(&sched, index))
            }
            ProbePlan::Schedule(sched) => (
                sched.summary(),
                Some(sched.clone()),
                self.carry_probe(sched, index),
            ),
            ProbePlan::Done => (
                TrainSpec {
                    packet_size: Bytes::ZERO,
                    packets_per_car: 0,
                    cars: 0,
                    rate: BitRate::ZERO,
                    idle_before: DurationNs::ZERO,
                },
                None,
                Vec::new(),
            ),
        };
        let clock = ClockInfo {
            source: ClockSource::Simulated,
            resolution: DurationNs::from_ns(1),
        };
        Ok(Observation {
            train: index,
            spec,
            schedule,
            packets,
            send_clock: clock,
            recv_clock: clock,
            receiver_drops: None,
        })
    }
}
