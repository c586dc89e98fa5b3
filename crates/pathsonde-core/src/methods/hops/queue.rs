//! `hops --queue` (core only, not yet wired to the command): each hop's
//! largest loss-free burst, netest's maximum burst size (MBS) hop by hop.
//!
//! A hop train *is* a burst with TTL-limited head and tail markers: its load
//! goes back to back, and a link whose queue overflows drops the burst's end,
//! the tail markers of every hop at and beyond it among them, while their
//! head markers (first in) pass.  So in one burst of `N` load packets, the
//! first hop whose head answered and whose tail did not is where the burst
//! overflowed; the hops before it passed it whole.  The method bisects `N`
//! (doubling until a burst is lost, then halving the bracket) and keeps, per
//! hop, the largest burst whose tail came back.
//!
//! Two things make the markers honest witnesses: they are as large as the
//! load packets (a byte-limited queue that is full still takes a 60-byte
//! marker when a large packet leaves it), and a burst counts as lost only
//! when at least half of the tails from the overflowing hop on are missing
//! (once the queue is full, one packet in `line rate / C` still gets in),
//! and the short link is the nearest hop where a lost burst of the smallest
//! lost size first missed a tail (a lucky tail at the short link moves one
//! burst's first gap a hop on, never back).  A
//! missing tail may also be the router's ICMP rate limit: bursts are spaced
//! like the other trains (2 answers per router each), and a first loss at a
//! size is sent again before it counts.

use super::analysis::analyse;
use super::plan::{HopTrainSpec, HopsObservation, HopsPlan, Role};
use crate::units::{Bytes, DurationNs};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Settings of [`HopQueue`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct QueueConfig {
    /// Bursts in all.
    pub bursts: u32,
    /// Markers (the farthest hop asked about).
    pub markers: u8,
    /// Size of every packet of a burst, markers included.
    pub packet: Bytes,
    /// Load packets of the first burst.
    pub first: u32,
    /// Bursts never exceed this many load packets.
    pub max_packets: u32,
    /// Idle time before each burst, for the routers' ICMP rate limits and
    /// for the queues to drain.
    pub gap: DurationNs,
}

impl Default for QueueConfig {
    fn default() -> Self {
        QueueConfig {
            bursts: 8,
            markers: 30,
            packet: Bytes(1400),
            first: 32,
            max_packets: 2048,
            gap: DurationNs::from_secs(2),
        }
    }
}

/// One hop's bursts.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct HopBurst {
    pub ttl: u8,
    /// The largest burst (load and markers) whose tail marker came back
    /// from this hop.
    pub passed: Option<Bytes>,
    /// The smallest burst first lost at this hop.
    pub lost: Option<Bytes>,
}

/// What `--queue` found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueueEstimate {
    pub hops: Vec<HopBurst>,
    /// The link (the hop at its end) where the smallest lost burst was
    /// lost: the short queue.
    pub first_overflow: Option<u8>,
    /// The path's MBS as bracketed: the largest burst no hop lost, and the
    /// smallest one some hop lost.
    pub mbs_passed: Option<Bytes>,
    pub mbs_lost: Option<Bytes>,
    pub bursts: u32,
    pub probe_bytes: Bytes,
    pub notes: Vec<String>,
}

/// What one burst said: the first hop that lost it, if any, and which hops'
/// tails came back.
#[derive(Debug, Clone, PartialEq)]
struct BurstVerdict {
    lost_at: Option<u8>,
    tails: Vec<u8>,
}

/// The `--queue` method (see the module comment).
#[derive(Debug, Clone)]
pub struct HopQueue {
    cfg: QueueConfig,
    markers: u8,
    sent: u32,
    next: Option<u32>,
    /// The next burst repeats a lost size (`Some(size)`): it carries one
    /// load packet more, so that the tail markers meet the full queue's
    /// free slots at other places (from a sender at line rate they fall the
    /// same way each time), and counts as that size.
    repeat_of: Option<u32>,
    /// Load packets → verdicts at that size.
    seen: BTreeMap<u32, Vec<BurstVerdict>>,
    destination: Option<u8>,
    bytes: Bytes,
    notes: Vec<String>,
    refusals: super::plan::Refusals,
}

impl HopQueue {
    pub fn new(cfg: QueueConfig) -> HopQueue {
        HopQueue {
            markers: cfg.markers,
            next: Some(cfg.first.max(1)),
            repeat_of: None,
            cfg,
            sent: 0,
            seen: BTreeMap::new(),
            destination: None,
            bytes: Bytes(0),
            notes: Vec::new(),
            refusals: super::plan::Refusals::default(),
        }
    }

    fn spec(&self, load: u32) -> HopTrainSpec {
        HopTrainSpec {
            markers: self.markers,
            marker_size: self.cfg.packet,
            load_packets: load,
            load_size: self.cfg.packet,
            load_ttl: 255,
            load_rate: None,
            idle_before: if self.sent == 0 {
                DurationNs::ZERO
            } else {
                self.cfg.gap
            },
        }
    }

    /// A size is lost when its bursts were lost at least as often as not
    /// (one burst: lost; a lost burst is sent again, see `pick`).
    fn lost(&self, n: u32) -> Option<bool> {
        let v = self.seen.get(&n)?;
        let lost = v.iter().filter(|b| b.lost_at.is_some()).count();
        Some(2 * lost >= v.len() && lost > 0)
    }

    fn pick(&mut self) {
        // A first loss at a size is repeated before it counts.
        if let Some(&n) = self
            .seen
            .iter()
            .find(|(_, v)| v.len() == 1 && v[0].lost_at.is_some())
            .map(|(n, _)| n)
        {
            self.next = Some(n + 1);
            self.repeat_of = Some(n);
            return;
        }
        let passed = self
            .seen
            .keys()
            .copied()
            .filter(|&n| self.lost(n) == Some(false))
            .max();
        let lost = self
            .seen
            .keys()
            .copied()
            .filter(|&n| self.lost(n) == Some(true))
            .min();
        self.next = match (passed, lost) {
            (Some(p), None) => {
                (p < self.cfg.max_packets).then(|| (2 * p).min(self.cfg.max_packets))
            }
            (None, Some(l)) => (l > 1).then_some(l / 2),
            (Some(p), Some(l)) => (l > p + 1).then(|| p + (l - p) / 2),
            (None, None) => Some(self.cfg.first.max(1)),
        };
    }

    /// A burst's bytes: its load and its head and tail markers, all sent
    /// back to back (as the markers were at the last burst).
    fn burst_bytes(&self, n: u32) -> Bytes {
        Bytes((u64::from(n) + 2 * u64::from(self.markers)) * self.cfg.packet.get())
    }

    pub fn next_plan(&mut self) -> HopsPlan {
        if self.sent >= self.cfg.bursts {
            return HopsPlan::Done;
        }
        match self.next {
            Some(n) => {
                let s = self.spec(n);
                self.sent += 1;
                HopsPlan::Train(s)
            }
            None => HopsPlan::Done,
        }
    }

    pub fn observe(&mut self, obs: &HopsObservation) {
        self.bytes += obs.spec.total_bytes();
        self.refusals.add(obs);
        let t = analyse(obs);
        if let Some(d) = t.destination {
            self.destination = Some(self.destination.map_or(d, |x| x.min(d)));
            self.markers = self.markers.min(d);
        }
        let answered = |role, ttl| {
            let seq = obs.spec.marker_seq(role, ttl);
            obs.answers.iter().any(|a| Some(a.seq) == seq)
        };
        let last = self
            .destination
            .map_or(obs.spec.markers, |d| d.saturating_sub(1));
        let mut tails = Vec::new();
        let mut lost_at = None;
        let mut missing = (0u32, 0u32); // (tails missing, heads answered) from lost_at on
        for ttl in 1..=last.min(obs.spec.markers) {
            let head = answered(Role::Head, ttl);
            let tail = answered(Role::Tail, ttl);
            if tail {
                tails.push(ttl);
            }
            if head && lost_at.is_none() && !tail {
                lost_at = Some(ttl);
            }
            if lost_at.is_some() && head {
                missing.1 += 1;
                if !tail {
                    missing.0 += 1;
                }
            }
        }
        // Most tails from there on must be missing, not one.
        if 2 * missing.0 < missing.1 {
            lost_at = None;
        }
        self.seen
            .entry(self.repeat_of.take().unwrap_or(obs.spec.load_packets))
            .or_default()
            .push(BurstVerdict { lost_at, tails });
        self.pick();
    }

    pub fn estimate(&self) -> Option<QueueEstimate> {
        if self.seen.is_empty() {
            return None;
        }
        let mut hops: BTreeMap<u8, HopBurst> = BTreeMap::new();
        for (&n, v) in &self.seen {
            for b in v {
                for &ttl in &b.tails {
                    let h = hops.entry(ttl).or_insert(HopBurst {
                        ttl,
                        passed: None,
                        lost: None,
                    });
                    let bytes = self.burst_bytes(n);
                    h.passed = Some(h.passed.map_or(bytes, |p| p.max(bytes)));
                }
            }
        }
        let mut first_overflow = None;
        let mbs_lost = self
            .seen
            .keys()
            .copied()
            .filter(|&n| self.lost(n) == Some(true))
            .min();
        if let Some(n) = mbs_lost {
            // The nearest hop any of that size's lost bursts named: once the
            // queue at the short link is full, a tail marker for it may
            // still slip in (one packet per departure), moving that burst's
            // first missing tail one hop on, but no tail is lost before it.
            first_overflow = self.seen[&n].iter().filter_map(|b| b.lost_at).min();
            for (&size, v) in &self.seen {
                for b in v {
                    if let Some(t) = b.lost_at {
                        let h = hops.entry(t).or_insert(HopBurst {
                            ttl: t,
                            passed: None,
                            lost: None,
                        });
                        let bytes = self.burst_bytes(size);
                        h.lost = Some(h.lost.map_or(bytes, |l| l.min(bytes)));
                    }
                }
            }
        }
        let mbs_passed = self
            .seen
            .keys()
            .copied()
            .filter(|&n| self.lost(n) == Some(false))
            .max()
            .map(|n| self.burst_bytes(n));
        let mut notes = self.notes.clone();
        notes.extend(self.refusals.note());
        if hops.is_empty() && mbs_lost.is_none() {
            notes.push(
                "no router before the far end answered both markers of a burst: no hop was measured"
                    .into(),
            );
        } else if mbs_lost.is_none() {
            notes.push(format!(
                "no burst was lost, up to {}",
                mbs_passed.map_or("—".into(), |b| b.to_string())
            ));
        }
        Some(QueueEstimate {
            hops: hops.into_values().collect(),
            first_overflow,
            mbs_passed,
            mbs_lost: mbs_lost.map(|n| self.burst_bytes(n)),
            bursts: self.sent,
            probe_bytes: self.bytes,
            notes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synthetic::multihop::{HopLink, MultiHopConfig, MultiHopPath};

    fn run(links: Vec<HopLink>, seed: u64) -> QueueEstimate {
        let mut path = MultiHopPath::new(MultiHopConfig::new(links, seed));
        let mut m = HopQueue::new(QueueConfig::default());
        while let HopsPlan::Train(spec) = m.next_plan() {
            let obs = path.carry(&spec);
            m.observe(&obs);
        }
        assert!(path.elapsed().secs_f64() < 30.0);
        m.estimate().expect("an estimate")
    }

    /// 1 Gb/s at 10 %, then 100 Mb/s whose queue holds `q` bytes, at hop
    /// `at`, the others 1 Gb/s with unlimited queues.
    fn path(at: usize, q: u64) -> Vec<HopLink> {
        let mut links = vec![
            HopLink::new(1000.0, 0.1),
            HopLink::new(1000.0, 0.1),
            HopLink::new(1000.0, 0.1),
            HopLink::new(1000.0, 0.0),
        ];
        links[at - 1] = HopLink::new(100.0, 0.1);
        links[at - 1].queue = Some(Bytes(q));
        links
    }

    #[test]
    fn the_short_queue_is_found_where_it_is() {
        // A burst coming in at 1 Gb/s fills a 100 Mb/s link's queue at 90 %
        // of its own rate, less the 10 % cross traffic's room: a 30 KB
        // queue overflows at a burst (markers included) of about 35-40 KB.
        // The link is at hop 1, 2 or 3 in turn: a method that always names
        // one hop fails.
        for at in [1usize, 2, 3] {
            let est = run(path(at, 30_000), 7 + at as u64);
            assert_eq!(est.first_overflow, Some(at as u8), "{est:?}");
            let lost = est.mbs_lost.expect("a lost burst").get();
            let passed = est.mbs_passed.expect("a passed burst").get();
            assert!(passed < lost, "{est:?}");
            assert!((20_000..=50_000).contains(&lost), "{est:?}");
            // The hop before it passed larger bursts than it did.
            if at > 1 {
                let before = est.hops.iter().find(|h| h.ttl == at as u8 - 1).unwrap();
                assert!(before.passed.unwrap().get() >= lost, "{est:?}");
            }
        }
    }

    #[test]
    fn no_short_queue_loses_nothing() {
        let mut links = path(2, 30_000);
        links[1].queue = None;
        let est = run(links, 3);
        assert_eq!(est.first_overflow, None);
        assert!(est.mbs_lost.is_none());
        assert!(est.notes.iter().any(|n| n.contains("no burst was lost")));
    }
}

/// The figures in docs/hops.md for `--queue`: per position of the short
/// queue and its size, how often its link is named over 20 seeds and the
/// median MBS bracket.  Run with
/// `cargo test -p pathsonde-core --lib hops::queue::figures -- --ignored --nocapture`.
#[cfg(test)]
#[test]
#[ignore]
fn figures() {
    use crate::synthetic::multihop::{HopLink, MultiHopConfig, MultiHopPath};
    for at in 1..=3usize {
        for q in [15_000u64, 30_000, 60_000] {
            let (mut right, mut lo, mut hi, mut secs, mut bytes) =
                (0, Vec::new(), Vec::new(), 0.0f64, Vec::new());
            for seed in 0..20 {
                let mut links = vec![HopLink::new(1000.0, 0.1); 4];
                links[3] = HopLink::new(1000.0, 0.0);
                links[at - 1] = HopLink::new(100.0, 0.1);
                links[at - 1].queue = Some(Bytes(q));
                let mut path = MultiHopPath::new(MultiHopConfig::new(links, 40_000 + seed));
                let mut m = HopQueue::new(QueueConfig::default());
                while let HopsPlan::Train(spec) = m.next_plan() {
                    let obs = path.carry(&spec);
                    m.observe(&obs);
                }
                let est = m.estimate().unwrap();
                if est.first_overflow == Some(at as u8) {
                    right += 1;
                }
                lo.extend(est.mbs_passed.map(|b| b.get() as f64));
                hi.extend(est.mbs_lost.map(|b| b.get() as f64));
                bytes.push(est.probe_bytes.get() as f64);
                secs = secs.max(path.elapsed().secs_f64());
            }
            let med = |v: &[f64]| crate::stats::median(v).unwrap_or(f64::NAN) / 1000.0;
            println!(
                "| {at} | {} | {right}/20 | {:.1} – {:.1} | {:.0} | {secs:.1} |",
                q / 1000,
                med(&lo),
                med(&hi),
                med(&bytes)
            );
        }
    }
}
