//! `hops`: where on the path the bottleneck is, hop by hop, from recursive
//! packet trains (pathneck, Hu et al. 2004) and ICMP time-exceeded answers.
//!
//! A train is a load of packets sandwiched between TTL-limited markers
//! (heads TTL 1..N, tails N..1).  Router `k` drops head `k` and tail `k`
//! and answers each; the gap between its two answers is how long the train
//! took to cross the link into it, so bytes-between / gap is the rate the
//! train left that link at.  A link whose available bandwidth is below the
//! rate a train arrives at spreads the train (its exit rate drops).
//!
//! The method runs in two phases:
//!
//! 1. **Discovery**: back-to-back trains (pathneck's default 33.6 KB).  They
//!    give the hop list (addresses, round trips, where the far end is), each
//!    hop's exit rate, and an upper bound on the path's available bandwidth
//!    (a train never leaves a link slower than that link's available
//!    bandwidth, so the last hop's exit rate is above the tightest one's).
//! 2. **Rate scan**: trains whose load is paced at a rate `R`, bisecting
//!    between the highest `R` no hop spread and the lowest `R` some hop
//!    spread (the split that the fewest trains contradict, so that one
//!    train spread by a burst of cross traffic does not lead it astray).  At `R` just above the smallest available bandwidth only the
//!    tight link spreads the train, so the first hop that spreads a train at
//!    the lowest such rates is the tight link — even when the narrow link
//!    (smaller capacity, less loaded) comes before or after it, where a
//!    line-rate train's largest dispersion step would point at the narrow
//!    link instead.
//!
//! Routers rate-limit ICMP (Linux: a burst of 6, then one per second per
//! destination); each train asks every router for two answers, so trains are
//! spaced `train_gap` apart (2 s by default).  A hop that answers neither
//! marker is silent; a hop with one answer is left out of that train.
//!
//! The method is sans-IO like every other; it has its own plan and
//! observation types ([`plan`]) because routers, not a receiver, answer.

pub mod analysis;
pub mod end_to_end;
pub mod narrow;
pub mod pacing;
pub mod plan;
pub mod queue;
#[cfg(test)]
mod tests;

use crate::units::{BitRate, Bytes, DurationNs};
use analysis::{analyse, TrainHops};
pub use plan::{AnswerKind, HopAnswer, HopPacket, HopTrainSpec, HopsObservation, HopsPlan, Role};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::net::IpAddr;

/// A hop-by-hop method: plan → observe → estimate, like [`crate::Method`]
/// but over [`HopsPlan`] / [`HopsObservation`].
pub trait HopMethod {
    fn name(&self) -> &'static str;
    fn next_plan(&mut self) -> HopsPlan;
    fn observe(&mut self, obs: &HopsObservation);
    fn estimate(&self) -> Option<HopsEstimate>;
}

/// Settings of [`Hops`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct HopsConfig {
    /// Trains in all (discovery included).
    pub trains: u32,
    /// Back-to-back trains first.
    pub discovery_trains: u32,
    /// The last trains are paced check trains when the back-to-back trains
    /// stepped down at a hop ahead of the tight link the scan found
    /// ([`narrow`]): two as long as the back-to-back trains, at two input
    /// rates, that check whether that step clamps them (an idle link), one
    /// longer at the faster rate (the two lengths give that link's
    /// capacity), then `probe_trains` that check whether the tight link is
    /// wider than it.  What tells a narrow link ahead of the
    /// tight one apart.  Without such a step the scan gets those trains.
    pub check_train: bool,
    pub probe_trains: u32,
    /// Probe trains last at least this long, in packets of this size, up
    /// to `max_probe_packets`.
    pub probe_span: DurationNs,
    pub probe_packet: Bytes,
    pub max_probe_packets: u32,
    /// The train (its `load_rate` and `idle_before` are the method's).
    pub train: HopTrainSpec,
    /// Idle time between trains, for the routers' ICMP rate limits.
    pub train_gap: DurationNs,
    /// The scan gives up below this rate.
    pub floor: BitRate,
    /// Scan trains last at least this long (their load grows with the
    /// rate, up to `max_load_packets`): the head and tail markers' queueing
    /// delays differ by up to a millisecond or so on a busy link, which must
    /// stay small beside the train's span.
    pub scan_span: DurationNs,
    pub max_load_packets: u32,
}

impl Default for HopsConfig {
    fn default() -> Self {
        HopsConfig {
            trains: 14,
            discovery_trains: 2,
            check_train: true,
            probe_trains: 2,
            probe_span: DurationNs::from_ms(60),
            probe_packet: Bytes(1400),
            max_probe_packets: 400,
            train: HopTrainSpec::pathneck_default(),
            train_gap: DurationNs::from_secs(2),
            floor: BitRate::from_mbps(0.5),
            scan_span: DurationNs::from_ms(25),
            max_load_packets: 200,
        }
    }
}

/// One hop as reported.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HopReport {
    pub ttl: u8,
    /// The address that answered most often; `None` for a silent hop.
    pub address: Option<IpAddr>,
    /// Median round trip of its head answers.
    #[serde(with = "crate::units::serde_secs::option")]
    pub rtt: Option<DurationNs>,
    /// Median rate the back-to-back trains left it at.
    pub rate: Option<BitRate>,
    /// Marker answers received / asked for.
    pub answers: u32,
    pub asked: u32,
    /// This hop is the far end.
    pub destination: bool,
}

/// The tight link: the link between two measured hops where trains paced
/// just above the path's available bandwidth first spread.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TightLink {
    /// The nearest measured hop before it (0: the sender itself).
    pub from_ttl: u8,
    pub to_ttl: u8,
    pub from_address: Option<IpAddr>,
    pub to_address: Option<IpAddr>,
    /// The lowest load rate at which this link spread a train.
    pub rate_in: BitRate,
    /// The rate the train left it at then.
    pub rate_out: BitRate,
    /// The highest load rate it let through unspread (below `rate_in`), if
    /// any train was that slow.
    pub passed: Option<BitRate>,
    /// The link's available bandwidth: the scan trains that came into it
    /// above that rate, read back through the fluid model
    /// (`corrected_available`); at most `rate_in`.  With a narrow link
    /// named ahead of it, read again with the capacity that link shows it
    /// has at least.  `passed` and `rate_in` are the bracket the trains showed
    /// as they were; a train a little above the available bandwidth passes,
    /// spread by less than the threshold, so `passed` may lie above it.
    pub available: BitRate,
    /// Trains near the lowest spreading rate that name this link, of those
    /// considered.
    pub agreeing: u32,
    pub considered: u32,
    pub confidence: f64,
}

/// How the narrow link's capacity was told.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CapacityFrom {
    /// After the tight link: the back-to-back trains left it at their
    /// slowest, a step down from the hop before.
    Slowest,
    /// Ahead of the tight link: it left back-to-back trains and the slower
    /// check train at the same rate (an idle link at its capacity), and the
    /// tight link after it is wider by the fluid model.
    Clamp,
}

/// The narrow link (least capacity), when it is told apart from the tight
/// link ([`narrow`] says how, on either side of it).  A link can only slow
/// a train down to its capacity (to `C·R/(R+X)` with cross traffic `X`), so
/// `rate` is at most that link's capacity, and equal to it for an idle link.
/// Reported only when it is not the tight link.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NarrowLink {
    pub from_ttl: u8,
    pub to_ttl: u8,
    pub from_address: Option<IpAddr>,
    pub to_address: Option<IpAddr>,
    /// The rate the back-to-back trains came in at (the hop before's exit).
    pub rate_in: BitRate,
    /// The rate they left it at: at most its capacity.
    pub rate: BitRate,
    pub capacity_from: CapacityFrom,
    /// Ahead of the tight link: the check train's rate into this link and
    /// out of it (the same `rate` for a slower input: it clamps).
    pub check_rate_in: Option<BitRate>,
    pub check_rate: Option<BitRate>,
    /// Ahead of the tight link: the least available bandwidth the tight
    /// link could have were it no wider than this link
    /// ([`narrow::if_no_wider`]), and the mean exit over input rate of the
    /// trains that came into it well below that (under 1: it spread them,
    /// so it is wider).
    pub tight_available_if_no_wider: Option<BitRate>,
    pub tight_ratio: Option<f64>,
    /// Ahead of the tight link: the tight link's capacity by the fluid
    /// model ([`narrow::fluid_capacity`]), when it could be read; at least
    /// [`narrow::WIDER`] above this link's when that named it.
    pub tight_capacity: Option<BitRate>,
}

/// What `hops` found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HopsEstimate {
    pub hops: Vec<HopReport>,
    pub tight_link: Option<TightLink>,
    /// Where back-to-back trains reach their slowest, when that is not the
    /// tight link (see [`NarrowLink`]).
    pub narrow_link: Option<NarrowLink>,
    /// TTLs below the far end that never answered.
    pub silent: Vec<u8>,
    pub destination_ttl: Option<u8>,
    pub trains: u32,
    pub probe_bytes: Bytes,
    /// Packets sent, markers and load (absent from runs archived before it
    /// was kept: 0).
    #[serde(default)]
    pub probe_packets: u64,
    /// How closely the sender kept the paced trains' planned rates
    /// (absent from runs archived before it was kept).
    #[serde(default)]
    pub pacing: pacing::PacingSummary,
    pub notes: Vec<String>,
}

/// How the note of a run whose sender fell short of its scan trains'
/// rates begins ([`HopsEstimate::host_pacing`]).
const SENDER_SHORT: &str = "the sender reached only ";

impl HopsEstimate {
    /// The note saying the sender could not reach the rates the scan asked
    /// for, when it could not: the host, not the path, then capped how fast
    /// a hop was tested, which a comparison counts as host-limited.
    pub fn host_pacing(&self) -> Option<&str> {
        self.notes
            .iter()
            .map(String::as_str)
            .find(|n| n.starts_with(SENDER_SHORT))
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    Discovery,
    Check,
    Scan,
    Done,
}

/// The pathneck-style hop method (see the module comment).
#[derive(Debug, Clone)]
pub struct Hops {
    cfg: HopsConfig,
    phase: Phase,
    markers: u8,
    sent: u32,
    /// Discovery trains, analysed.
    discovery: Vec<TrainHops>,
    /// The check trains (their load rate and what they said), see
    /// [`narrow`]: the clamp check first, the long check second.
    checks: Vec<(BitRate, TrainHops)>,
    /// Scan trains the sender could not pace as asked: (asked, reached).
    short: Vec<(BitRate, BitRate)>,
    /// Check trains to send, once the scan showed they are needed.
    check_rates: Vec<BitRate>,
    /// Whether the checks were decided on, and the tight link they test.
    checks_decided: bool,
    check_tight: Option<u8>,
    /// Scan trains: the load rate asked and what they said.
    scan: Vec<(BitRate, TrainHops)>,
    /// Answers and asks per TTL over every train.
    answers: BTreeMap<u8, (u32, u32)>,
    /// Every address seen per TTL and how often.
    addresses: BTreeMap<u8, BTreeMap<IpAddr, u32>>,
    rtts: BTreeMap<u8, Vec<f64>>,
    destination: Option<u8>,
    next_rate: Option<BitRate>,
    bytes: Bytes,
    packets: u64,
    notes: Vec<String>,
    refusals: plan::Refusals,
    /// Every paced train's send-stamped rate against its plan.
    pacing: pacing::PacingLog,
}

impl Hops {
    pub fn new(cfg: HopsConfig) -> Hops {
        Hops {
            cfg,
            phase: Phase::Discovery,
            markers: cfg.train.markers,
            sent: 0,
            discovery: Vec::new(),
            checks: Vec::new(),
            check_rates: Vec::new(),
            checks_decided: false,
            check_tight: None,
            scan: Vec::new(),
            short: Vec::new(),
            answers: BTreeMap::new(),
            addresses: BTreeMap::new(),
            rtts: BTreeMap::new(),
            destination: None,
            next_rate: None,
            bytes: Bytes(0),
            packets: 0,
            notes: Vec::new(),
            refusals: plan::Refusals::default(),
            pacing: pacing::PacingLog::default(),
        }
    }

    fn spec(&self, rate: Option<BitRate>) -> HopTrainSpec {
        let mut s = self.cfg.train;
        s.markers = self.markers;
        s.load_rate = rate;
        if let Some(r) = rate {
            let want = r.bytes_in(self.cfg.scan_span).get() / s.load_size.get().max(1);
            let want = u32::try_from(want).unwrap_or(u32::MAX);
            s.load_packets = want.clamp(
                s.load_packets,
                self.cfg.max_load_packets.max(s.load_packets),
            );
        }
        s.idle_before = if self.sent == 0 {
            DurationNs::ZERO
        } else {
            self.cfg.train_gap
        };
        s
    }

    /// The clamp check train ([`narrow::clamp`]): paced, as many packets
    /// as the back-to-back trains, of full size.  Both check trains are one
    /// length: a link that gives a train a head start (a shaper's bucket
    /// lets its first few packets through at once) makes a short train
    /// leave an idle link faster than the link's rate, by a factor that
    /// depends on the train's length only; trains of one length get the
    /// same factor, and the comparison stays a test of whether the exit
    /// moves with the input.  Full-size packets ask the sender for 2.8
    /// times fewer packets a second than 500-byte ones at the same rate:
    /// the lab's two-core sender, whose every send also runs the routers'
    /// forwarding, reached only 80-130 Mb/s of 500-byte check trains asked
    /// for 100-190 (lab, topologies 4 and 8, 1169bbf and this change's
    /// trials), below the span the check needs on an 80-85 Mb/s link.
    fn check_spec(&self, rate: BitRate) -> HopTrainSpec {
        let mut s = self.spec(Some(rate));
        s.load_packets = self.cfg.train.load_packets;
        s.load_size = self.cfg.probe_packet;
        s
    }

    /// The long check train ([`narrow::two_lengths`]): the clamp check
    /// train's packets at its rate, [`narrow::LONG_CHECK`] times as many.
    fn long_check_spec(&self, rate: BitRate) -> HopTrainSpec {
        let mut s = self.check_spec(rate);
        s.load_packets = (f64::from(s.load_packets) * narrow::LONG_CHECK).round() as u32;
        s
    }

    /// A probe train of the tight link ([`narrow`]): long, of full-size
    /// packets, so that the head and tail markers' queueing delays (up to a
    /// millisecond or so on a busy link) stay small beside a spread of a few
    /// per cent.
    fn probe_spec(&self, rate: BitRate) -> HopTrainSpec {
        let mut s = self.spec(Some(rate));
        s.load_size = self.cfg.probe_packet;
        let want = rate.bytes_in(self.cfg.probe_span).get() / s.load_size.get().max(1);
        s.load_packets = u32::try_from(want)
            .unwrap_or(u32::MAX)
            .clamp(self.cfg.train.load_packets, self.cfg.max_probe_packets);
        s
    }

    /// Shrinks the markers to the far end's distance (or just past the
    /// farthest hop that answered) once a train has shown it.
    fn learn_distance(&mut self, t: &TrainHops) {
        if let Some(d) = t.destination {
            self.destination = Some(self.destination.map_or(d, |x| x.min(d)));
            self.markers = self.markers.min(d);
        } else if self.destination.is_none() {
            if let Some((&far, _)) = t.seen.iter().next_back() {
                self.markers = self.markers.min(far.saturating_add(2));
            }
        }
    }

    /// The first scan rate: the discovery trains' median exit rate at their
    /// last measured hop, above the smallest available bandwidth.
    fn top_rate(&self) -> Option<BitRate> {
        let exits: Vec<f64> = self
            .discovery
            .iter()
            .filter_map(|t| t.gaps.last().map(|g| g.exit_bps()))
            .collect();
        crate::stats::median(&exits).map(BitRate::from_bps)
    }

    /// Scan trains as (load rate, whether some hop spread it).
    fn verdicts(&self) -> Vec<(f64, bool)> {
        self.scan
            .iter()
            .filter(|(_, t)| !t.gaps.is_empty())
            .map(|(r, t)| (r.bps(), t.first_expansion().is_some()))
            .collect()
    }

    /// Whether the remaining trains go to the narrow-link checks: once, when
    /// just enough are left for them after a scan of at least two, and only
    /// if the back-to-back trains stepped down at a hop ahead of the tight
    /// link found so far.
    fn decide_checks(&mut self) -> bool {
        let wanted = 3 + self.cfg.probe_trains;
        if self.checks_decided
            || !self.cfg.check_train
            || self.sent + wanted < self.cfg.trains
            || self.scan.len() < 2
        {
            return false;
        }
        self.checks_decided = true;
        let p = narrow::profile(&self.discovery);
        let Some((k, clamp, probe)) = narrow::candidate(&p) else {
            return false;
        };
        let Some(t) = tight_link(self, &[]).filter(|t| t.to_ttl > k.ttl) else {
            return false;
        };
        self.check_tight = Some(t.to_ttl);
        let probe = narrow::probe_rate_before_check(&p, &k, t.to_ttl).unwrap_or(probe);
        let slow = BitRate::from_bps(narrow::LOW_CHECK * k.rate);
        // No probe trains where no positive rate could be told for them.
        let probes = if probe.bps() > 0.0 {
            self.cfg.probe_trains
        } else {
            0
        };
        self.check_rates = [clamp, slow, clamp]
            .into_iter()
            .chain((0..probes).map(|_| probe))
            .collect();
        true
    }

    fn pick_next_rate(&mut self) {
        self.next_rate = match split(&self.verdicts()) {
            (None, Some(h)) => Some(h * 0.7),
            (Some(l), None) => Some(l * 1.4),
            (Some(l), Some(h)) => Some((l * h).sqrt()),
            (None, None) => self.top_rate().map(|r| r.bps()),
        }
        .map(BitRate::from_bps);
    }
}

/// A paced train that left the sender this much slower than asked is read
/// at the rate it left at: more is pacing noise.
const SHORT: f64 = 0.05;

/// The rate a paced train entered the path at: the sender's own send
/// stamps when it fell more than [`SHORT`] short of the plan (a busy host,
/// a pacer that cannot go faster), else the plan.  A train read as passing
/// at a rate it never reached would put the bracket — a number the host
/// made — above the path's available bandwidth (a sender held to 75 Mb/s
/// gave "222 Mb/s" for a 60 Mb/s tight link on the synthetic path).
fn entered(asked: BitRate, t: &TrainHops) -> BitRate {
    match t.sent_rate {
        Some(s) if s.bps() < asked.bps() * (1.0 - SHORT) => s,
        _ => asked,
    }
}

/// Where a set of (rate, spread) verdicts changes from "passed" to "spread":
/// the threshold that the fewest verdicts contradict, as the highest passing
/// rate below it and the lowest spreading rate above it.  One train that
/// Poisson cross traffic spread below the available bandwidth (or let pass
/// above it) then moves nothing, where a plain bisection would follow it.
fn split(points: &[(f64, bool)]) -> (Option<f64>, Option<f64>) {
    let mut p: Vec<(f64, bool)> = points.to_vec();
    p.sort_by(|a, b| a.0.total_cmp(&b.0));
    // Threshold just below p[i] (i = len: above every point): cost is the
    // spread points below it plus the passed points at or above it.
    let mut best = (usize::MAX, 0usize);
    for i in 0..=p.len() {
        let cost = p[..i].iter().filter(|x| x.1).count() + p[i..].iter().filter(|x| !x.1).count();
        // Ties go to the higher threshold: a spread seen is surer than a
        // pass (a pass may only mean the spread was too small to see).
        if cost <= best.0 {
            best = (cost, i);
        }
    }
    let i = best.1;
    let lo = p[..i].iter().rev().find(|x| !x.1).map(|x| x.0);
    let hi = p[i..].iter().find(|x| x.1).map(|x| x.0);
    (lo, hi)
}

impl HopMethod for Hops {
    fn name(&self) -> &'static str {
        "hops"
    }

    fn next_plan(&mut self) -> HopsPlan {
        if self.sent >= self.cfg.trains {
            self.phase = Phase::Done;
        }
        if self.phase == Phase::Scan && self.decide_checks() {
            self.phase = Phase::Check;
        }
        let plan = match self.phase {
            Phase::Discovery => self.spec(None),
            Phase::Check => match self.check_rates.get(self.checks.len()).copied() {
                Some(r) if self.checks.len() < 2 => self.check_spec(r),
                Some(r) if self.checks.len() == 2 => self.long_check_spec(r),
                Some(r) => self.probe_spec(r),
                None => {
                    self.phase = Phase::Scan;
                    return self.next_plan();
                }
            },
            Phase::Scan => match self.next_rate {
                Some(r) if r.bps() >= self.cfg.floor.bps() => self.spec(Some(r)),
                Some(_) => {
                    self.notes.push(format!(
                        "no hop spread a train paced at {} or more: no tight link stood out",
                        self.cfg.floor
                    ));
                    self.phase = Phase::Done;
                    return HopsPlan::Done;
                }
                None => {
                    self.phase = Phase::Done;
                    return HopsPlan::Done;
                }
            },
            Phase::Done => return HopsPlan::Done,
        };
        self.sent += 1;
        HopsPlan::Train(plan)
    }

    fn observe(&mut self, obs: &HopsObservation) {
        let t = analyse(obs);
        self.bytes += obs.spec.total_bytes();
        self.packets += u64::from(obs.spec.total_packets());
        self.refusals.add(obs);
        if let (Some(asked), Some(sent)) = (obs.spec.load_rate, t.sent_rate) {
            self.pacing.add(asked, sent);
        }
        for ttl in 1..=obs.spec.markers {
            let e = self.answers.entry(ttl).or_default();
            e.1 += 2;
            for role in [Role::Head, Role::Tail] {
                let seq = obs.spec.marker_seq(role, ttl);
                if let Some(a) = obs.answers.iter().find(|a| Some(a.seq) == seq) {
                    e.0 += 1;
                    *self
                        .addresses
                        .entry(ttl)
                        .or_default()
                        .entry(a.from)
                        .or_default() += 1;
                }
            }
        }
        for (&ttl, &(_, rtt)) in &t.seen {
            if let Some(r) = rtt {
                self.rtts.entry(ttl).or_default().push(r.secs_f64());
            }
        }
        self.learn_distance(&t);
        match (self.phase, obs.spec.load_rate) {
            (Phase::Check, Some(rate)) => {
                if let [(_, short), (_, slow)] = self.checks.as_slice() {
                    // The probes' rate, from the long check train's steadier
                    // exit at the tight link and the two check trains'
                    // capacity of the candidate.
                    let p = narrow::profile(&self.discovery);
                    // The scan is over (the checks come last): its reading
                    // of the tight link's available bandwidth is final.
                    let a_scan = tight_link(self, &[]).map_or(0.0, |x| x.available.bps());
                    let r = self
                        .check_tight
                        .and_then(|j| narrow::probe_rate(&p, j, short, slow, &t, a_scan));
                    if let Some(r) = r {
                        for x in self.check_rates.iter_mut().skip(3) {
                            *x = r;
                        }
                    }
                }
                self.checks.push((rate, t));
                if self.checks.len() >= self.check_rates.len() {
                    self.phase = Phase::Scan;
                }
            }
            (_, None) => {
                self.discovery.push(t);
                if self.discovery.len() as u32 >= self.cfg.discovery_trains {
                    self.phase = Phase::Scan;
                    self.pick_next_rate();
                    if self.next_rate.is_none() {
                        self.notes.push(
                            "no hop answered both markers of a train: nothing to scan".into(),
                        );
                    }
                }
            }
            (_, Some(rate)) => {
                if t.gaps.is_empty() {
                    self.notes.push(format!(
                        "train {} at {rate}: no hop answered both markers",
                        obs.train
                    ));
                }
                let entered = entered(rate, &t);
                if entered != rate {
                    self.short.push((rate, entered));
                }
                self.scan.push((entered, t));
                self.pick_next_rate();
            }
        }
    }

    fn estimate(&self) -> Option<HopsEstimate> {
        if self.sent == 0 {
            return None;
        }
        Some(build_estimate(self))
    }
}

fn median_rate(xs: &[f64]) -> Option<BitRate> {
    crate::stats::median(xs).map(BitRate::from_bps)
}

fn build_estimate(m: &Hops) -> HopsEstimate {
    let last = m.destination.unwrap_or(m.markers);
    let mut hops = Vec::new();
    let mut silent = Vec::new();
    for ttl in 1..=last {
        let (got, asked) = m.answers.get(&ttl).copied().unwrap_or((0, 0));
        let address = m
            .addresses
            .get(&ttl)
            .and_then(|a| a.iter().max_by_key(|(_, n)| **n).map(|(ip, _)| *ip));
        if address.is_none() && Some(ttl) != m.destination {
            silent.push(ttl);
        }
        let rates: Vec<f64> = m
            .discovery
            .iter()
            .flat_map(|t| t.gaps.iter().filter(|g| g.ttl == ttl).map(|g| g.exit_bps()))
            .collect();
        hops.push(HopReport {
            ttl,
            address,
            rtt: m
                .rtts
                .get(&ttl)
                .and_then(|v| crate::stats::median(v))
                .map(DurationNs::from_secs_f64),
            rate: median_rate(&rates),
            answers: got,
            asked,
            destination: Some(ttl) == m.destination,
        });
    }
    let mut notes = m.notes.clone();
    notes.extend(m.refusals.note());
    if !silent.is_empty() {
        notes.push(format!(
            "{} hop(s) never answered (ICMP filtered or rate-limited): TTL {}",
            silent.len(),
            silent
                .iter()
                .map(u8::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if m.destination.is_some() {
        notes.push(
            "the link into the far end is not measured: the load reaches the far end, whose own answers are rate-limited and spent on it".into(),
        );
    }
    if let Some((asked, reached)) = m
        .short
        .iter()
        .max_by(|a, b| a.0.bps().total_cmp(&b.0.bps()))
    {
        notes.push(format!(
            "{SENDER_SHORT}{reached} of the {asked} asked (the fastest train asked; {} of {} scan trains fell more than {:.0} % short): host pacing; each is read at the rate it left at, and no hop was tested faster than the sender went",
            m.short.len(),
            m.scan.len(),
            SHORT * 100.0
        ));
    }
    let pacing = m.pacing.summary();
    notes.extend(pacing.note());
    let mut tight_link = tight_link(m, &hops);
    let (narrow_link, why_not) = narrow_link(m, &hops, tight_link.as_ref());
    // A narrow link named ahead of the tight one says how wide the tight
    // link is at least (wider than it, and the fluid reading): the bound
    // `available` was read with was the back-to-back exit, which that
    // narrower link kept low.
    if let (Some(t), Some(n)) = (tight_link.as_mut(), narrow_link.as_ref()) {
        if n.capacity_from == CapacityFrom::Clamp {
            let floor = n.tight_capacity.map_or(0.0, |c| c.bps()).max(n.rate.bps());
            let a = fluid_available(&m.scan, t.to_ttl, t.rate_in.bps(), floor);
            t.available = BitRate::from_bps(a.min(t.available.bps()));
        }
    }
    notes.extend(why_not);
    if tight_link.is_none() && !m.scan.is_empty() {
        notes.push("no train paced in the scan was spread by any hop".into());
    }
    HopsEstimate {
        hops,
        tight_link,
        narrow_link,
        silent,
        destination_ttl: m.destination,
        trains: (m.discovery.len() + m.checks.len() + m.scan.len()) as u32,
        probe_bytes: m.bytes,
        probe_packets: m.packets,
        pacing,
        notes,
    }
}

/// The narrow link after the tight one, else ahead of it ([`narrow`]);
/// `None` with the reasons when neither holds.
fn narrow_link(
    m: &Hops,
    hops: &[HopReport],
    tight: Option<&TightLink>,
) -> (Option<NarrowLink>, Option<String>) {
    let p = narrow::profile(&m.discovery);
    let after = narrow::after(&p, &m.discovery, hops, tight, &m.checks);
    let ahead = narrow::ahead(&p, hops, tight, &m.checks, &m.scan);
    match (after, ahead) {
        (Ok(n), _) | (_, Ok(n)) => (Some(n), None),
        (Err(a), Err(b)) => (
            None,
            Some(format!(
                "narrow link not told apart from the tight link: after it, {a}; ahead of it, {b}"
            )),
        ),
    }
}

/// How many of the lowest-rate spreading trains vote on the tight link.
const VOTERS: usize = 4;

/// The tight link's available bandwidth, from every scan train measured
/// at it.
///
/// A train is seen to spread only when it leaves the link [`EXPANSION`]
/// slower than it came in; by the fluid model (`in/out − 1 = (in − A)/C`
/// for a FIFO link of capacity `C` carrying `C − A`) that takes an input
/// of about `A + EXPANSION·C`, 10–40 % above `A` on the paths tried, and a
/// bracket of the rates that passed and spread sat that far high.  So each
/// train that came into the link above `A` is read back through the same
/// line, `A ≈ in − C·(in/out − 1)`, with `C` bounded below by the fastest
/// the link was seen to let trains out (the back-to-back trains' median
/// exit, or the train's own).  With a lower bound of `C` each reading is,
/// in the fluid model, an upper bound of `A`: the estimate can sit high
/// when a narrower link ahead hides how wide the tight one is, never low
/// for that reason.
///
/// Which trains came in above `A` is what is being estimated, so the
/// estimate is the fixed point of "the median reading of the trains that
/// came in above it", started at the lowest spreading rate.  The verdicts
/// do not pick the trains: reading only the trains spread past the
/// threshold keeps the ones Poisson bursts spread most, and read 6–15 %
/// low on the synthetic paths.  Reading `C` off a line fitted through the
/// trains instead (TOPP, hop by hop) was tried first and dropped: near
/// `A` Poisson cross traffic spreads trains more than the fluid does, and
/// the fitted slope fell 45 % short.
///
/// [`EXPANSION`]: analysis::EXPANSION
fn corrected_available(m: &Hops, ttl: u8, rate_in: BitRate) -> BitRate {
    let capacity_floor = narrow::profile(&m.discovery)
        .iter()
        .find(|h| h.ttl == ttl)
        .map_or(0.0, |h| h.rate);
    BitRate::from_bps(fluid_available(&m.scan, ttl, rate_in.bps(), capacity_floor))
}

/// The fixed point of [`corrected_available`] for a given lower bound of
/// the link's capacity (`capacity`; a train's own exit there bounds it
/// too): the median of `in − C·(in/out − 1)` over the `scan` trains that
/// came into hop `ttl` above it, started at and at most `rate_in`.
pub(crate) fn fluid_available(
    scan: &[(BitRate, TrainHops)],
    ttl: u8,
    rate_in: f64,
    capacity: f64,
) -> f64 {
    // (rate into the link, reading of A) per scan train measured there.
    let readings: Vec<(f64, f64)> = scan
        .iter()
        .filter_map(|(_, t)| t.gaps.iter().find(|g| g.ttl == ttl))
        .filter_map(|g| {
            let into = g.rate_in?.bps();
            let out = g.rate.bps();
            let c = capacity.max(out);
            Some((into, into - c * (into / out - 1.0)))
        })
        .collect();
    let mut a = rate_in;
    for _ in 0..16 {
        let above: Vec<f64> = readings
            .iter()
            .filter(|(into, _)| *into > a)
            .map(|(_, r)| *r)
            .collect();
        let Some(next) = crate::stats::median(&above) else {
            break;
        };
        let next = next.clamp(0.0, rate_in);
        if (next - a).abs() <= 1e-6 * a {
            break;
        }
        a = next;
    }
    a
}

fn tight_link(m: &Hops, hops: &[HopReport]) -> Option<TightLink> {
    // Scan trains some hop spread, slowest first.
    // Trains spread below the split are outliers (Poisson bursts): they
    // neither vote nor bound the available bandwidth.
    let (_, hi) = split(&m.verdicts());
    let floor = hi.unwrap_or(0.0);
    let mut spread: Vec<(BitRate, analysis::HopGap)> = m
        .scan
        .iter()
        .filter(|(r, _)| r.bps() >= floor)
        .filter_map(|(r, t)| t.first_expansion().map(|g| (*r, *g)))
        .collect();
    spread.sort_by(|a, b| a.0.bps().total_cmp(&b.0.bps()));
    let voters = &spread[..spread.len().min(VOTERS)];
    let mut votes: BTreeMap<(u8, u8), u32> = BTreeMap::new();
    for (_, g) in voters {
        *votes.entry((g.prev_ttl, g.ttl)).or_default() += 1;
    }
    // Most votes; ties go to the link named at the lowest rate.
    let best = votes.values().copied().max()?;
    let (rate_in, g) = voters
        .iter()
        .find(|(_, g)| votes[&(g.prev_ttl, g.ttl)] == best)
        .copied()?;
    let passed = m
        .scan
        .iter()
        .filter(|(r, t)| {
            r.bps() < rate_in.bps()
                && !t.gaps.is_empty()
                && !t.gaps.iter().any(|x| x.ttl == g.ttl && x.expanded())
        })
        .map(|(r, _)| *r)
        .max_by(|a, b| a.bps().total_cmp(&b.bps()));
    let available = corrected_available(m, g.ttl, rate_in);
    let addr = |ttl: u8| hops.iter().find(|h| h.ttl == ttl).and_then(|h| h.address);
    Some(TightLink {
        from_ttl: g.prev_ttl,
        to_ttl: g.ttl,
        from_address: addr(g.prev_ttl),
        to_address: addr(g.ttl),
        rate_in,
        rate_out: g.rate,
        passed,
        available,
        agreeing: best,
        considered: voters.len() as u32,
        confidence: f64::from(best) / voters.len() as f64,
    })
}
