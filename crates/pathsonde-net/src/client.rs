//! The measurement client: opens a session, measures RTT, and carries out
//! whatever probe plans a [`Method`] makes, handing it back observations.

use crate::clock;
use crate::error::{NetError, ProtocolError, Result, ServerError};
use crate::framing;
use crate::pacer::{Pacer, PacerMode, SentTrain};
use crate::rtt::RttSummary;
use crate::software;
use crate::udp;
use pathsonde_core::runner::{self, Limits, RunError};
use pathsonde_core::{
    ClockInfo, ClockSource, DurationNs, Estimate, Method, Observation, PacketRecord, ProbePath,
    ProbePlan, ScheduleSpec, TimeNs, TrainSpec,
};
use pathsonde_wire::control::{
    check_host_report, ClientMessage, ServerMessage, TrainAnnounce, TrainReport, WireClock,
    WireClockSource, FLOW_DROPS_FEATURE, RECEIVER_DROPS_FEATURE,
};
use pathsonde_wire::handshake::{ClientHello, HelloStatus, ServerHello, HELLO_LEN};
use pathsonde_wire::probe::{ProbeHeader, ProbeKind, PROBE_HEADER_LEN};
use pathsonde_wire::PROTOCOL_VERSION;
use serde::Serialize;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub struct ClientConfig {
    pub server: SocketAddr,
    /// How long to wait for the TCP connection.
    pub connect_timeout: Duration,
    /// How long to wait for any single answer from the server.
    pub reply_timeout: Duration,
    /// RTT samples over the control channel and over probe echoes (each).
    pub rtt_samples: usize,
    /// The whole-train loss count at which the client gives up.
    pub max_lost_trains: u32,
    /// Most plans a method may make before the client stops it.
    pub max_plans: u32,
    /// The shared secret to answer a server that requires authentication
    /// (docs/security.md); `None` for servers that do not.
    pub key: Option<crate::auth::Key>,
    /// How the pacer sends a car of several packets: UDP GSO where the
    /// kernel accepts it (the default), or `sendmmsg` batches.
    pub pacer_mode: PacerMode,
}

impl ClientConfig {
    pub fn new(server: SocketAddr) -> Self {
        ClientConfig {
            server,
            connect_timeout: Duration::from_secs(3),
            reply_timeout: Duration::from_secs(3),
            rtt_samples: 10,
            max_lost_trains: 3,
            max_plans: 200,
            key: None,
            pacer_mode: PacerMode::default(),
        }
    }
}

/// An open session with a server.
pub struct Client {
    cfg: ClientConfig,
    ctrl: TcpStream,
    pacer: Pacer,
    session: u64,
    server_clock: ClockInfo,
    server_software: String,
    max_train_packets: u32,
    client_clock: ClockInfo,
    next_train: u32,
    server_host: HostSide,
    local_ip: std::net::IpAddr,
    /// The server follows each train report with the probe datagrams its
    /// own socket dropped (`ReceiverDrops`): it said it can, and was asked.
    receiver_drops: bool,
    /// The server follows each flow report with the UDP datagrams its
    /// receiving socket dropped (`FlowReceiverDrops`).
    flow_drops: bool,
    /// Trains this host's own egress queue held, and the longest hold
    /// (`pacer::egress`), since the last [`Client::run_method`] began.
    egress_held: (u32, DurationNs),
}

/// One end's host report as the client knows it: the report, or why not,
/// and the interface that carries the path when known.
#[derive(Debug, Clone, Serialize)]
pub struct HostSide {
    pub report: Option<crate::host::HostReport>,
    /// Why there is no report (or why it could not be read).
    pub unavailable: Option<String>,
    /// The interface carrying the path, when this end could tell.
    pub interface: Option<String>,
    /// The car sender this end's pacer uses (the client's: GSO, or batches
    /// where GSO is refused or was not asked for); `None` for an end that
    /// sends no probes.  Picks the report's paced-train figure for the
    /// verdict (`crate::verdict::host_caps`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pacer: Option<PacerMode>,
}

impl HostSide {
    /// Reads a host report received from the server (untrusted: size-checked,
    /// then parsed; anything unreadable becomes "unavailable" with the reason).
    pub fn from_json(json: &str) -> HostSide {
        if let Err(e) = check_host_report(json) {
            return HostSide::missing(e.to_string());
        }
        match serde_json::from_str::<crate::host::HostReport>(json) {
            Ok(r) => HostSide {
                report: Some(r),
                unavailable: None,
                interface: None,
                pacer: None,
            },
            Err(e) => {
                let why = serde_json::from_str::<serde_json::Value>(json)
                    .ok()
                    .and_then(|v| v["unavailable"].as_str().map(str::to_string))
                    .unwrap_or_else(|| format!("unreadable host report: {e}"));
                HostSide::missing(why)
            }
        }
    }
    fn missing(why: impl Into<String>) -> HostSide {
        HostSide {
            report: None,
            unavailable: Some(why.into()),
            interface: None,
            pacer: None,
        }
    }
}

/// This host's quick sender report, gathered once per process (about 0.15 s;
/// `docs/host.md`), so repeated measurements do not pay for it again.
pub fn client_host_report() -> crate::host::HostReport {
    static REPORT: std::sync::OnceLock<crate::host::HostReport> = std::sync::OnceLock::new();
    REPORT
        .get_or_init(|| crate::host::probe_quick(crate::host::Quick::Sender))
        .clone()
}

/// The name of the interface that holds `ip`, if any.
pub fn interface_of(ip: std::net::IpAddr) -> Option<String> {
    let addrs = nix::ifaddrs::getifaddrs().ok()?;
    for a in addrs {
        let Some(addr) = a.address else { continue };
        let found = if let Some(v4) = addr.as_sockaddr_in() {
            std::net::IpAddr::V4(v4.ip()) == ip
        } else if let Some(v6) = addr.as_sockaddr_in6() {
            std::net::IpAddr::V6(v6.ip()) == ip
        } else {
            false
        };
        if found {
            return Some(a.interface_name);
        }
    }
    None
}

/// Everything one measurement produced.
#[derive(Debug, Clone, Serialize)]
pub struct MeasurementRun {
    pub server: SocketAddr,
    pub server_software: String,
    pub client_software: String,
    pub rtt_control: RttSummary,
    /// `None` when no echo came back (UDP filtered on the way back).
    pub rtt_echo: Option<RttSummary>,
    pub estimate: Estimate,
    /// Wall time from connecting to the final answer.
    pub duration: DurationNs,
    pub send_clock: ClockInfo,
    pub recv_clock: ClockInfo,
    /// Both ends' host reports (issue 4; docs/host.md).
    pub client_host: HostSide,
    pub server_host: HostSide,
}

impl Client {
    /// Connects, agrees on a version and opens a session.
    pub fn connect(cfg: ClientConfig) -> Result<Client> {
        let addr = cfg.server;
        let mut ctrl = TcpStream::connect_timeout(&addr, cfg.connect_timeout)
            .map_err(|source| NetError::Connect { addr, source })?;
        let _ = ctrl.set_nodelay(true);
        ctrl.set_write_timeout(Some(cfg.reply_timeout))
            .map_err(|e| NetError::io("setting the control write timeout", e))?;
        ctrl.write_all(
            &ClientHello {
                version: PROTOCOL_VERSION,
            }
            .encode(),
        )
        .map_err(|e| NetError::io("sending the hello", e))?;
        ctrl.set_read_timeout(Some(cfg.reply_timeout))
            .map_err(|e| NetError::io("setting the control read timeout", e))?;
        let mut hello = [0u8; HELLO_LEN];
        ctrl.read_exact(&mut hello).map_err(|e| match e.kind() {
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => NetError::Timeout {
                waiting_for: "the server's hello",
                timeout_ms: cfg.reply_timeout.as_millis() as u64,
            },
            std::io::ErrorKind::UnexpectedEof | std::io::ErrorKind::ConnectionReset => {
                NetError::Closed {
                    waiting_for: "the server's hello",
                }
            }
            _ => NetError::io("reading the server's hello", e),
        })?;
        let hello = ServerHello::decode(&hello)
            .map_err(|source| NetError::Protocol(ProtocolError::NotPathsonde { addr, source }))?;
        match hello.status {
            HelloStatus::Ok => {}
            HelloStatus::VersionMismatch => {
                return Err(NetError::VersionMismatch {
                    addr,
                    ours: PROTOCOL_VERSION,
                    theirs: hello.version,
                })
            }
            HelloStatus::Busy => return Err(NetError::Busy { addr }),
            HelloStatus::Refused => return Err(NetError::Refused { addr }),
        }
        framing::send(
            &mut ctrl,
            &ClientMessage::OpenSession {
                software: software(),
            },
        )?;
        let opened = crate::session_auth::answer(&mut ctrl, cfg.key.as_ref(), cfg.reply_timeout)?;
        let (session, probe_port, clock, max_train_packets, server_software) = match opened {
            ServerMessage::SessionOpened {
                session,
                probe_port,
                clock,
                max_train_packets,
                software,
            } => (session, probe_port, clock, max_train_packets, software),
            ServerMessage::Error {
                code: pathsonde_wire::control::ErrorCode::Busy,
                ..
            } => return Err(NetError::Busy { addr }),
            other => return Err(unexpected("SessionOpened", &other)),
        };
        // Only a server that names the feature is asked: an older one would
        // end the session on a message it does not know.
        let receiver_drops = server_software.contains(RECEIVER_DROPS_FEATURE);
        if receiver_drops {
            framing::send(&mut ctrl, &ClientMessage::ReceiverDropsWanted)?;
        }
        let flow_drops = server_software.contains(FLOW_DROPS_FEATURE);
        if flow_drops {
            framing::send(&mut ctrl, &ClientMessage::FlowReceiverDropsWanted)?;
        }
        framing::send(&mut ctrl, &ClientMessage::HostReportRequest)?;
        let server_host =
            match framing::recv(&mut ctrl, cfg.reply_timeout, "the server's host report")? {
                ServerMessage::HostReport { json } => HostSide::from_json(&json),
                other => return Err(unexpected("HostReport", &other)),
            };
        let local = ctrl
            .local_addr()
            .map_err(|e| NetError::io("reading the local address", e))?;
        let probe_sock = udp::bind(SocketAddr::new(local.ip(), 0))?;
        probe_sock
            .connect(SocketAddr::new(addr.ip(), probe_port))
            .map_err(|e| NetError::io("connecting the probe socket", e))?;
        Ok(Client {
            pacer: Pacer::with_mode(probe_sock, session, cfg.pacer_mode),
            cfg,
            ctrl,
            session,
            server_clock: from_wire_clock(clock),
            server_software,
            max_train_packets,
            client_clock: clock::sender_clock(),
            next_train: 0,
            server_host,
            local_ip: local.ip(),
            receiver_drops,
            flow_drops,
            egress_held: (0, DurationNs::ZERO),
        })
    }

    /// The control connection and the reply timeout, for the throughput
    /// flows (`crate::throughput`), which speak their own messages on it.
    pub(crate) fn control(&mut self) -> (&mut TcpStream, Duration) {
        (&mut self.ctrl, self.cfg.reply_timeout)
    }

    pub fn server_addr(&self) -> SocketAddr {
        self.cfg.server
    }

    pub fn local_ip(&self) -> std::net::IpAddr {
        self.local_ip
    }

    /// The car sender the pacer uses now (GSO falls back to batches when
    /// the kernel refuses it).
    pub fn pacer_mode(&self) -> PacerMode {
        self.pacer.mode()
    }

    /// Asks the pacer for a car sender from the next train on; returns the
    /// mode asked for before.
    pub fn set_pacer_mode(&mut self, mode: PacerMode) -> PacerMode {
        self.pacer.set_mode(mode)
    }

    /// The server follows each flow report with `FlowReceiverDrops`.
    pub(crate) fn flow_drops(&self) -> bool {
        self.flow_drops
    }

    pub fn server_software(&self) -> &str {
        &self.server_software
    }

    /// The server's host report, as it sent it at session start.
    pub fn server_host(&self) -> &HostSide {
        &self.server_host
    }

    /// RTT over the control connection (TCP ping-pong), `n` samples.
    pub fn control_rtt(&mut self, n: usize) -> Result<RttSummary> {
        let mut samples = Vec::with_capacity(n);
        for seq in 0..n as u32 {
            let t0 = clock::monotonic();
            framing::send(
                &mut self.ctrl,
                &ClientMessage::Ping {
                    seq,
                    client_ns: t0.ns(),
                },
            )?;
            match framing::recv(&mut self.ctrl, self.cfg.reply_timeout, "a pong")? {
                ServerMessage::Pong { seq: s, .. } if s == seq => {
                    samples.push(clock::monotonic().since(t0));
                }
                other => return Err(unexpected("Pong", &other)),
            }
        }
        RttSummary::from_samples(&samples)
            .ok_or_else(|| NetError::input("no RTT samples requested"))
    }

    /// RTT over the probe path: UDP echo requests answered by the server.
    /// Each echo is awaited for `wait`; lost echoes are skipped, and after
    /// three losses in a row with none back the path is taken to filter them.
    /// `None` if none came back.
    pub fn echo_rtt(&mut self, n: usize, wait: Duration) -> Result<Option<RttSummary>> {
        let sock = self.pacer.socket();
        sock.set_read_timeout(Some(Duration::from_millis(50)))
            .map_err(|e| NetError::io("setting the echo timeout", e))?;
        let mut samples = Vec::with_capacity(n);
        let mut buf = vec![0u8; 256];
        let mut reply = vec![0u8; 2048];
        for seq in 0..n as u32 {
            if samples.is_empty() && seq >= 3 {
                break;
            }
            let t0 = clock::monotonic();
            ProbeHeader {
                kind: ProbeKind::EchoRequest,
                session: self.session,
                train: u32::MAX,
                car: 0,
                seq,
                send_ns: t0.ns(),
            }
            .write_into(&mut buf[..PROBE_HEADER_LEN.max(64)])?;
            if sock.send(&buf[..64]).is_err() {
                continue;
            }
            let start = Instant::now();
            while start.elapsed() < wait {
                let Ok(len) = sock.recv(&mut reply) else {
                    continue;
                };
                match ProbeHeader::decode(&reply[..len]) {
                    Ok(h)
                        if h.kind == ProbeKind::EchoReply
                            && h.seq == seq
                            && h.session == self.session =>
                    {
                        samples.push(clock::monotonic().since(t0));
                        break;
                    }
                    _ => continue,
                }
            }
        }
        sock.set_read_timeout(None)
            .map_err(|e| NetError::io("clearing the echo timeout", e))?;
        Ok(RttSummary::from_samples(&samples))
    }

    /// Runs `method` to completion (or until the client's limits) through
    /// core's runner, calling `progress` after each observation.  Returns the
    /// method's estimate.
    pub fn run_method(
        &mut self,
        method: &mut dyn Method,
        linger: Duration,
        progress: &mut dyn FnMut(&Observation),
    ) -> Result<Estimate> {
        let limits = Limits {
            max_plans: self.cfg.max_plans,
            max_lost_in_a_row: Some(self.cfg.max_lost_trains),
        };
        let mut path = ClientPath {
            client: self,
            linger,
        };
        path.client.egress_held = (0, DurationNs::ZERO);
        let run = runner::run(method, &mut path, limits, progress).map_err(|e| match e {
            RunError::Path(e) => e,
            RunError::Unusable(why) => NetError::input(format!("probe plan unusable: {why}")),
            RunError::ProbesLost { trains } => NetError::ProbesLost { trains },
        })?;
        let mut estimate = run.answer().map_err(NetError::NoEstimate)?;
        let (held, longest) = self.egress_held;
        if held > 0 {
            estimate.notes.push(format!(
                "this host's own egress queue held {held} train(s), one packet for up to {longest}: its interface is shaped or slower than the trains, so it is part of the path; those trains' send times are their packets' entry to that queue (kernel SCHED stamps), not when the driver took them"
            ));
        }
        Ok(estimate)
    }

    /// Announces, sends and collects one train.
    pub fn run_train(&mut self, spec: &TrainSpec, linger: Duration) -> Result<Observation> {
        self.run_plan(&ProbePlan::Train(*spec), linger)
    }

    /// Announces, sends and collects one probe of any shape (a train or a
    /// schedule of cars); [`ProbePlan::Done`] is refused.
    pub fn run_plan(&mut self, plan: &ProbePlan, linger: Duration) -> Result<Observation> {
        let (Some(sched), Some(summary)) = (plan.schedule(), plan.summary()) else {
            return Err(NetError::input("no probe to send: the plan is Done"));
        };
        let overhead = udp::ip_udp_overhead(&self.cfg.server);
        let size = sched.packet_size.get();
        if size < overhead + PROBE_HEADER_LEN as u64 {
            return Err(NetError::input(format!(
                "probe plan unusable: packets of {size} bytes are smaller than their headers"
            )));
        }
        sched
            .check()
            .map_err(|why| NetError::input(format!("probe plan unusable: {why}")))?;
        let spec = &summary;
        let packets = sched.total_packets();
        if packets > u64::from(self.max_train_packets) {
            return Err(NetError::input(format!(
                "train of {packets} packets exceeds the server's limit of {}",
                self.max_train_packets
            )));
        }
        let payload_len = (size - overhead) as usize;
        let train = self.next_train;
        self.next_train += 1;
        framing::send(
            &mut self.ctrl,
            &ClientMessage::AnnounceTrain(TrainAnnounce {
                train,
                packets: packets as u32,
                payload_len: payload_len as u32,
            }),
        )?;
        match framing::recv(
            &mut self.ctrl,
            self.cfg.reply_timeout,
            "the server to get ready",
        )? {
            ServerMessage::TrainReady { train: t } if t == train => {}
            other => return Err(unexpected("TrainReady", &other)),
        }
        let sent = self
            .pacer
            .send_schedule(train, &sched, payload_len)
            .map_err(|e| NetError::io("sending probes", e))?;
        if let Some(hold) = sent.egress_hold {
            self.egress_held = (self.egress_held.0 + 1, self.egress_held.1.max(hold));
        }
        framing::send(
            &mut self.ctrl,
            &ClientMessage::TrainSent {
                train,
                packets_sent: sent.packets_sent(),
                linger_ms: linger.as_millis().min(u128::from(u32::MAX)) as u32,
            },
        )?;
        let wait = self.cfg.reply_timeout + linger;
        let report = match framing::recv(&mut self.ctrl, wait, "the train report")? {
            ServerMessage::TrainReport(r) if r.train == train => r,
            other => return Err(unexpected("TrainReport", &other)),
        };
        let receiver_drops = if self.receiver_drops {
            match framing::recv(
                &mut self.ctrl,
                self.cfg.reply_timeout,
                "the server's drop count",
            )? {
                ServerMessage::ReceiverDrops { train: t, dropped } if t == train => {
                    dropped.map(u64::from)
                }
                other => return Err(unexpected("ReceiverDrops", &other)),
            }
        } else {
            None
        };
        let schedule = match plan {
            ProbePlan::Schedule(s) => Some(s.clone()),
            _ => None,
        };
        let mut obs = self.observation(train, spec, schedule, &sent, &report);
        obs.receiver_drops = receiver_drops;
        // The run's send clock: the first train's, and the user-space clock
        // as soon as trains disagree (never claim kernel stamps for a run
        // that had a user-stamped train).
        if train == 0 || obs.send_clock.source == ClockSource::UserSpace {
            self.client_clock = obs.send_clock;
        }
        Ok(obs)
    }

    fn observation(
        &self,
        train: u32,
        spec: &TrainSpec,
        schedule: Option<ScheduleSpec>,
        sent: &SentTrain,
        report: &TrainReport,
    ) -> Observation {
        // Planned packets per car: a schedule's own, else the train's.
        let planned: Vec<u32> = match &schedule {
            Some(s) => s.cars.iter().map(|c| c.packets).collect(),
            None => vec![spec.packets_per_car; spec.cars as usize],
        };
        let total: u64 = planned.iter().map(|&n| u64::from(n)).sum();
        let mut received: Vec<Option<TimeNs>> = vec![None; total as usize];
        for a in &report.arrivals {
            if let Some(slot) = received.get_mut(a.seq as usize) {
                *slot = Some(TimeNs::from_ns(a.recv_ns));
            }
        }
        let mut packets = Vec::with_capacity(received.len());
        // Kernel transmit stamps for the whole train, or user-space car
        // stamps for the whole train: the pacer never returns a mix.
        let mut kernel = sent.kernel_sent.as_ref().map(|v| v.iter());
        let mut first_seq = 0u32;
        for (car, ((&at, &n), &want)) in sent
            .car_sent
            .iter()
            .zip(&sent.car_packets)
            .zip(&planned)
            .enumerate()
        {
            let car_first = first_seq;
            first_seq += want;
            for i in 0..n.min(want) {
                let seq = car_first + i;
                let stamp = kernel.as_mut().and_then(|k| k.next()).copied();
                packets.push(PacketRecord {
                    seq,
                    car: car as u32,
                    size: spec.packet_size,
                    sent: stamp.unwrap_or(at),
                    received: received.get(seq as usize).copied().flatten(),
                });
            }
        }
        let send_clock = if sent.kernel_sent.is_some() {
            ClockInfo {
                source: ClockSource::KernelSoftware,
                resolution: DurationNs::from_ns(1),
            }
        } else if self.client_clock.source == ClockSource::UserSpace {
            self.client_clock
        } else {
            clock::sender_clock()
        };
        Observation {
            train,
            spec: *spec,
            schedule,
            packets,
            send_clock,
            recv_clock: from_wire_clock(report.clock),
            receiver_drops: None,
        }
    }

    /// Ends the session and waits (briefly) for the server to close the
    /// connection: by then it is free for the next measurement.
    pub fn close(mut self) {
        if framing::send(&mut self.ctrl, &ClientMessage::Close).is_ok() {
            let _ = self.ctrl.set_read_timeout(Some(Duration::from_secs(1)));
            let mut sink = [0u8; 256];
            while matches!(self.ctrl.read(&mut sink), Ok(n) if n > 0) {}
        }
    }

    pub fn client_clock(&self) -> ClockInfo {
        self.client_clock
    }

    pub fn server_clock(&self) -> ClockInfo {
        self.server_clock
    }
}

/// The client seen as a [`ProbePath`]: every plan is announced, sent and
/// collected by [`Client::run_plan`], stragglers waited for `linger`.
pub struct ClientPath<'a> {
    pub client: &'a mut Client,
    pub linger: Duration,
}

impl ProbePath for ClientPath<'_> {
    type Error = NetError;

    /// The client numbers trains itself, on the wire; `index` is not needed.
    fn carry(&mut self, plan: &ProbePlan, _index: u32) -> Result<Observation> {
        self.client.run_plan(plan, self.linger)
    }
}

/// Connects, measures RTT both ways, runs `method`, closes: one measurement.
pub fn measure(
    cfg: ClientConfig,
    method: &mut dyn Method,
    progress: &mut dyn FnMut(&Observation),
) -> Result<MeasurementRun> {
    let started = Instant::now();
    let samples = cfg.rtt_samples.max(1);
    let server = cfg.server;
    let client_report = client_host_report();
    let mut client = Client::connect(cfg)?;
    let rtt_control = client.control_rtt(samples)?;
    // An echo normally returns within a few control RTTs; wait no less than
    // 100 ms for one, and no longer than any other answer.
    let echo_wait = (rtt_control.max.to_std() * 4)
        .max(Duration::from_millis(100))
        .min(client.cfg.reply_timeout);
    let rtt_echo = client.echo_rtt(samples, echo_wait)?;
    // Stragglers get a few RTTs to arrive, but no less than 20 ms.
    let rtt = rtt_echo.unwrap_or(rtt_control).max;
    let linger = (rtt.to_std() * 4).max(Duration::from_millis(20));
    let estimate = client.run_method(method, linger, progress)?;
    let run = MeasurementRun {
        server,
        server_software: client.server_software.clone(),
        client_software: software(),
        rtt_control,
        rtt_echo,
        estimate,
        duration: DurationNs::from_std(started.elapsed()),
        send_clock: client.client_clock,
        recv_clock: client.server_clock,
        client_host: HostSide {
            report: Some(client_report),
            unavailable: None,
            interface: interface_of(client.local_ip),
            pacer: Some(client.pacer_mode()),
        },
        server_host: client.server_host.clone(),
    };
    client.close();
    Ok(run)
}

fn from_wire_clock(c: WireClock) -> ClockInfo {
    ClockInfo {
        source: match c.source {
            WireClockSource::Hardware => ClockSource::Hardware,
            WireClockSource::KernelSoftware => ClockSource::KernelSoftware,
            WireClockSource::UserSpace => ClockSource::UserSpace,
            WireClockSource::Simulated => ClockSource::Simulated,
        },
        resolution: DurationNs::from_ns(c.resolution_ns.min(i64::MAX as u64) as i64),
    }
}

pub(crate) fn unexpected(wanted: &str, got: &ServerMessage) -> NetError {
    match got {
        ServerMessage::Error { code, message } => NetError::Server(ServerError {
            code: *code,
            message: message.clone(),
        }),
        other => NetError::protocol(format!("expected {wanted}, got {other:?}")),
    }
}
