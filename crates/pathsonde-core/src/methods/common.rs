//! Book-keeping every probing method shares: probe cost, the per-train
//! trace, pooled coalescing detection, one-way delays (per packet or, under
//! coalescing, per bunch) and a few schedule builders.
//!
//! FAC² keeps its own richer book-keeping; the methods of issue 6 (SLoPS,
//! chirps, pairs, IGI/PTR, bursts) use this one so that they report cost,
//! trace and coalescing the same way.

use crate::dispersion;
use crate::estimate::{Coalescing, ProbeCost, TrainRecord};
use crate::observation::{Observation, PacketRecord};
use crate::plan::{CarSlot, ScheduleSpec};
use crate::stats;
use crate::units::{BitRate, Bytes, DurationNs, TimeNs};

/// A sending rate below this share of the requested one is worth a note.
pub(crate) const SHORTFALL: f64 = 0.95;

/// Smallest and largest probe packet a method will plan (IPv4 + UDP header
/// to the largest IP datagram).
pub(crate) fn packet_bytes(size: Bytes) -> Bytes {
    Bytes(size.get().clamp(28, 65_535))
}

/// What one observation showed, in the terms every method needs.
#[derive(Debug, Clone)]
pub(crate) struct Seen {
    /// De-duplicated records in sequence order.
    pub packets: Vec<PacketRecord>,
    /// Their sizes summed (saturating).
    pub bytes: Bytes,
    pub loss: f64,
    pub sending: Option<BitRate>,
    pub receiving: Option<BitRate>,
    /// The fit behind `receiving` (its span weighs a train's reading).
    pub receiving_fit: Option<dispersion::RateFit>,
    pub coalescing: Option<Coalescing>,
}

impl Seen {
    pub fn coalesced(&self) -> bool {
        self.coalescing.is_some_and(|c| c.detected)
    }
}

/// Cost, trace, notes and coalescing pooled over a method's probes.
#[derive(Debug, Clone, Default)]
pub(crate) struct Ledger {
    pub cost: ProbeCost,
    first_send: Option<TimeNs>,
    last_send: Option<TimeNs>,
    pub trains: Vec<TrainRecord>,
    pub notes: Vec<String>,
    gaps: (u64, u64),
    coalesced: Vec<Coalescing>,
    shortfall_noted: bool,
}

impl Ledger {
    /// Accounts for one observation sent at `target` and returns what it showed.
    pub fn record(&mut self, obs: &Observation, target: BitRate) -> Seen {
        let packets = dispersion::unique_packets(obs);
        let n = packets.len() as u64;
        let received = packets.iter().filter(|p| p.received.is_some()).count() as u64;
        let bytes: Bytes = packets.iter().map(|p| p.size).sum();
        let loss = if n == 0 {
            1.0
        } else {
            (n - received) as f64 / n as f64
        };
        self.cost.bytes += bytes;
        self.cost.packets = self.cost.packets.saturating_add(n);
        self.cost.trains = self.cost.trains.saturating_add(1);
        for p in &packets {
            self.first_send = Some(self.first_send.map_or(p.sent, |f| f.min(p.sent)));
            self.last_send = Some(self.last_send.map_or(p.sent, |l| l.max(p.sent)));
        }
        let sending = dispersion::sending_rate(obs).map(|f| f.rate);
        let receiving_fit = dispersion::receiving_rate(obs);
        let receiving = receiving_fit.map(|f| f.rate);
        let mut coalescing = dispersion::coalescing(obs);
        // ICIM's rule needs most of *all* gaps tiny; a sparse or slow probe
        // (pairs, chirps, trains slower than the interrupt rate) shows
        // bunching only between some consecutive packets.  Two packets
        // cannot leave a link closer than their wire time there, so more
        // than a fifth of consecutive packets within 1 µs is bunching too.
        if let Some(c) = coalescing.as_mut().filter(|c| !c.detected) {
            let tiny = tiny_gap(obs);
            let (share, pairs) = bunched_share(&packets, tiny);
            if pairs >= 10 && share > 0.2 {
                c.detected = true;
                c.bunch_period = bunch_period(&packets, tiny);
            }
        }
        if let Some(c) = coalescing {
            self.gaps.0 += c.gaps;
            self.gaps.1 += (c.share_tiny_gaps * c.gaps as f64).round() as u64;
            if c.detected {
                self.coalesced.push(c);
            }
        }
        if let Some(s) = sending {
            if target.is_positive()
                && s.bps() < SHORTFALL * target.bps()
                && !self.shortfall_noted
                && n > 2
            {
                self.shortfall_noted = true;
                self.notes.push(format!(
                    "probe {}: the sender achieved only {} of the requested {} (host or NIC limits pacing)",
                    obs.train, s, target
                ));
            }
        }
        self.trains.push(TrainRecord {
            train: obs.train,
            target_rate: target,
            sending_rate: sending.unwrap_or(target),
            receiving_rate: receiving,
            car_rate_spread: None,
            packets: n,
            bytes,
            loss_fraction: loss,
            reading: None,
        });
        Seen {
            packets,
            bytes,
            loss,
            sending,
            receiving,
            receiving_fit,
            coalescing,
        }
    }

    /// First to last send stamp over every probe.
    pub fn probe_span(&self) -> DurationNs {
        match (self.first_send, self.last_send) {
            (Some(a), Some(b)) => b.since(a),
            _ => DurationNs::ZERO,
        }
    }

    /// The coalescing verdict over the whole run, as FAC² reports it.
    pub fn coalescing(&self) -> Option<Coalescing> {
        let (gaps, tiny) = self.gaps;
        if gaps == 0 {
            return None;
        }
        let med = |f: &dyn Fn(&Coalescing) -> Option<f64>| {
            let xs: Vec<f64> = self.coalesced.iter().filter_map(f).collect();
            stats::median(&xs)
        };
        Some(Coalescing {
            detected: !self.coalesced.is_empty(),
            share_tiny_gaps: tiny as f64 / gaps as f64,
            gaps,
            bunch_period: med(&|c| c.bunch_period.map(|p| p.ns() as f64))
                .map(|ns| DurationNs::from_ns(ns.round() as i64)),
            packets_per_bunch: med(&|c| c.packets_per_bunch),
        })
    }

    pub fn note(&mut self, s: impl Into<String>) {
        let s = s.into();
        if !self.notes.contains(&s) {
            self.notes.push(s);
        }
    }
}

/// One packet's one-way delay, relative: the offset between the clocks is
/// unknown, so only differences between delays mean anything.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Owd {
    pub seq: u32,
    pub car: u32,
    /// Send stamp, seconds after the first packet's.
    pub sent: f64,
    /// Receive minus send stamp, seconds, less the smallest such value.
    pub delay: f64,
}

/// One-way delays of the packets that arrived, in sequence order.
///
/// With `bunch_level`, only the last packet of each bunch of arrivals (gaps
/// no longer than [`dispersion::COALESCING_TINY_GAP`] or the clock step)
/// counts: a coalescing receiver stamps a whole bunch at its interrupt, and
/// the packet that arrived last before it waited least, so its stamp is
/// nearest its true arrival (Prasad, Jain & Dovrolis's IC-aware pathload,
/// as cited in the ICIM paper, II.B).
pub(crate) fn owds(packets: &[PacketRecord], tiny: DurationNs, bunch_level: bool) -> Vec<Owd> {
    let Some(origin) = packets.iter().map(|p| p.sent).min() else {
        return Vec::new();
    };
    let mut arrived: Vec<&PacketRecord> = packets.iter().filter(|p| p.received.is_some()).collect();
    if bunch_level {
        arrived.sort_by_key(|p| (p.received, p.seq));
        let times: Vec<TimeNs> = arrived.iter().filter_map(|p| p.received).collect();
        let ends = dispersion::ends_bunch(&times, tiny);
        arrived = arrived
            .into_iter()
            .zip(ends)
            .filter_map(|(p, end)| end.then_some(p))
            .collect();
        arrived.sort_by_key(|p| p.seq);
    }
    let raw: Vec<(u32, u32, f64, f64)> = arrived
        .iter()
        .map(|p| {
            let r = p.received.unwrap();
            let d = (i128::from(r.ns()) - i128::from(p.sent.ns())) as f64 / 1e9;
            let s = (i128::from(p.sent.ns()) - i128::from(origin.ns())) as f64 / 1e9;
            (p.seq, p.car, s, d)
        })
        .collect();
    let base = raw.iter().map(|r| r.3).fold(f64::INFINITY, f64::min);
    raw.into_iter()
        .map(|(seq, car, sent, d)| Owd {
            seq,
            car,
            sent,
            delay: d - base,
        })
        .collect()
}

/// Share of consecutive packets (by sequence number, both arrived) whose
/// arrival stamps are at most `tiny` apart, and how many such pairs there
/// were.  Two packets cannot leave a link closer than their wire time
/// there, so a large share means a receiver that bunches arrivals even
/// where ICIM's rule (most of *all* gaps tiny) cannot see it — sparse
/// probes such as chirps and pairs, whose slow parts arrive one by one.
pub(crate) fn bunched_share(packets: &[PacketRecord], tiny: DurationNs) -> (f64, usize) {
    let mut n = 0usize;
    let mut bunched = 0usize;
    for w in packets.windows(2) {
        if w[1].seq != w[0].seq.wrapping_add(1) {
            continue;
        }
        if let (Some(a), Some(b)) = (w[0].received, w[1].received) {
            n += 1;
            if b.since(a).abs() <= tiny {
                bunched += 1;
            }
        }
    }
    if n == 0 {
        (0.0, 0)
    } else {
        (bunched as f64 / n as f64, n)
    }
}

/// The median time from one bunch's first arrival to the next bunch's,
/// where a bunch is a run of arrivals at most `tiny` apart: about the
/// coalescing delay while the probe keeps the receiver busy.
pub(crate) fn bunch_period(packets: &[PacketRecord], tiny: DurationNs) -> Option<DurationNs> {
    let mut arrivals: Vec<TimeNs> = packets.iter().filter_map(|p| p.received).collect();
    arrivals.sort();
    let mut starts = Vec::new();
    for (i, t) in arrivals.iter().enumerate() {
        if i == 0 || t.since(arrivals[i - 1]) > tiny {
            starts.push(*t);
        }
    }
    let periods: Vec<f64> = starts
        .windows(2)
        .map(|w| w[1].since(w[0]).ns() as f64)
        .collect();
    stats::median(&periods).map(|ns| DurationNs::from_ns(ns.round() as i64))
}

/// Whether a probe left the sender unevenly: more than a fifth of its car
/// starts more than half the planned interval (seconds) off the plan's
/// spacing.  A late car and the catch-up burst behind it make delays and
/// gaps of their own, which the methods must not read as the path's.
pub(crate) fn send_irregular(pk: &[PacketRecord], interval: f64) -> bool {
    if !(interval.is_finite() && interval > 0.0) {
        return false;
    }
    let mut starts: std::collections::BTreeMap<u32, TimeNs> = std::collections::BTreeMap::new();
    for p in pk {
        let e = starts.entry(p.car).or_insert(p.sent);
        *e = (*e).min(p.sent);
    }
    let t: Vec<_> = starts.into_iter().collect();
    let gaps: Vec<f64> = t
        .windows(2)
        .map(|w| w[1].1.since(w[0].1).secs_f64() / f64::from(w[1].0.saturating_sub(w[0].0).max(1)))
        .collect();
    let off = gaps
        .iter()
        .filter(|g| (**g - interval).abs() > 0.5 * interval)
        .count();
    gaps.len() >= 4 && off * 5 > gaps.len()
}

/// The "tiny gap" threshold for bunch detection on an observation.
pub(crate) fn tiny_gap(obs: &Observation) -> DurationNs {
    dispersion::COALESCING_TINY_GAP.max(obs.recv_clock.resolution)
}

/// A schedule of `groups` groups of one-packet cars.  Each group is given as
/// its car offsets relative to the group's start; groups follow each other
/// with `gap` of idle time after the previous group's last car.
pub(crate) fn schedule_of_groups(
    packet_size: Bytes,
    groups: &[Vec<(DurationNs, u32)>],
    gap: DurationNs,
    idle_before: DurationNs,
) -> ScheduleSpec {
    let mut cars = Vec::new();
    let mut start = DurationNs::ZERO;
    for g in groups {
        let mut last = start;
        for &(off, packets) in g {
            let at = start + off;
            cars.push(CarSlot {
                offset: at,
                packets: packets.max(1),
            });
            last = at;
        }
        start = last + gap;
    }
    ScheduleSpec {
        packet_size,
        cars,
        idle_before,
    }
}

/// Wire time of `size` at `rate`, seconds (infinite for a zero rate).
pub(crate) fn wire_secs(size: Bytes, rate: BitRate) -> f64 {
    size.bits() as f64 / rate.bps()
}

/// `x` if it is a finite fraction in (0, 1), else `default`.
pub(crate) fn sane_fraction(x: f64, default: f64) -> f64 {
    if x.is_finite() && x > 0.0 && x < 1.0 {
        x
    } else {
        default
    }
}

/// `x` if it is a finite positive rate, else `default`.
pub(crate) fn sane_rate(x: BitRate, default: BitRate) -> BitRate {
    if x.bps().is_finite() && x.bps() > 0.0 {
        x
    } else {
        default
    }
}

/// The narrowest band a method may claim around its A, as a share of A on
/// each side.  The truth a band is judged against is A over the
/// measurement's own window, and a method samples that window, it does not
/// see all of it: with packet-level cross traffic the mean over the
/// instants a method probes differs from the window's by a few percent at
/// high load (on the synthetic Poisson path at 70 % load, FAC²'s and
/// SLoPS's statistical bands missed the truth in 5 and 4 runs of 20, by
/// 0.3–6 %).  A band narrower than that is confidence the method has not
/// earned.
pub(crate) const BAND_FLOOR: f64 = 0.05;

/// `low..high` widened, where narrower, to `A·(1 ± BAND_FLOOR)`.  An open
/// band (`high` is `None`: "at least `low`") stays as it is.
pub(crate) fn floor_band(available: f64, low: f64, high: Option<f64>) -> (f64, Option<f64>) {
    floor_band_at(BAND_FLOOR, available, low, high)
}

/// [`floor_band`] with a floor of its own, for a method whose measured
/// systematic error is larger than the truth's wander.
pub(crate) fn floor_band_at(
    floor: f64,
    available: f64,
    low: f64,
    high: Option<f64>,
) -> (f64, Option<f64>) {
    match high {
        None => (low, None),
        Some(h) => (
            low.min(available * (1.0 - floor)).max(0.0),
            Some(h.max(available * (1.0 + floor))),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(seq: u32, sent: i64, recv: Option<i64>) -> PacketRecord {
        PacketRecord {
            seq,
            car: seq,
            size: Bytes(1500),
            sent: TimeNs::from_ns(sent),
            received: recv.map(TimeNs::from_ns),
        }
    }

    #[test]
    fn owds_are_relative_and_bunch_level_keeps_bunch_ends() {
        // Four packets 10 µs apart; the receiver releases two bunches.
        let pk = vec![
            rec(0, 0, Some(100_000)),
            rec(1, 10_000, Some(100_000)),
            rec(2, 20_000, Some(200_000)),
            rec(3, 30_000, Some(200_000)),
            rec(4, 40_000, None),
        ];
        let all = owds(&pk, DurationNs::from_ns(1000), false);
        assert_eq!(all.len(), 4);
        assert!((all[1].delay - (all[0].delay - 10e-6)).abs() < 1e-12);
        assert!(all.iter().all(|o| o.delay >= 0.0));
        let ends = owds(&pk, DurationNs::from_ns(1000), true);
        let seqs: Vec<u32> = ends.iter().map(|o| o.seq).collect();
        assert_eq!(seqs, [1, 3]);
        assert!(owds(&[], DurationNs::ZERO, true).is_empty());
    }

    #[test]
    fn groups_follow_each_other_after_the_gap() {
        let g = vec![(DurationNs::ZERO, 1), (DurationNs::from_us(10), 1)];
        let s = schedule_of_groups(
            Bytes(1000),
            &[g.clone(), g],
            DurationNs::from_us(100),
            DurationNs::ZERO,
        );
        let offs: Vec<i64> = s.cars.iter().map(|c| c.offset.ns()).collect();
        assert_eq!(offs, [0, 10_000, 110_000, 120_000]);
        assert!(s.check().is_ok());
    }
}
