//! The paced sender: puts a train of cars on the wire at the planned times
//! and records when each car actually left.
//!
//! Each car goes out back to back, as fast as the host can: by default as
//! UDP GSO sends ([`PacerMode::Gso`], [`gso`]: one `sendmsg` whose buffer
//! the kernel cuts into the car's datagrams), else — when the kernel refuses
//! `UDP_SEGMENT`, or asked for — as one `sendmmsg` batch of single datagrams
//! ([`PacerMode::Batch`]).  A car of one packet is a plain send either way.
//! Between cars the sender waits on CLOCK_MONOTONIC (sleep, then a
//! busy-wait for the last few hundred microseconds).  A car that cannot leave
//! on time leaves as soon as it can, and the lateness is recorded — the
//! method sees achieved times, never the plan.
//!
//! Where the kernel gives software transmit stamps ([`TxStamps`]), they are
//! read back from the socket's error queue after each train (and during a
//! long one) and become the packets' send times: the kernel's, not the
//! program's guesses.  The kernel stamps once per send call, so a batch
//! gives every packet its own stamp while a GSO send's one stamp (of its
//! first segment) is given to all the packets it carried.  A train is
//! stamped wholly by one clock — the kernel's CLOCK_REALTIME stamps when
//! every send has one, else the user-space CLOCK_MONOTONIC reads — never a
//! mix.  Where this host's own egress queue (a shaper on its interface, a
//! link slower than the train) held the packets, their stamps are those of
//! their entry to that queue: it is the path's first queue ([`egress`]).

pub mod egress;
pub mod gso;
#[cfg(test)]
mod tests;

use crate::clock;
use crate::udp::{BatchSender, TxStamps};
use pathsonde_core::{DurationNs, ScheduleSpec, TimeNs, TrainSpec};
use pathsonde_wire::probe::{ProbeHeader, ProbeKind};
use serde::{Deserialize, Serialize};
use std::io;
use std::net::UdpSocket;

/// How the pacer hands a car of several packets to the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PacerMode {
    /// One UDP GSO send per car (several when the car exceeds 64 segments
    /// or 64 KiB) where the kernel accepts `UDP_SEGMENT`, else `Batch`.
    #[default]
    Gso,
    /// One `sendmmsg` batch of single datagrams per car.
    Batch,
}

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
    /// missed any send of the train (then `car_sent` is the send time).
    /// Packets that left in one GSO send share that send's stamp.
    pub kernel_sent: Option<Vec<TimeNs>>,
    /// When this host's own egress queue held the train (its interface is
    /// shaped or slower than the train: [`egress`]), the longest it held a
    /// packet; `kernel_sent` is then each packet's entry to that queue.
    pub egress_hold: Option<DurationNs>,
    /// How the cars went out: `Gso` when any car of several packets left
    /// as GSO sends.
    pub mode: PacerMode,
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
    /// The car sender asked for.
    asked: PacerMode,
    /// Whether this socket can send GSO cars: `None` until probed, then
    /// `Ok`, or why not (the kernel refused `UDP_SEGMENT`, or a GSO send;
    /// sticky).
    gso: Option<Result<(), String>>,
    bufs: Vec<Vec<u8>>,
    /// Transmit stamps: `None` until the first train turns them on (so that
    /// echo requests sent earlier do not count), `Some(None)` if refused.
    tx: Option<Option<TxStamps>>,
    /// OPT_ID counter of the next datagram this socket sends.
    tx_next: u32,
}

/// Whether a schedule's cars may go out as GSO sends: a fast train — at
/// least two cars, all of the same number n ≥ [`GSO_MIN_CAR`] of packets, no car start
/// more than n × [`GSO_SPACING_PER_PACKET`] after the one before, so that
/// per-datagram send cost is what limits the sender.  Anything else keeps a
/// datagram per send: a one-car burst, idle-separated capacity trains and
/// pairs behind lead packets are read packet by packet within the car, and
/// a GSO send gives its packets one transmit stamp (and, when it reaches a
/// socket without being cut up on the way — loopback, or a path with UDP
/// segmentation offload on every hop — one arrival stamp).
pub fn gso_suits(spec: &ScheduleSpec) -> bool {
    let Some(first) = spec.cars.first() else {
        return false;
    };
    let n = first.packets;
    let most = GSO_SPACING_PER_PACKET.ns() * i64::from(n);
    spec.cars.len() >= 2
        && n >= GSO_MIN_CAR
        && spec.cars.iter().all(|c| c.packets == n)
        && spec
            .cars
            .windows(2)
            .all(|w| w[1].offset.ns() - w[0].offset.ns() <= most)
}

/// The smallest car sent as one GSO send.  A GSO car leaves truly back to
/// back, and a tight link with a two-frame token bucket (the lab's tbf)
/// passes its first two packets at once: in cars of two or three that is
/// most of a train's gaps near zero, which reads as a receiver that
/// coalesces (found by the lab's coalescing test: a per-packet receiver
/// flagged on FAC²'s opening train of two-packet cars).  Two sendmmsg
/// datagrams cost about as much as one GSO send there anyway.
pub const GSO_MIN_CAR: u32 = 4;

/// Car spacing per packet below which a train counts as fast for GSO: 20 µs
/// is four times the cost of one `sendto` on the lab's 2-core VMs
/// (4.3–5.3 µs), 600 Mb/s of 1500-byte packets.
pub const GSO_SPACING_PER_PACKET: DurationNs = DurationNs::from_us(20);

/// Stamps pending on the error queue before the pacer drains it mid-train
/// (each takes well under 1 KiB of the 4 MiB receive buffer).
const TX_DRAIN_EVERY: u32 = 256;
/// How long to wait after a train for its last transmit stamps.
const TX_STAMP_WAIT: std::time::Duration = std::time::Duration::from_millis(20);

/// How long before the first car the schedule starts, so that the first car
/// is not already late when the loop begins.
const LEAD: DurationNs = DurationNs::from_us(50);

impl Pacer {
    /// `sock` must be connected to the server's probe port.  Cars go out as
    /// GSO sends where the kernel accepts them ([`PacerMode::Gso`]).
    pub fn new(sock: UdpSocket, session: u64) -> Self {
        Self::with_mode(sock, session, PacerMode::default())
    }

    /// As [`Pacer::new`], with the car sender chosen; `Gso` falls back to
    /// `Batch` when the kernel refuses `UDP_SEGMENT` on `sock` (probed
    /// here, once) or, later, a GSO send ([`Pacer::gso_off`] says why).
    pub fn with_mode(sock: UdpSocket, session: u64, mode: PacerMode) -> Self {
        let mut p = Pacer {
            sock,
            session,
            batch: BatchSender::new(64),
            asked: PacerMode::Batch,
            gso: None,
            bufs: Vec::new(),
            tx: None,
            tx_next: 0,
        };
        p.set_mode(mode);
        p
    }

    /// Asks for a car sender from the next train on (GSO is probed on
    /// first ask); returns the mode asked for before.
    pub fn set_mode(&mut self, mode: PacerMode) -> PacerMode {
        if mode == PacerMode::Gso && self.gso.is_none() {
            self.gso = Some(gso::probe(&self.sock));
        }
        std::mem::replace(&mut self.asked, mode)
    }

    /// The car sender in use now.
    pub fn mode(&self) -> PacerMode {
        if self.gso_on() {
            PacerMode::Gso
        } else {
            PacerMode::Batch
        }
    }

    fn gso_on(&self) -> bool {
        self.asked == PacerMode::Gso && matches!(self.gso, Some(Ok(())))
    }

    /// Why cars do not go out as GSO sends; `None` while they do.
    pub fn gso_off(&self) -> Option<&str> {
        match (&self.gso, self.asked) {
            (Some(Err(why)), _) => Some(why),
            (_, PacerMode::Batch) => Some("batches asked for"),
            _ => None,
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
        // Packets carried by each send (each transmit-stamp counter) of
        // this train, in order.
        let mut sends: Vec<u32> = Vec::new();
        // A refused GSO send may have used up a counter: then this train's
        // kernel stamps cannot be matched to packets and are not used.
        let mut counters_lost = false;
        let mut used_gso = false;
        let gso_train = gso_suits(spec);
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
            let (n, gso_car) = self.send_car(per_car, gso_train, &mut sends, &mut counters_lost)?;
            used_gso |= gso_car;
            first_seq += per_car as u32;
            car_sent.push(now);
            car_packets.push(n as u32);
            lateness.push(now.since(target).ns());
            undrained += n as u32;
            if undrained >= TX_DRAIN_EVERY {
                if let Some(Some(tx)) = self.tx.as_mut() {
                    tx.drain(&self.sock);
                }
                undrained = 0;
            }
        }
        let n_sends = sends.len() as u32;
        self.tx_next = self.tx_next.wrapping_add(n_sends);
        let kernel_sent = match self.tx.as_mut() {
            Some(Some(tx)) => {
                let deadline = std::time::Instant::now() + TX_STAMP_WAIT;
                loop {
                    tx.drain(&self.sock);
                    if counters_lost
                        || tx.have(first_id, n_sends) >= n_sends
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
                let per_packet = |stamps: Vec<Option<TimeNs>>| {
                    stamps
                        .into_iter()
                        .zip(&sends)
                        .try_fold(Vec::new(), |mut out, (t, &n)| {
                            let t = TimeNs::from_ns(t?.ns() - offset);
                            out.extend(std::iter::repeat(t).take(n as usize));
                            Some(out)
                        })
                        .filter(|v| !counters_lost && !v.is_empty())
                };
                let left = per_packet(tx.take(first_id, n_sends));
                let queued = per_packet(tx.take_queued(first_id, n_sends));
                egress::choose(left, queued)
            }
            _ => egress::Chosen::default(),
        };
        let (kernel_sent, egress_hold) = (kernel_sent.stamps, kernel_sent.hold);
        if counters_lost {
            // Restart the counter at 0 on the next train (see
            // `TxStamps::disable`) rather than guess how many were used.
            if let Some(Some(tx)) = self.tx.take() {
                tx.disable(&self.sock);
            }
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
            kernel_sent,
            egress_hold,
            mode: if used_gso {
                PacerMode::Gso
            } else {
                PacerMode::Batch
            },
        })
    }

    /// Sends `self.bufs[..per_car]` as one car; pushes the packets of each
    /// send onto `sends`.  Returns the packets sent and whether the car went
    /// out as GSO sends.  A refused GSO send turns GSO off for good, sets
    /// `counters_lost`, and the rest of the car goes out as a batch.
    fn send_car(
        &mut self,
        per_car: usize,
        gso_train: bool,
        sends: &mut Vec<u32>,
        counters_lost: &mut bool,
    ) -> io::Result<(usize, bool)> {
        let bufs = &self.bufs[..per_car];
        let mut done = 0;
        if per_car > 1 && gso_train && self.gso_on() {
            let car = gso::send_car(&self.sock, bufs, sends)?;
            done = car.packets;
            match car.refused {
                None => return Ok((done, true)),
                Some(why) => {
                    self.gso = Some(Err(why));
                    *counters_lost = true;
                }
            }
        }
        let n = self.batch.send(&self.sock, &bufs[done..])?;
        // A batch's datagrams count one stamp counter each.
        sends.extend(std::iter::repeat(1).take(n));
        // A car whose GSO send was refused finished as a batch.
        Ok((done + n, false))
    }
}
