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
    fn offered_rate_interpolates_the_log() {
        // 1514 L2 bytes every 100 µs = 121.12 Mb/s.
        let log: Vec<LogPoint> = (0..=1000)
            .map(|i| LogPoint {
                at_ns: i * 100_000,
                ip_bytes: i as u64 * 1500,
                l2_bytes: i as u64 * 1514,
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
}
