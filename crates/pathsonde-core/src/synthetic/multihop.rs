//! A synthetic path of several hops for the `hops` method: each link has a
//! capacity, Poisson cross traffic and a propagation delay, and each router
//! answers TTL-expired packets with ICMP under a Linux-like rate limit.  It
//! also carries the end-to-end methods' trains ([`probe`]: a
//! [`crate::path::ProbePath`]), so a method can be tried where the tight and
//! the narrow link are two links.
//!
//! # What it models
//!
//! * **Sender**: packets leave at their plan offsets after the train's start,
//!   never faster than the sender's line rate.
//! * **Links**: store-and-forward FIFO links of capacity `C`.  Cross traffic
//!   enters at a link and leaves right after it (one-hop persistent, as in
//!   pathneck's analysis): packets of one size with exponential gaps (mean
//!   rate `X`, seeded).  A packet arriving at `t` leaves at
//!   `max(t, busy) + size / C`.
//! * **Routers**: router `k` (at the end of link `k`) drops a packet whose
//!   TTL is `k` and answers ICMP time exceeded; the far end (after the last
//!   link) answers every packet that reaches it (port unreachable).  Each
//!   answerer has a token bucket as Linux's `icmp_ratelimit`: a burst of
//!   `icmp_burst`, then one answer per `icmp_interval`; a router may be made
//!   silent.  An answer reaches the sender after the propagation delays back
//!   plus a uniform generation jitter; the way back is never queued.
//!
//! # What it does not model
//!
//! Queue limits only where a link is given one ([`HopLink::queue`]: a packet
//! that finds more than that many bytes waiting, itself included, is
//! dropped, as tbf's and pfifo's byte limits do; elsewhere nothing is dropped
//! but by TTL), cross traffic that crosses
//! several links, reordering, the routers' ICMP generation being slower than
//! forwarding, and the global `icmp_msgs_per_sec` limit.

mod probe;

use crate::methods::hops::{
    AnswerKind, HopAnswer, HopMethod, HopTrainSpec, HopsEstimate, HopsObservation, HopsPlan,
};
use crate::observation::{ClockInfo, ClockSource};
use crate::rng::SplitMix64;
use crate::units::{BitRate, Bytes, DurationNs, TimeNs};
use std::net::{IpAddr, Ipv4Addr};

/// One link and the router (or far end) at its end.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HopLink {
    pub capacity: BitRate,
    /// Mean Poisson cross-traffic rate on this link.
    pub cross: BitRate,
    pub cross_packet: Bytes,
    pub delay: DurationNs,
    /// Whether the router at its end answers ICMP at all.
    pub answers: bool,
    /// The most bytes its queue holds (the packet in service included);
    /// `None`: unlimited.
    pub queue: Option<Bytes>,
    /// A shaper's bucket (Linux tbf's `burst`): an idle link lets this many
    /// bytes through at once before it holds packets to its rate.  Zero is
    /// a plain FIFO serialiser.  The lab's links are tbf with a burst of two
    /// full frames, which lets a short train through a few packets early,
    /// so it leaves an idle link faster than the link's rate.
    pub burst: Bytes,
}

impl HopLink {
    /// A link of `capacity_mbps` carrying `load` (0..1) of it as cross traffic.
    pub fn new(capacity_mbps: f64, load: f64) -> HopLink {
        HopLink {
            capacity: BitRate::from_mbps(capacity_mbps),
            cross: BitRate::from_mbps(capacity_mbps * load),
            cross_packet: Bytes(1000),
            delay: DurationNs::from_us(500),
            answers: true,
            queue: None,
            burst: Bytes(0),
        }
    }

    /// Capacity minus cross traffic.
    pub fn available(&self) -> BitRate {
        self.capacity - self.cross
    }
}

/// Settings of [`MultiHopPath`].
#[derive(Debug, Clone, PartialEq)]
pub struct MultiHopConfig {
    pub links: Vec<HopLink>,
    pub line_rate: BitRate,
    pub icmp_burst: u32,
    pub icmp_interval: DurationNs,
    pub icmp_jitter: DurationNs,
    pub seed: u64,
}

impl MultiHopConfig {
    /// Linux defaults for ICMP (burst 6, then 1/s), a 1 Gb/s sender and 5 µs
    /// of answer jitter.
    pub fn new(links: Vec<HopLink>, seed: u64) -> MultiHopConfig {
        MultiHopConfig {
            links,
            line_rate: BitRate::from_gbps(1.0),
            icmp_burst: 6,
            icmp_interval: DurationNs::from_secs(1),
            icmp_jitter: DurationNs::from_us(5),
            seed,
        }
    }

    /// A four-link path whose narrow link (an idle 100 Mb/s at hop 3) never
    /// answers, behind a busy 1 Gb/s first link and the tight 300 Mb/s
    /// link at 80 % (hop 2): the first hop is the only step down the
    /// method can test as a narrow link, and its checks ask this sender
    /// for more than its 1 Gb/s line.  Shared by the core's and the
    /// render crate's tests.
    pub fn silent_narrow_behind_a_busy_first_hop(seed: u64) -> MultiHopConfig {
        let mut links = vec![
            HopLink::new(1000.0, 0.2),
            HopLink::new(300.0, 0.8),
            HopLink::new(100.0, 0.0),
            HopLink::new(1000.0, 0.1),
        ];
        links[2].answers = false;
        MultiHopConfig::new(links, seed)
    }

    /// The link with the least available bandwidth (1-based TTL of the hop
    /// at its end).
    pub fn tight_hop(&self) -> u8 {
        self.argmin(|l| l.available().bps())
    }

    /// The link with the least capacity.
    pub fn narrow_hop(&self) -> u8 {
        self.argmin(|l| l.capacity.bps())
    }

    fn argmin(&self, f: impl Fn(&HopLink) -> f64) -> u8 {
        let mut best = 0;
        for (i, l) in self.links.iter().enumerate() {
            if f(l) < f(&self.links[best]) {
                best = i;
            }
        }
        (best + 1) as u8
    }
}

#[derive(Debug, Clone)]
struct LinkState {
    busy: f64,
    next_cross: f64,
    rng: SplitMix64,
}

/// Window after which an idle link's queue is surely empty: its Poisson
/// cross traffic restarts from there (memoryless) instead of being walked.
const FORGET_NS: f64 = 50e6;

/// The multi-hop synthetic path.  Pure and seeded: the same trains give the
/// same answers.
#[derive(Debug, Clone)]
pub struct MultiHopPath {
    cfg: MultiHopConfig,
    now: f64,
    links: Vec<LinkState>,
    /// ICMP credit per answerer (ns) and when it was last topped up.
    tokens: Vec<(f64, f64)>,
    jitter: SplitMix64,
    train: u32,
}

impl MultiHopPath {
    pub fn new(cfg: MultiHopConfig) -> MultiHopPath {
        let links = (0..cfg.links.len())
            .map(|i| {
                let mut rng = SplitMix64::for_stream(cfg.seed, i as u64 + 1);
                let mean = Self::cross_mean(&cfg.links[i]);
                LinkState {
                    busy: 0.0,
                    next_cross: mean.map_or(f64::INFINITY, |m| rng.exponential(m)),
                    rng,
                }
            })
            .collect();
        let full = f64::from(cfg.icmp_burst) * cfg.icmp_interval.ns() as f64;
        MultiHopPath {
            tokens: vec![(full, 0.0); cfg.links.len()],
            jitter: SplitMix64::for_stream(cfg.seed, 0),
            links,
            now: 1e9,
            train: 0,
            cfg,
        }
    }

    /// Mean time between cross packets, ns; `None` without cross traffic.
    fn cross_mean(l: &HopLink) -> Option<f64> {
        (l.cross.bps() > 0.0).then(|| l.cross_packet.bits() as f64 * 1e9 / l.cross.bps())
    }

    /// The address of the router at the end of link `hop` (1-based).
    pub fn address(hop: u8) -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(10, 0, hop, 1))
    }

    fn allow_icmp(&mut self, hop: usize, at: f64) -> bool {
        let interval = self.cfg.icmp_interval.ns() as f64;
        let full = f64::from(self.cfg.icmp_burst) * interval;
        let (credit, last) = &mut self.tokens[hop];
        *credit = (*credit + (at - *last).max(0.0)).min(full);
        *last = at;
        if *credit >= interval {
            *credit -= interval;
            true
        } else {
            false
        }
    }

    /// One packet of `bits` arriving at link `hop` at `t` (ns): the cross
    /// traffic that came before it is served, then the packet; when it has
    /// left the link (before propagation), or `None` when the link's queue
    /// limit drops it.  Both carriers (`carry`, `probe`) go through here, so
    /// the `hops` trains and the end-to-end trains meet one link model.
    fn cross_link(&mut self, hop: usize, t: f64, bits: f64) -> Option<f64> {
        let link = self.cfg.links[hop];
        let cap = link.capacity.bps();
        let mean = Self::cross_mean(&link);
        let cross_bits = link.cross_packet.bits() as f64;
        let limit = link.queue.map(|q| q.bits() as f64);
        // Whether a packet of `b` arriving at `at` overflows the queue.
        let full = |busy: f64, at: f64, b: f64| {
            limit.is_some_and(|l| (busy - at).max(0.0) * cap / 1e9 + b > l)
        };
        let st = &mut self.links[hop];
        if let Some(m) = mean {
            if st.next_cross < t - FORGET_NS && st.busy < t - FORGET_NS {
                st.next_cross = t - FORGET_NS + st.rng.exponential(m);
            }
            while st.next_cross <= t {
                if !full(st.busy, st.next_cross, cross_bits) {
                    st.busy = st.busy.max(st.next_cross) + cross_bits * 1e9 / cap;
                }
                st.next_cross += st.rng.exponential(m);
            }
        }
        if full(st.busy, t, bits) {
            return None;
        }
        // The bucket's credit lets a packet start up to `tolerance` before
        // the rate alone would (a virtual-scheduling shaper: `busy` is when
        // the bucket would be full again).
        let tolerance = (link.burst.bits() as f64 - bits).max(0.0) * 1e9 / cap;
        let start = t.max(st.busy - tolerance);
        st.busy = st.busy.max(t) + bits * 1e9 / cap;
        Some(start + bits * 1e9 / cap)
    }

    /// Carries one train and returns what the sender would see.
    pub fn carry(&mut self, spec: &HopTrainSpec) -> HopsObservation {
        let line = self.cfg.line_rate.bps();
        let start = self.now + spec.idle_before.ns() as f64;
        let packets = spec.packets();
        let mut sent = Vec::with_capacity(packets.len());
        // (seq, ttl, size bits, arrival at the next link's queue)
        let mut alive: Vec<(u32, u8, f64, f64)> = Vec::with_capacity(packets.len());
        let mut free = start;
        for p in &packets {
            let at = (start + p.offset.ns() as f64).max(free);
            let bits = p.size.bits() as f64;
            free = at + bits * 1e9 / line;
            sent.push(Some(TimeNs::from_ns(at as i64)));
            alive.push((p.seq, p.ttl, bits, free));
        }
        let mut answers = Vec::new();
        let mut back = 0.0;
        let mut last_answer = free;
        for hop in 0..self.cfg.links.len() {
            let link = self.cfg.links[hop];
            let delay = link.delay.ns() as f64;
            back += delay;
            for pkt in alive.iter_mut() {
                // Dropped: no answer, no further hop.
                pkt.3 = self
                    .cross_link(hop, pkt.3, pkt.2)
                    .map_or(f64::NAN, |t| t + delay);
            }
            alive.retain(|p| !p.3.is_nan());
            let last = hop + 1 == self.cfg.links.len();
            let ttl = (hop + 1) as u8;
            let mut keep = Vec::with_capacity(alive.len());
            for pkt in alive {
                let ends_here = last || pkt.1 <= ttl;
                if !ends_here {
                    keep.push(pkt);
                    continue;
                }
                if link.answers && self.allow_icmp(hop, pkt.3) {
                    let j = self.jitter.next_f64() * self.cfg.icmp_jitter.ns() as f64;
                    let at = pkt.3 + back + j;
                    last_answer = last_answer.max(at);
                    answers.push(HopAnswer {
                        seq: pkt.0,
                        from: Self::address(ttl),
                        kind: if last {
                            AnswerKind::Destination
                        } else {
                            AnswerKind::TimeExceeded
                        },
                        received: TimeNs::from_ns(at as i64),
                    });
                }
            }
            alive = keep;
        }
        answers.sort_by_key(|a| a.received);
        self.now = last_answer;
        let obs = HopsObservation {
            train: self.train,
            spec: *spec,
            sent,
            answers,
            clock: ClockInfo {
                source: ClockSource::Simulated,
                resolution: DurationNs::from_ns(1),
            },
        };
        self.train += 1;
        obs
    }

    /// Drives `method` to the end over this path.
    pub fn run(&mut self, method: &mut dyn HopMethod) -> Option<HopsEstimate> {
        while let HopsPlan::Train(spec) = method.next_plan() {
            let obs = self.carry(&spec);
            method.observe(&obs);
        }
        method.estimate()
    }

    /// Time the path has run, from its first train.
    pub fn elapsed(&self) -> DurationNs {
        DurationNs::from_ns((self.now - 1e9) as i64)
    }
}

#[cfg(test)]
mod end_to_end_tests {
    use super::*;
    use crate::methods::fac2::{Fac2, Fac2Config};

    /// FAC² end to end over `links`, seeds 1..=n: (A, band low, band high,
    /// capacity) in Mb/s.
    fn fac2_over(links: &[HopLink], n: u64) -> Vec<(f64, f64, f64, f64)> {
        (1..=n)
            .filter_map(|seed| {
                let mut path = MultiHopPath::new(MultiHopConfig::new(links.to_vec(), seed));
                let mut m = Fac2::new(Fac2Config::default());
                let e = crate::synthetic::drive(&mut m, &mut path, 200)?;
                Some((
                    e.available.mbps(),
                    e.low.mbps(),
                    e.high.map_or(f64::INFINITY, |h| h.mbps()),
                    e.capacity.map_or(f64::NAN, |c| c.mbps()),
                ))
            })
            .collect()
    }

    /// The carrier is a path a train-based method can read: a busy 100 Mb/s
    /// link at 60 % between two idle gigabit links is read end to end as
    /// its A (40), with bands that hold it, as on the single-link model.
    #[test]
    fn fac2_reads_the_tight_link_of_a_chain_end_to_end() {
        let links = [
            HopLink::new(1000.0, 0.0),
            HopLink::new(100.0, 0.6),
            HopLink::new(1000.0, 0.0),
        ];
        let runs = fac2_over(&links, 12);
        assert_eq!(runs.len(), 12);
        let held = runs.iter().filter(|r| r.1 <= 40.0 && 40.0 <= r.2).count();
        assert!(held >= 10, "{runs:?}");
        let mut a: Vec<f64> = runs.iter().map(|r| r.0).collect();
        a.sort_by(f64::total_cmp);
        assert!((a[6] - 40.0).abs() < 2.0, "{runs:?}");
    }

    /// Figures, not a test: an idle 60 Mb/s link after the tight one.  FAC²
    /// reads 42.0-49.5 Mb/s for an A of 40 over seeds 1-12 (11 bands of 12
    /// miss it), C 60: the far trains, spread again by the narrow link, give
    /// the fluid line its slope, so the line and the gaps both read the
    /// narrow link while the near trains cross the tight one (docs/hops.md).
    /// `cargo test -p pathsonde-core --release --lib narrow_after_tight_figures -- --ignored --nocapture`
    #[test]
    #[ignore]
    fn narrow_after_tight_figures() {
        let links = [
            HopLink::new(1000.0, 0.0),
            HopLink::new(100.0, 0.6),
            HopLink::new(60.0, 0.0),
        ];
        for r in fac2_over(&links, 12) {
            eprintln!("A {:.1}  band {:.1} .. {:.1}  C {:.1}", r.0, r.1, r.2, r.3);
        }
    }
}
