//! The spec grammar: `kind[:positional][:key=value]…`.
//!
//! Every error names the part that is wrong and what was expected, because
//! the person reading it typed the spec on a command line a moment ago.

use super::{
    check_mtu, tables, CrossModel, RateStep, TrafficError, WEB_MAX_OBJECT, WEB_MEAN_OBJECT,
    WEB_OBJECTS_PER_PAGE, WEB_SHAPE, WEB_SOURCES,
};
use crate::units::{BitRate, Bytes, DurationNs, Problem, UnitError};
use std::str::FromStr;

pub(super) const KINDS: &str = "cbr, poisson, mix, icim, web, steps, tcp";

/// The kinds that carry a rate and a packet schedule.
const FLAT: [&str; 5] = ["cbr", "poisson", "mix", "icim", "web"];

fn allowed_keys(kind: &str) -> &'static [&'static str] {
    match kind {
        "cbr" | "poisson" => &["packet", "flows"],
        "mix" => &["flows", "jumbo"],
        "icim" => &["flows"],
        "web" => &[
            "sources",
            "shape",
            "object",
            "objects",
            "max_object",
            "peak",
        ],
        _ => &[],
    }
}

fn example(kind: &str) -> &'static str {
    match kind {
        "cbr" => "cbr:50M",
        "poisson" => "poisson:30%",
        "mix" => "mix:40%:flows=4",
        "icim" => "icim:25%",
        "web" => "web:20%",
        "steps" => "steps:0s=3G,15s=2G,35s=1G",
        _ => "tcp:2",
    }
}

fn what_positional(kind: &str) -> &'static str {
    match kind {
        "steps" => "a list of `time=rate` steps",
        "tcp" => "a number of flows",
        _ => "a rate (such as `50M`, `1.5G` or `30%`)",
    }
}

fn bad(what: &str, value: &str, why: impl Into<String>) -> TrafficError {
    TrafficError::BadValue {
        what: what.to_string(),
        value: value.to_string(),
        why: why.into(),
    }
}

/// The `key=value` options of a spec, each taken at most once.
struct Opts<'a> {
    list: Vec<(String, &'a str)>,
}

impl<'a> Opts<'a> {
    fn new(kind: &str, parts: &[&'a str], allowed: &[&str]) -> Result<Self, TrafficError> {
        let mut list: Vec<(String, &'a str)> = Vec::new();
        for part in parts {
            if part.is_empty() {
                return Err(bad(
                    "option",
                    "",
                    "empty: remove the extra `:` or write key=value",
                ));
            }
            let Some((k, v)) = part.split_once('=') else {
                return Err(TrafficError::Unexpected {
                    kind: kind.to_string(),
                    part: part.to_string(),
                });
            };
            let key = k.trim().to_ascii_lowercase();
            if !allowed.contains(&key.as_str()) {
                return Err(TrafficError::UnknownOption {
                    kind: kind.to_string(),
                    key: k.trim().to_string(),
                    allowed: if allowed.is_empty() {
                        "no options".to_string()
                    } else {
                        allowed
                            .iter()
                            .map(|a| format!("`{a}=`"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    },
                });
            }
            if list.iter().any(|(k2, _)| *k2 == key) {
                return Err(TrafficError::DuplicateOption(key));
            }
            list.push((key, v.trim()));
        }
        Ok(Opts { list })
    }

    fn get(&self, key: &str) -> Option<&'a str> {
        self.list.iter().find(|(k, _)| k == key).map(|(_, v)| *v)
    }
}

/// Parses a spec (see [`CrossModel::parse`]); the result is validated by
/// the caller.
pub(super) fn parse(spec: &str, capacity: BitRate, mtu: Bytes) -> Result<CrossModel, TrafficError> {
    check_mtu(mtu)?;
    let spec = spec.trim();
    if spec.is_empty() {
        return Err(TrafficError::Empty);
    }
    let mut parts = spec.split(':').map(str::trim);
    let kind_raw = parts.next().unwrap_or_default();
    let rest: Vec<&str> = parts.collect();
    let lower = kind_raw.to_ascii_lowercase();
    let kind: &'static str = match lower.as_str() {
        "cbr" => "cbr",
        "poisson" => "poisson",
        "mix" => "mix",
        "icim" => "icim",
        "web" => "web",
        "steps" => "steps",
        "tcp" => "tcp",
        _ => return Err(TrafficError::UnknownKind(kind_raw.to_string())),
    };
    let missing = TrafficError::Missing {
        kind,
        what: what_positional(kind),
        example: example(kind),
    };
    let Some(&positional) = rest.first() else {
        return Err(missing);
    };
    // An option where the positional part belongs means it was left out
    // (`mix:flows=4`).  Step lists contain `=` too, so for them only a
    // known option name counts.
    let looks_like_option = match positional.split_once('=') {
        Some((k, _)) if kind == "steps" => {
            let k = k.trim().to_ascii_lowercase();
            k == "kind" || FLAT.iter().any(|f| allowed_keys(f).contains(&k.as_str()))
        }
        Some(_) => true,
        None => false,
    };
    if positional.is_empty() || looks_like_option {
        return Err(missing);
    }
    let options = &rest[1..];
    match kind {
        "tcp" => {
            Opts::new(kind, options, &[])?;
            let flows = parse_count("number of TCP flows", positional)?;
            Ok(CrossModel::Tcp { flows })
        }
        "steps" => {
            // `kind=` picks the inner model; the other options are its own.
            let inner_kind = options
                .iter()
                .filter_map(|p| p.split_once('='))
                .find(|(k, _)| k.trim().eq_ignore_ascii_case("kind"))
                .map(|(_, v)| v.trim().to_ascii_lowercase())
                .unwrap_or_else(|| "icim".to_string());
            let Some(&inner_kind) = FLAT.iter().find(|f| **f == inner_kind) else {
                return Err(bad(
                    "steps kind",
                    &inner_kind,
                    "steps change the rate of cbr, poisson, mix, icim or web",
                ));
            };
            let mut allowed = vec!["kind"];
            allowed.extend_from_slice(allowed_keys(inner_kind));
            let opts = Opts::new(kind, options, &allowed)?;
            let steps = parse_steps(positional, capacity)?;
            let inner = flat(inner_kind, BitRate::ZERO, &opts, capacity, mtu)?;
            Ok(CrossModel::Steps {
                steps,
                inner: Box::new(inner),
            })
        }
        _ => {
            let opts = Opts::new(kind, options, allowed_keys(kind))?;
            let rate = rate_or_share("rate", positional, capacity, true)?;
            flat(kind, rate, &opts, capacity, mtu)
        }
    }
}

/// Builds a flat model of `kind` from its options.
fn flat(
    kind: &str,
    rate: BitRate,
    opts: &Opts,
    capacity: BitRate,
    mtu: Bytes,
) -> Result<CrossModel, TrafficError> {
    let flows = |default: u32| -> Result<u32, TrafficError> {
        opts.get("flows")
            .map_or(Ok(default), |v| parse_count("flows", v))
    };
    Ok(match kind {
        "cbr" | "poisson" => {
            let packet = match opts.get("packet") {
                Some(v) => quantity("packet size", v)?,
                None => mtu,
            };
            if packet > mtu {
                return Err(TrafficError::Invalid(format!(
                    "packet size {} B is larger than the MTU {} B",
                    packet.get(),
                    mtu.get()
                )));
            }
            let flows = flows(1)?;
            if kind == "cbr" {
                CrossModel::Cbr {
                    rate,
                    packet,
                    flows,
                }
            } else {
                CrossModel::Poisson {
                    rate,
                    packet,
                    flows,
                }
            }
        }
        "mix" => {
            let jumbo_ip = tables::MIX_L2_FRAMES[3] - tables::ETHERNET_FRAMING;
            let jumbo = match opts.get("jumbo") {
                Some(v) => parse_bool("jumbo", v)?,
                None => mtu.get() >= jumbo_ip,
            };
            CrossModel::Mix {
                rate,
                flows: flows(tables::MIX_PAPER_FLOWS)?,
                jumbo,
                mtu,
            }
        }
        "icim" => CrossModel::IcimTable {
            rate,
            flows: flows(1)?,
            mtu,
        },
        _ => {
            let peak = match opts.get("peak") {
                Some(v) => rate_or_share("peak rate", v, capacity, false)?,
                None if capacity.is_positive() => capacity,
                None => {
                    return Err(TrafficError::Invalid(
                        "web needs `peak=<rate>` (how fast one source sends a page) when no capacity is known".into(),
                    ))
                }
            };
            CrossModel::Web {
                rate,
                shape: opts
                    .get("shape")
                    .map_or(Ok(WEB_SHAPE), |v| parse_number("Pareto shape", v))?,
                mean_object: opts
                    .get("object")
                    .map_or(Ok(WEB_MEAN_OBJECT), |v| quantity("mean object size", v))?,
                objects_per_page: opts.get("objects").map_or(Ok(WEB_OBJECTS_PER_PAGE), |v| {
                    parse_count("objects per page", v)
                })?,
                max_object: opts
                    .get("max_object")
                    .map_or(Ok(WEB_MAX_OBJECT), |v| quantity("max object size", v))?,
                sources: opts
                    .get("sources")
                    .map_or(Ok(WEB_SOURCES), |v| parse_count("sources", v))?,
                peak,
                mtu,
            }
        }
    })
}

fn parse_steps(list: &str, capacity: BitRate) -> Result<Vec<RateStep>, TrafficError> {
    let mut steps = Vec::new();
    for item in list.split(',').map(str::trim) {
        if item.is_empty() {
            return Err(bad(
                "step",
                item,
                "empty: write `time=rate`, as in `15s=2G`",
            ));
        }
        let Some((t, r)) = item.split_once('=') else {
            return Err(bad("step", item, "expected `time=rate`, as in `15s=2G`"));
        };
        steps.push(RateStep {
            at: step_time("step time", t.trim())?,
            rate: rate_or_share("step rate", r.trim(), capacity, true)?,
        });
    }
    Ok(steps)
}

fn parse_number(what: &str, s: &str) -> Result<f64, TrafficError> {
    let x: f64 = s.trim().parse().map_err(|_| bad(what, s, "not a number"))?;
    if !x.is_finite() {
        return Err(bad(what, s, "not a finite number"));
    }
    if x < 0.0 {
        return Err(TrafficError::Negative {
            what: what.to_string(),
            value: s.to_string(),
        });
    }
    Ok(x)
}

/// A quantity in the core grammar (`docs/units.md`), its error told in the
/// spec's own terms: which part (`what`) was wrong.
fn quantity<T: FromStr<Err = UnitError>>(what: &str, s: &str) -> Result<T, TrafficError> {
    s.trim().parse().map_err(|e: UnitError| match e.problem {
        Problem::Negative => TrafficError::Negative {
            what: what.to_string(),
            value: s.to_string(),
        },
        _ => bad(what, s, e.reason()),
    })
}

/// A rate in the core grammar (`50M`, `1.5G`, `10Gbit`, `1e9` b/s) or, with
/// a known capacity, `30%`.  `bounded` rates may not exceed the capacity.
fn rate_or_share(
    what: &str,
    s: &str,
    capacity: BitRate,
    bounded: bool,
) -> Result<BitRate, TrafficError> {
    let s = s.trim();
    if let Some(pct) = s.strip_suffix('%') {
        let p = parse_number(what, pct).map_err(|e| match e {
            TrafficError::Negative { .. } => TrafficError::Negative {
                what: what.to_string(),
                value: s.to_string(),
            },
            _ => bad(what, s, "not a percentage such as `30%`"),
        })?;
        if !capacity.is_positive() {
            return Err(TrafficError::NoCapacity {
                what: what.to_string(),
                value: s.to_string(),
            });
        }
        if bounded && p > 100.0 {
            return Err(TrafficError::OverCapacity {
                what: what.to_string(),
                value: s.to_string(),
                capacity,
            });
        }
        return Ok(capacity.scale(p / 100.0));
    }
    let r: BitRate = quantity(what, s)?;
    if bounded && capacity.is_positive() && r.bps() > capacity.bps() * (1.0 + 1e-12) {
        return Err(TrafficError::OverCapacity {
            what: what.to_string(),
            value: s.to_string(),
            capacity,
        });
    }
    Ok(r)
}

/// A step time in the core grammar (`15s`, `1500ms`, `2min`), or a bare
/// number of seconds (`15`): step lists were documented with bare seconds
/// before the grammar asked for units, and `steps:0=…` is the common start.
fn step_time(what: &str, s: &str) -> Result<DurationNs, TrafficError> {
    let t = s.trim();
    match t.parse::<DurationNs>() {
        Err(e) if e.problem == Problem::NoUnit => quantity(what, &format!("{t}s")),
        _ => quantity(what, t),
    }
}

/// A whole number of at least 1.
fn parse_count(what: &str, s: &str) -> Result<u32, TrafficError> {
    let t = s.trim();
    if t.starts_with('-') {
        return Err(TrafficError::Negative {
            what: what.to_string(),
            value: s.to_string(),
        });
    }
    let n: u32 = t
        .parse()
        .map_err(|_| bad(what, s, "not a whole number (1 or more)"))?;
    if n == 0 {
        return Err(bad(what, s, "must be at least 1"));
    }
    Ok(n)
}

fn parse_bool(what: &str, s: &str) -> Result<bool, TrafficError> {
    match s.trim().to_ascii_lowercase().as_str() {
        "yes" | "true" | "on" | "1" => Ok(true),
        "no" | "false" | "off" | "0" => Ok(false),
        _ => Err(bad(what, s, "expected yes or no")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_sizes_and_times() {
        let c = BitRate::from_gbps(10.0);
        let r = |s| rate_or_share("rate", s, c, true).unwrap().bps();
        assert_eq!(r("50M"), 50e6);
        assert_eq!(r("1.5G"), 1.5e9);
        assert_eq!(r("800k"), 800e3);
        assert_eq!(r("10Gbit"), 10e9);
        assert_eq!(r("2Gbps"), 2e9);
        assert_eq!(r("25%"), 2.5e9);
        assert_eq!(r("1000"), 1000.0);
        let size = |s| quantity::<Bytes>("s", s);
        assert_eq!(size("12KB").unwrap(), Bytes(12_000));
        assert_eq!(size("64KiB").unwrap(), Bytes(65_536));
        assert_eq!(step_time("t", "1500ms").unwrap(), DurationNs::from_ms(1500));
        assert_eq!(step_time("t", "15").unwrap(), DurationNs::from_secs(15));
        assert_eq!(size("12k").unwrap(), Bytes(12_000));
        assert_eq!(step_time("t", "2min").unwrap(), DurationNs::from_secs(120));
        assert!(matches!(
            rate_or_share("rate", "50MB", c, true),
            Err(TrafficError::BadValue { .. })
        ));
        assert!(matches!(size("12kb"), Err(TrafficError::BadValue { .. })));
        assert!(matches!(
            step_time("t", "-1s"),
            Err(TrafficError::Negative { .. })
        ));
    }
}
