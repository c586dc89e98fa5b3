//! Reading one hop train: which hops answered both markers, the gap between
//! the two answers, the rate the train left each hop at, and whether that
//! hop slowed the train down (its dispersion grew there).

use super::plan::{AnswerKind, HopsObservation, Role};
use crate::units::{BitRate, DurationNs};
use std::collections::BTreeMap;
use std::net::IpAddr;

/// A hop's exit rate must fall this far below the rate the train came in at
/// before the hop counts as having spread the train.  Small enough to see a
/// link loaded a little past its available bandwidth, large enough that
/// Poisson cross traffic on an underloaded link and the routers' ICMP
/// generation jitter do not trip it.
pub const EXPANSION: f64 = 0.07;

/// One hop measured in one train: both markers answered.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HopGap {
    pub ttl: u8,
    pub from: IpAddr,
    /// Tail answer minus head answer.
    pub gap: DurationNs,
    /// Bytes between the markers over the gap: the rate the train left the
    /// link into this hop at.
    pub rate: BitRate,
    /// The rate the train came into that link at, as the slowest of its
    /// sending rate and the exit rates of the measured hops before it
    /// (`None` for the first hop when the sender stamped the markers in one
    /// instant, one batched send: it has nothing to be compared with).
    pub rate_in: Option<BitRate>,
    /// The nearest hop before this one that was measured (0: the sender).
    pub prev_ttl: u8,
    /// The rate the sender sent the bytes between the two markers at (from
    /// its send stamps), when it stamped them apart.
    pub sent_rate: Option<BitRate>,
}

impl HopGap {
    /// The exit rate as a back-to-back train's profile reads it: never
    /// above what came in.  A train cannot leave a link faster than it
    /// arrived; a reading that does is the two answers' timing (a head
    /// answer held back at the router, the two arriving together), and
    /// on the lab's chains it read 1.4-18.7 Gb/s at the tight hop behind
    /// an 85 Mb/s link (1169bbf and the trials of 2026-12-02): the scan
    /// then began there, and that "capacity" made the fluid reading of
    /// `available` 0 (`corrected_available`) in 1 of 20 runs of chain 4 at
    /// 1169bbf and 1 and 3 of 10 in the trials.
    pub fn exit_bps(&self) -> f64 {
        self.rate_in
            .map_or(self.rate.bps(), |i| self.rate.bps().min(i.bps()))
    }

    /// Whether this hop spread the train.
    pub fn expanded(&self) -> bool {
        self.rate_in
            .is_some_and(|r| self.rate.bps() < r.bps() * (1.0 - EXPANSION))
    }
}

/// What one train says hop by hop.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TrainHops {
    /// Measured hops, by TTL, in order.
    pub gaps: Vec<HopGap>,
    /// Every answer's address and round trip, by TTL (head answers only
    /// give the round trip; either marker gives the address).
    pub seen: BTreeMap<u8, (IpAddr, Option<DurationNs>)>,
    /// TTLs whose head or tail answer was missing.
    pub partial: Vec<u8>,
    /// The TTL at which the far end answered, if it did.
    pub destination: Option<u8>,
    /// Rate the load left the sender at (from the send stamps).
    pub sent_rate: Option<BitRate>,
}

impl TrainHops {
    /// The first measured hop that spread the train, if any.
    pub fn first_expansion(&self) -> Option<&HopGap> {
        self.gaps.iter().find(|g| g.expanded())
    }
}

/// Takes a train apart.  A hop enters `gaps` only when both its head and
/// tail answers came from the same address with the tail after the head:
/// a missing answer is never read as a gap.
pub fn analyse(obs: &HopsObservation) -> TrainHops {
    let spec = &obs.spec;
    let mut by_seq: BTreeMap<u32, &super::plan::HopAnswer> = BTreeMap::new();
    for a in &obs.answers {
        by_seq.entry(a.seq).or_insert(a);
    }
    let sent = |seq: u32| obs.sent.get(seq as usize).copied().flatten();
    let mut out = TrainHops::default();
    let first_load = u32::from(spec.markers);
    let last_load = first_load + spec.load_packets.saturating_sub(1);
    if let (Some(a), Some(b)) = (sent(first_load), sent(last_load)) {
        let span = b.since(a);
        let bytes = crate::units::Bytes(
            u64::from(spec.load_packets.saturating_sub(1)) * spec.load_size.get(),
        );
        out.sent_rate = BitRate::from_bytes_per(bytes, span);
    }
    let mut prev: Option<(u8, BitRate)> = None;
    let mut slowest: Option<BitRate> = None;
    for ttl in 1..=spec.markers {
        let (Some(hs), Some(ts)) = (
            spec.marker_seq(Role::Head, ttl),
            spec.marker_seq(Role::Tail, ttl),
        ) else {
            continue;
        };
        let head = by_seq.get(&hs).copied();
        let tail = by_seq.get(&ts).copied();
        for a in [head, tail].into_iter().flatten() {
            if a.kind == AnswerKind::Destination && out.destination.is_none() {
                out.destination = Some(ttl);
            }
        }
        if let Some(h) = head.or(tail) {
            let rtt = head.and_then(|h| sent(hs).map(|s| h.received.since(s)));
            out.seen.insert(ttl, (h.from, rtt));
        }
        let (Some(h), Some(t)) = (head, tail) else {
            if head.is_some() || tail.is_some() {
                out.partial.push(ttl);
            }
            continue;
        };
        let gap = t.received.since(h.received);
        let bytes = spec.bytes_between(ttl);
        let rate = match BitRate::from_bytes_per(bytes, gap) {
            Some(r) if h.from == t.from => r,
            _ => {
                out.partial.push(ttl);
                continue;
            }
        };
        // The slowest the train was seen before this link: its sending rate
        // and every earlier hop's exit.  A train only slows down along a
        // path, so a spread here is below all of them; comparing with the
        // nearest hop alone would add that hop's own gap noise to this one's.
        let sending = match (sent(hs), sent(ts)) {
            (Some(a), Some(b)) => BitRate::from_bytes_per(bytes, b.since(a)),
            _ => None,
        };
        let rate_in = match (sending, slowest) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        out.gaps.push(HopGap {
            ttl,
            from: h.from,
            gap,
            rate,
            rate_in,
            prev_ttl: prev.map_or(0, |p| p.0),
            sent_rate: sending,
        });
        prev = Some((ttl, rate));
        slowest = Some(slowest.map_or(rate, |x: BitRate| x.min(rate)));
    }
    out
}
