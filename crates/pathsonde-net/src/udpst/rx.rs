//! The UDPSTP load-receive loop (spec §9.5): the one loop both load
//! receivers run, the server upstream and the client downstream.
//!
//! One pass: the role's own checks (stops, watchdog, sweeps), then the
//! status timer (a Status PDU every trial interval from core's
//! `LoadReceiver`), then one receive with kernel stamps (a 1 ms timeout,
//! so the timer keeps its beat), and the load PDU into the receiver.
//! Everything the two sides do differently — who chooses the row, what a
//! stop means, what is counted and warned — is a [`LoadRxRole`] hook, so
//! the receiving and the status timing are written once.

use super::pdu::{self, StatusFields};
use crate::clock;
use crate::udp::TimestampingReceiver;
use pathsonde_core::capacity::receiver::{
    Ecn, LoadArrival, LoadReceiver, ReceiverConfig, StatusReport,
};
use pathsonde_core::{Bytes, DurationNs, TimeNs};
use pathsonde_wire::udpst::activation::Repr as ActivationRepr;
use pathsonde_wire::udpst::auth::AuthMode;
use pathsonde_wire::udpst::load::Repr as LoadRepr;
use pathsonde_wire::udpst::rate::SendingRate as WireRate;
use pathsonde_wire::udpst::status::Repr as StatusRepr;
use pathsonde_wire::udpst::{TestAction, Timestamp};
use std::net::UdpSocket;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// What a role does with one valid load PDU.
pub(crate) enum Take<O> {
    /// Feed it to the load receiver.
    Feed,
    /// Drop it (after a stop).
    Skip,
    /// End the loop.
    Return(O),
}

/// What the two load receivers do differently; every hook runs on the
/// loop's thread, in the order the module comment gives.
pub(crate) trait LoadRxRole {
    type Out;
    /// The checks at the top of each pass, before the status timer.
    fn pass(&mut self, now: TimeNs, link: &mut StatusLink<'_>) -> Option<Self::Out>;
    /// Whether the status timer still runs.
    fn status_timer_running(&self) -> bool;
    /// The status timer fired (`now` monotonic, `rt` wall clock).
    fn status_due(
        &mut self,
        now: TimeNs,
        rt: TimeNs,
        link: &mut StatusLink<'_>,
    ) -> Option<Self::Out>;
    /// A receive failed (a timeout, usually).
    fn recv_error(&mut self, e: &std::io::Error) -> Option<Self::Out>;
    /// A datagram that is no load PDU arrived (`len` bytes, `d` as read).
    fn not_load(&mut self, d: &[u8], len: usize);
    /// A load PDU arrived (`len` bytes on the wire).
    fn load(&mut self, l: &LoadRepr, len: usize) -> Take<Self::Out>;
    /// After a load PDU was fed to the receiver.
    fn fed(&mut self, l: &LoadRepr);
}

/// The load receiver and the Status PDUs it sends back on the connected socket.
pub(crate) struct StatusLink<'a> {
    rx: TimestampingReceiver,
    pub recv: LoadReceiver,
    status_seq: u32,
    mode: AuthMode,
    /// UDP payload bytes sent (Status PDUs here).
    bytes_sent: &'a AtomicU64,
}

impl StatusLink<'_> {
    fn send(&self, st: &StatusRepr) {
        let b = st.to_bytes();
        if self.rx.socket().send(&b).is_ok() {
            self.bytes_sent.fetch_add(b.len() as u64, Ordering::Relaxed);
        }
    }

    /// Sends the next stop Status PDU carrying `action`.
    pub fn send_stop(&mut self, action: TestAction, rt: TimeNs) {
        self.status_seq += 1;
        let st = pdu::stop_status(self.status_seq, action, rt, self.mode);
        self.send(&st);
    }

    /// Sends the trial's Status PDU when the receiver has one (after its
    /// first load), with the row `row` picks from the report; returns the
    /// report and the PDU's status_seq.
    pub fn send_report(
        &mut self,
        rt: TimeNs,
        row: impl FnOnce(&StatusReport) -> WireRate,
    ) -> Option<(StatusReport, u32)> {
        let report = self.recv.on_status_due(rt)?;
        let row = row(&report);
        self.status_seq += 1;
        let st = pdu::status_pdu(&StatusFields {
            report: &report,
            status_seq: self.status_seq,
            action: TestAction::Testing,
            rx_stopped: self.recv.rx_stopped(rt),
            row,
            sent_at: rt,
            auth_mode: self.mode,
        });
        self.send(&st);
        Some((report, self.status_seq))
    }
}

/// The test socket as a load receiver: kernel receive stamps, and a 1 ms
/// receive timeout so the status timer keeps its beat.
pub(crate) fn open(sock: UdpSocket) -> TimestampingReceiver {
    let rx = TimestampingReceiver::new(sock);
    let _ = rx.socket().set_read_timeout(Some(Duration::from_millis(1)));
    rx
}

/// Receives the load of the test `ta` activated at `activated`
/// (CLOCK_MONOTONIC) until `role` ends it, sending a Status PDU every trial
/// interval; `rx` comes from [`open`].
pub(crate) fn receive_load<R: LoadRxRole>(
    rx: TimestampingReceiver,
    ta: &ActivationRepr,
    activated: TimeNs,
    mode: AuthMode,
    bytes_sent: &AtomicU64,
    role: &mut R,
) -> R::Out {
    let trial = DurationNs::from_ms(i64::from(ta.trial_interval_ms.max(1)));
    let rcfg = ReceiverConfig {
        trial_interval: trial,
        sub_interval: DurationNs::from_ms(i64::from(ta.sub_interval_ms.max(1))),
        ecn: false,
    };
    let mut link = StatusLink {
        rx,
        recv: LoadReceiver::new(rcfg, clock::realtime()),
        status_seq: 0,
        mode,
        bytes_sent,
    };
    let mut next_status = activated + trial;
    let mut buf = [0u8; 256];
    loop {
        let now = clock::monotonic();
        if let Some(o) = role.pass(now, &mut link) {
            return o;
        }
        if role.status_timer_running() && now >= next_status {
            next_status = next_status + trial;
            if next_status <= now {
                next_status = now + trial;
            }
            let rt = clock::realtime();
            if let Some(o) = role.status_due(now, rt, &mut link) {
                return o;
            }
        }
        let r = match link.rx.recv(&mut buf) {
            Ok(r) => r,
            Err(e) => match role.recv_error(&e) {
                Some(o) => return o,
                None => continue,
            },
        };
        let d = &buf[..r.len.min(buf.len())];
        let Ok(l) = LoadRepr::decode(d) else {
            role.not_load(d, r.len);
            continue;
        };
        match role.load(&l, r.len) {
            Take::Feed => {}
            Take::Skip => continue,
            Take::Return(o) => return o,
        }
        link.recv.on_load(&LoadArrival {
            seq: l.seq,
            payload_len: Bytes::new(u64::from(l.payload_len)),
            sent_at: pdu::from_timestamp(l.send_time),
            received_at: r.at,
            echo: (l.echo_time != Timestamp::default()).then(|| pdu::from_timestamp(l.echo_time)),
            resp_delay: DurationNs::from_ms(i64::from(l.resp_delay_ms)),
            ecn: Ecn::NotEct,
        });
        role.fed(&l);
    }
}
