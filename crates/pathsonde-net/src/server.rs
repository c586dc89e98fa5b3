//! The measurement server.
//!
//! One TCP port for control and the same port number for UDP probes (one
//! number to open in a firewall).  One measurement at a time: a second client
//! is told "busy" in the handshake and the connection is closed.  Probes are
//! accepted only from the control peer's address and with the session's id;
//! everything else is dropped without reply.
//!
//! Who may connect, how long a handshake may take, authentication and the
//! limits on a session live in [`admission`] and [`policy`]
//! (docs/security.md); the session loop calls them at a few named points.

mod admission;
pub mod policy;

use crate::clock;
use crate::error::{NetError, Result};
use crate::framing;
use crate::server_stats::ServerStats;
use crate::udp::{self, TimestampingReceiver};
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use pathsonde_core::ClockSource;
use pathsonde_wire::control::{
    host_report, Arrival, ClientMessage, ErrorCode, ServerMessage, TrainAnnounce, TrainReport,
    WireClock, WireClockSource, MAX_HOST_REPORT, MAX_TRAIN_PACKETS,
};
use pathsonde_wire::handshake::HelloStatus;
use pathsonde_wire::probe::{ProbeHeader, ProbeKind, MAX_PROBE_PAYLOAD, PROBE_HEADER_LEN};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Address for both the TCP control port and the UDP probe port; port 0
    /// picks a free port (the same number for both).
    pub bind: SocketAddr,
    /// How long a new connection may take to send its hello.
    pub handshake_timeout: Duration,
    /// A session with no control message for this long is closed.
    pub idle_timeout: Duration,
    /// Cap on how long the server waits for a train's stragglers.
    pub max_linger: Duration,
    /// Gather this host's report at start-up to send to clients (the quick
    /// receiver variant, docs/host.md); when false, clients are told why not.
    pub host_report: bool,
    /// Counters about this server (sessions, trains, bytes, errors), shared
    /// with whoever monitors it (`serve --metrics`).
    pub stats: Arc<ServerStats>,
    /// What one client may ask of the server (docs/security.md).
    pub limits: crate::limits::Limits,
    /// Keys a client must prove it holds; `None`: no authentication.
    pub keys: Option<crate::auth::KeyRing>,
    /// Client addresses allowed to connect; empty: everyone.
    pub allow: crate::allow::AllowList,
    /// Say on stderr why connections were refused or sessions ended.
    pub log: bool,
    /// Use the NIC's hardware receive stamps (`serve --hw-stamps`): each
    /// session raises the probe interface's receive filter to ALL if it is
    /// not already, keeping its transmit setting, and puts back what it
    /// found when the session ends (`udp::hw_stamps`).  Off: the NIC's
    /// configuration is never read or written; kernel software stamps.
    pub hw_stamps: bool,
}

impl ServerConfig {
    pub fn new(bind: SocketAddr) -> Self {
        ServerConfig {
            bind,
            handshake_timeout: Duration::from_secs(5),
            idle_timeout: Duration::from_secs(30),
            max_linger: Duration::from_millis(500),
            host_report: true,
            stats: Arc::new(ServerStats::default()),
            limits: crate::limits::Limits::default(),
            keys: None,
            allow: crate::allow::AllowList::default(),
            log: false,
            hw_stamps: false,
        }
    }

    /// What the server says at start-up about its receive stamps (with
    /// `hw_stamps` asked for or not), once it listens on `bound`
    /// (`--hw-stamps` needs one interface's address).
    pub fn stamps_line(hw_stamps: bool, bound: std::net::IpAddr) -> String {
        if !hw_stamps {
            "receive stamps: kernel software (the NIC's configuration is not touched; --hw-stamps for hardware stamps)".into()
        } else if bound.is_unspecified() {
            format!("receive stamps: kernel software; warning: --hw-stamps needs --bind to one interface's address, not {bound}")
        } else {
            "receive stamps: the NIC's hardware stamps where it has them (--hw-stamps; its configuration is restored after each session)".into()
        }
    }
}

pub struct Server {
    listener: TcpListener,
    udp: UdpSocket,
    config: ServerConfig,
    /// The host report's JSON, gathered once at start-up (on its own thread,
    /// so binding stays instant) and sent to every client.
    host_json: Arc<std::sync::OnceLock<String>>,
}

/// The server's host report, gathered once (quick receiver variant), as the
/// JSON sent in `HostReport`; bounded by `MAX_HOST_REPORT`.
fn gather_host_json(enabled: bool) -> String {
    let json = if enabled {
        serde_json::to_string(&crate::host::probe_quick(crate::host::Quick::Receiver))
            .unwrap_or_else(|e| serde_json::json!({ "unavailable": e.to_string() }).to_string())
    } else {
        serde_json::json!({ "unavailable": "this server was started without a host report" })
            .to_string()
    };
    if json.len() > MAX_HOST_REPORT {
        return serde_json::json!({
            "unavailable": format!("host report of {} bytes exceeds {MAX_HOST_REPORT}", json.len())
        })
        .to_string();
    }
    json
}

/// A server running on its own thread; dropping the handle does not stop it,
/// [`ServerHandle::stop`] does.
pub struct ServerHandle {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Result<()>>>,
}

impl ServerHandle {
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }
    pub fn stop(mut self) -> Result<()> {
        self.stop.store(true, Ordering::SeqCst);
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(r)) => r,
            Some(Err(_)) => Err(NetError::protocol("server thread panicked")),
            None => Ok(()),
        }
    }
}

impl Server {
    /// Binds the control and probe sockets.
    pub fn bind(config: ServerConfig) -> Result<Server> {
        // With port 0 the kernel picks a TCP port that may be taken for UDP;
        // try a few picks before giving up.
        let attempts = if config.bind.port() == 0 { 20 } else { 1 };
        let mut last_err = None;
        for _ in 0..attempts {
            let listener = TcpListener::bind(config.bind)
                .map_err(|e| NetError::io(format!("binding TCP {}", config.bind), e))?;
            let addr = listener
                .local_addr()
                .map_err(|e| NetError::io("reading the bound address", e))?;
            // The probe socket: `udp::bind` leaves UDP_GRO off, so probes
            // (GSO cars included) arrive one datagram, one stamp each.
            match udp::bind(addr) {
                Ok(udp) => {
                    let host_json = Arc::new(std::sync::OnceLock::new());
                    let (cell, enabled) = (host_json.clone(), config.host_report);
                    let _ = std::thread::Builder::new()
                        .name("pathsonde-host".into())
                        .spawn(move || {
                            let _ = cell.set(gather_host_json(enabled));
                        });
                    return Ok(Server {
                        listener,
                        udp,
                        config,
                        host_json,
                    });
                }
                Err(e) => last_err = Some(e),
            }
        }
        Err(last_err.unwrap_or_else(|| NetError::input("no port")))
    }

    pub fn local_addr(&self) -> Result<SocketAddr> {
        self.listener
            .local_addr()
            .map_err(|e| NetError::io("reading the bound address", e))
    }

    /// Runs the accept loop on a new thread.
    pub fn spawn(self) -> Result<ServerHandle> {
        let addr = self.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let thread = std::thread::Builder::new()
            .name("pathsonde-server".into())
            .spawn(move || self.run(&stop2))
            .map_err(|e| NetError::io("starting the server thread", e))?;
        Ok(ServerHandle {
            addr,
            stop,
            thread: Some(thread),
        })
    }

    /// Accepts connections until `stop` is set.  Each admitted connection
    /// gets a thread for its handshake; one of them at a time measures.
    pub fn run(self, stop: &AtomicBool) -> Result<()> {
        let slots = admission::Slots::new(self.config.limits.max_connections);
        let mut threads: Vec<JoinHandle<()>> = Vec::new();
        // Shared, and cloned only for the connection that gets to measure:
        // connections in their handshake hold one descriptor each, not two.
        let probe_socket = Arc::new(self.udp);
        while !stop.load(Ordering::SeqCst) {
            let mut fds = [PollFd::new(self.listener.as_fd(), PollFlags::POLLIN)];
            match poll(&mut fds, PollTimeout::from(100u16)) {
                Ok(0) => continue,
                Ok(_) => {}
                Err(nix::errno::Errno::EINTR) => continue,
                Err(e) => return Err(NetError::io("waiting for connections", e.into())),
            }
            let (stream, peer) = match self.listener.accept() {
                Ok(x) => x,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                // Transient accept errors (the peer reset before we got to it,
                // out of descriptors) must not take the server down.
                Err(_) => continue,
            };
            ServerStats::add(&self.config.stats.connections, 1);
            let slot = match slots.admit(&self.config, peer) {
                Ok(slot) => slot,
                Err(status) => {
                    if status == HelloStatus::Busy {
                        ServerStats::add(&self.config.stats.busy_refusals, 1);
                    }
                    if self.config.log && status == HelloStatus::Refused {
                        eprintln!("pathsonde serve: {peer}: refused (not in --allow)");
                    }
                    admission::reply_and_close(stream, status);
                    continue;
                }
            };
            threads.retain(|h| !h.is_finished());
            let udp = probe_socket.clone();
            let config = self.config.clone();
            let host_json = self.host_json.clone();
            let slots = slots.clone();
            let spawned = std::thread::Builder::new()
                .name("pathsonde-session".into())
                .spawn(move || {
                    let _slot = slot;
                    let r = Session::serve(stream, peer, udp, &config, &slots, &host_json);
                    if r.is_err() {
                        ServerStats::add(&config.stats.session_errors, 1);
                    }
                    if let (true, Err(e)) = (config.log, r) {
                        eprintln!("pathsonde serve: {peer}: {}", admission::log_line(&e));
                    }
                });
            if let Ok(h) = spawned {
                threads.push(h);
            }
        }
        for h in threads {
            let _ = h.join();
        }
        Ok(())
    }
}

/// The train the server is currently collecting.
struct Collecting {
    announce: TrainAnnounce,
    arrivals: Vec<Arrival>,
    /// Each arrival's NIC hardware stamp, when it had one.
    hardware: Vec<Option<i64>>,
    seen: Vec<bool>,
    duplicates: u32,
    rejected: u32,
    last_arrival: Option<Instant>,
    /// The probe socket's own drop count when the train was announced.
    drops_before: Option<u64>,
}

impl Collecting {
    fn new(announce: TrainAnnounce, drops_before: Option<u64>) -> Self {
        Collecting {
            announce,
            arrivals: Vec::with_capacity(announce.packets as usize),
            hardware: Vec::with_capacity(announce.packets as usize),
            seen: vec![false; announce.packets as usize],
            duplicates: 0,
            rejected: 0,
            last_arrival: None,
            drops_before,
        }
    }
}

struct Shared {
    collecting: Option<Collecting>,
    /// The probe socket, for sampling its own drop count
    /// ([`udp::socket_drops`]) around each train.
    probe: Option<UdpSocket>,
}

/// The receive thread's own view of who may be answered.
struct Answering {
    source: policy::ProbeSource,
    echoes: u32,
}

struct Session;

impl Session {
    /// Serves one connection: admission (handshake, authentication) by the
    /// half-open deadline, then a measurement if the slot is free.  The
    /// measurement slot is released before the control connection closes,
    /// so a client that waits for the close may start the next measurement
    /// at once.
    fn serve(
        mut stream: TcpStream,
        peer: SocketAddr,
        udp: Arc<UdpSocket>,
        cfg: &ServerConfig,
        slots: &Arc<admission::Slots>,
        host_json: &std::sync::OnceLock<String>,
    ) -> Result<()> {
        let _ = stream.set_nodelay(true);
        let started = Instant::now();
        let admitted = match admission::handshake(&mut stream, cfg, started + cfg.handshake_timeout)
        {
            Ok(Some(a)) => a,
            Ok(None) => return Ok(()),
            Err(e) => {
                if matches!(e, NetError::Protocol(_)) {
                    send_error(&mut stream, &e);
                }
                return Err(e);
            }
        };
        let Some(measuring) = slots.measure() else {
            ServerStats::add(&cfg.stats.busy_refusals, 1);
            let _ = framing::send(
                &mut stream,
                &ServerMessage::Error {
                    code: ErrorCode::Busy,
                    message: "the server is busy with another measurement".into(),
                },
            );
            return Ok(());
        };
        if cfg.log {
            if let Some(id) = &admitted.key_id {
                eprintln!("pathsonde serve: {peer}: authenticated as '{id}'");
            }
        }
        ServerStats::add(&cfg.stats.sessions, 1);
        ServerStats::add(&cfg.stats.sessions_active, 1);
        struct Active<'a>(&'a ServerStats);
        impl Drop for Active<'_> {
            fn drop(&mut self) {
                ServerStats::sub(&self.0.sessions_active, 1);
            }
        }
        let _active = Active(&cfg.stats);

        let mut budget = crate::limits::SessionBudget::new(&cfg.limits, started);
        let udp = udp
            .try_clone()
            .map_err(|e| NetError::io("cloning the probe socket", e))?;
        let session_id = random_u64();
        // Per session, not for the server's life: between sessions the NIC
        // is as the server found it.  The receiver (and with it the NIC's
        // configuration) goes back when the receive thread ends, which is
        // joined before the session returns.
        let receiver = if cfg.hw_stamps {
            TimestampingReceiver::with_hardware(udp)
        } else {
            TimestampingReceiver::new(udp)
        };
        if cfg.log && cfg.hw_stamps {
            match (receiver.hardware(), receiver.hardware_off()) {
                (Some(g), _) if g.changed() => eprintln!(
                    "pathsonde serve: {peer}: {}: NIC receive filter raised to all packets for this session (restored when it ends)",
                    g.interface()
                ),
                (Some(_), _) => {}
                (None, why) => eprintln!(
                    "pathsonde serve: {peer}: no hardware receive stamps ({}); kernel software stamps used",
                    why.unwrap_or("unknown reason")
                ),
            }
        }
        let clock = receiver.clock();
        let probe_addr = receiver
            .socket()
            .local_addr()
            .map_err(|e| NetError::io("reading the probe port", e))?;
        let probe_port = probe_addr.port();
        let shared = Arc::new(Mutex::new(Shared {
            collecting: None,
            probe: receiver.socket().try_clone().ok(),
        }));
        let done = Arc::new(AtomicBool::new(false));
        let rx_thread = {
            let shared = shared.clone();
            let done = done.clone();
            let stats = cfg.stats.clone();
            std::thread::Builder::new()
                .name("pathsonde-rx".into())
                .spawn(move || receive_loop(receiver, peer, session_id, &shared, &done, &stats))
                .map_err(|e| NetError::io("starting the receive thread", e))?
        };
        let ids = SessionIds {
            session: session_id,
            probe_port,
            peer,
        };
        let result = control_loop(
            &mut stream,
            cfg,
            ids,
            clock,
            &shared,
            host_json,
            &mut budget,
        );
        done.store(true, Ordering::SeqCst);
        wake(probe_addr);
        let _ = rx_thread.join();
        drop(measuring);
        if let Err(e) = &result {
            send_error(&mut stream, e);
        }
        result
    }
}

/// Tells the client why its session ends.
fn send_error(stream: &mut TcpStream, e: &NetError) {
    let code = match e {
        NetError::Protocol(_) | NetError::Input(_) => ErrorCode::Protocol,
        NetError::Limit(_) => ErrorCode::Limit,
        NetError::Auth(_) => ErrorCode::Auth,
        _ => ErrorCode::Internal,
    };
    let _ = framing::send(
        stream,
        &ServerMessage::Error {
            code,
            message: e.to_string(),
        },
    );
}

/// What names one session.
#[derive(Debug, Clone, Copy)]
struct SessionIds {
    session: u64,
    probe_port: u16,
    peer: SocketAddr,
}

/// The deadline for the next control message: the idle timeout, or the
/// session's end if that comes first (and then the error says so).
fn recv_next(
    stream: &mut TcpStream,
    cfg: &ServerConfig,
    budget: &crate::limits::SessionBudget,
) -> Result<ClientMessage> {
    let now = Instant::now();
    budget.check_time(now).map_err(NetError::Limit)?;
    let by = (now + cfg.idle_timeout).min(budget.deadline());
    framing::recv_within(
        stream,
        by,
        cfg.limits.max_control_message,
        "a client message",
    )
    .map_err(|e| match e {
        NetError::Timeout { .. } if Instant::now() >= budget.deadline() => {
            NetError::Limit(budget.check_time(Instant::now()).unwrap_err())
        }
        other => other,
    })
}

fn wire_clock(c: pathsonde_core::ClockInfo) -> WireClock {
    WireClock {
        source: match c.source {
            ClockSource::Hardware => WireClockSource::Hardware,
            ClockSource::KernelSoftware => WireClockSource::KernelSoftware,
            ClockSource::UserSpace => WireClockSource::UserSpace,
            ClockSource::Simulated => WireClockSource::Simulated,
        },
        resolution_ns: c.resolution.ns().max(0) as u64,
    }
}

fn control_loop(
    stream: &mut TcpStream,
    cfg: &ServerConfig,
    ids: SessionIds,
    clock: pathsonde_core::ClockInfo,
    shared: &Mutex<Shared>,
    host_json: &std::sync::OnceLock<String>,
    budget: &mut crate::limits::SessionBudget,
) -> Result<()> {
    let clock = wire_clock(clock);
    // The announced train's probe size, for the byte counter.
    let mut payload_len = 0u64;
    let opened = ServerMessage::SessionOpened {
        session: ids.session,
        probe_port: ids.probe_port,
        clock,
        max_train_packets: MAX_TRAIN_PACKETS,
        software: crate::software(),
    };
    // Admission read the client's OpenSession; this is its answer.
    framing::send(stream, &opened)?;
    let mut announced: Option<TrainAnnounce> = None;
    // Whether the client asked for `ReceiverDrops` after each report.
    let mut drops_wanted = false;
    let mut flow_drops_wanted = false;
    loop {
        let msg = match recv_next(stream, cfg, budget) {
            Ok(m) => m,
            Err(NetError::Closed { .. }) => return Ok(()),
            Err(e) => return Err(e),
        };
        match msg {
            ClientMessage::OpenSession { .. } => framing::send(stream, &opened)?,
            ClientMessage::Ping { seq, client_ns } => framing::send(
                stream,
                &ServerMessage::Pong {
                    seq,
                    client_ns,
                    server_ns: clock::realtime().ns(),
                },
            )?,
            ClientMessage::AnnounceTrain(a) => {
                if a.packets == 0 || a.packets > MAX_TRAIN_PACKETS {
                    return Err(NetError::input(format!(
                        "train of {} packets (allowed 1..={MAX_TRAIN_PACKETS})",
                        a.packets
                    )));
                }
                let len = a.payload_len as usize;
                if !(PROBE_HEADER_LEN..=MAX_PROBE_PAYLOAD).contains(&len) {
                    return Err(NetError::input(format!(
                        "probe payload of {len} bytes (allowed {PROBE_HEADER_LEN}..={MAX_PROBE_PAYLOAD})"
                    )));
                }
                payload_len = u64::from(a.payload_len);
                policy::charge_train(budget, &a, ids.peer)?;
                announced = Some(a);
                let mut g = lock(shared);
                let before = g.probe.as_ref().and_then(udp::socket_drops);
                g.collecting = Some(Collecting::new(a, before));
                drop(g);
                framing::send(stream, &ServerMessage::TrainReady { train: a.train })?;
            }
            ClientMessage::TrainSent {
                train,
                packets_sent,
                linger_ms,
            } => {
                let linger = Duration::from_millis(u64::from(linger_ms)).min(cfg.max_linger);
                let (report, before) = finish_train(shared, train, packets_sent, linger, clock)?;
                let after = lock(shared).probe.as_ref().and_then(udp::socket_drops);
                let dropped = before
                    .zip(after)
                    .map(|(b, a)| u32::try_from(a.saturating_sub(b)).unwrap_or(u32::MAX));
                let st = &cfg.stats;
                ServerStats::add(&st.trains, 1);
                ServerStats::add(&st.probe_packets, report.arrivals.len() as u64);
                ServerStats::add(
                    &st.probe_payload_bytes,
                    report.arrivals.len() as u64 * payload_len,
                );
                ServerStats::add(&st.probes_rejected, u64::from(report.rejected));
                ServerStats::add(&st.probes_duplicate, u64::from(report.duplicates));
                if let Some(a) = announced {
                    policy::check_train_rate(budget, &report, a.payload_len, ids.peer)?;
                }
                framing::send(stream, &ServerMessage::TrainReport(report))?;
                if drops_wanted {
                    framing::send(stream, &ServerMessage::ReceiverDrops { train, dropped })?;
                }
            }
            ClientMessage::ReceiverDropsWanted => drops_wanted = true,
            ClientMessage::FlowReceiverDropsWanted => flow_drops_wanted = true,
            ClientMessage::HostReportRequest => {
                // Gathered at start-up; a session that comes first waits (≤ 2 s).
                let started = Instant::now();
                while host_json.get().is_none() && started.elapsed() < Duration::from_secs(2) {
                    std::thread::sleep(Duration::from_millis(5));
                }
                let json = host_json.get().cloned().unwrap_or_else(|| {
                    r#"{"unavailable":"the server's host report was not ready"}"#.to_string()
                });
                framing::send(stream, &host_report(json)?)?
            }
            ClientMessage::Close => return Ok(()),
            ClientMessage::Flow(spec) => {
                crate::throughput::server::serve_flow(stream, &spec, budget, flow_drops_wanted)?
            }
            ClientMessage::Authenticate { .. } => {
                return Err(NetError::protocol(
                    "Authenticate outside the authentication exchange",
                ))
            }
        }
    }
}

/// Waits until every sent packet has arrived or no packet has arrived for
/// `linger`, then hands back the train's arrivals.
fn finish_train(
    shared: &Mutex<Shared>,
    train: u32,
    packets_sent: u32,
    linger: Duration,
    clock: WireClock,
) -> Result<(TrainReport, Option<u64>)> {
    let waited_from = Instant::now();
    loop {
        {
            let mut g = lock(shared);
            let Some(c) = g.collecting.as_ref() else {
                return Err(NetError::input("train sent without announcement"));
            };
            if c.announce.train != train {
                return Err(NetError::input(format!(
                    "train {train} sent, but train {} was announced",
                    c.announce.train
                )));
            }
            let quiet_since = c.last_arrival.unwrap_or(waited_from).max(waited_from);
            let complete = c.arrivals.len() as u32 >= packets_sent.min(c.announce.packets);
            if complete || quiet_since.elapsed() >= linger {
                let c = g.collecting.take().expect("checked above");
                let (arrivals, clock) = train_clock(c.arrivals, &c.hardware, clock);
                return Ok((
                    TrainReport {
                        train,
                        arrivals,
                        duplicates: c.duplicates,
                        rejected: c.rejected,
                        clock,
                    },
                    c.drops_before,
                ));
            }
        }
        std::thread::sleep(Duration::from_micros(500));
    }
}

/// One clock per train: the NIC's hardware stamps only if every arrival had
/// one (the PHC and CLOCK_REALTIME must not mix within a train), else the
/// kernel's software stamps and the session's clock.
fn train_clock(
    mut arrivals: Vec<Arrival>,
    hardware: &[Option<i64>],
    clock: WireClock,
) -> (Vec<Arrival>, WireClock) {
    if arrivals.is_empty()
        || hardware.len() != arrivals.len()
        || hardware.iter().any(Option::is_none)
    {
        return (arrivals, clock);
    }
    for (a, h) in arrivals.iter_mut().zip(hardware) {
        a.recv_ns = h.expect("checked above");
    }
    (
        arrivals,
        WireClock {
            source: WireClockSource::Hardware,
            resolution_ns: 1,
        },
    )
}

fn lock(m: &Mutex<Shared>) -> std::sync::MutexGuard<'_, Shared> {
    // A panic in the other thread must not wedge the session: the data is
    // plain counters, still consistent.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn receive_loop(
    mut rx: TimestampingReceiver,
    peer: SocketAddr,
    session: u64,
    shared: &Mutex<Shared>,
    done: &AtomicBool,
    stats: &ServerStats,
) {
    let _ = rx
        .socket()
        .set_read_timeout(Some(Duration::from_millis(20)));
    let mut buf = vec![0u8; MAX_PROBE_PAYLOAD + 1];
    let mut answering = Answering {
        source: policy::ProbeSource::new(peer),
        echoes: 0,
    };
    while !done.load(Ordering::SeqCst) {
        let got = match rx.recv(&mut buf) {
            Ok(g) => g,
            Err(_) => continue,
        };
        let Some(from) = got.from else { continue };
        // No reflection: only the control peer's packets are looked at, and
        // once one carried the session id, only that address and port's.
        if !answering.source.may_be_ours(from) {
            continue;
        }
        let Ok(header) = ProbeHeader::decode(&buf[..got.len]) else {
            if let Some(c) = lock(shared).collecting.as_mut() {
                c.rejected = c.rejected.saturating_add(1);
            }
            continue;
        };
        if header.session != session {
            continue;
        }
        answering.source.confirm(from);
        match header.kind {
            ProbeKind::EchoRequest => {
                // Never more than asked: the reply is the request's size,
                // small, and a session gets a bounded number of them.
                if got.len > policy::MAX_ECHO_PAYLOAD || answering.echoes >= policy::MAX_ECHOES {
                    continue;
                }
                answering.echoes += 1;
                let reply = ProbeHeader {
                    kind: ProbeKind::EchoReply,
                    ..header
                };
                reply.write_header(&mut buf);
                if rx.socket().send_to(&buf[..got.len], from).is_ok() {
                    ServerStats::add(&stats.echo_replies, 1);
                }
            }
            ProbeKind::EchoReply => {}
            ProbeKind::Probe => {
                let mut g = lock(shared);
                let Some(c) = g.collecting.as_mut() else {
                    continue;
                };
                if header.train != c.announce.train
                    || got.len != c.announce.payload_len as usize
                    || header.seq >= c.announce.packets
                {
                    c.rejected = c.rejected.saturating_add(1);
                } else if c.seen[header.seq as usize] {
                    c.duplicates = c.duplicates.saturating_add(1);
                } else {
                    c.seen[header.seq as usize] = true;
                    c.arrivals.push(Arrival {
                        seq: header.seq,
                        recv_ns: got.at.ns(),
                    });
                    c.hardware.push(got.hardware.map(|h| h.ns()));
                    c.last_arrival = Some(Instant::now());
                }
            }
        }
    }
}

/// Sends an empty datagram to the probe socket so that the receive thread,
/// blocked in `recvmsg`, sees `done` at once: the next client must not be told
/// "busy" while the previous session winds down.  The datagram carries no
/// session id and is ignored.
fn wake(probe: SocketAddr) {
    let target = match probe.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => {
            SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, probe.port()))
        }
        IpAddr::V6(ip) if ip.is_unspecified() => {
            SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, probe.port()))
        }
        _ => probe,
    };
    let bind: SocketAddr = if target.is_ipv4() {
        (std::net::Ipv4Addr::UNSPECIFIED, 0).into()
    } else {
        (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
    };
    if let Ok(s) = UdpSocket::bind(bind) {
        let _ = s.send_to(&[], target);
    }
}

/// A session id that a stranger cannot guess, from the kernel's random source.
fn random_u64() -> u64 {
    crate::random::u64()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arrivals(n: u32) -> Vec<Arrival> {
        (0..n)
            .map(|seq| Arrival {
                seq,
                recv_ns: 1_000 + i64::from(seq),
            })
            .collect()
    }
    const SOFT: WireClock = WireClock {
        source: WireClockSource::KernelSoftware,
        resolution_ns: 1,
    };

    #[test]
    fn a_train_is_hardware_stamped_only_if_every_packet_was() {
        let (a, c) = train_clock(arrivals(3), &[Some(7), Some(8), Some(9)], SOFT);
        assert_eq!(c.source, WireClockSource::Hardware);
        assert_eq!(a.iter().map(|a| a.recv_ns).collect::<Vec<_>>(), [7, 8, 9]);
        // One packet without a NIC stamp: the whole train keeps software stamps.
        let (a, c) = train_clock(arrivals(3), &[Some(7), None, Some(9)], SOFT);
        assert_eq!(c.source, WireClockSource::KernelSoftware);
        assert_eq!(a[0].recv_ns, 1_000);
        let (_, c) = train_clock(Vec::new(), &[], SOFT);
        assert_eq!(c.source, WireClockSource::KernelSoftware);
    }
}
