//! The UDPSTP client (`pathsonde capacity`): per connection one UDP socket
//! on an ephemeral port, Setup → (Null ignored) → connect → Test
//! Activation → test, on its own thread; the caller's thread gathers the
//! connections' sub-intervals into rows (summed over connections) and calls
//! `on_row` as each completes.
//!
//! Upstream, this client sends the load at the row each Status PDU names
//! and records a sub-interval whenever the server's `subint_seq` moves
//! (`status`, on the load-send loop of `super::tx`); downstream it
//! receives the load into core's `LoadReceiver` (kernel receive stamps
//! where the host has them), sends a Status PDU every trial interval and
//! records its own sub-intervals (`load`, on the load-receive loop of
//! `super::rx`).  `setup` and `activation` are the exchanges before.
//! Timers (spec §8): set-up 3 s, watchdog 3 s, backstop duration + 3.5 s.

mod activation;
mod load;
mod setup;
mod status;

use super::keys::AuthFailure;
use super::{
    CapacityConfig, CapacityError, CapacityRun, Direction, UdpstWarning, MAX_SECRET_BYTES,
};
use crate::clock;
use crate::udp;
use pathsonde_core::capacity::rate_table::IpFamily;
use pathsonde_core::capacity::receiver::SubIntervalStats;
use pathsonde_core::capacity::summary::{CapacityReport, SubIntervalRow};
use pathsonde_core::capacity::zero_loss::{Trial, ZeroLoss, ZeroLossFit};
use pathsonde_core::capacity::{planned_sub_intervals, CLIENT_BACKSTOP_GRACE, WATCHDOG};
use pathsonde_core::{Bytes, DurationNs, TimeNs};
use pathsonde_wire::udpst::activation::Repr as ActivationRepr;
use pathsonde_wire::udpst::auth::AuthMode;
use std::collections::BTreeMap;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Sender};
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

/// Waits until `deadline` for the control reply `take` accepts, reading
/// with `recv` (datagram and source); `take` returns `None` for a datagram
/// to ignore.  The Setup and the Test Activation exchange share it.
fn await_reply<T>(
    ctx: &Ctx<'_>,
    sock: &UdpSocket,
    deadline: Instant,
    what: &'static str,
    receiving: &'static str,
    recv: impl Fn(&UdpSocket, &mut [u8]) -> std::io::Result<(usize, SocketAddr)>,
    mut take: impl FnMut(&[u8], SocketAddr) -> Option<Result<T, CapacityError>>,
) -> Result<T, CapacityError> {
    let server = ctx.cfg.server;
    let mut rbuf = [0u8; 2048];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(CapacityError::Timeout { server, what });
        }
        let _ = sock.set_read_timeout(Some(left.max(Duration::from_millis(1))));
        let (len, from) = match recv(sock, &mut rbuf) {
            Ok(x) => x,
            Err(e) if is_timeout(&e) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => continue,
            Err(e) => return Err(CapacityError::io(receiving, e)),
        };
        ctx.bytes_received.fetch_add(len as u64, Ordering::Relaxed);
        if let Some(r) = take(&rbuf[..len], from) {
            return r;
        }
    }
}

/// One connection from its socket to its end: setup, activation, the test.
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
    let set_up = setup::set_up(ctx, idx, &sock)?;
    let auth_mode = if set_up.session.is_some() {
        AuthMode::Control
    } else {
        AuthMode::None
    };
    let test_port = set_up.test_port;
    let test_addr = SocketAddr::new(server.ip(), test_port);
    sock.connect(test_addr)
        .map_err(|e| CapacityError::io(format!("connecting to {test_addr}"), e))?;
    // Connected, the socket names the local address the route chose.
    let local = sock.local_addr().unwrap_or(local);

    // 2. Test Activation Request.
    let resp = activation::activate(
        ctx,
        &sock,
        set_up.session.as_ref(),
        test_addr,
        set_up.deadline,
    )?;
    let _ = events.send(Event::Activated {
        conn: idx,
        ta: Box::new(resp),
        test_port,
        local,
    });

    // 3. The test.
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

/// One activated connection's test, whichever way the load goes
/// ([`status`] upstream, [`load`] downstream).
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
