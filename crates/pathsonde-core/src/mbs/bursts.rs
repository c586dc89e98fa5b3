//! What the MBS searches' bursts showed, burst by burst: the path's loss
//! apart from the receiver's own drops, the send and arrival rates, and
//! the bursts the sender stalled in, which are sent again ([`stalled`]).
//!
//! Sans-IO: the caller sends a burst, tells [`BurstLog::judge`] what it
//! saw, and either sends the same burst again or gives the search the
//! loss it returns.  At the end [`BurstLog::evidence`] is what
//! [`host_limits`](super::host_limits) judges.

use super::{stalled, MbsHostEvidence, STALL_RETRIES};
use crate::estimate::host::HostRole;
use crate::stats;
use crate::units::BitRate;

/// One burst as sent and reported.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BurstSeen {
    /// Packets that did not arrive, of those asked for (never sent ones
    /// included), and of those the ones the receiving socket dropped
    /// itself; `None` when the receiver cannot count them.
    pub lost: u32,
    pub receiver_drops: Option<u32>,
    /// The burst's span rates from its send and arrival stamps (bursts of
    /// at least 8 packets).
    pub sent_rate: Option<BitRate>,
    pub arrival_rate: Option<BitRate>,
}

impl BurstSeen {
    /// The path's loss: the receiving socket's own drops had crossed it.
    fn path_lost(&self) -> u32 {
        let host = self.receiver_drops.unwrap_or(0).min(self.lost);
        self.lost - host
    }
}

/// What to do after a burst.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BurstTake {
    /// Send the same burst again: the sender stalled in this one.
    Resend,
    /// Give the search this many packets lost on the path.
    Lost(u32),
}

/// The bursts of every search of one MBS measurement.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BurstLog {
    sent_rates: Vec<f64>,
    arrival_rates: Vec<f64>,
    receiver_drops: Option<u64>,
    bursts_with_drops: u32,
    stalls_resent: u32,
    stalls_taken: u32,
}

impl BurstLog {
    /// Judges a burst that has been sent `tries` times before this one.
    /// A lossless burst the sender stalled in is re-sent up to
    /// [`STALL_RETRIES`] times, then taken as it came (and counted); a
    /// stalled burst's rates are never kept for the line speed.
    pub fn judge(&mut self, tries: u32, b: &BurstSeen) -> BurstTake {
        if let Some(d) = b.receiver_drops {
            *self.receiver_drops.get_or_insert(0) += u64::from(d);
            self.bursts_with_drops += u32::from(d > 0);
        }
        let clean = b.lost == 0;
        let stall = b.sent_rate.is_some_and(|r| stalled(r, &self.sent_rates));
        if stall && clean {
            if tries < STALL_RETRIES {
                self.stalls_resent += 1;
                return BurstTake::Resend;
            }
            self.stalls_taken += 1;
        }
        if let Some(r) = b.sent_rate.filter(|_| !stall) {
            self.sent_rates.push(r.bps());
        }
        if let Some(r) = b.arrival_rate.filter(|_| clean && !stall) {
            self.arrival_rates.push(r.bps());
        }
        BurstTake::Lost(b.path_lost())
    }

    /// The rate bursts left the sender at (median of the unstalled ones).
    pub fn sender_line_rate(&self) -> Option<BitRate> {
        stats::median(&self.sent_rates).map(BitRate::from_bps)
    }

    /// The rate lossless, unstalled bursts arrived at (median).
    pub fn path_line_rate(&self) -> Option<BitRate> {
        stats::median(&self.arrival_rates).map(BitRate::from_bps)
    }

    pub fn receiver_drops(&self) -> Option<u64> {
        self.receiver_drops
    }

    /// Lossless bursts re-sent because the sender stalled in them, and
    /// those still stalled after the retries that were taken as they came.
    pub fn stalls(&self) -> (u32, u32) {
        (self.stalls_resent, self.stalls_taken)
    }

    /// What the host verdict reads, for bursts `sender` sent.
    pub fn evidence(&self, sender: HostRole, at_least: bool) -> MbsHostEvidence {
        MbsHostEvidence {
            sender,
            sender_line_rate: self.sender_line_rate(),
            path_line_rate: self.path_line_rate(),
            at_least,
            receiver_drops: self.receiver_drops,
            bursts_with_drops: self.bursts_with_drops,
            stalls_resent: self.stalls_resent,
            stalls_taken: self.stalls_taken,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{MbsConfig, MbsSearch};
    use super::*;
    use crate::units::Bytes;

    /// A path whose queue holds `limit` packets behind a 1 Gb/s sender:
    /// bursts above it lose the excess, unless the sender stalled in
    /// them, when the queue sees two halves and nothing is lost.  The
    /// sender stalls on the first try of every burst in `stall_on`.
    fn search(limit: u32, stall_on: &[u32]) -> (u32, BurstLog) {
        let mut s = MbsSearch::new(MbsConfig::new(Bytes(1500), Bytes(8 << 20)));
        let mut log = BurstLog::default();
        while let Some(n) = s.next_burst() {
            let mut tries = 0;
            let lost = loop {
                let stall = tries == 0 && stall_on.contains(&n);
                let lost = if stall {
                    n.saturating_sub(2 * limit)
                } else {
                    n.saturating_sub(limit)
                };
                let rate = |mbps| (n >= 8).then(|| BitRate::from_mbps(mbps));
                let seen = BurstSeen {
                    lost,
                    receiver_drops: Some(0),
                    sent_rate: rate(if stall { 200.0 } else { 990.0 }),
                    arrival_rate: rate(if stall { 150.0 } else { 300.0 }),
                };
                match log.judge(tries, &seen) {
                    BurstTake::Resend => tries += 1,
                    BurstTake::Lost(l) => break l,
                }
            };
            s.observe(n, lost);
        }
        (s.sample().packets, log)
    }

    #[test]
    fn a_burst_the_sender_stalled_in_is_sent_again_and_not_believed() {
        let (clean, log) = search(100, &[]);
        assert_eq!(log.stalls(), (0, 0));
        // The stalls hit the bursts that would have lost: 128 and the
        // bisection's steps above 100.
        let (stalled, log) = search(100, &[128, 112, 104]);
        assert_eq!(stalled, clean, "a stalled lossless burst raised the MBS");
        assert!(
            log.stalls().0 >= 1 && log.stalls().1 == 0,
            "{:?}",
            log.stalls()
        );
        // The stalled bursts' rates are not the line speed.
        assert_eq!(log.path_line_rate(), Some(BitRate::from_mbps(300.0)));
        assert_eq!(log.sender_line_rate(), Some(BitRate::from_mbps(990.0)));
    }

    #[test]
    fn a_sender_that_stalls_every_time_is_taken_and_counted() {
        let mut log = BurstLog::default();
        let fast = BurstSeen {
            lost: 0,
            receiver_drops: None,
            sent_rate: Some(BitRate::from_mbps(990.0)),
            arrival_rate: Some(BitRate::from_mbps(300.0)),
        };
        for _ in 0..3 {
            assert_eq!(log.judge(0, &fast), BurstTake::Lost(0));
        }
        let slow = BurstSeen {
            sent_rate: Some(BitRate::from_mbps(100.0)),
            ..fast
        };
        assert_eq!(log.judge(0, &slow), BurstTake::Resend);
        assert_eq!(log.judge(1, &slow), BurstTake::Resend);
        assert_eq!(log.judge(2, &slow), BurstTake::Lost(0));
        assert_eq!(log.stalls(), (2, 1));
        // A stalled burst that lost is the path's loss, taken at once.
        let lossy = BurstSeen { lost: 5, ..slow };
        assert_eq!(log.judge(0, &lossy), BurstTake::Lost(5));
        // The receiver's own drops are not the path's.
        let dropped = BurstSeen {
            lost: 5,
            receiver_drops: Some(3),
            ..fast
        };
        assert_eq!(log.judge(0, &dropped), BurstTake::Lost(2));
        assert_eq!(log.receiver_drops(), Some(3));
        let e = log.evidence(HostRole::Client, false);
        assert_eq!(
            (e.stalls_resent, e.stalls_taken, e.bursts_with_drops),
            (2, 1, 1)
        );
    }
}
