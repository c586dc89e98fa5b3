//! The opening: bracket A cheaply and harmlessly before any long train.
//!
//! Nothing is known of the path at first, so every train of the opening is
//! sized by the queue budget `Q` against the most FAC² can assume of A:
//! a train at `R` for `T` seconds adds at most `(R − A_floor)·T` to the
//! tight link's queue, and `A_floor` is 0 until a train is carried.  The
//! first train is therefore `Q` bytes at `max_rate` — on a 1 Gb/s host, 21
//! packets in 250 µs, which no queue of `Q` or more can drop — and it
//! either passes (then longer ones at `max_rate`, each at most four times
//! the last one carried, confirm `A ≥ max_rate`) or arrives slower, at a
//! rate `r₀` between A and C.  Classic FAC² feedback follows (the next
//! train at `r₀`), which gives the fluid line its second point, and a train
//! clearly below the line's A gives the first rate the path carries, the
//! floor the near trains are sized against.

use super::config::Fac2Config;
use crate::plan::TrainSpec;
use crate::units::{BitRate, DurationNs};

/// A carried opening train at `max_rate` this long (seconds) shows
/// `A ≥ max_rate` ...
pub(crate) const CONFIRM_SECS: f64 = 0.004;
/// ... and each opening train is at most this many times longer than the
/// last one carried (a token bucket may pass a short train whole).
const GROWTH: f64 = 4.0;

/// Lower trains go at this share of the line's A.
pub(crate) const LOWER_SHARE: f64 = 0.75;

/// How long (seconds) a train at `rate` may last so that it adds at most
/// `budget_bits` beyond `a_floor` (both b/s); unbounded at or below it.
pub(crate) fn budget_secs(budget_bits: f64, rate: f64, a_floor: f64) -> f64 {
    let excess = rate - a_floor.max(0.0);
    if excess > 0.0 {
        budget_bits / excess
    } else {
        f64::INFINITY
    }
}

/// The first train: the queue budget's worth at `max_rate`.
pub(crate) fn first(cfg: &Fac2Config, resolution: DurationNs) -> TrainSpec {
    let rate = cfg.max_rate_bps();
    cfg.train_for(
        BitRate::from_bps(rate),
        resolution,
        budget_secs(cfg.budget_bits(), rate, 0.0),
    )
}

/// After opening trains at `max_rate` that were all carried, the longest
/// lasting `carried_secs`: the next, longer one, or `None` when the path
/// has carried one long enough to say `A ≥ max_rate`.
pub(crate) fn confirm(
    cfg: &Fac2Config,
    resolution: DurationNs,
    carried_secs: f64,
) -> Option<TrainSpec> {
    if carried_secs >= CONFIRM_SECS * 0.95 {
        return None;
    }
    let secs = (carried_secs * GROWTH).min(CONFIRM_SECS);
    Some(cfg.train_for(cfg.max_rate, resolution, secs))
}

/// A train at `rate` (feedback, lower, retry), as long as the budget over
/// `a_floor` allows, within the near trains' longest duration.
pub(crate) fn budgeted(
    cfg: &Fac2Config,
    resolution: DurationNs,
    bunching: DurationNs,
    rate: f64,
    a_floor: f64,
) -> TrainSpec {
    let rate = cfg.clamp_rate(rate);
    let (_, max) = cfg.duration_range();
    // A receiver that bunches arrivals can only measure a train that spans
    // several bunches; the budget yields to that (and says so, `mod.rs`).
    let secs = budget_secs(cfg.budget_bits(), rate, a_floor)
        .min(max)
        .max(cfg.bunched_secs(bunching));
    cfg.train_for(BitRate::from_bps(rate), resolution, secs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_train_is_within_the_budget_and_confirmation_grows() {
        let cfg = Fac2Config::default();
        let res = DurationNs::from_us(1);
        let t = first(&cfg, res);
        assert_eq!(t.rate, cfg.max_rate);
        assert!(t.total_bytes().get() <= cfg.queue_budget.get(), "{t:?}");
        let secs = t.duration().unwrap().secs_f64();
        let next = confirm(&cfg, res, secs).unwrap();
        assert!(next.total_bytes().get() <= 4 * t.total_bytes().get() + 3000);
        assert!(confirm(&cfg, res, CONFIRM_SECS).is_none());
    }

    #[test]
    fn budgeted_trains_add_at_most_the_budget_over_their_floor() {
        let cfg = Fac2Config::default();
        let res = DurationNs::from_us(1);
        for (rate, floor) in [(300e6, 0.0), (300e6, 200e6), (40e6, 30e6), (5e6, 0.0)] {
            let t = budgeted(&cfg, res, DurationNs::ZERO, rate, floor);
            let secs = t.duration().unwrap().secs_f64();
            let excess = (t.rate.bps() - floor) * secs;
            // Six cars at the least; one packet of slack.
            assert!(
                excess <= cfg.budget_bits() + 12_000.0 || t.cars == 6,
                "{rate} over {floor}: {excess} bits, {t:?}"
            );
        }
        // Far below the floor: as long as a near train may be.
        let t = budgeted(&cfg, res, DurationNs::ZERO, 50e6, 60e6);
        // A receiver bunching every 125 µs: at least 16 bunches, whatever the budget.
        let b = budgeted(&cfg, res, DurationNs::from_us(125), 1e9, 0.0);
        assert!(b.duration().unwrap().secs_f64() >= 0.0019, "{b:?}");
        assert!((t.duration().unwrap().secs_f64() - 0.040).abs() < 0.001);
    }
}
