//! The paced-train rate this host reaches: trains sent through the real
//! [`Pacer`] (cars of [`PACKETS_PER_CAR`] packets, planned at [`TARGET`],
//! far above what a host reaches, so every car is late and leaves as soon
//! as the previous one is out) to a loopback UDP socket that is never read,
//! once with GSO cars and once with `sendmmsg` batches.  The rate is read
//! from the send stamps — the kernel's where it gives them, else the
//! pacer's — as the bytes of all cars but the last over the time from the
//! first car's start to the last car's start: what a paced measurement can
//! put on the wire, which back-to-back bursts overstate (docs/host.md).

use super::super::{percentile, Known};
use crate::pacer::{Pacer, PacerMode, SentTrain};
use pathsonde_core::{BitRate, Bytes, DurationNs, TrainSpec};
use std::net::{SocketAddr, UdpSocket};

/// Packets per car of the measuring trains.
pub const PACKETS_PER_CAR: u32 = 8;
/// The rate the trains are planned at.
pub const TARGET: BitRate = BitRate::from_bps(100e9);
/// How long a train is planned to last at [`TARGET`].
const PLANNED: DurationNs = DurationNs::from_ms(2);
/// Most IP bytes in one train (so that a slow host still finishes a train
/// in a few milliseconds).
const MAX_TRAIN_BYTES: u64 = 1_500_000;
/// Fewest cars in a train.
const MIN_CARS: u32 = 16;

/// The train measured with `size`-byte IP packets.
pub fn train_spec(size: u64) -> TrainSpec {
    let car_bits = size as f64 * 8.0 * f64::from(PACKETS_PER_CAR);
    let planned = (TARGET.bps() * PLANNED.secs_f64() / car_bits) as u32;
    let most = (MAX_TRAIN_BYTES / (size * u64::from(PACKETS_PER_CAR))) as u32;
    TrainSpec {
        packet_size: Bytes(size),
        packets_per_car: PACKETS_PER_CAR,
        cars: planned.min(most).max(MIN_CARS),
        rate: TARGET,
        idle_before: DurationNs::ZERO,
    }
}

/// The median paced-train rate over `trains` trains of `size`-byte IP
/// packets sent with `mode`; unavailable when the kernel refuses GSO (for
/// `Gso`) or sending fails.
pub fn paced_train_rate(size: u64, mode: PacerMode, trains: u32) -> Known<BitRate> {
    let (pacer, _sink) = match pacer(mode) {
        Ok(p) => p,
        Err(e) => return Known::unavailable(format!("loopback UDP socket: {e}")),
    };
    let mut pacer = pacer;
    if pacer.mode() != mode {
        return Known::unavailable(format!("GSO refused: {}", pacer.gso_off().unwrap_or("?")));
    }
    let spec = train_spec(size);
    let payload =
        (size - crate::udp::ip_udp_overhead(&SocketAddr::from(([127, 0, 0, 1], 0)))) as usize;
    let mut rates = Vec::new();
    for train in 0..trains.max(1) {
        let sent = match pacer.send_train(train, &spec, payload) {
            Ok(s) => s,
            Err(e) => return Known::unavailable(format!("send: {e}")),
        };
        if sent.mode != mode {
            return Known::unavailable(format!(
                "GSO send refused: {}",
                pacer.gso_off().unwrap_or("?")
            ));
        }
        if let Some(r) = car_start_rate(&sent, size) {
            rates.push(r);
        }
    }
    rates.sort_by(f64::total_cmp);
    if rates.is_empty() {
        return Known::unavailable("no train spanned a measurable time");
    }
    Known::Value(BitRate::from_bps(percentile(&rates, 50.0)))
}

/// A sending socket (4 MiB buffers, as the client's) connected to a sink
/// that is never read, and the pacer on it.
fn pacer(mode: PacerMode) -> std::io::Result<(Pacer, UdpSocket)> {
    let sink = UdpSocket::bind("127.0.0.1:0")?;
    let sock = crate::udp::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    sock.connect(sink.local_addr()?)?;
    Ok((Pacer::with_mode(sock, 0, mode), sink))
}

/// Bits of every car but the last over first-to-last car start, each car's
/// start being its first packet's kernel stamp, else the pacer's stamp.
pub fn car_start_rate(sent: &SentTrain, size: u64) -> Option<f64> {
    let starts: Vec<i64> = match &sent.kernel_sent {
        Some(k) => {
            let mut at = 0usize;
            let mut out = Vec::with_capacity(sent.car_packets.len());
            for &n in &sent.car_packets {
                out.push(k.get(at)?.ns());
                at += n as usize;
            }
            out
        }
        None => sent.car_sent.iter().map(|t| t.ns()).collect(),
    };
    let last = starts.len().checked_sub(1).filter(|&l| l > 0)?;
    let span = starts[last] - starts[0];
    let packets: u64 = sent.car_packets[..last].iter().map(|&n| u64::from(n)).sum();
    (span > 0).then(|| packets as f64 * size as f64 * 8.0 / (span as f64 / 1e9))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pathsonde_core::TimeNs;

    #[test]
    fn trains_are_short_and_planned_far_above_the_host() {
        let s = train_spec(1500);
        assert_eq!(s.cars, 125); // capped at 1.5 MB
        let s = train_spec(9000);
        assert_eq!((s.cars, s.packets_per_car), (20, 8));
        assert!(s.rate.bps() >= 10e9);
    }

    #[test]
    fn the_rate_is_every_car_but_the_last_over_the_car_starts() {
        let sent = SentTrain {
            car_sent: vec![TimeNs::from_ns(0), TimeNs::from_ns(10), TimeNs::from_ns(20)],
            car_packets: vec![2, 2, 2],
            max_lateness: DurationNs::ZERO,
            median_lateness: DurationNs::ZERO,
            // Kernel stamps: cars start at 1000, 2000, 3000 ns.
            kernel_sent: Some(
                [1000, 1000, 2000, 2000, 3000, 3000]
                    .into_iter()
                    .map(TimeNs::from_ns)
                    .collect(),
            ),
            egress_hold: None,
            mode: PacerMode::Gso,
        };
        // 4 packets of 1000 B in 2 µs = 16 Gb/s.
        assert_eq!(car_start_rate(&sent, 1000), Some(16e9));
        let user = SentTrain {
            kernel_sent: None,
            egress_hold: None,
            ..sent
        };
        // 32 kbit in 20 ns.
        assert_eq!(car_start_rate(&user, 1000), Some(1.6e12));
    }
}
