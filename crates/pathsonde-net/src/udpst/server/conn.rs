//! One admitted UDPSTP connection: the Null Request, the Test Activation
//! (which takes the server's one test slot), then the test itself —
//! receiving the load upstream or sending it downstream.
//!
//! The load goes only where it is seen to arrive.  Status PDUs carry no
//! authentication, so downstream the sender also watches what the client's
//! host says: an ICMP error on the connected test socket (nobody listens
//! there), Status PDUs that stop coming (the load pauses after
//! [`STATUS_PAUSE`]), one that claims more load than was sent, or one whose
//! rx_stopped flag says none arrived — each ends or pauses the load at once
//! rather than after the spec's 3 s watchdog.

use super::tripwire::Tripped;
use super::{ConnGuard, UdpstServerConfig, UdpstStats};
use crate::clock;
use crate::udpst::keys::{self, SessionKeys};
use crate::udpst::pdu::{self, StatusSequence};
use crate::udpst::rx::{self, LoadRxRole, StatusLink, Take};
use crate::udpst::tx::{self, lock, SendSide, SteerRole, TxShared, MAX_DATAGRAM};
use crate::udpst::Direction;
use pathsonde_core::capacity::adjust::{adjuster, LoadAdjust};
use pathsonde_core::capacity::rate_table::{
    row_at_or_below, sending_rate, SendingRate, TableOptions,
};
use pathsonde_core::capacity::{SERVER_STOP_GRACE, WATCHDOG};
use pathsonde_core::{BitRate, DurationNs, TimeNs};
use pathsonde_wire::udpst::activation::{
    ActivationResult, Packet as ActivationPacket, Repr as ActivationRepr,
};
use pathsonde_wire::udpst::auth::AuthMode;
use pathsonde_wire::udpst::load::Repr as LoadRepr;
use pathsonde_wire::udpst::null::Repr as NullRepr;
use pathsonde_wire::udpst::status::Repr as StatusRepr;
use pathsonde_wire::udpst::{PduKind, TestAction};
use std::io::ErrorKind;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// Downstream load pauses when no valid Status PDU has come for this long
/// (or five trial intervals, if longer), and resumes with the next one.
/// The client sends one every trial interval (50 ms by default), so a
/// quarter second of silence means the client is gone or was never there;
/// the test itself still ends only at the spec's 3 s watchdog.
pub const STATUS_PAUSE: Duration = Duration::from_millis(250);

/// How often a running test looks whether its client's address swept the
/// server's ports (a tripwire, [`super::tripwire`]).
const SWEEP_CHECK: DurationNs = DurationNs::from_ms(50);

/// Slack for Status PDUs' byte counts against the bytes sent: duplicates
/// the network made, and counts that straddle a report.
const CLAIM_SLACK: f64 = 1.10;
const CLAIM_SLACK_BYTES: u64 = 64 * 1024;

/// Why a test's load was stopped before its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LoadStopped {
    /// The client's host answered the load with an ICMP error.
    Refused,
    /// Status PDUs claimed more bytes than were sent.
    Overclaimed,
    /// A Status PDU said the client receives no load (rx_stopped) after
    /// load had been sent for longer than that flag takes to rise.
    NotReceived,
}

impl LoadStopped {
    fn why(self) -> &'static str {
        match self {
            LoadStopped::Refused => "the client's host refused it (ICMP error)",
            LoadStopped::Overclaimed => "Status PDUs claimed more load than was sent",
            LoadStopped::NotReceived => "the client said it receives no load",
        }
    }
}

/// Errors on a connected UDP socket that mean its peer is not there (an
/// ICMP error the kernel queued), as opposed to a timeout.
fn peer_unreachable(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        ErrorKind::ConnectionRefused | ErrorKind::HostUnreachable | ErrorKind::NetworkUnreachable
    ) || matches!(
        e.raw_os_error(),
        Some(libc::ECONNREFUSED | libc::EHOSTUNREACH | libc::ENETUNREACH)
    )
}

/// One admitted connection.
pub(super) struct Conn<'a> {
    pub(super) cfg: &'a UdpstServerConfig,
    pub(super) stats: &'a UdpstStats,
    pub(super) stop: &'a AtomicBool,
    pub(super) client: SocketAddr,
    pub(super) session: Option<SessionKeys>,
    pub(super) mode: AuthMode,
    pub(super) ceiling: BitRate,
    /// UDP payload bytes this connection may move (its share of
    /// `--max-bytes`): the test stops gracefully when they are used.
    pub(super) max_bytes: u64,
    pub(super) guard: ConnGuard,
    /// Sources that sent to a tripwire port, and when this connection's
    /// setup came: a trip after it ends the connection.
    pub(super) tripped: &'a Tripped,
    pub(super) set_up_at: std::time::Instant,
}

impl Conn<'_> {
    /// True (and counted, once) when the client's address has swept the
    /// server's ports since this connection was set up.
    fn swept(&self) -> bool {
        if !self.tripped.since(self.client.ip(), self.set_up_at) {
            return false;
        }
        self.stats.sweeps_caught.fetch_add(1, Ordering::Relaxed);
        if self.cfg.log {
            eprintln!(
                "pathsonde serve: UDPST {}: connection ended: its address swept the server's ports",
                self.client
            );
        }
        true
    }

    pub(super) fn serve(mut self, sock: UdpSocket) {
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
            if self.stop.load(Ordering::Relaxed) || clock::monotonic() >= deadline || self.swept() {
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
        if sock.connect(self.client).is_err() {
            return;
        }
        if !self.guard.activate() {
            // Another test took the slot first: say so (ErrorStatus 152 at
            // the reference client) rather than let the client time out.
            let mut no = req;
            no.result = ActivationResult::Rejected;
            self.send_activation_response(&sock, &no);
            if self.cfg.log {
                eprintln!(
                    "pathsonde serve: UDPST {}: activation refused: another test is running",
                    self.client
                );
            }
            return;
        }
        self.stats.tests_activated.fetch_add(1, Ordering::Relaxed);
        let opts = self.cfg.table();
        let ceiling = row_at_or_below(self.ceiling, opts);
        let (mut resp, adj_cfg) = super::police(&req, self.cfg, ceiling);
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
        self.send_activation_response(&sock, &resp);
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

    /// Sends a TA Response (signed when the setup was) on the connected socket.
    fn send_activation_response(&self, sock: &UdpSocket, resp: &ActivationRepr) {
        let mut out = resp.to_bytes();
        if let Some(k) = &self.session {
            keys::sign(&mut out, &k.server, k.key_id);
        }
        if sock.send(&out).is_ok() {
            self.stats
                .bytes_sent
                .fetch_add(out.len() as u64, Ordering::Relaxed);
        }
    }

    /// Notes a test stopped early at `--max-bytes`.
    fn bytes_limit_reached(&self) {
        if self.cfg.log {
            eprintln!(
                "pathsonde serve: UDPST {}: test stopped: its {} bytes of --max-bytes are used",
                self.client, self.max_bytes
            );
        }
    }

    /// Notes a load stopped early: counted, and logged.
    fn load_stopped(&self, why: LoadStopped) {
        self.stats.load_stopped.fetch_add(1, Ordering::Relaxed);
        if self.cfg.log {
            eprintln!(
                "pathsonde serve: UDPST {}: load stopped: {}",
                self.client,
                why.why()
            );
        }
    }

    /// Upstream: receive the load, send a Status PDU every trial interval
    /// with the row the search chose.  True when the client confirmed the stop.
    fn upstream(
        &self,
        sock: UdpSocket,
        ta: &ActivationRepr,
        adj: Box<dyn LoadAdjust>,
        opts: TableOptions,
    ) -> bool {
        let rx = rx::open(sock);
        let activated = clock::monotonic();
        let mut role = Receiving {
            conn: self,
            adj,
            opts,
            stop_at: activated
                + DurationNs::from_secs(i64::from(ta.test_duration_s))
                + SERVER_STOP_GRACE,
            received: 0,
            watchdog: activated + WATCHDOG,
            next_sweep_check: activated,
            stopping: false,
        };
        rx::receive_load(
            rx,
            ta,
            activated,
            self.mode,
            &self.stats.bytes_sent,
            &mut role,
        )
    }

    /// Downstream: send the load at the row the search chooses on each
    /// Status PDU.  True when the client confirmed the stop.
    fn downstream(
        &self,
        sock: &UdpSocket,
        ta: &ActivationRepr,
        adj: Box<dyn LoadAdjust>,
        opts: TableOptions,
    ) -> bool {
        let activated = clock::monotonic();
        let shared = Mutex::new(TxShared {
            max_bytes: self.max_bytes,
            ..TxShared::new(sending_rate(adj.row(), opts))
        });
        let sent = AtomicU64::new(0);
        // Datagrams cut to the path's MTU: the client's own counts show it.
        let clamped = AtomicU64::new(0);
        let mut role = Sending {
            conn: self,
            adj,
            opts,
            activated,
            stop_at: activated
                + DurationNs::from_secs(i64::from(ta.test_duration_s))
                + SERVER_STOP_GRACE,
            sent: &sent,
            watchdog: activated + WATCHDOG,
            next_sweep_check: activated,
            last_rx: activated,
            pause_after: DurationNs::from_ns(
                (STATUS_PAUSE.as_nanos() as i64)
                    .max(5 * i64::from(ta.trial_interval_ms) * 1_000_000),
            ),
            paused: false,
            statuses: StatusSequence::default(),
            claimed: 0,
            stopping: false,
        };
        let confirmed = tx::send_load(
            SendSide {
                sock,
                shared: &shared,
                thread_name: "udpst-tx".into(),
                v6: self.client.is_ipv6(),
                activated,
                bytes_sent: &sent,
                clamped: &clamped,
            },
            &mut role,
        );
        self.stats
            .bytes_sent
            .fetch_add(sent.load(Ordering::Relaxed), Ordering::Relaxed);
        confirmed
    }
}

/// The server receiving the load (upstream): the search picks each
/// Status PDU's row; the test ends at its duration, at `--max-bytes`, at
/// the watchdog, at a port sweep, or when the client's host refuses.
struct Receiving<'c, 'a> {
    conn: &'c Conn<'a>,
    adj: Box<dyn LoadAdjust>,
    opts: TableOptions,
    /// When the final Status PDU goes out (moved earlier by `--max-bytes`).
    stop_at: TimeNs,
    /// Load payload bytes received while testing.
    received: u64,
    watchdog: TimeNs,
    next_sweep_check: TimeNs,
    /// The final Status PDU went out: the status timer has ended.
    stopping: bool,
}

impl LoadRxRole for Receiving<'_, '_> {
    type Out = bool;

    fn pass(&mut self, now: TimeNs, _link: &mut StatusLink<'_>) -> Option<bool> {
        if now >= self.next_sweep_check {
            self.next_sweep_check = now + SWEEP_CHECK;
            if self.conn.swept() {
                return Some(false);
            }
        }
        if self.conn.stop.load(Ordering::Relaxed) || now >= self.watchdog {
            return Some(false);
        }
        None
    }

    fn status_timer_running(&self) -> bool {
        !self.stopping
    }

    fn status_due(&mut self, now: TimeNs, rt: TimeNs, link: &mut StatusLink<'_>) -> Option<bool> {
        if now >= self.stop_at {
            // The final Status PDU; the status timer ends with it.
            self.stopping = true;
            link.send_stop(TestAction::Stop, rt);
        } else {
            let (adj, opts) = (&mut self.adj, self.opts);
            link.send_report(rt, |report| {
                let d = adj.on_feedback(&report.trial.feedback(report.subint_seq));
                pdu::to_wire_rate(&sending_rate(d.row, opts))
            });
        }
        None
    }

    fn recv_error(&mut self, e: &std::io::Error) -> Option<bool> {
        if peer_unreachable(e) {
            // Our Status PDUs are refused: nobody is testing there.
            self.conn.load_stopped(LoadStopped::Refused);
            return Some(false);
        }
        None
    }

    fn not_load(&mut self, _d: &[u8], _len: usize) {}

    fn load(&mut self, l: &LoadRepr, _len: usize) -> Take<bool> {
        self.conn
            .stats
            .bytes_received
            .fetch_add(u64::from(l.payload_len), Ordering::Relaxed);
        if l.test_action.is_stop() {
            return Take::Return(self.stopping);
        }
        self.received = self.received.saturating_add(u64::from(l.payload_len));
        // One clock read per datagram: the receive loop runs at line rate.
        let arrived = clock::monotonic();
        if !self.stopping && self.received >= self.conn.max_bytes && self.stop_at > arrived {
            // The byte limit: the next status timer sends the stop.
            self.stop_at = arrived;
            self.conn.bytes_limit_reached();
        }
        if self.stopping {
            return Take::Skip;
        }
        self.watchdog = arrived + WATCHDOG;
        Take::Feed
    }

    fn fed(&mut self, _l: &LoadRepr) {}
}

/// The server sending the load (downstream): each Status PDU from the
/// client feeds the search, which picks the sender's row; the load pauses
/// when Status PDUs stop and stops early on what [`LoadStopped`] names.
struct Sending<'c, 'a> {
    conn: &'c Conn<'a>,
    adj: Box<dyn LoadAdjust>,
    opts: TableOptions,
    activated: TimeNs,
    stop_at: TimeNs,
    /// UDP payload bytes the sender sent.
    sent: &'c AtomicU64,
    watchdog: TimeNs,
    next_sweep_check: TimeNs,
    /// When the last valid Status PDU came.
    last_rx: TimeNs,
    pause_after: DurationNs,
    paused: bool,
    statuses: StatusSequence,
    /// Bytes the client's Status PDUs say arrived, summed.
    claimed: u64,
    stopping: bool,
}

impl Sending<'_, '_> {
    /// Ends the sender; `confirmed` is what the test returns.
    fn done(shared: &Mutex<TxShared>, confirmed: bool) -> bool {
        lock(shared).done = true;
        confirmed
    }

    fn stopped_early(&self, shared: &Mutex<TxShared>, why: LoadStopped) -> bool {
        self.conn.load_stopped(why);
        Self::done(shared, false)
    }
}

impl SteerRole for Sending<'_, '_> {
    type Out = bool;

    fn buf_len(&self) -> usize {
        256
    }

    fn spawn_failed(&mut self) -> bool {
        false
    }

    fn pass(&mut self, now: TimeNs, shared: &Mutex<TxShared>) -> Option<bool> {
        if self.conn.stop.load(Ordering::Relaxed) || now >= self.watchdog {
            return Some(Self::done(shared, false));
        }
        if now >= self.next_sweep_check {
            self.next_sweep_check = now + SWEEP_CHECK;
            if self.conn.swept() {
                return Some(Self::done(shared, false));
            }
        }
        // The sender holds at the limit by itself; within one
        // datagram of it there is nothing left to send: stop.
        let over_bytes = self.sent.load(Ordering::Relaxed)
            >= self.conn.max_bytes.saturating_sub(MAX_DATAGRAM as u64);
        let silent = now.since(self.last_rx);
        // One lock per pass: the senders take it for every batch.
        let mut g = lock(shared);
        if !self.stopping && (now >= self.stop_at || over_bytes) {
            if over_bytes {
                self.conn.bytes_limit_reached();
            }
            self.stopping = true;
            g.action = TestAction::Stop;
            if self.paused {
                // The stop PDUs go out on the row's transmitters.
                self.paused = false;
                g.row = sending_rate(self.adj.row(), self.opts);
            }
        }
        if g.refused {
            drop(g);
            return Some(self.stopped_early(shared, LoadStopped::Refused));
        }
        g.rx_stopped = silent >= DurationNs::from_secs(1);
        if !self.stopping && !self.paused && silent >= self.pause_after {
            self.paused = true;
            g.row = SendingRate::ZERO;
        }
        None
    }

    fn recv_error(&mut self, e: &std::io::Error, shared: &Mutex<TxShared>) -> Option<bool> {
        peer_unreachable(e).then(|| self.stopped_early(shared, LoadStopped::Refused))
    }

    fn datagram(&mut self, d: &[u8]) -> Option<StatusRepr> {
        let st = StatusRepr::decode(d).ok()?;
        self.conn
            .stats
            .bytes_received
            .fetch_add(d.len() as u64, Ordering::Relaxed);
        Some(st)
    }

    fn status(&mut self, st: &StatusRepr, shared: &Mutex<TxShared>) -> Option<bool> {
        if st.test_action.is_stop() {
            return Some(Self::done(shared, self.stopping));
        }
        let now = clock::monotonic();
        let seen = self.statuses.on_status(st.status_seq);
        if seen.newer {
            self.claimed = self.claimed.saturating_add(u64::from(st.ti_rx_bytes));
            let sent_so_far = self.sent.load(Ordering::Relaxed);
            if self.claimed as f64 > sent_so_far as f64 * CLAIM_SLACK + CLAIM_SLACK_BYTES as f64 {
                return Some(self.stopped_early(shared, LoadStopped::Overclaimed));
            }
            if st.rx_stopped
                && !self.stopping
                && now.since(self.activated) > DurationNs::from_secs(2)
            {
                return Some(self.stopped_early(shared, LoadStopped::NotReceived));
            }
        }
        if !self.stopping {
            self.watchdog = now + WATCHDOG;
        }
        self.last_rx = now;
        let resume = std::mem::take(&mut self.paused);
        let row = if self.stopping {
            resume.then(|| sending_rate(self.adj.row(), self.opts))
        } else {
            Some(sending_rate(
                self.adj.on_feedback(&pdu::feedback(st)).row,
                self.opts,
            ))
        };
        let mut g = lock(shared);
        g.echo = st.send_time;
        g.status_at = Some(now);
        g.status_loss = seen.status_loss;
        if let Some(row) = row {
            g.row = row;
        }
        None
    }
}
