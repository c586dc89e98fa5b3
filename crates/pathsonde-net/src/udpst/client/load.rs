//! Downstream, the client as load receiver: the server's load PDUs go into
//! core's `LoadReceiver` through the one load-receive loop both sides run
//! ([`crate::udpst::rx`]); this client sends a Status PDU every trial
//! interval (row zero: the server chooses), records its own
//! sub-intervals, and warns of what the load PDUs and their absence say.

use super::{Event, Outcome, Test, Warned};
use crate::clock;
use crate::udpst::rx::{self, LoadRxRole, StatusLink, Take};
use pathsonde_core::capacity::zero_loss::Trial;
use pathsonde_core::capacity::WATCHDOG;
use pathsonde_core::TimeNs;
use pathsonde_wire::udpst::load::{Repr as LoadRepr, STATUS_LOSS_OUT_OF_ORDER};
use pathsonde_wire::udpst::rate::SendingRate as WireRate;
use pathsonde_wire::udpst::{PduKind, TestAction};
use std::net::UdpSocket;
use std::sync::atomic::Ordering;

impl Test<'_, '_> {
    /// Downstream: this client receives the load, sends a Status PDU every
    /// trial interval and records its own sub-intervals.
    pub(super) fn downstream(&self, sock: UdpSocket) -> Outcome {
        let rx = rx::open(sock);
        let mut role = Receiving {
            test: self,
            stop_action: None,
            last_completed: 0,
            watchdog: self.activated + WATCHDOG,
            backstop: self.backstop(),
            warned: Warned(0),
        };
        rx::receive_load(
            rx,
            &self.ta,
            self.activated,
            self.auth_mode,
            self.ctx.bytes_sent,
            &mut role,
        )
    }
}

/// The client's side of the load-receive loop.
struct Receiving<'t, 'a, 'b> {
    test: &'t Test<'a, 'b>,
    /// The stop to confirm at the next status timer (the server's, or
    /// another connection's).
    stop_action: Option<TestAction>,
    /// The last sub-interval recorded.
    last_completed: u32,
    watchdog: TimeNs,
    backstop: TimeNs,
    warned: Warned,
}

impl Receiving<'_, '_, '_> {
    fn warn(&mut self, code: u8, message: impl FnOnce() -> String) {
        let t = self.test;
        self.warned.once(t.events, t.idx, code, message);
    }
}

impl LoadRxRole for Receiving<'_, '_, '_> {
    type Out = Outcome;

    fn pass(&mut self, now: TimeNs, link: &mut StatusLink<'_>) -> Option<Outcome> {
        let ctx = self.test.ctx;
        let c = self.test.idx;
        let local_stop = if ctx.abort.load(Ordering::Relaxed) {
            Some(Outcome::Aborted)
        } else if now >= self.backstop {
            Some(Outcome::Backstop)
        } else {
            None
        };
        if let Some(o) = local_stop {
            link.send_stop(TestAction::StopLocal, clock::realtime());
            return Some(o);
        }
        if now >= self.watchdog {
            self.warn(1, || {
                format!("connection {c}: no load from the server for 3 s")
            });
            return Some(Outcome::Lost);
        }
        if self.stop_action.is_none() && ctx.stopping.load(Ordering::Relaxed) {
            // Another connection was told to stop: so is this one.
            self.stop_action = Some(TestAction::Stop);
        }
        None
    }

    fn status_timer_running(&self) -> bool {
        true
    }

    fn status_due(
        &mut self,
        now: TimeNs,
        rt: TimeNs,
        link: &mut StatusLink<'_>,
    ) -> Option<Outcome> {
        let t = self.test;
        let c = t.idx;
        if let Some(a) = self.stop_action {
            link.send_stop(a, rt);
            return Some(Outcome::Completed);
        }
        if let Some((report, seq)) = link.send_report(rt, |_| WireRate::ZERO) {
            let _ = t.events.send(Event::Trial {
                seq,
                trial: Trial::from(&report.trial),
            });
            if report.trial.ecn_bleaching {
                self.warn(7, || format!("connection {c}: ECN bleaching seen"));
            }
        }
        if let Some((n, s)) = link.recv.completed() {
            if n != self.last_completed {
                self.last_completed = n;
                let _ = t.events.send(Event::Sub {
                    conn: c,
                    n,
                    stats: *s,
                });
            }
        }
        // Past the planned end, silence is the stop on its way.
        if link.recv.rx_stopped(rt) && now < t.planned_end() {
            let into = now.since(t.activated);
            self.warn(4, || {
                format!("connection {c}: no load received for 1 s ({into} into the test)")
            });
        }
        None
    }

    fn recv_error(&mut self, _e: &std::io::Error) -> Option<Outcome> {
        None
    }

    fn not_load(&mut self, d: &[u8], len: usize) {
        let c = self.test.idx;
        self.test
            .ctx
            .bytes_received
            .fetch_add(len as u64, Ordering::Relaxed);
        if !matches!(PduKind::of(d), Some(PduKind::Null | PduKind::Activation)) {
            self.warn(6, || {
                format!("connection {c}: invalid PDU received ({len} bytes)")
            });
        }
    }

    fn load(&mut self, l: &LoadRepr, len: usize) -> Take<Outcome> {
        let ctx = self.test.ctx;
        ctx.bytes_received
            .fetch_add(u64::from(l.payload_len).max(len as u64), Ordering::Relaxed);
        self.watchdog = clock::monotonic() + WATCHDOG;
        if l.test_action.is_stop() {
            self.stop_action.get_or_insert(l.test_action);
            ctx.stopping.store(true, Ordering::Relaxed);
            return Take::Skip;
        }
        if self.stop_action.is_some() {
            return Take::Skip;
        }
        Take::Feed
    }

    fn fed(&mut self, l: &LoadRepr) {
        let c = self.test.idx;
        if l.rx_stopped {
            self.warn(5, || {
                format!("connection {c}: the server reports its status traffic stopped")
            });
        }
        if l.status_loss != 0 && l.status_loss != STATUS_LOSS_OUT_OF_ORDER {
            self.warn(2, || {
                format!("connection {c}: the server reports Status PDUs lost")
            });
        }
    }
}
