//! Every method by name, built from the settings a runner knows.
//!
//! The CLI (`abw --method`, `lab run --method`, `compare`), the lab and the
//! simulator all build methods here, so a new method becomes available to
//! all of them by joining [`NAMES`], [`build`] and [`METHODS`] (the facts
//! reports state about it, such as its verdict under coalescing).

use crate::method::Method;
use crate::methods::burst::{Burst, BurstConfig};
use crate::methods::chirp::{Chirp, ChirpConfig};
use crate::methods::fac2::{Fac2, Fac2Config};
use crate::methods::igi::{Igi, IgiConfig, IgiReport};
use crate::methods::pair::{Pair, PairConfig};
use crate::methods::slops::{Slops, SlopsConfig};
use crate::methods::trust::Trust;
use crate::units::{BitRate, Bytes, DurationNs};

pub use crate::method_name::{MethodName, UnknownMethod};

/// The facts reports state about `name`.
pub fn info(name: MethodName) -> &'static MethodInfo {
    &METHODS[name as usize]
}

/// What the registry knows of each method beyond how to build it: facts of
/// its principle that reports state, kept with the method rather than
/// matched on its name where a report is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MethodInfo {
    pub name: MethodName,
    /// Whether its estimate stands when the receiver coalesces interrupts
    /// ([`crate::methods::trust`]).
    pub under_coalescing: Trust,
}

/// Every method's facts, in [`MethodName::ALL`] order (indexed by it).
pub(crate) const METHODS: &[MethodInfo] = &[
    MethodInfo {
        name: MethodName::Fac2,
        under_coalescing: Trust::Stands(
            "rates come from first-to-last dispersion of long trains of cars, so a bunch boundary moves a train's span by at most one coalescing delay",
        ),
    },
    MethodInfo {
        name: MethodName::Slops,
        under_coalescing: Trust::Stands(
            "the one-way-delay trend is read from medians of packet groups over long streams, which bunching shifts together",
        ),
    },
    MethodInfo {
        name: MethodName::Pair,
        under_coalescing: Trust::Unreliable(
            "each pair's output gap is one gap, which the coalescing timer sets (the comparison paper's abing and Spruce failure)",
        ),
    },
    MethodInfo {
        name: MethodName::Igi,
        under_coalescing: Trust::Unreliable(
            "the gap increases are single gaps, which the coalescing timer sets",
        ),
    },
    MethodInfo {
        name: MethodName::Ptr,
        under_coalescing: Trust::Stands(
            "the train's rate is taken over the whole train, not its single gaps",
        ),
    },
    MethodInfo {
        name: MethodName::Chirp,
        under_coalescing: Trust::Unreliable(
            "queueing-delay excursions are read packet by packet inside one chirp, and bunching flattens them",
        ),
    },
    MethodInfo {
        name: MethodName::Burst,
        under_coalescing: Trust::Stands(
            "the ICIM principle: each burst's rate comes from its whole length, and the interval-increase test compares bunches, not single gaps",
        ),
    },
];

/// The verdict under coalescing for the method called `name` (unreliable,
/// saying so, for a name the registry does not know).
pub fn under_coalescing(name: &str) -> Trust {
    name.parse::<MethodName>().map_or(
        Trust::Unreliable("no analysis of this method under coalescing"),
        |m| info(m).under_coalescing,
    )
}

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
    /// The band half-width to reach, relative to A (`--precision 2%` is
    /// 0.02): FAC² stops when its 95 % band is this narrow, SLoPS when its
    /// bracket is twice this wide.  `None`: each method's own rule (FAC²
    /// ±8 %, SLoPS ±2 %).  Other methods do not aim at a band width.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub precision: Option<f64>,
    /// The most probe bytes to spend (`--max-bytes`): FAC²'s budget (its
    /// train cap and probe-time budget grow with it), SLoPS's fleets.
    /// `None`: each method's own (FAC² 2 MB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<Bytes>,
}

/// The band half-width `name` aims at by its own rule, relative to A, for
/// the methods that aim at one (reports compare `--precision` with it).
pub fn default_precision(name: MethodName) -> Option<f64> {
    match name {
        MethodName::Fac2 => Some(Fac2Config::default().max_relative_band),
        MethodName::Slops => Some(SlopsConfig::default().resolution / 2.0),
        _ => None,
    }
}

/// FAC²'s default budget, which its train cap and probe time are sized for.
const FAC2_DEFAULT_BYTES: f64 = 2_000_000.0;

/// FAC² configured from `settings`: the precision is its stopping band;
/// a larger byte budget brings a proportionally larger train cap and
/// probe-time budget, so the bytes, not a count, decide when it stops.
fn fac2_config(settings: &MethodSettings) -> Fac2Config {
    let d = Fac2Config::default();
    let scale = settings
        .max_bytes
        .map_or(1.0, |b| (b.get() as f64 / FAC2_DEFAULT_BYTES).max(1.0));
    Fac2Config {
        max_rate: settings.max_rate,
        packet_size: settings.packet_size,
        clock_resolution: settings.clock_resolution,
        known_capacity: settings.known_capacity,
        max_relative_band: settings.precision.unwrap_or(d.max_relative_band),
        max_bytes: settings.max_bytes.unwrap_or(d.max_bytes),
        max_trains: ((f64::from(d.max_trains) * scale).ceil() as u32).min(2_000),
        max_probe_time: DurationNs::from_ns((d.max_probe_time.ns() as f64 * scale) as i64),
        ..d
    }
}

/// SLoPS configured from `settings`: its bracket's resolution is twice the
/// precision (a bracket of width 2p has a half-width p), the grey region's
/// 1.5 times that as by default; the byte budget caps its fleets.
fn slops_config(settings: &MethodSettings) -> SlopsConfig {
    let d = SlopsConfig::default();
    let (resolution, grey_resolution) = match settings.precision {
        Some(p) => (2.0 * p, 3.0 * p),
        None => (d.resolution, d.grey_resolution),
    };
    SlopsConfig {
        max_rate: settings.max_rate,
        packet_size: settings.packet_size,
        resolution,
        grey_resolution,
        max_bytes: settings.max_bytes,
        ..d
    }
}

impl Default for MethodSettings {
    fn default() -> Self {
        MethodSettings {
            max_rate: BitRate::from_gbps(1.0),
            packet_size: Bytes(1500),
            clock_resolution: DurationNs::from_ns(1),
            known_capacity: None,
            precision: None,
            max_bytes: None,
        }
    }
}

/// The method called `name`, configured from `settings`.
pub fn build(name: MethodName, settings: &MethodSettings) -> Box<dyn Method + Send> {
    match name {
        MethodName::Fac2 => Box::new(Fac2::new(fac2_config(settings))),
        MethodName::Slops => Box::new(Slops::new(slops_config(settings))),
        MethodName::Pair => Box::new(Pair::new(PairConfig {
            packet_size: settings.packet_size,
            capacity: settings.known_capacity,
            ..PairConfig::default()
        })),
        MethodName::Igi | MethodName::Ptr => Box::new(Igi::new(IgiConfig {
            report: if name == MethodName::Igi {
                IgiReport::Igi
            } else {
                IgiReport::Ptr
            },
            packet_size: settings.packet_size,
            capacity: settings.known_capacity,
            ..IgiConfig::default()
        })),
        MethodName::Chirp => Box::new(Chirp::new(ChirpConfig {
            max_rate: settings.max_rate,
            packet_size: settings.packet_size,
            capacity: settings.known_capacity,
            ..ChirpConfig::default()
        })),
        MethodName::Burst => Box::new(Burst::new(BurstConfig {
            max_rate: settings.max_rate,
            packet_size: settings.packet_size,
            ..BurstConfig::default()
        })),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_method_has_a_coalescing_verdict_with_a_reason() {
        for name in MethodName::ALL {
            let t = under_coalescing(name.as_str());
            assert!(!t.describe().contains("no analysis"), "{name}");
        }
        assert!(under_coalescing("fac2").trustworthy());
        assert!(!under_coalescing("pair").trustworthy());
        assert!(!under_coalescing("nope").trustworthy());
    }

    #[test]
    fn every_name_builds_a_method_of_that_name_and_parses_back() {
        for (i, name) in MethodName::ALL.into_iter().enumerate() {
            let m = build(name, &MethodSettings::default());
            assert_eq!(m.name(), name.as_str());
            assert_eq!(METHODS[i].name, name, "METHODS is in MethodName::ALL order");
            assert_eq!(name.as_str().parse::<MethodName>(), Ok(name));
            assert_eq!(
                serde_json::to_value(name).unwrap(),
                serde_json::json!(name.as_str())
            );
        }
        let err = "nope".parse::<MethodName>().unwrap_err();
        assert!(err.to_string().contains("fac2"), "{err}");
    }
}
