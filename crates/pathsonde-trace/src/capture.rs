//! A captured train turned into a trace: the one-way latency of each packet
//! from an [`Observation`], the rates the sender and the receiver achieved,
//! and whether the host drove the asked load.
//!
//! Sans-IO on purpose: the socket side (sending the train, reading the two
//! clocks' offset) is `pathsonde-net`'s, and this crate only needs the
//! observation and that offset, so a capture can be judged — and tested —
//! without a network.

use crate::trace::{Trace, TraceMeta, LOST};
use crate::TraceError;
use pathsonde_core::{BitRate, ClockSource, DurationNs, Observation, TrainSpec};
use serde::Serialize;
use std::path::{Path, PathBuf};

/// Below this share of the asked rate the host is said not to drive the load.
pub const DRIVEN: f64 = 0.95;

/// What a capture achieved, beside the trace it produced.
#[derive(Debug, Clone, PartialEq)]
pub struct CaptureSummary {
    /// Packets sent (the trace's length) and those that never arrived.
    pub packets: usize,
    pub lost: usize,
    pub asked_rate: BitRate,
    /// From the send stamps: (packets − 1) × size / (last send − first send);
    /// zero when fewer than two packets or no span.
    pub achieved_rate: BitRate,
    /// From the receive stamps, the same way; `None` when it cannot be read.
    pub received_rate: Option<BitRate>,
    /// Achieved / asked.
    pub drive: f64,
    /// False when the host sent below [`DRIVEN`] of the asked load: then the
    /// trace shows the host, not the path.
    pub host_drove_load: bool,
    pub send_clock: ClockSource,
    pub recv_clock: ClockSource,
    /// Latencies are true one-way delays (one clock at both ends).
    pub absolute: bool,
    /// What a reader of the trace must know (clocks, host limits).
    pub notes: Vec<String>,
}

/// A trace and how it was captured.
#[derive(Debug, Clone)]
pub struct Capture {
    pub trace: Trace,
    pub summary: CaptureSummary,
}

/// Turns the observation of one train sent as `spec` into a trace.
///
/// `realtime_minus_monotonic_ns` is the sender's CLOCK_REALTIME −
/// CLOCK_MONOTONIC, read right after the train: with `same_clock` the
/// receiver's CLOCK_REALTIME stamps are put on the sender's CLOCK_MONOTONIC
/// timeline (where the send stamps are), so latencies are one-way delays;
/// otherwise they are shifted so the fastest packet is at 0, because two
/// hosts' clocks differ by an unknown offset.
pub fn from_observation(
    obs: &Observation,
    spec: &TrainSpec,
    realtime_minus_monotonic_ns: i64,
    same_clock: bool,
) -> Capture {
    let offset = realtime_minus_monotonic_ns;
    let first = obs.packets.iter().map(|p| p.sent.ns()).min().unwrap_or(0);
    let mut sent_ns = Vec::with_capacity(obs.packets.len());
    let mut latency_ns = Vec::with_capacity(obs.packets.len());
    for p in &obs.packets {
        sent_ns.push(p.sent.ns() - first);
        latency_ns.push(match p.received {
            Some(r) => r.ns() - (p.sent.ns() + offset),
            None => LOST,
        });
    }
    let mut notes = Vec::new();
    if !same_clock {
        if let Some(min) = latency_ns.iter().filter(|&&l| l != LOST).min().copied() {
            for l in latency_ns.iter_mut().filter(|l| **l != LOST) {
                *l -= min;
            }
        }
        notes.push(
            "sender and receiver read different clocks: latencies are relative to the fastest packet"
                .into(),
        );
    } else if latency_ns.iter().any(|&l| l != LOST && l < 0) {
        notes.push("some latencies are negative: the two ends' stamps are not on one clock".into());
    }
    let size = spec.packet_size;
    let rate_of = |span_ns: i64, n: usize| {
        (span_ns > 0 && n >= 2)
            .then(|| (n as f64 - 1.0) * size.bits() as f64 * 1e9 / span_ns as f64)
    };
    let span = sent_ns.iter().max().copied().unwrap_or(0);
    let achieved = rate_of(span, sent_ns.len()).unwrap_or(0.0);
    let recv: Vec<i64> = obs
        .packets
        .iter()
        .filter_map(|p| p.received.map(|r| r.ns()))
        .collect();
    let received_rate = match (recv.iter().min(), recv.iter().max()) {
        (Some(a), Some(b)) => rate_of(b - a, recv.len()),
        _ => None,
    };
    let drive = achieved / spec.rate.bps();
    if drive < DRIVEN {
        notes.push(format!(
            "the sender reached {:.1} % of the asked load: sendto and pacing cost more than the {:.2} µs spacing (docs/trace.md, host limits)",
            drive * 100.0,
            spec.car_interval().map_or(0.0, |d| d.us_f64())
        ));
    }
    let lost = latency_ns.iter().filter(|&&l| l == LOST).count();
    let meta = TraceMeta {
        rate: Some(spec.rate),
        packet_size: Some(size),
        interval: spec
            .car_interval()
            .map(|d| DurationNs::from_ns(d.ns() / i64::from(spec.packets_per_car.max(1)))),
        clock: Some(obs.recv_clock.source),
        resolution: Some(obs.recv_clock.resolution.max(obs.send_clock.resolution)),
        absolute: same_clock,
        measured_send_times: true,
    };
    let summary = CaptureSummary {
        packets: latency_ns.len(),
        lost,
        asked_rate: spec.rate,
        achieved_rate: BitRate::from_bps(achieved),
        received_rate: received_rate.map(BitRate::from_bps),
        drive,
        host_drove_load: drive >= DRIVEN,
        send_clock: obs.send_clock.source,
        recv_clock: obs.recv_clock.source,
        absolute: same_clock,
        notes,
    };
    Capture {
        trace: Trace {
            meta,
            sent_ns,
            latency_ns,
        },
        summary,
    }
}

/// What `trace capture` reports (and prints as `--json`): the summary in
/// plain units, with the files written and the path measured across.
#[derive(Debug, Serialize)]
pub struct CaptureReport {
    pub file: PathBuf,
    pub csv: Option<PathBuf>,
    pub path: String,
    pub packets: usize,
    pub lost: usize,
    pub asked_rate_bps: f64,
    /// From the send stamps: (packets − 1) × size / (last send − first send).
    pub achieved_rate_bps: f64,
    /// From the receive stamps, the same way.
    pub received_rate_bps: Option<f64>,
    /// Achieved / asked.
    pub drive: f64,
    /// False when the host sent below 95 % of the asked load.
    pub host_drove_load: bool,
    pub send_clock: String,
    pub recv_clock: String,
    /// Latencies are true one-way delays (lab: one clock at both ends).
    pub absolute: bool,
    pub notes: Vec<String>,
}

impl CaptureReport {
    /// The report of a capture, before the files and the path are known.
    pub fn of(c: CaptureSummary) -> Self {
        CaptureReport {
            file: PathBuf::new(),
            csv: None,
            path: String::new(),
            packets: c.packets,
            lost: c.lost,
            asked_rate_bps: c.asked_rate.bps(),
            achieved_rate_bps: c.achieved_rate.bps(),
            received_rate_bps: c.received_rate.map(|r| r.bps()),
            drive: c.drive,
            host_drove_load: c.host_drove_load,
            send_clock: c.send_clock.describe().into(),
            recv_clock: c.recv_clock.describe().into(),
            absolute: c.absolute,
            notes: c.notes,
        }
    }

    /// The same report, naming the path it was captured across.
    pub fn with_path(mut self, p: String) -> Self {
        self.path = p;
        self
    }
}

/// Writes a captured trace to `out` (binary) and, when asked, to `csv`.
pub fn write_files(trace: &Trace, out: &Path, csv: Option<&Path>) -> crate::error::Result<()> {
    trace.write_path(out)?;
    if let Some(c) = csv {
        let f = std::fs::File::create(c)
            .map_err(|e| TraceError::io(format!("creating {}", c.display()), e))?;
        trace.write_csv(&mut std::io::BufWriter::new(f))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use pathsonde_core::{Bytes, ClockInfo, PacketRecord, TimeNs};

    fn obs(spec: &TrainSpec, gap_ns: i64, lat_ns: i64, lose: u32) -> Observation {
        let clock = ClockInfo {
            source: ClockSource::UserSpace,
            resolution: DurationNs::from_ns(1),
        };
        Observation {
            train: 0,
            spec: *spec,
            schedule: None,
            packets: (0..spec.cars)
                .map(|i| PacketRecord {
                    seq: i,
                    car: i,
                    size: spec.packet_size,
                    sent: TimeNs::from_ns(1_000 + i64::from(i) * gap_ns),
                    received: (i != lose)
                        .then(|| TimeNs::from_ns(1_000 + i64::from(i) * gap_ns + lat_ns)),
                })
                .collect(),
            send_clock: clock,
            recv_clock: clock,
            receiver_drops: None,
        }
    }

    fn spec(rate: BitRate) -> TrainSpec {
        TrainSpec {
            packet_size: Bytes::new(1000),
            packets_per_car: 1,
            cars: 101,
            rate,
            idle_before: DurationNs::ZERO,
        }
    }

    #[test]
    fn one_clock_gives_one_way_delays_and_the_achieved_rate() {
        // 8000 bits every 10 µs: 800 Mb/s asked and sent.
        let s = spec(BitRate::from_mbps(800.0));
        let c = from_observation(&obs(&s, 10_000, 50_000, 7), &s, 0, true);
        assert_eq!(c.trace.latency_ns[0], 50_000);
        assert_eq!(c.trace.latency_ns[7], LOST);
        assert_eq!(c.summary.lost, 1);
        assert!((c.summary.achieved_rate.mbps() - 800.0).abs() < 1e-6);
        assert!(c.summary.host_drove_load);
        assert!(c.summary.notes.is_empty(), "{:?}", c.summary.notes);
    }

    #[test]
    fn two_clocks_are_shifted_and_a_slow_host_is_named() {
        // Asked 1.6 Gb/s, sent at 800 Mb/s: the host did not drive the load.
        let s = spec(BitRate::from_mbps(1600.0));
        let c = from_observation(&obs(&s, 10_000, 50_000, 999), &s, 1_000_000, false);
        assert_eq!(c.trace.latency_ns.iter().min(), Some(&0));
        assert!(!c.summary.host_drove_load);
        assert!((c.summary.drive - 0.5).abs() < 1e-9);
        assert_eq!(c.summary.notes.len(), 2);
    }
}
