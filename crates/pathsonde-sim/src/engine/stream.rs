//! A uniform probe stream's per-packet stamps, for latency-trace oracles.
//!
//! [`Sim::probe_stream`] sends `count` packets `spacing` apart through the
//! sender host's timing model and returns each packet's send stamp (when it
//! started onto the first link) and receive stamp (when the receiver's NIC
//! handed it up), or `None` for a loss.  `pathsonde-trace` turns these into
//! one-way latency traces whose band step and queue-cycle period follow from
//! the scenario (docs/trace.md, "Oracles").  Nothing here changes how the
//! simulator runs: it is the method driver's probe path with the stamps
//! handed out.

use super::{Sim, NEVER};
use crate::time::Ps;
use pathsonde_core::{Bytes, CarSlot, DurationNs, ScheduleSpec};

/// One probe packet's stamps, simulated picoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamStamp {
    pub sent: Ps,
    /// `None`: dropped (or still in flight at the deadline).
    pub recv: Option<Ps>,
}

impl Sim {
    /// Sends `count` packets of `size` every `spacing` from `start` and runs
    /// until all are received or dropped or `deadline` passes.
    pub fn probe_stream(
        &mut self,
        count: u32,
        spacing: DurationNs,
        size: Bytes,
        start: Ps,
        deadline: Ps,
    ) -> Vec<StreamStamp> {
        let sched = ScheduleSpec {
            packet_size: size,
            cars: (0..i64::from(count))
                .map(|k| CarSlot {
                    offset: DurationNs::from_ns(k * spacing.ns()),
                    packets: 1,
                })
                .collect(),
            idle_before: DurationNs::ZERO,
        };
        self.run_until(start);
        self.schedule_probe(&sched, start);
        self.run_probe(deadline);
        self.probe
            .sent
            .iter()
            .zip(&self.probe.recv)
            .map(|(&sent, &r)| StreamStamp {
                sent,
                recv: (r != NEVER).then_some(r),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use crate::scenario::Scenario;
    use crate::time::Ps;
    use crate::Sim;
    use pathsonde_core::{Bytes, DurationNs};

    #[test]
    fn an_idle_path_gives_every_packet_the_same_latency() {
        let scn = Scenario::parse(
            "[sender]\ntimer_resolution = \"1ns\"\n[receiver]\nnic = { coalescing = false }\n[[link]]\nrate = \"1G\"\ndelay = \"5us\"\n",
        )
        .unwrap();
        let mut sim = Sim::new(&scn, 1).unwrap();
        let s = sim.probe_stream(
            100,
            DurationNs::from_us(20),
            Bytes(1000),
            Ps::US,
            10 * Ps::MS,
        );
        assert_eq!(s.len(), 100);
        for (k, p) in s.iter().enumerate() {
            assert_eq!(p.sent, Ps::US + k as u64 * 20 * Ps::US);
            // 8 µs on the wire at 1 Gb/s plus 5 µs.
            assert_eq!(p.recv, Some(p.sent + 13 * Ps::US));
        }
    }

    #[test]
    fn a_full_drop_tail_queue_loses_packets() {
        let scn = Scenario::parse(
            "[sender]\ntimer_resolution = \"1ns\"\n[receiver]\nnic = { coalescing = false }\n[[link]]\nrate = \"10G\"\n[[link]]\nrate = \"1G\"\nqueue = \"5000\"\n",
        )
        .unwrap();
        let mut sim = Sim::new(&scn, 1).unwrap();
        // 1000 B every 1 µs into 1 Gb/s (8 µs each): most are dropped.
        let s = sim.probe_stream(
            50,
            DurationNs::from_us(1),
            Bytes(1000),
            Ps::ZERO,
            10 * Ps::MS,
        );
        let lost = s.iter().filter(|p| p.recv.is_none()).count();
        assert_eq!(lost as u64, sim.link_stats(1).drops);
        assert!(lost > 30, "{lost}");
    }
}
