//! The search range of the methods that probe a few rates and move the
//! range by where A fell: bursts (`burst.rs`) and ICIM (run inside the
//! simulator's TCP sender, pathsonde-sim's `icim.rs`).
//!
//! One measurement probes `k` rates spread over `[low, high]`.  If A fell
//! below the first rate, the range widens down by its width; above the last,
//! it widens up; inside, it re-centres on the result with half-width the
//! larger of the 95 % interval of the stored results (`1.96·σ/√q`) and a
//! tenth of the result (ICIM paper, III.B).  The two methods differ only in
//! what they pass: which σ (ICIM the population's, bursts the sample's) and
//! whether the top is bounded.

use crate::units::BitRate;

/// The rates the next measurement spreads its probes over.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SearchRange {
    pub low: BitRate,
    pub high: BitRate,
}

impl SearchRange {
    pub fn new(low: BitRate, high: BitRate) -> Self {
        SearchRange { low, high }
    }

    /// `high − low`, b/s.
    pub fn width(self) -> f64 {
        self.high.bps() - self.low.bps()
    }

    /// A was below the first rate probed: one width lower, not below `floor`.
    pub fn widened_down(self, floor: BitRate) -> Self {
        let (lo, w) = (self.low.bps(), self.width());
        SearchRange {
            low: BitRate::from_bps((lo - w).max(floor.bps())),
            high: self.high,
        }
    }

    /// A was above the last rate probed: one width higher, not above `max`.
    pub fn widened_up(self, max: BitRate) -> Self {
        let (hi, w) = (self.high.bps(), self.width());
        SearchRange {
            low: self.low,
            high: BitRate::from_bps((hi + w).min(max.bps())),
        }
    }

    /// A fell inside, at `result`: the range centred on it, with
    /// [`half_width`] from `sd` over `stored` results; not below `floor`, and
    /// not above `max` when there is one.
    pub fn centred(
        result: BitRate,
        sd: f64,
        stored: usize,
        floor: BitRate,
        max: Option<BitRate>,
    ) -> Self {
        let r = result.bps();
        let half = half_width(r, sd, stored as f64);
        let high = r + half;
        SearchRange {
            low: BitRate::from_bps((r - half).max(floor.bps())),
            high: BitRate::from_bps(max.map_or(high, |m| high.min(m.bps()))),
        }
    }
}

/// Half the width of a range centred on `result` (b/s): the 95 % interval
/// of `q` stored results of standard deviation `sd`, but never less than a
/// tenth of the result, so that one lucky agreement does not freeze it.
pub fn half_width(result: f64, sd: f64, q: f64) -> f64 {
    (1.96 * sd / q.sqrt()).max(result / 10.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mbps(x: f64) -> BitRate {
        BitRate::from_mbps(x)
    }

    #[test]
    fn widening_moves_one_width_within_the_bounds() {
        let r = SearchRange::new(mbps(100.0), mbps(200.0));
        assert_eq!(
            r.widened_down(mbps(1.0)),
            SearchRange::new(mbps(1.0), mbps(200.0))
        );
        assert_eq!(r.widened_down(mbps(0.5)).low, mbps(0.5));
        let r = SearchRange::new(mbps(200.0), mbps(300.0));
        assert_eq!(r.widened_down(mbps(1.0)).low, mbps(100.0));
        assert_eq!(r.widened_up(mbps(1000.0)).high, mbps(400.0));
        assert_eq!(r.widened_up(mbps(350.0)).high, mbps(350.0));
    }

    #[test]
    fn centring_uses_the_wider_of_the_interval_and_a_tenth() {
        // One result: a tenth either side.
        let r = SearchRange::centred(mbps(100.0), 0.0, 1, mbps(1.0), None);
        assert!((r.low.mbps() - 90.0).abs() < 1e-9 && (r.high.mbps() - 110.0).abs() < 1e-9);
        // Four results spread by 20 Mb/s: 1.96·20/2 = 19.6 Mb/s.
        let r = SearchRange::centred(mbps(100.0), 20e6, 4, mbps(1.0), Some(mbps(115.0)));
        assert!((r.low.mbps() - 80.4).abs() < 1e-9, "{r:?}");
        assert_eq!(r.high, mbps(115.0));
    }
}
