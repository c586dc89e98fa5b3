//! The paced sender: puts a train of cars on the wire at the planned times
//! and records when each car actually left.
//!
//! Each car goes out as one `sendmmsg` batch (back to back, as fast as the
//! host can); between cars the sender waits on CLOCK_MONOTONIC (sleep, then a
//! busy-wait for the last few hundred microseconds).  A car that cannot leave
//! on time leaves as soon as it can, and the lateness is recorded — the
//! method sees achieved times, never the plan.

use crate::clock;
use crate::udp::BatchSender;
use pathsonde_core::{DurationNs, TimeNs, TrainSpec};
use pathsonde_wire::probe::{ProbeHeader, ProbeKind};
use std::io;
use std::net::UdpSocket;

/// What the pacer achieved for one train.
#[derive(Debug, Clone)]
pub struct SentTrain {
    /// CLOCK_MONOTONIC just before each car was handed to the kernel.
    pub car_sent: Vec<TimeNs>,
    /// Packets the kernel accepted, counted per car.
    pub car_packets: Vec<u32>,
    /// Largest delay of a car behind its schedule.
    pub max_lateness: DurationNs,
    /// Median delay of cars behind their schedule.
    pub median_lateness: DurationNs,
}

impl SentTrain {
    pub fn packets_sent(&self) -> u32 {
        self.car_packets.iter().sum()
    }
}

pub struct Pacer {
    sock: UdpSocket,
    session: u64,
    batch: BatchSender,
    bufs: Vec<Vec<u8>>,
}

/// How long before the first car the schedule starts, so that the first car
/// is not already late when the loop begins.
const LEAD: DurationNs = DurationNs::from_us(50);

impl Pacer {
    /// `sock` must be connected to the server's probe port.
    pub fn new(sock: UdpSocket, session: u64) -> Self {
        Pacer {
            sock,
            session,
            batch: BatchSender::new(64),
            bufs: Vec::new(),
        }
    }

    pub fn socket(&self) -> &UdpSocket {
        &self.sock
    }

    /// Sends train number `train` as planned by `spec`, each packet carrying
    /// `payload_len` bytes of UDP payload.
    pub fn send_train(
        &mut self,
        train: u32,
        spec: &TrainSpec,
        payload_len: usize,
    ) -> io::Result<SentTrain> {
        let per_car = spec.packets_per_car.max(1) as usize;
        if self.bufs.len() != per_car || self.bufs.first().map(Vec::len) != Some(payload_len) {
            self.bufs = vec![vec![0u8; payload_len]; per_car];
        }
        let cars = spec.cars as usize;
        let mut car_sent = Vec::with_capacity(cars);
        let mut car_packets = Vec::with_capacity(cars);
        let mut lateness = Vec::with_capacity(cars);
        // An idle pause the plan asks for (so that the path's queue drains)
        // comes before the schedule; the stamps below stay achieved times.
        let idle = DurationNs::from_ns(spec.idle_before.ns().clamp(0, 1_000_000_000));
        let start = clock::monotonic() + idle + LEAD;
        for car in 0..spec.cars {
            let offset = spec.car_offset(car).unwrap_or(DurationNs::ZERO);
            let target = start + offset;
            for (i, buf) in self.bufs.iter_mut().enumerate() {
                let header = ProbeHeader {
                    kind: ProbeKind::Probe,
                    session: self.session,
                    train,
                    car,
                    seq: car * per_car as u32 + i as u32,
                    send_ns: target.ns(),
                };
                header.write_header(buf);
            }
            clock::wait_until(target);
            let now = clock::monotonic();
            let n = self.batch.send(&self.sock, &self.bufs)?;
            car_sent.push(now);
            car_packets.push(n as u32);
            lateness.push(now.since(target).ns());
        }
        lateness.sort_unstable();
        let max_lateness = DurationNs::from_ns(lateness.last().copied().unwrap_or(0));
        let median_lateness =
            DurationNs::from_ns(lateness.get(lateness.len() / 2).copied().unwrap_or(0));
        Ok(SentTrain {
            car_sent,
            car_packets,
            max_lateness,
            median_lateness,
        })
    }
}
