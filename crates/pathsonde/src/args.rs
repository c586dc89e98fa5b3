//! Parsing of values people type: rates with unit suffixes, byte sizes.

use pathsonde_core::{BitRate, Bytes};

/// Parses a bit rate: a number with an optional suffix k, M, G or T (bits per
/// second, powers of 1000), e.g. `100M`, `2.5G`, `800000`.
pub fn parse_rate(s: &str) -> Result<BitRate, String> {
    let t = s.trim();
    let t = t
        .strip_suffix("bps")
        .or_else(|| t.strip_suffix("b/s"))
        .unwrap_or(t);
    let (num, mult) = match t.chars().last() {
        Some('k' | 'K') => (&t[..t.len() - 1], 1e3),
        Some('m' | 'M') => (&t[..t.len() - 1], 1e6),
        Some('g' | 'G') => (&t[..t.len() - 1], 1e9),
        Some('t' | 'T') => (&t[..t.len() - 1], 1e12),
        _ => (t, 1.0),
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a rate (examples: 100M, 2.5G, 800000)"))?;
    if !(v.is_finite() && v > 0.0) {
        return Err(format!("rate '{s}' must be positive"));
    }
    Ok(BitRate::from_bps(v * mult))
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
    fn packet_sizes_are_bounded() {
        assert_eq!(parse_packet_size("1500").unwrap(), Bytes(1500));
        assert!(parse_packet_size("20").is_err());
        assert!(parse_packet_size("65536").is_err());
    }
}
