//! Simulated time: integer picoseconds.
//!
//! A 64-byte packet takes 5.12 ns at 100 Gb/s, so nanoseconds would round
//! every small packet's transmission time by up to 20 %; picoseconds keep the
//! rounding below a part in a thousand and still cover 213 days in a `u64`.

use pathsonde_core::units::{duration_ticks, UnitError};
use pathsonde_core::{BitRate, DurationNs, TimeNs};

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

/// Reads a duration in core's grammar (`docs/units.md`: `131.2us`, `1ms`,
/// `2s`, `5min`, and `500ps` for this clock) to whole picoseconds, so that
/// scenario files and the `sim` flags spell time as every other input does.
pub fn ps_of(text: &str) -> Result<Ps, UnitError> {
    duration_ticks(text, 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_to_picoseconds() {
        assert_eq!(ps_of("131.2us").unwrap(), 131_200_000);
        assert_eq!(ps_of("1ms").unwrap(), PS_PER_MS);
        assert_eq!(ps_of("500ps").unwrap(), 500);
        assert_eq!(ps_of("0s").unwrap(), 0);
        assert_eq!(ps_of("2min").unwrap(), 120 * PS_PER_S);
        assert!(ps_of("0").is_err());
        assert!(ps_of("5").is_err());
        assert!(ps_of("-1s").is_err());
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
