//! Rates from timestamps: how fast a train left and how fast it arrived.
//!
//! A train-based method needs two numbers per train, the rate the sender
//! achieved and the rate at which the train arrived, and both must survive what
//! real hosts do to timestamps:
//!
//! * **clocks with unknown offsets** — every rate here is a slope of time
//!   against bytes *within one side*, so an offset between the send and receive
//!   clocks never enters;
//! * **coarse clocks and receivers that bunch arrivals** (interrupt coalescing
//!   releases a batch of packets at one instant, all with nearly the same stamp)
//!   — rates are least-squares slopes over every car of the train rather than
//!   first-to-last differences, so a stamp that is late by up to one coalescing
//!   interval moves the slope by about `interval / (span · √cars)` instead of
//!   `interval / span`;
//! * **loss, reordering and duplicates** — cars are summarised by the bytes that
//!   actually arrived, records are de-duplicated by sequence number, and
//!   nothing assumes arrivals come in order.
//!
//! Nothing here panics on any input: empty, one-packet, all-lost or nonsense
//! observations give `None` or empty results.

use crate::estimate::Coalescing;
use crate::observation::{Observation, PacketRecord};
use crate::stats;
use crate::units::{BitRate, Bytes, DurationNs, TimeNs};
use std::collections::BTreeMap;

/// One car of an observed train, summarised from its packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CarStamps {
    /// The car's index in the train.
    pub car: u32,
    pub packets_sent: u32,
    pub bytes_sent: Bytes,
    /// The car's first send stamp: when the sender started it.
    pub first_sent: TimeNs,
    pub last_sent: TimeNs,
    pub packets_received: u32,
    pub bytes_received: Bytes,
    pub first_received: Option<TimeNs>,
    /// When the car had fully arrived (its last received packet).
    pub last_received: Option<TimeNs>,
}

/// A rate measured as a least-squares slope over a train.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateFit {
    pub rate: BitRate,
    /// Relative standard error of the rate from the fit's residuals (0 when
    /// the points lie exactly on a line or there are only two of them).
    pub rel_se: f64,
    /// Points the slope was fitted through (cars, or packets for a one-car train).
    pub points: usize,
    /// Time between the first and last point used.
    pub span: DurationNs,
}

/// How much a train's arrival stamps are bunched together.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bunching {
    /// Gaps between consecutive arrival stamps (in arrival order).
    pub gaps: usize,
    /// Gaps no longer than the `tiny` threshold given to [`bunching`].
    pub tiny_gaps: usize,
}

impl Bunching {
    /// Fraction of gaps that are tiny (0 when there are no gaps).
    pub fn fraction(&self) -> f64 {
        if self.gaps == 0 {
            0.0
        } else {
            self.tiny_gaps as f64 / self.gaps as f64
        }
    }
    /// The ICIM rule (man-hasegawa-murata, III.C): arrivals are bunched when
    /// more than half of the gaps are tiny.  Needs at least 4 gaps to say so.
    pub(crate) fn is_bunched(&self) -> bool {
        self.gaps >= 4 && self.fraction() > 0.5
    }
}

/// The packet records of `obs` with duplicates removed: one record per
/// sequence number, preferring a record that arrived, and among those the
/// earliest arrival.
pub(crate) fn unique_packets(obs: &Observation) -> Vec<PacketRecord> {
    let mut by_seq: BTreeMap<u32, PacketRecord> = BTreeMap::new();
    for p in &obs.packets {
        by_seq
            .entry(p.seq)
            .and_modify(|kept| {
                let better = match (kept.received, p.received) {
                    (None, Some(_)) => true,
                    (Some(a), Some(b)) => b < a,
                    _ => false,
                };
                if better {
                    *kept = *p;
                }
            })
            .or_insert(*p);
    }
    by_seq.into_values().collect()
}

/// Per-car summaries of a train, in car order, from de-duplicated records.
pub fn cars(obs: &Observation) -> Vec<CarStamps> {
    let mut by_car: BTreeMap<u32, CarStamps> = BTreeMap::new();
    for p in unique_packets(obs) {
        let c = by_car.entry(p.car).or_insert(CarStamps {
            car: p.car,
            packets_sent: 0,
            bytes_sent: Bytes::ZERO,
            first_sent: p.sent,
            last_sent: p.sent,
            packets_received: 0,
            bytes_received: Bytes::ZERO,
            first_received: None,
            last_received: None,
        });
        c.packets_sent = c.packets_sent.saturating_add(1);
        c.bytes_sent += p.size;
        c.first_sent = c.first_sent.min(p.sent);
        c.last_sent = c.last_sent.max(p.sent);
        if let Some(r) = p.received {
            c.packets_received = c.packets_received.saturating_add(1);
            c.bytes_received += p.size;
            c.first_received = Some(c.first_received.map_or(r, |f| f.min(r)));
            c.last_received = Some(c.last_received.map_or(r, |l| l.max(r)));
        }
    }
    by_car.into_values().collect()
}

/// Nanoseconds from `origin` to `t` as `f64`, exact for any pair of `i64` stamps.
fn rel_ns(t: TimeNs, origin: TimeNs) -> f64 {
    (i128::from(t.ns()) - i128::from(origin.ns())) as f64
}

/// Fits time (ns) against cumulative bytes and turns the slope into a rate.
///
/// Time is the dependent variable on purpose: byte counts are exact while
/// stamps carry the clock's and the receiver's errors, and least squares
/// assumes the error is in `y`.  One pass of outlier trimming drops points
/// whose residual exceeds both six robust standard deviations and the given
/// `floor` (a single stamp delayed by a scheduler hiccup should not tilt a
/// whole train), as long as that removes at most a fifth of the points.
fn rate_from_points(points: &[(f64, f64)], floor_ns: f64) -> Option<RateFit> {
    let fit = stats::linear_fit(points)?;
    let mut fit = fit;
    let mut used: Vec<(f64, f64)> = points.to_vec();
    if points.len() >= 8 {
        let residuals: Vec<f64> = points
            .iter()
            .map(|&(x, y)| (y - fit.predict(x)).abs())
            .collect();
        let mad = stats::median(&residuals).unwrap_or(0.0);
        let limit = (6.0 * 1.4826 * mad).max(floor_ns.max(1.0));
        let kept: Vec<(f64, f64)> = points
            .iter()
            .zip(&residuals)
            .filter(|(_, r)| **r <= limit)
            .map(|(p, _)| *p)
            .collect();
        if kept.len() < points.len() && kept.len() * 5 >= points.len() * 4 {
            if let Some(f) = stats::linear_fit(&kept) {
                fit = f;
                used = kept;
            }
        }
    }
    let ns_per_byte = fit.slope;
    if ns_per_byte <= 0.0 || !ns_per_byte.is_finite() {
        return None;
    }
    let bps = 8e9 / ns_per_byte;
    if !bps.is_finite() || bps <= 0.0 {
        return None;
    }
    let t_min = used.iter().map(|p| p.1).fold(f64::INFINITY, f64::min);
    let t_max = used.iter().map(|p| p.1).fold(f64::NEG_INFINITY, f64::max);
    Some(RateFit {
        rate: BitRate::from_bps(bps),
        rel_se: (fit.slope_se / ns_per_byte).abs(),
        points: used.len(),
        span: DurationNs::from_secs_f64((t_max - t_min) / 1e9),
    })
}

/// Packet-level fallback for a train with a single car: the time each packet
/// left (or arrived, in time order) against the bytes before it.
fn packet_level(stamps: &mut [(TimeNs, Bytes)], floor_ns: f64) -> Option<RateFit> {
    stamps.sort_by_key(|s| s.0);
    let origin = stamps.first()?.0;
    let mut cum = 0.0;
    let mut pts = Vec::with_capacity(stamps.len());
    for (t, size) in stamps.iter() {
        // A packet's stamp marks the end of the bytes before it, so the first
        // packet sits at 0 and its own size counts towards the next point.
        pts.push((cum, rel_ns(*t, origin)));
        cum += size.get() as f64;
    }
    rate_from_points(&pts, floor_ns)
}

/// The rate the sender achieved, from its own stamps.
///
/// Each car's start (its first send stamp) against the bytes sent in the cars
/// before it: the slope is the car spacing the sender really held, which is
/// what the queue at the tight link saw.  A one-car train falls back to the
/// packets within it.
pub fn sending_rate(obs: &Observation) -> Option<RateFit> {
    let floor = obs.send_clock.resolution.ns().max(0).saturating_mul(4) as f64;
    let cs = cars(obs);
    if cs.len() >= 2 {
        let origin = cs[0].first_sent;
        let mut cum = 0.0;
        let mut pts = Vec::with_capacity(cs.len());
        for c in &cs {
            pts.push((cum, rel_ns(c.first_sent, origin)));
            cum += c.bytes_sent.get() as f64;
        }
        return rate_from_points(&pts, floor);
    }
    let mut stamps: Vec<(TimeNs, Bytes)> = unique_packets(obs)
        .iter()
        .map(|p| (p.sent, p.size))
        .collect();
    packet_level(&mut stamps, floor)
}

/// The rate at which the train arrived, from the receiver's stamps.
///
/// Each car's completion (its last arrival) against the bytes received in it
/// and all earlier cars.  Cars with nothing received drop out; lost bytes are
/// simply not counted, so the result is the rate the probe's surviving bytes
/// were delivered at.  A train whose arrivals span a single car falls back to
/// the packets within it.
pub fn receiving_rate(obs: &Observation) -> Option<RateFit> {
    let floor = obs.recv_clock.resolution.ns().max(0).saturating_mul(4) as f64;
    let cs: Vec<CarStamps> = cars(obs)
        .into_iter()
        .filter(|c| c.last_received.is_some())
        .collect();
    if cs.len() >= 2 {
        let origin = cs.iter().filter_map(|c| c.last_received).min()?;
        let mut cum = 0.0;
        let mut pts = Vec::with_capacity(cs.len());
        for c in &cs {
            cum += c.bytes_received.get() as f64;
            pts.push((cum, rel_ns(c.last_received?, origin)));
        }
        return rate_from_points(&pts, floor);
    }
    let mut stamps: Vec<(TimeNs, Bytes)> = unique_packets(obs)
        .iter()
        .filter_map(|p| p.received.map(|r| (r, p.size)))
        .collect();
    packet_level(&mut stamps, floor)
}

/// The rate at which the train arrived, read at bunch ends only: for a
/// receiver that coalesces interrupts.
///
/// Such a receiver stamps a whole bunch of packets at its interrupt, so the
/// stamps of all but a bunch's last packet are late by up to one coalescing
/// delay — and a bunch can hold most of a short train: the lab's threaded-NAPI
/// receiver, waking after an idle spell, stamped the first half of a
/// 100-packet train at once, and the slope over every packet read 370–710
/// Mb/s for a train that arrived at about 230.  The last packet of a bunch
/// waited least, so its stamp is nearest its true arrival (the ICIM paper,
/// II.B, after Prasad, Jain & Dovrolis): each bunch end is a point at the
/// bytes received up to and including it.  A bunch is a run of arrivals at
/// most `tiny` apart.  `None` with fewer than three bunches: two bunch ends
/// say nothing about how straight the train arrived, and one says nothing.
pub(crate) fn receiving_rate_at_bunch_ends(obs: &Observation, tiny: DurationNs) -> Option<RateFit> {
    let floor = obs.recv_clock.resolution.ns().max(0).saturating_mul(4) as f64;
    let mut arrivals: Vec<(TimeNs, u32, Bytes)> = unique_packets(obs)
        .iter()
        .filter_map(|p| p.received.map(|r| (r, p.seq, p.size)))
        .collect();
    arrivals.sort_by_key(|a| (a.0, a.1));
    let times: Vec<TimeNs> = arrivals.iter().map(|a| a.0).collect();
    let ends = ends_bunch(&times, tiny);
    let mut cum = 0.0;
    let mut pts = Vec::new();
    for ((t, _, size), end) in arrivals.iter().zip(ends) {
        cum += size.get() as f64;
        if end {
            pts.push((cum, rel_ns(*t, times[0])));
        }
    }
    if pts.len() < 3 {
        return None;
    }
    rate_from_points(&pts, floor)
}

/// For arrival stamps in time order, whether each one ends a bunch: the
/// next arrival is more than `tiny` later, or there is none.  The one rule
/// for what a coalescing receiver's bunch is, shared by the bunch-end rate
/// above and the bunch-level one-way delays of the methods.
pub(crate) fn ends_bunch(sorted_arrivals: &[TimeNs], tiny: DurationNs) -> Vec<bool> {
    sorted_arrivals
        .iter()
        .enumerate()
        .map(|(i, t)| {
            sorted_arrivals
                .get(i + 1)
                .map_or(true, |next| next.since(*t) > tiny)
        })
        .collect()
}

/// Per-car arrival rates from each car's own dispersion: bytes after the
/// car's first arrival over the time to its last.
///
/// Only cars with at least two arrivals and a positive spread give a rate.  On
/// a path whose tight link is busier than the car, this is roughly the tight
/// link's capacity (the car crosses it back to back); its spread across cars
/// shows bursty cross traffic.  Under a bunching receiver it is meaningless —
/// check [`bunching`] first.
pub fn car_rates(obs: &Observation) -> Vec<BitRate> {
    let mut per_car: BTreeMap<u32, Vec<(TimeNs, Bytes)>> = BTreeMap::new();
    for p in unique_packets(obs) {
        if let Some(r) = p.received {
            per_car.entry(p.car).or_default().push((r, p.size));
        }
    }
    let mut out = Vec::new();
    for (_, mut arr) in per_car {
        if arr.len() < 2 {
            continue;
        }
        arr.sort_by_key(|a| a.0);
        let span = arr[arr.len() - 1].0.since(arr[0].0);
        let bytes: Bytes = arr[1..].iter().map(|a| a.1).sum();
        if let Some(rate) = BitRate::from_bytes_per(bytes, span) {
            if rate.bps().is_finite() && rate.bps() > 0.0 {
                out.push(rate);
            }
        }
    }
    out
}

/// Counts the gaps between consecutive arrivals (in time order) that are no
/// longer than `tiny`.
///
/// A receiver that coalesces interrupts (or stamps with a clock coarser than
/// a packet's wire time) shows many gaps near zero separated by a few long
/// ones.  The caller picks `tiny`: below the wire time of one packet at the
/// fastest rate the path could deliver, and at least the clock's resolution.
pub fn bunching(obs: &Observation, tiny: DurationNs) -> Bunching {
    let mut arrivals: Vec<TimeNs> = unique_packets(obs)
        .iter()
        .filter_map(|p| p.received)
        .collect();
    arrivals.sort();
    let gaps = arrivals.len().saturating_sub(1);
    let tiny_gaps = arrivals
        .windows(2)
        .filter(|w| w[1].since(w[0]) <= tiny)
        .count();
    Bunching { gaps, tiny_gaps }
}

/// ICIM's threshold for a "tiny" gap between consecutive arrivals
/// (man-hasegawa-murata, III.C): with coalescing, more than half of the gaps
/// fall below 1 µs.
pub(crate) const COALESCING_TINY_GAP: DurationNs = DurationNs::from_ns(1_000);

/// Detects receiver interrupt coalescing in `obs`'s arrival stamps alone:
/// the share of gaps below [`COALESCING_TINY_GAP`] (or below the receive
/// clock's step, if coarser) and, when more than half are tiny, the period
/// between bunches (about the coalescing delay) and the packets per bunch.
/// `None` when fewer than two packets arrived.
pub fn coalescing(obs: &Observation) -> Option<Coalescing> {
    let mut arrivals: Vec<TimeNs> = unique_packets(obs)
        .iter()
        .filter_map(|p| p.received)
        .collect();
    arrivals.sort();
    coalescing_in(
        &arrivals,
        COALESCING_TINY_GAP.max(obs.recv_clock.resolution),
    )
}

/// [`coalescing`] on sorted arrival stamps with an explicit `tiny` threshold.
///
/// A bunch is a run of arrivals separated by gaps no longer than `tiny`; the
/// bunch period is the median time between the first stamps of consecutive
/// bunches (idle stretches between bunches only lengthen some periods, so
/// the median still reads the coalescing delay when most of a train is
/// busy), and packets per bunch is arrivals / bunches.
pub(crate) fn coalescing_in(sorted_arrivals: &[TimeNs], tiny: DurationNs) -> Option<Coalescing> {
    if sorted_arrivals.len() < 2 {
        return None;
    }
    let gaps = sorted_arrivals.len() - 1;
    let mut tiny_gaps = 0usize;
    let mut starts = vec![sorted_arrivals[0]];
    for w in sorted_arrivals.windows(2) {
        if w[1].since(w[0]) <= tiny {
            tiny_gaps += 1;
        } else {
            starts.push(w[1]);
        }
    }
    let b = Bunching { gaps, tiny_gaps };
    let detected = b.is_bunched();
    let periods: Vec<f64> = starts
        .windows(2)
        .map(|w| w[1].since(w[0]).ns() as f64)
        .collect();
    let bunch_period = if detected {
        stats::median(&periods).map(|ns| DurationNs::from_ns(ns.round() as i64))
    } else {
        None
    };
    Some(Coalescing {
        detected,
        share_tiny_gaps: b.fraction(),
        gaps: gaps as u64,
        bunch_period,
        packets_per_bunch: detected.then(|| sorted_arrivals.len() as f64 / starts.len() as f64),
    })
}

/// Receive gaps between consecutive packets of the same car, in seconds, with
/// the size (bytes) of the later packet: one entry for every pair of
/// consecutive sequence numbers of one car that both arrived.
///
/// A car leaves the sender back to back; after a busy tight link of capacity
/// `C`, two of its packets with no cross packet between them are spaced by
/// the later packet's wire time there, `s·8/C`.  Cross packets in between only
/// lengthen a gap, so the short gaps read `C` (see [`capacity_from_gaps`]).
pub(crate) fn intra_car_gaps(obs: &Observation) -> Vec<(f64, Bytes)> {
    // No head: every gap is a tail gap (a car's gaps are numbered from 1).
    intra_car_gaps_split(obs, 0).1
}

/// Receive gaps (seconds) with the later packet's size, as
/// [`intra_car_gaps`] gives them.
pub(crate) type Gaps = Vec<(f64, Bytes)>;

/// [`intra_car_gaps`] split at each car's `skip`-th gap: the car's first
/// `skip` gaps (the head) and the rest (the tail), both as
/// [`intra_car_gaps`] gives them.  A gap's place in its car is counted from
/// the car's first packet (sent or not received alike), so a lost packet
/// does not shift the split.
///
/// Why: a tight link that is a token bucket (Linux tbf, many shaped access
/// links) lets the first bytes of a back-to-back car through at the
/// sender's line rate after an idle moment, as many as it has spare tokens;
/// only after those is the car spaced at the bucket's rate.  The head's
/// gaps then read the sender, not `C`; the tail's read `C`.  On a FIFO link
/// head and tail read alike, so skipping the head costs only packets.
pub(crate) fn intra_car_gaps_split(obs: &Observation, skip: u32) -> (Gaps, Gaps) {
    let uniq = unique_packets(obs);
    let mut first_seq: BTreeMap<u32, u32> = BTreeMap::new();
    for p in &uniq {
        first_seq
            .entry(p.car)
            .and_modify(|s| *s = (*s).min(p.seq))
            .or_insert(p.seq);
    }
    let (mut head, mut tail) = (Vec::new(), Vec::new());
    for w in uniq.windows(2) {
        let (a, b) = (&w[0], &w[1]);
        if a.car != b.car || b.seq != a.seq.wrapping_add(1) {
            continue;
        }
        if let (Some(ra), Some(rb)) = (a.received, b.received) {
            let gap = (i128::from(rb.ns()) - i128::from(ra.ns())) as f64 / 1e9;
            // Gap k of a car is the one ending at its packet k (k ≥ 1).
            let k = b
                .seq
                .wrapping_sub(first_seq.get(&b.car).copied().unwrap_or(b.seq));
            if k <= skip {
                head.push((gap, b.size));
            } else {
                tail.push((gap, b.size));
            }
        }
    }
    (head, tail)
}

/// The tight link's capacity from intra-car gaps (see [`intra_car_gaps`]).
///
/// Each gap gives a rate `s·8/gap`; gaps with a cross packet between the two
/// probe packets give lower rates, never higher, so the capacity is a high
/// quantile of the rates: the `quantile`-th of the gaps (e.g. 0.25).  `None`
/// with fewer than `min_gaps` gaps, or when more than a fifth of the gaps are
/// no longer than `tiny` (a receiver that bunches arrivals: the gaps are the
/// interrupt's, not the link's), or when the result is not finite.
pub(crate) fn capacity_from_gaps(
    gaps: &[(f64, Bytes)],
    tiny: DurationNs,
    quantile: f64,
    min_gaps: usize,
) -> Option<BitRate> {
    if gaps.len() < min_gaps.max(2) {
        return None;
    }
    let tiny_s = tiny.secs_f64();
    let bunched = gaps.iter().filter(|g| g.0 <= tiny_s).count();
    if bunched * 5 > gaps.len() {
        return None;
    }
    // Rates per gap, so that mixed packet sizes are handled.
    let rates: Vec<f64> = gaps
        .iter()
        .filter(|g| g.0 > tiny_s)
        .map(|g| g.1.bits() as f64 / g.0)
        .collect();
    let q = stats::quantile(&rates, 1.0 - quantile.clamp(0.0, 1.0))?;
    (q.is_finite() && q > 0.0).then(|| BitRate::from_bps(q))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observation::{ClockInfo, ClockSource};
    use crate::plan::TrainSpec;

    fn clock(res: i64) -> ClockInfo {
        ClockInfo {
            source: ClockSource::Simulated,
            resolution: DurationNs::from_ns(res),
        }
    }

    /// A train of `cars` cars of `ppc` packets of 1000 B: cars start every
    /// `send_gap` ns and complete every `recv_gap` ns; offsets differ per side.
    fn train(cars: u32, ppc: u32, send_gap: i64, recv_gap: i64) -> Observation {
        let mut packets = Vec::new();
        for c in 0..cars {
            for j in 0..ppc {
                packets.push(PacketRecord {
                    seq: c * ppc + j,
                    car: c,
                    size: Bytes(1000),
                    sent: TimeNs::from_ns(
                        5_000_000_000 + i64::from(c) * send_gap + i64::from(j) * 800,
                    ),
                    received: Some(TimeNs::from_ns(
                        -7_000_000 + i64::from(c) * recv_gap + i64::from(j) * 80,
                    )),
                });
            }
        }
        Observation {
            train: 0,
            spec: TrainSpec {
                packet_size: Bytes(1000),
                packets_per_car: ppc,
                cars,
                rate: BitRate::from_mbps(100.0),
                idle_before: DurationNs::ZERO,
            },
            schedule: None,
            packets,
            send_clock: clock(1),
            recv_clock: clock(1),
            receiver_drops: None,
        }
    }

    #[test]
    fn rates_are_car_spacing_regardless_of_clock_offsets() {
        // 4000 B per car every 320 µs = 100 Mb/s; arriving every 400 µs = 80 Mb/s.
        let obs = train(50, 4, 320_000, 400_000);
        let s = sending_rate(&obs).unwrap();
        let r = receiving_rate(&obs).unwrap();
        assert!((s.rate.mbps() - 100.0).abs() < 1e-6, "{}", s.rate);
        assert!((r.rate.mbps() - 80.0).abs() < 1e-6, "{}", r.rate);
        assert_eq!(s.points, 50);
        // Intra-car: 1000 B every 80 ns = 100 Gb/s.
        let cr = car_rates(&obs);
        assert_eq!(cr.len(), 50);
        assert!((cr[0].gbps() - 100.0).abs() < 1e-6);
    }

    #[test]
    fn loss_duplicates_and_reordering_do_not_bias() {
        let mut obs = train(50, 4, 320_000, 400_000);
        // Lose one packet (not the last) of cars 10 and 20 after the
        // bottleneck: the cars still complete on time, so the rate of the
        // surviving bytes is lower by about the 1 % of bytes missing.
        for p in obs.packets.iter_mut() {
            if p.seq == 41 || p.seq == 81 {
                p.received = None;
            }
        }
        let dup = obs.packets[30];
        obs.packets.push(dup);
        obs.packets.reverse();
        let r = receiving_rate(&obs).unwrap();
        assert!(
            r.rate.mbps() < 80.0 && r.rate.mbps() > 80.0 * 0.98,
            "{}",
            r.rate
        );
        assert_eq!(unique_packets(&obs).len(), 200);
        let s = sending_rate(&obs).unwrap();
        assert!((s.rate.mbps() - 100.0).abs() < 1e-6, "{}", s.rate);
    }

    #[test]
    fn a_car_lost_after_the_bottleneck_lowers_the_delivered_rate() {
        // A whole car vanishing without freeing its time slot means fewer bytes
        // were delivered over the same span: the rate of surviving bytes drops
        // by about one car in fifty, as a first-to-last rate would.
        let mut obs = train(50, 4, 320_000, 400_000);
        for p in obs.packets.iter_mut() {
            if p.car == 10 {
                p.received = None;
            }
        }
        let r = receiving_rate(&obs).unwrap().rate.mbps();
        assert!(r < 80.0 && r > 80.0 * 0.96, "{r}");
    }

    /// Arrivals of a train at `gap_ns` spacing; with `interrupt_ns`, each is
    /// held to the next interrupt and the bunch is stamped 60 ns apart (as
    /// threaded NAPI does on the lab's veths).
    fn arrivals(n: i64, gap_ns: i64, interrupt_ns: Option<i64>) -> Vec<TimeNs> {
        let mut out = Vec::new();
        let mut last_tick = i64::MIN;
        let mut in_bunch = 0;
        for i in 0..n {
            let t = 3_000_000 + i * gap_ns;
            let at = match interrupt_ns {
                Some(p) => {
                    let tick = t.div_euclid(p) * p + p;
                    in_bunch = if tick == last_tick { in_bunch + 1 } else { 0 };
                    last_tick = tick;
                    tick + in_bunch * 60
                }
                None => t,
            };
            out.push(TimeNs::from_ns(at));
        }
        out
    }

    #[test]
    fn coalescing_at_125us_with_20_packets_per_bunch_is_detected() {
        // 20 packets per 125 µs interrupt: one every 6.25 µs (1.9 Gb/s of 1500 B).
        let a = arrivals(400, 6_250, Some(125_000));
        let c = coalescing_in(&a, COALESCING_TINY_GAP).unwrap();
        assert!(c.detected, "{c:?}");
        assert!(c.share_tiny_gaps > 0.9, "{c:?}");
        let period = c.bunch_period.unwrap().ns();
        assert!((period - 125_000).abs() <= 1_000, "{c:?}");
        assert!((c.packets_per_bunch.unwrap() - 20.0).abs() < 0.5, "{c:?}");
    }

    #[test]
    fn uncoalesced_arrivals_are_not_detected() {
        for gap in [1_200, 6_250, 12_000, 120_000] {
            let c = coalescing_in(&arrivals(400, gap, None), COALESCING_TINY_GAP).unwrap();
            assert!(!c.detected, "{gap}: {c:?}");
            assert_eq!(c.share_tiny_gaps, 0.0);
            assert!(c.bunch_period.is_none() && c.packets_per_bunch.is_none());
        }
        // One packet per interrupt: late, but not bunched.
        let c = coalescing_in(&arrivals(400, 130_000, Some(125_000)), COALESCING_TINY_GAP);
        assert!(!c.unwrap().detected);
        assert!(coalescing_in(&arrivals(1, 1_000, None), COALESCING_TINY_GAP).is_none());
    }

    #[test]
    fn coalescing_from_an_observation_uses_the_clock_step() {
        // Cars of 4 complete every 400 µs, 80 ns apart: bunched at 1 µs.
        let obs = train(50, 4, 320_000, 400_000);
        let c = coalescing(&obs).unwrap();
        assert!(c.detected && (c.packets_per_bunch.unwrap() - 4.0).abs() < 1e-9);
        assert_eq!(c.bunch_period, Some(DurationNs::from_us(400)));
        // The same 4 packets 10 µs apart are not.
        let mut obs = train(50, 4, 320_000, 400_000);
        for p in obs.packets.iter_mut() {
            p.received = p
                .received
                .map(|t| t + DurationNs::from_ns(i64::from(p.seq % 4) * 10_000));
        }
        assert!(!coalescing(&obs).unwrap().detected);
    }

    #[test]
    fn bunched_arrivals_keep_the_train_rate() {
        // 80 Mb/s arrivals released by an interrupt every 125 µs.
        let mut obs = train(50, 4, 320_000, 400_000);
        for p in obs.packets.iter_mut() {
            let t = p.received.unwrap().ns();
            p.received = Some(TimeNs::from_ns(t.div_euclid(125_000) * 125_000 + 125_000));
        }
        let r = receiving_rate(&obs).unwrap();
        assert!((r.rate.mbps() - 80.0).abs() / 80.0 < 0.005, "{}", r.rate);
        let b = bunching(&obs, DurationNs::from_ns(1));
        assert!(b.is_bunched(), "{b:?}");
        assert!(!bunching(&train(50, 4, 320_000, 400_000), DurationNs::from_ns(1)).is_bunched());
    }

    #[test]
    fn a_bunch_holding_half_the_train_is_read_at_bunch_ends() {
        // 100 one-packet cars arriving 40 µs apart (200 Mb/s of 1000-byte
        // packets); the receiver wakes late and stamps the first 50 at the
        // 50th's arrival, then every 5 at the 5th's.
        let mut obs = train(100, 1, 40_000, 40_000);
        for p in obs.packets.iter_mut() {
            let t = p.received.unwrap().ns();
            let k = i64::from(p.seq);
            let release = if k < 50 { 49 } else { (k / 5) * 5 + 4 };
            p.received = Some(TimeNs::from_ns(t + (release - k) * 40_000));
        }
        let naive = receiving_rate(&obs).unwrap().rate.mbps();
        assert!(naive > 260.0, "the slope over every stamp: {naive}");
        let r = receiving_rate_at_bunch_ends(&obs, DurationNs::from_ns(1_000)).unwrap();
        assert!((r.rate.mbps() - 200.0).abs() / 200.0 < 0.01, "{}", r.rate);
        // Too few bunches: no reading.
        let mut one = train(10, 1, 40_000, 40_000);
        for p in one.packets.iter_mut() {
            p.received = Some(TimeNs::from_ns(0));
        }
        assert!(receiving_rate_at_bunch_ends(&one, DurationNs::from_ns(1_000)).is_none());
    }

    #[test]
    fn one_car_falls_back_to_packets() {
        let obs = train(1, 10, 0, 0);
        let s = sending_rate(&obs).unwrap();
        assert!((s.rate.gbps() - 10.0).abs() < 1e-6);
        assert_eq!(s.points, 10);
    }

    #[test]
    fn degenerate_inputs_give_none() {
        let mut obs = train(0, 0, 0, 0);
        assert!(sending_rate(&obs).is_none());
        assert!(receiving_rate(&obs).is_none());
        obs = train(5, 1, 1000, 1000);
        for p in obs.packets.iter_mut() {
            p.received = None;
        }
        assert!(receiving_rate(&obs).is_none());
        assert!(car_rates(&obs).is_empty());
        let same = train(5, 2, 0, 0);
        assert!(receiving_rate(&same).is_none());
    }

    #[test]
    fn a_single_late_stamp_is_trimmed() {
        let mut obs = train(40, 1, 120_000, 120_000);
        obs.packets[20].received = obs.packets[20]
            .received
            .map(|t| t + DurationNs::from_us(900));
        let r = receiving_rate(&obs).unwrap();
        assert!(
            (r.rate.mbps() - 1000.0 / 120.0 * 8.0).abs() < 1e-6,
            "{}",
            r.rate
        );
        assert_eq!(r.points, 39);
    }

    #[test]
    fn intra_car_gaps_split_at_each_cars_head() {
        // 3 cars of 6 packets: gaps 1..=2 of each car are the head.
        let obs = train(3, 6, 1_000_000, 1_000_000);
        let (head, tail) = intra_car_gaps_split(&obs, 2);
        assert_eq!(head.len(), 6);
        assert_eq!(tail.len(), 9);
        assert_eq!(intra_car_gaps(&obs).len(), 15);
        // A lost second packet removes gaps 1 and 2 but moves nothing.
        let mut lossy = obs.clone();
        lossy.packets[1].received = None;
        let (head, tail) = intra_car_gaps_split(&lossy, 2);
        assert_eq!((head.len(), tail.len()), (4, 9));
    }

    #[test]
    fn capacity_from_intra_car_gaps() {
        // Cars of 4 × 1000 B whose packets arrive 80 ns apart = 100 Gb/s,
        // with every fourth gap stretched by a cross packet.
        let mut obs = train(50, 4, 320_000, 400_000);
        for p in obs.packets.iter_mut() {
            if p.seq % 4 == 3 {
                p.received = p.received.map(|t| t + DurationNs::from_ns(200));
            }
        }
        let gaps = intra_car_gaps(&obs);
        assert_eq!(gaps.len(), 150);
        let c = capacity_from_gaps(&gaps, DurationNs::from_ns(1), 0.25, 40).unwrap();
        assert!((c.gbps() - 100.0).abs() < 1e-6, "{c}");
        // Too few gaps, or bunched arrivals: no answer.
        assert!(capacity_from_gaps(&gaps[..10], DurationNs::from_ns(1), 0.25, 40).is_none());
        assert!(capacity_from_gaps(&gaps, DurationNs::from_ns(100), 0.25, 40).is_none());
    }
}
