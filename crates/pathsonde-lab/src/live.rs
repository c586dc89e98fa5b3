//! A lab path in service: the built namespaces plus everything that runs
//! on them — the pathsonde server in the receiver (and its UDP Speed Test
//! Protocol server on the standard port 24601), the cross-traffic sources,
//! the truth sampler — started in the right order and stopped together.
//! `lab run` measures on one; `lab up` keeps one standing.

use crate::cross::{CrossSource, TcpSink};
use crate::delay::{DelayConfig, DelayLine};
use crate::error::{LabError, Result};
use crate::netns;
use crate::topology::{addr, ip_rate_of_l2, Lab, Role};
use crate::truth::{self, LogPoint, QdiscSample, QdiscSampler};
use pathsonde_core::traffic::CrossModel;
use pathsonde_core::{BitRate, Bytes, DurationNs, TimeNs};
use pathsonde_net::udpst::{spawn_server as spawn_udpst, UdpstServerConfig, UdpstServerHandle};
use pathsonde_net::{Server, ServerConfig, ServerHandle};
use serde::Serialize;
use std::net::SocketAddr;
use std::time::Duration;

/// Port of the pathsonde server in the receiver namespace.
pub const SERVER_PORT: u16 = 5310;

/// Port of the UDPST server (RFC 9946's standard control port) in the
/// receiver namespace: `lab run --method capacity` and any UDPST client
/// (OB-UDPST's `udpst`) run across a lab test against it.
pub const UDPST_PORT: u16 = 24601;

/// A delay-line hold error above this marks a lab run as disturbed by a host stall.
const DISTURBED_HOLD: DurationNs = DurationNs::from_ms(2);

/// The truth over one window.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct WindowTruth {
    /// A at the IP layer for packets of the probe size (the narrow link's
    /// capacity bounds it when there are two routers).
    pub available: BitRate,
    /// Cross traffic offered to the tight link, IP layer.
    pub cross_ip: BitRate,
    /// The same at L2, as tbf counts it.
    pub cross_l2: BitRate,
}

/// Generators against the qdisc over a stretch without probes: they must agree.
#[derive(Debug, Clone, Serialize)]
pub struct TruthCheck {
    pub generators_l2_bps: BitRate,
    pub qdisc_l2_bps: BitRate,
    pub relative_difference: f64,
}

pub struct LivePath {
    delay: Option<DelayLine>,
    server: Option<ServerHandle>,
    udpst: Option<UdpstServerHandle>,
    sampler: QdiscSampler,
    sources: Vec<CrossSource>,
    _tcp_sink: Option<TcpSink>,
    has_cross: bool,
}

impl LivePath {
    /// Starts the delay line (if the spec asks for one), the server, the
    /// sampler and then the cross traffic.  `probe_rate` is the most the
    /// probes will push through the delay line (it refuses more than it
    /// can carry without loss).
    pub fn start(
        lab: &Lab,
        models: &[CrossModel],
        seed: u64,
        probe_rate: BitRate,
    ) -> Result<LivePath> {
        let delay = match lab.spec.delay {
            Some(d) => {
                let mut cfg = DelayConfig::new("to-snd", d, probe_rate);
                cfg.mtu = lab.spec.mtu;
                Some(DelayLine::start(&lab.ns(Role::Router), cfg)?)
            }
            None => None,
        };
        let server_addr = LivePath::server_addr();
        let server = netns::run_in(&lab.ns(Role::Receiver), move || {
            Ok(Server::bind(ServerConfig::new(server_addr))?.spawn()?)
        })?;
        // The UDPST server, in-process like the other and with `serve
        // --udpst-open 10G`'s settings (no authentication, jumbo sizes allowed above 1 Gb/s as
        // the protocol's default, 10 Gb/s ceiling, 1 h longest test): its
        // connection threads are spawned from a thread inside the receiver
        // namespace, so their test sockets are the receiver's too.
        let udpst_addr = LivePath::udpst_addr();
        let udpst = netns::run_in(&lab.ns(Role::Receiver), move || {
            let mut cfg = UdpstServerConfig::new(udpst_addr);
            // The lab's own clients test without a key: opted in, at the
            // full ceiling (the namespaces reach nobody else).
            cfg.open = Some(cfg.max_rate);
            spawn_udpst(cfg).map_err(|e| {
                LabError::Capability(format!("starting the UDPST server on {udpst_addr}: {e}"))
            })
        })?;
        let sampler = QdiscSampler::start(lab.tight_link(), Duration::from_millis(100))?;
        let (sources, tcp_sink) = start_sources(lab, models, seed, None)?;
        Ok(LivePath {
            delay,
            server: Some(server),
            udpst: Some(udpst),
            sampler,
            sources,
            _tcp_sink: tcp_sink,
            has_cross: !models.is_empty(),
        })
    }

    /// Stops the running cross traffic and starts `models` in its place,
    /// keeping the server, the sampler and the delay line: a load sweep
    /// changes the load without rebuilding the lab (`compare`).  The
    /// generators' logs start afresh, so a truth window must lie inside one
    /// load.  Returns whatever went wrong stopping the old sources.
    pub fn replace_cross(
        &mut self,
        lab: &Lab,
        models: &[CrossModel],
        seed: u64,
    ) -> Result<Vec<String>> {
        let mut notes = Vec::new();
        for s in &mut self.sources {
            if let Err(e) = s.stop() {
                notes.push(format!("cross traffic: {e}"));
            }
        }
        self.sources.clear();
        let (sources, sink) = start_sources(lab, models, seed, self._tcp_sink.take())?;
        self.sources = sources;
        self._tcp_sink = sink;
        self.has_cross = !models.is_empty();
        Ok(notes)
    }

    /// Cross traffic offered over consecutive `step`s from `from` to `to`
    /// (L2, from the generators' logs): the truth as a time series.  Each
    /// point is the bin's start and its rate.
    pub fn cross_l2_series(
        &self,
        from: TimeNs,
        to: TimeNs,
        step: DurationNs,
    ) -> Vec<(TimeNs, BitRate)> {
        let logs = self.logs();
        let mut out = Vec::new();
        if step.ns() <= 0 {
            return out;
        }
        let mut t = from;
        while t + step <= to {
            let rate = if self.has_cross {
                truth::cross_l2_rate(&logs, t, t + step).unwrap_or(BitRate::ZERO)
            } else {
                BitRate::ZERO
            };
            out.push((t, rate));
            t = t + step;
        }
        out
    }

    pub fn server_addr() -> SocketAddr {
        SocketAddr::from((addr::RECEIVER, SERVER_PORT))
    }

    /// The UDPST server's control address in the receiver namespace.
    pub fn udpst_addr() -> SocketAddr {
        SocketAddr::from((addr::RECEIVER, UDPST_PORT))
    }

    fn logs(&self) -> Vec<Vec<LogPoint>> {
        self.sources.iter().map(|s| s.log.points()).collect()
    }

    pub fn qdisc_samples(&self) -> Vec<QdiscSample> {
        self.sampler.samples()
    }

    /// Cross traffic offered over `[from, to]`, L2, from the generators' logs.
    pub fn cross_l2(&self, from: TimeNs, to: TimeNs) -> BitRate {
        if !self.has_cross {
            return BitRate::ZERO;
        }
        truth::cross_l2_rate(&self.logs(), from, to).unwrap_or(BitRate::ZERO)
    }

    /// How far the cross-traffic generators fell behind their schedules
    /// over `(from, to]`; `None` without cross traffic.
    pub fn generator_lag(&self, from: TimeNs, to: TimeNs) -> Option<truth::GeneratorLag> {
        self.has_cross
            .then(|| truth::generator_lag(&self.logs(), from, to))
    }

    /// The truth over `[from, to]` for probes of `probe_size`.
    pub fn truth(&self, lab: &Lab, from: TimeNs, to: TimeNs, probe_size: Bytes) -> WindowTruth {
        let cross_l2 = self.cross_l2(from, to);
        let tight = truth::available_ip(lab.spec.capacity, cross_l2, probe_size);
        let available = lab
            .spec
            .narrow
            .map_or(tight, |n| ip_rate_of_l2(n, probe_size).min(tight));
        WindowTruth {
            available,
            cross_ip: ip_rate_of_l2(cross_l2, probe_size),
            cross_l2,
        }
    }

    /// What a perfect reader of the probes' own stretches would call A (IP
    /// layer, as [`LivePath::truth`]): C less the cross traffic offered
    /// while the probes were on the path.  `None` without cross traffic or
    /// windows.
    pub fn sampled_available(
        &self,
        lab: &Lab,
        windows: &truth::ProbeWindows,
        probe_size: Bytes,
    ) -> Option<BitRate> {
        if !self.has_cross {
            return None;
        }
        let cross_l2 = truth::cross_l2_rate_within(&self.logs(), windows)?;
        let tight = truth::available_ip(lab.spec.capacity, cross_l2, probe_size);
        Some(
            lab.spec
                .narrow
                .map_or(tight, |n| ip_rate_of_l2(n, probe_size).min(tight)),
        )
    }

    /// Compares the generators with the qdisc over a stretch inside
    /// `[from, to]` when no probe was sent.  Both rates are taken over the
    /// same interval — between the first and last qdisc samples inside the
    /// stretch — so Poisson noise cannot tell them apart.
    pub fn check(&self, from: TimeNs, to: TimeNs) -> Option<TruthCheck> {
        if !self.has_cross {
            return None;
        }
        let samples = self.qdisc_samples();
        let inside: Vec<&QdiscSample> = samples
            .iter()
            .filter(|s| s.at_ns >= from.ns() && s.at_ns <= to.ns())
            .collect();
        let (a, b) = (inside.first()?, inside.last()?);
        let (t0, t1) = (TimeNs::from_ns(a.at_ns), TimeNs::from_ns(b.at_ns));
        let q = truth::qdisc_rate(&samples, t0, t1)?;
        let g = truth::cross_l2_rate(&self.logs(), t0, t1)?;
        Some(TruthCheck {
            generators_l2_bps: g,
            qdisc_l2_bps: q,
            relative_difference: (q.bps() - g.bps()) / g.bps().max(1.0),
        })
    }

    /// Stops everything; returns the qdisc series and anything that went wrong.
    pub fn stop(mut self) -> (Vec<QdiscSample>, Vec<String>) {
        let mut notes = Vec::new();
        for s in &mut self.sources {
            if let Err(e) = s.stop() {
                notes.push(format!("cross traffic: {e}"));
            }
        }
        let series = self.sampler.stop();
        if let Some(server) = self.server.take() {
            if let Err(e) = server.stop() {
                notes.push(format!("server: {e}"));
            }
        }
        if let Some(udpst) = self.udpst.take() {
            udpst.stop();
        }
        if let Some(mut d) = self.delay.take() {
            match d.stop() {
                Ok(st) => {
                    if let Some(h) = st.hold_error {
                        notes.push(format!(
                            "delay line: {} packets held; hold error median {}, p99 {}, max {}; {} dropped (queue full)",
                            st.packets, h.median, h.p99, h.max, st.dropped_queue_full
                        ));
                        // The machine itself stalls now and then (100+ ms on
                        // this class of VM); the line cannot prevent it, but a
                        // run it hit must not pass for a clean one.
                        if h.max > DISTURBED_HOLD {
                            notes.push(format!(
                                "the delay line held a packet {} too long: the host stalled during this lab run, so its estimates may be disturbed",
                                h.max
                            ));
                        }
                    }
                    notes.extend(d.notes().iter().cloned());
                }
                Err(e) => notes.push(format!("delay line: {e}")),
            }
        }
        (series, notes)
    }
}

/// Starts one cross-traffic source per model (each in its own source
/// namespace), and the TCP sink when a model needs one (reusing `sink`).
fn start_sources(
    lab: &Lab,
    models: &[CrossModel],
    seed: u64,
    sink: Option<TcpSink>,
) -> Result<(Vec<CrossSource>, Option<TcpSink>)> {
    let (sink_role, sink_ip) = lab.cross_sink();
    let needs_tcp = models.iter().any(|m| matches!(m, CrossModel::Tcp { .. }));
    let tcp_sink = match (sink, needs_tcp) {
        (Some(s), _) => Some(s),
        (None, true) => Some(TcpSink::start(&lab.ns(sink_role), sink_ip)?),
        (None, false) => None,
    };
    let mut sources = Vec::new();
    for (i, m) in models.iter().enumerate() {
        let ns = lab.ns(Role::Cross(i as u32));
        let src = match (m.schedule(seed.wrapping_add(i as u64)), m) {
            (Some(schedule), _) => {
                CrossSource::udp(&ns, sink_ip, Box::new(schedule.map(|p| (p.at, p.size))))?
            }
            (None, CrossModel::Tcp { flows }) => CrossSource::tcp(&ns, sink_ip, *flows)?,
            (None, other) => {
                return Err(LabError::Spec(format!(
                    "cross traffic '{}' has no schedule",
                    other.describe()
                )))
            }
        };
        sources.push(src);
    }
    Ok((sources, tcp_sink))
}
