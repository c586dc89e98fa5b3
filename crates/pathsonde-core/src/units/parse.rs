//! The one grammar for rates, sizes and durations that people type.
//!
//! Command-line flags, simulator scenario files, cross-traffic specs and the
//! agent's config all read quantities through the `FromStr` impls here, so a
//! spelling means the same thing wherever it is written.  `docs/units.md`
//! states the rules; in short:
//!
//! - a rate is bits per second with an optional prefix `k`, `M`, `G`, `T`
//!   (powers of 1000, either case) and an optional `b`, `bit`, `bps`, `b/s`
//!   or `bit/s`: `100M`, `1.5G`, `300mbit`, `10kbps`, `800000`;
//! - a size is bytes with an optional prefix `k`, `M`, `G`, `T` (powers of
//!   1000, either case) or `Ki`, `Mi`, `Gi`, `Ti` (powers of 1024), then an
//!   optional `B`: `1500`, `64kB`, `4MB`, `256KiB`; a lowercase `b` is
//!   refused because it could mean bits;
//! - a duration always has a unit: `ns`, `us` (`µs`), `ms`, `s`, `min` (`m`)
//!   or `h`, and `ps` for the simulator's picosecond clock: `10ms`, `1.5s`,
//!   `5min`.
//!
//! Negative values, NaN, infinities and values the type cannot hold are
//! refused, each with one line that says what was wrong and what is accepted.

use super::{BitRate, Bytes, DurationNs};
use std::fmt;
use std::str::FromStr;

/// Which kind of quantity a text was read as; names it in error messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quantity {
    Rate,
    Size,
    Duration,
}

impl Quantity {
    /// The accepted forms, appended to every message whose problem does not
    /// already name them.
    fn forms(self) -> &'static str {
        match self {
            Quantity::Rate => {
                "write bit/s with an optional k, M, G or T (×1000) and bit, bps or b/s, \
                 as in 100M, 1.5G, 300mbit or 800000"
            }
            Quantity::Size => {
                "write bytes with an optional k, M, G (×1000) or KiB, MiB, GiB (×1024), \
                 as in 1500, 64kB, 4MB or 256KiB"
            }
            Quantity::Duration => {
                "write a number with ns, us, ms, s, min or h, as in 10ms, 1.5s or 5min"
            }
        }
    }
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Quantity::Rate => "rate",
            Quantity::Size => "size",
            Quantity::Duration => "duration",
        })
    }
}

/// What was wrong with a text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// No number where one was expected (`fast`, `M`, `1..5G`).
    NotANumber,
    /// A number followed by something that is not a unit of this quantity.
    UnknownUnit(String),
    /// A minus sign: none of these quantities can be typed negative.
    Negative,
    /// Infinite, or more than the type holds.
    TooLarge,
    /// A duration given as a bare number: its unit would be a guess.
    NoUnit,
    /// A `B` in a rate: bytes where bits are meant.
    BytesInRate,
    /// A size ending in a lowercase `b` (`256kb`): bits or bytes?  `number`
    /// and `prefix` build the two spellings the message suggests.
    AmbiguousB { number: String, prefix: String },
}

/// A text that is not a rate, size or duration in the grammar above.
///
/// Displays as one line: `bad size `256kb`: …; write …`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad {quantity} `{text}`: {}", reason(.quantity, .problem))]
pub struct UnitError {
    pub quantity: Quantity,
    pub text: String,
    pub problem: Problem,
}

impl UnitError {
    fn new(quantity: Quantity, text: &str, problem: Problem) -> Self {
        UnitError {
            quantity,
            text: text.to_string(),
            problem,
        }
    }

    /// The message without its `bad <quantity> `<text>`: ` head, for callers
    /// that name the value themselves (a cross-traffic spec's part).
    pub fn reason(&self) -> String {
        reason(&self.quantity, &self.problem)
    }
}

fn reason(q: &Quantity, p: &Problem) -> String {
    match p {
        Problem::NotANumber => format!("not a number; {}", q.forms()),
        Problem::UnknownUnit(u) => format!("unknown unit `{u}`; {}", q.forms()),
        Problem::Negative => format!("must not be negative; {}", q.forms()),
        Problem::TooLarge => format!("too large; {}", q.forms()),
        Problem::NoUnit => "needs a unit: ns, us, ms, s, min or h".to_string(),
        Problem::BytesInRate => format!(
            "`B` means bytes and rates are in bits per second; {}",
            q.forms()
        ),
        Problem::AmbiguousB { number, prefix } if prefix.is_empty() => {
            format!("a lowercase `b` could mean bits; write {number} or {number}B for bytes")
        }
        Problem::AmbiguousB { number, prefix } => {
            let p = prefix.to_ascii_uppercase();
            let k = if p == "K" { "k".to_string() } else { p.clone() };
            format!(
                "a lowercase `b` could mean bits; write {number}{k}B (×1000) or {number}{}iB (×1024) for bytes",
                p
            )
        }
    }
}

/// Splits `"12.5Mbit"` into `("12.5", "Mbit")`: the longest head that can be
/// part of a decimal number (digits, one sign, a point, an exponent), and the
/// rest with spaces trimmed.
fn split_unit(s: &str) -> (&str, &str) {
    let end = s
        .char_indices()
        .find(|(i, c)| {
            !(c.is_ascii_digit()
                || *c == '.'
                || ((*c == '-' || *c == '+') && (*i == 0 || s[..*i].ends_with(['e', 'E'])))
                || ((*c == 'e' || *c == 'E')
                    && *i > 0
                    && s[i + 1..]
                        .starts_with(|d: char| d.is_ascii_digit() || d == '-' || d == '+')))
        })
        .map_or(s.len(), |(i, _)| i);
    (&s[..end], s[end..].trim())
}

/// The number and unit of `text`, the number checked to be finite and not
/// negative.
fn number_and_unit(q: Quantity, text: &str) -> Result<(f64, &str, &str), UnitError> {
    let t = text.trim();
    let (num, unit) = split_unit(t);
    if t.starts_with('-') {
        return Err(UnitError::new(q, text, Problem::Negative));
    }
    let v: f64 = num
        .parse()
        .map_err(|_| UnitError::new(q, text, Problem::NotANumber))?;
    if v.is_nan() {
        return Err(UnitError::new(q, text, Problem::NotANumber));
    }
    if v.is_infinite() {
        return Err(UnitError::new(q, text, Problem::TooLarge));
    }
    Ok((v, num, unit))
}

/// The power of 1000 a decimal prefix letter stands for, in either case.
fn decimal_prefix(p: &str) -> Option<f64> {
    match p {
        "" => Some(1.0),
        "k" | "K" => Some(1e3),
        "m" | "M" => Some(1e6),
        "g" | "G" => Some(1e9),
        "t" | "T" => Some(1e12),
        _ => None,
    }
}

/// The power of 1024 a binary prefix (`Ki`, `Mi`, …, without its `i`) stands for.
fn binary_prefix(p: &str) -> Option<f64> {
    const K: f64 = 1024.0;
    match p {
        "k" | "K" => Some(K),
        "m" | "M" => Some(K * K),
        "g" | "G" => Some(K * K * K),
        "t" | "T" => Some(K * K * K * K),
        _ => None,
    }
}

impl FromStr for BitRate {
    type Err = UnitError;

    /// `100M`, `1.5G`, `300mbit`, `10kbps`, `2Gb/s`, `800000` (bit/s).
    fn from_str(text: &str) -> Result<Self, UnitError> {
        let q = Quantity::Rate;
        let (v, _, unit) = number_and_unit(q, text)?;
        if unit.contains('B') {
            return Err(UnitError::new(q, text, Problem::BytesInRate));
        }
        let (prefix, suffix) = unit.split_at(unit.find(['b', '/']).unwrap_or(unit.len()));
        let mult = match (decimal_prefix(prefix), suffix) {
            (Some(m), "" | "b" | "bit" | "bps" | "b/s" | "bit/s") => m,
            _ => {
                return Err(UnitError::new(
                    q,
                    text,
                    Problem::UnknownUnit(unit.to_string()),
                ))
            }
        };
        let bps = v * mult;
        if !bps.is_finite() {
            return Err(UnitError::new(q, text, Problem::TooLarge));
        }
        Ok(BitRate::from_bps(bps))
    }
}

impl FromStr for Bytes {
    type Err = UnitError;

    /// `1500`, `1500B`, `64kB`, `12k`, `4MB`, `256KiB`, `1MiB` (rounded to
    /// whole bytes).
    fn from_str(text: &str) -> Result<Self, UnitError> {
        let q = Quantity::Size;
        let (v, num, unit) = number_and_unit(q, text)?;
        let (head, b) = match unit.strip_suffix('B') {
            Some(h) => (h, true),
            None => (unit, false),
        };
        if !b {
            if let Some(prefix) = unit.strip_suffix('b') {
                if prefix.is_empty() || decimal_prefix(prefix).is_some() {
                    let prefix = prefix.to_string();
                    let number = num.to_string();
                    return Err(UnitError::new(
                        q,
                        text,
                        Problem::AmbiguousB { number, prefix },
                    ));
                }
            }
        }
        let mult = match head.strip_suffix('i') {
            // `KiB`: binary prefixes need their `B`, as IEC writes them.
            Some(p) if b => binary_prefix(p),
            Some(_) => None,
            None => decimal_prefix(head),
        };
        let Some(mult) = mult else {
            return Err(UnitError::new(
                q,
                text,
                Problem::UnknownUnit(unit.to_string()),
            ));
        };
        let n = (v * mult).round();
        // `u64::MAX as f64` rounds up to 2^64, which itself does not fit.
        if n >= u64::MAX as f64 {
            return Err(UnitError::new(q, text, Problem::TooLarge));
        }
        Ok(Bytes(n as u64))
    }
}

/// The length of one duration unit in picoseconds: exact in an `f64` for
/// every unit, so a whole number of a unit converts without rounding.
fn unit_ps(unit: &str) -> Option<f64> {
    Some(match unit {
        "ps" => 1.0,
        "ns" => 1e3,
        "us" | "µs" => 1e6,
        "ms" => 1e9,
        "s" => 1e12,
        "min" | "m" => 60e12,
        "h" => 3600e12,
        _ => return None,
    })
}

/// Parses a duration to whole ticks of `tick_ps` picoseconds each (1000 for
/// nanoseconds, 1 for the simulator's picoseconds), rounded to nearest.
///
/// One function for both clocks so that the simulator reads `131.2us` to the
/// picosecond with the same grammar that gives `DurationNs` its nanoseconds.
pub fn duration_ticks(text: &str, tick_ps: u64) -> Result<u64, UnitError> {
    let q = Quantity::Duration;
    let (v, _, unit) = number_and_unit(q, text)?;
    if unit.is_empty() {
        return Err(UnitError::new(q, text, Problem::NoUnit));
    }
    let Some(ps) = unit_ps(unit) else {
        return Err(UnitError::new(
            q,
            text,
            Problem::UnknownUnit(unit.to_string()),
        ));
    };
    let ticks = (v * ps / tick_ps.max(1) as f64).round();
    if ticks >= u64::MAX as f64 {
        return Err(UnitError::new(q, text, Problem::TooLarge));
    }
    Ok(ticks as u64)
}

impl FromStr for DurationNs {
    type Err = UnitError;

    /// `10ms`, `1.5s`, `500us`, `250ns`, `5min`, `1h` (rounded to the
    /// nanosecond).  A bare number is refused: `needs a unit`.
    fn from_str(text: &str) -> Result<Self, UnitError> {
        let ns = duration_ticks(text, 1_000)?;
        let ns = i64::try_from(ns)
            .map_err(|_| UnitError::new(Quantity::Duration, text, Problem::TooLarge))?;
        Ok(DurationNs::from_ns(ns))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rate(s: &str) -> f64 {
        s.parse::<BitRate>()
            .unwrap_or_else(|e| panic!("{s}: {e}"))
            .bps()
    }
    fn size(s: &str) -> u64 {
        s.parse::<Bytes>()
            .unwrap_or_else(|e| panic!("{s}: {e}"))
            .get()
    }
    fn ns(s: &str) -> i64 {
        s.parse::<DurationNs>()
            .unwrap_or_else(|e| panic!("{s}: {e}"))
            .ns()
    }
    fn err<T: FromStr<Err = UnitError> + fmt::Debug>(s: &str) -> UnitError {
        s.parse::<T>().expect_err(s)
    }

    #[test]
    fn numbers_split_from_units() {
        assert_eq!(split_unit("12.5Mbit"), ("12.5", "Mbit"));
        assert_eq!(split_unit("1e9"), ("1e9", ""));
        assert_eq!(split_unit("2.5e-3s"), ("2.5e-3", "s"));
        assert_eq!(split_unit("64KiB"), ("64", "KiB"));
        assert_eq!(split_unit("-5M"), ("-5", "M"));
        assert_eq!(split_unit("M"), ("", "M"));
        assert_eq!(split_unit("10 ms"), ("10", "ms"));
    }

    #[test]
    fn rates_are_bits_per_second_in_powers_of_1000() {
        assert_eq!(rate("100M"), 100e6);
        assert_eq!(rate("100Mbit"), 100e6);
        assert_eq!(rate("100Mbps"), 100e6);
        assert_eq!(rate("100Mb/s"), 100e6);
        assert_eq!(rate("100Mbit/s"), 100e6);
        assert_eq!(rate("100Mb"), 100e6);
        assert_eq!(rate("1.5G"), 1.5e9);
        assert_eq!(rate("300mbit"), 300e6);
        assert_eq!(rate("1gbit"), 1e9);
        assert_eq!(rate("10kbps"), 10e3);
        assert_eq!(rate("10Kbit"), 10e3);
        assert_eq!(rate("2T"), 2e12);
        assert_eq!(rate("800000"), 800e3);
        assert_eq!(rate("1e9"), 1e9);
        assert_eq!(rate(" 50 M "), 50e6);
        assert_eq!(rate("0"), 0.0);
    }

    #[test]
    fn bad_rates_say_why_and_what_is_accepted() {
        let e = err::<BitRate>("50MB");
        assert_eq!(e.problem, Problem::BytesInRate);
        assert!(e.to_string().contains("bytes"), "{e}");
        assert_eq!(err::<BitRate>("-1M").problem, Problem::Negative);
        assert_eq!(err::<BitRate>("fast").problem, Problem::NotANumber);
        assert_eq!(err::<BitRate>("M").problem, Problem::NotANumber);
        assert_eq!(err::<BitRate>("1..5G").problem, Problem::NotANumber);
        assert_eq!(err::<BitRate>("NaN").problem, Problem::NotANumber);
        assert_eq!(err::<BitRate>("inf").problem, Problem::NotANumber);
        assert_eq!(err::<BitRate>("1e999").problem, Problem::TooLarge);
        assert_eq!(err::<BitRate>("1e300T").problem, Problem::TooLarge);
        assert_eq!(
            err::<BitRate>("50X").problem,
            Problem::UnknownUnit("X".into())
        );
        assert_eq!(
            err::<BitRate>("5Mbits").problem,
            Problem::UnknownUnit("Mbits".into())
        );
        let line = err::<BitRate>("50X").to_string();
        assert_eq!(
            line,
            "bad rate `50X`: unknown unit `X`; write bit/s with an optional k, M, G or T \
             (×1000) and bit, bps or b/s, as in 100M, 1.5G, 300mbit or 800000"
        );
        assert!(!line.contains('\n'));
    }

    #[test]
    fn sizes_take_kb_as_1000_and_kib_as_1024() {
        assert_eq!(size("1500"), 1500);
        assert_eq!(size("1500B"), 1500);
        assert_eq!(size("64kB"), 64_000);
        assert_eq!(size("64KB"), 64_000);
        assert_eq!(size("12k"), 12_000);
        assert_eq!(size("12K"), 12_000);
        assert_eq!(size("4MB"), 4_000_000);
        assert_eq!(size("4M"), 4_000_000);
        assert_eq!(size("1G"), 1_000_000_000);
        assert_eq!(size("1GB"), 1_000_000_000);
        assert_eq!(size("1g"), 1_000_000_000);
        assert_eq!(size("2TB"), 2_000_000_000_000);
        assert_eq!(size("256KiB"), 262_144);
        assert_eq!(size("256kiB"), 262_144);
        assert_eq!(size("8MiB"), 8 * 1024 * 1024);
        assert_eq!(size("1GiB"), 1 << 30);
        assert_eq!(size("1TiB"), 1 << 40);
        assert_eq!(size("6250KB"), 6_250_000);
        assert_eq!(size("2.5M"), 2_500_000);
        assert_eq!(size("0"), 0);
    }

    #[test]
    fn a_lowercase_b_in_a_size_is_refused_with_both_spellings() {
        let e = err::<Bytes>("256kb");
        assert!(matches!(e.problem, Problem::AmbiguousB { .. }));
        assert_eq!(
            e.to_string(),
            "bad size `256kb`: a lowercase `b` could mean bits; write 256kB (×1000) or \
             256KiB (×1024) for bytes"
        );
        assert!(err::<Bytes>("8mb")
            .to_string()
            .contains("8MB (×1000) or 8MiB"));
        assert!(err::<Bytes>("1Gb").to_string().contains("1GiB"));
        assert!(err::<Bytes>("1500b").to_string().contains("1500 or 1500B"));
        assert_eq!(
            err::<Bytes>("1Kib").problem,
            Problem::UnknownUnit("Kib".into())
        );
        assert_eq!(
            err::<Bytes>("1Ki").problem,
            Problem::UnknownUnit("Ki".into())
        );
        assert_eq!(
            err::<Bytes>("1iB").problem,
            Problem::UnknownUnit("iB".into())
        );
        assert_eq!(err::<Bytes>("-1").problem, Problem::Negative);
        assert_eq!(err::<Bytes>("lots").problem, Problem::NotANumber);
        assert_eq!(err::<Bytes>("1e20").problem, Problem::TooLarge);
        assert_eq!(err::<Bytes>("20000000TB").problem, Problem::TooLarge);
    }

    #[test]
    fn durations_need_a_unit_and_take_minutes_and_hours() {
        assert_eq!(ns("10ms"), 10_000_000);
        assert_eq!(ns("1.5s"), 1_500_000_000);
        assert_eq!(ns("500us"), 500_000);
        assert_eq!(ns("500µs"), 500_000);
        assert_eq!(ns("250ns"), 250);
        assert_eq!(ns("131.2us"), 131_200);
        assert_eq!(ns("5min"), 300_000_000_000);
        assert_eq!(ns("5m"), 300_000_000_000);
        assert_eq!(ns("1h"), 3_600_000_000_000);
        assert_eq!(ns("0ns"), 0);
        assert_eq!(ns("2.5e-3s"), 2_500_000);
        assert_eq!(ns("1500ps"), 2);
        let e = err::<DurationNs>("10");
        assert_eq!(e.problem, Problem::NoUnit);
        assert_eq!(
            e.to_string(),
            "bad duration `10`: needs a unit: ns, us, ms, s, min or h"
        );
        assert_eq!(err::<DurationNs>("-1s").problem, Problem::Negative);
        assert_eq!(err::<DurationNs>("soon").problem, Problem::NotANumber);
        assert_eq!(
            err::<DurationNs>("3d").problem,
            Problem::UnknownUnit("d".into())
        );
        assert_eq!(
            err::<DurationNs>("1S").problem,
            Problem::UnknownUnit("S".into())
        );
        assert_eq!(err::<DurationNs>("1e10s").problem, Problem::TooLarge);
        assert_eq!(err::<DurationNs>("1e999s").problem, Problem::TooLarge);
    }

    #[test]
    fn the_simulators_picoseconds_use_the_same_grammar() {
        assert_eq!(duration_ticks("131.2us", 1).unwrap(), 131_200_000);
        assert_eq!(duration_ticks("500ps", 1).unwrap(), 500);
        assert_eq!(duration_ticks("1ms", 1).unwrap(), 1_000_000_000);
        assert_eq!(duration_ticks("2min", 1).unwrap(), 120_000_000_000_000);
        assert_eq!(duration_ticks("5", 1).unwrap_err().problem, Problem::NoUnit);
        assert_eq!(
            duration_ticks("1e8s", 1).unwrap_err().problem,
            Problem::TooLarge
        );
    }

    /// What `Display` writes, the grammar reads back (to the precision shown).
    #[test]
    fn display_round_trips() {
        for r in [
            BitRate::from_bps(512.0),
            BitRate::from_kbps(12.5),
            BitRate::from_mbps(940.12),
            BitRate::from_gbps(9.41),
        ] {
            let shown = r.to_string();
            let back: BitRate = shown.parse().unwrap();
            assert!((back.bps() - r.bps()).abs() <= r.bps() * 1e-9, "{shown}");
        }
        for d in [
            DurationNs::from_ns(250),
            DurationNs::from_us(12),
            DurationNs::from_ms(1500),
            DurationNs::from_secs(90),
        ] {
            let shown = d.to_string();
            assert_eq!(shown.parse::<DurationNs>().unwrap(), d, "{shown}");
        }
        for (b, exact) in [
            (Bytes(1000), true),
            (Bytes(2048), true),
            (Bytes(1 << 20), true),
        ] {
            let shown = b.to_string();
            let back: Bytes = shown.parse().unwrap();
            assert_eq!(back == b, exact, "{shown}");
        }
    }
}
