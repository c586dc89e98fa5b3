//! What this host can pace: the highest packet and bit rate for 1500- and
//! 9000-byte IP packets sent back to back, and the gap error when pacing
//! at 120 µs, 12 µs and 1.2 µs with a busy-wait on CLOCK_MONOTONIC (as the
//! pacer does: [`crate::clock::wait_until`], then `send`).
//!
//! The sink is a UDP socket on loopback that is never read: the kernel
//! delivers (or, once its buffer is full, drops) each packet inside the
//! send call, so the rates are the sending host's, not a NIC's.
//!
//! Bursts overstate what a paced sender reaches, so the rate of paced
//! trains sent through the pacer itself, with GSO cars and with `sendmmsg`
//! batches, is measured too ([`trains`]); the verdict uses that.

pub mod trains;

use super::{percentile, Known};
use crate::clock;
use crate::pacer::PacerMode;
use pathsonde_core::{BitRate, DurationNs};
use serde::{Deserialize, Serialize};
use std::net::UdpSocket;

/// IP packet sizes measured (UDP payload = size − 28).
pub const SIZES: [u64; 2] = [1500, 9000];
/// Target gaps for the gap-error runs.
pub const GAPS_NS: [i64; 3] = [120_000, 12_000, 1_200];
/// How long the back-to-back rate run lasts per size.
const RATE_RUN: DurationNs = DurationNs::from_ms(150);
/// Packets per gap-error run.
const GAP_PACKETS: usize = 1000;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Pacing {
    /// Where the packets went.
    pub sink: String,
    /// How the paced-train rates were measured.
    #[serde(default = "no_trains")]
    pub paced_trains: String,
    pub sizes: Vec<PacingAtSize>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PacingAtSize {
    pub packet_bytes: u64,
    /// Back to back, as fast as `send` returns.
    pub max_rate_pps: Known<f64>,
    pub max_rate_bps: Known<BitRate>,
    /// Paced trains through the pacer with GSO cars ([`trains`]); unavailable
    /// where the kernel refuses UDP GSO.
    #[serde(default = "not_in_report")]
    pub paced_train_bps_gso: Known<BitRate>,
    /// The same with `sendmmsg` batches.
    #[serde(default = "not_in_report")]
    pub paced_train_bps_batch: Known<BitRate>,
    pub gaps: Vec<GapError>,
}

impl PacingAtSize {
    /// The paced-train rate of the car sender `mode` (`Gso` falls back to
    /// the batch figure where GSO was refused, as the pacer does).
    pub fn paced_train_bps(&self, mode: PacerMode) -> Option<BitRate> {
        let batch = self.paced_train_bps_batch.value().copied();
        match mode {
            PacerMode::Gso => self.paced_train_bps_gso.value().copied().or(batch),
            PacerMode::Batch => batch,
        }
    }
}

fn not_in_report<T>() -> Known<T> {
    Known::unavailable("not in this report (older pathsonde)")
}

fn no_trains() -> String {
    "not measured".into()
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GapError {
    pub target_gap_ns: i64,
    pub packets: u32,
    /// Median achieved gap between send stamps.
    pub achieved_median_ns: Known<f64>,
    /// |achieved − target|: median and 99th percentile.
    pub error_median_ns: Known<f64>,
    pub error_p99_ns: Known<f64>,
    /// Share of gaps within ±10 % of the target.
    pub within_10pct: Known<f64>,
}

/// Paced trains per size and car sender: the full report's, the quick one's.
const TRAINS_FULL: u32 = 5;
const TRAINS_QUICK: u32 = 3;

pub fn probe() -> Pacing {
    probe_with(RATE_RUN, true)
}

/// The quick variant: `run` per back-to-back rate, gap-error runs only if
/// `gaps` (and then 5 paced trains per size and sender, else 3).
pub fn probe_with(run: DurationNs, gaps: bool) -> Pacing {
    let trains = if gaps { TRAINS_FULL } else { TRAINS_QUICK };
    let sizes = SIZES
        .iter()
        .map(|&size| match sockets() {
            Ok((sock, _sink)) => at_size(&sock, size, run, gaps, trains),
            Err(e) => {
                let why = format!("loopback UDP socket: {e}");
                PacingAtSize {
                    packet_bytes: size,
                    max_rate_pps: Known::unavailable(why.clone()),
                    max_rate_bps: Known::unavailable(why.clone()),
                    paced_train_bps_gso: Known::unavailable(why.clone()),
                    paced_train_bps_batch: Known::unavailable(why.clone()),
                    gaps: GAPS_NS.iter().map(|&g| unavailable_gap(g, &why)).collect(),
                }
            }
        })
        .collect();
    Pacing {
        sink: "UDP to 127.0.0.1 (loopback), a socket never read: the kernel delivers or drops inside send(); no NIC involved".into(),
        paced_trains: format!(
            "median of {trains} train(s) per size and sender through the pacer: cars of {} packets planned at {} ({} cars, at most {} MB), to the same kind of sink; rate = bytes of all cars but the last / (last car's start - first car's start), from the kernel's transmit stamps",
            trains::PACKETS_PER_CAR,
            trains::TARGET,
            trains::train_spec(SIZES[0]).cars,
            1.5
        ),
        sizes,
    }
}

fn sockets() -> std::io::Result<(UdpSocket, UdpSocket)> {
    let sink = UdpSocket::bind("127.0.0.1:0")?;
    let sock = UdpSocket::bind("127.0.0.1:0")?;
    sock.connect(sink.local_addr()?)?;
    Ok((sock, sink))
}

fn unavailable_gap(target: i64, why: &str) -> GapError {
    GapError {
        target_gap_ns: target,
        packets: 0,
        achieved_median_ns: Known::unavailable(why),
        error_median_ns: Known::unavailable(why),
        error_p99_ns: Known::unavailable(why),
        within_10pct: Known::unavailable(why),
    }
}

/// Not measured at all (the server's start-up report): say why.
pub fn not_measured(why: &str) -> Pacing {
    Pacing {
        sink: format!("not measured: {why}"),
        paced_trains: format!("not measured: {why}"),
        sizes: Vec::new(),
    }
}

fn at_size(
    sock: &UdpSocket,
    size: u64,
    run: DurationNs,
    with_gaps: bool,
    paced_trains: u32,
) -> PacingAtSize {
    let buf = vec![0u8; (size - 28) as usize];
    let (pps, bps) = match max_rate(sock, &buf, run) {
        Ok(pps) => (
            Known::Value(pps),
            Known::Value(BitRate::from_bps(pps * size as f64 * 8.0)),
        ),
        Err(e) => (
            Known::unavailable(format!("send: {e}")),
            Known::unavailable(format!("send: {e}")),
        ),
    };
    PacingAtSize {
        packet_bytes: size,
        max_rate_pps: pps,
        max_rate_bps: bps,
        paced_train_bps_gso: trains::paced_train_rate(size, PacerMode::Gso, paced_trains),
        paced_train_bps_batch: trains::paced_train_rate(size, PacerMode::Batch, paced_trains),
        gaps: GAPS_NS
            .iter()
            .filter(|_| with_gaps)
            .map(|&g| {
                gap_error(sock, &buf, g)
                    .unwrap_or_else(|e| unavailable_gap(g, &format!("send: {e}")))
            })
            .collect(),
    }
}

fn max_rate(sock: &UdpSocket, buf: &[u8], run: DurationNs) -> std::io::Result<f64> {
    let start = clock::monotonic();
    let end = start + run;
    let mut n = 0u64;
    let mut now = start;
    while now < end {
        for _ in 0..32 {
            sock.send(buf)?;
        }
        n += 32;
        now = clock::monotonic();
    }
    Ok(n as f64 / now.since(start).secs_f64())
}

fn gap_error(sock: &UdpSocket, buf: &[u8], target: i64) -> std::io::Result<GapError> {
    let gap = DurationNs::from_ns(target);
    let mut stamps = Vec::with_capacity(GAP_PACKETS);
    let mut deadline = clock::monotonic() + DurationNs::from_us(50);
    for _ in 0..GAP_PACKETS {
        clock::wait_until(deadline);
        stamps.push(clock::monotonic());
        sock.send(buf)?;
        deadline = deadline + gap;
    }
    let mut gaps: Vec<f64> = stamps
        .windows(2)
        .map(|w| w[1].since(w[0]).ns() as f64)
        .collect();
    let mut errors: Vec<f64> = gaps.iter().map(|g| (g - target as f64).abs()).collect();
    let within = errors.iter().filter(|&&e| e <= 0.1 * target as f64).count() as f64
        / errors.len().max(1) as f64;
    gaps.sort_by(f64::total_cmp);
    errors.sort_by(f64::total_cmp);
    Ok(GapError {
        target_gap_ns: target,
        packets: GAP_PACKETS as u32,
        achieved_median_ns: Known::Value(percentile(&gaps, 50.0)),
        error_median_ns: Known::Value(percentile(&errors, 50.0)),
        error_p99_ns: Known::Value(percentile(&errors, 99.0)),
        within_10pct: Known::Value(within),
    })
}
