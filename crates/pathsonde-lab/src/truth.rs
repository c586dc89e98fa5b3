//! Ground truth: what crossed the bottleneck, and when.
//!
//! Two independent records, both on CLOCK_MONOTONIC (one clock for every
//! namespace on the box, the same clock the pathsonde client stamps sends with):
//! - the **generators' logs**: cumulative bytes each cross-traffic source
//!   handed to the kernel, per send batch (every ~100 µs while sending);
//! - the **bottleneck qdisc's counters** (`tc -s -j qdisc show`): bytes,
//!   packets, drops and backlog, sampled every 100 ms.
//!
//! The truth for an estimate is C minus the cross traffic offered over that
//! estimate's own window, from the generators' logs (fine-grained and
//! free of probe bytes); the qdisc series is kept beside it as a check (over
//! a quiet stretch without probes the two must agree).

use crate::error::{LabError, Result};
use crate::netns;
use crate::topology::{QdiscPlace, L2_HEADER};
use pathsonde_core::{BitRate, Bytes, DurationNs, TimeNs};
use pathsonde_net::clock;
use serde::Serialize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// One reading of the bottleneck qdisc's counters.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct QdiscSample {
    /// CLOCK_MONOTONIC, ns.
    pub at_ns: i64,
    /// Bytes dequeued and sent (L2: IP + 14).
    pub bytes: u64,
    pub packets: u64,
    pub drops: u64,
    pub backlog_bytes: u64,
}

/// Reads the root qdisc of `place` once.
pub fn read_qdisc(place: &QdiscPlace) -> Result<QdiscSample> {
    // The counters are read somewhere inside the `tc` run (a few ms, more on
    // a busy machine): stamp the reading with the run's midpoint.
    let before = clock::monotonic();
    let out = netns::tc(&[
        "-n", &place.ns, "-s", "-j", "qdisc", "show", "dev", &place.dev,
    ])?;
    let after = clock::monotonic();
    let at = before + DurationNs::from_ns(after.since(before).ns() / 2);
    parse_qdisc_json(&out, at).ok_or_else(|| LabError::Command {
        command: format!("tc -n {} -s -j qdisc show dev {}", place.ns, place.dev),
        stderr: format!("no root qdisc counters in: {}", out.trim()),
    })
}

fn parse_qdisc_json(text: &str, at: TimeNs) -> Option<QdiscSample> {
    let v: serde_json::Value = serde_json::from_str(text).ok()?;
    let q = v
        .as_array()?
        .iter()
        .find(|q| q.get("root").and_then(|r| r.as_bool()).unwrap_or(false))?;
    let num = |k: &str| q.get(k).and_then(|x| x.as_u64());
    Some(QdiscSample {
        at_ns: at.ns(),
        bytes: num("bytes")?,
        packets: num("packets")?,
        drops: num("drops").unwrap_or(0),
        backlog_bytes: num("backlog").unwrap_or(0),
    })
}

/// Samples a qdisc every `interval` on its own thread.
pub struct QdiscSampler {
    stop: Arc<AtomicBool>,
    samples: Arc<Mutex<Vec<QdiscSample>>>,
    thread: Option<JoinHandle<()>>,
}

impl QdiscSampler {
    pub fn start(place: QdiscPlace, interval: Duration) -> Result<QdiscSampler> {
        // Fail early and clearly if the qdisc cannot be read at all.
        let first = read_qdisc(&place)?;
        let samples = Arc::new(Mutex::new(vec![first]));
        let stop = Arc::new(AtomicBool::new(false));
        let (s2, st2) = (samples.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name("pathsonde-truth".into())
            .spawn(move || {
                let mut next = clock::monotonic();
                let step = DurationNs::from_std(interval);
                while !st2.load(Ordering::SeqCst) {
                    next = next + step;
                    clock::wait_until(next);
                    if let Ok(s) = read_qdisc(&place) {
                        s2.lock().unwrap_or_else(|p| p.into_inner()).push(s);
                    }
                }
            })
            .map_err(|e| LabError::io("starting the truth sampler", e))?;
        Ok(QdiscSampler {
            stop,
            samples,
            thread: Some(thread),
        })
    }

    pub fn samples(&self) -> Vec<QdiscSample> {
        self.samples
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    pub fn stop(&mut self) -> Vec<QdiscSample> {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.samples()
    }
}

impl Drop for QdiscSampler {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Cumulative bytes a generator handed to the kernel, per send batch.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LogPoint {
    pub at_ns: i64,
    /// IP bytes so far.
    pub ip_bytes: u64,
    /// L2 bytes so far (IP + 14 per packet), as the bottleneck counts them.
    pub l2_bytes: u64,
    /// Packets so far that left more than [`LATE`] after the schedule said:
    /// a generator the host starved of CPU (issue 26).
    pub late_packets: u64,
    /// The latest any packet of this batch left after its due time (0 when
    /// none was late; a TCP flow has no schedule and is never late).
    pub max_late_ns: i64,
}

/// A cross-traffic packet sent this much after its due time counts as late:
/// well above the generator's own wake-up jitter (tens of µs), and as long
/// as a 300 Mb/s link takes to drain a dozen full-size packets.
pub const LATE: DurationNs = DurationNs::from_ms(1);

/// How far the generators fell behind their schedules over a window.  Late
/// packets leave in a clump, so the cross traffic was burstier than its
/// model then; the truth itself (what the generators sent) still stands.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct GeneratorLag {
    /// Packets sent more than [`LATE`] behind the schedule.
    pub late_packets: u64,
    /// The latest any packet was sent.
    #[serde(with = "pathsonde_core::units::serde_secs")]
    pub max_late_s: DurationNs,
}

impl GeneratorLag {
    /// One line for a report when any packet was late, else `None`.
    pub fn note(&self) -> Option<String> {
        (self.late_packets > 0).then(|| {
            format!(
                "the lab's cross-traffic generators sent {} packet(s) more than {LATE} behind their schedule (the latest {} behind): the host starved them, so the cross traffic was burstier than its model (the truth, from what they sent, stands)",
                self.late_packets, self.max_late_s
            )
        })
    }
}

/// The generators' lag over `(from, to]`: the late packets their logs
/// counted in it and the latest of them.
pub fn generator_lag(logs: &[Vec<LogPoint>], from: TimeNs, to: TimeNs) -> GeneratorLag {
    let mut lag = GeneratorLag {
        late_packets: 0,
        max_late_s: DurationNs::ZERO,
    };
    for points in logs {
        let count_at = |t: i64| {
            let i = points.partition_point(|p| p.at_ns <= t);
            i.checked_sub(1).map_or(0, |i| points[i].late_packets)
        };
        lag.late_packets += count_at(to.ns()).saturating_sub(count_at(from.ns()));
        let worst = points
            .iter()
            .filter(|p| p.at_ns > from.ns() && p.at_ns <= to.ns())
            .map(|p| p.max_late_ns)
            .max()
            .unwrap_or(0);
        lag.max_late_s = lag.max_late_s.max(DurationNs::from_ns(worst));
    }
    lag
}

/// A generator's send log, shared between its thread and the truth reader.
#[derive(Debug, Clone, Default)]
pub struct SendLog(Arc<Mutex<Vec<LogPoint>>>);

impl SendLog {
    pub fn push(&self, p: LogPoint) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).push(p);
    }
    pub fn points(&self) -> Vec<LogPoint> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
    /// Drops the points sent before `t` but the last of them, which the
    /// cumulative counts of a window starting at or after `t` still need:
    /// a generator that runs for hours (a standing chain) keeps its log short.
    pub fn forget_before(&self, t: TimeNs) {
        let mut points = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let before = points.partition_point(|p| p.at_ns < t.ns());
        points.drain(..before.saturating_sub(1));
    }
}

/// Cumulative L2 bytes of a log at time `t`, interpolating linearly between
/// send batches (a batch spans ~100 µs, so the error is at most one batch).
fn l2_at(points: &[LogPoint], t: i64) -> f64 {
    if points.is_empty() || t <= points[0].at_ns {
        return 0.0;
    }
    let i = points.partition_point(|p| p.at_ns <= t);
    if i >= points.len() {
        return points[points.len() - 1].l2_bytes as f64;
    }
    let (a, b) = (points[i - 1], points[i]);
    let frac = (t - a.at_ns) as f64 / (b.at_ns - a.at_ns).max(1) as f64;
    a.l2_bytes as f64 + frac * (b.l2_bytes - a.l2_bytes) as f64
}

/// Cross traffic offered to the bottleneck over `[from, to]`, at L2 (as tbf counts).
pub fn cross_l2_rate(logs: &[Vec<LogPoint>], from: TimeNs, to: TimeNs) -> Option<BitRate> {
    let span = to.since(from);
    if span.ns() <= 0 {
        return None;
    }
    let bytes: f64 = logs
        .iter()
        .map(|l| l2_at(l, to.ns()) - l2_at(l, from.ns()))
        .sum();
    BitRate::from_bytes_per(Bytes(bytes.max(0.0) as u64), span)
}

/// The stretches of time a method's probes were on the path: one per
/// observation (first to last send of its packets), in the order sent.
///
/// A reader that knew the cross traffic perfectly but saw only these
/// stretches would read `C − X` over them, not over the whole window the
/// truth covers: its error against the truth is the *sampling floor*, what
/// the cross traffic's own variation leaves to any reader of the same probes
/// (issue 28; docs/compare.md).
#[derive(Debug, Clone, Default)]
pub struct ProbeWindows(Vec<(TimeNs, TimeNs)>);

impl ProbeWindows {
    /// Adds the stretch `o`'s packets were sent over (nothing for an
    /// observation of fewer than two packets: it spans no time).
    pub fn observe(&mut self, o: &pathsonde_core::Observation) {
        let mut sent = o.packets.iter().map(|p| p.sent);
        let Some(first) = sent.next() else {
            return;
        };
        let (lo, hi) = sent.fold((first, first), |(lo, hi), t| (lo.min(t), hi.max(t)));
        if hi > lo {
            self.0.push((lo, hi));
        }
    }

    /// The stretches sorted, overlapping ones merged.
    pub fn merged(&self) -> Vec<(TimeNs, TimeNs)> {
        let mut w = self.0.clone();
        w.sort_by_key(|x| x.0);
        let mut out: Vec<(TimeNs, TimeNs)> = Vec::with_capacity(w.len());
        for (a, b) in w {
            match out.last_mut() {
                Some(last) if a <= last.1 => last.1 = last.1.max(b),
                _ => out.push((a, b)),
            }
        }
        out
    }
}

/// Cross traffic offered over the union of `windows` (L2): their bytes over
/// their total length.  `None` when they span no time.
pub fn cross_l2_rate_within(logs: &[Vec<LogPoint>], windows: &ProbeWindows) -> Option<BitRate> {
    let merged = windows.merged();
    let span: i64 = merged.iter().map(|(a, b)| b.since(*a).ns()).sum();
    if span <= 0 {
        return None;
    }
    let bytes: f64 = merged
        .iter()
        .map(|(a, b)| {
            logs.iter()
                .map(|l| l2_at(l, b.ns()) - l2_at(l, a.ns()))
                .sum::<f64>()
        })
        .sum();
    BitRate::from_bytes_per(Bytes(bytes.max(0.0) as u64), DurationNs::from_ns(span))
}

/// Throughput the qdisc sent over `[from, to]` (L2), from the samples
/// nearest inside the window; `None` with fewer than two samples inside.
pub fn qdisc_rate(samples: &[QdiscSample], from: TimeNs, to: TimeNs) -> Option<BitRate> {
    let inside: Vec<&QdiscSample> = samples
        .iter()
        .filter(|s| s.at_ns >= from.ns() && s.at_ns <= to.ns())
        .collect();
    let (a, b) = (inside.first()?, inside.last()?);
    BitRate::from_bytes_per(
        Bytes(b.bytes.saturating_sub(a.bytes)),
        DurationNs::from_ns(b.at_ns - a.at_ns),
    )
}

/// Drops at the bottleneck from the last sample at or before `from` to the
/// first at or after `to` (the samples that bracket the span), with the
/// bracketed span in seconds.  `None` when the series does not cover it.
pub fn drops_over(samples: &[QdiscSample], from: TimeNs, to: TimeNs) -> Option<(u64, f64)> {
    let a = samples.iter().rev().find(|s| s.at_ns <= from.ns())?;
    let b = samples.iter().find(|s| s.at_ns >= to.ns())?;
    let span = (b.at_ns - a.at_ns) as f64 * 1e-9;
    (span > 0.0).then(|| (b.drops.saturating_sub(a.drops), span))
}

/// How long after its last probe a measurement may still make the
/// bottleneck drop: the queue it left drains within a queue's worth of
/// time (256 kB at 10 Mb/s is 0.2 s), so drops up to then count as its.
pub const DROP_TAIL: DurationNs = DurationNs::from_ms(250);

/// Packets the bottleneck dropped because a measurement ran: the drops
/// over `[first probe, last probe + DROP_TAIL]` less what the cross traffic
/// alone lost there at the rate it lost over `baseline` (a stretch with
/// cross traffic and no probes).  A probe that makes the network drop other
/// people's packets is harmful; this counts that harm, probes and cross
/// traffic alike (the qdisc does not say whose packet it dropped).  Never
/// below zero; `None` when the series does not cover the run (a missing
/// baseline counts as no loss of the cross traffic's own).
pub fn drops_caused(
    samples: &[QdiscSample],
    first_probe: TimeNs,
    last_probe: TimeNs,
    baseline: (TimeNs, TimeNs),
) -> Option<f64> {
    let (during, span) = drops_over(samples, first_probe, last_probe + DROP_TAIL)?;
    let rate = drops_over(samples, baseline.0, baseline.1).map_or(0.0, |(d, s)| d as f64 / s);
    Some((during as f64 - rate * span).max(0.0))
}

/// Available bandwidth at the IP layer for probes of `probe_size`, given the
/// link rate C (L2, tbf's rate) and the cross traffic at L2.
pub fn available_ip(capacity_l2: BitRate, cross_l2: BitRate, probe_size: Bytes) -> BitRate {
    let s = probe_size.get() as f64;
    (capacity_l2 - cross_l2)
        .max(BitRate::ZERO)
        .scale(s / (s + L2_HEADER as f64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_tc_json() {
        let text = r#"[{"kind":"tbf","handle":"8001:","root":true,"refcnt":2,"options":{},"bytes":151400,"packets":100,"drops":3,"overlimits":7,"requeues":0,"backlog":3028,"qlen":2}]"#;
        let s = parse_qdisc_json(text, TimeNs::from_ns(5)).unwrap();
        assert_eq!(
            (s.bytes, s.packets, s.drops, s.backlog_bytes),
            (151400, 100, 3, 3028)
        );
        assert!(parse_qdisc_json("[]", TimeNs::from_ns(0)).is_none());
        assert!(parse_qdisc_json("garbage", TimeNs::from_ns(0)).is_none());
    }

    #[test]
    fn a_rate_within_windows_counts_only_their_stretches() {
        // 1000 L2 bytes every ms, except a 10 kB burst at 5.5 ms.
        let mut pts = Vec::new();
        let mut total = 0;
        for ms in 0..=10i64 {
            total += if ms == 6 { 10_000 } else { 1000 };
            pts.push(LogPoint {
                at_ns: ms * 1_000_000,
                ip_bytes: total,
                l2_bytes: total,
                late_packets: 0,
                max_late_ns: 0,
            });
        }
        let mut w = ProbeWindows::default();
        let t = |ms: i64| TimeNs::from_ns(ms * 1_000_000);
        w.0 = vec![(t(1), t(3)), (t(2), t(4)), (t(8), t(9))];
        assert_eq!(w.merged(), vec![(t(1), t(4)), (t(8), t(9))]);
        let r = cross_l2_rate_within(&[pts.clone()], &w).unwrap();
        // 4000 bytes over 4 ms: 8 Mb/s, the burst outside every window.
        assert!((r.bps() - 8e6).abs() < 1.0, "{r}");
        w.0 = vec![(t(5), t(6))];
        let r = cross_l2_rate_within(&[pts], &w).unwrap();
        assert!((r.bps() - 80e6).abs() < 1.0, "{r}");
        assert!(cross_l2_rate_within(&[], &ProbeWindows::default()).is_none());
    }

    #[test]
    fn offered_rate_interpolates_the_log() {
        // 1514 L2 bytes every 100 µs = 121.12 Mb/s.
        let log: Vec<LogPoint> = (0..=1000)
            .map(|i| LogPoint {
                at_ns: i * 100_000,
                ip_bytes: i as u64 * 1500,
                l2_bytes: i as u64 * 1514,
                late_packets: 0,
                max_late_ns: 0,
            })
            .collect();
        let r = cross_l2_rate(
            &[log],
            TimeNs::from_ns(10_050_000),
            TimeNs::from_ns(60_050_000),
        )
        .unwrap();
        assert!((r.mbps() - 121.12).abs() < 0.01, "{r}");
    }

    fn sample(at_ms: i64, drops: u64) -> QdiscSample {
        QdiscSample {
            at_ns: at_ms * 1_000_000,
            bytes: 0,
            packets: 0,
            drops,
            backlog_bytes: 0,
        }
    }

    #[test]
    fn drops_caused_are_the_excess_over_the_cross_traffics_own_loss() {
        // Cross traffic alone loses 10 packets/s (one per 100 ms sample);
        // a measurement from 1.05 s to 1.30 s adds 40 drops.
        let mut series = Vec::new();
        let mut drops = 0;
        for i in 0..=30 {
            let t = i * 100;
            if i > 0 {
                drops += 1;
            }
            if t == 1200 || t == 1300 {
                drops += 20;
            }
            series.push(sample(t, drops));
        }
        let ms = |m: i64| TimeNs::from_ns(m * 1_000_000);
        let caused = drops_caused(&series, ms(1050), ms(1300), (ms(0), ms(1000))).unwrap();
        // Bracketed span 1.0 s .. 1.6 s: 6 baseline drops + 40.
        assert!((caused - 40.0).abs() < 1e-9, "{caused}");
        // A quiet measurement causes none, and never a negative count.
        let quiet = drops_caused(&series, ms(2050), ms(2300), (ms(0), ms(1000))).unwrap();
        assert_eq!(quiet, 0.0);
        // Beyond the series: unknown, not zero.
        assert!(drops_caused(&series, ms(2900), ms(3100), (ms(0), ms(1000))).is_none());
    }

    #[test]
    fn available_is_in_ip_terms() {
        let a = available_ip(
            BitRate::from_mbps(300.0),
            BitRate::from_mbps(90.0),
            Bytes(1500),
        );
        assert!((a.mbps() - 210.0 * 1500.0 / 1514.0).abs() < 1e-9);
        let none = available_ip(
            BitRate::from_mbps(100.0),
            BitRate::from_mbps(150.0),
            Bytes(1500),
        );
        assert_eq!(none.bps(), 0.0);
    }

    #[test]
    fn a_starved_generators_late_packets_are_counted_in_the_window() {
        // A batch every ms; from 5 ms on, each batch holds 3 packets sent
        // 2-4 ms behind the schedule.
        let mut pts = Vec::new();
        let mut late = 0;
        for ms in 0..=10i64 {
            let worst = if ms >= 5 {
                2_000_000 + (ms - 5) * 400_000
            } else {
                0
            };
            if ms >= 5 {
                late += 3;
            }
            pts.push(LogPoint {
                at_ns: ms * 1_000_000,
                ip_bytes: 0,
                l2_bytes: 0,
                late_packets: late,
                max_late_ns: worst,
            });
        }
        let t = |ms: i64| TimeNs::from_ns(ms * 1_000_000);
        let quiet = generator_lag(&[pts.clone()], t(0), t(4));
        assert_eq!(
            (quiet.late_packets, quiet.max_late_s),
            (0, DurationNs::ZERO)
        );
        let busy = generator_lag(&[pts.clone(), pts], t(4), t(7));
        // Batches at 5, 6 and 7 ms, in each of two logs.
        assert_eq!(busy.late_packets, 18);
        assert_eq!(busy.max_late_s, DurationNs::from_ns(2_800_000));
        assert!(quiet.note().is_none());
        assert!(busy.note().unwrap().contains("18 packet(s)"));
    }
}
