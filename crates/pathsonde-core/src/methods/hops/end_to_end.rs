//! The tight link found from ICMP beside the path's end-to-end available
//! bandwidth, when a pathsonde server at the far end let the default method
//! measure it (issue 29: "says whether the tight link found is consistent
//! with it").
//!
//! The two read different things.  `hops` brackets the available bandwidth
//! of the links it can see — each up to the last router that answers — as
//! `[passed, rate_in]`: the fastest train a link let through unspread and
//! the slowest it spread.  A train a little above A passes, spread by less
//! than the threshold, so the bracket's low end is taken as the lesser of
//! `passed` and the link's `available` (the scan read through the fluid
//! model).  The end-to-end method reads the whole path, the
//! link into the far end and the far host included, so its A can only be
//! lower than the tight link's, never higher:
//!
//! * the end-to-end band meets the bracket: **consistent**;
//! * the end-to-end band lies wholly below it: a tighter link where ICMP
//!   cannot see (the link into the far end), or the far host, sets the
//!   path's A — the tight link named is the tightest *router-to-router*
//!   link only;
//! * the end-to-end band lies wholly above it: the path carried more end to
//!   end than the named link let through, which no FIFO path does — one of
//!   the two readings is wrong (a router slow to answer ICMP spreads the
//!   answers, not the train), and neither is trusted over the other.
//!
//! Pure: the command measures, this judges.

use super::TightLink;
use crate::estimate::Estimate;
use crate::units::BitRate;
use serde::{Deserialize, Serialize};

/// Slack on either side of the tight link's bracket: its ends are single
/// trains' rates, each read with a few per cent of noise.
pub const SLACK: f64 = 0.10;

/// How the end-to-end A and the tight link's bracket relate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Agreement {
    Consistent,
    EndToEndLower,
    EndToEndHigher,
    /// `hops` named no tight link: nothing to compare.
    NoTightLink,
}

/// The verdict with the figures that decided it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    pub agreement: Agreement,
    /// The tight link's bracket, widened by [`SLACK`] (no lower end when
    /// no train passed it).
    pub bracket_low: Option<BitRate>,
    pub bracket_high: Option<BitRate>,
    /// In words, for the report.
    pub why: String,
}

/// Judges the end-to-end estimate `e2e` against the tight link found.
pub fn compare(tight: Option<&TightLink>, e2e: &Estimate) -> Comparison {
    let Some(t) = tight else {
        return Comparison {
            agreement: Agreement::NoTightLink,
            bracket_low: None,
            bracket_high: None,
            why: format!(
                "no tight link was named from ICMP; end to end the path carries {}",
                e2e.available
            ),
        };
    };
    // Only when some train passed: without one, the scan never got below
    // A and its reading is an extrapolation.
    let lo = t.passed.map(|p| p.min(t.available).scale(1.0 - SLACK));
    let hi = t.rate_in.scale(1.0 + SLACK);
    let band = match e2e.high {
        Some(h) => format!("{} (band {} .. {})", e2e.available, e2e.low, h),
        None => format!("at least {}", e2e.low),
    };
    let bracket = match t.passed {
        Some(p) => format!("{} .. {}", p.min(t.available), t.rate_in),
        None => format!("below {}", t.rate_in),
    };
    let link = format!("TTL {} -> {}", t.from_ttl, t.to_ttl);
    let (agreement, why) = if e2e.low > hi {
        (
            Agreement::EndToEndHigher,
            format!(
                "inconsistent: end to end the path carried {band}, above the rate at which the tight link named ({link}) spread trains, {bracket}; no FIFO path does that, so one reading is wrong (a router slow to answer spreads its answers, not the train)"
            ),
        )
    } else if e2e.high.is_some_and(|h| lo.is_some_and(|l| h < l)) {
        (
            Agreement::EndToEndLower,
            format!(
                "end to end the path carries {band}, less than the tight link named ({link}) let through, {bracket}: a tighter link where ICMP cannot see (the link into the far end) or the far host sets the path's A"
            ),
        )
    } else {
        (
            Agreement::Consistent,
            format!(
                "consistent: end to end the path carries {band}, within the tight link's bracket ({link}: {bracket}, ±{:.0} %)",
                SLACK * 100.0
            ),
        )
    };
    Comparison {
        agreement,
        bracket_low: lo,
        bracket_high: Some(hi),
        why,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::method_name::MethodName;

    fn tight(passed: Option<f64>, rate_in: f64) -> TightLink {
        TightLink {
            from_ttl: 1,
            to_ttl: 2,
            from_address: None,
            to_address: None,
            rate_in: BitRate::from_mbps(rate_in),
            rate_out: BitRate::from_mbps(rate_in * 0.9),
            passed: passed.map(BitRate::from_mbps),
            available: BitRate::from_mbps(passed.map_or(rate_in, |p| (p * rate_in).sqrt())),
            agreeing: 3,
            considered: 3,
            confidence: 1.0,
        }
    }

    fn e2e(a: f64, low: f64, high: Option<f64>) -> Estimate {
        Estimate::test_band(MethodName::Fac2, a, low, high)
    }

    #[test]
    fn the_three_verdicts_and_none() {
        let t = tight(Some(40.0), 48.0);
        let c = |a, l, h| compare(Some(&t), &e2e(a, l, h)).agreement;
        assert_eq!(c(42.0, 40.0, Some(44.0)), Agreement::Consistent);
        // Just under the bracket, within the slack.
        assert_eq!(c(37.0, 36.5, Some(37.5)), Agreement::Consistent);
        assert_eq!(c(20.0, 18.0, Some(22.0)), Agreement::EndToEndLower);
        assert_eq!(c(80.0, 75.0, Some(85.0)), Agreement::EndToEndHigher);
        // A host-limited "at least" below the bracket's top never
        // contradicts it; one above it does.
        assert_eq!(c(30.0, 30.0, None), Agreement::Consistent);
        assert_eq!(c(60.0, 60.0, None), Agreement::EndToEndHigher);
        assert_eq!(
            compare(None, &e2e(42.0, 40.0, Some(44.0))).agreement,
            Agreement::NoTightLink
        );
        // A train a little above A passed, spread too little to see: the
        // fluid reading, not `passed`, is the bracket's low end.
        let mut t = tight(Some(52.0), 56.0);
        t.available = BitRate::from_mbps(40.0);
        assert_eq!(
            compare(Some(&t), &e2e(40.0, 38.0, Some(42.0))).agreement,
            Agreement::Consistent
        );
        assert_eq!(
            compare(Some(&t), &e2e(25.0, 23.0, Some(27.0))).agreement,
            Agreement::EndToEndLower
        );
        // No train passed: no lower end, so nothing is "lower".
        let t = tight(None, 48.0);
        assert_eq!(
            compare(Some(&t), &e2e(5.0, 4.0, Some(6.0))).agreement,
            Agreement::Consistent
        );
    }
}
