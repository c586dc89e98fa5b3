//! The host-limited verdict: did a host, not the path, set the result?
//!
//! Jin & Tierney 2003 (system capability effects): at high speed a tool often
//! measures its own host.  This module compares a result with what each end
//! was measured (or configured) to be able to send or receive, and says which
//! host and which resource bound it, with a plain-words advisory and the fix
//! where one exists.  Pure functions over plain numbers: the caller gathers
//! the figures (`pathsonde_net::host`) and prints the answer.
//!
//! Rules (`docs/verdict.md`):
//! - **binding limits** (the result is within [`DEFAULT_MARGIN`] of the limit,
//!   or above it): the client's pacing rate and per-packet send cost (CPU);
//!   either end's NIC speed.  Such a result is the host's, not the path's.
//! - **TCP advisories**: a socket buffer limit `B` caps a TCP window, so a TCP
//!   flow cannot exceed `B / RTT`; when that is below the path's result the
//!   advisory names the sysctl and a value that would fit.  pathsonde's own
//!   probes are UDP, so this never binds the measurement itself.

pub mod evidence;
pub mod flow;

pub use crate::estimate::host::{HostLimit, HostRole, Resource};

use crate::estimate::TrainRecord;
use crate::units::{BitRate, DurationNs};
use serde::{Deserialize, Serialize};

/// A result within this fraction of a host limit (or above it) is host-limited.
pub const DEFAULT_MARGIN: f64 = 0.10;

/// A train whose achieved sending rate fell more than this fraction short of
/// its target shows the sender's pacing limit (see [`measured_pacing`]).
pub(crate) const PACING_SHORTFALL: f64 = 0.05;

/// What the sender's trains showed: the fastest train's target and what the
/// sender achieved (its own send stamps).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MeasuredPacing {
    pub target_bps: BitRate,
    pub achieved_bps: BitRate,
}

/// The sender's pacing limit as the trains measured it: when the train that
/// was sent fastest fell short of its target by more than
/// [`PACING_SHORTFALL`], what it achieved is the most the sender could pace
/// (during this measurement, at this probe size).  `None` when that train
/// reached its target (the sender was not the limit) or there are no trains.
pub fn measured_pacing(trains: &[TrainRecord]) -> Option<MeasuredPacing> {
    let fastest = trains
        .iter()
        .filter(|t| t.packets > 1 && t.sending_rate.bps().is_finite())
        .max_by(|a, b| a.sending_rate.bps().total_cmp(&b.sending_rate.bps()))?;
    let (target, achieved) = (fastest.target_rate, fastest.sending_rate);
    (achieved.bps() > 0.0 && achieved.bps() < target.bps() * (1.0 - PACING_SHORTFALL)).then_some(
        MeasuredPacing {
            target_bps: target,
            achieved_bps: achieved,
        },
    )
}

/// One host's capability figures, as plain numbers; `None` = not known.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HostCaps {
    /// Highest rate this host paced probe-size packets, bits/s.
    pub pacing_bps: Option<BitRate>,
    /// Median cost of one `sendto` of a probe-size packet, ns.
    pub sendto_ns: Option<f64>,
    /// Link speed of the interface carrying the path, bits/s, and its name.
    pub nic_bps: Option<BitRate>,
    pub nic_name: Option<String>,
    /// `net.core.rmem_max`, `net.core.wmem_max` (bytes): the most a program
    /// may ask for with SO_RCVBUF / SO_SNDBUF.
    pub rmem_max_bytes: Option<u64>,
    pub wmem_max_bytes: Option<u64>,
    /// Third field of `net.ipv4.tcp_rmem` / `tcp_wmem` (bytes): the most TCP
    /// autotuning grows a buffer to.
    pub tcp_rmem_max_bytes: Option<u64>,
    pub tcp_wmem_max_bytes: Option<u64>,
}

/// What the verdict judges.
#[derive(Debug, Clone, PartialEq)]
pub struct VerdictInput {
    /// The result: the path's available bandwidth as estimated.
    pub result_bps: BitRate,
    /// Probe IP packet size, bytes (turns a per-packet cost into a rate).
    pub packet_bytes: u64,
    /// Round-trip time (for window caps); `None` skips them.  Written as
    /// seconds where this input is shown.
    pub rtt_s: Option<DurationNs>,
    /// Which end sent the probes.
    pub sender: HostRole,
    pub client: HostCaps,
    pub server: HostCaps,
    /// The sender's pacing limit as its trains showed it ([`measured_pacing`]);
    /// judged before, and in place of, the capability figure `pacing_bps`.
    pub measured_pacing: Option<MeasuredPacing>,
    /// Fraction; see [`DEFAULT_MARGIN`].
    pub margin: f64,
}

/// The verdict: every limit found, binding ones first.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Verdict {
    pub limits: Vec<HostLimit>,
}

impl Verdict {
    /// The limits that bound the measured result.
    pub fn binding(&self) -> impl Iterator<Item = &HostLimit> {
        self.limits.iter().filter(|l| l.binds_result)
    }
    pub fn is_host_limited(&self) -> bool {
        self.binding().next().is_some()
    }
    /// One sentence per limit, for the Advisory section.
    pub fn advisory(&self) -> Vec<String> {
        self.limits
            .iter()
            .map(|l| match &l.fix {
                Some(fix) => format!("{} {}", l.why, fix),
                None => l.why.clone(),
            })
            .collect()
    }
}

/// Formats bits/s as Mb/s or Gb/s with 3 significant figures.
/// A binding pacing limit of the sender at `limit_bps`, with its reason.
fn pacing_limit(host: HostRole, limit_bps: BitRate, why: String) -> HostLimit {
    HostLimit {
        host,
        resource: Resource::Pacing,
        limit_bps,
        binds_result: true,
        why,
        fix: Some("Use larger probes (--packet-size 9000 where the MTU allows), a faster sender, or measure between hosts whose pacing exceeds the path.".to_string()),
    }
}

pub(crate) fn rate_words(rate: BitRate) -> String {
    let bps = rate.bps();
    if bps >= 1e9 {
        format!("{:.2} Gb/s", bps / 1e9)
    } else {
        format!("{:.1} Mb/s", bps / 1e6)
    }
}

fn kib(bytes: u64) -> String {
    if bytes >= 1 << 20 {
        format!("{:.1} MiB", bytes as f64 / (1u64 << 20) as f64)
    } else {
        format!("{} KiB", bytes / 1024)
    }
}

/// The largest rate one TCP window of `window_bytes` sustains over `rtt`;
/// `None` for a non-positive RTT.
pub(crate) fn window_rate(window_bytes: u64, rtt: DurationNs) -> Option<BitRate> {
    let rtt_s = rtt.secs_f64();
    (rtt_s > 0.0).then(|| BitRate::from_bps(window_bytes as f64 * 8.0 / rtt_s))
}

/// The buffer (bytes) a TCP flow at `rate` over `rtt` needs: twice the
/// bandwidth-delay product (the kernel keeps part of a buffer for overhead),
/// rounded up to a MiB.
pub(crate) fn buffer_for(rate: BitRate, rtt: DurationNs) -> u64 {
    let bdp = (rate.bps() * rtt.secs_f64() / 8.0).max(0.0);
    let mib = 1u64 << 20;
    (((2.0 * bdp) as u64).div_ceil(mib)).max(1) * mib
}

/// Judges `input`.  Pure; never fails; unknown figures are skipped.
pub fn judge(input: &VerdictInput) -> Verdict {
    let mut limits = Vec::new();
    let result = input.result_bps.bps();
    let near =
        |limit: f64| result.is_finite() && limit > 0.0 && result >= limit * (1.0 - input.margin);
    let pct = |limit: f64| result / limit * 100.0;
    for (role, caps) in [
        (HostRole::Client, &input.client),
        (HostRole::Server, &input.server),
    ] {
        if role == input.sender {
            let mut pacing_named = false;
            if let Some(m) = input
                .measured_pacing
                .filter(|m| m.achieved_bps.is_positive())
            {
                let p = m.achieved_bps.bps();
                if near(p) {
                    pacing_named = true;
                    limits.push(pacing_limit(role, m.achieved_bps, format!(
                        "The {role} (sender) was asked to pace a train at {} and reached only {} ({:.0} %) with {}-byte packets; the result, {}, is {:.0} % of what it could send, so the sender, not the path, set it: the path carries at least this much.",
                        rate_words(m.target_bps), rate_words(m.achieved_bps), p / m.target_bps.bps() * 100.0,
                        input.packet_bytes, rate_words(input.result_bps), pct(p)
                    )));
                }
            }
            if let Some(rate) = caps.pacing_bps.filter(|p| p.is_positive() && !pacing_named) {
                let p = rate.bps();
                if near(p) {
                    limits.push(pacing_limit(role, rate, format!(
                        "The {role} (sender) can pace at most {} with {}-byte packets; the result, {}, is {:.0} % of that, so the sender, not the path, set it: the path carries at least this much.",
                        rate_words(rate), input.packet_bytes, rate_words(input.result_bps), pct(p)
                    )));
                }
            }
            if let Some(ns) = caps.sendto_ns.filter(|n| n.is_finite() && *n > 0.0) {
                let cpu = input.packet_bytes as f64 * 8.0 / (ns * 1e-9);
                if near(cpu) {
                    limits.push(HostLimit {
                        host: role,
                        resource: Resource::Cpu,
                        limit_bps: BitRate::from_bps(cpu),
                        binds_result: true,
                        why: format!(
                            "One sendto of a {}-byte packet costs the {role} {:.0} ns, at most {} of probes from one core; the result, {}, is {:.0} % of that.",
                            input.packet_bytes, ns, rate_words(BitRate::from_bps(cpu)), rate_words(input.result_bps), pct(cpu)
                        ),
                        fix: Some("Larger probes cost fewer calls per bit (--packet-size 9000 where the MTU allows).".into()),
                    });
                }
            }
        }
        if let Some(nic_rate) = caps.nic_bps.filter(|n| n.is_positive()) {
            let nic = nic_rate.bps();
            if near(nic) {
                let name = caps.nic_name.as_deref().unwrap_or("its interface");
                limits.push(HostLimit {
                    host: role,
                    resource: Resource::NicSpeed,
                    limit_bps: nic_rate,
                    binds_result: true,
                    why: format!(
                        "The {role}'s {name} runs at {}; the result, {}, is {:.0} % of it, so the {role}'s link, not the path beyond it, set it.",
                        rate_words(nic_rate), rate_words(input.result_bps), pct(nic)
                    ),
                    fix: None,
                });
            }
        }
        // TCP window caps: the receiver's rmem, the sender's wmem.  For a
        // flow in either direction each end is both, so check both.
        if let Some(rtt) = input.rtt_s {
            for (name, sysctl, limit) in [
                ("receive", "net.core.rmem_max", caps.rmem_max_bytes),
                ("send", "net.core.wmem_max", caps.wmem_max_bytes),
            ] {
                let Some(b) = limit else { continue };
                let Some(cap) = window_rate(b, rtt) else {
                    continue;
                };
                if cap.bps() < result * (1.0 - input.margin) {
                    let want = buffer_for(input.result_bps, rtt);
                    let tcp = if name == "receive" {
                        ("net.ipv4.tcp_rmem", caps.tcp_rmem_max_bytes)
                    } else {
                        ("net.ipv4.tcp_wmem", caps.tcp_wmem_max_bytes)
                    };
                    let tcp_note = match tcp.1 {
                        Some(t) if t >= want => format!(
                            " (TCP autotuning may grow to {} via {}, so this binds programs that set SO_{}BUF)",
                            kib(t), tcp.0, if name == "receive" { "RCV" } else { "SND" }
                        ),
                        _ => String::new(),
                    };
                    limits.push(HostLimit {
                        host: role,
                        resource: Resource::SocketBuffer,
                        limit_bps: cap,
                        binds_result: false,
                        why: format!(
                            "On the {role}, {sysctl} = {b} caps a TCP {name} window at {}; at {:.1} ms RTT that is {}, below the path's {}{tcp_note}. pathsonde's UDP probes are not affected; a TCP transfer would be.",
                            kib(b), rtt.secs_f64() * 1e3, rate_words(cap), rate_words(input.result_bps)
                        ),
                        fix: Some(format!(
                            "Raise it with: sysctl -w {sysctl}={want}{}",
                            match tcp.1 {
                                Some(t) if t < want => format!(
                                    " and sysctl -w {}=\"4096 131072 {want}\"",
                                    tcp.0
                                ),
                                _ => String::new(),
                            }
                        )),
                    });
                }
            }
        }
    }
    limits.sort_by_key(|l| !l.binds_result);
    Verdict { limits }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(result_bps: f64) -> VerdictInput {
        VerdictInput {
            result_bps: BitRate::from_bps(result_bps),
            packet_bytes: 1500,
            rtt_s: Some(DurationNs::from_secs_f64(0.080)),
            sender: HostRole::Client,
            client: HostCaps {
                pacing_bps: Some(BitRate::from_bps(1e9)),
                sendto_ns: Some(2_000.0), // 6 Gb/s of 1500-byte packets
                nic_bps: Some(BitRate::from_bps(10e9)),
                nic_name: Some("eth0".into()),
                rmem_max_bytes: Some(64 << 20),
                wmem_max_bytes: Some(64 << 20),
                tcp_rmem_max_bytes: Some(64 << 20),
                tcp_wmem_max_bytes: Some(64 << 20),
            },
            server: HostCaps {
                pacing_bps: Some(BitRate::from_bps(20e9)),
                sendto_ns: None,
                nic_bps: Some(BitRate::from_bps(10e9)),
                nic_name: Some("eth1".into()),
                rmem_max_bytes: Some(64 << 20),
                wmem_max_bytes: Some(64 << 20),
                tcp_rmem_max_bytes: Some(64 << 20),
                tcp_wmem_max_bytes: Some(64 << 20),
            },
            measured_pacing: None,
            margin: DEFAULT_MARGIN,
        }
    }

    fn train(target_bps: f64, sending_bps: f64) -> TrainRecord {
        use crate::{BitRate, Bytes};
        TrainRecord {
            train: 0,
            target_rate: BitRate::from_bps(target_bps),
            sending_rate: BitRate::from_bps(sending_bps),
            receiving_rate: Some(BitRate::from_bps(sending_bps)),
            car_rate_spread: None,
            packets: 100,
            bytes: Bytes(150_000),
            loss_fraction: 0.0,
            reading: None,
        }
    }

    #[test]
    fn trains_short_of_their_target_measure_the_pacing_limit() {
        // Loopback: 30 G asked, 5.47 G reached; a slower train reached its target.
        let trains = [train(30e9, 5.47e9), train(1e9, 0.99e9)];
        let m = measured_pacing(&trains).unwrap();
        assert_eq!((m.target_bps.bps(), m.achieved_bps.bps()), (30e9, 5.47e9));
        // Within 5 % of the target: not a pacing limit.
        assert_eq!(measured_pacing(&[train(1e9, 0.96e9)]), None);
        assert_eq!(measured_pacing(&[]), None);
    }

    #[test]
    fn a_result_at_the_trains_pacing_limit_names_the_client_even_when_caps_are_higher() {
        // The quick back-to-back figure (16.6 G) is far above the result; the
        // trains showed the sender reach only 5.47 G of 30 G.
        let mut i = input(5.3e9);
        i.client.pacing_bps = Some(BitRate::from_bps(16.6e9));
        i.client.sendto_ns = None;
        i.client.nic_bps = None;
        i.server.nic_bps = None;
        assert!(!judge(&i).is_host_limited(), "caps alone do not bind");
        i.measured_pacing = measured_pacing(&[train(30e9, 5.47e9)]);
        let v = judge(&i);
        let b: Vec<_> = v.binding().collect();
        assert_eq!(b.len(), 1, "{b:?}");
        assert_eq!(
            (b[0].host, b[0].resource),
            (HostRole::Client, Resource::Pacing)
        );
        assert_eq!(b[0].limit_bps.bps(), 5.47e9);
        assert!(b[0].why.contains("reached only 5.47 Gb/s"), "{}", b[0].why);
        assert!(b[0].why.contains("30.00 Gb/s"), "{}", b[0].why);
        let j = serde_json::to_value(b[0]).unwrap();
        assert_eq!(j["host"], "client");
        assert_eq!(j["resource"], "pacing");
    }

    #[test]
    fn a_measured_pacing_limit_far_above_the_result_does_not_bind() {
        // A 200 Mb/s path probed from 20 G down: the first train showed 5 G.
        let mut i = input(195e6);
        i.measured_pacing = measured_pacing(&[train(20e9, 5e9), train(400e6, 399e6)]);
        assert!(i.measured_pacing.is_some());
        assert!(!judge(&i).is_host_limited());
    }

    #[test]
    fn measured_and_capability_pacing_are_named_once() {
        let mut i = input(0.98e9);
        i.measured_pacing = Some(MeasuredPacing {
            target_bps: BitRate::from_bps(2e9),
            achieved_bps: BitRate::from_bps(1.0e9),
        });
        let v = judge(&i);
        assert_eq!(v.binding().count(), 1, "{v:?}");
        assert!(v.limits[0].why.contains("asked"));
    }

    #[test]
    fn at_98_percent_of_client_pacing_is_host_limited_by_the_client() {
        let v = judge(&input(0.98e9));
        assert!(v.is_host_limited());
        let b: Vec<_> = v.binding().collect();
        assert_eq!(b.len(), 1, "{b:?}");
        assert_eq!(b[0].host, HostRole::Client);
        assert_eq!(b[0].resource, Resource::Pacing);
        assert_eq!(b[0].limit_bps.bps(), 1e9);
        assert!(b[0].why.contains("98 %"), "{}", b[0].why);
        assert!(v.advisory()[0].contains("not the path"));
    }

    #[test]
    fn the_server_pacing_does_not_bind_when_the_client_sends() {
        let mut i = input(0.5e9);
        i.server.pacing_bps = Some(BitRate::from_bps(0.5e9));
        assert!(!judge(&i).is_host_limited());
    }

    #[test]
    fn a_server_nic_at_the_result_is_named() {
        let mut i = input(0.95e9);
        i.client.pacing_bps = Some(BitRate::from_bps(5e9));
        i.server.nic_bps = Some(BitRate::from_bps(1e9));
        let v = judge(&i);
        let b: Vec<_> = v.binding().collect();
        assert_eq!(b.len(), 1);
        assert_eq!(
            (b[0].host, b[0].resource),
            (HostRole::Server, Resource::NicSpeed)
        );
        assert!(b[0].why.contains("eth1"));
    }

    #[test]
    fn a_slow_sendto_binds_as_cpu() {
        let mut i = input(0.9e9);
        i.client.pacing_bps = None;
        i.client.sendto_ns = Some(12_000.0); // 1 Gb/s of 1500-byte packets
        let v = judge(&i);
        let b: Vec<_> = v.binding().collect();
        assert_eq!(
            (b[0].host, b[0].resource),
            (HostRole::Client, Resource::Cpu)
        );
        assert!((b[0].limit_bps.bps() - 1e9).abs() < 1.0);
    }

    #[test]
    fn a_socket_buffer_cap_gives_an_advisory_with_the_sysctl_fix() {
        let mut i = input(500e6);
        i.server.rmem_max_bytes = Some(212_992);
        i.server.tcp_rmem_max_bytes = Some(212_992);
        let v = judge(&i);
        assert!(!v.is_host_limited(), "UDP probes are not bound by it");
        assert_eq!(v.limits.len(), 1, "{v:?}");
        let l = &v.limits[0];
        assert_eq!(
            (l.host, l.resource),
            (HostRole::Server, Resource::SocketBuffer)
        );
        // 212992 B · 8 / 0.08 s = 21.3 Mb/s
        assert!((l.limit_bps.bps() - 21_299_200.0).abs() < 1.0);
        assert!(l.why.contains("net.core.rmem_max = 212992"), "{}", l.why);
        assert!(
            l.why.contains("208 KiB") && l.why.contains("21.3 Mb/s"),
            "{}",
            l.why
        );
        let fix = l.fix.as_deref().unwrap();
        // 2 · BDP = 2 · 500e6 · 0.08 / 8 = 10 MB → 10 MiB
        assert!(
            fix.contains("sysctl -w net.core.rmem_max=10485760"),
            "{fix}"
        );
        assert!(fix.contains("net.ipv4.tcp_rmem"), "{fix}");
        assert!(v.advisory()[0].contains("sysctl -w"));
    }

    #[test]
    fn a_path_well_below_every_limit_gives_no_verdict() {
        let v = judge(&input(200e6));
        assert!(!v.is_host_limited());
        assert!(v.limits.is_empty(), "{v:?}");
        assert!(v.advisory().is_empty());
    }

    #[test]
    fn unknown_figures_and_no_rtt_are_skipped() {
        let i = VerdictInput {
            result_bps: BitRate::from_bps(1e9),
            packet_bytes: 1500,
            rtt_s: None,
            sender: HostRole::Client,
            client: HostCaps::default(),
            server: HostCaps {
                rmem_max_bytes: Some(1),
                ..HostCaps::default()
            },
            measured_pacing: None,
            margin: DEFAULT_MARGIN,
        };
        assert_eq!(judge(&i), Verdict::default());
    }

    #[test]
    fn buffer_sizes_round_up_to_a_mib() {
        assert_eq!(
            buffer_for(BitRate::from_bps(1e6), DurationNs::from_ms(1)),
            1 << 20
        );
        assert_eq!(window_rate(212_992, DurationNs::ZERO), None);
    }
}
