//! Checks on values people type, beyond what core's grammar reads.
//!
//! Rates, sizes and durations are read by `pathsonde_core`'s `FromStr` impls
//! (`docs/units.md`); a flag that takes a duration names `DurationNs` and
//! clap uses that grammar directly.  The functions here add only the range a
//! flag needs (a rate one can send at, a packet that fits a datagram), so that
//! no flag spells a quantity differently from a scenario file or a spec.

use pathsonde_core::{BitRate, Bytes, DurationNs};

/// A rate in core's grammar (`100M`, `1.5G`, `300mbit`, `800000`) that one
/// can send at: above zero.
pub fn positive_rate(s: &str) -> Result<BitRate, String> {
    let r: BitRate = s.parse().map_err(|e| format!("{e}"))?;
    if !r.is_positive() {
        return Err(format!("rate '{s}' must be positive"));
    }
    Ok(r)
}

/// A size in core's grammar (`1500`, `64kB`, `256KiB`, `8MiB`) of at least
/// one byte: the flags that take one bound a buffer or a burst.
pub fn positive_size(s: &str) -> Result<Bytes, String> {
    let b: Bytes = s.parse().map_err(|e| format!("{e}"))?;
    if b.get() == 0 {
        return Err(format!("size '{s}' must be at least one byte"));
    }
    Ok(b)
}

/// A precision: a band half-width relative to the estimate, as a percentage
/// (`2%`, `0.5%`) or a bare fraction below one (`0.02`); between 0.1 % and
/// 50 %.  A bare `2` is refused rather than read as 200 %.
pub fn precision(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let v = match t.strip_suffix('%') {
        Some(pct) => pct.trim().parse::<f64>().map(|p| p / 100.0),
        None => t.parse::<f64>(),
    }
    .map_err(|_| format!("precision '{s}' is not a percentage (e.g. 2%)"))?;
    if t.ends_with('%') || v < 1.0 {
        if (0.001..=0.5).contains(&v) {
            return Ok(v);
        }
        return Err(format!("precision '{s}' must be between 0.1% and 50%"));
    }
    Err(format!("precision '{s}': write a percentage such as {v}%"))
}

/// A duration in core's grammar (`10s`, `250ms`, `5min`), where a bare
/// number means seconds, as iperf3's `-t 10` and `--timeout 3` do: the one
/// place a flag may leave the unit out (`docs/units.md`).  Never negative.
pub fn seconds(s: &str) -> Result<DurationNs, String> {
    let d = match s.trim().parse::<f64>() {
        Ok(secs) if secs.is_finite() && secs <= 1e9 => DurationNs::from_secs_f64(secs),
        Ok(_) => return Err(format!("duration '{s}' is out of range")),
        Err(_) => s.parse::<DurationNs>().map_err(|e| format!("{e}"))?,
    };
    if d.ns() < 0 {
        return Err(format!("duration '{s}' must not be negative"));
    }
    Ok(d)
}

/// An IP packet size in core's grammar, within what one UDP datagram on
/// Ethernet-class links can be.
pub fn packet_size(s: &str) -> Result<Bytes, String> {
    let b: Bytes = s.parse().map_err(|e| format!("{e}"))?;
    if !(100..=9000).contains(&b.get()) {
        return Err(format!("packet size {} outside 100..=9000 bytes", b.get()));
    }
    Ok(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn precisions_are_percentages_or_fractions() {
        assert_eq!(precision("2%").unwrap(), 0.02);
        assert_eq!(precision(" 0.5 %").unwrap(), 0.005);
        assert_eq!(precision("0.02").unwrap(), 0.02);
        for bad in ["2", "0%", "60%", "x%", "", "-1%", "0.0001"] {
            assert!(precision(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn durations_take_a_unit_or_mean_seconds() {
        assert_eq!(seconds("2").unwrap(), DurationNs::from_secs(2));
        assert_eq!(seconds("2.5").unwrap(), DurationNs::from_ms(2500));
        assert_eq!(seconds("3s").unwrap(), DurationNs::from_secs(3));
        assert_eq!(seconds("250ms").unwrap(), DurationNs::from_ms(250));
        assert_eq!(seconds("5min").unwrap(), DurationNs::from_secs(300));
        assert!(seconds("-1").is_err());
        assert!(seconds("-1s").is_err());
        assert!(seconds("soon").is_err());
        assert!(seconds("inf").is_err());
    }

    #[test]
    fn rates_must_be_positive() {
        assert_eq!(positive_rate("100M").unwrap().bps(), 100e6);
        assert_eq!(positive_rate("300mbit").unwrap().bps(), 300e6);
        assert_eq!(positive_rate("800000").unwrap().bps(), 800000.0);
        assert!(positive_rate("fast").is_err());
        assert!(positive_rate("-1M").is_err());
        assert!(positive_rate("0").is_err());
    }

    #[test]
    fn sizes_use_the_documented_prefixes() {
        assert_eq!(positive_size("256KiB").unwrap(), Bytes(262_144));
        assert_eq!(positive_size("256kB").unwrap(), Bytes(256_000));
        assert_eq!(positive_size("8MiB").unwrap(), Bytes(8 << 20));
        assert_eq!(positive_size("150000").unwrap(), Bytes(150_000));
        // `serve`'s limits, which always read k, M, G as powers of 1000.
        assert_eq!(positive_size("64k").unwrap(), Bytes(64_000));
        assert_eq!(positive_size("1G").unwrap(), Bytes(1_000_000_000));
        assert_eq!(positive_size("2.5MB").unwrap(), Bytes(2_500_000));
        assert!(positive_size("-1k").is_err());
        let e = positive_size("256kb").unwrap_err();
        assert!(e.contains("256kB") && e.contains("256KiB"), "{e}");
        assert!(positive_size("0").is_err());
        assert!(positive_size("lots").is_err());
    }

    #[test]
    fn packet_sizes_are_bounded() {
        assert_eq!(packet_size("1500").unwrap(), Bytes(1500));
        assert_eq!(packet_size("9000B").unwrap(), Bytes(9000));
        assert!(packet_size("20").is_err());
        assert!(packet_size("65536").is_err());
    }
}

/// `--json` and `--json-lines`, flattened into every command that prints a
/// result, and only there: a command that prints nothing of its own (serve,
/// lab down, man) does not offer them.
#[derive(clap::Args, Debug, Clone, Copy, Default)]
pub struct JsonFlags {
    /// Print one JSON object instead of the text report.
    #[arg(id = "json", long = "json", short = 'J')]
    pub object: bool,
    /// Stream {"type": ..., "data": ...} events, one JSON object per line
    /// (progress, each train, the result; docs/archive.md).  iperf3's
    /// `--json-stream` is the same flag.
    #[arg(id = "json_lines", long = "json-lines", visible_alias = "json-stream")]
    pub lines: bool,
}

impl JsonFlags {
    /// The output mode these flags ask for (`--json-lines` wins over `--json`).
    pub fn mode(self) -> crate::output::Mode {
        if self.lines {
            crate::output::Mode::JsonLines
        } else if self.object {
            crate::output::Mode::Json
        } else {
            crate::output::Mode::Text
        }
    }
}

/// Where a command that archives its result keeps it: flattened into the
/// commands that save a run (abw, demo, lab run, measure, mbs, tcp, udp,
/// host, hops, capacity, agent), and only there.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct SaveFlags {
    /// The results archive to use: a SQLite file or a postgresql:// URL
    /// without a password (default: $PATHSONDE_ARCHIVE, else
    /// $XDG_DATA_HOME/pathsonde/archive.sqlite; docs/archive.md, docs/fleet.md).
    #[arg(long, value_name = "PATH|URL")]
    pub archive: Option<std::path::PathBuf>,
    /// Do not archive this run's result.
    #[arg(long)]
    pub no_save: bool,
    /// Archive the result but not its raw data (every probe's stamps).
    #[arg(long)]
    pub no_raw: bool,
}

/// Which archive a command that reads runs (history, show, export, rm,
/// plot, report) reads.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct ArchiveFlag {
    /// The results archive to read: a SQLite file or a postgresql:// URL
    /// (default: $PATHSONDE_ARCHIVE, else
    /// $XDG_DATA_HOME/pathsonde/archive.sqlite; docs/archive.md, docs/fleet.md).
    #[arg(long, value_name = "PATH|URL")]
    pub archive: Option<std::path::PathBuf>,
}

impl ArchiveFlag {
    /// As the archive's settings: reading never saves.
    pub fn settings(&self) -> SaveFlags {
        SaveFlags {
            archive: self.archive.clone(),
            ..SaveFlags::default()
        }
    }
}
