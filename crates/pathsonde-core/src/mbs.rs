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

use crate::estimate::host::{HostLimit, HostRole, Resource};
use crate::units::{BitRate, Bytes};
use serde::{Deserialize, Serialize};

mod bursts;
pub use bursts::{BurstLog, BurstSeen, BurstTake};

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

/// Bursts that arrived at this share of the rate they left at or more were
/// never slowed on the path: nothing there drains slower than the sender.
pub const UNSLOWED: f64 = 0.95;

/// A burst that left the sender at less than this share of the earlier
/// bursts' send rate (their median) was not back to back: the sender was
/// descheduled in the middle of it, and the path saw two smaller bursts.
pub const STALLED: f64 = 0.5;
/// Earlier bursts with a send rate needed before a stall can be told.
pub const STALL_BASIS: usize = 3;
/// How many times a lossless burst that stalled is sent again before the
/// search takes it as it came (and the report says so).
pub const STALL_RETRIES: u32 = 2;

/// Whether a burst whose packets left at `rate` stalled in the sender,
/// against `earlier`, the send rates (b/s) of the bursts before it that
/// did not.  A lossless burst that stalled proves nothing of the path's
/// queue: it reached the queue in pieces.  (A lossy one still lost: the
/// path dropped even a spread-out burst, and the search may count it.)
pub fn stalled(rate: BitRate, earlier: &[f64]) -> bool {
    if earlier.len() < STALL_BASIS {
        return false;
    }
    crate::stats::median(earlier).is_some_and(|m| rate.bps() < STALLED * m)
}

/// What the searches showed of the hosts, as plain numbers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MbsHostEvidence {
    /// Which end sent the bursts.
    pub sender: HostRole,
    /// The rate bursts left the sender at, and arrived at (medians).
    pub sender_line_rate: Option<BitRate>,
    pub path_line_rate: Option<BitRate>,
    /// Some search saw no loss up to its largest burst.
    pub at_least: bool,
    /// Packets the receiving host dropped itself over all bursts (socket
    /// overflow), and the bursts they came from; `None` when it cannot say.
    pub receiver_drops: Option<u64>,
    pub bursts_with_drops: u32,
    /// Lossless bursts the sender stalled in ([`stalled`]) that were sent
    /// again, and those still stalled after [`STALL_RETRIES`] that the
    /// search took as they came.
    pub stalls_resent: u32,
    pub stalls_taken: u32,
}

/// The host limits the bursts' own evidence shows (Jin & Tierney: a tool
/// must say when its host, not the path, set what it reports):
/// - bursts that crossed the path at the rate they left never met a link
///   slower than the sender, so the line speed is the sender's and, when no
///   burst lost, the MBS is unbounded by this sender: binding, `Pacing`;
/// - packets the receiving host dropped itself are not the path's loss
///   (the search counts only the path's), reported beside the result.
pub fn host_limits(e: &MbsHostEvidence) -> Vec<HostLimit> {
    let mut limits = Vec::new();
    if let (Some(tx), Some(rx)) = (e.sender_line_rate, e.path_line_rate) {
        if tx.bps() > 0.0 && rx.bps() >= UNSLOWED * tx.bps() {
            let mbs = if e.at_least {
                "; and no burst lost a packet, so no queue on the path filled: the burst size found is this sender's reach, not the path's limit"
            } else {
                ""
            };
            limits.push(HostLimit {
                host: e.sender,
                resource: Resource::Pacing,
                limit_bps: tx,
                binds_result: true,
                why: format!(
                    "The {} (sender) sent its bursts at {tx} and they arrived at {rx}: nothing on the path drains slower than this sender, so the path's line speed is at least {rx}, not equal to it{mbs}.",
                    e.sender
                ),
                fix: Some(
                    "Send from a host that bursts faster than the path's narrow link (a faster NIC, an idle core)."
                        .into(),
                ),
            });
        }
    }
    if e.stalls_resent > 0 || e.stalls_taken > 0 {
        let taken = if e.stalls_taken > 0 {
            format!(
                "; {} still stalled after {STALL_RETRIES} tries and {} taken as lossless, so the burst size found may be larger than the path's queue holds",
                e.stalls_taken,
                if e.stalls_taken == 1 { "was" } else { "were" }
            )
        } else {
            ": every search's outcome came from bursts that left back to back".into()
        };
        limits.push(HostLimit {
            host: e.sender,
            resource: Resource::Timing,
            limit_bps: e.sender_line_rate.unwrap_or(BitRate::ZERO),
            binds_result: false,
            why: format!(
                "The {} (sender) stalled in {} lossless burst{} (sent at under {:.0} % of the other bursts' send rate, from the transmit stamps: the queue saw {} in pieces), sent again{taken}.",
                e.sender,
                e.stalls_resent,
                if e.stalls_resent == 1 { "" } else { "s" },
                STALLED * 100.0,
                if e.stalls_resent == 1 { "it" } else { "them" }
            ),
            fix: Some("Run the sender on an idle core (taskset, fewer processes beside it).".into()),
        });
    }
    if let Some(d) = e.receiver_drops.filter(|d| *d > 0) {
        let receiver = e.sender.peer();
        limits.push(HostLimit {
            host: receiver,
            resource: Resource::Receiver,
            limit_bps: e.path_line_rate.unwrap_or(BitRate::ZERO),
            binds_result: false,
            why: format!(
                "The {receiver} (receiver) dropped {d} packets itself in {} burst{}, its socket's receive buffer full: those were not counted as the path's loss.",
                e.bursts_with_drops,
                if e.bursts_with_drops == 1 { "" } else { "s" }
            ),
            fix: Some("Raise net.core.rmem_max, or receive on a host that drains its socket faster.".into()),
        });
    }
    limits
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

    fn evidence(tx_mbps: f64, rx_mbps: f64, at_least: bool, drops: Option<u64>) -> MbsHostEvidence {
        MbsHostEvidence {
            sender: HostRole::Client,
            sender_line_rate: Some(BitRate::from_mbps(tx_mbps)),
            path_line_rate: Some(BitRate::from_mbps(rx_mbps)),
            at_least,
            receiver_drops: drops,
            bursts_with_drops: u32::from(drops.is_some_and(|d| d > 0)),
            stalls_resent: 0,
            stalls_taken: 0,
        }
    }

    /// A burst sent at a fraction of the usual rate stalled; one a little
    /// slower, or one with too few others to compare, did not; and the
    /// report names the sender's timing, saying whether any was taken.
    #[test]
    fn a_burst_the_sender_stalled_in_is_told_from_the_others() {
        let earlier = [950e6, 990e6, 970e6];
        assert!(stalled(BitRate::from_mbps(300.0), &earlier));
        assert!(!stalled(BitRate::from_mbps(700.0), &earlier));
        assert!(!stalled(BitRate::from_mbps(300.0), &earlier[..2]));
        let mut e = evidence(990.0, 197.0, false, Some(0));
        e.stalls_resent = 2;
        let l = host_limits(&e);
        assert_eq!(l.len(), 1);
        assert_eq!(
            (l[0].host, l[0].resource),
            (HostRole::Client, Resource::Timing)
        );
        assert!(!l[0].binds_result);
        assert!(l[0].why.contains("left back to back"), "{}", l[0].why);
        e.stalls_taken = 1;
        let l = host_limits(&e);
        assert!(l[0].why.contains("1 still stalled"), "{}", l[0].why);
        assert!(l[0].why.contains("may be larger"), "{}", l[0].why);
    }

    #[test]
    fn bursts_the_path_never_slowed_make_the_line_speed_the_senders() {
        // A 1 Gb/s sender on a 10 Gb/s path: the bursts arrive as they left.
        let l = host_limits(&evidence(990.0, 985.0, true, Some(0)));
        assert_eq!(l.len(), 1);
        assert!(l[0].binds_result && l[0].resource == Resource::Pacing);
        assert!(l[0].why.contains("this sender's reach"), "{}", l[0].why);
        // A 200 Mb/s narrow link behind a 1 Gb/s sender: the path's.
        assert!(host_limits(&evidence(990.0, 197.0, false, Some(0))).is_empty());
        // Nothing known of the rates: nothing said.
        let mut e = evidence(990.0, 985.0, true, None);
        e.sender_line_rate = None;
        assert!(host_limits(&e).is_empty());
    }

    #[test]
    fn receiver_drops_are_reported_apart_from_the_paths_loss() {
        let l = host_limits(&evidence(990.0, 197.0, false, Some(12)));
        assert_eq!(l.len(), 1);
        assert_eq!(
            (l[0].host, l[0].resource),
            (HostRole::Server, Resource::Receiver)
        );
        assert!(!l[0].binds_result);
        assert!(l[0].why.contains("dropped 12 packets"));
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
