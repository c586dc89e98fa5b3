//! `pathsonde measure`: netest's whole report in one session — RTT, FAC²
//! available bandwidth, the maximum burst size, UDP achievable throughput
//! (one stream rising until loss, two streams, burst-controlled), TCP with
//! the optimal window and the -FullD check, the parallel-stream sweep, and
//! the Advisory — within a time budget.
//!
//! This file only sequences the tests and keeps the budget; every decision
//! (the ramp's next rate, the window, the stream counts, the advice) is a
//! pure function of `pathsonde_core::advice`.

use super::client::FlowResult;
use super::mbs::{measure_mbs, MbsMeasurement};
use crate::client::{
    client_host_report, interface_of, Client, ClientConfig, HostSide, MeasurementRun,
};
use crate::error::{NetError, Result};
use crate::rtt::RttSummary;
use crate::software;
use pathsonde_core::advice::{self, AdviceInput, StreamAdvice, StreamPoint, UdpStep};
use pathsonde_core::methods::registry::{self, MethodSettings};
use pathsonde_core::units::{serde_secs, serde_std_secs};
use pathsonde_core::{BitRate, Bytes, DurationNs};
use pathsonde_wire::flow::{BufferLimits, FlowProto, TcpInfo};
use serde::Serialize;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

mod tcp;
mod udp;

use tcp::TcpPhase;
use udp::UdpPhase;

/// The smallest window the tuned TCP test asks for, bytes.
pub const MIN_TUNED_WINDOW: u64 = 64 << 10;

#[derive(Debug, Clone)]
pub struct MeasureOptions {
    pub server: SocketAddr,
    /// The whole measurement should end within this.
    pub budget: Duration,
    /// IP bytes of UDP probes and MBS bursts' packets.
    pub packet: Bytes,
    /// Largest burst the MBS search tries.
    pub max_burst: Bytes,
    pub mbs_searches: u32,
    /// Stream counts of the parallel sweep.
    pub sweep: Vec<u16>,
    /// Fastest rate FAC² and the UDP ramp probe at.
    pub max_rate: BitRate,
    /// The tight link's capacity when the user knows it
    /// (`--known-capacity`); FAC² measures it otherwise.
    pub known_capacity: Option<BitRate>,
    pub reply_timeout: Duration,
}

impl MeasureOptions {
    pub fn new(server: SocketAddr) -> Self {
        MeasureOptions {
            server,
            budget: Duration::from_secs(30),
            packet: Bytes(1500),
            max_burst: Bytes(8 << 20),
            mbs_searches: 3,
            sweep: vec![1, 2, 3, 4, 6, 8],
            max_rate: BitRate::from_gbps(1.0),
            known_capacity: None,
            reply_timeout: Duration::from_secs(3),
        }
    }
}

/// One flow, as the report keeps it.
#[derive(Debug, Clone, Serialize)]
pub struct FlowSummary {
    pub proto: String,
    pub streams: u16,
    pub reverse: bool,
    /// Socket buffers asked for (0: the system's, autotuned).
    pub window: u32,
    pub full_duplex_buffers: bool,
    /// How long the flow was asked to run (seconds in JSON).
    #[serde(with = "serde_secs")]
    pub duration_s: DurationNs,
    /// Goodput at the receiver, whole flow.
    pub throughput_bps: BitRate,
    /// Goodput after the first interval (TCP: slow start left out).
    pub steady_bps: BitRate,
    /// What the sender put out.
    pub sent_bps: BitRate,
    pub bytes_received: u64,
    pub udp_asked_bps: Option<BitRate>,
    pub udp_loss: Option<f64>,
    pub retrans_fraction: Option<f64>,
    pub interval_bps: Vec<BitRate>,
    pub sender_tcp_info: Vec<TcpInfo>,
    pub receiver_tcp_info: Vec<TcpInfo>,
    /// Socket buffers the kernel gave the first stream on each end.
    pub sender_buffers: (u32, u32),
    pub receiver_buffers: (u32, u32),
    pub errors: Vec<String>,
}

impl FlowSummary {
    pub fn of(r: &FlowResult) -> FlowSummary {
        let tcp = |s: &pathsonde_wire::flow::FlowSide| -> Vec<TcpInfo> {
            s.streams.iter().filter_map(|x| x.tcp).collect()
        };
        let bufs = |s: &pathsonde_wire::flow::FlowSide| {
            s.streams.first().map_or((0, 0), |x| (x.sndbuf, x.rcvbuf))
        };
        FlowSummary {
            proto: format!("{:?}", r.spec.proto).to_lowercase(),
            streams: r.spec.streams,
            reverse: r.spec.reverse,
            window: r.spec.window,
            full_duplex_buffers: r.spec.full_duplex_buffers,
            duration_s: DurationNs::from_ms(i64::from(r.spec.duration_ms)),
            throughput_bps: r.throughput(),
            steady_bps: if r.spec.proto == FlowProto::Tcp {
                r.steady_throughput()
            } else {
                r.throughput()
            },
            sent_bps: r.sent_rate(),
            bytes_received: r.received().get(),
            udp_asked_bps: (r.spec.proto == FlowProto::Udp)
                .then_some(BitRate::from_bps(r.spec.udp_rate_bps as f64)),
            udp_loss: r.udp_loss(),
            retrans_fraction: r.retrans_fraction(),
            interval_bps: r.interval_rates(),
            sender_tcp_info: tcp(r.sender()),
            receiver_tcp_info: tcp(r.receiver()),
            sender_buffers: bufs(r.sender()),
            receiver_buffers: bufs(r.receiver()),
            errors: [r.client.error.clone(), r.server.error.clone()]
                .into_iter()
                .flatten()
                .collect(),
        }
    }
    /// The figure the report uses: steady-state goodput.
    pub fn throughput(&self) -> BitRate {
        self.steady_bps
    }
}

/// Time and bytes of one part of the measurement.
#[derive(Debug, Clone, Serialize)]
pub struct Phase {
    pub name: String,
    /// How long this part took (seconds in JSON, written as std writes them).
    #[serde(with = "serde_std_secs")]
    pub seconds: DurationNs,
    /// Bytes this part put on the path (probes or flow data).
    pub bytes: u64,
}

/// Everything `measure` found.
#[derive(Debug, Clone, Serialize)]
pub struct MeasureRun {
    pub server: SocketAddr,
    pub client_software: String,
    pub server_software: String,
    pub client_host: HostSide,
    pub server_host: HostSide,
    /// The time budget asked for and the time taken (seconds in JSON,
    /// written as `std::time::Duration::as_secs_f64` wrote them).
    #[serde(with = "serde_std_secs")]
    pub budget_s: DurationNs,
    #[serde(with = "serde_std_secs")]
    pub duration_s: DurationNs,
    pub rtt_control: RttSummary,
    pub rtt_echo: Option<RttSummary>,
    /// What FAC² was told (max rate, packet size, the user's known capacity).
    pub abw_settings: MethodSettings,
    /// The FAC² measurement (RTT, estimate, trains), when it gave one.
    pub abw: Option<MeasurementRun>,
    pub mbs: Option<MbsMeasurement>,
    pub safe_burst_interval: Option<DurationNs>,
    pub udp_ramp: Vec<UdpStep>,
    pub udp_single: Option<BitRate>,
    pub udp_sender_limited: bool,
    /// The UDP ramp ended where the server's socket dropped datagrams
    /// itself (its receive buffer was full), not at the path's loss.
    pub udp_receiver_limited: bool,
    pub udp_multi: Option<FlowSummary>,
    pub udp_multi_helps: Option<bool>,
    pub udp_burst: Option<FlowSummary>,
    /// The rate the TCP advice is judged against: FAC²'s A, but at least
    /// the lossless single-stream UDP rate (`advice::reference_rate`).
    pub reference_rate: Option<BitRate>,
    pub bdp_window: Option<Bytes>,
    pub optimal_window: Option<Bytes>,
    pub tcp_tuned: Option<FlowSummary>,
    pub tcp_full_duplex: Option<FlowSummary>,
    pub tcp_sweep: Vec<FlowSummary>,
    pub streams: Option<StreamAdvice>,
    /// The receiving and sending ends' buffer limits during the TCP tests.
    pub receiver_limits: BufferLimits,
    pub sender_limits: BufferLimits,
    pub advisory: Vec<String>,
    pub phases: Vec<Phase>,
    pub notes: Vec<String>,
}

impl MeasureRun {
    /// Bytes put on the path over the whole measurement.
    pub fn bytes_used(&self) -> u64 {
        self.phases.iter().map(|p| p.bytes).sum()
    }
    /// TCP throughputs seen (min, mean, max) over every TCP flow.
    pub fn tcp_range(&self) -> Option<(BitRate, BitRate, BitRate)> {
        let v: Vec<f64> = self
            .tcp_tuned
            .iter()
            .chain(self.tcp_full_duplex.iter())
            .chain(self.tcp_sweep.iter())
            .map(|f| f.steady_bps.bps())
            .collect();
        if v.is_empty() {
            return None;
        }
        let min = v.iter().copied().fold(f64::INFINITY, f64::min);
        let max = v.iter().copied().fold(0.0, f64::max);
        let mean = v.iter().sum::<f64>() / v.len() as f64;
        Some((
            BitRate::from_bps(min),
            BitRate::from_bps(mean),
            BitRate::from_bps(max),
        ))
    }
    pub fn rtt(&self) -> DurationNs {
        self.rtt_echo.as_ref().unwrap_or(&self.rtt_control).median
    }
    pub fn available(&self) -> Option<BitRate> {
        self.abw.as_ref().map(|a| a.estimate.available)
    }
}

/// UDP payload per datagram for `packet` IP bytes.
fn payload_of(packet: Bytes, server: &SocketAddr) -> u16 {
    (packet
        .get()
        .saturating_sub(crate::udp::ip_udp_overhead(server)))
    .clamp(64, 65_000) as u16
}

/// Runs the whole measurement; `progress` hears each step in words.
///
/// The seven phases, in order, each a method of [`Session`]: connect (both
/// hosts' reports), RTT and FAC², MBS, the time plan for the flows, the UDP
/// tests, the TCP tests, and the advice.  Each phase reads what the earlier
/// ones found and nothing else, so the order is the only coupling.
pub fn measure(opts: &MeasureOptions, progress: &mut dyn FnMut(&str)) -> Result<MeasureRun> {
    let mut s = Session::connect(opts, progress)?;
    let fac2 = s.rtt_and_fac2()?;
    let mbs = s.mbs(&fac2)?;
    let plan = s.plan_flows(fac2.rtt);
    let udp = s.udp(&plan, &fac2, &mbs)?;
    let tcp = s.tcp(&plan, &fac2, &mbs, &udp)?;
    Ok(s.finish(fac2, mbs, udp, tcp))
}

/// One `measure` run between its phases: the open session, the clock
/// against the budget, and what every phase adds to the report's timing
/// and notes.
struct Session<'a> {
    opts: &'a MeasureOptions,
    progress: &'a mut dyn FnMut(&str),
    started: Instant,
    /// The budget less a second: closing and reporting take time too.
    deadline: Instant,
    client: Client,
    client_host: HostSide,
    server_host: HostSide,
    server_software: String,
    phases: Vec<Phase>,
    notes: Vec<String>,
}

/// What the RTT and FAC² phase found.
struct Fac2Phase {
    rtt_control: RttSummary,
    rtt_echo: Option<RttSummary>,
    /// The echo RTT's median when there is one, else the control RTT's.
    rtt: DurationNs,
    /// How long to wait for a train's last packets.
    linger: Duration,
    settings: MethodSettings,
    abw: Option<MeasurementRun>,
    available: Option<BitRate>,
}

/// What the MBS phase found.
struct MbsPhase {
    mbs: Option<MbsMeasurement>,
    /// The median MBS, when above zero.
    bytes: Option<Bytes>,
    /// The bursts' line rate, else FAC²'s A.
    line: Option<BitRate>,
    safe_burst_interval: Option<DurationNs>,
}

/// How the time left is shared among the flows.
struct FlowPlan {
    /// About what each flow costs beyond its duration, seconds.
    flow_cost: f64,
    /// TCP flows planned: the sweep plus the tuned and -FullD tests.
    tcp_flows: f64,
    /// Seconds per TCP flow as planned before the UDP tests.
    tcp_secs: f64,
    /// Seconds per UDP ramp step.
    udp_step: f64,
    payload: u16,
}

impl<'a> Session<'a> {
    /// Phase 1: both hosts' reports and the control session.
    fn connect(opts: &'a MeasureOptions, progress: &'a mut dyn FnMut(&str)) -> Result<Self> {
        let started = Instant::now();
        let deadline = started + opts.budget.saturating_sub(Duration::from_secs(1));
        let mut cfg = ClientConfig::new(opts.server);
        cfg.reply_timeout = opts.reply_timeout;
        cfg.connect_timeout = opts.reply_timeout;
        let client_report = client_host_report();
        progress("connecting; both hosts' reports");
        let client = Client::connect(cfg)?;
        let client_host = HostSide {
            report: Some(client_report),
            unavailable: None,
            interface: interface_of(client.local_ip()),
            pacer: Some(client.pacer_mode()),
        };
        let server_host = client.server_host().clone();
        let server_software = client.server_software().to_string();
        Ok(Session {
            opts,
            progress,
            started,
            deadline,
            client,
            client_host,
            server_host,
            server_software,
            phases: Vec::new(),
            notes: Vec::new(),
        })
    }

    /// Seconds left before the deadline.
    fn left(&self) -> f64 {
        self.deadline
            .saturating_duration_since(Instant::now())
            .as_secs_f64()
    }

    fn phase(&mut self, name: &str, t: Instant, bytes: u64) {
        self.phases.push(Phase {
            name: name.into(),
            seconds: DurationNs::from_std(t.elapsed()),
            bytes,
        });
    }

    /// Phase 2: RTT over the control channel and by echo, then FAC².
    fn rtt_and_fac2(&mut self) -> Result<Fac2Phase> {
        let opts = self.opts;
        let t = Instant::now();
        (self.progress)("RTT");
        let rtt_control = self.client.control_rtt(10)?;
        let echo_wait = (rtt_control.max.to_std() * 4)
            .max(Duration::from_millis(100))
            .min(opts.reply_timeout);
        let rtt_echo = self.client.echo_rtt(10, echo_wait)?;
        let rtt = rtt_echo.as_ref().unwrap_or(&rtt_control).median;
        let linger = (rtt_echo.as_ref().unwrap_or(&rtt_control).max.to_std() * 4)
            .max(Duration::from_millis(20));
        (self.progress)("available bandwidth (FAC²)");
        let settings = MethodSettings {
            max_bytes: None,
            precision: None,
            max_rate: opts.max_rate,
            packet_size: opts.packet,
            clock_resolution: crate::clock::monotonic_resolution(),
            known_capacity: opts.known_capacity,
        };
        let mut method = registry::build(registry::MethodName::Fac2, &settings);
        let abw = match self.client.run_method(method.as_mut(), linger, &mut |_| {}) {
            Ok(estimate) => Some(MeasurementRun {
                server: opts.server,
                server_software: self.client.server_software().to_string(),
                client_software: software(),
                rtt_control,
                rtt_echo,
                duration: DurationNs::from_std(t.elapsed()),
                send_clock: self.client.client_clock(),
                recv_clock: self.client.server_clock(),
                client_host: self.client_host.clone(),
                server_host: self.server_host.clone(),
                estimate,
            }),
            Err(e @ (NetError::NoEstimate(_) | NetError::ProbesLost { .. })) => {
                self.notes.push(format!("available bandwidth: {e}"));
                None
            }
            Err(e) => return Err(e),
        };
        self.phase(
            "rtt+fac2",
            t,
            abw.as_ref().map_or(0, |a| a.estimate.cost.bytes.get()),
        );
        let available = abw.as_ref().map(|a| a.estimate.available);
        if let Some(a) = available {
            (self.progress)(&format!("available bandwidth {a}"));
        }
        Ok(Fac2Phase {
            rtt_control,
            rtt_echo,
            rtt,
            linger,
            settings,
            abw,
            available,
        })
    }

    /// Phase 3: the maximum burst size, and the burst interval it makes safe.
    fn mbs(&mut self, fac2: &Fac2Phase) -> Result<MbsPhase> {
        let opts = self.opts;
        let t = Instant::now();
        (self.progress)("maximum burst size");
        let progress = &mut *self.progress;
        let mbs = match measure_mbs(
            &mut self.client,
            opts.packet,
            opts.max_burst,
            opts.mbs_searches,
            fac2.linger,
            &mut |s| progress(&format!("  MBS search: {} bytes", s.bytes.get())),
        ) {
            Ok(m) => Some(m),
            Err(e @ (NetError::Timeout { .. } | NetError::Input(_))) => {
                self.notes.push(format!("maximum burst size: {e}"));
                None
            }
            Err(e) => return Err(e),
        };
        self.phase("mbs", t, mbs.as_ref().map_or(0, |m| m.bytes_sent.get()));
        let bytes = mbs
            .as_ref()
            .map(|m| m.summary.median)
            .filter(|b| b.get() > 0);
        let line = mbs
            .as_ref()
            .and_then(|m| m.path_line_rate)
            .or(fac2.available);
        let safe_burst_interval = match (bytes, line) {
            (Some(m), Some(l)) => advice::safe_burst_interval(m, l),
            _ => None,
        };
        Ok(MbsPhase {
            mbs,
            bytes,
            line,
            safe_burst_interval,
        })
    }

    /// Phase 4: the time plan for the flows.  What is left goes a quarter
    /// to UDP, the rest to TCP; each flow costs about a fifth of a second
    /// beyond its duration.
    fn plan_flows(&self, rtt: DurationNs) -> FlowPlan {
        let flow_cost = 0.2 + 2.0 * rtt.secs_f64();
        let remaining = (self.left() - 0.5).max(0.0);
        let tcp_flows = self.opts.sweep.len() as f64 + 2.0;
        let tcp_secs = ((remaining * 0.72) / tcp_flows - flow_cost).clamp(0.4, 10.0);
        let udp_step = ((remaining * 0.25) / 10.0 - flow_cost).clamp(0.2, 1.0);
        FlowPlan {
            flow_cost,
            tcp_flows,
            tcp_secs,
            udp_step,
            payload: payload_of(self.opts.packet, &self.opts.server),
        }
    }

    /// Phase 7: closes the session, then the stream advice, the Advisory
    /// and the report.
    fn finish(
        mut self,
        fac2: Fac2Phase,
        mbs: MbsPhase,
        udp: UdpPhase,
        tcp: TcpPhase,
    ) -> MeasureRun {
        self.client.close();
        let opts = self.opts;
        let points: Vec<StreamPoint> = tcp
            .sweep
            .iter()
            .map(|f| StreamPoint {
                streams: u32::from(f.streams),
                throughput: f.throughput(),
            })
            .collect();
        // With only a lower bound on A, "enough streams" and "streams that
        // intrude" have nothing to be judged against.
        let only_bounds = tcp.reference.is_none() && (tcp.a_is_bound || tcp.udp_is_bound);
        let streams = (!only_bounds)
            .then(|| advice::stream_advice(&points, tcp.reference))
            .flatten();
        let input = AdviceInput {
            rtt: Some(fac2.rtt),
            mbs: mbs.bytes,
            bdp: tcp.bdp_window,
            available: tcp.reference,
            tcp_single_default: tcp
                .sweep
                .first()
                .filter(|f| f.streams == 1)
                .map(FlowSummary::throughput),
            tcp_single_tuned: tcp.tuned.as_ref().map(FlowSummary::throughput),
            tcp_full_duplex: tcp.full_duplex.as_ref().map(FlowSummary::throughput),
            udp_single: udp.single,
            udp_multi: udp.multi.as_ref().map(FlowSummary::throughput),
            receiver_tcp_rmem_max: tcp.receiver_limits.tcp_rmem_max,
            sender_tcp_wmem_max: tcp.sender_limits.tcp_wmem_max,
            receiver_rmem_max: tcp.receiver_limits.rmem_max,
            sender_wmem_max: tcp.sender_limits.wmem_max,
            streams,
            tcp_retrans_fraction: tcp.tuned.as_ref().and_then(|f| f.retrans_fraction),
            receiver_name: "server".into(),
            sender_name: "client".into(),
        };
        let mut advisory = advice::advisory(&input);
        if udp.sender_limited {
            advisory.push("The UDP ramp ended because this host could not pace faster, not because the path lost packets: the UDP figure is the sender's limit.".into());
        }
        if let Some(last) = udp.ramp.last().filter(|_| udp.receiver_limited) {
            advisory.push(format!(
                "The UDP ramp ended because the server's socket dropped {:.1} % of the datagrams itself (its receive buffer was full: the server read too slowly), not because the path lost them: the UDP figure is the receiver's limit, and the path carries at least that much. Raise the server's net.core.rmem_max or run it on a less loaded host.",
                last.receiver_dropped * 100.0
            ));
        }
        let duration = self.started.elapsed();
        if duration > opts.budget {
            self.notes.push(format!(
                "took {:.1} s, over the {:.0} s budget",
                duration.as_secs_f64(),
                opts.budget.as_secs_f64()
            ));
        }
        MeasureRun {
            abw_settings: fac2.settings,
            server: opts.server,
            client_software: software(),
            server_software: self.server_software,
            client_host: self.client_host,
            server_host: self.server_host,
            budget_s: DurationNs::from_std(opts.budget),
            duration_s: DurationNs::from_std(duration),
            rtt_control: fac2.rtt_control,
            rtt_echo: fac2.rtt_echo,
            abw: fac2.abw,
            mbs: mbs.mbs,
            safe_burst_interval: mbs.safe_burst_interval,
            udp_ramp: udp.ramp,
            udp_single: udp.single,
            udp_sender_limited: udp.sender_limited,
            udp_receiver_limited: udp.receiver_limited,
            udp_multi: udp.multi,
            udp_multi_helps: udp.multi_helps,
            udp_burst: udp.burst,
            reference_rate: tcp.reference,
            bdp_window: tcp.bdp_window,
            optimal_window: tcp.optimal_window,
            tcp_tuned: tcp.tuned,
            tcp_full_duplex: tcp.full_duplex,
            tcp_sweep: tcp.sweep,
            streams,
            receiver_limits: tcp.receiver_limits,
            sender_limits: tcp.sender_limits,
            advisory,
            phases: self.phases,
            notes: self.notes,
        }
    }
}
