//! Parsing of values people type: rates with unit suffixes, byte sizes.

use pathsonde_core::{BitRate, Bytes, DurationNs};

/// Parses a bit rate with the same spellings as cross-traffic specs
/// (`pathsonde_core::traffic::parse_rate`): `100M`, `2.5G`, `800000`,
/// `300mbit`, `10kbps`.  Options need a positive rate.
pub fn parse_rate(s: &str) -> Result<BitRate, String> {
    let r = pathsonde_core::traffic::parse_rate(s).map_err(|e| e.to_string())?;
    if !r.is_positive() {
        return Err(format!("rate '{s}' must be positive"));
    }
    Ok(r)
}

/// Parses a byte count with an optional suffix as tc spells it: `256kb`,
/// `1mb` (powers of 1024), or a plain number of bytes.
pub fn parse_bytes(s: &str) -> Result<Bytes, String> {
    let t = s.trim().to_ascii_lowercase();
    let (num, mult) = if let Some(n) = t.strip_suffix("kb").or_else(|| t.strip_suffix('k')) {
        (n, 1024.0)
    } else if let Some(n) = t.strip_suffix("mb").or_else(|| t.strip_suffix('m')) {
        (n, 1024.0 * 1024.0)
    } else {
        (t.strip_suffix('b').unwrap_or(&t), 1.0)
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a size (examples: 256kb, 1mb, 150000)"))?;
    if !(v.is_finite() && v > 0.0 && v * mult <= 1e12) {
        return Err(format!("size '{s}' out of range"));
    }
    Ok(Bytes((v * mult).round() as u64))
}

/// Parses a duration: `10ms`, `1.5s`, `500us`, `250ns`.
pub fn parse_duration(s: &str) -> Result<DurationNs, String> {
    let t = s.trim();
    let (num, scale) = if let Some(n) = t.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = t.strip_suffix("us").or_else(|| t.strip_suffix("µs")) {
        (n, 1e-6)
    } else if let Some(n) = t.strip_suffix("ns") {
        (n, 1e-9)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1.0)
    } else {
        return Err(format!("'{s}' needs a unit: ns, us, ms or s"));
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a duration (examples: 10ms, 1.5s)"))?;
    if !(v.is_finite() && v >= 0.0 && v * scale <= 86_400.0) {
        return Err(format!("duration '{s}' out of range"));
    }
    Ok(DurationNs::from_secs_f64(v * scale))
}

/// Parses an IP packet size in bytes, within what one UDP datagram on
/// Ethernet-class links can be.
pub fn parse_packet_size(s: &str) -> Result<Bytes, String> {
    let v: u64 = s
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a whole number of bytes"))?;
    if !(100..=9000).contains(&v) {
        return Err(format!("packet size {v} outside 100..=9000 bytes"));
    }
    Ok(Bytes(v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_with_suffixes() {
        assert_eq!(parse_rate("100M").unwrap().bps(), 100e6);
        assert_eq!(parse_rate("2.5G").unwrap().bps(), 2.5e9);
        assert_eq!(parse_rate("800000").unwrap().bps(), 800000.0);
        assert_eq!(parse_rate("10kbps").unwrap().bps(), 10e3);
        assert!(parse_rate("fast").is_err());
        assert!(parse_rate("-1M").is_err());
        assert!(parse_rate("0").is_err());
    }

    #[test]
    fn tc_spellings() {
        assert_eq!(parse_rate("300mbit").unwrap().bps(), 300e6);
        assert_eq!(parse_rate("1gbit").unwrap().bps(), 1e9);
        assert_eq!(parse_bytes("256kb").unwrap(), Bytes(262_144));
        assert_eq!(parse_bytes("150000").unwrap(), Bytes(150_000));
        assert_eq!(parse_bytes("1mb").unwrap(), Bytes(1_048_576));
        assert!(parse_bytes("lots").is_err());
        assert_eq!(parse_duration("10ms").unwrap(), DurationNs::from_ms(10));
        assert_eq!(parse_duration("1.5s").unwrap(), DurationNs::from_ms(1500));
        assert!(parse_duration("10").is_err());
        assert!(parse_duration("-1s").is_err());
    }

    #[test]
    fn packet_sizes_are_bounded() {
        assert_eq!(parse_packet_size("1500").unwrap(), Bytes(1500));
        assert!(parse_packet_size("20").is_err());
        assert!(parse_packet_size("65536").is_err());
    }
}
