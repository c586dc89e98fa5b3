//! The UDPSTP server `pathsonde serve` runs on UDP port 24601: Setup
//! Requests on the control socket, checked in the spec's order (§3.1), then
//! one thread per admitted connection ([`conn`]) with its own test socket on
//! an ephemeral port, connected to the client after its Test Activation,
//! whose parameters [`police`] polices.
//!
//! Safe by default (docs/security.md, 4a): the protocol has no handshake
//! that proves a source address and its Status PDUs carry no
//! authentication, so a test without a key runs only where the operator
//! opted in (`--udpst-open`, a restricted `--allow` list); otherwise an
//! unauthenticated Setup Request gets code 5.
//!
//! No reflection or amplification (docs/security.md): a datagram from a
//! source outside `--allow`, or one that is not a well-formed Setup
//! Request, gets no reply at all; a Setup Response is the request's size
//! (56 bytes) and goes only to the request's source; the Null Request (48
//! bytes) and everything after go only to an address:port that completed a
//! valid setup, and load only after that address:port sent a valid Test
//! Activation Request to its test port; the load is capped at the
//! `--max-rate` ceiling row (`--udpst-open`'s lower one for tests without a
//! key) and the test at `--max-duration`.  One test (one client address and
//! mc_ident) at a time, the slot taken by a valid Test Activation (not by a
//! setup, which anyone can spoof); at most `max_connections` (≤ 256)
//! connections, set up or testing.

mod conn;
mod police;
mod tripwire;

pub use police::police;

use super::keys::{self, SessionKeys};
use super::CapacityError;
use crate::allow::AllowList;
use crate::clock;
use crate::udp;
use conn::Conn;
use pathsonde_core::capacity::rate_table::TableOptions;
use pathsonde_core::{BitRate, DurationNs};
use pathsonde_wire::udpst::auth::{self, AuthMode};
use pathsonde_wire::udpst::setup::{
    Packet as SetupPacket, Repr as SetupRepr, SetupCommand, SetupResult, MAX_MC_COUNT,
};
use pathsonde_wire::udpst::version_accepted;
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;
use tripwire::{Tripped, Tripwires};

/// The most connections one server holds (spec §8).
pub const MAX_SERVER_CONNECTIONS: usize = 256;
/// Setup Requests answered per second, on average, over all sources: a
/// spoofed request makes the server send its response (and, on ACK, a Null
/// Request) to the spoofed address, so answers are rate-limited.  A real
/// client sends at most 24 per test.
pub const SETUP_ANSWERS_PER_SEC: f64 = 50.0;
/// The burst of Setup Requests answered at once.
pub const SETUP_ANSWER_BURST: f64 = 100.0;
/// `--udpst-open`'s ceiling when it names none: the most a test without a
/// key may load a path with, summed over its connections.  A blind spoofer
/// who guessed a test port and kept faking Status PDUs could aim this much
/// at a third party for one test's duration (docs/security.md, 4a), so it
/// is set where that stays a nuisance (100 Mb/s), not a flood; an operator
/// who wants open tests faster says so with `--udpst-open RATE`.
pub const OPEN_CEILING_MBPS: f64 = 100.0;

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
    /// Sources allowed; others get no reply at all.  A restricted list is
    /// also an opt-in: its sources may test without a key, up to `max_rate`.
    pub allow: AllowList,
    /// Tests without a key from any allowed source, at most this rate
    /// summed over a test's connections (`--udpst-open [RATE]`).  `None`
    /// and an unrestricted `allow`: a Setup Request without a key gets code
    /// 5 (authentication required) — the safe default.
    pub open: Option<BitRate>,
    /// The ceiling: no connection's row goes above it (split over a test's
    /// connections), and the stated max_bandwidth of a direction's
    /// connections may not add up past it (code 10).
    pub max_rate: BitRate,
    /// UDP payload bytes one test may move, split over its connections
    /// (`--max-bytes`, the same limit a measurement session has): a test
    /// that reaches it is stopped gracefully (the stop exchange of §11.2).
    pub max_bytes: u64,
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
            open: None,
            max_rate: BitRate::from_bps(10e9),
            max_bytes: crate::limits::Limits::default().max_bytes,
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
    /// Who may test, in a phrase for the server's start-up line.
    pub fn who_may_test(&self) -> String {
        let keyed = self.keys.is_some();
        match self.unauthenticated_ceiling() {
            None if keyed => "tests with a key only".into(),
            None => "no tests without a key (serve --udpst-open, --allow or --key-file)".into(),
            Some(c) if self.open.is_some() && keyed => {
                format!("tests with a key, or without one up to {c:.0} (--udpst-open)")
            }
            Some(c) if self.open.is_some() => {
                format!("tests without a key up to {c:.0} (--udpst-open)")
            }
            Some(c) => format!("tests without a key from --allow's sources up to {c:.0}"),
        }
    }
    /// The ceiling of a test without a key, or `None` where such tests are
    /// refused: an explicit `--udpst-open` (never above `max_rate`), else a
    /// restricted `--allow` list when no keys are configured (keys mean
    /// every client has one).
    pub fn unauthenticated_ceiling(&self) -> Option<BitRate> {
        match self.open {
            Some(r) => Some(BitRate::from_bps(r.bps().min(self.max_rate.bps()))),
            None if self.keys.is_none() && !self.allow.is_open() => Some(self.max_rate),
            None => None,
        }
    }
}

/// Counters about the UDPSTP side, for tests and monitoring.
#[derive(Debug, Default)]
pub struct UdpstStats {
    pub setups_accepted: AtomicU64,
    pub setups_rejected: AtomicU64,
    /// Tests activated (a valid Test Activation took the slot).
    pub tests_activated: AtomicU64,
    /// Tests whose load stopped early because the client stopped showing
    /// it received it (an ICMP error, no Status PDU, a Status PDU that
    /// claims more than was sent, or rx_stopped).
    pub load_stopped: AtomicU64,
    /// Connections ended because their source sent to a tripwire port (a
    /// port sweep: [`tripwire`]).
    pub sweeps_caught: AtomicU64,
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
    /// The test that holds the slot (client address, mc_ident): taken by
    /// its first valid Test Activation, freed when its last connection ends.
    active: Option<(IpAddr, u16)>,
    /// Connections of the active test.
    live: usize,
    /// Connections set up and waiting for their activation (3 s at most).
    pending: usize,
    /// Stated bandwidth held per direction, Mb/s (upstream, downstream).
    held: [u64; 2],
}

/// One connection's place in the registry, given back when it ends.
struct ConnGuard {
    reg: Arc<Mutex<Registry>>,
    group: (IpAddr, u16),
    dir: usize,
    mbps: u64,
    activated: bool,
}

impl ConnGuard {
    /// Takes the test slot for this connection's test at its valid Test
    /// Activation; false while another test holds it.
    fn activate(&mut self) -> bool {
        let mut r = self.reg.lock().unwrap_or_else(|e| e.into_inner());
        if r.active.is_some_and(|g| g != self.group) {
            return false;
        }
        r.active = Some(self.group);
        r.pending = r.pending.saturating_sub(1);
        r.live += 1;
        self.activated = true;
        true
    }
}

impl Drop for ConnGuard {
    fn drop(&mut self) {
        let mut r = self.reg.lock().unwrap_or_else(|e| e.into_inner());
        r.held[self.dir] = r.held[self.dir].saturating_sub(self.mbps);
        if !self.activated {
            r.pending = r.pending.saturating_sub(1);
            return;
        }
        r.live = r.live.saturating_sub(1);
        if r.live == 0 {
            r.active = None;
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
    /// The bytes this connection may move.
    max_bytes: u64,
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
        let tripped = &Tripped::default();
        let wires = Tripwires::bind(cfg.bind.ip());
        std::thread::scope(|s| {
            let watcher = std::thread::Builder::new()
                .name("udpst-tripwires".into())
                .spawn_scoped(s, || wires.watch(tripped, stop, cfg.log));
            if watcher.is_err() && cfg.log {
                eprintln!("pathsonde serve: warning: UDPST tripwires not watched (no thread)");
            }
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
                        max_bytes: dec.max_bytes,
                        guard,
                        tripped,
                        set_up_at: std::time::Instant::now(),
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
                        let why = if result == SetupResult::AuthRequired && cfg.keys.is_none() {
                            "tests without a key are off (serve --udpst-open, --allow or --key-file)"
                        } else {
                            super::setup_code_meaning(result.code())
                        };
                        eprintln!(
                            "pathsonde serve: UDPST {from}: setup refused: {why} (code {})",
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
            max_bytes: 0,
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
        // required (also where tests without a key are not opted into), or
        // a mode above 1.
        let test_ceiling = match (req.auth.mode, cfg.keys.is_some()) {
            (AuthMode::None, _) => match cfg.unauthenticated_ceiling() {
                Some(c) => c,
                None => return reject(SetupResult::AuthRequired, session),
            },
            (AuthMode::Control, true) => cfg.max_rate,
            (_, false) => return reject(SetupResult::AuthNotConfigured, session),
            (_, true) => return reject(SetupResult::InvalidAuthMode, session),
        };
        // 8. Allocation: bounded connections, and none while another test
        // runs.  Only a valid Test Activation takes the slot (a setup is
        // cheap to spoof), so set-up connections of several would-be tests
        // may wait side by side; the first activated wins.
        let group = (from.ip(), req.mc_ident);
        let cap = cfg.max_connections.clamp(1, MAX_SERVER_CONNECTIONS);
        if r.active.is_some_and(|g| g != group) || r.live + r.pending >= cap {
            return reject(SetupResult::AllocationFailed, session);
        }
        r.pending += 1;
        r.held[dir] += want;
        let mut ceiling = test_ceiling.bps() / f64::from(req.mc_count.max(1));
        if want > 0 {
            ceiling = ceiling.min(want as f64 * 1e6);
        }
        Decision {
            result: SetupResult::Ack,
            session,
            guard: Some(ConnGuard {
                reg: reg.clone(),
                group,
                dir,
                mbps: want,
                activated: false,
            }),
            ceiling: BitRate::from_bps(ceiling),
            max_bytes: cfg.max_bytes / u64::from(req.mc_count.max(1)),
        }
    }
}
