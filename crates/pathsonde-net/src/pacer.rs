//! The paced sender: puts a train of cars on the wire at the planned times
//! and records when each car actually left.
//!
//! Each car goes out as one `sendmmsg` batch (back to back, as fast as the
//! host can); between cars the sender waits on CLOCK_MONOTONIC (sleep, then a
//! busy-wait for the last few hundred microseconds).  A car that cannot leave
//! on time leaves as soon as it can, and the lateness is recorded — the
//! method sees achieved times, never the plan.
//!
//! Where the kernel gives software transmit stamps ([`TxStamps`]), they are
//! read back from the socket's error queue after each train (and during a
//! long one) and become the packets' send times: the kernel's, not the
//! program's guesses.  A train is stamped wholly by one clock — the kernel's
//! CLOCK_REALTIME stamps when every packet has one, else the user-space
//! CLOCK_MONOTONIC reads — never a mix.

use crate::clock;
use crate::udp::{BatchSender, TxStamps};
use pathsonde_core::{DurationNs, ScheduleSpec, TimeNs, TrainSpec};
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
    /// The kernel's software transmit stamp of every packet the kernel
    /// accepted (taken on CLOCK_REALTIME, shifted onto CLOCK_MONOTONIC), in
    /// sequence order; `None` when the kernel gave none or
    /// missed any packet of the train (then `car_sent` is the send time).
    pub kernel_sent: Option<Vec<TimeNs>>,
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
    /// Transmit stamps: `None` until the first train turns them on (so that
    /// echo requests sent earlier do not count), `Some(None)` if refused.
    tx: Option<Option<TxStamps>>,
    /// OPT_ID counter of the next datagram this socket sends.
    tx_next: u32,
}

/// Stamps pending on the error queue before the pacer drains it mid-train
/// (each takes well under 1 KiB of the 4 MiB receive buffer).
const TX_DRAIN_EVERY: u32 = 256;
/// How long to wait after a train for its last transmit stamps.
const TX_STAMP_WAIT: std::time::Duration = std::time::Duration::from_millis(20);

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
            tx: None,
            tx_next: 0,
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
        self.send_schedule(train, &ScheduleSpec::from_train(spec), payload_len)
    }

    /// Sends probe number `train` whose cars start at the schedule's offsets
    /// (a constant-rate train, a chirp, pairs, bursts).  Packets are numbered
    /// 0.. across the whole schedule, car by car.
    pub fn send_schedule(
        &mut self,
        train: u32,
        spec: &ScheduleSpec,
        payload_len: usize,
    ) -> io::Result<SentTrain> {
        if self.tx.is_none() {
            self.tx = Some(TxStamps::enable(&self.sock));
            self.tx_next = 0;
        }
        let first_id = self.tx_next;
        let mut undrained = 0u32;
        let most = spec
            .cars
            .iter()
            .map(|c| c.packets)
            .max()
            .unwrap_or(1)
            .max(1) as usize;
        if self.bufs.len() < most || self.bufs.first().map(Vec::len) != Some(payload_len) {
            self.bufs = vec![vec![0u8; payload_len]; most];
        }
        let cars = spec.cars.len();
        let mut car_sent = Vec::with_capacity(cars);
        let mut car_packets = Vec::with_capacity(cars);
        let mut lateness = Vec::with_capacity(cars);
        // An idle pause the plan asks for (so that the path's queue drains)
        // comes before the schedule; the stamps below stay achieved times.
        let idle = DurationNs::from_ns(spec.idle_before.ns().clamp(0, 1_000_000_000));
        let start = clock::monotonic() + idle + LEAD;
        let mut first_seq = 0u32;
        for (car, slot) in spec.cars.iter().enumerate() {
            let car = car as u32;
            let per_car = slot.packets.max(1) as usize;
            let target = start + slot.offset;
            for (i, buf) in self.bufs[..per_car].iter_mut().enumerate() {
                let header = ProbeHeader {
                    kind: ProbeKind::Probe,
                    session: self.session,
                    train,
                    car,
                    seq: first_seq + i as u32,
                    send_ns: target.ns(),
                };
                header.write_header(buf);
            }
            clock::wait_until(target);
            let now = clock::monotonic();
            let n = self.batch.send(&self.sock, &self.bufs[..per_car])?;
            first_seq += per_car as u32;
            car_sent.push(now);
            car_packets.push(n as u32);
            lateness.push(now.since(target).ns());
            self.tx_next = self.tx_next.wrapping_add(n as u32);
            undrained += n as u32;
            if undrained >= TX_DRAIN_EVERY {
                if let Some(Some(tx)) = self.tx.as_mut() {
                    tx.drain(&self.sock);
                }
                undrained = 0;
            }
        }
        let sent_total: u32 = car_packets.iter().sum();
        let kernel_sent = match self.tx.as_mut() {
            Some(Some(tx)) => {
                let deadline = std::time::Instant::now() + TX_STAMP_WAIT;
                loop {
                    tx.drain(&self.sock);
                    if tx.have(first_id, sent_total) >= sent_total
                        || std::time::Instant::now() >= deadline
                    {
                        break;
                    }
                    std::thread::sleep(std::time::Duration::from_micros(200));
                }
                // Kernel stamps are CLOCK_REALTIME; shift them onto the
                // pacer's CLOCK_MONOTONIC by one offset read per train, so a
                // train's stamps share one timeline with `car_sent` and with
                // anything else timed on CLOCK_MONOTONIC (NTP slews both
                // clocks alike; only a step of the wall clock during the
                // train would show).
                let offset = clock::realtime_minus_monotonic();
                let stamps = tx.take(first_id, sent_total);
                stamps
                    .into_iter()
                    .map(|t| t.map(|t| TimeNs::from_ns(t.ns() - offset)))
                    .collect::<Option<Vec<TimeNs>>>()
            }
            _ => None,
        }
        .filter(|v| !v.is_empty());
        lateness.sort_unstable();
        let max_lateness = DurationNs::from_ns(lateness.last().copied().unwrap_or(0));
        let median_lateness =
            DurationNs::from_ns(lateness.get(lateness.len() / 2).copied().unwrap_or(0));
        Ok(SentTrain {
            car_sent,
            car_packets,
            max_lateness,
            median_lateness,
            kernel_sent,
        })
    }
}
