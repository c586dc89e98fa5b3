//! Whether the sending host, not the path, held a capacity test's maximum
//! (issue 26; the system-capability paper's "report this fact when it is").
//!
//! Upstream, the server names the sending-rate row the client must send at.
//! When a test lost nothing, the path delivered everything that was sent;
//! if its maximum still stayed well under the fastest row asked, the rest
//! was never sent: the sender could not keep its rows.  Pure arithmetic on
//! the test's own figures, so it can be tested without a host.

use crate::units::{BitRate, DurationNs};

/// A maximum under this share of the fastest row asked, with no loss, is the
/// sender's shortfall.
pub(crate) const SENDER_SHORTFALL: f64 = 0.9;

/// What a test showed of its sender.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SenderEvidence {
    /// The test's maximum IP-layer capacity.
    pub max: BitRate,
    /// The fastest row the sender was asked for; `None` when the other end
    /// picked and sent the rows (downstream).
    pub asked: Option<BitRate>,
    /// Datagrams lost over the whole test.
    pub loss_count: u64,
    /// Datagrams sent smaller than their row asked (jumbo rows clamped to
    /// the path MTU): rates there are below the rows' by design.
    pub clamped: u64,
    pub sub_intervals: usize,
}

/// The fraction of the fastest row asked that the maximum reached, when the
/// sender (not the path) held the maximum; `None` when it did not, or when
/// the test cannot say.
pub fn sender_held(e: &SenderEvidence) -> Option<f64> {
    let asked = e.asked.filter(|a| a.is_positive())?;
    if e.loss_count > 0 || e.clamped > 0 || e.sub_intervals < 3 {
        return None;
    }
    let share = e.max.bps() / asked.bps();
    (share < SENDER_SHORTFALL).then_some(share)
}

/// What a test showed of a search the receiver did not steer (downstream:
/// the server picks and sends the rows, and the load PDUs do not name them).
#[derive(Debug, Clone, PartialEq)]
pub struct ClimbEvidence {
    /// The test's maximum IP-layer capacity, and the rate table's top.
    pub max: BitRate,
    pub table_top: BitRate,
    /// Whether the rows were searched (not one fixed row, `-I N`).
    pub searched: bool,
    /// Datagrams lost over the whole test.
    pub loss_count: u64,
    /// Each sub-interval's largest one-way delay variation (`None`: no
    /// sample), and the search's lower threshold: below it the search sees
    /// no congestion and keeps raising the rate.
    pub pdv_max: Vec<Option<DurationNs>>,
    pub low_thresh: DurationNs,
    /// Each sub-interval's delivered rate, in order: a search still
    /// climbing at the end was stopped by the test's length, not a host.
    pub rates: Vec<BitRate>,
}

/// A last sub-interval this much above the one before was still climbing.
pub(crate) const CLIMBING: f64 = 1.05;

/// Whether a search that met no congestion signal still stopped below the
/// table's top: no datagram lost and no sub-interval's delay variation
/// reached the lower threshold, so both load-adjustment algorithms kept
/// raising the rate, yet the maximum stayed under 95 % of the table's top.
/// The sender (or a rate ceiling its end keeps), not the path, held it;
/// the path carries at least the maximum.  Needs three sub-intervals and a
/// delay sample in each, and a search no longer climbing at the end.
pub fn climb_held(e: &ClimbEvidence) -> bool {
    let climbing = match e.rates.as_slice() {
        [.., before, last] => last.bps() > before.bps() * CLIMBING,
        _ => false,
    };
    !climbing
        && e.searched
        && e.loss_count == 0
        && e.pdv_max.len() >= 3
        && e.max.is_positive()
        && e.max.bps() < 0.95 * e.table_top.bps()
        && e.pdv_max
            .iter()
            .all(|d| d.is_some_and(|d| d < e.low_thresh))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn evidence(max_mbps: f64, asked_mbps: Option<f64>, loss: u64) -> SenderEvidence {
        SenderEvidence {
            max: BitRate::from_mbps(max_mbps),
            asked: asked_mbps.map(BitRate::from_mbps),
            loss_count: loss,
            clamped: 0,
            sub_intervals: 10,
        }
    }

    #[test]
    fn a_lossless_maximum_well_under_the_rows_asked_is_the_senders() {
        // Issue 26: the climb stopped at 610 Mb/s with no loss while the
        // search kept asking for more.
        let share = sender_held(&evidence(610.0, Some(900.0), 0)).unwrap();
        assert!((share - 610.0 / 900.0).abs() < 1e-12);
    }

    fn climb(max_mbps: f64, loss: u64, pdv_ms: &[i64]) -> ClimbEvidence {
        ClimbEvidence {
            max: BitRate::from_mbps(max_mbps),
            table_top: BitRate::from_gbps(10.0),
            searched: true,
            loss_count: loss,
            pdv_max: pdv_ms
                .iter()
                .map(|&ms| Some(DurationNs::from_ms(ms)))
                .collect(),
            low_thresh: DurationNs::from_ms(30),
            rates: pdv_ms
                .iter()
                .map(|_| BitRate::from_mbps(max_mbps))
                .collect(),
        }
    }

    #[test]
    fn a_downstream_search_that_met_no_congestion_yet_stopped_was_held() {
        // The clean-clone CI run at 504837a: downstream behind the server's
        // 200 Mb/s ceiling on a busy machine, at most 148 Mb/s arrived, no
        // loss, the delay flat.
        assert!(climb_held(&climb(148.0, 0, &[1, 2, 1, 1, 2])));
        // Loss, or delay past the threshold, is the path's signal.
        assert!(!climb_held(&climb(148.0, 2, &[1, 2, 1, 1, 2])));
        assert!(!climb_held(&climb(148.0, 0, &[1, 2, 35, 1, 2])));
        // At the table's top the protocol, not a host, is the ceiling.
        assert!(!climb_held(&climb(9_800.0, 0, &[1, 1, 1])));
        // Too short, a sub-interval without a delay sample, a fixed row.
        assert!(!climb_held(&climb(148.0, 0, &[1, 1])));
        let mut unknown = climb(148.0, 0, &[1, 1, 1]);
        unknown.pdv_max[1] = None;
        assert!(!climb_held(&unknown));
        let mut fixed = climb(148.0, 0, &[1, 1, 1]);
        fixed.searched = false;
        assert!(!climb_held(&fixed));
        // Still climbing when the test ended: the test's length held it.
        let mut climbing = climb(148.0, 0, &[1, 1, 1]);
        climbing.rates[2] = BitRate::from_mbps(170.0);
        assert!(!climb_held(&climbing));
    }

    #[test]
    fn loss_a_server_ceiling_clamped_rows_or_downstream_are_not() {
        // The path dropped some: the shortfall may be the path's.
        assert_eq!(sender_held(&evidence(610.0, Some(900.0), 3)), None);
        // A server ceiling keeps the rows asked near what arrived.
        assert_eq!(sender_held(&evidence(49.0, Some(50.0), 0)), None);
        // Downstream the client was never asked.
        assert_eq!(sender_held(&evidence(610.0, None, 0)), None);
        let mut clamped = evidence(610.0, Some(900.0), 0);
        clamped.clamped = 10;
        assert_eq!(sender_held(&clamped), None);
        let mut short = evidence(610.0, Some(900.0), 0);
        short.sub_intervals = 2;
        assert_eq!(sender_held(&short), None);
    }
}
