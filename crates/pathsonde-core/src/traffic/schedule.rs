//! Packet schedules: the generators behind [`Schedule`].
//!
//! Every generator but the Web one works in *budget* (virtual) time: the
//! position of a packet is the number of bits the model's rate has allowed
//! since time zero, and a [`Warp`] turns bits into nanoseconds through the
//! rate profile.  A constant rate is one segment; `steps` are several.  So a
//! step changes the rate of every model in the same, exact way (a Poisson
//! process warped this way is the inhomogeneous Poisson process of the
//! stepped rate), and the bytes offered up to `t` never stray from the
//! budget by more than a packet.
//!
//! The Web generator runs one on/off source per flow and merges them by time.

use super::tables::{ByteShareSampler, Deck, ParetoObjects};
use super::{RateStep, ScheduledPacket, MIN_PACKET};
use crate::rng::SplitMix64;
use crate::units::{BitRate, Bytes, DurationNs};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// A piecewise-constant rate profile and the inverse of its cumulative bits.
#[derive(Debug, Clone)]
pub(crate) struct Warp {
    segs: Vec<Seg>,
}

#[derive(Debug, Clone, Copy)]
struct Seg {
    /// Start of the segment, ns.
    t0: f64,
    /// Bits allowed before `t0`.
    v0: f64,
    /// Rate in bits per ns (0 for a silent segment).
    rate: f64,
}

/// A rate in bits/ns, with anything that cannot be sent at (negative, NaN,
/// infinite) taken as silence.
fn bits_per_ns(r: BitRate) -> f64 {
    if r.is_positive() {
        r.bps() / 1e9
    } else {
        0.0
    }
}

impl Warp {
    pub(crate) fn constant(rate: BitRate) -> Self {
        Warp {
            segs: vec![Seg {
                t0: 0.0,
                v0: 0.0,
                rate: bits_per_ns(rate),
            }],
        }
    }

    /// The profile of `steps` (sorted by time): silent before the first
    /// step, then each step's rate until the next.
    pub(crate) fn steps(steps: &[RateStep]) -> Self {
        let mut segs = vec![Seg {
            t0: 0.0,
            v0: 0.0,
            rate: 0.0,
        }];
        for s in steps {
            let t = s.at.ns().max(0) as f64;
            let last = *segs.last().expect("never empty");
            if t <= last.t0 {
                // A step at (or, unsorted, before) the current start
                // replaces its rate.
                segs.last_mut().expect("never empty").rate = bits_per_ns(s.rate);
                continue;
            }
            segs.push(Seg {
                t0: t,
                v0: last.v0 + last.rate * (t - last.t0),
                rate: bits_per_ns(s.rate),
            });
        }
        Warp { segs }
    }

    /// The first instant (ns) by which `v` bits have been allowed, or `None`
    /// if the profile never allows that many (it ends silent).
    ///
    /// A silent segment is skipped: a packet due at its start waits for the
    /// rate to come back, so nothing is ever sent at zero rate.
    pub(crate) fn time_of(&self, v: f64) -> Option<f64> {
        let i = self.segs.partition_point(|s| s.v0 <= v).max(1) - 1;
        let s = self.segs[i];
        if s.rate <= 0.0 {
            return None;
        }
        Some(s.t0 + (v - s.v0).max(0.0) / s.rate)
    }

    /// The rate (bits/ns) of the last segment: the long-run rate.
    fn final_rate(&self) -> f64 {
        self.segs.last().map_or(0.0, |s| s.rate)
    }
}

#[inline]
fn to_ns(t: f64) -> DurationNs {
    DurationNs::from_ns(round_ns(t))
}

/// `t.round() as i64`, without the call to the software `round` that
/// baseline x86-64 (no SSE4.1) compiles `f64::round` to: one packet in
/// three spent more on that call than on its exponential gap.
///
/// Exact: below 2^52 the fractional part `t - trunc(t)` is computed
/// without rounding error, so comparing it with ½ is exactly
/// round-half-away-from-zero; at and above 2^52 every double is already a
/// whole number.  `as` saturates, as `round() as i64` does; NaN gives 0.
#[inline]
fn round_ns(t: f64) -> i64 {
    const EXACT: f64 = 4_503_599_627_370_496.0; // 2^52
    if t.is_nan() || t.abs() >= EXACT {
        return t as i64;
    }
    let i = t as i64;
    let frac = t - i as f64;
    if frac >= 0.5 {
        i + 1
    } else if frac <= -0.5 {
        i - 1
    } else {
        i
    }
}

/// How a rate-proportional model places packets in budget time.
#[derive(Debug, Clone)]
pub(crate) enum Placement {
    /// Packet `k` at budget `k · size`: exactly even gaps.
    Cbr { size: u64 },
    /// Exponential budget gaps of mean `size`: a Poisson process.
    Poisson { size: u64 },
    /// Sizes from a shuffled deck, each packet at the budget its
    /// predecessors used up ("byte-paced").
    Deck(Deck),
    /// Sizes drawn i.i.d. by byte share, byte-paced.
    Shares(ByteShareSampler),
}

#[derive(Debug, Clone)]
struct Proportional {
    warp: Warp,
    rng: SplitMix64,
    placement: Placement,
    flows: u64,
    /// Packets emitted so far.
    k: u64,
    /// Budget used so far (Poisson: position of the previous packet), bits.
    used: f64,
}

impl Proportional {
    fn next(&mut self) -> Option<ScheduledPacket> {
        let (v, size, flow) = match &mut self.placement {
            Placement::Cbr { size } => {
                // From k, not by accumulation: no drift over long runs.
                let v = self.k as f64 * (*size * 8) as f64;
                (v, *size, self.k % self.flows)
            }
            Placement::Poisson { size } => {
                self.used += self.rng.exponential((*size * 8) as f64);
                // Independent Poisson flows of rate r/n superpose to one of
                // rate r whose packets belong to a uniformly random flow.
                (self.used, *size, self.rng.below(self.flows))
            }
            Placement::Deck(deck) => {
                let size = deck.draw(&mut self.rng);
                let v = self.used;
                self.used += (size * 8) as f64;
                (v, size, self.k % self.flows)
            }
            Placement::Shares(table) => {
                let size = table.draw(&mut self.rng);
                let v = self.used;
                self.used += (size * 8) as f64;
                (v, size, self.k % self.flows)
            }
        };
        let t = self.warp.time_of(v)?;
        self.k += 1;
        Some(ScheduledPacket {
            at: to_ns(t),
            size: Bytes(size),
            flow: flow as u32,
        })
    }
}

/// The parameters of the Web on/off model, resolved for generation.
#[derive(Debug, Clone)]
pub(crate) struct WebParams {
    pub objects: ParetoObjects,
    pub objects_per_page: u32,
    pub sources: u32,
    /// Peak (ON) rate of one source, bits/ns.
    pub peak: f64,
    pub mtu: u64,
}

impl WebParams {
    /// IP bytes an object of `size` bytes becomes once cut into datagrams
    /// of at most the MTU (a short last datagram is padded to the minimum).
    fn packetised(&self, size: u64) -> u64 {
        let full = size / self.mtu * self.mtu;
        let rem = size % self.mtu;
        full + if rem > 0 { rem.max(MIN_PACKET) } else { 0 }
    }
}

/// One Web source: a sequence of page cycles.
///
/// Cycle `k` holds page `k` (its objects back to back at the peak rate) and
/// lasts, in budget time, exactly the bits of the page times the number of
/// sources: each source is owed `rate / sources`.  The page starts at a
/// uniformly random point of its cycle, so the bytes a source has sent by
/// any time equal its budget in expectation from time zero on, with no
/// warm-up; the off time between two pages is whatever the two cycles leave.
#[derive(Debug, Clone)]
struct Source {
    rng: SplitMix64,
    objects: Vec<u64>,
    object: usize,
    /// Bytes of the current object still to send.
    left: u64,
    /// The packet this source sends next: time (ns) and size.
    next_at: f64,
    next_size: u64,
    /// Budget position of the current cycle's start, bits.
    cycle_v: f64,
    /// Budget length of the current cycle, bits.
    cycle_len: f64,
}

impl Source {
    /// Draws a page into `objects` and returns the length of its cycle.
    fn draw_page(&mut self, p: &WebParams) -> f64 {
        self.objects.clear();
        let mut bytes = 0;
        for _ in 0..p.objects_per_page {
            let o = p.objects.draw(&mut self.rng).get();
            bytes += p.packetised(o);
            self.objects.push(o);
        }
        self.object = 0;
        self.left = self.objects.first().copied().unwrap_or(0);
        (bytes * 8) as f64 * f64::from(p.sources)
    }

    /// Starts the current page somewhere in its cycle, not before `not_before`.
    fn place_page(&mut self, warp: &Warp, not_before: f64) -> bool {
        let v = self.cycle_v + self.rng.next_f64() * self.cycle_len;
        match warp.time_of(v) {
            Some(t) => {
                self.next_at = t.max(not_before);
                true
            }
            None => false,
        }
    }

    /// Computes the size of the next packet from the current object.
    fn cut(&mut self, mtu: u64) {
        let take = self.left.min(mtu);
        self.left -= take;
        self.next_size = take.max(MIN_PACKET);
    }

    /// Moves past the packet just emitted; false when the source is done.
    fn advance(&mut self, p: &WebParams, warp: &Warp) -> bool {
        let end = self.next_at + (self.next_size * 8) as f64 / p.peak;
        while self.left == 0 {
            self.object += 1;
            if self.object < self.objects.len() {
                self.left = self.objects[self.object];
            } else {
                // Page done: the next cycle follows this one in budget time.
                self.cycle_v += self.cycle_len;
                self.cycle_len = self.draw_page(p);
                if !self.place_page(warp, end) {
                    return false;
                }
                self.cut(p.mtu);
                return true;
            }
        }
        self.next_at = end;
        self.cut(p.mtu);
        true
    }
}

#[derive(Debug, Clone)]
struct Web {
    warp: Warp,
    params: WebParams,
    sources: Vec<Source>,
    /// Next packet time (rounded ns) and source index, earliest first; ties
    /// go to the lower flow so that the merge is deterministic.
    heap: BinaryHeap<Reverse<(i64, u32)>>,
}

impl Web {
    fn new(warp: Warp, params: WebParams, seed: u64) -> Self {
        let mut sources = Vec::with_capacity(params.sources as usize);
        let mut heap = BinaryHeap::with_capacity(params.sources as usize);
        for i in 0..params.sources {
            let mut s = Source {
                rng: SplitMix64::for_stream(seed, u64::from(i)),
                objects: Vec::with_capacity(params.objects_per_page as usize),
                object: 0,
                left: 0,
                next_at: 0.0,
                next_size: 0,
                cycle_v: 0.0,
                cycle_len: 0.0,
            };
            s.cycle_len = s.draw_page(&params);
            if s.place_page(&warp, 0.0) {
                s.cut(params.mtu);
                heap.push(Reverse((to_ns(s.next_at).ns(), i)));
            }
            sources.push(s);
        }
        Web {
            warp,
            params,
            sources,
            heap,
        }
    }

    fn next(&mut self) -> Option<ScheduledPacket> {
        let Reverse((at, i)) = self.heap.pop()?;
        let s = &mut self.sources[i as usize];
        let pkt = ScheduledPacket {
            at: DurationNs::from_ns(at),
            size: Bytes(s.next_size),
            flow: i,
        };
        if s.advance(&self.params, &self.warp) {
            self.heap.push(Reverse((to_ns(s.next_at).ns(), i)));
        }
        Some(pkt)
    }
}

#[derive(Debug, Clone)]
enum Gen {
    Empty,
    Proportional(Box<Proportional>),
    Web(Box<Web>),
}

/// An infinite, deterministic, time-ordered sequence of packets: the
/// aggregate of all the model's flows, from time zero.
///
/// It ends only if the model's rate is zero from some time on (a zero rate,
/// or `steps` whose last rate is zero).  Cloning a schedule forks it: both
/// copies yield the same packets from there on.
#[derive(Debug, Clone)]
pub struct Schedule {
    gen: Gen,
    peeked: Option<ScheduledPacket>,
}

impl Schedule {
    pub(crate) fn empty() -> Self {
        Schedule {
            gen: Gen::Empty,
            peeked: None,
        }
    }

    pub(crate) fn proportional(warp: Warp, placement: Placement, flows: u32, seed: u64) -> Self {
        if warp.segs.iter().all(|s| s.rate <= 0.0) {
            return Schedule::empty();
        }
        Schedule {
            gen: Gen::Proportional(Box::new(Proportional {
                warp,
                rng: SplitMix64::for_stream(seed, 0),
                placement,
                flows: u64::from(flows.max(1)),
                k: 0,
                used: 0.0,
            })),
            peeked: None,
        }
    }

    pub(crate) fn web(warp: Warp, params: WebParams, seed: u64) -> Self {
        if warp.segs.iter().all(|s| s.rate <= 0.0) || params.sources == 0 {
            return Schedule::empty();
        }
        Schedule {
            gen: Gen::Web(Box::new(Web::new(warp, params, seed))),
            peeked: None,
        }
    }

    /// The next packet, without taking it.
    pub fn peek(&mut self) -> Option<&ScheduledPacket> {
        if self.peeked.is_none() {
            self.peeked = self.generate();
        }
        self.peeked.as_ref()
    }

    /// Moves every packet due before `until` into `out` (appending) and
    /// returns how many.
    ///
    /// The cheap way to replay a schedule: wake up, take everything due up
    /// to now plus a short horizon, send it in one batch (`sendmmsg`), sleep
    /// until the next packet is near.  The per-packet cost is then the
    /// generator's (tens of ns), not a timer's.
    pub fn take_due(&mut self, until: DurationNs, out: &mut Vec<ScheduledPacket>) -> usize {
        let mut n = 0;
        while let Some(p) = self.peek() {
            if p.at >= until {
                break;
            }
            out.extend(self.peeked.take());
            n += 1;
        }
        n
    }

    /// Whether the rate profile ends silent, so the schedule is finite.
    /// (For reporting; iteration simply ends.)
    pub fn is_finite(&self) -> bool {
        match &self.gen {
            Gen::Empty => true,
            Gen::Proportional(p) => p.warp.final_rate() <= 0.0,
            Gen::Web(w) => w.warp.final_rate() <= 0.0,
        }
    }

    fn generate(&mut self) -> Option<ScheduledPacket> {
        let p = match &mut self.gen {
            Gen::Empty => None,
            Gen::Proportional(g) => g.next(),
            Gen::Web(g) => g.next(),
        };
        if p.is_none() {
            self.gen = Gen::Empty;
        }
        p
    }
}

impl Iterator for Schedule {
    type Item = ScheduledPacket;

    fn next(&mut self) -> Option<ScheduledPacket> {
        match self.peeked.take() {
            Some(p) => Some(p),
            None => self.generate(),
        }
    }
}

impl std::iter::FusedIterator for Schedule {}

/// Packets and bytes counted over a window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct Tally {
    pub packets: u64,
    /// IP bytes.
    pub bytes: Bytes,
}

impl Tally {
    /// Bytes with `per_packet` extra framing on each packet: 14 for the
    /// Ethernet header a Linux qdisc counts, 38 for Ethernet on the wire
    /// (header, FCS, preamble and inter-frame gap).
    pub fn bytes_with_overhead(&self, per_packet: Bytes) -> Bytes {
        Bytes(
            self.bytes
                .get()
                .saturating_add(self.packets.saturating_mul(per_packet.get())),
        )
    }

    /// The rate these bytes make over `span`.
    pub fn rate_over(&self, span: DurationNs) -> Option<BitRate> {
        BitRate::from_bytes_per(self.bytes, span)
    }
}

/// Counts the packets sent in `[from, to)` by a time-ordered packet sequence
/// (a [`Schedule`], or a recorded log of what was sent).
///
/// Stops reading at the first packet at or after `to`, so it terminates on
/// an infinite schedule.  This is exact ground truth for what the schedule
/// offered: no rate is assumed.
pub fn offered(
    packets: impl IntoIterator<Item = ScheduledPacket>,
    from: DurationNs,
    to: DurationNs,
) -> Tally {
    let mut t = Tally::default();
    for p in packets {
        if p.at >= to {
            break;
        }
        if p.at >= from {
            t.packets += 1;
            t.bytes += p.size;
        }
    }
    t
}

/// The IP bytes of [`offered`].
pub fn offered_bytes(
    packets: impl IntoIterator<Item = ScheduledPacket>,
    from: DurationNs,
    to: DurationNs,
) -> Bytes {
    offered(packets, from, to).bytes
}

/// The offered rate in consecutive windows `[k·window, (k+1)·window)` up to
/// `until`: a ground-truth time series (the lab samples its qdisc every
/// 100 ms; use the same window to compare).  Empty for a non-positive window.
pub fn offered_series(
    packets: impl IntoIterator<Item = ScheduledPacket>,
    window: DurationNs,
    until: DurationNs,
) -> Vec<BitRate> {
    if window.ns() <= 0 || until.ns() <= 0 {
        return Vec::new();
    }
    let n = ((until.ns() + window.ns() - 1) / window.ns()) as usize;
    let mut bytes = vec![0u64; n];
    for p in packets {
        if p.at >= until {
            break;
        }
        if p.at.ns() >= 0 {
            bytes[(p.at.ns() / window.ns()) as usize] += p.size.get();
        }
    }
    bytes
        .into_iter()
        .map(|b| BitRate::from_bytes_per(Bytes(b), window).unwrap_or(BitRate::ZERO))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_ns_is_round() {
        let cases = [
            0.0,
            -0.0,
            0.5,
            -0.5,
            1.5,
            2.5,
            -2.5,
            0.499_999_999_999_999_94,
            -0.499_999_999_999_999_94,
            4_503_599_627_370_495.5,
            4_503_599_627_370_497.0,
            -4_503_599_627_370_495.5,
            9.3e18,
            -9.3e18,
            1e300,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            123_456_789.499_999,
            123_456_789.5,
        ];
        for t in cases {
            assert_eq!(round_ns(t), t.round() as i64, "{t}");
        }
        let mut rng = SplitMix64::new(7);
        for _ in 0..1_000_000 {
            let t = rng.exponential(1e6) * if rng.below(2) == 0 { 1.0 } else { -1.0 };
            assert_eq!(round_ns(t), t.round() as i64, "{t}");
            let h = (rng.below(1 << 40) as f64) + 0.5;
            assert_eq!(round_ns(h), h.round() as i64, "{h}");
        }
    }

    #[test]
    fn warp_skips_silence_and_ends_when_silent() {
        let w = Warp::steps(&[
            RateStep {
                at: DurationNs::from_secs(1),
                rate: BitRate::from_bps(1e9),
            },
            RateStep {
                at: DurationNs::from_secs(2),
                rate: BitRate::ZERO,
            },
            RateStep {
                at: DurationNs::from_secs(3),
                rate: BitRate::from_bps(2e9),
            },
            RateStep {
                at: DurationNs::from_secs(4),
                rate: BitRate::ZERO,
            },
        ]);
        // Nothing before 1 s; 1 Gbit by 2 s; the silent second is skipped.
        assert_eq!(w.time_of(0.0), Some(1e9));
        assert_eq!(w.time_of(0.5e9), Some(1.5e9));
        assert_eq!(w.time_of(1e9), Some(3e9));
        assert_eq!(w.time_of(2e9), Some(3.5e9));
        assert_eq!(w.time_of(3e9), None);
    }
}
