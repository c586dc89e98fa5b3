//! Upstream, the client as load sender: the server's Status PDUs name the
//! row to send and report the sub-intervals it recorded.  The load goes
//! out through the one load-send loop both sides run
//! ([`crate::udpst::tx::send_load`]); this module is what the client does
//! with each Status PDU and with their absence.

use super::{Event, Outcome, Test, Warned, RX_STOPPED_AFTER};
use crate::udpst::pdu;
use crate::udpst::tx::{self, lock, SendSide, SteerRole, TxShared};
use pathsonde_core::capacity::WATCHDOG;
use pathsonde_core::{DurationNs, TimeNs};
use pathsonde_wire::udpst::status::Repr as StatusRepr;
use pathsonde_wire::udpst::{PduKind, TestAction};
use std::net::UdpSocket;
use std::sync::atomic::Ordering;
use std::sync::Mutex;

impl Test<'_, '_> {
    /// Upstream: this client sends the load at the rows the server's Status
    /// PDUs name and records the sub-intervals they report.
    pub(super) fn upstream(&self, sock: &UdpSocket) -> Outcome {
        let ctx = self.ctx;
        let c = self.idx;
        let first = pdu::to_core_rate(&self.ta.sending_rate);
        if let Some(m) = ctx.max_row_bps.get(usize::from(c)) {
            m.fetch_max(first.ip_rate().bps() as u64, Ordering::Relaxed);
        }
        let shared = Mutex::new(TxShared::new(first));
        let mut role = Steering {
            test: self,
            watchdog: self.activated + WATCHDOG,
            backstop: self.backstop(),
            last_rx: self.activated,
            statuses: pdu::StatusSequence::default(),
            last_subint: 0,
            rtt_sum: DurationNs::ZERO,
            rtt_n: 0,
            warned: Warned(0),
        };
        tx::send_load(
            SendSide {
                sock,
                shared: &shared,
                thread_name: format!("udpst-tx-{c}"),
                v6: ctx.cfg.server.is_ipv6(),
                activated: self.activated,
                bytes_sent: ctx.bytes_sent,
                clamped: ctx.clamped,
            },
            &mut role,
        )
    }
}

/// The client's side of the load-send loop.
struct Steering<'t, 'a, 'b> {
    test: &'t Test<'a, 'b>,
    watchdog: TimeNs,
    backstop: TimeNs,
    /// When the last Status PDU came.
    last_rx: TimeNs,
    statuses: pdu::StatusSequence,
    /// The last sub-interval recorded.
    last_subint: u32,
    /// RTT-variation samples since the last sub-interval, for its average.
    rtt_sum: DurationNs,
    rtt_n: u64,
    warned: Warned,
}

impl Steering<'_, '_, '_> {
    fn warn(&mut self, code: u8, message: impl FnOnce() -> String) {
        let t = self.test;
        self.warned.once(t.events, t.idx, code, message);
    }
}

/// Tells the sender to send one datagram carrying `action` and end.
fn stop(shared: &Mutex<TxShared>, action: TestAction) {
    let mut g = lock(shared);
    g.action = action;
    g.stop_once = true;
}

impl SteerRole for Steering<'_, '_, '_> {
    type Out = Outcome;

    fn buf_len(&self) -> usize {
        512
    }

    fn spawn_failed(&mut self) -> Outcome {
        Outcome::Aborted
    }

    fn pass(&mut self, now: TimeNs, shared: &Mutex<TxShared>) -> Option<Outcome> {
        let ctx = self.test.ctx;
        let c = self.test.idx;
        if ctx.abort.load(Ordering::Relaxed) {
            stop(shared, TestAction::StopLocal);
            return Some(Outcome::Aborted);
        }
        if now >= self.backstop {
            stop(shared, TestAction::StopLocal);
            return Some(Outcome::Backstop);
        }
        if ctx.stopping.load(Ordering::Relaxed) {
            // Another connection was told to stop: so is this one.
            stop(shared, TestAction::Stop);
            return Some(Outcome::Completed);
        }
        if now >= self.watchdog {
            lock(shared).done = true;
            self.warn(1, || {
                format!("connection {c}: no response from the server for 3 s")
            });
            return Some(Outcome::Lost);
        }
        let stopped = now.since(self.last_rx) >= RX_STOPPED_AFTER;
        lock(shared).rx_stopped = stopped;
        // Past the planned end, silence is the stop on its way.
        if stopped && now < self.test.planned_end() {
            self.warn(4, || {
                format!("connection {c}: no Status PDU received for 1 s")
            });
        }
        None
    }

    fn recv_error(&mut self, _e: &std::io::Error, _shared: &Mutex<TxShared>) -> Option<Outcome> {
        None
    }

    fn datagram(&mut self, d: &[u8]) -> Option<StatusRepr> {
        let c = self.test.idx;
        let len = d.len();
        self.test
            .ctx
            .bytes_received
            .fetch_add(len as u64, Ordering::Relaxed);
        match StatusRepr::decode(d) {
            Ok(st) => Some(st),
            Err(_) => {
                if !matches!(PduKind::of(d), Some(PduKind::Null | PduKind::Activation)) {
                    self.warn(6, || {
                        format!("connection {c}: invalid PDU received ({len} bytes)")
                    });
                }
                None
            }
        }
    }

    fn status(&mut self, st: &StatusRepr, shared: &Mutex<TxShared>) -> Option<Outcome> {
        let t = self.test;
        let ctx = t.ctx;
        let c = t.idx;
        let now = crate::clock::monotonic();
        self.watchdog = now + WATCHDOG;
        self.last_rx = now;
        let seen = self.statuses.on_status(st.status_seq);
        let loss = seen.status_loss;
        if seen.newer && loss > 0 {
            self.warn(3, || {
                format!("connection {c}: Status PDUs from the server were lost")
            });
        }
        if seen.newer {
            let _ = t.events.send(Event::Trial {
                seq: st.status_seq,
                trial: pdu::trial_of(st),
            });
        }
        {
            let mut g = lock(shared);
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
            return Some(Outcome::Completed);
        }
        if st.rx_stopped {
            self.warn(5, || {
                format!("connection {c}: the server reports its load traffic stopped")
            });
        }
        if st.status_flags.ecn_bleaching() {
            self.warn(8, || {
                format!("connection {c}: the server reports ECN bleaching")
            });
        }
        if let Some(v) = st.rtt_var_sample_ms {
            self.rtt_sum += DurationNs::from_ms(i64::from(v));
            self.rtt_n += 1;
        }
        if st.subint_seq > 0 && st.subint_seq != self.last_subint {
            self.last_subint = st.subint_seq;
            let stats = pdu::subint_from_status(st, self.rtt_sum, self.rtt_n);
            self.rtt_sum = DurationNs::ZERO;
            self.rtt_n = 0;
            let _ = t.events.send(Event::Sub {
                conn: c,
                n: st.subint_seq,
                stats,
            });
        }
        None
    }
}
