//! Every method by name, built from the settings a runner knows.
//!
//! The CLI (`abw --method`, `lab run --method`, `compare`), the lab and the
//! simulator all build methods here, so a new method becomes available to
//! all of them by joining [`NAMES`] and [`build`].

use crate::method::Method;
use crate::methods::burst::{Burst, BurstConfig};
use crate::methods::chirp::{Chirp, ChirpConfig};
use crate::methods::fac2::{Fac2, Fac2Config};
use crate::methods::igi::{Igi, IgiConfig, IgiReport};
use crate::methods::pair::{Pair, PairConfig};
use crate::methods::slops::{Slops, SlopsConfig};
use crate::units::{BitRate, Bytes, DurationNs};

/// The methods [`build`] knows, in the order reports list them.
pub const NAMES: &[&str] = &["fac2", "slops", "pair", "igi", "ptr", "chirp", "burst"];

/// What a runner can tell a method before it starts: only what a user on a
/// real path could know.  Every runner (abw, the lab, `compare`, the
/// simulator) builds methods from these and records them with the result.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct MethodSettings {
    /// The highest rate the method may probe at (and its first train's rate
    /// for methods that start high).
    pub max_rate: BitRate,
    /// Probe packet size (IP datagram bytes).
    pub packet_size: Bytes,
    /// Resolution of the clock that will stamp the probes.
    pub clock_resolution: DurationNs,
    /// The tight link's capacity as the *user* stated it with
    /// `--known-capacity`, and nothing else: never a lab's tbf rate, a
    /// scenario's link rate or any other C the runner happens to know.
    /// Methods run blind by default, exactly as `pathsonde abw HOST` does on
    /// a real path, so that lab and simulator figures measure what a user
    /// gets; a runner that filled this from its own ground truth would hand
    /// the methods part of the answer (issue 15).  When given, pair and
    /// IGI/PTR skip their capacity probe, chirp cuts chirps at it, and FAC²
    /// uses it at high load.
    pub known_capacity: Option<BitRate>,
}

impl Default for MethodSettings {
    fn default() -> Self {
        MethodSettings {
            max_rate: BitRate::from_gbps(1.0),
            packet_size: Bytes(1500),
            clock_resolution: DurationNs::from_ns(1),
            known_capacity: None,
        }
    }
}

/// Why [`build`] gave no method.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown method '{name}' (known: {})", NAMES.join(", "))]
pub struct UnknownMethod {
    pub name: String,
}

/// The method called `name`, configured from `settings`.
pub fn build(
    name: &str,
    settings: &MethodSettings,
) -> Result<Box<dyn Method + Send>, UnknownMethod> {
    match name {
        "fac2" => Ok(Box::new(Fac2::new(Fac2Config {
            max_rate: settings.max_rate,
            packet_size: settings.packet_size,
            clock_resolution: settings.clock_resolution,
            known_capacity: settings.known_capacity,
            ..Fac2Config::default()
        }))),
        "slops" => Ok(Box::new(Slops::new(SlopsConfig {
            max_rate: settings.max_rate,
            packet_size: settings.packet_size,
            ..SlopsConfig::default()
        }))),
        "pair" => Ok(Box::new(Pair::new(PairConfig {
            packet_size: settings.packet_size,
            capacity: settings.known_capacity,
            ..PairConfig::default()
        }))),
        "igi" | "ptr" => Ok(Box::new(Igi::new(IgiConfig {
            report: if name == "igi" {
                IgiReport::Igi
            } else {
                IgiReport::Ptr
            },
            packet_size: settings.packet_size,
            capacity: settings.known_capacity,
            ..IgiConfig::default()
        }))),
        "chirp" => Ok(Box::new(Chirp::new(ChirpConfig {
            max_rate: settings.max_rate,
            packet_size: settings.packet_size,
            capacity: settings.known_capacity,
            ..ChirpConfig::default()
        }))),
        "burst" => Ok(Box::new(Burst::new(BurstConfig {
            max_rate: settings.max_rate,
            packet_size: settings.packet_size,
            ..BurstConfig::default()
        }))),
        other => Err(UnknownMethod {
            name: other.to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_name_builds_a_method_of_that_name() {
        for name in NAMES {
            let m = build(name, &MethodSettings::default()).unwrap();
            assert_eq!(m.name(), *name);
        }
        let err = build("nope", &MethodSettings::default()).err().unwrap();
        assert!(err.to_string().contains("fac2"), "{err}");
    }
}
