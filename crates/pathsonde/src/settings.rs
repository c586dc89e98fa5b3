//! From the flags every measuring command shares to what a method is told:
//! `abw`'s options (also flattened into `demo` and `lab run`), the default
//! probe rates, the checks, and the method built from them.  Shared here so
//! no command imports another for them.

use crate::{args, usage, Failure};
use clap::Args;
use pathsonde_core::methods::registry::{self, MethodSettings};
use pathsonde_core::{BitRate, Bytes, DurationNs, Method};

#[derive(Args, Clone)]
pub(crate) struct AbwOptions {
    /// Measurement method (docs/methods/); `lab run` also takes `all` (every
    /// available-bandwidth method) and `capacity` (RFC 9097's maximum
    /// IP-layer capacity over UDPST, docs/capacity.md).
    #[arg(long, default_value = "fac2", value_parser = parse_method)]
    pub(crate) method: String,
    /// Highest rate to probe at (bits/s; suffixes k, M, G): the first train's
    /// rate [default: 1G, in the lab too; 500M on a lab path with a delay
    /// line, the most the delay line carries].
    #[arg(long, value_parser = args::positive_rate)]
    pub(crate) max_rate: Option<BitRate>,
    /// The tight link's capacity at the IP layer, if you know it (e.g. the
    /// shaped rate of your access link): methods that need C use it instead
    /// of measuring it.  Printed and recorded with the result
    /// [default: not known; each method measures what it needs].
    #[arg(long, value_name = "RATE", value_parser = args::positive_rate)]
    pub(crate) known_capacity: Option<BitRate>,
    /// IP packet size of probes in bytes (headers included).
    #[arg(long, default_value = "1500", value_parser = args::packet_size)]
    pub(crate) packet_size: Bytes,
    /// The band half-width to reach, relative to A, e.g. 2%: FAC² and SLoPS
    /// probe until their band is this narrow or --max-bytes is spent, and
    /// the report says which; other methods do not aim at a band width
    /// [default: each method's own rule, FAC² ±8 %, SLoPS ±2 %].
    #[arg(long, value_name = "PCT", value_parser = args::precision)]
    pub(crate) precision: Option<f64>,
    /// The most probe bytes FAC² or SLoPS may spend, e.g. 16MB; a band
    /// narrows about as 1/√bytes, so 4× the bytes halve it [default: FAC²
    /// 2 MB; SLoPS its fleet cap].
    #[arg(long, value_name = "SIZE", value_parser = args::positive_size)]
    pub(crate) max_bytes: Option<Bytes>,
    /// How long to wait for any one answer from the server, e.g. 3s (a bare
    /// number is seconds).
    #[arg(long, default_value = "3s", value_parser = args::seconds)]
    pub(crate) timeout: DurationNs,
    #[command(flatten)]
    pub(crate) json: crate::args::JsonFlags,
    /// Authenticate to the server with a key from this file (lines of
    /// `<key-id> <hex secret>`, mode 600; docs/security.md).
    #[arg(long, value_name = "PATH")]
    pub(crate) key_file: Option<std::path::PathBuf>,
    /// Which key of --key-file to use [default: the first].
    #[arg(long, value_name = "ID", requires = "key_file")]
    pub(crate) key_id: Option<String>,
}

/// The method name of RFC 9097's capacity test in `lab run` and `compare`.
pub(crate) const CAPACITY_METHOD: &str = pathsonde_lab::capacity::METHOD;

/// The method name of `lab run --method hops` (a chain of routers; on a
/// real path it is `pathsonde hops HOST`).
pub(crate) const HOPS_METHOD: &str = pathsonde_lab::hops_lab::METHOD;

/// A registry name, or `all` or `capacity` (which only `lab run` accepts).
fn parse_method(s: &str) -> Result<String, String> {
    if s == "all"
        || s == CAPACITY_METHOD
        || s == HOPS_METHOD
        || s.parse::<registry::MethodName>().is_ok()
    {
        Ok(s.to_string())
    } else {
        Err(format!(
            "unknown method '{s}' (known: {}; lab run also takes all, capacity and hops)",
            registry::MethodName::list()
        ))
    }
}

/// The default first-train rate of `abw` and the loopback demo.
const DEFAULT_MAX_RATE_BPS: f64 = 1e9;

/// What a method is told, from the options every measuring command shares:
/// only what the user said (or the defaults `abw` uses on a real path).
/// `default_max_rate` is abw's 1 Gb/s, or less where the equipment cannot
/// carry it (a lab's delay line); never anything derived from the path.
pub(crate) fn method_settings(opts: &AbwOptions, default_max_rate: BitRate) -> MethodSettings {
    MethodSettings {
        precision: opts.precision,
        max_bytes: opts.max_bytes,
        ..settings_of(
            opts.max_rate.unwrap_or(default_max_rate),
            opts.packet_size,
            opts.known_capacity,
        )
    }
}

/// [`MethodSettings`] from their parts, with this host's clock.
pub(crate) fn settings_of(
    max_rate: BitRate,
    packet_size: Bytes,
    known_capacity: Option<BitRate>,
) -> MethodSettings {
    MethodSettings {
        max_bytes: None,
        precision: None,
        max_rate,
        packet_size,
        clock_resolution: pathsonde_net::clock::monotonic_resolution(),
        known_capacity,
    }
}

/// abw's default `--max-rate`.
pub(crate) fn default_max_rate() -> BitRate {
    BitRate::from_bps(DEFAULT_MAX_RATE_BPS)
}

/// Checks a measuring command's settings (`--known-capacity`).
pub(crate) fn check_settings(settings: &MethodSettings) -> Result<(), Failure> {
    check_known_capacity(settings.known_capacity)
}

/// `--known-capacity` must be a rate a link can have.
pub(crate) fn check_known_capacity(c: Option<BitRate>) -> Result<(), Failure> {
    match c {
        Some(c) if !(c.bps().is_finite() && c.bps() >= 1e3 && c.bps() <= 1e13) => Err(usage(
            format!("--known-capacity {c} must be between 1 kb/s and 10 Tb/s"),
        )),
        _ => Ok(()),
    }
}

/// The method `opts` names, told what [`method_settings`] says.
pub(crate) fn build_method(
    opts: &AbwOptions,
    settings: &MethodSettings,
) -> Result<Box<dyn Method + Send>, Failure> {
    if opts.method == "all" {
        return Err(usage(
            "--method all runs every method in turn: use it with `lab run` (or `compare`)".into(),
        ));
    }
    if opts.method == CAPACITY_METHOD {
        return Err(usage(
            "--method capacity is the lab's name for RFC 9097's capacity test: on a real path use `pathsonde capacity HOST`".into(),
        ));
    }
    if opts.method == HOPS_METHOD {
        return Err(crate::usage(
            "--method hops is the lab's name for the hop-by-hop method on a chain of routers: on a real path use `pathsonde hops HOST`".into(),
        ));
    }
    method_by_name(&opts.method, settings)
}

/// The longest first train pathsonde sends: a train of many seconds is no
/// snapshot of the path any more, and a server ends a session after 60 s by
/// default (docs/security.md).
pub(crate) const LONGEST_FIRST_TRAIN: pathsonde_core::DurationNs =
    pathsonde_core::DurationNs::from_secs(10);

/// Refuses a `--max-rate` so low that the method's first train would last
/// longer than [`LONGEST_FIRST_TRAIN`], naming the slowest rate that works,
/// before anything is sent (at 1 kb/s FAC²'s opening would take 252 s and
/// end at the server's session limit).
pub(crate) fn check_max_rate(name: &str, settings: &MethodSettings) -> Result<(), Failure> {
    let within = LONGEST_FIRST_TRAIN;
    let Ok(method) = name.parse::<registry::MethodName>() else {
        return Err(usage(format!(
            "unknown method '{name}' (known: {})",
            registry::MethodName::list()
        )));
    };
    let Err(e) = pathsonde_core::methods::sanity::check_max_rate(method, settings, within) else {
        return Ok(());
    };
    let fix = match e.slowest_usable {
        Some(r) => format!("use --max-rate {r} or more"),
        None => "no --max-rate makes it short enough".into(),
    };
    Err(usage(format!(
        "--max-rate {}: {name}'s first train would take {} at that rate, longer than the {} a train may last; {fix}",
        settings.max_rate, e.span, within
    )))
}

/// A method from its name and its settings.
pub(crate) fn method_by_name(
    name: &str,
    settings: &MethodSettings,
) -> Result<Box<dyn Method + Send>, Failure> {
    check_settings(settings)?;
    let name: registry::MethodName = name
        .parse()
        .map_err(|e: registry::UnknownMethod| usage(e.to_string()))?;
    Ok(registry::build(name, settings))
}

/// The highest probe rate when none is given: abw's default, as on a real
/// path, but no more than the lab's delay line (if any) carries without
/// loss — a limit of the lab's equipment, not of the path under test, and
/// never derived from the tight link's capacity.
pub(crate) fn lab_default_max_rate(delay: Option<DurationNs>) -> BitRate {
    let abw = default_max_rate();
    if delay.is_some() {
        abw.min(BitRate::from_mbps(
            pathsonde_lab::delay::Sustained::MBPS_1500,
        ))
    } else {
        abw
    }
}
