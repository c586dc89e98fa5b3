//! C from the spacing the tight link gives a burst.
//!
//! The opening train leaves faster than any link on the path can carry it,
//! so it arrives at the tight link faster than C and leaves it from a busy
//! queue: consecutive probe packets come out `s/C` apart, or further apart
//! when cross packets were served between them — never closer.  A low
//! quantile of those gaps (a quarter of them, so that receive-stamp jitter
//! on one gap does not decide it) is `s/C`.  The first gaps are skipped: a
//! token-bucket tight link that was idle lets its spare tokens' worth of
//! packets through at the sender's speed.  A receiver that bunches arrivals
//! leaves no such gaps, and the reading is not made.
//!
//! This C is what the fluid line's slope is measured against: the line's
//! far points are short trains whose cross traffic varies by tens of per
//! cent, so its slope is uncertain by 10–20 % under the queue budget, and
//! each near train's reading of A moves by that share of its distance
//! from A.  When the two disagree by more than the line's own uncertainty
//! (a narrow link that is not the tight link, say), the line is kept.

use crate::dispersion;
use crate::observation::Observation;
use crate::units::{Bytes, DurationNs};

/// Gaps skipped at the head of a burst (spare tokens of an idle bucket).
const HEAD_GAPS: usize = 3;
/// The quantile of the gaps read as `s/C`.
const GAP_QUANTILE: f64 = 0.25;
/// Fewest gaps to read C from.
const MIN_GAPS: usize = 12;

/// Consecutive arrival gaps (seconds, with the later packet's size) of a
/// train that crossed a busy queue, after the head.
pub(crate) fn queue_gaps(obs: &Observation) -> Vec<(f64, Bytes)> {
    let packets = dispersion::unique_packets(obs);
    packets
        .windows(2)
        .filter(|w| w[1].seq == w[0].seq.wrapping_add(1))
        .filter_map(|w| {
            let (a, b) = (w[0].received?, w[1].received?);
            let gap = b.since(a).secs_f64();
            (gap.is_finite() && gap > 0.0).then_some((gap, w[1].size))
        })
        .skip(HEAD_GAPS)
        .collect()
}

/// C (b/s) from the pooled queue gaps, if there are enough and they are not
/// bunched.  Gaps shorter than a third of the median are left out first: a
/// sender that paces in bursts lets a token bucket refill between them, and
/// the next two packets then pass at the sender's speed.  Of the rest, the
/// clean gaps (no cross packet served between the two probe packets) are
/// the cluster at the short end, up to 1.5 times the lower quartile — a
/// gap with a cross packet in it is at least twice as long — and C is read
/// from their median, which receive-stamp jitter moves least.
pub(crate) fn from_gaps(gaps: &[(f64, Bytes)], resolution: DurationNs) -> Option<f64> {
    let tiny = resolution.max(DurationNs::from_ns(100)).secs_f64();
    if gaps.len() < MIN_GAPS {
        return None;
    }
    let secs: Vec<f64> = gaps.iter().map(|g| g.0).collect();
    let median = crate::stats::median(&secs)?;
    // A receiver that bunches arrivals: most gaps are at its clock's step.
    if secs.iter().filter(|&&g| g <= tiny).count() * 5 > secs.len() {
        return None;
    }
    let kept: Vec<(f64, Bytes)> = gaps
        .iter()
        .copied()
        .filter(|g| g.0 >= median * SHORT_GAP && g.0 > tiny)
        .collect();
    if kept.len() < MIN_GAPS || kept.len() * 5 < gaps.len() * 4 {
        return None;
    }
    let kept_secs: Vec<f64> = kept.iter().map(|g| g.0).collect();
    let q = crate::stats::quantile(&kept_secs, GAP_QUANTILE)?;
    let rates: Vec<f64> = kept
        .iter()
        .filter(|g| g.0 <= CLEAN_SPAN * q)
        .map(|g| g.1.bits() as f64 / g.0)
        .collect();
    if rates.len() < MIN_GAPS / 2 {
        return None;
    }
    let c = crate::stats::median(&rates)?;
    (c.is_finite() && c > 0.0).then_some(c)
}

/// Clean gaps reach up to this multiple of the lower quartile.
const CLEAN_SPAN: f64 = 1.5;

/// Gaps below this share of the median are a bucket's spare tokens.
const SHORT_GAP: f64 = 1.0 / 3.0;

/// The C a near train's reading of A is taken against: the gaps' C when
/// there is one, else the line's.  The gaps read the narrow link (the
/// smallest capacity on the path), the line the tight link, which may be
/// faster; but a near train's reading `Aᵢ = Rᵢ − C·(yᵢ − 1)` moves with C
/// only by its distance from A times C's relative error, so a narrow link
/// at half the tight link's capacity moves it by half that distance (a few
/// per cent of A), while the line's own slope is uncertain by 10–20 %.
pub(crate) fn reconcile(line_c: Option<f64>, gap_c: Option<f64>) -> Option<f64> {
    gap_c.or(line_c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synthetic::{FluidPath, FluidPathConfig};
    use crate::units::BitRate;
    use crate::methods::fac2::Fac2Config;

    #[test]
    fn a_burst_through_a_busy_queue_gives_c_and_a_bunching_receiver_none() {
        let cfg = Fac2Config::default();
        let spec = super::super::opening::first(&cfg, DurationNs::from_us(1));
        for (x, res) in [(0.0, 1), (150.0, 1), (270.0, 1)] {
            let mut p = FluidPath::new(FluidPathConfig {
                poisson_cross: Some(Bytes(1500)),
                seed: 5,
                ..FluidPathConfig::new(BitRate::from_mbps(300.0), BitRate::from_mbps(x))
            });
            let obs = p.carry(&spec, 0);
            let c = from_gaps(&queue_gaps(&obs), DurationNs::from_ns(res)).expect("a reading");
            assert!((c / 300e6 - 1.0).abs() < 0.02, "X={x}: {c}");
        }
        let mut p = FluidPath::new(FluidPathConfig {
            coalescing: Some(DurationNs::from_us(125)),
            ..FluidPathConfig::new(BitRate::from_mbps(300.0), BitRate::from_mbps(100.0))
        });
        let obs = p.carry(&spec, 0);
        assert_eq!(from_gaps(&queue_gaps(&obs), DurationNs::from_us(1)), None);
    }

    #[test]
    fn the_gaps_win_when_there_are_any() {
        assert_eq!(reconcile(Some(280e6), Some(300e6)), Some(300e6));
        assert_eq!(reconcile(Some(600e6), Some(300e6)), Some(300e6));
        assert_eq!(reconcile(Some(150e6), None), Some(150e6));
        assert_eq!(reconcile(None, None), None);
    }
}
