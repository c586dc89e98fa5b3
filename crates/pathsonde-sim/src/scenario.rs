//! Scenario files (TOML) and their validated, typed form.
//!
//! A scenario is one path: a sender host, a chain of store-and-forward
//! links (each the output queue of the node before it), a receiver host, the
//! cross traffic each link carries, TCP flows across the whole path, and
//! optionally the measurement method to run.  `docs/sim.md` describes every
//! key; `scenarios/` holds examples.

use crate::time::{ps_of, rate_bps, Ps};
use pathsonde_core::traffic::CrossModel;
use pathsonde_core::{BitRate, Bytes};
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// Intel's default receive absolute interrupt delay (ICIM paper, II.B).
pub const DEFAULT_RX_ABS_DELAY: Ps = Ps::from_ns(131_200);

/// Most links a path may have.
pub const MAX_LINKS: usize = 64;
/// Most TCP connections one scenario may open.
pub const MAX_TCP: u32 = 1024;
/// A TCP flow's receive window and first ssthresh (segments) when the
/// scenario gives none: large enough never to limit these paths.  Kept here,
/// where scenarios are read, so the engine depends on the scenario and not
/// the other way round.
pub(crate) const DEFAULT_RWND: u32 = 1 << 20;

#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Toml { path: PathBuf, message: String },
    #[error("{0}")]
    Invalid(String),
}

fn invalid(s: impl Into<String>) -> ScenarioError {
    ScenarioError::Invalid(s.into())
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileScenario {
    name: Option<String>,
    seed: Option<u64>,
    duration: Option<String>,
    mtu: Option<u64>,
    truth_bin: Option<String>,
    sender: Option<FileHost>,
    receiver: Option<FileHost>,
    #[serde(default)]
    link: Vec<FileLink>,
    #[serde(default)]
    tcp: Vec<FileTcp>,
    method: Option<FileMethod>,
    icim: Option<FileIcim>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct FileHost {
    timer_resolution: Option<String>,
    syscall: Option<String>,
    jitter: Option<String>,
    max_pps: Option<u64>,
    rx_queue: Option<u32>,
    stamp_noise: Option<String>,
    nic: Option<FileNic>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct FileNic {
    coalescing: Option<bool>,
    rx_abs_delay: Option<String>,
    rx_pkt_delay: Option<String>,
    throttle: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileLink {
    rate: String,
    delay: Option<String>,
    queue: Option<String>,
    service_clock: Option<String>,
    #[serde(default)]
    cross: Vec<String>,
    cross_hops: Option<usize>,
    trace: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileTcp {
    flows: Option<u32>,
    start: Option<String>,
    #[serde(default)]
    icim: bool,
    window: Option<u32>,
    ssthresh: Option<u32>,
    start_jitter: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileMethod {
    name: Option<String>,
    max_rate: Option<String>,
    packet_size: Option<u64>,
    gap: Option<String>,
    max_plans: Option<u32>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileIcim {
    k: Option<u32>,
    lambda: Option<f64>,
    cmin: Option<u32>,
    q_rtts: Option<f64>,
}

/// Interrupt coalescing of a host's receive path, modelled on Intel's
/// controllers (ICIM paper II.B; Intel AP-450): an absolute timer armed by
/// the first packet after an interrupt, a packet (idle) timer re-armed by
/// every packet, and a throttle that spaces interrupts.  All zero: every
/// packet is its own interrupt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct NicConfig {
    pub rx_abs_delay: Ps,
    pub rx_pkt_delay: Ps,
    pub throttle: Ps,
}

impl NicConfig {
    pub const OFF: NicConfig = NicConfig {
        rx_abs_delay: Ps::ZERO,
        rx_pkt_delay: Ps::ZERO,
        throttle: Ps::ZERO,
    };
    pub fn coalesces(&self) -> bool {
        *self != NicConfig::OFF
    }
}

/// How a host's sends are timed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct HostConfig {
    /// Sends are scheduled on a grid of this step (a timer's resolution).
    pub timer_resolution: Ps,
    /// Each send call (one car) costs this much host time before its
    /// packets reach the NIC; calls do not overlap.
    pub syscall: Ps,
    /// Each car starts late by a uniform amount in `[0, jitter]`.
    pub jitter: Ps,
    /// A host that cannot keep up (`core::path::HostModel`): the sender
    /// emits, or the receiver takes, at most this many packets a second;
    /// `None`: no ceiling.
    pub max_pps: Option<u64>,
    /// The receiver's room for waiting packets (its socket buffer) when it
    /// has a `max_pps`; what finds it full is dropped by the host, counted.
    pub rx_queue: u32,
    /// The receiver's stamps are late by up to this much (timing noise).
    pub stamp_noise: Ps,
    pub nic: NicConfig,
}

/// One link with the queue in front of it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct LinkConfig {
    pub rate: BitRate,
    pub delay: Ps,
    /// Drop-tail limit on bytes waiting (the packet on the wire excluded).
    pub queue: Bytes,
    /// The router feeding this link forwards only on ticks of this period
    /// (Carson & Santay's banding); `None`: as soon as a packet is in.
    pub service_clock: Option<Ps>,
    /// Cross traffic entering at this link.
    pub cross: Vec<CrossSpec>,
    /// A packet trace (time, size) replayed into this link.
    pub trace: Option<PathBuf>,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct CrossSpec {
    pub spec: String,
    #[serde(skip)]
    pub model: CrossModel,
    /// How many links the traffic crosses before leaving the path.
    pub hops: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct TcpSpec {
    pub flows: u32,
    /// The receiver's window in segments (ns-2's `window_`): caps cwnd.
    pub window: u32,
    /// The initial slow-start threshold in segments (ns-2's `ssthresh_`).
    pub ssthresh: u32,
    pub start: Ps,
    /// Each flow starts at `start` plus a uniform draw in `[0, start_jitter]`
    /// (seeded), so that seeds differ and flows do not all slow-start at once.
    pub start_jitter: Ps,
    pub icim: bool,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct MethodSpec {
    pub name: String,
    pub max_rate: Option<BitRate>,
    pub packet_size: Bytes,
    /// Idle time between one plan's last packet and the next plan.
    pub gap: Ps,
    pub max_plans: u32,
}

/// ICIM's parameters (ICIM paper III.C, IV).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct IcimConfig {
    pub k: u32,
    pub lambda: f64,
    pub cmin: u32,
    pub q_rtts: f64,
}

impl Default for IcimConfig {
    fn default() -> Self {
        IcimConfig {
            k: 4,
            lambda: 1.01,
            cmin: 50,
            q_rtts: 1.0,
        }
    }
}

/// A validated scenario.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Scenario {
    pub name: String,
    pub seed: u64,
    pub duration: Ps,
    pub mtu: Bytes,
    pub truth_bin: Ps,
    pub sender: HostConfig,
    pub receiver: HostConfig,
    pub links: Vec<LinkConfig>,
    pub tcp: Vec<TcpSpec>,
    pub method: Option<MethodSpec>,
    pub icim: IcimConfig,
}

/// Events a run may be expected to take before `sim run` or `sim tcp`
/// starts one without `--force` (about a minute at the simulator's usual
/// tens of millions of events per second; docs/sim.md).
pub const EVENT_BUDGET: f64 = 2e9;

impl Scenario {
    /// The hosts' limits as core's host model takes them, or `None` when
    /// both hosts keep up (the usual scenario).
    pub fn host_limits(&self, seed: u64) -> Option<pathsonde_core::path::HostLimits> {
        let (s, r) = (&self.sender, &self.receiver);
        if s.max_pps.is_none() && r.max_pps.is_none() && r.stamp_noise == Ps::ZERO {
            return None;
        }
        Some(pathsonde_core::path::HostLimits {
            send_pps: s.max_pps.map(|p| p as f64),
            send_jitter: pathsonde_core::DurationNs::ZERO,
            recv_pps: r.max_pps.map(|p| p as f64),
            recv_queue: r.rx_queue,
            stamp_noise: pathsonde_core::DurationNs::from_ns((r.stamp_noise.ps() / 1000) as i64),
            seed,
        })
    }

    /// An upper estimate of the events a run of this scenario takes: every
    /// link busy for the whole duration with MTU-sized packets, two events
    /// per packet per link (arrival and departure).  Real runs take fewer
    /// (links are rarely full); the point is the order of magnitude, before
    /// a typo in a rate (`1e15`) costs minutes of silence.
    pub fn event_estimate(&self) -> f64 {
        let packet_bits = (self.mtu.get().max(64) * 8) as f64;
        let per_s: f64 = self
            .links
            .iter()
            .map(|l| l.rate.bps().max(0.0) / packet_bits)
            .sum();
        2.0 * per_s * self.duration.as_secs_f64()
    }
}

fn dur(what: &str, v: &Option<String>, default: Ps) -> Result<Ps, ScenarioError> {
    match v {
        None => Ok(default),
        Some(s) => ps_of(s).map_err(|e| invalid(format!("{what}: {e}"))),
    }
}

fn host(what: &str, h: Option<FileHost>) -> Result<HostConfig, ScenarioError> {
    let h = h.unwrap_or_default();
    let nic = h.nic.unwrap_or_default();
    let on = nic.coalescing.unwrap_or(true);
    let nic = if on {
        NicConfig {
            rx_abs_delay: dur(
                &format!("{what}.nic.rx_abs_delay"),
                &nic.rx_abs_delay,
                DEFAULT_RX_ABS_DELAY,
            )?,
            rx_pkt_delay: dur(
                &format!("{what}.nic.rx_pkt_delay"),
                &nic.rx_pkt_delay,
                Ps::ZERO,
            )?,
            throttle: dur(&format!("{what}.nic.throttle"), &nic.throttle, Ps::ZERO)?,
        }
    } else {
        NicConfig::OFF
    };
    for (k, v) in [
        ("rx_abs_delay", nic.rx_abs_delay),
        ("rx_pkt_delay", nic.rx_pkt_delay),
        ("throttle", nic.throttle),
    ] {
        if v > Ps::S {
            return Err(invalid(format!("{what}.nic.{k}: more than a second")));
        }
    }
    Ok(HostConfig {
        timer_resolution: dur(
            &format!("{what}.timer_resolution"),
            &h.timer_resolution,
            Ps::US,
        )?
        .max(Ps::from_ps(1)),
        syscall: dur(&format!("{what}.syscall"), &h.syscall, Ps::ZERO)?,
        jitter: dur(&format!("{what}.jitter"), &h.jitter, Ps::ZERO)?,
        max_pps: match h.max_pps {
            Some(0) => return Err(invalid(format!("{what}.max_pps: must be above 0"))),
            p => p,
        },
        rx_queue: h.rx_queue.unwrap_or(DEFAULT_RX_QUEUE).max(1),
        stamp_noise: dur(&format!("{what}.stamp_noise"), &h.stamp_noise, Ps::ZERO)?,
        nic,
    })
}

/// Packets a limited receiver holds waiting by default: a 4 MiB socket
/// buffer of 1500-byte datagrams, each charged about 2.3 KiB by the kernel.
pub const DEFAULT_RX_QUEUE: u32 = 1800;

impl Scenario {
    /// Reads and validates a scenario file.  A trace path is taken relative
    /// to the file's directory.
    pub fn load(path: &Path) -> Result<Scenario, ScenarioError> {
        let text = std::fs::read_to_string(path).map_err(|source| ScenarioError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let mut s = Scenario::parse(&text).map_err(|e| match e {
            ScenarioError::Toml { message, .. } => ScenarioError::Toml {
                path: path.to_path_buf(),
                message,
            },
            ScenarioError::Invalid(m) => ScenarioError::Toml {
                path: path.to_path_buf(),
                message: m,
            },
            other => other,
        })?;
        let dir = path.parent().unwrap_or(Path::new("."));
        for l in &mut s.links {
            if let Some(t) = &mut l.trace {
                if t.is_relative() {
                    *t = dir.join(&*t);
                }
            }
        }
        Ok(s)
    }

    /// Parses and validates scenario text.
    pub fn parse(text: &str) -> Result<Scenario, ScenarioError> {
        let f: FileScenario = toml::from_str(text).map_err(|e| ScenarioError::Toml {
            path: PathBuf::from("<scenario>"),
            message: e.to_string(),
        })?;
        let mtu = Bytes(f.mtu.unwrap_or(1500));
        if !(68..=65_535).contains(&mtu.get()) {
            return Err(invalid(format!("mtu {} outside 68..=65535", mtu.get())));
        }
        if f.link.is_empty() {
            return Err(invalid(
                "a scenario needs at least one [[link]] (rate = \"10G\", delay = \"1ms\")",
            ));
        }
        if f.link.len() > MAX_LINKS {
            return Err(invalid(format!("more than {MAX_LINKS} links")));
        }
        let n = f.link.len();
        let mut links = Vec::with_capacity(n);
        for (i, l) in f.link.into_iter().enumerate() {
            let rate: BitRate = l
                .rate
                .parse()
                .map_err(|e| invalid(format!("link {i} rate: {e}")))?;
            if rate_bps(rate) < 1000 {
                return Err(invalid(format!("link {i} rate: below 1 kb/s")));
            }
            let delay = dur(&format!("link {i} delay"), &l.delay, Ps::ZERO)?;
            if delay > Ps::from_secs(100) {
                return Err(invalid(format!("link {i} delay: over 100 s")));
            }
            let queue = match &l.queue {
                None => Bytes(
                    // A bandwidth-delay product of 10 ms, at least 64 KB.
                    (rate.bps() * 0.010 / 8.0).max(65_536.0) as u64,
                ),
                Some(q) => q
                    .parse::<Bytes>()
                    .map_err(|e| invalid(format!("link {i} queue: {e}")))?,
            };
            let service_clock = match &l.service_clock {
                None => None,
                Some(s) => {
                    let p =
                        ps_of(s).map_err(|e| invalid(format!("link {i} service_clock: {e}")))?;
                    if p.is_zero() || p > Ps::S {
                        return Err(invalid(format!(
                            "link {i} service_clock: must be in (0, 1 s]"
                        )));
                    }
                    Some(p)
                }
            };
            let hops = l.cross_hops.unwrap_or(1);
            if hops == 0 || i + hops > n {
                return Err(invalid(format!(
                    "link {i} cross_hops = {hops}: cross traffic entering at link {i} can cross 1..={} links",
                    n - i
                )));
            }
            let mut cross = Vec::new();
            for spec in &l.cross {
                let model = CrossModel::parse(spec, rate, mtu)
                    .map_err(|e| invalid(format!("link {i} cross `{spec}`: {e}")))?;
                if matches!(model, CrossModel::Tcp { .. }) {
                    return Err(invalid(format!(
                        "link {i} cross `{spec}`: TCP cross traffic is a [[tcp]] section (it crosses the whole path)"
                    )));
                }
                cross.push(CrossSpec {
                    spec: spec.clone(),
                    model,
                    hops,
                });
            }
            links.push(LinkConfig {
                rate,
                delay,
                queue,
                service_clock,
                cross,
                trace: l.trace.map(PathBuf::from),
            });
        }
        let mut tcp = Vec::new();
        let mut total = 0u32;
        for (i, t) in f.tcp.into_iter().enumerate() {
            let flows = t.flows.unwrap_or(1);
            total = total.saturating_add(flows);
            if flows == 0 || total > MAX_TCP {
                return Err(invalid(format!(
                    "tcp {i}: flows must be 1..={MAX_TCP} in all"
                )));
            }
            let window = t.window.unwrap_or(DEFAULT_RWND);
            if window == 0 {
                return Err(invalid(format!(
                    "tcp {i}: window must be at least 1 segment"
                )));
            }
            tcp.push(TcpSpec {
                flows,
                window,
                ssthresh: t.ssthresh.unwrap_or(DEFAULT_RWND).max(2),
                start: dur(&format!("tcp {i} start"), &t.start, Ps::ZERO)?,
                start_jitter: dur(&format!("tcp {i} start_jitter"), &t.start_jitter, Ps::ZERO)?,
                icim: t.icim,
            });
        }
        let method = match f.method {
            None => None,
            Some(m) => {
                let packet_size = Bytes(m.packet_size.unwrap_or(mtu.get()));
                if packet_size.get() < 29 || packet_size > mtu {
                    return Err(invalid(format!(
                        "method packet_size {} outside 29..=mtu ({})",
                        packet_size.get(),
                        mtu.get()
                    )));
                }
                Some(MethodSpec {
                    name: m.name.unwrap_or_else(|| "fac2".into()),
                    max_rate: match &m.max_rate {
                        None => None,
                        Some(r) => Some(
                            r.parse::<BitRate>()
                                .map_err(|e| invalid(format!("method max_rate: {e}")))?,
                        ),
                    },
                    packet_size,
                    gap: dur("method gap", &m.gap, Ps::MS)?,
                    max_plans: m.max_plans.unwrap_or(200).clamp(1, 10_000),
                })
            }
        };
        let icim = match f.icim {
            None => IcimConfig::default(),
            Some(c) => {
                let d = IcimConfig::default();
                let out = IcimConfig {
                    k: c.k.unwrap_or(d.k),
                    lambda: c.lambda.unwrap_or(d.lambda),
                    cmin: c.cmin.unwrap_or(d.cmin),
                    q_rtts: c.q_rtts.unwrap_or(d.q_rtts),
                };
                let ok = (2..=64).contains(&out.k)
                    && out.lambda.is_finite()
                    && (1.0..10.0).contains(&out.lambda)
                    && out.q_rtts.is_finite()
                    && (0.0..=1000.0).contains(&out.q_rtts);
                if !ok {
                    return Err(invalid(
                        "icim: k in 2..=64, lambda in [1, 10), q_rtts in [0, 1000]",
                    ));
                }
                out
            }
        };
        let duration = dur("duration", &f.duration, Ps::S)?;
        if duration.is_zero() || duration > Ps::from_secs(3600) {
            return Err(invalid("duration must be in (0, 1 h]"));
        }
        let truth_bin = dur("truth_bin", &f.truth_bin, Ps::from_us(10))?;
        if truth_bin < Ps::US || duration / truth_bin > 50_000_000 {
            return Err(invalid(
                "truth_bin must be at least 1us and leave at most 50 M bins over the duration",
            ));
        }
        Ok(Scenario {
            name: f.name.unwrap_or_else(|| "scenario".into()),
            seed: f.seed.unwrap_or(1),
            duration,
            mtu,
            truth_bin,
            sender: host("sender", f.sender)?,
            receiver: host("receiver", f.receiver)?,
            links,
            tcp,
            method,
            icim,
        })
    }

    /// Replaces the cross traffic of link `link` with `spec` (the CLI's
    /// `--cross`).
    pub fn set_cross(&mut self, link: usize, spec: &str) -> Result<(), ScenarioError> {
        let l = self
            .links
            .get_mut(link)
            .ok_or_else(|| invalid(format!("no link {link}")))?;
        let model = CrossModel::parse(spec, l.rate, self.mtu)
            .map_err(|e| invalid(format!("cross `{spec}`: {e}")))?;
        l.cross = vec![CrossSpec {
            spec: spec.to_string(),
            model,
            hops: 1,
        }];
        Ok(())
    }

    /// The link with the least capacity left over by its mean cross traffic
    /// (the tight link as the scenario intends it).
    pub fn intended_tight_link(&self) -> usize {
        let mut best = (0, f64::INFINITY);
        for (i, l) in self.links.iter().enumerate() {
            let x: f64 = self
                .links
                .iter()
                .enumerate()
                .filter(|(j, _)| *j <= i)
                .flat_map(|(j, lj)| {
                    lj.cross
                        .iter()
                        .filter(move |c| j + c.hops > i)
                        .map(|c| c.model.mean_rate().map_or(0.0, |r| r.bps()))
                })
                .sum();
            let a = l.rate.bps() - x;
            if a < best.1 {
                best = (i, a);
            }
        }
        best.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXAMPLE: &str = r#"
name = "t"
seed = 7
[receiver]
nic = { rx_abs_delay = "131.2us" }
[[link]]
rate = "20G"
delay = "1ms"
[[link]]
rate = "10G"
delay = "2ms"
queue = "2MB"
cross = ["poisson:40%"]
"#;

    #[test]
    fn a_scenario_parses_with_defaults() {
        let s = Scenario::parse(EXAMPLE).unwrap();
        assert_eq!(s.seed, 7);
        assert_eq!(s.links.len(), 2);
        assert_eq!(s.links[1].queue, Bytes(2_000_000));
        assert_eq!(s.receiver.nic.rx_abs_delay, DEFAULT_RX_ABS_DELAY);
        assert_eq!(s.intended_tight_link(), 1);
        assert!(s.method.is_none());
    }

    #[test]
    fn bad_scenarios_say_what_is_wrong() {
        let e = Scenario::parse("seed = 1").unwrap_err().to_string();
        assert!(e.contains("[[link]]"), "{e}");
        let e = Scenario::parse("[[link]]\nrate = \"fast\"")
            .unwrap_err()
            .to_string();
        assert!(e.contains("link 0 rate"), "{e}");
        let e = Scenario::parse("[[link]]\nrate = \"1G\"\ncross = [\"poisson:2G\"]")
            .unwrap_err()
            .to_string();
        assert!(e.contains("cross"), "{e}");
        let e = Scenario::parse("[[link]]\nrate = \"1G\"\nbogus = 1")
            .unwrap_err()
            .to_string();
        assert!(e.contains("bogus"), "{e}");
        let e = Scenario::parse("[[link]]\nrate = \"1G\"\ncross_hops = 2")
            .unwrap_err()
            .to_string();
        assert!(e.contains("cross_hops"), "{e}");
    }
}
