//! Memory: size from /proc/meminfo and memory copy bandwidth measured with
//! 64 MiB copies (the paper's "memory copy bandwidth"; its raw memory
//! bandwidth is twice this, a read and a write per byte).

use super::Known;
use pathsonde_core::BitRate;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Instant;

/// Bytes per copy.
pub const COPY_BLOCK: usize = 64 << 20;
/// Timed copies (after one untimed copy that faults the pages in).
pub const COPY_REPEATS: usize = 6;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Memory {
    pub total_bytes: Known<u64>,
    pub available_bytes: Known<u64>,
    /// Slowest and fastest of the timed copies, in bits of data copied per second.
    pub memcpy_min_bps: Known<BitRate>,
    pub memcpy_max_bps: Known<BitRate>,
    pub memcpy_block_bytes: u64,
    pub memcpy_repeats: u32,
}

/// Parses /proc/meminfo into bytes per key ("MemTotal: 16318148 kB").
pub fn parse_meminfo(text: &str) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let Some((key, rest)) = line.split_once(':') else {
            continue;
        };
        let mut parts = rest.split_whitespace();
        let Some(n) = parts.next().and_then(|n| n.parse::<u64>().ok()) else {
            continue;
        };
        let scale = match parts.next() {
            Some("kB") => 1024,
            Some("mB") | Some("MB") => 1 << 20,
            _ => 1,
        };
        out.insert(key.trim().to_string(), n.saturating_mul(scale));
    }
    out
}

pub fn probe() -> Memory {
    probe_with(COPY_BLOCK, COPY_REPEATS)
}

/// As [`probe`] with smaller or fewer copies (the quick report: 8 MiB × 2).
pub fn probe_with(block: usize, repeats: usize) -> Memory {
    let info = std::fs::read_to_string("/proc/meminfo").map(|t| parse_meminfo(&t));
    let get = |key: &str| -> Known<u64> {
        match &info {
            Ok(m) => m
                .get(key)
                .copied()
                .map(Known::Value)
                .unwrap_or_else(|| Known::unavailable(format!("no {key} in /proc/meminfo"))),
            Err(e) => Known::unavailable(format!("/proc/meminfo: {e}")),
        }
    };
    let (min, max) = match copy_bandwidth(block, repeats) {
        Some((lo, hi)) => (
            Known::Value(BitRate::from_bps(lo)),
            Known::Value(BitRate::from_bps(hi)),
        ),
        None => (
            Known::unavailable("copies took no measurable time"),
            Known::unavailable("copies took no measurable time"),
        ),
    };
    Memory {
        total_bytes: get("MemTotal"),
        available_bytes: get("MemAvailable"),
        memcpy_min_bps: min,
        memcpy_max_bps: max,
        memcpy_block_bytes: block as u64,
        memcpy_repeats: repeats as u32,
    }
}

/// (slowest, fastest) copy rate in bits/s over `repeats` copies of `block` bytes.
pub fn copy_bandwidth(block: usize, repeats: usize) -> Option<(f64, f64)> {
    let src: Vec<u8> = (0..block).map(|i| i as u8).collect();
    let mut dst = vec![0u8; block];
    dst.copy_from_slice(&src); // fault in
    let mut rates = Vec::with_capacity(repeats);
    for _ in 0..repeats {
        let t = Instant::now();
        dst.copy_from_slice(std::hint::black_box(&src));
        std::hint::black_box(&mut dst);
        let s = t.elapsed().as_secs_f64();
        if s > 0.0 {
            rates.push(block as f64 * 8.0 / s);
        }
    }
    let lo = rates.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = rates.iter().copied().fold(0.0, f64::max);
    (!rates.is_empty()).then_some((lo, hi))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MEMINFO: &str = "MemTotal:        8131384 kB
MemFree:         5812340 kB
MemAvailable:    7410172 kB
Buffers:          102364 kB
HugePages_Total:       0
Hugepagesize:       2048 kB
";

    #[test]
    fn parses_meminfo_in_bytes() {
        let m = parse_meminfo(MEMINFO);
        assert_eq!(m["MemTotal"], 8131384 * 1024);
        assert_eq!(m["MemAvailable"], 7410172 * 1024);
        assert_eq!(m["HugePages_Total"], 0);
        assert_eq!(m["Hugepagesize"], 2048 * 1024);
    }

    #[test]
    fn copy_bandwidth_is_positive() {
        let (lo, hi) = copy_bandwidth(1 << 20, 3).unwrap();
        assert!(lo > 0.0 && hi >= lo);
    }
}
