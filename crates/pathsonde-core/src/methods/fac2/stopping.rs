//! When FAC² stops: its band is narrow enough, its budget is spent, the
//! path carried everything, or nothing could be measured.

use super::config::Fac2Config;
use super::readout::Readout;

/// Why FAC² stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fac2Stop {
    /// The stopping rule was met: enough near trains, and the 95 % band on
    /// A no wider than `max_relative_band` of A.
    Converged,
    /// The path carried a long train at `max_rate` (or as fast as the host
    /// could send): only `A ≥` that rate is known.
    LowerBound,
    /// The byte budget or the train cap was spent first; the estimate
    /// carries the band the trains support.
    Budget,
    /// `max_failed_trains` consecutive trains delivered too little to measure.
    NoMeasurement,
}

/// The stopping rule: the band is as narrow as asked, on enough near
/// trains.  The rule reads the band's width, never a count of trains: a
/// quiet path stops after three near trains, a busy one goes on until its
/// trains have averaged enough cross traffic (or the budget says stop).
pub(crate) fn band_is_narrow(r: &Readout, cfg: &Fac2Config) -> bool {
    r.available > 0.0
        && r.near as u32 >= cfg.min_near_trains.max(1)
        && r.half_width
            .is_some_and(|hw| hw <= cfg.max_relative_band() * r.available)
}

/// Whether the budget is spent: `budget` bytes in all, `bytes` sent so far,
/// `trains` so far, and the bytes the next train would take.
pub(crate) fn budget_spent(
    cfg: &Fac2Config,
    budget: f64,
    bytes: u64,
    trains: usize,
    next_bytes: u64,
) -> bool {
    trains as u64 >= u64::from(cfg.max_trains.max(1))
        || bytes.saturating_add(next_bytes / 2) as f64 > budget
}

#[cfg(test)]
mod tests {
    use super::*;

    fn readout(a: f64, hw: Option<f64>, near: usize) -> Readout {
        Readout {
            available: a,
            se: 0.0,
            half_width: hw,
            capacity: 2.0 * a,
            capacity_rel_se: 0.0,
            short_line: false,
            cross: a,
            eta: None,
            points: near + 2,
            near,
            set_aside: Vec::new(),
        }
    }

    #[test]
    fn the_rule_reads_the_band_and_the_near_trains() {
        let cfg = Fac2Config::default();
        assert!(band_is_narrow(&readout(100e6, Some(7e6), 4), &cfg));
        assert!(!band_is_narrow(&readout(100e6, Some(9e6), 4), &cfg));
        assert!(!band_is_narrow(&readout(100e6, Some(1e6), 3), &cfg));
        assert!(!band_is_narrow(&readout(100e6, None, 5), &cfg));
        assert!(!band_is_narrow(&readout(-1e6, Some(0.0), 5), &cfg));
    }

    #[test]
    fn the_budget_counts_bytes_and_trains() {
        let cfg = Fac2Config::default();
        assert!(!budget_spent(&cfg, 2e6, 1_000_000, 5, 200_000));
        // A next train that would overrun by more than half its size waits.
        assert!(budget_spent(&cfg, 2e6, 1_900_000, 5, 400_000));
        assert!(budget_spent(&cfg, 2e6, 0, 30, 0));
    }
}
