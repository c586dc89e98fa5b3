//! The UDPSTP client (`pathsonde capacity`): per connection one UDP socket
//! on an ephemeral port, Setup → (Null ignored) → connect → Test
//! Activation → test, on its own thread; the caller's thread gathers the
//! connections' sub-intervals into rows (summed over connections) and calls
//! `on_row` as each completes.
//!
//! Upstream, this client sends the load at the row each Status PDU names
//! ([`super::tx`]) and records a sub-interval whenever the server's
//! `subint_seq` moves; downstream it receives the load into core's
//! `LoadReceiver` (kernel receive stamps where the host has them), sends a
//! Status PDU every trial interval and records its own sub-intervals.
//! Timers (spec §8): set-up 3 s, watchdog 3 s, backstop duration + 3.5 s.

use super::keys::{self, AuthFailure, SessionKeys};
use super::pdu::{self, from_timestamp, StatusFields};
use super::tx::{lock, LoadSender, StopSenderOnPanic, TxShared};
use super::{
    setup_code_meaning, CapacityConfig, CapacityError, CapacityRun, Direction, UdpstWarning,
    MAX_SECRET_BYTES,
};
use crate::clock;
use crate::udp::{self, TimestampingReceiver};
use pathsonde_core::capacity::adjust::Algorithm;
use pathsonde_core::capacity::rate_table::IpFamily;
use pathsonde_core::capacity::receiver::{
    Ecn, LoadArrival, LoadReceiver, ReceiverConfig, SubIntervalStats,
};
use pathsonde_core::capacity::summary::{CapacityReport, SubIntervalRow};
use pathsonde_core::capacity::zero_loss::{Trial, ZeroLoss, ZeroLossFit};
use pathsonde_core::capacity::{planned_sub_intervals, CLIENT_BACKSTOP_GRACE, WATCHDOG};
use pathsonde_core::{Bytes, DurationNs, TimeNs};
use pathsonde_wire::udpst::activation::{
    ActivationModifiers, ActivationResult, Packet as ActivationPacket, RateAdjAlgo,
    Repr as ActivationRepr,
};
use pathsonde_wire::udpst::auth::AuthMode;
use pathsonde_wire::udpst::load::{Repr as LoadRepr, STATUS_LOSS_OUT_OF_ORDER};
use pathsonde_wire::udpst::rate::SendingRate as WireRate;
use pathsonde_wire::udpst::setup::{
    MaxBandwidth, Packet as SetupPacket, Repr as SetupRepr, SetupCommand, SetupModifiers,
    SetupResult,
};
use pathsonde_wire::udpst::status::Repr as StatusRepr;
use pathsonde_wire::udpst::{PduKind, TestAction, Timestamp};
use std::collections::BTreeMap;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Sender};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

/// The client's set-up timer: Setup Request to TA Response.
const SETUP_TIMER: Duration = Duration::from_secs(3);
/// How long without a received PDU before this side says traffic stopped.
const RX_STOPPED_AFTER: DurationNs = DurationNs::from_secs(1);

/// How a connection ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// The server stopped the test (test_action 2) and we confirmed.
    Completed,
    /// The backstop timer fired; we stopped locally (test_action 1).
    Backstop,
    /// The watchdog fired: nothing from the server for 3 s.
    Lost,
    /// Another connection failed; this one stopped early.
    Aborted,
}

enum Event {
    Activated {
        conn: u8,
        ta: Box<ActivationRepr>,
        test_port: u16,
        local: SocketAddr,
    },
    Sub {
        conn: u8,
        n: u32,
        stats: SubIntervalStats,
    },
    /// One trial interval's counts (status feedback `seq` of the connection).
    Trial {
        seq: u32,
        trial: Trial,
    },
    Warning {
        conn: u8,
        code: u8,
        message: String,
    },
    Done {
        conn: u8,
        result: Result<Outcome, CapacityError>,
    },
}

struct Ctx<'a> {
    cfg: &'a CapacityConfig,
    mc_ident: u16,
    abort: &'a AtomicBool,
    /// Set when the server has told any connection to stop: the test is
    /// over, so every connection sends its stop and closes (§11.2).  A
    /// server may stop and close connections one after another; without
    /// this the later ones would wait out silence and warn of it.
    stopping: &'a AtomicBool,
    bytes_sent: &'a AtomicU64,
    /// Load datagrams sent at the path's largest payload instead of the
    /// row's (jumbo rows on a smaller MTU; `tx::path_max_payload`).
    clamped: &'a AtomicU64,
    bytes_received: &'a AtomicU64,
    /// Per connection, the fastest row (IP bits/s) the server asked it to
    /// send upstream: what the sender was asked for, against what arrived.
    max_row_bps: &'a [AtomicU64],
}

fn config_error(s: impl Into<String>) -> CapacityError {
    CapacityError::Config(s.into())
}

/// Checks the configuration against what the protocol can carry.
pub fn validate(cfg: &CapacityConfig) -> Result<(), CapacityError> {
    let d = cfg.duration.ns();
    if d % 1_000_000_000 != 0 || !(5..=3600).contains(&(d / 1_000_000_000)) {
        return Err(config_error(format!(
            "duration {} must be whole seconds from 5 to 3600",
            cfg.duration
        )));
    }
    if !(1..=24).contains(&cfg.connections) {
        return Err(config_error(format!(
            "{} connections; use 1 to 24",
            cfg.connections
        )));
    }
    let whole_ms = |x: DurationNs| x.ns() % 1_000_000 == 0;
    let sub = cfg.sub_interval.ns() / 1_000_000;
    if !whole_ms(cfg.sub_interval) || !(100..=10_000).contains(&sub) {
        return Err(config_error(format!(
            "sub-interval {} must be whole ms from 100 ms to 10 s",
            cfg.sub_interval
        )));
    }
    if sub > d / 1_000_000 {
        return Err(config_error("sub-interval longer than the test"));
    }
    let trial = cfg.trial_interval.ns() / 1_000_000;
    if !whole_ms(cfg.trial_interval) || !(5..=250).contains(&trial) {
        return Err(config_error(format!(
            "trial interval {} must be whole ms from 5 to 250 ms",
            cfg.trial_interval
        )));
    }
    let th = |x: DurationNs| x.ns() / 1_000_000;
    if !whole_ms(cfg.low_thresh)
        || !whole_ms(cfg.upper_thresh)
        || !(1..=10_000).contains(&th(cfg.low_thresh))
        || !(1..=10_000).contains(&th(cfg.upper_thresh))
        || cfg.low_thresh > cfg.upper_thresh
    {
        return Err(config_error(
            "delay-variation thresholds must be whole ms, 1 to 10000, lower ≤ upper",
        ));
    }
    if cfg.fixed_row.is_some() && cfg.start_row.is_some() {
        return Err(config_error(
            "a fixed row and a start row exclude each other",
        ));
    }
    if let Some(r) = cfg.fixed_row.or(cfg.start_row) {
        if r > 1152 {
            return Err(config_error(format!(
                "sending-rate row {r}; rows are 0 to 1152"
            )));
        }
    }
    if cfg.high_speed_delta == 0 || cfg.slow_adj_thresh == 0 {
        return Err(config_error(
            "the fast-step delta and the congestion threshold must be at least 1",
        ));
    }
    if let Some(r) = cfg.max_rate {
        if r.bps().is_nan() || r.bps() <= 0.0 {
            return Err(config_error("the maximum rate must be positive"));
        }
        if per_connection_mbps(cfg).unwrap_or(0) > 32_767 {
            return Err(config_error(
                "the maximum rate per connection must be at most 32767 Mb/s",
            ));
        }
    }
    if let Some(k) = &cfg.key {
        if k.secret.is_empty() || k.secret.len() > MAX_SECRET_BYTES {
            return Err(config_error(format!(
                "authentication secret of {} bytes; use 1 to {MAX_SECRET_BYTES}",
                k.secret.len()
            )));
        }
    }
    if cfg.server.port() == 0 {
        return Err(config_error("server port 0"));
    }
    Ok(())
}

/// The max_bandwidth each Setup Request states: the ceiling split over the
/// connections, in Mb/s rounded up.
fn per_connection_mbps(cfg: &CapacityConfig) -> Option<u64> {
    let r = cfg.max_rate?;
    let per = r.bps() / f64::from(cfg.connections.max(1)) / 1e6;
    Some(per.ceil().max(1.0) as u64)
}

fn nonzero_u16() -> u16 {
    loop {
        let v = crate::random::u64() as u16;
        if v != 0 {
            return v;
        }
    }
}

/// Runs one capacity test and returns what it saw; `on_row` gets each
/// sub-interval row (summed over connections) as it completes.
pub fn run(
    cfg: &CapacityConfig,
    on_row: &mut dyn FnMut(&SubIntervalRow),
) -> Result<CapacityRun, CapacityError> {
    validate(cfg)?;
    let mc_ident = nonzero_u16();
    let started = SystemTime::now();
    let family = if cfg.server.is_ipv4() {
        IpFamily::V4
    } else {
        IpFamily::V6
    };
    let abort = AtomicBool::new(false);
    let stopping = AtomicBool::new(false);
    let bytes_sent = AtomicU64::new(0);
    let max_row_bps: Vec<AtomicU64> = (0..cfg.connections).map(|_| AtomicU64::new(0)).collect();
    let clamped = AtomicU64::new(0);
    let bytes_received = AtomicU64::new(0);
    let n = usize::from(cfg.connections);
    let ctx = Ctx {
        cfg,
        mc_ident,
        abort: &abort,
        stopping: &stopping,
        bytes_sent: &bytes_sent,
        max_row_bps: &max_row_bps,
        clamped: &clamped,
        bytes_received: &bytes_received,
    };
    let mut negotiated: Option<ActivationRepr> = None;
    let mut local: Option<SocketAddr> = None;
    let mut ports = vec![0u16; n];
    let mut warnings: Vec<(u8, UdpstWarning)> = Vec::new();
    let mut results: Vec<Option<Result<Outcome, CapacityError>>> = (0..n).map(|_| None).collect();
    let mut agg = Aggregator::new(n, family);
    let mut rows: Vec<SubIntervalRow> = Vec::new();
    let mut trials = TrialPool::new(family);
    std::thread::scope(|s| {
        let (tx, rx) = mpsc::channel::<Event>();
        for i in 0..cfg.connections {
            let txc = tx.clone();
            let ctx = &ctx;
            let spawned = std::thread::Builder::new()
                .name(format!("udpst-conn-{i}"))
                .spawn_scoped(s, move || {
                    let result = connection(ctx, i, &txc);
                    if result.is_err() {
                        ctx.abort.store(true, Ordering::SeqCst);
                    }
                    let _ = txc.send(Event::Done { conn: i, result });
                });
            if let Err(e) = spawned {
                abort.store(true, Ordering::SeqCst);
                let _ = tx.send(Event::Done {
                    conn: i,
                    result: Err(CapacityError::io("starting a connection thread", e)),
                });
            }
        }
        drop(tx);
        for ev in rx {
            match ev {
                Event::Activated {
                    conn,
                    ta,
                    test_port,
                    local: l,
                } => {
                    if let Some(p) = ports.get_mut(usize::from(conn)) {
                        *p = test_port;
                    }
                    if conn == 0 || negotiated.is_none() {
                        if conn == 0 {
                            local = Some(l);
                        }
                        let d = DurationNs::from_secs(i64::from(ta.test_duration_s));
                        let si = DurationNs::from_ms(i64::from(ta.sub_interval_ms));
                        agg.planned = planned_sub_intervals(d, si);
                        if conn == 0 || negotiated.is_none() {
                            negotiated = Some(*ta);
                        }
                    }
                }
                Event::Sub { conn, n, stats } => {
                    agg.add(conn, n, stats);
                    for r in agg.ready(false) {
                        on_row(&r);
                        rows.push(r);
                    }
                }
                Event::Trial { seq, trial } => trials.add(seq, trial),
                Event::Warning {
                    conn,
                    code,
                    message,
                } => {
                    if !warnings.iter().any(|(c, w)| *c == conn && w.code == code) {
                        warnings.push((conn, UdpstWarning { code, message }));
                    }
                }
                Event::Done { conn, result } => {
                    agg.finish(conn);
                    if let Some(r) = results.get_mut(usize::from(conn)) {
                        *r = Some(result);
                    }
                    for r in agg.ready(false) {
                        on_row(&r);
                        rows.push(r);
                    }
                }
            }
        }
    });
    for r in agg.ready(true) {
        on_row(&r);
        rows.push(r);
    }
    let ended = SystemTime::now();
    // Any connection that could not be set up fails the test (the
    // reference's default minimum is every connection).
    let mut outcomes = Vec::with_capacity(n);
    let mut first_err = None;
    for r in results.into_iter().flatten() {
        match r {
            Ok(o) => outcomes.push(o),
            Err(e) => {
                if first_err.is_none() {
                    first_err = Some(e);
                }
            }
        }
    }
    if let Some(e) = first_err {
        return Err(e);
    }
    let Some(negotiated) = negotiated else {
        return Err(CapacityError::Other("no connection was activated".into()));
    };
    let report = CapacityReport::new(rows, agg.planned, trials.finish());
    let lost = outcomes.contains(&Outcome::Lost);
    if lost && report.sub_intervals.is_empty() {
        return Err(CapacityError::ConnectionLost(format!(
            "nothing heard from {} for {} s during the test",
            cfg.server,
            WATCHDOG.ns() / 1_000_000_000
        )));
    }
    let warnings: Vec<UdpstWarning> = warnings.into_iter().map(|(_, w)| w).collect();
    let error_status = if lost {
        200
    } else {
        warnings.last().map(|w| u16::from(w.code)).unwrap_or(0)
    };
    let ecn_bleaching = warnings.iter().any(|w| w.code == 7 || w.code == 8);
    Ok(CapacityRun {
        config: cfg.clone(),
        negotiated,
        mc_ident,
        local: local.unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0))),
        server_test_ports: ports,
        started,
        ended,
        report,
        warnings,
        error_status,
        ecn_bleaching,
        bytes_sent: Bytes::new(bytes_sent.load(Ordering::Relaxed)),
        datagrams_clamped: clamped.load(Ordering::Relaxed),
        max_row_requested: match cfg.direction {
            Direction::Upstream => Some(pathsonde_core::BitRate::from_bps(
                max_row_bps
                    .iter()
                    .map(|m| m.load(Ordering::Relaxed) as f64)
                    .sum(),
            ))
            .filter(|r| r.is_positive()),
            Direction::Downstream => None,
        },
        bytes_received: Bytes::new(bytes_received.load(Ordering::Relaxed)),
    })
}

/// Sums the connections' trial n (their n-th status feedback, about the
/// same 50 ms everywhere: the connections start together) and feeds the
/// zero-loss fit in order.  Trial n is complete once some connection has
/// reported n + [`TrialPool::LAG`]; memory stays a few entries, and never
/// more than [`TrialPool::MAX_PENDING`] whatever numbers a server sends.
struct TrialPool {
    fit: ZeroLossFit,
    pending: BTreeMap<u32, Trial>,
    /// Trials up to here were fed; later reports of them are dropped.
    fed: u32,
}

impl TrialPool {
    const LAG: u32 = 2;
    const MAX_PENDING: usize = 64;

    fn new(family: IpFamily) -> Self {
        TrialPool {
            fit: ZeroLossFit::new(family),
            pending: BTreeMap::new(),
            fed: 0,
        }
    }

    fn add(&mut self, seq: u32, trial: Trial) {
        if seq <= self.fed {
            return;
        }
        self.pending.entry(seq).or_default().alongside(&trial);
        let complete = seq.saturating_sub(Self::LAG);
        while let Some((&n, _)) = self.pending.first_key_value() {
            if n > complete && self.pending.len() <= Self::MAX_PENDING {
                break;
            }
            if let Some((n, t)) = self.pending.pop_first() {
                self.fed = n;
                self.fit.push(t);
            }
        }
    }

    fn finish(mut self) -> ZeroLoss {
        while let Some((_, t)) = self.pending.pop_first() {
            self.fit.push(t);
        }
        self.fit.reading()
    }
}

/// Sums the connections' sub-interval n into row n once every connection
/// still running has reported it.
struct Aggregator {
    family: IpFamily,
    planned: u32,
    pending: BTreeMap<u32, Vec<Option<SubIntervalStats>>>,
    finished: Vec<bool>,
    /// The highest sub-interval each connection reported: one that skipped
    /// n (its Status PDU lost) does not hold row n back.
    latest: Vec<u32>,
    next: u32,
    conns: usize,
}

impl Aggregator {
    fn new(conns: usize, family: IpFamily) -> Self {
        Aggregator {
            family,
            planned: u32::MAX,
            pending: BTreeMap::new(),
            finished: vec![false; conns],
            latest: vec![0; conns],
            next: 1,
            conns,
        }
    }
    fn add(&mut self, conn: u8, n: u32, stats: SubIntervalStats) {
        if n < self.next || n > self.planned {
            return;
        }
        // Bounded: a connection reports at most `planned` sub-intervals.
        if self.pending.len() > 4096 && !self.pending.contains_key(&n) {
            return;
        }
        let slot = self
            .pending
            .entry(n)
            .or_insert_with(|| vec![None; self.conns]);
        if let Some(s) = slot.get_mut(usize::from(conn)) {
            *s = Some(stats);
        }
        if let Some(l) = self.latest.get_mut(usize::from(conn)) {
            *l = (*l).max(n);
        }
    }
    fn finish(&mut self, conn: u8) {
        if let Some(f) = self.finished.get_mut(usize::from(conn)) {
            *f = true;
        }
    }
    fn ready(&mut self, flush: bool) -> Vec<SubIntervalRow> {
        let mut out = Vec::new();
        while let Some((&n, v)) = self.pending.first_key_value() {
            let complete = v
                .iter()
                .zip(self.finished.iter().zip(&self.latest))
                .all(|(s, (f, l))| s.is_some() || *f || *l > n);
            if !(flush || complete) {
                break;
            }
            let v = self.pending.remove(&n).unwrap_or_default();
            let blocks: Vec<SubIntervalStats> = v.into_iter().flatten().collect();
            if !blocks.is_empty() && n <= self.planned {
                // Rows are numbered in the order they complete.
                let row = SubIntervalRow::from_connections(self.next, &blocks, self.family);
                self.next += 1;
                out.push(row);
            }
        }
        out
    }
}

fn warn(events: &Sender<Event>, conn: u8, code: u8, message: String) {
    let _ = events.send(Event::Warning {
        conn,
        code,
        message,
    });
}

/// Warnings sent once per connection.
struct Warned(u64);

impl Warned {
    fn once(
        &mut self,
        events: &Sender<Event>,
        conn: u8,
        code: u8,
        message: impl FnOnce() -> String,
    ) {
        let bit = 1u64 << (code.min(63));
        if self.0 & bit == 0 {
            self.0 |= bit;
            warn(events, conn, code, message());
        }
    }
}

fn setup_auth_error(server: SocketAddr, f: AuthFailure, activation: bool) -> CapacityError {
    let (time, why) = match f {
        AuthFailure::Digest => (false, "digest or mode does not verify"),
        AuthFailure::Time => (true, "time outside the ±5 s window"),
    };
    if activation {
        CapacityError::ActivationResponseAuth { server, time, why }
    } else {
        CapacityError::SetupResponseAuth { server, time, why }
    }
}

fn connection(ctx: &Ctx<'_>, idx: u8, events: &Sender<Event>) -> Result<Outcome, CapacityError> {
    let cfg = ctx.cfg;
    let server = cfg.server;
    let bind: SocketAddr = if server.is_ipv4() {
        SocketAddr::from(([0, 0, 0, 0], 0))
    } else {
        SocketAddr::from(([0u16; 8], 0))
    };
    let sock = udp::bind(bind).map_err(|e| CapacityError::Other(e.to_string()))?;
    if cfg.dscp_ecn != 0 {
        let r = socket2::SockRef::from(&sock);
        let _ = if server.is_ipv4() {
            r.set_tos_v4(u32::from(cfg.dscp_ecn))
        } else {
            r.set_tclass_v6(u32::from(cfg.dscp_ecn))
        };
    }
    let local = sock
        .local_addr()
        .map_err(|e| CapacityError::io("reading the local address", e))?;

    // 1. Setup Request.
    let upstream = cfg.direction == Direction::Upstream;
    let mbps = per_connection_mbps(cfg).unwrap_or(0).min(32_767) as u16;
    let req = SetupRepr::request(
        idx,
        cfg.connections,
        ctx.mc_ident,
        MaxBandwidth { upstream, mbps },
        SetupModifiers::new(cfg.jumbo, cfg.traditional_mtu),
    );
    let mut buf = req.to_bytes();
    let session = cfg.key.as_ref().map(|k| {
        let t = keys::unix_now() as u32;
        let s = SessionKeys::derive(&k.secret, t, k.key_id);
        keys::sign_at(&mut buf, &s.client, k.key_id, t);
        s
    });
    let auth_mode = if session.is_some() {
        AuthMode::Control
    } else {
        AuthMode::None
    };
    let deadline = Instant::now() + SETUP_TIMER;
    sock.send_to(&buf, server)
        .map_err(|e| CapacityError::io(format!("sending the setup request to {server}"), e))?;
    ctx.bytes_sent
        .fetch_add(buf.len() as u64, Ordering::Relaxed);
    let mut rbuf = [0u8; 2048];
    let test_port = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(CapacityError::Timeout {
                server,
                what: "setup response",
            });
        }
        let _ = sock.set_read_timeout(Some(left.max(Duration::from_millis(1))));
        let (len, from) = match sock.recv_from(&mut rbuf) {
            Ok(x) => x,
            Err(e) if is_timeout(&e) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => continue,
            Err(e) => return Err(CapacityError::io("receiving the setup response", e)),
        };
        ctx.bytes_received.fetch_add(len as u64, Ordering::Relaxed);
        let d = &rbuf[..len];
        if from != server {
            continue; // the Null Request from the test port, or noise
        }
        let Ok(p) = SetupPacket::new_checked(d) else {
            continue;
        };
        let Ok(resp) = SetupRepr::parse(&p) else {
            continue;
        };
        if resp.command != SetupCommand::Response
            || resp.mc_ident != ctx.mc_ident
            || resp.mc_index != idx
        {
            continue;
        }
        if let Some(s) = &session {
            keys::verify(d, &s.server).map_err(|f| setup_auth_error(server, f, false))?;
        }
        if resp.result != SetupResult::Ack {
            let code = resp.result.code();
            return Err(CapacityError::SetupRejected {
                server,
                code,
                meaning: setup_code_meaning(code),
            });
        }
        if resp.test_port == 0 {
            return Err(CapacityError::Other(format!(
                "server {server} accepted the setup with test port 0"
            )));
        }
        break resp.test_port;
    };
    let test_addr = SocketAddr::new(server.ip(), test_port);
    sock.connect(test_addr)
        .map_err(|e| CapacityError::io(format!("connecting to {test_addr}"), e))?;
    // Connected, the socket names the local address the route chose.
    let local = sock.local_addr().unwrap_or(local);

    // 2. Test Activation Request.
    let mut ta = ActivationRepr::request(cfg.direction);
    let ms16 = |d: DurationNs| u16::try_from(d.ns() / 1_000_000).unwrap_or(u16::MAX);
    ta.low_thresh_ms = ms16(cfg.low_thresh);
    ta.upper_thresh_ms = ms16(cfg.upper_thresh);
    ta.trial_interval_ms = ms16(cfg.trial_interval);
    ta.test_duration_s = u16::try_from(cfg.duration.ns() / 1_000_000_000).unwrap_or(u16::MAX);
    ta.sub_interval_ms = ms16(cfg.sub_interval);
    ta.dscp_ecn = cfg.dscp_ecn;
    ta.sr_index = cfg.fixed_row.or(cfg.start_row);
    let mut m = 0u8;
    if cfg.start_row.is_some() {
        m |= ActivationModifiers::START_INDEX;
    }
    if cfg.random_payload {
        m |= ActivationModifiers::RANDOM_PAYLOAD;
    }
    ta.modifiers = ActivationModifiers(m);
    ta.use_owd = cfg.use_owd;
    ta.high_speed_delta = cfg.high_speed_delta;
    ta.slow_adj_thresh = cfg.slow_adj_thresh;
    ta.seq_err_thresh = cfg.seq_err_thresh;
    ta.ignore_reorder_dup = cfg.ignore_reorder_dup;
    ta.rate_adj_algo = match cfg.algorithm {
        Algorithm::B => RateAdjAlgo::TypeB,
        Algorithm::C => RateAdjAlgo::TypeC,
    };
    ta.ecn_ce_thresh = cfg.ecn_ce_thresh;
    ta.suppress_subints = cfg.suppress_subints;
    let mut buf = ta.to_bytes();
    if let (Some(s), Some(k)) = (&session, &cfg.key) {
        keys::sign(&mut buf, &s.client, k.key_id);
    }
    sock.send(&buf)
        .map_err(|e| CapacityError::io(format!("sending the test activation to {test_addr}"), e))?;
    ctx.bytes_sent
        .fetch_add(buf.len() as u64, Ordering::Relaxed);
    let resp = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(CapacityError::Timeout {
                server,
                what: "test activation response",
            });
        }
        let _ = sock.set_read_timeout(Some(left.max(Duration::from_millis(1))));
        let len = match sock.recv(&mut rbuf) {
            Ok(x) => x,
            Err(e) if is_timeout(&e) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => continue,
            Err(e) => return Err(CapacityError::io("receiving the activation response", e)),
        };
        ctx.bytes_received.fetch_add(len as u64, Ordering::Relaxed);
        let d = &rbuf[..len];
        if PduKind::of(d) != Some(PduKind::Activation) {
            continue; // Null Request, early data
        }
        let Ok(p) = ActivationPacket::new_checked(d) else {
            continue;
        };
        let Ok(r) = ActivationRepr::parse(&p) else {
            continue;
        };
        if r.result == ActivationResult::None {
            continue;
        }
        if let Some(s) = &session {
            keys::verify(d, &s.server).map_err(|f| setup_auth_error(server, f, true))?;
        }
        match r.result {
            ActivationResult::Ack => break r,
            other => {
                return Err(CapacityError::ActivationRejected {
                    server,
                    code: other.code(),
                })
            }
        }
    };
    let _ = events.send(Event::Activated {
        conn: idx,
        ta: Box::new(resp),
        test_port,
        local,
    });
    let t = Test {
        ctx,
        idx,
        events,
        ta: resp,
        auth_mode,
        activated: clock::monotonic(),
    };
    Ok(match resp.direction {
        Direction::Upstream => t.upstream(&sock),
        Direction::Downstream => t.downstream(sock),
    })
}

fn is_timeout(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::WouldBlock
            | std::io::ErrorKind::TimedOut
            | std::io::ErrorKind::Interrupted
    )
}

struct Test<'a, 'b> {
    ctx: &'a Ctx<'b>,
    idx: u8,
    events: &'a Sender<Event>,
    ta: ActivationRepr,
    auth_mode: AuthMode,
    /// CLOCK_MONOTONIC at activation.
    activated: TimeNs,
}

impl Test<'_, '_> {
    fn duration(&self) -> DurationNs {
        DurationNs::from_secs(i64::from(self.ta.test_duration_s))
    }
    fn backstop(&self) -> TimeNs {
        self.activated + self.duration() + CLIENT_BACKSTOP_GRACE
    }
    /// When the server's stop is due: its test duration from activation.
    /// Silence after it is the stop on its way, not traffic that stopped.
    fn planned_end(&self) -> TimeNs {
        self.activated + self.duration()
    }

    /// Upstream: this client sends the load at the rows the server's Status
    /// PDUs name and records the sub-intervals they report.
    fn upstream(&self, sock: &UdpSocket) -> Outcome {
        let ctx = self.ctx;
        let c = self.idx;
        let ev = self.events;
        let first = pdu::to_core_rate(&self.ta.sending_rate);
        if let Some(m) = ctx.max_row_bps.get(usize::from(c)) {
            m.fetch_max(first.ip_rate().bps() as u64, Ordering::Relaxed);
        }
        let shared = Mutex::new(TxShared::new(first));
        let v6 = ctx.cfg.server.is_ipv6();
        let _ = sock.set_read_timeout(Some(Duration::from_millis(20)));
        let mut warned = Warned(0);
        std::thread::scope(|s| {
            let sender = std::thread::Builder::new()
                .name(format!("udpst-tx-{c}"))
                .spawn_scoped(s, || {
                    LoadSender::new(
                        sock,
                        &shared,
                        v6,
                        self.activated,
                        ctx.bytes_sent,
                        ctx.clamped,
                    )
                    .run()
                });
            if sender.is_err() {
                return Outcome::Aborted;
            }
            let _stop_on_panic = StopSenderOnPanic(&shared);
            let mut watchdog = self.activated + WATCHDOG;
            let backstop = self.backstop();
            let mut last_rx = self.activated;
            let mut statuses = pdu::StatusSequence::default();
            let mut last_subint = 0u32;
            let (mut rtt_sum, mut rtt_n) = (DurationNs::ZERO, 0u64);
            let mut buf = [0u8; 512];
            let stop = |action: TestAction| {
                let mut g = lock(&shared);
                g.action = action;
                g.stop_once = true;
            };
            loop {
                let now = clock::monotonic();
                if ctx.abort.load(Ordering::Relaxed) {
                    stop(TestAction::StopLocal);
                    return Outcome::Aborted;
                }
                if now >= backstop {
                    stop(TestAction::StopLocal);
                    return Outcome::Backstop;
                }
                if ctx.stopping.load(Ordering::Relaxed) {
                    // Another connection was told to stop: so is this one.
                    stop(TestAction::Stop);
                    return Outcome::Completed;
                }
                if now >= watchdog {
                    lock(&shared).done = true;
                    warned.once(ev, c, 1, || {
                        format!("connection {c}: no response from the server for 3 s")
                    });
                    return Outcome::Lost;
                }
                let stopped = now.since(last_rx) >= RX_STOPPED_AFTER;
                lock(&shared).rx_stopped = stopped;
                // Past the planned end, silence is the stop on its way.
                if stopped && now < self.planned_end() {
                    warned.once(ev, c, 4, || {
                        format!("connection {c}: no Status PDU received for 1 s")
                    });
                }
                let len = match sock.recv(&mut buf) {
                    Ok(n) => n,
                    Err(_) => continue,
                };
                ctx.bytes_received.fetch_add(len as u64, Ordering::Relaxed);
                let d = &buf[..len];
                let st = match StatusRepr::decode(d) {
                    Ok(st) => st,
                    Err(_) => {
                        if !matches!(PduKind::of(d), Some(PduKind::Null | PduKind::Activation)) {
                            warned.once(ev, c, 6, || {
                                format!("connection {c}: invalid PDU received ({len} bytes)")
                            });
                        }
                        continue;
                    }
                };
                let now = clock::monotonic();
                watchdog = now + WATCHDOG;
                last_rx = now;
                let seen = statuses.on_status(st.status_seq);
                let loss = seen.status_loss;
                if seen.newer && loss > 0 {
                    warned.once(ev, c, 3, || {
                        format!("connection {c}: Status PDUs from the server were lost")
                    });
                }
                if seen.newer {
                    let _ = ev.send(Event::Trial {
                        seq: st.status_seq,
                        trial: pdu::trial_of(&st),
                    });
                }
                {
                    let mut g = lock(&shared);
                    g.echo = st.send_time;
                    g.status_at = Some(now);
                    g.status_loss = loss;
                    g.rx_stopped = false;
                    if st.test_action.is_stop() {
                        g.action = st.test_action;
                        g.stop_once = true;
                    } else {
                        g.row = pdu::to_core_rate(&st.sending_rate);
                        if let Some(m) = ctx.max_row_bps.get(usize::from(c)) {
                            m.fetch_max(g.row.ip_rate().bps() as u64, Ordering::Relaxed);
                        }
                    }
                }
                if st.test_action.is_stop() {
                    ctx.stopping.store(true, Ordering::Relaxed);
                    return Outcome::Completed;
                }
                if st.rx_stopped {
                    warned.once(ev, c, 5, || {
                        format!("connection {c}: the server reports its load traffic stopped")
                    });
                }
                if st.status_flags.ecn_bleaching() {
                    warned.once(ev, c, 8, || {
                        format!("connection {c}: the server reports ECN bleaching")
                    });
                }
                if let Some(v) = st.rtt_var_sample_ms {
                    rtt_sum += DurationNs::from_ms(i64::from(v));
                    rtt_n += 1;
                }
                if st.subint_seq > 0 && st.subint_seq != last_subint {
                    last_subint = st.subint_seq;
                    let stats = pdu::subint_from_status(&st, rtt_sum, rtt_n);
                    rtt_sum = DurationNs::ZERO;
                    rtt_n = 0;
                    let _ = ev.send(Event::Sub {
                        conn: c,
                        n: st.subint_seq,
                        stats,
                    });
                }
            }
        })
    }

    /// Downstream: this client receives the load, sends a Status PDU every
    /// trial interval and records its own sub-intervals.
    fn downstream(&self, sock: UdpSocket) -> Outcome {
        let ctx = self.ctx;
        let c = self.idx;
        let ev = self.events;
        let mut rx = TimestampingReceiver::new(sock);
        let _ = rx.socket().set_read_timeout(Some(Duration::from_millis(1)));
        let trial = DurationNs::from_ms(i64::from(self.ta.trial_interval_ms.max(1)));
        let rcfg = ReceiverConfig {
            trial_interval: trial,
            sub_interval: DurationNs::from_ms(i64::from(self.ta.sub_interval_ms.max(1))),
            ecn: false,
        };
        let mut recv = LoadReceiver::new(rcfg, clock::realtime());
        let mut next_status = self.activated + trial;
        let mut status_seq = 0u32;
        let mut stop_action: Option<TestAction> = None;
        let mut last_completed = 0u32;
        let mut watchdog = self.activated + WATCHDOG;
        let backstop = self.backstop();
        let mut warned = Warned(0);
        let mut buf = [0u8; 256];
        let send = |rx: &TimestampingReceiver, st: &StatusRepr| {
            let b = st.to_bytes();
            if rx.socket().send(&b).is_ok() {
                ctx.bytes_sent.fetch_add(b.len() as u64, Ordering::Relaxed);
            }
        };
        loop {
            let now = clock::monotonic();
            let local_stop = if ctx.abort.load(Ordering::Relaxed) {
                Some(Outcome::Aborted)
            } else if now >= backstop {
                Some(Outcome::Backstop)
            } else {
                None
            };
            if let Some(o) = local_stop {
                status_seq += 1;
                let st = pdu::stop_status(
                    status_seq,
                    TestAction::StopLocal,
                    clock::realtime(),
                    self.auth_mode,
                );
                send(&rx, &st);
                return o;
            }
            if now >= watchdog {
                warned.once(ev, c, 1, || {
                    format!("connection {c}: no load from the server for 3 s")
                });
                return Outcome::Lost;
            }
            if stop_action.is_none() && ctx.stopping.load(Ordering::Relaxed) {
                // Another connection was told to stop: so is this one.
                stop_action = Some(TestAction::Stop);
            }
            if now >= next_status {
                next_status = next_status + trial;
                if next_status <= now {
                    next_status = now + trial;
                }
                let rt = clock::realtime();
                if let Some(a) = stop_action {
                    status_seq += 1;
                    send(&rx, &pdu::stop_status(status_seq, a, rt, self.auth_mode));
                    return Outcome::Completed;
                }
                if let Some(report) = recv.on_status_due(rt) {
                    status_seq += 1;
                    let st = pdu::status_pdu(&StatusFields {
                        report: &report,
                        status_seq,
                        action: TestAction::Testing,
                        rx_stopped: recv.rx_stopped(rt),
                        row: WireRate::ZERO,
                        sent_at: rt,
                        auth_mode: self.auth_mode,
                    });
                    send(&rx, &st);
                    let _ = ev.send(Event::Trial {
                        seq: status_seq,
                        trial: Trial::from(&report.trial),
                    });
                    if report.trial.ecn_bleaching {
                        warned.once(ev, c, 7, || format!("connection {c}: ECN bleaching seen"));
                    }
                }
                if let Some((n, s)) = recv.completed() {
                    if n != last_completed {
                        last_completed = n;
                        let _ = ev.send(Event::Sub {
                            conn: c,
                            n,
                            stats: *s,
                        });
                    }
                }
                // Past the planned end, silence is the stop on its way.
                if recv.rx_stopped(rt) && now < self.planned_end() {
                    let into = now.since(self.activated);
                    warned.once(ev, c, 4, || {
                        format!("connection {c}: no load received for 1 s ({into} into the test)")
                    });
                }
            }
            let r = match rx.recv(&mut buf) {
                Ok(r) => r,
                Err(_) => continue,
            };
            let d = &buf[..r.len.min(buf.len())];
            let l = match LoadRepr::decode(d) {
                Ok(l) => l,
                Err(_) => {
                    ctx.bytes_received
                        .fetch_add(r.len as u64, Ordering::Relaxed);
                    if !matches!(PduKind::of(d), Some(PduKind::Null | PduKind::Activation)) {
                        warned.once(ev, c, 6, || {
                            format!("connection {c}: invalid PDU received ({} bytes)", r.len)
                        });
                    }
                    continue;
                }
            };
            ctx.bytes_received.fetch_add(
                u64::from(l.payload_len).max(r.len as u64),
                Ordering::Relaxed,
            );
            watchdog = clock::monotonic() + WATCHDOG;
            if l.test_action.is_stop() {
                stop_action.get_or_insert(l.test_action);
                ctx.stopping.store(true, Ordering::Relaxed);
                continue;
            }
            if stop_action.is_some() {
                continue;
            }
            recv.on_load(&LoadArrival {
                seq: l.seq,
                payload_len: Bytes::new(u64::from(l.payload_len)),
                sent_at: from_timestamp(l.send_time),
                received_at: r.at,
                echo: (l.echo_time != Timestamp::default()).then(|| from_timestamp(l.echo_time)),
                resp_delay: DurationNs::from_ms(i64::from(l.resp_delay_ms)),
                ecn: Ecn::NotEct,
            });
            if l.rx_stopped {
                warned.once(ev, c, 5, || {
                    format!("connection {c}: the server reports its status traffic stopped")
                });
            }
            if l.status_loss != 0 && l.status_loss != STATUS_LOSS_OUT_OF_ORDER {
                warned.once(ev, c, 2, || {
                    format!("connection {c}: the server reports Status PDUs lost")
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trial(rx: u64, loss: u64) -> Trial {
        Trial {
            rx_datagrams: rx,
            rx_bytes: Bytes::new(rx * 1222),
            loss,
            elapsed: DurationNs::from_ms(50),
        }
    }

    #[test]
    fn trial_pool_sums_connections_by_trial_number() {
        let mut pool = TrialPool::new(IpFamily::V4);
        for n in 1..=30 {
            // Two connections report the same 50 ms.
            pool.add(n, trial(100, 10));
            pool.add(n, trial(100, 10));
            // A late or repeated report of a trial already fed is dropped.
            if n > 5 {
                pool.add(n - 4, trial(1000, 1000));
            }
        }
        // 30 trials of 50 ms less 200 ms of warm-up: 13 windows of 100 ms,
        // not 26 (each connection's trial is the same stretch of time).
        assert_eq!(pool.finish().windows(), (13, 13));
    }

    #[test]
    fn trial_pool_stays_small_whatever_numbers_arrive() {
        let mut pool = TrialPool::new(IpFamily::V4);
        // A hostile server's numbers: far ahead, then counting down.
        pool.add(1_000_000_000, trial(100, 10));
        for n in (1..100_000u32).rev() {
            pool.add(999_000_000 + n, trial(100, 10));
            assert!(pool.pending.len() <= TrialPool::MAX_PENDING + 1);
        }
    }

    fn block(rx: u64) -> SubIntervalStats {
        SubIntervalStats {
            rx_datagrams: rx,
            rx_bytes: Bytes::new(rx * 1222),
            elapsed: DurationNs::from_secs(1),
            ..SubIntervalStats::default()
        }
    }

    #[test]
    fn rows_wait_for_every_live_connection_and_skip_a_missed_one() {
        let mut a = Aggregator::new(2, IpFamily::V4);
        a.planned = 3;
        a.add(0, 1, block(100));
        assert!(a.ready(false).is_empty(), "connection 1 has not reported 1");
        a.add(1, 1, block(100));
        let r = a.ready(false);
        assert_eq!(r.len(), 1);
        assert_eq!((r[0].interval, r[0].active_connections), (1, 2));
        assert!((r[0].ip_layer_capacity_bps.mbps() - 2.0).abs() < 1e-9);
        // Connection 1 skips 2 (its Status PDU lost): row 2 goes out with
        // connection 0 alone once connection 1 reports 3.
        a.add(0, 2, block(100));
        a.add(1, 3, block(100));
        let r = a.ready(false);
        assert_eq!(r.len(), 1);
        assert_eq!((r[0].interval, r[0].active_connections), (2, 1));
        // A row past the planned count is dropped; a finished connection
        // does not hold anything back.
        a.add(0, 4, block(100));
        a.finish(0);
        let r = a.ready(false);
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].interval, 3);
        assert!(a.ready(true).is_empty());
    }

    #[test]
    fn validation_names_the_field() {
        let ok = CapacityConfig::default();
        assert!(validate(&ok).is_ok());
        let named = [
            (
                CapacityConfig {
                    fixed_row: Some(1),
                    start_row: Some(2),
                    ..CapacityConfig::default()
                },
                "start row",
            ),
            (
                CapacityConfig {
                    trial_interval: DurationNs::from_ms(300),
                    ..CapacityConfig::default()
                },
                "trial interval",
            ),
        ];
        for (bad, field) in named {
            let e = validate(&bad).unwrap_err().to_string();
            assert!(e.contains(field), "{e}");
        }
        let bad = CapacityConfig {
            max_rate: Some(pathsonde_core::BitRate::from_bps(0.0)),
            ..CapacityConfig::default()
        };
        assert_eq!(validate(&bad).unwrap_err().error_status(), 50);
    }
}
