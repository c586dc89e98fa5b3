//! ICIM — interrupt-coalescence-aware inline measurement (Man, Hasegawa &
//! Murata), inside the simulated Reno sender.
//!
//! TCP hands its segments to a gate below it; ICIM decides at each ACK
//! interrupt how many the gate releases.  Because the sender's NIC
//! coalesces, ACKs and therefore data leave in bursts about one interrupt
//! period `S` apart.  A measurement:
//!
//! 1. waits until coalescing is detected (more than 50 % of ACK gaps below
//!    1 µs), cwnd ≥ C_min (50) and the wait of Q RTTs since the last one;
//! 2. holds back one burst, then sends k = 4 bursts of
//!    `N_i = B_i · S / P` packets (eq. 2 with `S_i` estimated as the mean
//!    interval between ACK interrupts, eq. 3), topping them up from the held
//!    packets, `B_i` evenly spaced over the search range (B_l, B_u), and one
//!    more normal burst that closes the last interval;
//! 3. takes as A the first `B_j` whose burst interval grew on the way
//!    (ACK arrival interval > λ · send interval, λ = 1.01), or `B_k` if none
//!    grew; then re-centres the range on it with half-width
//!    `max(1.96 σ / √q, R / 10)` over the stored results, or — when the
//!    result sits on an edge of the range — drops the stored results and
//!    doubles the range towards that edge.
//!
//! The first range is (T, 2T), T being TCP's throughput.  What the paper
//! leaves open and this implementation chose is in `docs/sim.md`.

use crate::scenario::IcimConfig;
use crate::time::{Ps, PS_PER_MS};
use pathsonde_core::methods::search_range::SearchRange;
use pathsonde_core::BitRate;
use std::collections::VecDeque;

/// One ICIM result.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct IcimResult {
    /// When the first measurement burst left.
    pub started: Ps,
    /// When the result was known (the last burst's ACK arrived).
    pub at: Ps,
    /// The available bandwidth ICIM concluded.
    pub value_bps: BitRate,
    /// The search range the measurement probed.
    pub range_bps: (BitRate, BitRate),
    /// Packets in the k measurement bursts.
    pub packets: u32,
    /// Which burst's interval grew first (1-based); `None` if none did.
    pub grew_at: Option<u32>,
    /// TCP's throughput T when the measurement started.
    pub tcp_bps: BitRate,
    /// The rate burst `grew_at` (or, if none grew, the fastest burst)
    /// actually had: its packets over the time to the next burst.
    pub realized_bps: BitRate,
    /// No burst grew and the last one had fewer packets than eq. (2) asked
    /// for (TCP had no more to send): the measurement could not probe its
    /// whole range, so the range was not moved up.
    pub short: bool,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum State {
    Idle,
    /// Holding what TCP sends in this interrupt (the burst before Burst 1).
    Hold,
    Burst(u32),
    Closing,
    Await,
}

#[derive(Debug, Clone, Copy)]
struct Burst {
    t: Ps,
    first_seq: u64,
    n: u32,
    /// Packets eq. (2) asked for.
    want: u32,
    target: f64,
    ack_t: Ps,
}

#[derive(Debug)]
pub struct Icim {
    cfg: IcimConfig,
    /// The sender's line rate: no burst can probe faster, so the search
    /// range never extends past it.
    max_bps: f64,
    packet_bits: f64,
    last_ack: Option<Ps>,
    gaps: u64,
    tiny: u64,
    last_batch: Option<Ps>,
    s_est: f64,
    mark: Option<(Ps, u64)>,
    thr: f64,
    state: State,
    range: Option<(f64, f64)>,
    db: Vec<f64>,
    next_start: Ps,
    bursts: Vec<Burst>,
    pub(crate) results: Vec<IcimResult>,
    pub(crate) aborted: u32,
}

impl Icim {
    pub(crate) fn new(cfg: IcimConfig, mss: u32, max_bps: f64) -> Icim {
        Icim {
            cfg,
            max_bps,
            packet_bits: f64::from(mss) * 8.0,
            last_ack: None,
            gaps: 0,
            tiny: 0,
            last_batch: None,
            s_est: 0.0,
            mark: None,
            thr: 0.0,
            state: State::Idle,
            range: None,
            db: Vec::new(),
            next_start: Ps::ZERO,
            bursts: Vec::with_capacity(8),
            results: Vec::new(),
            aborted: 0,
        }
    }

    /// ICIM's coalescing test on the ACK stream (III.C).
    pub(crate) fn coalescing_detected(&self) -> bool {
        self.gaps >= 20 && self.tiny * 2 > self.gaps
    }

    pub(crate) fn on_ack(&mut self, now: Ps, ack: u64) {
        if let Some(last) = self.last_ack {
            self.gaps += 1;
            if now - last < Ps::US {
                self.tiny += 1;
            } else {
                // A new interrupt: one more burst interval.
                if let Some(b) = self.last_batch {
                    let iv = (now - b).ps() as f64;
                    if iv < 10.0 * PS_PER_MS as f64 {
                        self.s_est = if self.s_est == 0.0 {
                            iv
                        } else {
                            0.875 * self.s_est + 0.125 * iv
                        };
                    }
                }
                self.last_batch = Some(now);
            }
        } else {
            self.last_batch = Some(now);
        }
        self.last_ack = Some(now);
        if self.state == State::Await {
            for b in &mut self.bursts {
                if b.ack_t == Ps::MAX && ack > b.first_seq {
                    b.ack_t = now;
                }
            }
            if self.bursts.iter().all(|b| b.ack_t != Ps::MAX) {
                self.evaluate(now);
            }
        }
    }

    /// TCP's cumulative ACK moved: update the throughput T (per RTT).
    pub(crate) fn on_progress(&mut self, now: Ps, ack: u64, _cwnd: f64, srtt: Ps) {
        match self.mark {
            None => self.mark = Some((now, ack)),
            Some((t0, a0)) => {
                if srtt > Ps::ZERO && now - t0 >= srtt {
                    let bps =
                        (ack - a0) as f64 * self.packet_bits / ((now - t0).ps() as f64 / 1e12);
                    self.thr = if self.thr == 0.0 {
                        bps
                    } else {
                        0.5 * self.thr + 0.5 * bps
                    };
                    self.mark = Some((now, ack));
                }
            }
        }
    }

    /// A timeout or retransmission broke the measurement.
    pub(crate) fn abort(&mut self) {
        if self.state != State::Idle {
            self.aborted += 1;
            self.state = State::Idle;
            self.bursts.clear();
        }
    }

    fn target(&self, i: u32) -> f64 {
        let (lo, hi) = self.range.unwrap_or((self.thr, 2.0 * self.thr));
        let k = f64::from(self.cfg.k);
        lo + (hi - lo) / (k - 1.0) * f64::from(i - 1)
    }

    /// Whether a segment TCP sends now must go through the gate.  Outside a
    /// measurement segments leave at once, interleaved with other flows'
    /// as TCP sends them (a gate flushed only at the end of each interrupt
    /// would put this flow's packets behind every other flow's in a shared
    /// NIC queue, and so first in line for drop-tail losses).  When a
    /// measurement may start, the state becomes `Hold` and the rest of this
    /// interrupt's segments are held.
    pub(crate) fn wants_gate(&mut self, now: Ps, cwnd: f64, srtt: Ps, steady: bool) -> bool {
        match self.state {
            State::Idle => {
                let ready = now >= self.next_start
                    && steady
                    && cwnd >= f64::from(self.cfg.cmin)
                    && self.coalescing_detected()
                    && self.thr > 0.0
                    && self.s_est > 0.0
                    && srtt > Ps::ZERO;
                if ready {
                    if self.range.is_none() {
                        self.range = Some((self.thr, 2.0 * self.thr));
                    }
                    self.bursts.clear();
                    self.state = State::Hold;
                }
                ready
            }
            State::Await => {
                // ACKs lost or reordered: give up after a second.
                if self
                    .bursts
                    .first()
                    .is_some_and(|b| now > b.t + 4 * srtt + Ps::S)
                {
                    self.abort();
                }
                false
            }
            _ => true,
        }
    }

    /// How many of the gated segments to release at the end of an interrupt.
    pub(crate) fn flush(&mut self, now: Ps, gate: &VecDeque<u64>, srtt: Ps) -> usize {
        if gate.is_empty() {
            return 0;
        }
        match self.state {
            State::Idle | State::Await => gate.len(),
            State::Hold => {
                // The held burst tops up the measurement bursts.
                self.state = State::Burst(1);
                0
            }
            State::Burst(i) => {
                let target = self.target(i);
                // At least two packets: the receiver acknowledges every second
                // segment, so a one-packet burst's ACK would wait for the next burst.
                let want = (target * self.s_est / 1e12 / self.packet_bits)
                    .round()
                    .max(2.0) as usize;
                let n = want.min(gate.len());
                self.bursts.push(Burst {
                    t: now,
                    first_seq: gate[0],
                    n: n as u32,
                    want: want as u32,
                    target,
                    ack_t: Ps::MAX,
                });
                self.state = if i >= self.cfg.k {
                    State::Closing
                } else {
                    State::Burst(i + 1)
                };
                n
            }
            State::Closing => {
                self.bursts.push(Burst {
                    t: now,
                    first_seq: gate[0],
                    n: gate.len() as u32,
                    want: 0,
                    target: 0.0,
                    ack_t: Ps::MAX,
                });
                self.state = State::Await;
                let wait = Ps::from_ps((self.cfg.q_rtts * srtt.ps() as f64) as u64);
                self.next_start = self.bursts[0].t + wait;
                gate.len()
            }
        }
    }

    fn evaluate(&mut self, now: Ps) {
        let k = self.cfg.k as usize;
        let mut grew = None;
        for i in 0..k {
            let (a, b) = (self.bursts[i], self.bursts[i + 1]);
            let sent = b.t.saturating_sub(a.t).ps() as f64;
            let arrived = b.ack_t.saturating_sub(a.ack_t).ps() as f64;
            if arrived > self.cfg.lambda * sent {
                grew = Some(i as u32 + 1);
                break;
            }
        }
        let (lo, hi) = self.range.unwrap_or((self.thr, 2.0 * self.thr));
        let value = match grew {
            Some(j) => self.bursts[j as usize - 1].target,
            None => self.bursts[k - 1].target,
        };
        let packets = self.bursts[..k].iter().map(|b| b.n).sum();
        let realized = |i: usize| {
            let s = self.bursts[i + 1].t.saturating_sub(self.bursts[i].t).ps() as f64 / 1e12;
            if s > 0.0 {
                f64::from(self.bursts[i].n) * self.packet_bits / s
            } else {
                0.0
            }
        };
        let realized_bps = match grew {
            Some(j) => realized(j as usize - 1),
            None => (0..k).map(realized).fold(0.0, f64::max),
        };
        let short = grew.is_none() && self.bursts[k - 1].n < self.bursts[k - 1].want;
        self.results.push(IcimResult {
            started: self.bursts[0].t,
            at: now,
            value_bps: BitRate::from_bps(value),
            range_bps: (BitRate::from_bps(lo), BitRate::from_bps(hi)),
            packets,
            grew_at: grew,
            tcp_bps: BitRate::from_bps(self.thr),
            realized_bps: BitRate::from_bps(realized_bps),
            short,
        });
        // The range moves by core's rule, shared with the burst method; ICIM
        // passes the population's σ and leaves the top unbounded.
        let floor = BitRate::from_bps(0.01 * hi.max(1e6));
        let range = SearchRange::new(BitRate::from_bps(lo), BitRate::from_bps(hi));
        let next = match grew {
            Some(1) => {
                self.db.clear();
                range.widened_down(floor)
            }
            None if short => range,
            None => {
                self.db.clear();
                SearchRange {
                    low: BitRate::from_bps(lo.min(self.max_bps / 2.0)),
                    ..range.widened_up(BitRate::from_bps(self.max_bps))
                }
            }
            Some(_) => {
                self.db.push(value);
                let q = self.db.len() as f64;
                let mean = self.db.iter().sum::<f64>() / q;
                let sd = (self.db.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / q).sqrt();
                SearchRange::centred(BitRate::from_bps(value), sd, self.db.len(), floor, None)
            }
        };
        self.range = Some((next.low.bps(), next.high.bps()));
        self.state = State::Idle;
        self.bursts.clear();
    }
}
