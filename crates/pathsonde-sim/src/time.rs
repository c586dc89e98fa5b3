//! Simulated time: integer picoseconds.
//!
//! A 64-byte packet takes 5.12 ns at 100 Gb/s, so nanoseconds would round
//! every small packet's transmission time by up to 20 %; picoseconds keep the
//! rounding below a part in a thousand and still cover 213 days in a `u64`.

use pathsonde_core::units::{duration_ticks, UnitError};
use pathsonde_core::{BitRate, DurationNs, TimeNs};
use std::ops::{Add, AddAssign, Div, Mul, Shl, Sub, SubAssign};

/// A point in simulated time or a span of it, in whole picoseconds.
///
/// A `Copy` newtype over `u64` (`repr(transparent)`): the event loop pays
/// nothing for it.  Arithmetic is what a clock needs and no more: times add
/// and subtract, a span scales by and divides by plain counts, and a span
/// divided by a span is a count.  Serialised as the bare number of
/// picoseconds, as the `u64` it replaces was.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default, serde::Serialize)]
#[serde(transparent)]
#[repr(transparent)]
pub struct Ps(u64);

pub const PS_PER_NS: u64 = 1_000;
pub const PS_PER_US: u64 = 1_000_000;
pub const PS_PER_MS: u64 = 1_000_000_000;
pub const PS_PER_S: u64 = 1_000_000_000_000;

impl Ps {
    pub const ZERO: Ps = Ps(0);
    /// The end of time (also "never", see the engine's `NEVER`).
    pub const MAX: Ps = Ps(u64::MAX);
    pub const NS: Ps = Ps(PS_PER_NS);
    pub const US: Ps = Ps(PS_PER_US);
    pub const MS: Ps = Ps(PS_PER_MS);
    pub const S: Ps = Ps(PS_PER_S);

    #[inline]
    pub const fn from_ps(ps: u64) -> Ps {
        Ps(ps)
    }
    #[inline]
    pub const fn from_ns(ns: u64) -> Ps {
        Ps(ns * PS_PER_NS)
    }
    #[inline]
    pub const fn from_us(us: u64) -> Ps {
        Ps(us * PS_PER_US)
    }
    #[inline]
    pub const fn from_ms(ms: u64) -> Ps {
        Ps(ms * PS_PER_MS)
    }
    #[inline]
    pub const fn from_secs(s: u64) -> Ps {
        Ps(s * PS_PER_S)
    }
    /// Seconds to the nearest picosecond; 0 for anything not a positive number.
    pub fn from_secs_f64(s: f64) -> Ps {
        if s.is_finite() && s > 0.0 {
            Ps((s * PS_PER_S as f64).round() as u64)
        } else {
            Ps(0)
        }
    }
    /// Core's duration (ns, clamped at 0).
    pub fn from_duration(d: DurationNs) -> Ps {
        Ps((d.ns().max(0) as u64).saturating_mul(PS_PER_NS))
    }

    /// The count of picoseconds.
    #[inline]
    pub const fn ps(self) -> u64 {
        self.0
    }
    /// Seconds, as reports print them: `ps as f64 / 1e12`.
    #[inline]
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / PS_PER_S as f64
    }
    /// Core's nanosecond time stamp (rounded to nearest).
    pub fn to_time_ns(self) -> TimeNs {
        TimeNs::from_ns(((self.0 + PS_PER_NS / 2) / PS_PER_NS) as i64)
    }
    /// Core's duration (rounded to nearest ns).
    pub fn to_duration(self) -> DurationNs {
        DurationNs::from_ns(((self.0 + PS_PER_NS / 2) / PS_PER_NS) as i64)
    }

    #[inline]
    pub const fn is_zero(self) -> bool {
        self.0 == 0
    }
    #[inline]
    pub const fn saturating_add(self, o: Ps) -> Ps {
        Ps(self.0.saturating_add(o.0))
    }
    #[inline]
    pub const fn saturating_sub(self, o: Ps) -> Ps {
        Ps(self.0.saturating_sub(o.0))
    }
    #[inline]
    pub const fn abs_diff(self, o: Ps) -> Ps {
        Ps(self.0.abs_diff(o.0))
    }
    /// The first multiple of `step` at or after `self` (a timer's grid, a
    /// router's service clock).
    #[inline]
    pub const fn ceil_to(self, step: Ps) -> Ps {
        Ps(self.0.div_ceil(step.0) * step.0)
    }
    /// Truncated to whole multiples of `step` (e.g. stamps to whole ns).
    #[inline]
    pub const fn floor_to(self, step: Ps) -> Ps {
        Ps(self.0 / step.0 * step.0)
    }
}

impl From<DurationNs> for Ps {
    fn from(d: DurationNs) -> Ps {
        Ps::from_duration(d)
    }
}

impl From<Ps> for DurationNs {
    fn from(t: Ps) -> DurationNs {
        t.to_duration()
    }
}

impl From<Ps> for TimeNs {
    fn from(t: Ps) -> TimeNs {
        t.to_time_ns()
    }
}

impl Add for Ps {
    type Output = Ps;
    #[inline]
    fn add(self, o: Ps) -> Ps {
        Ps(self.0 + o.0)
    }
}
impl AddAssign for Ps {
    #[inline]
    fn add_assign(&mut self, o: Ps) {
        self.0 += o.0;
    }
}
impl Sub for Ps {
    type Output = Ps;
    #[inline]
    fn sub(self, o: Ps) -> Ps {
        Ps(self.0 - o.0)
    }
}
impl SubAssign for Ps {
    #[inline]
    fn sub_assign(&mut self, o: Ps) {
        self.0 -= o.0;
    }
}
impl Mul<u64> for Ps {
    type Output = Ps;
    #[inline]
    fn mul(self, k: u64) -> Ps {
        Ps(self.0 * k)
    }
}
impl Mul<Ps> for u64 {
    type Output = Ps;
    #[inline]
    fn mul(self, t: Ps) -> Ps {
        Ps(self * t.0)
    }
}
impl Div<u64> for Ps {
    type Output = Ps;
    #[inline]
    fn div(self, k: u64) -> Ps {
        Ps(self.0 / k)
    }
}
/// How many whole `o` fit in `self`.
impl Div for Ps {
    type Output = u64;
    #[inline]
    fn div(self, o: Ps) -> u64 {
        self.0 / o.0
    }
}
/// Doubling back-off: `t << n` is `t · 2ⁿ`.
impl Shl<u32> for Ps {
    type Output = Ps;
    #[inline]
    fn shl(self, n: u32) -> Ps {
        Ps(self.0 << n)
    }
}

/// `#[serde(serialize_with = "secs_f64")]`: a [`Ps`] written as seconds,
/// `ps as f64 / 1e12`, exactly the `f64` the `*_s` report fields held.
pub fn secs_f64<S: serde::Serializer>(t: &Ps, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(t.as_secs_f64())
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
        Ps(((u128::from(bytes) * self.q32) >> 32) as u64)
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
    if span.is_zero() {
        return BitRate::ZERO;
    }
    BitRate::from_bps(bytes as f64 * 8.0 / span.as_secs_f64())
}

/// Reads a duration in core's grammar (`docs/units.md`: `131.2us`, `1ms`,
/// `2s`, `5min`, and `500ps` for this clock) to whole picoseconds, so that
/// scenario files and the `sim` flags spell time as every other input does.
pub fn ps_of(text: &str) -> Result<Ps, UnitError> {
    duration_ticks(text, 1).map(Ps)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_to_picoseconds() {
        assert_eq!(ps_of("131.2us").unwrap(), Ps::from_ps(131_200_000));
        assert_eq!(ps_of("1ms").unwrap(), Ps::MS);
        assert_eq!(ps_of("500ps").unwrap(), Ps::from_ps(500));
        assert_eq!(ps_of("0s").unwrap(), Ps::ZERO);
        assert_eq!(ps_of("2min").unwrap(), Ps::from_secs(120));
        assert!(ps_of("0").is_err());
        assert!(ps_of("5").is_err());
        assert!(ps_of("-1s").is_err());
    }

    #[test]
    fn byte_time_is_exact_enough() {
        let b = ByteTime::for_rate(100_000_000_000).unwrap();
        assert_eq!(b.of(1500), Ps::from_ps(120_000));
        assert_eq!(b.of(64), Ps::from_ps(5_120));
        let g = ByteTime::for_rate(1_000_000_000).unwrap();
        assert_eq!(g.of(1500), Ps::from_us(12));
        assert!(ByteTime::for_rate(0).is_none());
    }

    #[test]
    fn conversions_round_as_before() {
        let t = Ps::from_ps(1_234_567_890_123);
        assert_eq!(t.as_secs_f64(), 1.234_567_890_123);
        assert_eq!(t.to_time_ns(), TimeNs::from_ns(1_234_567_890));
        assert_eq!(DurationNs::from(Ps::from_ps(1_500)), DurationNs::from_ns(2));
        assert_eq!(Ps::from(DurationNs::from_ns(-5)), Ps::ZERO);
        assert_eq!(Ps::from(DurationNs::from_ns(3_000)), Ps::from_us(3));
        assert_eq!(Ps::from_secs_f64(1e-9), Ps::NS);
        assert_eq!(Ps::from_secs_f64(-1.0), Ps::ZERO);
        assert_eq!(Ps::from_ps(7).ceil_to(Ps::from_ps(5)), Ps::from_ps(10));
        assert_eq!(Ps::from_ps(7).floor_to(Ps::from_ps(5)), Ps::from_ps(5));
        assert_eq!(Ps::MS / Ps::US, 1000);
        assert_eq!(3 * Ps::MS, Ps::from_ms(3));
        assert_eq!(Ps::S << 2, Ps::from_secs(4));
        let json = serde_json::to_string(&Ps::from_ps(42)).unwrap();
        assert_eq!(json, "42");
    }
}
