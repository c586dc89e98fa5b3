//! The maximum-burst-size search (netest, Jin & Tierney 2003, III.A): send
//! back-to-back bursts of growing size and find the largest that crosses
//! the path without a loss.
//!
//! Sans-IO: [`MbsSearch`] says how many packets the next burst carries and
//! is told how many of them arrived.  The search doubles the burst until one
//! loses a packet, then bisects between the largest lossless and the
//! smallest lossy burst down to a resolution (a fraction of the lossless
//! size, at least one packet).  One search is one MBS sample; run several
//! for the spread ([`summarize`]).

use crate::units::Bytes;
use serde::{Deserialize, Serialize};

/// Settings of one search.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MbsConfig {
    /// IP bytes of every packet of a burst.
    pub packet: Bytes,
    /// The first burst, packets.
    pub start_packets: u32,
    /// The largest burst tried, packets (the search reports "at least" there).
    pub max_packets: u32,
    /// Stop bisecting when the bracket is this fraction of the lossless size.
    pub resolution: f64,
    /// Most bursts one search sends.
    pub max_bursts: u32,
}

impl MbsConfig {
    /// Defaults for `packet`-byte packets and bursts up to `max_burst` bytes.
    pub fn new(packet: Bytes, max_burst: Bytes) -> Self {
        let max = (max_burst.get() / packet.get().max(1)).clamp(2, u64::from(u32::MAX)) as u32;
        MbsConfig {
            packet,
            start_packets: 4.min(max),
            max_packets: max,
            resolution: 0.03,
            max_bursts: 40,
        }
    }
}

/// One burst's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct BurstOutcome {
    pub packets: u32,
    pub lost: u32,
}

#[derive(Debug, Clone, PartialEq)]
pub struct MbsSearch {
    cfg: MbsConfig,
    /// Largest lossless burst seen, packets.
    lossless: u32,
    /// Smallest lossy burst seen, packets.
    lossy: Option<u32>,
    bursts: Vec<BurstOutcome>,
}

/// What one search found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MbsSample {
    /// Largest lossless burst, packets (0 if even the first burst lost).
    pub packets: u32,
    pub bytes: Bytes,
    /// Smallest lossy burst, packets; `None` if no burst up to the cap lost
    /// one (the MBS is at least `bytes`).
    pub lossy_packets: Option<u32>,
    pub bursts: Vec<BurstOutcome>,
}

impl MbsSearch {
    pub fn new(cfg: MbsConfig) -> Self {
        MbsSearch {
            cfg,
            lossless: 0,
            lossy: None,
            bursts: Vec::new(),
        }
    }

    /// Packets in the next burst, or `None` when the search is done.
    pub fn next_burst(&self) -> Option<u32> {
        if self.bursts.len() as u32 >= self.cfg.max_bursts {
            return None;
        }
        match self.lossy {
            None if self.lossless == 0 => Some(self.cfg.start_packets.max(1)),
            None if self.lossless >= self.cfg.max_packets => None,
            None => Some(self.lossless.saturating_mul(2).min(self.cfg.max_packets)),
            Some(hi) => {
                // Below the first size that lost: try single packets down
                // to 1 so that "lossy at any size" still ends.
                if hi <= 1 {
                    return None;
                }
                let step = ((f64::from(self.lossless) * self.cfg.resolution) as u32).max(1);
                if hi - self.lossless <= step {
                    return None;
                }
                Some(self.lossless + (hi - self.lossless) / 2)
            }
        }
    }

    /// Records the outcome of a burst of `packets` that lost `lost`.
    pub fn observe(&mut self, packets: u32, lost: u32) {
        self.bursts.push(BurstOutcome { packets, lost });
        if lost == 0 {
            self.lossless = self.lossless.max(packets);
            // A smaller lossy burst seen earlier (cross traffic) no longer
            // brackets: forget it if it is at or below the new lossless size.
            if self.lossy.is_some_and(|h| h <= packets) {
                self.lossy = None;
            }
        } else {
            self.lossy = Some(self.lossy.map_or(packets, |h| h.min(packets)));
            if self.lossless >= packets {
                self.lossless = packets.saturating_sub(1).min(self.lossless);
            }
        }
    }

    pub fn sample(&self) -> MbsSample {
        MbsSample {
            packets: self.lossless,
            bytes: Bytes(u64::from(self.lossless) * self.cfg.packet.get()),
            lossy_packets: self.lossy,
            bursts: self.bursts.clone(),
        }
    }
}

/// The MBS over several searches: the median and the range.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MbsSummary {
    pub median: Bytes,
    pub min: Bytes,
    pub max: Bytes,
    pub samples: Vec<Bytes>,
    /// True if some search never saw a loss up to its largest burst.
    pub at_least: bool,
}

pub fn summarize(samples: &[MbsSample]) -> Option<MbsSummary> {
    if samples.is_empty() {
        return None;
    }
    let mut v: Vec<Bytes> = samples.iter().map(|s| s.bytes).collect();
    v.sort();
    Some(MbsSummary {
        median: v[v.len() / 2],
        min: v[0],
        max: v[v.len() - 1],
        samples: samples.iter().map(|s| s.bytes).collect(),
        at_least: samples.iter().any(|s| s.lossy_packets.is_none()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A path that drops whatever exceeds `limit` packets of a burst.
    fn run(limit: u32, cfg: MbsConfig) -> MbsSample {
        let mut s = MbsSearch::new(cfg);
        while let Some(n) = s.next_burst() {
            s.observe(n, n.saturating_sub(limit));
        }
        s.sample()
    }

    #[test]
    fn finds_the_largest_lossless_burst() {
        let cfg = MbsConfig::new(Bytes(1500), Bytes(8 << 20));
        for limit in [1, 3, 7, 50, 51, 333, 1000, 4000] {
            let s = run(limit, cfg);
            let err = f64::from(limit - s.packets) / f64::from(limit);
            assert!(s.packets <= limit && err <= 0.03, "{limit}: {s:?}");
            assert!(s.bursts.len() <= 25, "{limit}: {} bursts", s.bursts.len());
            assert_eq!(s.bytes, Bytes(u64::from(s.packets) * 1500));
        }
    }

    #[test]
    fn a_path_that_never_loses_reports_at_least_the_cap() {
        let cfg = MbsConfig::new(Bytes(1500), Bytes(1_500_000));
        let s = run(u32::MAX, cfg);
        assert_eq!(s.packets, 1000);
        assert_eq!(s.lossy_packets, None);
        assert!(summarize(&[s]).unwrap().at_least);
    }

    #[test]
    fn a_path_that_loses_everything_ends() {
        let cfg = MbsConfig::new(Bytes(1500), Bytes(1_500_000));
        let mut s = MbsSearch::new(cfg);
        let mut n = 0;
        while let Some(p) = s.next_burst() {
            s.observe(p, 1);
            n += 1;
            assert!(n < 50);
        }
        assert_eq!(s.sample().packets, 0);
    }

    #[test]
    fn summary_is_median_and_range() {
        let cfg = MbsConfig::new(Bytes(1000), Bytes(1 << 20));
        let samples: Vec<MbsSample> = [40, 50, 45].iter().map(|&l| run(l, cfg)).collect();
        let s = summarize(&samples).unwrap();
        assert!(s.min.get() <= s.median.get() && s.median.get() <= s.max.get());
        assert!(!s.at_least);
        assert_eq!(summarize(&[]), None);
    }
}
