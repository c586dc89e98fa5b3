//! TCP Reno at packet level, greedy senders across the whole path.
//!
//! Sender (RFC 5681 Reno, as ns-2's `Agent/TCP/Reno`): slow start (+1
//! segment per ACK), congestion avoidance (+1/cwnd per ACK), fast
//! retransmit on the third duplicate ACK, fast recovery (cwnd = ssthresh + 3,
//! +1 per further duplicate, deflated to ssthresh by the first new ACK —
//! Reno, not NewReno: a second loss in the window usually ends in a
//! timeout), and a retransmission timer (RFC 6298 estimator with Karn's rule,
//! 200 ms floor, 1 s initial, doubling back-off; go-back-N on expiry).
//! Receiver: cumulative ACKs, out-of-order segments kept, an ACK for every
//! second in-order segment or after 40 ms (delayed ACK), an immediate ACK
//! for anything out of order or filling a hole.
//!
//! Data segments are MTU-sized IP packets; ACKs are 40-byte packets that
//! return over the reverse links and through the sender's coalescing NIC,
//! so a coalescing NIC turns ACK clocking into bursts (ICIM paper III.A).
//! Sequence numbers count segments.  A connection with ICIM passes its
//! segments through the ICIM gate (`icim.rs`) below TCP; retransmissions
//! bypass it.

use super::queue::Ev;
use super::{Kind, Packet, Sim};
use crate::icim::Icim;
use crate::scenario::IcimConfig;
use crate::time::{Ps, PS_PER_MS};
use std::collections::VecDeque;

const ACK_SIZE: u32 = 40;
const MIN_RTO: Ps = Ps::from_ms(200);
const INITIAL_RTO: Ps = Ps::S;
const MAX_RTO: Ps = Ps::from_secs(60);
const DELACK: Ps = Ps::from_ms(40);

#[derive(Debug)]
pub(crate) struct TcpConn {
    started: bool,
    /// The receiver's advertised window (ns-2's `window_`), segments.
    rwnd: u64,
    /// One past the highest segment ever sent: only segments beyond it are
    /// timed (Karn's rule: never time a retransmission).
    max_sent: u64,
    // Sender.
    pub(crate) cwnd: f64,
    ssthresh: f64,
    pub(crate) snd_una: u64,
    snd_nxt: u64,
    dupacks: u32,
    recovery: bool,
    pub(crate) srtt: Ps,
    rttvar: Ps,
    rto: Ps,
    backoff: u32,
    /// Retransmission deadline (`None`: disarmed).  One pending event per
    /// connection at most: re-arming moves the deadline, and the event
    /// re-schedules itself if it fires early, so the heap never fills with
    /// stale timers.
    rto_at: Option<Ps>,
    rto_pending: bool,
    timed: Option<(u64, Ps)>,
    pub(crate) retransmits: u64,
    pub(crate) timeouts: u64,
    // Receiver.
    rcv_nxt: u64,
    ooo: Vec<u64>,
    unacked: u32,
    delack_at: Ps,
    delack_pending: bool,
    // ICIM.
    pub(crate) icim: Option<Box<Icim>>,
    pub(crate) gate: VecDeque<u64>,
    touched: bool,
}

/// What a connection achieved, for reports.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct TcpStats {
    pub icim: bool,
    /// Segments cumulatively acknowledged.
    pub acked_segments: u64,
    pub retransmits: u64,
    pub timeouts: u64,
    pub cwnd: f64,
    pub srtt_ms: f64,
}

impl TcpConn {
    pub(crate) fn new(
        icim: Option<IcimConfig>,
        mss: u32,
        rwnd: u32,
        ssthresh: u32,
        line_bps: f64,
    ) -> TcpConn {
        TcpConn {
            started: false,
            rwnd: u64::from(rwnd.max(1)),
            max_sent: 0,
            cwnd: 2.0,
            ssthresh: f64::from(ssthresh),
            snd_una: 0,
            snd_nxt: 0,
            dupacks: 0,
            recovery: false,
            srtt: Ps::ZERO,
            rttvar: Ps::ZERO,
            rto: INITIAL_RTO,
            backoff: 0,
            rto_at: None,
            rto_pending: false,
            timed: None,
            retransmits: 0,
            timeouts: 0,
            rcv_nxt: 0,
            ooo: Vec::new(),
            unacked: 0,
            delack_at: Ps::ZERO,
            delack_pending: false,
            icim: icim.map(|c| Box::new(Icim::new(c, mss, line_bps))),
            gate: VecDeque::new(),
            touched: false,
        }
    }

    fn flight(&self) -> u64 {
        self.snd_nxt - self.snd_una
    }
}

impl Sim {
    fn data_packet(&self, conn: usize, seq: u64) -> Packet {
        Packet {
            seq,
            size: self.mss,
            hop: 0,
            exit: self.n as u16,
            conn: conn as u16,
            kind: Kind::Data,
            fwd: true,
            cross: false,
        }
    }

    pub(crate) fn tcp_start(&mut self, c: usize) {
        self.tcp[c].started = true;
        self.tcp_send_more(c);
        self.flush_gates();
    }

    /// Sends what the window allows.
    fn tcp_send_more(&mut self, c: usize) {
        let now = self.now;
        loop {
            let t = &mut self.tcp[c];
            let win = (t.cwnd.floor() as u64).clamp(1, t.rwnd);
            if t.snd_nxt >= t.snd_una + win {
                break;
            }
            let seq = t.snd_nxt;
            t.snd_nxt += 1;
            if t.timed.is_none() && seq >= t.max_sent {
                t.timed = Some((seq, now));
            }
            t.max_sent = t.max_sent.max(seq + 1);
            let steady = t.cwnd >= t.ssthresh || t.cwnd >= t.rwnd as f64;
            let (cwnd, srtt) = (t.cwnd, t.srtt);
            let gated = !t.gate.is_empty()
                || t.icim
                    .as_mut()
                    .is_some_and(|i| i.wants_gate(now, cwnd, srtt, steady));
            if gated {
                t.gate.push_back(seq);
                if !t.touched {
                    t.touched = true;
                    self.touched.push(c as u16);
                }
            } else {
                let p = self.data_packet(c, seq);
                self.host_send(false, p);
            }
        }
        if self.tcp[c].flight() > 0 && self.tcp[c].rto_at.is_none() {
            self.arm_rto(c);
        }
    }

    fn arm_rto(&mut self, c: usize) {
        let t = &mut self.tcp[c];
        let d = (t.rto << t.backoff.min(8)).min(MAX_RTO);
        let at = self.now + d;
        t.rto_at = Some(at);
        if !t.rto_pending {
            t.rto_pending = true;
            self.q.push(at, Ev::TcpRto { conn: c as u16 });
        }
    }

    fn cancel_rto(&mut self, c: usize) {
        self.tcp[c].rto_at = None;
    }

    fn retransmit(&mut self, c: usize, seq: u64) {
        self.tcp[c].retransmits += 1;
        let p = self.data_packet(c, seq);
        self.host_send(false, p);
    }

    pub(crate) fn tcp_rto(&mut self, c: usize) {
        let now = self.now;
        let t = &mut self.tcp[c];
        t.rto_pending = false;
        match t.rto_at {
            None => return,
            Some(at) if at > now => {
                t.rto_pending = true;
                self.q.push(at, Ev::TcpRto { conn: c as u16 });
                return;
            }
            Some(_) => t.rto_at = None,
        }
        if t.flight() == 0 {
            return;
        }
        t.timeouts += 1;
        t.ssthresh = (t.flight() as f64 / 2.0).max(2.0);
        t.cwnd = 1.0;
        t.recovery = false;
        t.dupacks = 0;
        t.backoff += 1;
        t.timed = None;
        // Go back N: everything from snd_una is sent again as the window opens.
        t.snd_nxt = t.snd_una + 1;
        let una = t.snd_una;
        t.gate.clear();
        if let Some(i) = t.icim.as_mut() {
            i.abort();
        }
        self.retransmit(c, una);
        self.arm_rto(c);
    }

    pub(crate) fn tcp_ack(&mut self, c: usize, ack: u64) {
        let now = self.now;
        let t = &mut self.tcp[c];
        if let Some(i) = t.icim.as_mut() {
            i.on_ack(now, ack);
        }
        if ack > t.snd_una {
            let newly = ack - t.snd_una;
            if let Some((seq, sent)) = t.timed {
                if ack > seq {
                    let r = now - sent;
                    if t.srtt.is_zero() {
                        t.srtt = r;
                        t.rttvar = r / 2;
                    } else {
                        let err = t.srtt.abs_diff(r);
                        t.rttvar = (3 * t.rttvar + err) / 4;
                        t.srtt = (7 * t.srtt + r) / 8;
                    }
                    t.rto = (t.srtt + 4 * t.rttvar).max(MIN_RTO);
                    t.timed = None;
                }
            }
            t.snd_una = ack;
            if t.snd_nxt < ack {
                t.snd_nxt = ack;
            }
            t.dupacks = 0;
            t.backoff = 0;
            if t.recovery {
                t.cwnd = t.ssthresh;
                t.recovery = false;
            } else if t.cwnd < t.ssthresh {
                t.cwnd += 1.0;
            } else {
                t.cwnd += 1.0 / t.cwnd;
            }
            // The window never grows past what the receiver allows.
            t.cwnd = t.cwnd.min(t.rwnd as f64 + 3.0);
            let _ = newly;
            if let Some(i) = t.icim.as_mut() {
                i.on_progress(now, ack, t.cwnd, t.srtt);
            }
            if t.flight() > 0 {
                self.arm_rto(c);
            } else {
                self.cancel_rto(c);
            }
        } else if ack == t.snd_una && t.flight() > 0 {
            t.dupacks += 1;
            if t.dupacks == 3 && !t.recovery {
                t.ssthresh = (t.flight() as f64 / 2.0).max(2.0);
                t.cwnd = t.ssthresh + 3.0;
                t.recovery = true;
                t.timed = None;
                let una = t.snd_una;
                self.retransmit(c, una);
            } else if t.recovery {
                t.cwnd += 1.0;
            }
        }
        self.tcp_send_more(c);
    }

    pub(crate) fn tcp_data(&mut self, c: usize, seq: u64) {
        let t = &mut self.tcp[c];
        let mut now_ack = false;
        if seq == t.rcv_nxt {
            t.rcv_nxt += 1;
            let had_hole = !t.ooo.is_empty();
            while t.ooo.first() == Some(&t.rcv_nxt) {
                t.ooo.remove(0);
                t.rcv_nxt += 1;
            }
            t.unacked += 1;
            if had_hole || t.unacked >= 2 {
                now_ack = true;
            }
        } else {
            if seq > t.rcv_nxt {
                if let Err(pos) = t.ooo.binary_search(&seq) {
                    t.ooo.insert(pos, seq);
                }
            }
            now_ack = true;
        }
        if now_ack {
            self.send_ack(c);
        } else {
            // The first unacknowledged segment starts the delayed-ACK timer.
            let t = &mut self.tcp[c];
            if t.unacked == 1 {
                t.delack_at = self.now + DELACK;
                if !t.delack_pending {
                    t.delack_pending = true;
                    self.q.push(t.delack_at, Ev::TcpDelAck { conn: c as u16 });
                }
            }
        }
    }

    fn send_ack(&mut self, c: usize) {
        let t = &mut self.tcp[c];
        t.unacked = 0;
        let ack = t.rcv_nxt;
        let p = Packet {
            seq: ack,
            size: ACK_SIZE,
            hop: (self.n - 1) as u16,
            exit: 0,
            conn: c as u16,
            kind: Kind::Ack,
            fwd: false,
            cross: false,
        };
        self.host_send(true, p);
    }

    pub(crate) fn tcp_delack(&mut self, c: usize) {
        let t = &mut self.tcp[c];
        t.delack_pending = false;
        if t.unacked == 0 {
            return;
        }
        if t.delack_at > self.now {
            t.delack_pending = true;
            self.q.push(t.delack_at, Ev::TcpDelAck { conn: c as u16 });
            return;
        }
        self.send_ack(c);
    }

    /// After a NIC interrupt on host `h`: ICIM decides what its connections
    /// release to the IP layer.
    pub(crate) fn after_batch(&mut self, h: usize) {
        if h == 0 {
            self.flush_gates();
        }
    }

    fn flush_gates(&mut self) {
        if self.touched.is_empty() {
            return;
        }
        let touched = std::mem::take(&mut self.touched);
        for &c in &touched {
            let c = c as usize;
            self.tcp[c].touched = false;
            let now = self.now;
            let t = &mut self.tcp[c];
            let release = match t.icim.as_mut() {
                Some(i) => i.flush(now, &t.gate, t.srtt),
                None => t.gate.len(),
            };
            for _ in 0..release {
                let Some(seq) = self.tcp[c].gate.pop_front() else {
                    break;
                };
                let p = self.data_packet(c, seq);
                self.host_send(false, p);
            }
            if !self.tcp[c].gate.is_empty() {
                // Held packets wait for the next interrupt.
                self.tcp[c].touched = true;
                self.touched.push(c as u16);
            }
        }
        let mut touched = touched;
        touched.clear();
        if self.touched.is_empty() {
            self.touched = touched;
        }
    }

    /// Per-connection counters.
    pub fn tcp_stats(&self) -> Vec<TcpStats> {
        self.tcp
            .iter()
            .map(|t| TcpStats {
                icim: t.icim.is_some(),
                acked_segments: t.snd_una,
                retransmits: t.retransmits,
                timeouts: t.timeouts,
                cwnd: t.cwnd,
                srtt_ms: t.srtt.ps() as f64 / PS_PER_MS as f64,
            })
            .collect()
    }
}
