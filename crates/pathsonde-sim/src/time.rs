//! Simulated time: integer picoseconds.
//!
//! A 64-byte packet takes 5.12 ns at 100 Gb/s, so nanoseconds would round
//! every small packet's transmission time by up to 20 %; picoseconds keep the
//! rounding below a part in a thousand and still cover 213 days in a `u64`.

use pathsonde_core::{BitRate, Bytes, DurationNs, TimeNs};

/// A point in simulated time or a span of it, in picoseconds.
pub type Ps = u64;

pub const PS_PER_NS: u64 = 1_000;
pub const PS_PER_US: u64 = 1_000_000;
pub const PS_PER_MS: u64 = 1_000_000_000;
pub const PS_PER_S: u64 = 1_000_000_000_000;

/// Picoseconds to core's nanosecond time stamp (rounded to nearest).
pub fn to_time_ns(t: Ps) -> TimeNs {
    TimeNs::from_ns(((t + PS_PER_NS / 2) / PS_PER_NS) as i64)
}

/// Core's duration (ns, clamped at 0) to picoseconds.
pub fn from_duration(d: DurationNs) -> Ps {
    (d.ns().max(0) as u64).saturating_mul(PS_PER_NS)
}

/// Picoseconds to core's duration (rounded to nearest ns).
pub fn to_duration(t: Ps) -> DurationNs {
    DurationNs::from_ns(((t + PS_PER_NS / 2) / PS_PER_NS) as i64)
}

pub fn secs(t: Ps) -> f64 {
    t as f64 / PS_PER_S as f64
}

pub fn from_secs_f64(s: f64) -> Ps {
    if s.is_finite() && s > 0.0 {
        (s * PS_PER_S as f64).round() as Ps
    } else {
        0
    }
}

/// Serialisation time of a link as a 32.32 fixed-point "picoseconds per
/// byte", so that the hot loop multiplies instead of dividing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ByteTime {
    q32: u128,
}

impl ByteTime {
    /// `None` for a rate below 1 b/s.
    pub fn for_rate(rate_bps: u64) -> Option<ByteTime> {
        if rate_bps == 0 {
            return None;
        }
        Some(ByteTime {
            q32: ((8 * u128::from(PS_PER_S)) << 32) / u128::from(rate_bps),
        })
    }
    #[inline]
    pub fn of(self, bytes: u64) -> Ps {
        ((u128::from(bytes) * self.q32) >> 32) as Ps
    }
}

/// The rate in whole bits per second (what links are configured with).
pub fn rate_bps(r: BitRate) -> u64 {
    let b = r.bps();
    if b.is_finite() && b > 0.0 {
        b.round() as u64
    } else {
        0
    }
}

/// Bytes over a span as a rate.
pub fn rate_of(bytes: u64, span: Ps) -> BitRate {
    if span == 0 {
        return BitRate::ZERO;
    }
    BitRate::from_bps(bytes as f64 * 8.0 / secs(span))
}

/// Parses `131.2us`, `1ms`, `2s`, `10ns`, `500ps`, `0` (units required
/// except for zero).
pub fn parse_duration(s: &str) -> Result<Ps, String> {
    let t = s.trim();
    if t == "0" {
        return Ok(0);
    }
    let units: [(&str, f64); 6] = [
        ("ps", 1.0),
        ("ns", 1e3),
        ("us", 1e6),
        ("µs", 1e6),
        ("ms", 1e9),
        ("s", 1e12),
    ];
    for (u, mult) in units {
        if let Some(num) = t.strip_suffix(u) {
            let v: f64 = num
                .trim()
                .parse()
                .map_err(|_| format!("bad duration `{s}`: `{num}` is not a number"))?;
            if !v.is_finite() || v < 0.0 {
                return Err(format!("bad duration `{s}`: must be finite and ≥ 0"));
            }
            let ps = v * mult;
            if ps > 1e19 {
                return Err(format!("bad duration `{s}`: too long"));
            }
            return Ok(ps.round() as Ps);
        }
    }
    Err(format!(
        "bad duration `{s}`: give a number with a unit (ps, ns, us, ms, s), as in `131.2us`"
    ))
}

/// Parses a byte count: `1500`, `64KB` (×1000), `64KiB` (×1024), `4MB`, `1MiB`.
pub fn parse_bytes(s: &str) -> Result<Bytes, String> {
    let t = s.trim();
    let units: [(&str, f64); 7] = [
        ("KiB", 1024.0),
        ("MiB", 1024.0 * 1024.0),
        ("GiB", 1024.0 * 1024.0 * 1024.0),
        ("KB", 1e3),
        ("MB", 1e6),
        ("GB", 1e9),
        ("B", 1.0),
    ];
    for (u, mult) in units {
        if let Some(num) = t.strip_suffix(u) {
            let v: f64 = num
                .trim()
                .parse()
                .map_err(|_| format!("bad size `{s}`: `{num}` is not a number"))?;
            if !v.is_finite() || v < 0.0 || v * mult > 1e15 {
                return Err(format!("bad size `{s}`: out of range"));
            }
            return Ok(Bytes((v * mult).round() as u64));
        }
    }
    t.parse::<u64>()
        .map(Bytes)
        .map_err(|_| format!("bad size `{s}`: give bytes, as in `1500`, `64KB` or `4MiB`"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_sizes_parse() {
        assert_eq!(parse_duration("131.2us").unwrap(), 131_200_000);
        assert_eq!(parse_duration("1ms").unwrap(), PS_PER_MS);
        assert_eq!(parse_duration("0").unwrap(), 0);
        assert!(parse_duration("5").is_err());
        assert!(parse_duration("-1s").is_err());
        assert_eq!(parse_bytes("4MB").unwrap(), Bytes(4_000_000));
        assert_eq!(parse_bytes("64KiB").unwrap(), Bytes(65_536));
        assert_eq!(parse_bytes("1500").unwrap(), Bytes(1500));
        assert!(parse_bytes("lots").is_err());
    }

    #[test]
    fn byte_time_is_exact_enough() {
        let b = ByteTime::for_rate(100_000_000_000).unwrap();
        assert_eq!(b.of(1500), 120_000);
        assert_eq!(b.of(64), 5_120);
        let g = ByteTime::for_rate(1_000_000_000).unwrap();
        assert_eq!(g.of(1500), 12_000_000);
        assert!(ByteTime::for_rate(0).is_none());
    }
}
