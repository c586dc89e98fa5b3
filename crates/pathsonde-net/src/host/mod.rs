//! Host capability probes: what this host can do, measured and read from
//! /proc, /sys and `ethtool`, so that a measurement can tell the path's
//! limits from the host's (Jin & Tierney 2003, "System Capability Effects
//! on Algorithms for Network Bandwidth Measurement"; netest's verbose
//! section).
//!
//! One file per concern: [`cpu`], [`memory`], [`timing`], [`interfaces`],
//! [`sysctls`] (and the kernel), [`pacing`].  [`probe`] runs them all in a
//! few seconds and returns a [`HostReport`].
//!
//! A field the probes could not learn is [`Known::Unavailable`] with the
//! reason; in JSON it is `{"unavailable": "why"}` in place of the value.

pub mod cpu;
pub mod interfaces;
pub mod memory;
pub mod pacing;
pub mod sysctls;
pub mod timing;

use serde::{Deserialize, Serialize};
use std::time::Instant;

/// A value, or why it could not be learned.  Serialized untagged: the bare
/// value, or `{"unavailable": "why"}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Known<T> {
    Value(T),
    Unavailable { unavailable: String },
}

impl<T> Known<T> {
    pub fn unavailable(why: impl Into<String>) -> Self {
        Known::Unavailable {
            unavailable: why.into(),
        }
    }
    pub fn value(&self) -> Option<&T> {
        match self {
            Known::Value(v) => Some(v),
            Known::Unavailable { .. } => None,
        }
    }
    pub fn reason(&self) -> Option<&str> {
        match self {
            Known::Value(_) => None,
            Known::Unavailable { unavailable } => Some(unavailable),
        }
    }
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Known<U> {
        match self {
            Known::Value(v) => Known::Value(f(v)),
            Known::Unavailable { unavailable } => Known::Unavailable { unavailable },
        }
    }
}

impl<T, E: std::fmt::Display> From<Result<T, E>> for Known<T> {
    fn from(r: Result<T, E>) -> Self {
        match r {
            Ok(v) => Known::Value(v),
            Err(e) => Known::unavailable(e.to_string()),
        }
    }
}

/// Everything `pathsonde host` reports about one host.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HostReport {
    pub kernel: sysctls::Kernel,
    pub cpu: cpu::Cpu,
    pub memory: memory::Memory,
    pub timing: timing::Timing,
    pub interfaces: Vec<interfaces::Interface>,
    pub sysctls: sysctls::Sysctls,
    pub pacing: pacing::Pacing,
    /// Wall time the probes took.
    pub probe_duration_ns: i64,
    /// `full` (`pathsonde host`), or `quick: …` saying what was cut short
    /// (the reports `abw` and `serve` exchange; docs/host.md).
    #[serde(default = "full")]
    pub variant: String,
}

fn full() -> String {
    "full".into()
}

/// Which quick report to gather.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quick {
    /// The client (sender): back-to-back pacing rates over 50 ms per size,
    /// no gap-error runs; 8 MiB × 2 copies.  About 0.15 s.
    Sender,
    /// The server (receiver), once at start-up: no pacing measurement;
    /// 8 MiB × 2 copies.  About 0.05 s.
    Receiver,
}

/// A quick report, for the ends of a measurement (`abw`, `serve`).
pub fn probe_quick(which: Quick) -> HostReport {
    gather(|| match which {
        Quick::Sender => (
            memory::probe_with(8 << 20, 2),
            pacing::probe_with(pathsonde_core::DurationNs::from_ms(50), false),
            "quick: pacing rates over 50 ms per size, no gap-error runs; memcpy 8 MiB x 2".into(),
        ),
        Quick::Receiver => (
            memory::probe_with(8 << 20, 2),
            pacing::not_measured("the server's start-up report skips it (the server receives)"),
            "quick: no pacing measurement; memcpy 8 MiB x 2".into(),
        ),
    })
}

/// Runs every probe (a few seconds; the pacing and copy measurements
/// dominate).  Never fails: what cannot be learned carries its reason.
pub fn probe() -> HostReport {
    gather(|| (memory::probe(), pacing::probe(), full()))
}

/// The probes both reports share, plus the costly ones `costly` chooses
/// (memory copies, pacing) and the report's variant name.
fn gather(costly: impl FnOnce() -> (memory::Memory, pacing::Pacing, String)) -> HostReport {
    let start = Instant::now();
    let kernel = sysctls::kernel();
    let cpu = cpu::probe();
    let timing = timing::probe();
    let interfaces = interfaces::probe();
    let sysctls = sysctls::probe();
    let (memory, pacing, variant) = costly();
    HostReport {
        kernel,
        cpu,
        memory,
        timing,
        interfaces,
        sysctls,
        pacing,
        probe_duration_ns: start.elapsed().as_nanos() as i64,
        variant,
    }
}

/// Reads a small text file, trimmed; the error names the path.
pub(crate) fn read_trimmed(path: &str) -> Result<String, String> {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .map_err(|e| format!("{path}: {e}"))
}

/// The value at percentile `p` (0..=100) of sorted samples (nearest rank).
pub(crate) fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let idx = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_serializes_as_value_or_reason() {
        let v: Known<u64> = Known::Value(5);
        assert_eq!(serde_json::to_string(&v).unwrap(), "5");
        let u: Known<u64> = Known::unavailable("no cpufreq in sysfs");
        assert_eq!(
            serde_json::to_string(&u).unwrap(),
            r#"{"unavailable":"no cpufreq in sysfs"}"#
        );
        let back: Known<u64> = serde_json::from_str(r#"{"unavailable":"x"}"#).unwrap();
        assert_eq!(back.reason(), Some("x"));
    }

    #[test]
    fn percentile_nearest_rank() {
        let s = [1.0, 2.0, 3.0, 4.0, 5.0];
        assert_eq!(percentile(&s, 50.0), 3.0);
        assert_eq!(percentile(&s, 100.0), 5.0);
        assert_eq!(percentile(&s, 0.0), 1.0);
    }
}
