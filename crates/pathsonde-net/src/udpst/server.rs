//! The UDPSTP server `pathsonde serve` runs on UDP port 24601: Setup
//! Requests on the control socket, checked in the spec's order (§3.1), then
//! one thread per admitted connection with its own test socket on an
//! ephemeral port, connected to the client after its Test Activation.
//!
//! No reflection or amplification (docs/security.md): a datagram from a
//! source outside `--allow`, or one that is not a well-formed Setup
//! Request, gets no reply at all; a Setup Response is the request's size
//! (56 bytes) and goes only to the request's source; the Null Request (48
//! bytes) and everything after go only to an address:port that completed a
//! valid setup, and load only after that address:port sent a valid Test
//! Activation Request to its test port; the load is capped at the
//! `--max-rate` ceiling row and the test at `--max-duration`.  One test
//! (one client address and mc_ident) at a time, at most `max_connections`
//! (≤ 256) connections.

use super::keys::{self, SessionKeys};
use super::pdu::{self, StatusFields};
use super::tx::{lock, LoadSender, TxShared};
use super::{CapacityError, Direction};
use crate::allow::AllowList;
use crate::clock;
use crate::udp::{self, TimestampingReceiver};
use pathsonde_core::capacity::adjust::{adjuster, AdjustConfig, Algorithm, LoadAdjust, RateMode};
use pathsonde_core::capacity::rate_table::{row_at_or_below, sending_rate, RowIndex, TableOptions};
use pathsonde_core::capacity::receiver::{Ecn, LoadArrival, LoadReceiver, ReceiverConfig};
use pathsonde_core::capacity::{SERVER_STOP_GRACE, WATCHDOG};
use pathsonde_core::{BitRate, Bytes, DurationNs};
use pathsonde_wire::udpst::activation::{
    ActivationModifiers, ActivationResult, Packet as ActivationPacket, RateAdjAlgo,
    Repr as ActivationRepr,
};
use pathsonde_wire::udpst::auth::{self, AuthMode, AuthTrailer};
use pathsonde_wire::udpst::load::{Repr as LoadRepr, STATUS_LOSS_OUT_OF_ORDER};
use pathsonde_wire::udpst::null::Repr as NullRepr;
use pathsonde_wire::udpst::rate::SendingRate as WireRate;
use pathsonde_wire::udpst::setup::{
    Packet as SetupPacket, Repr as SetupRepr, SetupCommand, SetupResult, MAX_MC_COUNT,
};
use pathsonde_wire::udpst::status::Repr as StatusRepr;
use pathsonde_wire::udpst::{version_accepted, PduKind, TestAction, Timestamp};
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// The most connections one server holds (spec §8).
pub const MAX_SERVER_CONNECTIONS: usize = 256;
/// Setup Requests answered per second, on average, over all sources: a
/// spoofed request makes the server send its response (and, on ACK, a Null
/// Request) to the spoofed address, so answers are rate-limited.  A real
/// client sends at most 24 per test.
pub const SETUP_ANSWERS_PER_SEC: f64 = 50.0;
/// The burst of Setup Requests answered at once.
pub const SETUP_ANSWER_BURST: f64 = 100.0;

/// A token bucket on CLOCK_MONOTONIC.
struct Bucket {
    tokens: f64,
    at: pathsonde_core::TimeNs,
}

impl Bucket {
    fn new() -> Bucket {
        Bucket {
            tokens: SETUP_ANSWER_BURST,
            at: clock::monotonic(),
        }
    }
    fn take(&mut self) -> bool {
        let now = clock::monotonic();
        let dt = now.since(self.at).secs_f64().max(0.0);
        self.at = now;
        self.tokens = (self.tokens + dt * SETUP_ANSWERS_PER_SEC).min(SETUP_ANSWER_BURST);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// The UDPSTP server's configuration (`serve`'s flags).
#[derive(Debug, Clone)]
pub struct UdpstServerConfig {
    /// The control address (UDP; port 24601 by default, 0 picks one).
    pub bind: SocketAddr,
    /// Mode-1 secrets by key id (from `--key-file`'s numeric key ids, their
    /// secrets hex-decoded).  `Some` (even empty): authentication required,
    /// an unauthenticated request gets code 5; `None`: none configured, an
    /// authenticated request gets code 4.
    pub keys: Option<BTreeMap<u8, Vec<u8>>>,
    /// Sources allowed; others get no reply at all.
    pub allow: AllowList,
    /// The ceiling: no connection's row goes above it (split over a test's
    /// connections), and the stated max_bandwidth of a direction's
    /// connections may not add up past it (code 10).
    pub max_rate: BitRate,
    /// The longest test_duration granted (5 s at least, the protocol's minimum).
    pub max_duration: DurationNs,
    /// Jumbo datagram sizes above 1 Gb/s (the client's bit must match; default true).
    pub jumbo: bool,
    /// 1500-byte MTU sizes (the client's bit must match; default false).
    pub traditional_mtu: bool,
    /// Connections held at once (capped at 256).
    pub max_connections: usize,
    /// Say on stderr what was refused and why.
    pub log: bool,
}

impl UdpstServerConfig {
    pub fn new(bind: SocketAddr) -> Self {
        UdpstServerConfig {
            bind,
            keys: None,
            allow: AllowList::default(),
            max_rate: BitRate::from_bps(10e9),
            max_duration: DurationNs::from_secs(3600),
            jumbo: true,
            traditional_mtu: false,
            max_connections: MAX_SERVER_CONNECTIONS,
            log: false,
        }
    }
    fn table(&self) -> TableOptions {
        TableOptions {
            jumbo: self.jumbo,
            traditional_mtu: self.traditional_mtu,
        }
    }
    fn max_mbps(&self) -> u64 {
        (self.max_rate.bps() / 1e6).floor().max(0.0) as u64
    }
    fn max_duration_s(&self) -> u16 {
        (self.max_duration.ns() / 1_000_000_000).clamp(5, 3600) as u16
    }
}

/// Counters about the UDPSTP side, for tests and monitoring.
#[derive(Debug, Default)]
pub struct UdpstStats {
    pub setups_accepted: AtomicU64,
    pub setups_rejected: AtomicU64,
    /// Datagrams dropped without a reply (not allowed, malformed, not a request).
    pub dropped: AtomicU64,
    pub tests_completed: AtomicU64,
    pub bytes_sent: AtomicU64,
    pub bytes_received: AtomicU64,
}

/// A bound UDPSTP server.
pub struct UdpstServer {
    sock: UdpSocket,
    cfg: Arc<UdpstServerConfig>,
    stats: Arc<UdpstStats>,
}

/// A server running on its own thread; [`UdpstServerHandle::stop`] ends it.
pub struct UdpstServerHandle {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    stats: Arc<UdpstStats>,
    thread: Option<JoinHandle<()>>,
}

impl UdpstServerHandle {
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }
    /// The server's counters, shared (a metrics page reads them while it runs).
    pub fn stats(&self) -> Arc<UdpstStats> {
        self.stats.clone()
    }
    /// Stops the server and its connections, and waits for them.
    pub fn stop(mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Binds and starts a server on its own thread.
pub fn spawn_server(cfg: UdpstServerConfig) -> Result<UdpstServerHandle, CapacityError> {
    UdpstServer::bind(cfg)?.spawn()
}

/// The one test the server is serving, and what it holds.
#[derive(Debug, Default)]
struct Registry {
    group: Option<(IpAddr, u16)>,
    live: usize,
    /// Stated bandwidth held per direction, Mb/s (upstream, downstream).
    held: [u64; 2],
}

struct ConnGuard {
    reg: Arc<Mutex<Registry>>,
    dir: usize,
    mbps: u64,
}

impl Drop for ConnGuard {
    fn drop(&mut self) {
        let mut r = self.reg.lock().unwrap_or_else(|e| e.into_inner());
        r.live = r.live.saturating_sub(1);
        r.held[self.dir] = r.held[self.dir].saturating_sub(self.mbps);
        if r.live == 0 {
            r.group = None;
        }
    }
}

/// What the checks decided about one Setup Request.
struct Decision {
    result: SetupResult,
    /// Keys derived from the client's secret (to sign the response).
    session: Option<SessionKeys>,
    guard: Option<ConnGuard>,
    /// The rate this connection may reach.
    ceiling: BitRate,
}

impl UdpstServer {
    pub fn bind(cfg: UdpstServerConfig) -> Result<UdpstServer, CapacityError> {
        let sock = UdpSocket::bind(cfg.bind)
            .map_err(|e| CapacityError::io(format!("binding UDP {} for UDPST", cfg.bind), e))?;
        Ok(UdpstServer {
            sock,
            cfg: Arc::new(cfg),
            stats: Arc::new(UdpstStats::default()),
        })
    }

    pub fn local_addr(&self) -> Result<SocketAddr, CapacityError> {
        self.sock
            .local_addr()
            .map_err(|e| CapacityError::io("reading the bound address", e))
    }

    pub fn stats(&self) -> Arc<UdpstStats> {
        self.stats.clone()
    }

    pub fn spawn(self) -> Result<UdpstServerHandle, CapacityError> {
        let addr = self.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let stats = self.stats.clone();
        let thread = std::thread::Builder::new()
            .name("pathsonde-udpst".into())
            .spawn(move || self.run(&stop2))
            .map_err(|e| CapacityError::io("starting the UDPST server thread", e))?;
        Ok(UdpstServerHandle {
            addr,
            stop,
            stats,
            thread: Some(thread),
        })
    }

    /// Serves until `stop` is set; then ends every connection and returns.
    pub fn run(self, stop: &AtomicBool) {
        let _ = self.sock.set_read_timeout(Some(Duration::from_millis(100)));
        let reg = Arc::new(Mutex::new(Registry::default()));
        let cfg = &*self.cfg;
        let stats = &*self.stats;
        std::thread::scope(|s| {
            let mut buf = [0u8; 2048];
            let mut answers = Bucket::new();
            while !stop.load(Ordering::SeqCst) {
                let (len, from) = match self.sock.recv_from(&mut buf) {
                    Ok(x) => x,
                    Err(_) => continue,
                };
                let d = &buf[..len];
                if !cfg.allow.allows(from.ip()) {
                    if cfg.log {
                        eprintln!("pathsonde serve: UDPST {from}: dropped (not in --allow)");
                    }
                    stats.dropped.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                // Length 56, identifier, cmd_request, checksum: else silence.
                let req = match SetupPacket::new_checked(d).and_then(|p| SetupRepr::parse(&p)) {
                    Ok(r) if r.command == SetupCommand::Request => r,
                    _ => {
                        stats.dropped.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                };
                stats
                    .bytes_received
                    .fetch_add(len as u64, Ordering::Relaxed);
                if !answers.take() {
                    stats.dropped.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                let dec = self.check(&req, d, from, &reg);
                let mut result = dec.result;
                let mut test = None;
                if result == SetupResult::Ack {
                    match udp::bind(SocketAddr::new(cfg.bind.ip(), 0)) {
                        Ok(t) => match t.local_addr() {
                            Ok(a) => test = Some((t, a.port())),
                            Err(_) => result = SetupResult::AllocationFailed,
                        },
                        Err(_) => result = SetupResult::AllocationFailed,
                    }
                }
                let port = test.as_ref().map(|t| t.1).unwrap_or(0);
                let mut resp = req.response(result, port).to_bytes();
                let mode = if dec.session.is_some() {
                    AuthMode::Control
                } else {
                    AuthMode::None
                };
                if let Some(k) = &dec.session {
                    keys::sign(&mut resp, &k.server, k.key_id);
                }
                if let (Some((tsock, _)), Some(guard)) = (test, dec.guard) {
                    let conn = Conn {
                        cfg,
                        stats,
                        stop,
                        client: from,
                        session: dec.session,
                        mode,
                        ceiling: dec.ceiling,
                        _guard: guard,
                    };
                    let spawned = std::thread::Builder::new()
                        .name("udpst-conn".into())
                        .spawn_scoped(s, move || conn.serve(tsock));
                    if spawned.is_err() {
                        let _ = self.sock.send_to(
                            &req.response(SetupResult::AllocationFailed, 0).to_bytes(),
                            from,
                        );
                        continue;
                    }
                    // The Null Request (from the test port) is sent by the
                    // connection thread before it waits for the activation.
                    stats.setups_accepted.fetch_add(1, Ordering::Relaxed);
                } else {
                    stats.setups_rejected.fetch_add(1, Ordering::Relaxed);
                    if cfg.log {
                        eprintln!(
                            "pathsonde serve: UDPST {from}: setup refused: {} (code {})",
                            super::setup_code_meaning(result.code()),
                            result.code()
                        );
                    }
                }
                if self.sock.send_to(&resp, from).is_ok() {
                    stats
                        .bytes_sent
                        .fetch_add(resp.len() as u64, Ordering::Relaxed);
                }
            }
        });
    }

    /// The checks of spec §3.1, in its order (the PDU checks were done).
    fn check(
        &self,
        req: &SetupRepr,
        raw: &[u8],
        from: SocketAddr,
        reg: &Arc<Mutex<Registry>>,
    ) -> Decision {
        let cfg = &*self.cfg;
        let reject = |result, session| Decision {
            result,
            session,
            guard: None,
            ceiling: BitRate::from_bps(0.0),
        };
        // 2. Digest, then time window, when mode 1 and keys are configured.
        let mut session = None;
        if req.auth.mode == AuthMode::Control {
            if let Some(table) = &cfg.keys {
                let Some(secret) = table.get(&req.auth.key_id) else {
                    return reject(SetupResult::AuthFailure, None);
                };
                let k = SessionKeys::derive(secret, req.auth.time, req.auth.key_id);
                if keys::digest_ok(raw, &k.client, &req.auth).is_err() {
                    // Signed with our keys: the client cannot verify them either.
                    return reject(SetupResult::AuthFailure, Some(k));
                }
                if !auth::auth_time_ok(req.auth.time, keys::unix_now()) {
                    return reject(SetupResult::AuthTimeInvalid, Some(k));
                }
                session = Some(k);
            }
        }
        // 3. Version.
        if !version_accepted(req.version) {
            return reject(SetupResult::BadVersion, session);
        }
        // 4. Multi-connection parameters.
        if req.mc_count == 0 || req.mc_count > MAX_MC_COUNT || req.mc_index >= req.mc_count {
            return reject(SetupResult::InvalidMultiConnection, session);
        }
        // 5. Jumbo, then traditional MTU.
        if req.modifiers.jumbo() != cfg.jumbo {
            return reject(SetupResult::JumboMismatch, session);
        }
        if req.modifiers.traditional_mtu() != cfg.traditional_mtu {
            return reject(SetupResult::TraditionalMtuMismatch, session);
        }
        let mut r = reg.lock().unwrap_or_else(|e| e.into_inner());
        // 6. Bandwidth: a stated need must fit in what the direction has
        // free.  (A request that states none is accepted: this server
        // always has a ceiling, so code 9 would refuse every default client;
        // its load is capped by the ceiling row instead.)
        let dir = if req.max_bandwidth.upstream { 0 } else { 1 };
        let want = u64::from(req.max_bandwidth.mbps);
        if want > 0 && r.held[dir].saturating_add(want) > cfg.max_mbps() {
            return reject(SetupResult::BandwidthExceeded, session);
        }
        // 7. Authentication present but not configured, missing but
        // required, or a mode above 1.
        match (req.auth.mode, cfg.keys.is_some()) {
            (AuthMode::None, true) => return reject(SetupResult::AuthRequired, session),
            (AuthMode::None, false) | (AuthMode::Control, true) => {}
            (_, false) => return reject(SetupResult::AuthNotConfigured, session),
            (_, true) => return reject(SetupResult::InvalidAuthMode, session),
        }
        // 8. Allocation: one test at a time, bounded connections.
        let group = (from.ip(), req.mc_ident);
        let cap = cfg.max_connections.clamp(1, MAX_SERVER_CONNECTIONS);
        if r.group.is_some_and(|g| g != group) || r.live >= cap {
            return reject(SetupResult::AllocationFailed, session);
        }
        r.group = Some(group);
        r.live += 1;
        r.held[dir] += want;
        let mut ceiling = cfg.max_rate.bps() / f64::from(req.mc_count.max(1));
        if want > 0 {
            ceiling = ceiling.min(want as f64 * 1e6);
        }
        Decision {
            result: SetupResult::Ack,
            session,
            guard: Some(ConnGuard {
                reg: reg.clone(),
                dir,
                mbps: want,
            }),
            ceiling: BitRate::from_bps(ceiling),
        }
    }
}

/// One admitted connection.
struct Conn<'a> {
    cfg: &'a UdpstServerConfig,
    stats: &'a UdpstStats,
    stop: &'a AtomicBool,
    client: SocketAddr,
    session: Option<SessionKeys>,
    mode: AuthMode,
    ceiling: BitRate,
    _guard: ConnGuard,
}

/// What the server makes of a TA Request (spec §3.3's policing): the
/// response to send, and the search's configuration.
pub fn police(
    req: &ActivationRepr,
    cfg: &UdpstServerConfig,
    ceiling: RowIndex,
) -> (ActivationRepr, AdjustConfig) {
    let mut r = *req;
    r.result = ActivationResult::Ack;
    r.auth = AuthTrailer::NONE;
    let ok = |v: u16| (1..=10_000).contains(&v);
    if !ok(r.low_thresh_ms) {
        r.low_thresh_ms = 30;
    }
    if !ok(r.upper_thresh_ms) {
        r.upper_thresh_ms = 90;
    }
    if r.low_thresh_ms > r.upper_thresh_ms {
        r.low_thresh_ms = 30;
        r.upper_thresh_ms = 90;
    }
    if !(5..=250).contains(&r.trial_interval_ms) {
        r.trial_interval_ms = 50;
    }
    let cap = cfg.max_duration_s();
    if !(5..=3600).contains(&r.test_duration_s) {
        r.test_duration_s = 10;
    }
    r.test_duration_s = r.test_duration_s.min(cap);
    if !(100..=10_000).contains(&r.sub_interval_ms) {
        r.sub_interval_ms = 1000;
    }
    if u32::from(r.sub_interval_ms) > u32::from(r.test_duration_s) * 1000 {
        r.test_duration_s = 10u16.min(cap);
        r.sub_interval_ms = 1000;
    }
    r.sr_index = match r.sr_index {
        None => None,
        Some(v) if v > RowIndex::MAX.get() => None,
        Some(v) => Some(v.min(ceiling.get())),
    };
    if r.high_speed_delta == 0 {
        r.high_speed_delta = 10;
    }
    if r.slow_adj_thresh == 0 {
        r.slow_adj_thresh = 3;
    }
    if let RateAdjAlgo::Unknown(_) = r.rate_adj_algo {
        r.rate_adj_algo = RateAdjAlgo::TypeB;
    }
    // Only the start-index bit is kept: random payload is not offered.
    r.modifiers = ActivationModifiers(r.modifiers.0 & ActivationModifiers::START_INDEX);
    // ECN marks are not read by this server: no CE threshold.
    r.ecn_ce_thresh = 0;
    let subints = u32::from(r.test_duration_s) * 1000 / u32::from(r.sub_interval_ms.max(1));
    if u32::from(r.suppress_subints) >= subints {
        r.suppress_subints = 0;
    }
    let row = |v: u16| RowIndex::new(v).unwrap_or(RowIndex::MAX);
    let mode = match r.sr_index {
        None => RateMode::Search,
        Some(v) if r.modifiers.start_index() => RateMode::StartAt(row(v)),
        Some(v) => RateMode::Fixed(row(v)),
    };
    let ms = |v: u16| DurationNs::from_ms(i64::from(v));
    let adj = AdjustConfig {
        algorithm: match r.rate_adj_algo {
            RateAdjAlgo::TypeC => Algorithm::C,
            _ => Algorithm::B,
        },
        mode,
        ceiling,
        low_thresh: ms(r.low_thresh_ms),
        upper_thresh: ms(r.upper_thresh_ms),
        use_owd: r.use_owd,
        high_speed_delta: r.high_speed_delta,
        slow_adj_thresh: r.slow_adj_thresh,
        seq_err_thresh: r.seq_err_thresh,
        ignore_reorder_dup: r.ignore_reorder_dup,
        ecn_ce_thresh: 0,
        suppress_subints: r.suppress_subints,
    }
    .policed();
    r.sending_rate = match r.direction {
        Direction::Upstream => pdu::to_wire_rate(&sending_rate(adj.initial_row(), cfg.table())),
        Direction::Downstream => WireRate::ZERO,
    };
    (r, adj)
}

impl Conn<'_> {
    fn serve(self, sock: UdpSocket) {
        let null = {
            let mut b = NullRepr::default().to_bytes();
            if let Some(k) = &self.session {
                keys::sign(&mut b, &k.server, k.key_id);
            }
            b
        };
        if sock.send_to(&null, self.client).is_ok() {
            self.stats
                .bytes_sent
                .fetch_add(null.len() as u64, Ordering::Relaxed);
        }
        let _ = sock.set_read_timeout(Some(Duration::from_millis(100)));
        let deadline = clock::monotonic() + WATCHDOG;
        let mut buf = [0u8; 256];
        // The Test Activation Request, from the client only, valid and (if
        // the setup was) authenticated; anything else is dropped silently.
        let req = loop {
            if self.stop.load(Ordering::Relaxed) || clock::monotonic() >= deadline {
                return;
            }
            let (len, from) = match sock.recv_from(&mut buf) {
                Ok(x) => x,
                Err(_) => continue,
            };
            if from != self.client {
                continue;
            }
            let d = &buf[..len];
            if PduKind::of(d) != Some(PduKind::Activation) {
                continue;
            }
            let Ok(p) = ActivationPacket::new_checked(d) else {
                continue;
            };
            if let Some(k) = &self.session {
                if keys::verify(d, &k.client).is_err() {
                    continue;
                }
            }
            let Ok(r) = ActivationRepr::parse(&p) else {
                continue;
            };
            if r.result != ActivationResult::None {
                continue;
            }
            self.stats
                .bytes_received
                .fetch_add(len as u64, Ordering::Relaxed);
            break r;
        };
        let opts = self.cfg.table();
        let ceiling = row_at_or_below(self.ceiling, opts);
        let (mut resp, adj_cfg) = police(&req, self.cfg, ceiling);
        if resp.dscp_ecn != 0 {
            let r = socket2::SockRef::from(&sock);
            let set = if self.client.is_ipv4() {
                r.set_tos_v4(u32::from(resp.dscp_ecn))
            } else {
                r.set_tclass_v6(u32::from(resp.dscp_ecn))
            };
            if set.is_err() {
                resp.dscp_ecn = 0;
            }
        }
        if sock.connect(self.client).is_err() {
            return;
        }
        let mut out = resp.to_bytes();
        if let Some(k) = &self.session {
            keys::sign(&mut out, &k.server, k.key_id);
        }
        if sock.send(&out).is_ok() {
            self.stats
                .bytes_sent
                .fetch_add(out.len() as u64, Ordering::Relaxed);
        }
        if self.cfg.log {
            eprintln!(
                "pathsonde serve: UDPST {}: {:?} test of {} s activated (ceiling {})",
                self.client, resp.direction, resp.test_duration_s, self.ceiling
            );
        }
        let adj = adjuster(adj_cfg);
        let completed = match resp.direction {
            Direction::Upstream => self.upstream(sock, &resp, adj, opts),
            Direction::Downstream => self.downstream(&sock, &resp, adj, opts),
        };
        if completed {
            self.stats.tests_completed.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Upstream: receive the load, send a Status PDU every trial interval
    /// with the row the search chose.  True when the client confirmed the stop.
    fn upstream(
        &self,
        sock: UdpSocket,
        ta: &ActivationRepr,
        mut adj: Box<dyn LoadAdjust>,
        opts: TableOptions,
    ) -> bool {
        let mut rx = TimestampingReceiver::new(sock);
        let _ = rx.socket().set_read_timeout(Some(Duration::from_millis(1)));
        let activated = clock::monotonic();
        let trial = DurationNs::from_ms(i64::from(ta.trial_interval_ms.max(1)));
        let rcfg = ReceiverConfig {
            trial_interval: trial,
            sub_interval: DurationNs::from_ms(i64::from(ta.sub_interval_ms.max(1))),
            ecn: false,
        };
        let mut recv = LoadReceiver::new(rcfg, clock::realtime());
        let stop_at =
            activated + DurationNs::from_secs(i64::from(ta.test_duration_s)) + SERVER_STOP_GRACE;
        let mut watchdog = activated + WATCHDOG;
        let mut next_status = activated + trial;
        let mut status_seq = 0u32;
        let mut stopping = false;
        let mut buf = [0u8; 256];
        let send = |rx: &TimestampingReceiver, st: &StatusRepr| {
            let b = st.to_bytes();
            if rx.socket().send(&b).is_ok() {
                self.stats
                    .bytes_sent
                    .fetch_add(b.len() as u64, Ordering::Relaxed);
            }
        };
        loop {
            let now = clock::monotonic();
            if self.stop.load(Ordering::Relaxed) || now >= watchdog {
                return false;
            }
            if !stopping && now >= next_status {
                next_status = next_status + trial;
                if next_status <= now {
                    next_status = now + trial;
                }
                let rt = clock::realtime();
                if now >= stop_at {
                    // The final Status PDU; the status timer ends with it.
                    stopping = true;
                    status_seq += 1;
                    send(
                        &rx,
                        &pdu::stop_status(status_seq, TestAction::Stop, rt, self.mode),
                    );
                } else if let Some(report) = recv.on_status_due(rt) {
                    let d = adj.on_feedback(&report.trial.feedback(report.subint_seq));
                    status_seq += 1;
                    let st = pdu::status_pdu(&StatusFields {
                        report: &report,
                        status_seq,
                        action: TestAction::Testing,
                        rx_stopped: recv.rx_stopped(rt),
                        row: pdu::to_wire_rate(&sending_rate(d.row, opts)),
                        sent_at: rt,
                        auth_mode: self.mode,
                    });
                    send(&rx, &st);
                }
            }
            let r = match rx.recv(&mut buf) {
                Ok(r) => r,
                Err(_) => continue,
            };
            let d = &buf[..r.len.min(buf.len())];
            let Ok(l) = LoadRepr::decode(d) else {
                continue;
            };
            self.stats
                .bytes_received
                .fetch_add(u64::from(l.payload_len), Ordering::Relaxed);
            if l.test_action.is_stop() {
                return stopping;
            }
            if stopping {
                continue;
            }
            watchdog = clock::monotonic() + WATCHDOG;
            recv.on_load(&LoadArrival {
                seq: l.seq,
                payload_len: Bytes::new(u64::from(l.payload_len)),
                sent_at: pdu::from_timestamp(l.send_time),
                received_at: r.at,
                echo: (l.echo_time != Timestamp::default())
                    .then(|| pdu::from_timestamp(l.echo_time)),
                resp_delay: DurationNs::from_ms(i64::from(l.resp_delay_ms)),
                ecn: Ecn::NotEct,
            });
        }
    }

    /// Downstream: send the load at the row the search chooses on each
    /// Status PDU.  True when the client confirmed the stop.
    fn downstream(
        &self,
        sock: &UdpSocket,
        ta: &ActivationRepr,
        mut adj: Box<dyn LoadAdjust>,
        opts: TableOptions,
    ) -> bool {
        let activated = clock::monotonic();
        let shared = Mutex::new(TxShared::new(sending_rate(adj.row(), opts)));
        let stop_at =
            activated + DurationNs::from_secs(i64::from(ta.test_duration_s)) + SERVER_STOP_GRACE;
        let _ = sock.set_read_timeout(Some(Duration::from_millis(20)));
        let v6 = self.client.is_ipv6();
        let sent = AtomicU64::new(0);
        // Datagrams cut to the path's MTU: the client's own counts show it.
        let clamped = AtomicU64::new(0);
        let done = |confirmed: bool| {
            lock(&shared).done = true;
            confirmed
        };
        let confirmed = std::thread::scope(|s| {
            let spawned = std::thread::Builder::new()
                .name("udpst-tx".into())
                .spawn_scoped(s, || {
                    LoadSender::new(sock, &shared, v6, activated, &sent, &clamped).run()
                });
            if spawned.is_err() {
                return false;
            }
            let mut watchdog = activated + WATCHDOG;
            let mut last_rx = activated;
            let mut last_seq = 0u32;
            let mut stopping = false;
            let mut buf = [0u8; 256];
            loop {
                let now = clock::monotonic();
                if self.stop.load(Ordering::Relaxed) || now >= watchdog {
                    return done(false);
                }
                if !stopping && now >= stop_at {
                    stopping = true;
                    lock(&shared).action = TestAction::Stop;
                }
                lock(&shared).rx_stopped = now.since(last_rx) >= DurationNs::from_secs(1);
                let len = match sock.recv(&mut buf) {
                    Ok(n) => n,
                    Err(_) => continue,
                };
                let Ok(st) = StatusRepr::decode(&buf[..len]) else {
                    continue;
                };
                self.stats
                    .bytes_received
                    .fetch_add(len as u64, Ordering::Relaxed);
                if st.test_action.is_stop() {
                    return done(stopping);
                }
                let now = clock::monotonic();
                if !stopping {
                    watchdog = now + WATCHDOG;
                }
                last_rx = now;
                let loss = if last_seq != 0 && st.status_seq > last_seq.wrapping_add(1) {
                    u16::try_from(st.status_seq - last_seq - 1).unwrap_or(u16::MAX - 1)
                } else if st.status_seq <= last_seq {
                    STATUS_LOSS_OUT_OF_ORDER
                } else {
                    0
                };
                last_seq = last_seq.max(st.status_seq);
                let row = (!stopping)
                    .then(|| sending_rate(adj.on_feedback(&pdu::feedback(&st)).row, opts));
                let mut g = lock(&shared);
                g.echo = st.send_time;
                g.status_at = Some(now);
                g.status_loss = loss;
                if let Some(row) = row {
                    g.row = row;
                }
            }
        });
        self.stats
            .bytes_sent
            .fetch_add(sent.load(Ordering::Relaxed), Ordering::Relaxed);
        confirmed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> UdpstServerConfig {
        UdpstServerConfig::new("127.0.0.1:0".parse().unwrap())
    }

    #[test]
    fn policing_follows_the_spec_table() {
        let mut req = ActivationRepr::request(Direction::Upstream);
        req.low_thresh_ms = 0;
        req.upper_thresh_ms = 20_000;
        req.trial_interval_ms = 1;
        req.test_duration_s = 4000;
        req.sub_interval_ms = 50;
        req.sr_index = Some(2000);
        req.high_speed_delta = 0;
        req.slow_adj_thresh = 0;
        req.rate_adj_algo = RateAdjAlgo::Unknown(9);
        req.modifiers = ActivationModifiers(0xFF);
        req.ecn_ce_thresh = 5;
        req.suppress_subints = 100;
        let mut c = cfg();
        c.max_duration = DurationNs::from_secs(60);
        let (r, adj) = police(&req, &c, RowIndex::MAX);
        assert_eq!((r.low_thresh_ms, r.upper_thresh_ms), (30, 90));
        assert_eq!(r.trial_interval_ms, 50);
        assert_eq!(r.test_duration_s, 10);
        assert_eq!(r.sub_interval_ms, 1000);
        assert_eq!(r.sr_index, None);
        assert_eq!((r.high_speed_delta, r.slow_adj_thresh), (10, 3));
        assert_eq!(r.rate_adj_algo, RateAdjAlgo::TypeB);
        assert_eq!(r.modifiers.0, ActivationModifiers::START_INDEX);
        assert_eq!(r.ecn_ce_thresh, 0);
        assert_eq!(r.suppress_subints, 0);
        assert_eq!(r.result, ActivationResult::Ack);
        assert_eq!(adj.mode, RateMode::Search);
        // Row 0 in the response of an upstream search.
        assert_eq!(r.sending_rate.tx2_interval_us, 50_000);

        // The duration is capped at --max-duration; a fixed row at the ceiling.
        let mut req = ActivationRepr::request(Direction::Downstream);
        req.test_duration_s = 100;
        req.sr_index = Some(900);
        let (r, adj) = police(&req, &c, RowIndex::new(200).unwrap());
        assert_eq!(r.test_duration_s, 60);
        assert_eq!(r.sr_index, Some(200));
        assert_eq!(adj.mode, RateMode::Fixed(RowIndex::new(200).unwrap()));
        assert!(r.sending_rate.is_zero());
    }
}
