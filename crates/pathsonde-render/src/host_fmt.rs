//! How a host's facts are printed: a probed value or why it is unknown, and
//! a byte count in the largest binary unit that fits.  Shared by `pathsonde
//! host` and the host section of `measure`'s report, so both say it alike.

use pathsonde_net::host::Known;
use std::fmt::Display;

/// A probed fact through `f`, or `unknown (why)` when the probe could not
/// read it.
pub fn show<T>(k: &Known<T>, f: impl Fn(&T) -> String) -> String {
    match k {
        Known::Value(v) => f(v),
        Known::Unavailable { unavailable } => format!("unknown ({unavailable})"),
    }
}

/// A probed fact by its `Display`, or `unknown (why)`.
pub fn plain<T: Display>(k: &Known<T>) -> String {
    show(k, |v| v.to_string())
}

/// A byte count as GiB, MiB or KiB (with the exact count below a MiB).
pub fn bytes(b: &u64) -> String {
    if *b >= 1 << 30 {
        format!("{:.1} GiB", *b as f64 / (1u64 << 30) as f64)
    } else if *b >= 1 << 20 {
        format!("{:.1} MiB", *b as f64 / (1u64 << 20) as f64)
    } else if *b >= 1 << 10 {
        format!("{:.1} KiB ({b} bytes)", *b as f64 / 1024.0)
    } else {
        format!("{b} bytes")
    }
}
