//! Cross-traffic models as pure, seeded packet schedules.
//!
//! A [`CrossModel`] says what cross traffic a lab or simulated path carries;
//! [`CrossModel::schedule`] turns it into a [`Schedule`]: the packets (time
//! offset from the start, IP datagram size, flow) the traffic consists of.
//! The same schedule is replayed by the namespace lab's UDP senders and by a
//! discrete-event simulator, so both see the same traffic, packet for packet.
//! Nothing here opens a socket, reads a clock or asks the OS for entropy: a
//! schedule is a function of the model and a seed, and nothing else.
//!
//! The models come from the papers the project grows from:
//!
//! | model | source | timing | sizes |
//! | --- | --- | --- | --- |
//! | `cbr` | — | even gaps | one size |
//! | `poisson` | — | exponential gaps | one size |
//! | `mix` | Shriram et al. 2005, 2.2 (SmartBits) | byte-paced | 64/576/1510(/8192) B frames, equal packet counts |
//! | `icim` | Man, Hasegawa & Murata, Table I | byte-paced | Table I, by share of bytes |
//! | `web` | Man, Hasegawa & Murata, IV.C | Pareto on/off | Pareto objects cut at the MTU |
//! | `steps` | Man, Hasegawa & Murata, IV.A (15 s, 35 s) | any of the above, rate changing at set times | |
//! | `tcp` | — | greedy TCP, no schedule | |
//!
//! `docs/cross-traffic.md` describes each with its parameters and tables.
//!
//! # Sizes and rates
//!
//! Sizes are IP datagram sizes, what a router queues; rates count IP bytes.
//! A UDP sender subtracts 28 bytes of IP and UDP header to get its payload;
//! a Linux qdisc also counts the 14-byte Ethernet header of each packet
//! ([`Tally::bytes_with_overhead`]).  Every size is clamped to
//! `[MIN_PACKET, mtu]`.
//!
//! # Determinism
//!
//! A schedule depends only on the model and the seed, on every platform:
//! the generator is [`SplitMix64`](crate::rng::SplitMix64), each flow
//! or source draws from its own stream of the seed, and times are computed
//! in `f64` and rounded to the nanosecond.  Same model and seed, same
//! packets; a different seed gives different packets (for every model with
//! randomness; `cbr` has none).

mod parse;
mod schedule;
pub mod tables;

pub use schedule::{offered, offered_bytes, offered_series, Schedule, Tally};
pub use tables::ParetoObjects;

use crate::units::{BitRate, Bytes, DurationNs};
use schedule::{Placement, Warp, WebParams};
use serde::{Deserialize, Serialize};
use tables::{ByteShareSampler, Deck, ICIM_TABLE_I};

/// The smallest datagram a UDP sender can send with a payload: 20 bytes of
/// IP header, 8 of UDP, 1 of data.  Smaller table sizes are raised to it.
pub const MIN_PACKET: u64 = 29;
/// The largest IPv4 datagram.
pub const MAX_DATAGRAM: u64 = 65_535;
/// The smallest MTU IPv4 allows.
pub(crate) const MIN_MTU: u64 = 68;
/// Most flows (or Web sources) one model may have: a flow is a socket in the
/// lab, and far more than this is a typo, not an experiment.
pub(crate) const MAX_FLOWS: u32 = 65_536;
/// Most steps one `steps` model may have.
pub(crate) const MAX_STEPS: usize = 10_000;

/// Web model defaults, from the ICIM paper's Web experiment (IV.C): "a
/// Pareto distribution for the Web object size distribution with 1.2 as the
/// Pareto shape parameter and 12 KBytes as the average object size.  The
/// number of objects in a Web page is 20."
pub(crate) const WEB_SHAPE: f64 = 1.2;
pub(crate) const WEB_MEAN_OBJECT: Bytes = Bytes(12_000);
pub(crate) const WEB_OBJECTS_PER_PAGE: u32 = 20;
/// The ICIM paper says only "a large number of active Web document
/// accesses"; 50 sources keep each one's share small (2 % of the load) so
/// that the aggregate is many overlapping on/off sources, not a few.
pub(crate) const WEB_SOURCES: u32 = 50;
/// Largest object.  Uncapped, shape 1.2 puts a 1 GB object (eight seconds
/// of a saturated 1 Gb/s bottleneck) into about one one-minute run in ten;
/// 100 MB bounds a single object's effect on a run while leaving sizes
/// heavy-tailed over five orders of magnitude (about 1.6 objects of such a
/// run are cut).  The scale is chosen so that the *capped* distribution has
/// the requested mean.
pub(crate) const WEB_MAX_OBJECT: Bytes = Bytes(100_000_000);

/// The rate from a given time on, in a `steps` model.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RateStep {
    /// Offset from the start of the schedule.
    pub at: DurationNs,
    pub rate: BitRate,
}

/// A packet of a schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ScheduledPacket {
    /// When to send it, as an offset from the start of the schedule.
    pub at: DurationNs,
    /// IP datagram size (headers included).
    pub size: Bytes,
    /// Which flow it belongs to, `0..model.flows()`.
    pub flow: u32,
}

/// A cross-traffic model.  Build one with [`CrossModel::parse`] (which
/// validates it) or by hand (then call [`CrossModel::validate`]).
///
/// Rates are IP-layer bit rates.  All packet-carrying models may have
/// several flows; a schedule yields their aggregate, each packet tagged with
/// its flow.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum CrossModel {
    /// Constant bit rate: packets of one size at exactly even gaps.  With
    /// `n` flows, packets go to the flows in turn, so each flow is itself
    /// CBR at `rate / n`, the flows staggered by one gap.
    Cbr {
        rate: BitRate,
        packet: Bytes,
        flows: u32,
    },
    /// Packets of one size at exponentially distributed gaps (a Poisson
    /// process).  With `n` flows each packet goes to a uniformly random
    /// flow, which is exactly `n` independent Poisson flows of `rate / n`.
    Poisson {
        rate: BitRate,
        packet: Bytes,
        flows: u32,
    },
    /// The comparison paper's SmartBits mix (Shriram et al. 2005, 2.2):
    /// L2 frames of 64, 576, 1510 and — with `jumbo` — 8192 bytes "in equal
    /// proportions", i.e. equal numbers of *packets* (see
    /// [`tables::MIX_L2_FRAMES`]).  Without the jumbo class the three
    /// others share the packets equally and the rate is kept.  Packets are
    /// byte-paced (each one's gap is its own transmission time at `rate`)
    /// and dealt round-robin to `flows` flows (SmartFlow's "burst size 1";
    /// the paper used 19).
    Mix {
        rate: BitRate,
        flows: u32,
        jumbo: bool,
        mtu: Bytes,
    },
    /// ICIM Table I: sizes drawn so that each row gets its share of the
    /// *bytes* (see [`tables::ICIM_TABLE_I`]), byte-paced, round-robin
    /// over `flows`.
    IcimTable {
        rate: BitRate,
        flows: u32,
        mtu: Bytes,
    },
    /// Pareto on/off Web traffic (ICIM paper, IV.C): `sources` sources, each
    /// sending pages of `objects_per_page` objects with Pareto sizes (shape
    /// `shape`, mean `mean_object`, at most `max_object`) back to back at
    /// `peak`, then falling silent.  Each page owns a cycle of exactly the
    /// time the source's share of `rate` needs to carry it, and starts at a
    /// random point of it, so off times make up the rate page by page
    /// rather than only on average: with shape 1.2 the average would take
    /// far longer than any run to arrive (`docs/cross-traffic.md`).
    Web {
        rate: BitRate,
        shape: f64,
        mean_object: Bytes,
        objects_per_page: u32,
        max_object: Bytes,
        sources: u32,
        peak: BitRate,
        mtu: Bytes,
    },
    /// `inner` with its rate changing at set times (the ICIM paper changes
    /// the load at 15 s and 35 s).  The rate is zero before the first step
    /// and the last step's rate holds forever; `inner`'s own rate is
    /// ignored.  `inner` is any model above.
    Steps {
        steps: Vec<RateStep>,
        inner: Box<CrossModel>,
    },
    /// Greedy TCP flows.  No schedule: the lab opens real connections and
    /// TCP decides what they send.
    Tcp { flows: u32 },
}

/// Why a spec or a model is not acceptable.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TrafficError {
    #[error("empty cross-traffic spec: expected `<kind>:<rate>[:key=value…]` such as `poisson:30%`; kinds are {}", parse::KINDS)]
    Empty,
    #[error("unknown cross-traffic kind `{0}`; kinds are {kinds}", kinds = parse::KINDS)]
    UnknownKind(String),
    #[error("`{kind}` needs {what}, as in `{example}`")]
    Missing {
        kind: &'static str,
        what: &'static str,
        example: &'static str,
    },
    #[error("bad {what} `{value}`: {why}")]
    BadValue {
        what: String,
        value: String,
        why: String,
    },
    #[error("{what} must not be negative, got `{value}`")]
    Negative { what: String, value: String },
    #[error("{what} `{value}` is more than the capacity {capacity}")]
    OverCapacity {
        what: String,
        value: String,
        capacity: BitRate,
    },
    #[error("{what} `{value}` is a percentage, but no capacity is known to take it of")]
    NoCapacity { what: String, value: String },
    #[error("unknown option `{key}` for `{kind}`; it takes {allowed}")]
    UnknownOption {
        kind: String,
        key: String,
        allowed: String,
    },
    #[error("option `{0}` is given twice")]
    DuplicateOption(String),
    #[error("unexpected `{part}` in a `{kind}` spec: options are written key=value")]
    Unexpected { kind: String, part: String },
    #[error("MTU {0} B is outside {MIN_MTU}..={MAX_DATAGRAM} B")]
    BadMtu(u64),
    #[error("{0}")]
    Invalid(String),
}

fn invalid(msg: impl Into<String>) -> TrafficError {
    TrafficError::Invalid(msg.into())
}

fn check_rate(what: &str, r: BitRate) -> Result<(), TrafficError> {
    if !r.bps().is_finite() || r.bps() < 0.0 {
        return Err(invalid(format!(
            "{what} must be a finite rate ≥ 0, got {} b/s",
            r.bps()
        )));
    }
    Ok(())
}

fn check_flows(what: &str, n: u32) -> Result<(), TrafficError> {
    if n == 0 || n > MAX_FLOWS {
        return Err(invalid(format!("{what} must be 1..={MAX_FLOWS}, got {n}")));
    }
    Ok(())
}

fn check_mtu(mtu: Bytes) -> Result<(), TrafficError> {
    if !(MIN_MTU..=MAX_DATAGRAM).contains(&mtu.get()) {
        return Err(TrafficError::BadMtu(mtu.get()));
    }
    Ok(())
}

fn check_packet(packet: Bytes) -> Result<(), TrafficError> {
    if !(MIN_PACKET..=MAX_DATAGRAM).contains(&packet.get()) {
        return Err(invalid(format!(
            "packet size {} B is outside {MIN_PACKET}..={MAX_DATAGRAM} B",
            packet.get()
        )));
    }
    Ok(())
}

impl CrossModel {
    /// Parses a spec such as `cbr:50M`, `poisson:30%:packet=1000`,
    /// `mix:40%:flows=4`, `icim:25%`, `web:20%:sources=100`,
    /// `steps:0s=3G,15s=2G,35s=1G:kind=icim` or `tcp:2`.
    ///
    /// `%` is relative to `capacity`; a rate may not exceed it (when it is
    /// known, i.e. positive).  `mtu` bounds packet sizes and decides whether
    /// the mix has its jumbo class.  See `docs/cross-traffic.md` for the
    /// grammar.  The result is validated.
    pub fn parse(spec: &str, capacity: BitRate, mtu: Bytes) -> Result<CrossModel, TrafficError> {
        let m = parse::parse(spec, capacity, mtu)?;
        m.validate()?;
        Ok(m)
    }

    /// Checks every parameter: rates finite and ≥ 0, sizes within the MTU,
    /// flows 1..=[`MAX_FLOWS`], Web shape > 1 (so the mean exists) and a
    /// peak fast enough for each source's share, steps in increasing time
    /// order with a schedulable inner model.
    pub fn validate(&self) -> Result<(), TrafficError> {
        match self {
            CrossModel::Cbr {
                rate,
                packet,
                flows,
            }
            | CrossModel::Poisson {
                rate,
                packet,
                flows,
            } => {
                check_rate("rate", *rate)?;
                check_packet(*packet)?;
                check_flows("flows", *flows)
            }
            CrossModel::Mix {
                rate,
                flows,
                jumbo,
                mtu,
            } => {
                check_rate("rate", *rate)?;
                check_flows("flows", *flows)?;
                check_mtu(*mtu)?;
                let jumbo_ip = tables::MIX_L2_FRAMES[3] - tables::ETHERNET_FRAMING;
                if *jumbo && mtu.get() < jumbo_ip {
                    return Err(invalid(format!(
                        "the mix's jumbo class (8192 B frames, {jumbo_ip} B datagrams) needs an MTU of at least {jumbo_ip} B, not {} B; use jumbo=no",
                        mtu.get()
                    )));
                }
                Ok(())
            }
            CrossModel::IcimTable { rate, flows, mtu } => {
                check_rate("rate", *rate)?;
                check_flows("flows", *flows)?;
                check_mtu(*mtu)
            }
            CrossModel::Web {
                rate,
                shape,
                mean_object,
                objects_per_page,
                max_object,
                sources,
                peak,
                mtu,
            } => {
                check_rate("rate", *rate)?;
                check_flows("sources", *sources)?;
                check_mtu(*mtu)?;
                if !(shape.is_finite() && *shape > 1.0 && *shape <= 100.0) {
                    return Err(invalid(format!(
                        "Pareto shape must be above 1 (else the mean object is infinite) and at most 100, got {shape}"
                    )));
                }
                if *objects_per_page == 0 || *objects_per_page > 100_000 {
                    return Err(invalid(format!(
                        "objects per page must be 1..=100000, got {objects_per_page}"
                    )));
                }
                if u64::from(*objects_per_page) * u64::from(*sources) > 10_000_000 {
                    return Err(invalid(
                        "sources × objects per page must be at most 10 000 000",
                    ));
                }
                if max_object.get() > 1_000_000_000_000 {
                    return Err(invalid(format!(
                        "max object must be at most 1 TB, got {} B",
                        max_object.get()
                    )));
                }
                if mean_object.get() == 0 || mean_object >= max_object {
                    return Err(invalid(format!(
                        "mean object ({} B) must be above 0 and below the max object ({} B)",
                        mean_object.get(),
                        max_object.get()
                    )));
                }
                if !peak.is_positive() {
                    return Err(invalid(format!(
                        "Web peak rate must be positive, got {peak}"
                    )));
                }
                if rate.bps() / f64::from(*sources) > peak.bps() {
                    return Err(invalid(format!(
                        "{sources} Web sources sending at most {peak} each cannot average {rate}: add sources or raise the peak"
                    )));
                }
                Ok(())
            }
            CrossModel::Steps { steps, inner } => {
                if steps.is_empty() {
                    return Err(invalid("steps need at least one `time=rate`"));
                }
                if steps.len() > MAX_STEPS {
                    return Err(invalid(format!("at most {MAX_STEPS} steps")));
                }
                let mut prev: Option<DurationNs> = None;
                for s in steps {
                    check_rate("step rate", s.rate)?;
                    if s.at < DurationNs::ZERO {
                        return Err(invalid(format!("step time {} is negative", s.at)));
                    }
                    if prev.is_some_and(|p| s.at <= p) {
                        return Err(invalid(format!(
                            "step times must increase: {} comes after {}",
                            s.at,
                            prev.unwrap_or_default()
                        )));
                    }
                    prev = Some(s.at);
                }
                if matches!(**inner, CrossModel::Steps { .. } | CrossModel::Tcp { .. }) {
                    return Err(invalid(
                        "steps can change the rate of cbr, poisson, mix, icim or web traffic, not of steps or tcp",
                    ));
                }
                // The inner model must hold at the highest step rate.
                let top = steps
                    .iter()
                    .map(|s| s.rate)
                    .fold(BitRate::ZERO, BitRate::max);
                inner.with_rate(top).validate()
            }
            CrossModel::Tcp { flows } => check_flows("TCP flows", *flows),
        }
    }

    /// The rate field of a flat model.
    fn flat_rate(&self) -> Option<BitRate> {
        match self {
            CrossModel::Cbr { rate, .. }
            | CrossModel::Poisson { rate, .. }
            | CrossModel::Mix { rate, .. }
            | CrossModel::IcimTable { rate, .. }
            | CrossModel::Web { rate, .. } => Some(*rate),
            CrossModel::Steps { .. } | CrossModel::Tcp { .. } => None,
        }
    }

    /// This model with its rate set to `r` (flat models; others unchanged).
    fn with_rate(&self, r: BitRate) -> CrossModel {
        let mut m = self.clone();
        match &mut m {
            CrossModel::Cbr { rate, .. }
            | CrossModel::Poisson { rate, .. }
            | CrossModel::Mix { rate, .. }
            | CrossModel::IcimTable { rate, .. }
            | CrossModel::Web { rate, .. } => *rate = r,
            CrossModel::Steps { .. } | CrossModel::Tcp { .. } => {}
        }
        m
    }

    /// The long-run mean offered rate: the rate, or for `steps` the last
    /// step's rate (which holds forever).  `None` for TCP, whose rate is
    /// TCP's business.
    pub fn mean_rate(&self) -> Option<BitRate> {
        match self {
            CrossModel::Steps { steps, .. } => Some(steps.last().map_or(BitRate::ZERO, |s| s.rate)),
            m => m.flat_rate(),
        }
    }

    /// The nominal rate at offset `t` from the start (for `steps`, the
    /// rate of the last step at or before `t`, zero before the first).
    /// `None` for TCP.  The schedule's actual bytes in a window are
    /// [`offered`]; this is what was asked for.
    pub fn rate_at(&self, t: DurationNs) -> Option<BitRate> {
        match self {
            CrossModel::Steps { steps, .. } => Some(
                steps
                    .iter()
                    .take_while(|s| s.at <= t)
                    .last()
                    .map_or(BitRate::ZERO, |s| s.rate),
            ),
            m => m.flat_rate(),
        }
    }

    /// How many flows the schedule spreads its packets over (Web: sources);
    /// `ScheduledPacket::flow` is below this.  For TCP, the connections.
    pub fn flows(&self) -> u32 {
        match self {
            CrossModel::Cbr { flows, .. }
            | CrossModel::Poisson { flows, .. }
            | CrossModel::Mix { flows, .. }
            | CrossModel::IcimTable { flows, .. }
            | CrossModel::Tcp { flows } => *flows,
            CrossModel::Web { sources, .. } => *sources,
            CrossModel::Steps { inner, .. } => inner.flows(),
        }
    }

    /// The mean IP datagram size of the schedule, in bytes, from the
    /// distribution (not sampled).  `None` for TCP or an invalid model.
    pub fn mean_packet_size(&self) -> Option<f64> {
        self.validate().ok()?;
        match self {
            CrossModel::Cbr { packet, .. } | CrossModel::Poisson { packet, .. } => {
                Some(packet.get() as f64)
            }
            CrossModel::Mix { jumbo, mtu, .. } => {
                Some(Deck::new(&tables::mix_ip_sizes(*jumbo), mtu.get()).mean_size())
            }
            CrossModel::IcimTable { mtu, .. } => {
                Some(ByteShareSampler::new(&ICIM_TABLE_I, mtu.get()).mean_size())
            }
            CrossModel::Web { mtu, .. } => {
                let p = self.web_params()?;
                // Bytes per object over datagrams per object; the short
                // last datagram's padding to MIN_PACKET is negligible.
                Some(p.objects.mean() / p.objects.mean_datagrams(*mtu))
            }
            CrossModel::Steps { inner, .. } => inner.with_rate(BitRate::ZERO).mean_packet_size(),
            CrossModel::Tcp { .. } => None,
        }
    }

    /// Packets per second at the highest rate the model asks for (the
    /// largest step for `steps`): what a sender replaying the schedule must
    /// sustain.  `None` for TCP or an invalid model.
    pub fn packet_rate(&self) -> Option<f64> {
        let top = match self {
            CrossModel::Steps { steps, .. } => steps
                .iter()
                .map(|s| s.rate)
                .fold(BitRate::ZERO, BitRate::max),
            m => m.flat_rate()?,
        };
        Some(top.bps() / 8.0 / self.mean_packet_size()?)
    }

    fn web_params(&self) -> Option<WebParams> {
        match self {
            CrossModel::Web {
                shape,
                mean_object,
                objects_per_page,
                max_object,
                sources,
                peak,
                mtu,
                ..
            } => Some(WebParams {
                objects: ParetoObjects::with_mean(*shape, *mean_object, *max_object)?,
                objects_per_page: *objects_per_page,
                sources: *sources,
                peak: peak.bps() / 1e9,
                mtu: mtu.get(),
            }),
            _ => None,
        }
    }

    /// The model's packets from time zero, determined by `seed` alone.
    ///
    /// `None` for TCP (which has no schedule) and for a model that fails
    /// [`CrossModel::validate`] (`parse` never returns one).  A zero rate
    /// gives an empty schedule.
    pub fn schedule(&self, seed: u64) -> Option<Schedule> {
        self.validate().ok()?;
        match self {
            CrossModel::Steps { steps, inner } => inner.schedule_with(Warp::steps(steps), seed),
            CrossModel::Tcp { .. } => None,
            m => m.schedule_with(Warp::constant(m.flat_rate()?), seed),
        }
    }

    fn schedule_with(&self, warp: Warp, seed: u64) -> Option<Schedule> {
        let placement = match self {
            CrossModel::Cbr { packet, .. } => Placement::Cbr { size: packet.get() },
            CrossModel::Poisson { packet, .. } => Placement::Poisson { size: packet.get() },
            CrossModel::Mix { jumbo, mtu, .. } => {
                Placement::Deck(Deck::new(&tables::mix_ip_sizes(*jumbo), mtu.get()))
            }
            CrossModel::IcimTable { mtu, .. } => {
                Placement::Shares(ByteShareSampler::new(&ICIM_TABLE_I, mtu.get()))
            }
            CrossModel::Web { .. } => return Some(Schedule::web(warp, self.web_params()?, seed)),
            CrossModel::Steps { .. } | CrossModel::Tcp { .. } => return None,
        };
        Some(Schedule::proportional(warp, placement, self.flows(), seed))
    }

    /// One line for a person: what the traffic is, at what rate.
    pub fn describe(&self) -> String {
        match self {
            CrossModel::Steps { steps, inner } => {
                let list: Vec<String> = steps
                    .iter()
                    .map(|s| format!("{} from {}", s.rate, fmt_secs(s.at)))
                    .collect();
                format!("{} at {}", inner.describe_shape(), list.join(", "))
            }
            CrossModel::Tcp { flows } => format!(
                "{flows} greedy TCP flow{}",
                if *flows == 1 { "" } else { "s" }
            ),
            m => format!(
                "{} at {}",
                m.describe_shape(),
                m.flat_rate().unwrap_or(BitRate::ZERO)
            ),
        }
    }

    /// What the traffic is, without its rate.
    fn describe_shape(&self) -> String {
        let flows = |n: u32| format!("{n} flow{}", if n == 1 { "" } else { "s" });
        match self {
            CrossModel::Cbr { packet, flows: n, .. } => format!(
                "CBR of {} B packets at even gaps, {}",
                packet.get(),
                flows(*n)
            ),
            CrossModel::Poisson { packet, flows: n, .. } => format!(
                "Poisson of {} B packets at exponential gaps, {}",
                packet.get(),
                flows(*n)
            ),
            CrossModel::Mix {
                flows: n,
                jumbo,
                mtu,
                ..
            } => {
                let k = if *jumbo { 4 } else { 3 };
                let ip: Vec<String> = tables::mix_ip_sizes(*jumbo)
                    .iter()
                    .map(|s| tables::clamp_size(s.get(), mtu.get()).to_string())
                    .collect();
                let l2: Vec<String> = tables::MIX_L2_FRAMES[..k]
                    .iter()
                    .map(u64::to_string)
                    .collect();
                format!(
                    "SmartBits mix of {} B datagrams ({} B frames) in equal packet counts, byte-paced, {}",
                    ip.join("/"),
                    l2.join("/"),
                    flows(*n)
                )
            }
            CrossModel::IcimTable { flows: n, mtu, .. } => format!(
                "ICIM Table I sizes by share of bytes (mean {:.0} B), byte-paced, {}",
                ByteShareSampler::new(&ICIM_TABLE_I, mtu.get()).mean_size(),
                flows(*n)
            ),
            CrossModel::Web {
                shape,
                mean_object,
                objects_per_page,
                max_object,
                sources,
                peak,
                ..
            } => format!(
                "Web on/off, {sources} sources of {objects_per_page}-object pages, Pareto objects (shape {shape}, mean {} B, max {} B) at {peak} peak",
                mean_object.get(),
                max_object.get()
            ),
            CrossModel::Steps { inner, .. } => inner.describe_shape(),
            CrossModel::Tcp { .. } => self.describe(),
        }
    }

    /// The canonical spec of this model: `parse` of it, with the same MTU
    /// and a capacity at least the rates (or unknown, i.e. zero), gives the
    /// same model back.  Rates are written in b/s, times in ns, so nothing
    /// is rounded.
    pub fn spec(&self) -> String {
        match self {
            CrossModel::Steps { steps, inner } => {
                let list: Vec<String> = steps
                    .iter()
                    .map(|s| format!("{}ns={}", s.at.ns(), s.rate.bps()))
                    .collect();
                let inner_spec = inner.spec();
                // Drop the inner rate: `kind:rate:opts` → `kind=kind:opts`.
                let mut parts = inner_spec.split(':');
                let kind = parts.next().unwrap_or_default();
                let opts: Vec<&str> = parts.skip(1).collect();
                let mut s = format!("steps:{}:kind={kind}", list.join(","));
                for o in opts {
                    s.push(':');
                    s.push_str(o);
                }
                s
            }
            CrossModel::Cbr {
                rate,
                packet,
                flows,
            } => format!("cbr:{}:packet={}:flows={flows}", rate.bps(), packet.get()),
            CrossModel::Poisson {
                rate,
                packet,
                flows,
            } => format!(
                "poisson:{}:packet={}:flows={flows}",
                rate.bps(),
                packet.get()
            ),
            CrossModel::Mix {
                rate, flows, jumbo, ..
            } => format!(
                "mix:{}:flows={flows}:jumbo={}",
                rate.bps(),
                if *jumbo { "yes" } else { "no" }
            ),
            CrossModel::IcimTable { rate, flows, .. } => {
                format!("icim:{}:flows={flows}", rate.bps())
            }
            CrossModel::Web {
                rate,
                shape,
                mean_object,
                objects_per_page,
                max_object,
                sources,
                peak,
                ..
            } => format!(
                "web:{}:sources={sources}:shape={shape}:object={}:objects={objects_per_page}:max_object={}:peak={}",
                rate.bps(),
                mean_object.get(),
                max_object.get(),
                peak.bps()
            ),
            CrossModel::Tcp { flows } => format!("tcp:{flows}"),
        }
    }
}

impl std::fmt::Display for CrossModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe())
    }
}

/// `15 s`, `1.5 s`, `250 ms`: step times as a person writes them.
fn fmt_secs(d: DurationNs) -> String {
    let ns = d.ns();
    if ns % 1_000_000_000 == 0 {
        format!("{} s", ns / 1_000_000_000)
    } else if ns % 1_000_000 == 0 {
        format!("{} ms", ns / 1_000_000)
    } else {
        format!("{d}")
    }
}
