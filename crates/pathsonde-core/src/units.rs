//! Units as types.
//!
//! Every quantity that crosses a module boundary carries its unit in its type, so
//! that nobody has to guess whether an `f64` holds bits or bytes per second, or
//! whether a `u64` is nanoseconds or microseconds.  Inner values are reachable
//! only through accessor methods that name the unit (`bps()`, `mbps()`, `ns()`,
//! `secs_f64()`).
//!
//! What people type is read by one grammar (`units/parse.rs`): `100M` (bit/s),
//! `64kB` or `256KiB`, `10ms` or `5min` (`docs/units.md`).

mod parse;

pub use parse::{duration_ticks, Problem, Quantity, UnitError};

use serde::{Deserialize, Serialize};
use std::fmt;
use std::ops::{Add, AddAssign, Sub};

/// A bit rate in bits per second.
///
/// Held as `f64` because rates are ratios of byte counts and durations and are
/// rarely whole numbers; the accessor names state the unit.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct BitRate(f64);

impl BitRate {
    pub const ZERO: BitRate = BitRate(0.0);

    pub const fn from_bps(bps: f64) -> Self {
        BitRate(bps)
    }
    pub(crate) fn from_kbps(kbps: f64) -> Self {
        BitRate(kbps * 1e3)
    }
    pub fn from_mbps(mbps: f64) -> Self {
        BitRate(mbps * 1e6)
    }
    pub fn from_gbps(gbps: f64) -> Self {
        BitRate(gbps * 1e9)
    }
    /// The rate at which `bytes` are carried in `span`; `None` when the span is not positive.
    pub fn from_bytes_per(bytes: Bytes, span: DurationNs) -> Option<Self> {
        if span.ns() <= 0 {
            return None;
        }
        Some(BitRate(bytes.bits() as f64 * 1e9 / span.ns() as f64))
    }
    /// True for a finite rate above zero: the only rates one can send at.
    pub fn is_positive(self) -> bool {
        self.0.is_finite() && self.0 > 0.0
    }
    pub const fn bps(self) -> f64 {
        self.0
    }
    pub fn mbps(self) -> f64 {
        self.0 / 1e6
    }
    pub fn gbps(self) -> f64 {
        self.0 / 1e9
    }
    /// How long `bytes` take to serialise at this rate; `None` for a non-positive rate.
    pub fn time_to_send(self, bytes: Bytes) -> Option<DurationNs> {
        if !self.is_positive() {
            return None;
        }
        Some(DurationNs::from_secs_f64(bytes.bits() as f64 / self.0))
    }
    /// How many bytes this rate carries in `span` (rounded down).
    pub(crate) fn bytes_in(self, span: DurationNs) -> Bytes {
        let b = self.0 * span.secs_f64() / 8.0;
        Bytes(if b.is_finite() && b > 0.0 {
            b as u64
        } else {
            0
        })
    }
    pub fn scale(self, factor: f64) -> Self {
        BitRate(self.0 * factor)
    }
    pub fn max(self, other: Self) -> Self {
        if other.0 > self.0 {
            other
        } else {
            self
        }
    }
    pub fn min(self, other: Self) -> Self {
        if other.0 < self.0 {
            other
        } else {
            self
        }
    }
}

impl Add for BitRate {
    type Output = BitRate;
    fn add(self, rhs: Self) -> Self {
        BitRate(self.0 + rhs.0)
    }
}

impl Sub for BitRate {
    type Output = BitRate;
    fn sub(self, rhs: Self) -> Self {
        BitRate(self.0 - rhs.0)
    }
}

impl fmt::Display for BitRate {
    /// Chooses the unit a person would: `940.12 Mb/s`, `9.41 Gb/s`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = self.0.abs();
        let prec = f.precision().unwrap_or(2);
        if v >= 1e9 {
            write!(f, "{:.*} Gb/s", prec, self.0 / 1e9)
        } else if v >= 1e6 {
            write!(f, "{:.*} Mb/s", prec, self.0 / 1e6)
        } else if v >= 1e3 {
            write!(f, "{:.*} kb/s", prec, self.0 / 1e3)
        } else {
            write!(f, "{:.*} b/s", prec, self.0)
        }
    }
}

/// A count of bytes.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Bytes(pub u64);

impl Bytes {
    pub const ZERO: Bytes = Bytes(0);
    pub const fn new(n: u64) -> Self {
        Bytes(n)
    }
    pub const fn get(self) -> u64 {
        self.0
    }
    pub const fn bits(self) -> u64 {
        self.0.saturating_mul(8)
    }
}

impl Add for Bytes {
    type Output = Bytes;
    fn add(self, rhs: Self) -> Self {
        Bytes(self.0.saturating_add(rhs.0))
    }
}

impl AddAssign for Bytes {
    fn add_assign(&mut self, rhs: Self) {
        self.0 = self.0.saturating_add(rhs.0);
    }
}

impl std::iter::Sum for Bytes {
    fn sum<I: Iterator<Item = Bytes>>(iter: I) -> Self {
        iter.fold(Bytes::ZERO, |a, b| a + b)
    }
}

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = self.0 as f64;
        if v >= 1024.0 * 1024.0 * 1024.0 {
            write!(f, "{:.2} GiB", v / (1024.0 * 1024.0 * 1024.0))
        } else if v >= 1024.0 * 1024.0 {
            write!(f, "{:.2} MiB", v / (1024.0 * 1024.0))
        } else if v >= 1024.0 {
            write!(f, "{:.1} KiB", v / 1024.0)
        } else {
            write!(f, "{} B", self.0)
        }
    }
}

/// A signed span of time in nanoseconds.
///
/// Signed because the difference of two stamps from different hosts' clocks (a
/// one-way delay with unknown offset) can be negative.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct DurationNs(i64);

impl DurationNs {
    pub const ZERO: DurationNs = DurationNs(0);
    pub const fn from_ns(ns: i64) -> Self {
        DurationNs(ns)
    }
    pub const fn from_us(us: i64) -> Self {
        DurationNs(us.saturating_mul(1_000))
    }
    pub const fn from_ms(ms: i64) -> Self {
        DurationNs(ms.saturating_mul(1_000_000))
    }
    pub const fn from_secs(s: i64) -> Self {
        DurationNs(s.saturating_mul(1_000_000_000))
    }
    /// Rounds to the nearest nanosecond; saturates at the `i64` range.
    pub fn from_secs_f64(s: f64) -> Self {
        let ns = (s * 1e9).round();
        if ns.is_nan() {
            DurationNs(0)
        } else {
            DurationNs(ns.clamp(i64::MIN as f64, i64::MAX as f64) as i64)
        }
    }
    pub const fn ns(self) -> i64 {
        self.0
    }
    pub fn us_f64(self) -> f64 {
        self.0 as f64 / 1e3
    }
    pub fn ms_f64(self) -> f64 {
        self.0 as f64 / 1e6
    }
    pub fn secs_f64(self) -> f64 {
        self.0 as f64 / 1e9
    }
    pub const fn abs(self) -> Self {
        DurationNs(self.0.saturating_abs())
    }
    pub fn to_std(self) -> std::time::Duration {
        std::time::Duration::from_nanos(self.0.max(0) as u64)
    }
    pub fn from_std(d: std::time::Duration) -> Self {
        DurationNs(i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
    }
}

impl Add for DurationNs {
    type Output = DurationNs;
    fn add(self, rhs: Self) -> Self {
        DurationNs(self.0.saturating_add(rhs.0))
    }
}

impl Sub for DurationNs {
    type Output = DurationNs;
    fn sub(self, rhs: Self) -> Self {
        DurationNs(self.0.saturating_sub(rhs.0))
    }
}

impl AddAssign for DurationNs {
    fn add_assign(&mut self, rhs: Self) {
        self.0 = self.0.saturating_add(rhs.0);
    }
}

impl fmt::Display for DurationNs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = self.0.unsigned_abs();
        if v >= 1_000_000_000 {
            write!(f, "{:.3} s", self.secs_f64())
        } else if v >= 1_000_000 {
            write!(f, "{:.3} ms", self.ms_f64())
        } else if v >= 1_000 {
            write!(f, "{:.3} µs", self.us_f64())
        } else {
            write!(f, "{} ns", self.0)
        }
    }
}

/// Serde adapter that writes a [`DurationNs`] as f64 seconds and reads f64
/// seconds back, rounded to the nanosecond.
///
/// For fields whose JSON name ends in `_s`: the JSON contract is seconds as a
/// number, as it was when these fields were bare `f64`s, so `#[serde(with =
/// "pathsonde_core::units::serde_secs")]` keeps every stored file readable and
/// every written file byte-identical ([`DurationNs::secs_f64`] is what the
/// code wrote before).  [`serde_secs::option`] does the same for
/// `Option<DurationNs>` (`null` for `None`).
pub mod serde_secs {
    use super::DurationNs;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &DurationNs, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.secs_f64())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<DurationNs, D::Error> {
        f64::deserialize(d).map(DurationNs::from_secs_f64)
    }

    /// The same for `Option<DurationNs>`; `None` is `null`.
    pub mod option {
        use super::DurationNs;
        use serde::{Deserialize, Deserializer, Serializer};

        pub fn serialize<S: Serializer>(d: &Option<DurationNs>, s: S) -> Result<S::Ok, S::Error> {
            match d {
                Some(d) => s.serialize_some(&d.secs_f64()),
                None => s.serialize_none(),
            }
        }

        pub fn deserialize<'de, D: Deserializer<'de>>(
            d: D,
        ) -> Result<Option<DurationNs>, D::Error> {
            Ok(Option::<f64>::deserialize(d)?.map(DurationNs::from_secs_f64))
        }
    }
}

/// Serde adapter for a [`DurationNs`] that used to be written with
/// [`std::time::Duration::as_secs_f64`]: f64 seconds computed as std does
/// (whole seconds plus nanoseconds / 1e9), read back rounded to the nanosecond.
///
/// Why a second adapter: std's sum and [`DurationNs::secs_f64`]'s single
/// division differ in the last digit for about 1 % of values (2.3 s is one),
/// and fields such as a flag's settling time or a measured wall time were
/// written the std way; this keeps their JSON byte-identical.  Negative
/// durations, which std cannot hold, are written as [`serde_secs`] writes them.
pub mod serde_std_secs {
    use super::DurationNs;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &DurationNs, s: S) -> Result<S::Ok, S::Error> {
        let secs = if d.ns() >= 0 {
            d.to_std().as_secs_f64()
        } else {
            d.secs_f64()
        };
        s.serialize_f64(secs)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<DurationNs, D::Error> {
        f64::deserialize(d).map(DurationNs::from_secs_f64)
    }
}

/// An instant on some clock, in nanoseconds since that clock's epoch.
///
/// Which clock is recorded beside the stamps (see [`crate::ClockInfo`]); two
/// instants are only comparable when they come from the same clock.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct TimeNs(i64);

impl TimeNs {
    pub const fn from_ns(ns: i64) -> Self {
        TimeNs(ns)
    }
    pub const fn ns(self) -> i64 {
        self.0
    }
    /// `self - earlier`.
    pub const fn since(self, earlier: TimeNs) -> DurationNs {
        DurationNs::from_ns(self.0.saturating_sub(earlier.0))
    }
}

impl Add<DurationNs> for TimeNs {
    type Output = TimeNs;
    fn add(self, rhs: DurationNs) -> Self {
        TimeNs(self.0.saturating_add(rhs.ns()))
    }
}

impl Sub<DurationNs> for TimeNs {
    type Output = TimeNs;
    fn sub(self, rhs: DurationNs) -> Self {
        TimeNs(self.0.saturating_sub(rhs.ns()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_from_bytes_and_span() {
        let r = BitRate::from_bytes_per(Bytes(125_000), DurationNs::from_ms(10)).unwrap();
        assert!((r.mbps() - 100.0).abs() < 1e-9);
        assert!(BitRate::from_bytes_per(Bytes(1), DurationNs::ZERO).is_none());
    }

    #[test]
    fn time_to_send_inverts_rate() {
        let r = BitRate::from_gbps(1.0);
        assert_eq!(
            r.time_to_send(Bytes(1500)).unwrap(),
            DurationNs::from_ns(12_000)
        );
        assert!(BitRate::ZERO.time_to_send(Bytes(1)).is_none());
        assert_eq!(r.bytes_in(DurationNs::from_ms(1)), Bytes(125_000));
    }

    #[test]
    fn display_picks_units() {
        assert_eq!(BitRate::from_mbps(940.123).to_string(), "940.12 Mb/s");
        assert_eq!(BitRate::from_gbps(9.41).to_string(), "9.41 Gb/s");
        assert_eq!(DurationNs::from_us(12).to_string(), "12.000 µs");
        assert_eq!(Bytes(2048).to_string(), "2.0 KiB");
    }

    #[test]
    fn seconds_adapter_writes_what_secs_f64_wrote() {
        #[derive(Serialize, Deserialize, PartialEq, Debug)]
        struct T {
            #[serde(with = "serde_secs")]
            duration_s: DurationNs,
            #[serde(with = "serde_secs::option", default)]
            rtt_s: Option<DurationNs>,
        }
        let t = T {
            duration_s: DurationNs::from_ns(2_025_156_023),
            rtt_s: None,
        };
        let text = serde_json::to_string(&t).unwrap();
        assert_eq!(text, r#"{"duration_s":2.025156023,"rtt_s":null}"#);
        assert_eq!(serde_json::from_str::<T>(&text).unwrap(), t);
        let back: T = serde_json::from_str(r#"{"duration_s":0.5,"rtt_s":0.000123456}"#).unwrap();
        assert_eq!(back.rtt_s, Some(DurationNs::from_ns(123_456)));
        assert_eq!(
            serde_json::to_string(&back).unwrap(),
            r#"{"duration_s":0.5,"rtt_s":0.000123456}"#
        );
    }

    #[test]
    fn the_std_adapter_writes_what_as_secs_f64_wrote() {
        #[derive(Serialize, Deserialize)]
        struct T {
            #[serde(with = "serde_std_secs")]
            settle_s: DurationNs,
        }
        for ns in [2_300_000_000i64, 500_000_000, 1_234_567_891, 0] {
            let d = DurationNs::from_ns(ns);
            let text = serde_json::to_string(&T { settle_s: d }).unwrap();
            let want = format!(
                "{{\"settle_s\":{}}}",
                serde_json::to_string(&d.to_std().as_secs_f64()).unwrap()
            );
            assert_eq!(text, want);
            let back: T = serde_json::from_str(&text).unwrap();
            assert_eq!(back.settle_s, d);
        }
    }

    #[test]
    fn durations_saturate() {
        assert_eq!(DurationNs::from_secs_f64(f64::INFINITY).ns(), i64::MAX);
        assert_eq!(DurationNs::from_secs_f64(f64::NAN).ns(), 0);
        assert_eq!(
            (DurationNs::from_ns(i64::MAX) + DurationNs::from_ns(1)).ns(),
            i64::MAX
        );
    }
}
