//! Near trains: where FAC² reads A.
//!
//! A near train goes just clear of the line's A — far enough that the tight
//! link's queue stays busy for the whole train (it would otherwise empty
//! now and then, and the train would arrive too fast), near enough that it
//! adds little queue and that an error in the line's slope (1/C) moves its
//! reading of A little: a point `d` above A turns a relative error `ε` of C
//! into an error `d·ε` of A.  "Clear" is measured: two standard deviations
//! of the cross traffic the train meets over its own length (from the
//! points' scatter, `σ_X(T) = C·√(η/T)`) combined with the line's own error
//! on A, and at least the carried-train tolerance of C.
//!
//! Its length is the longest the queue budget allows over the floor FAC²
//! can assume of A (the line's A less two standard errors, or the fastest
//! rate carried), up to `max_train_duration`, and no more than the byte
//! budget left.  Longer trains average more cross traffic, so as the line
//! firms up (its floor rises towards A) the trains lengthen and the band
//! narrows faster.

use super::config::Fac2Config;
use super::opening::budget_secs;
use super::readout::Readout;

/// Without a measured noise scale, a near train goes this share of A clear.
const DEFAULT_MARGIN: f64 = 0.08;
/// Never nearer than this share of A ...
const MIN_MARGIN: f64 = 0.03;
/// ... nor farther than this share.
const MAX_MARGIN: f64 = 0.5;
/// Standard deviations of the combined noise between A and a near train.
const SIGMAS: f64 = 2.0;

/// Where and how long the next near train goes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct NearTrain {
    pub rate_bps: f64,
    pub secs: f64,
    /// The budget, not `max_train_duration`, set the length.
    pub budget_bound: bool,
}

/// What bounds a near train besides the reading.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Room {
    /// The queue budget, bits.
    pub budget_bits: f64,
    /// The least A can be (b/s): the budget is judged against it.
    pub floor: f64,
    /// Shortest and longest near train, seconds.
    pub secs: (f64, f64),
    /// The least a bunching receiver can measure, seconds (it overrides the
    /// budget).
    pub bunched_secs: f64,
    /// What is left of the byte budget for this train.
    pub bytes_left: f64,
}

/// Places a near train around `a` (b/s, the line's A kept above any rate
/// the path carried) within `room`.
pub(crate) fn place(cfg: &Fac2Config, r: &Readout, a: f64, room: Room) -> NearTrain {
    let Room {
        budget_bits,
        floor,
        secs: (min_secs, max_secs),
        bunched_secs,
        bytes_left,
    } = room;
    let c = r.capacity.max(a);
    let mut secs = max_secs;
    let mut rate = a;
    let mut budget_bound = false;
    // Margin and length depend on each other (a shorter train meets noisier
    // cross traffic); three rounds settle them.
    for _ in 0..3 {
        let margin = match r.eta {
            Some(eta) if eta > 0.0 => {
                let sd_x = c * (eta / secs).sqrt();
                SIGMAS * sd_x.hypot(r.se) + cfg.tolerance() * c
            }
            _ => DEFAULT_MARGIN * a + SIGMAS * r.se,
        };
        rate = cfg.clamp_rate(a + margin.clamp(MIN_MARGIN * a, MAX_MARGIN * a));
        let by_budget = budget_secs(budget_bits, rate, floor);
        budget_bound = by_budget < max_secs;
        secs = by_budget
            .min(max_secs)
            .max(min_secs.min(by_budget))
            .max(bunched_secs);
    }
    let by_bytes = bytes_left.max(0.0) * 8.0 / rate;
    NearTrain {
        rate_bps: rate,
        secs: secs.min(by_bytes),
        budget_bound,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn room(floor: f64, bytes_left: f64) -> Room {
        Room {
            budget_bits: Fac2Config::default().budget_bits(),
            floor,
            secs: (0.002, 0.025),
            bunched_secs: 0.0,
            bytes_left,
        }
    }

    fn readout(a: f64, se: f64, eta: Option<f64>) -> Readout {
        Readout {
            available: a,
            se,
            half_width: None,
            capacity: 300e6,
            capacity_rel_se: 0.0,
            short_line: false,
            cross: 300e6 - a,
            eta,
            points: 4,
            near: 1,
            set_aside: Vec::new(),
        }
    }

    #[test]
    fn near_trains_sit_just_above_a_and_respect_the_budget() {
        let cfg = Fac2Config::default();
        let r = readout(210e6, 2e6, None);
        let t = place(&cfg, &r, 210e6, room(200e6, 1e7));
        assert!(
            t.rate_bps > 210e6 * 1.03 && t.rate_bps < 210e6 * 1.2,
            "{t:?}"
        );
        let excess = (t.rate_bps - 200e6) * t.secs;
        assert!(
            excess <= cfg.budget_bits() * 1.0001,
            "{t:?} adds {excess} bits"
        );
    }

    #[test]
    fn noisier_paths_get_wider_margins_and_a_firmer_floor_longer_trains() {
        let cfg = Fac2Config::default();
        let quiet = place(
            &cfg,
            &readout(30e6, 0.5e6, Some(1e-9)),
            30e6,
            room(27e6, 1e7),
        );
        let noisy = place(
            &cfg,
            &readout(30e6, 0.5e6, Some(1e-7)),
            30e6,
            room(27e6, 1e7),
        );
        assert!(noisy.rate_bps > quiet.rate_bps, "{quiet:?} {noisy:?}");
        let loose = place(&cfg, &readout(210e6, 2e6, None), 210e6, room(150e6, 1e7));
        let firm = place(&cfg, &readout(210e6, 2e6, None), 210e6, room(205e6, 1e7));
        assert!(firm.secs > loose.secs, "{loose:?} {firm:?}");
        // The byte budget left caps the length.
        let t = place(
            &cfg,
            &readout(210e6, 2e6, None),
            210e6,
            room(205e6, 10_000.0),
        );
        assert!(t.secs * t.rate_bps <= 80_001.0, "{t:?}");
    }
}
