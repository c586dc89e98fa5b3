//! Whether the sending host, not the path, held a capacity test's maximum
//! (issue 26; the system-capability paper's "report this fact when it is").
//!
//! Upstream, the server names the sending-rate row the client must send at.
//! When a test lost nothing, the path delivered everything that was sent;
//! if its maximum still stayed well under the fastest row asked, the rest
//! was never sent: the sender could not keep its rows.  Pure arithmetic on
//! the test's own figures, so it can be tested without a host.

use crate::units::BitRate;

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
