//! How closely the sender paced the trains it was asked to pace: each paced
//! train's load rate from its own send stamps against the rate planned.
//!
//! Evidence of the run itself for the host verdict (issue 26): every rate
//! `hops` reads is the rate a train *entered the path at*, and a sender that
//! is preempted for a millisecond in the middle of a 2 ms check train sends
//! it at a rate nobody asked for.  The method already reads each train at
//! the rate it reached; this summary says, in the report, how far that was
//! from the plan over the whole run, so a reader (and the lab's scoring)
//! can tell a path that was tested as planned from one the host re-planned.

use crate::units::BitRate;
use serde::{Deserialize, Serialize};

/// A paced train whose send-stamped load rate is further than this from
/// its plan was not paced as asked: the host, not the path, set it (the
/// narrow-link checks blame the sender by the same margin, [`off_plan`]).
pub const OFF_BY: f64 = 0.15;

/// Whether a train sent at `sent` kept to its plan `asked` within
/// [`OFF_BY`]; the one test both this summary and the clamp check's
/// blame of the sender use.
pub fn off_plan(sent: f64, asked: f64) -> bool {
    (sent / asked - 1.0).abs() > OFF_BY
}

/// The paced trains' sent-over-asked ratios, as they came.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PacingLog {
    ratios: Vec<f64>,
}

impl PacingLog {
    /// Records a train paced at `asked` whose load left at `sent`.
    pub fn add(&mut self, asked: BitRate, sent: BitRate) {
        if asked.bps() > 0.0 && sent.bps().is_finite() {
            self.ratios.push(sent.bps() / asked.bps());
        }
    }

    pub fn summary(&self) -> PacingSummary {
        let mut r = self.ratios.clone();
        r.sort_by(f64::total_cmp);
        PacingSummary {
            trains: r.len() as u32,
            median: crate::stats::median(&r),
            least: r.first().copied(),
            most: r.last().copied(),
            off: r.iter().filter(|x| off_plan(**x, 1.0)).count() as u32,
        }
    }
}

/// What the report says of the sender's pacing (`pacing` in `--json`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct PacingSummary {
    /// Paced trains with send stamps to read (the back-to-back discovery
    /// trains and `--queue`'s bursts are not paced and not counted).
    pub trains: u32,
    /// Median, least and largest of sent rate / asked rate.
    pub median: Option<f64>,
    pub least: Option<f64>,
    pub most: Option<f64>,
    /// Trains further than [`OFF_BY`] from their plan.
    pub off: u32,
}

impl PacingSummary {
    /// The note a run gets when trains were not paced as asked.
    pub fn note(&self) -> Option<String> {
        if self.off == 0 {
            return None;
        }
        let pct = |x: Option<f64>| x.map_or(0.0, |x| (x - 1.0) * 100.0);
        Some(format!(
            "{} of {} paced trains left this host more than {:.0} % off their planned rate ({:+.0} % to {:+.0} %, from their send stamps): host pacing; each train is read at the rate it left at",
            self.off,
            self.trains,
            OFF_BY * 100.0,
            pct(self.least),
            pct(self.most),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(mbps: f64) -> BitRate {
        BitRate::from_bps(mbps * 1e6)
    }

    #[test]
    fn trains_off_their_plan_are_counted_and_named() {
        let mut log = PacingLog::default();
        log.add(r(100.0), r(99.0));
        log.add(r(100.0), r(101.0));
        log.add(r(150.0), r(99.0));
        log.add(r(97.0), r(173.0));
        let s = log.summary();
        assert_eq!(s.trains, 4);
        assert_eq!(s.off, 2);
        assert!((s.least.unwrap() - 0.66).abs() < 0.01, "{s:?}");
        assert!((s.most.unwrap() - 1.78).abs() < 0.01, "{s:?}");
        let note = s.note().expect("a note");
        assert!(note.starts_with("2 of 4 paced trains"), "{note}");
        assert!(note.contains("-34 % to +78 %"), "{note}");
    }

    #[test]
    fn a_sender_that_kept_its_plan_gets_no_note() {
        let mut log = PacingLog::default();
        for x in [98.0, 100.0, 103.0] {
            log.add(r(100.0), r(x));
        }
        let s = log.summary();
        assert_eq!((s.trains, s.off), (3, 0));
        assert!(s.note().is_none());
        assert_eq!(PacingLog::default().summary().trains, 0);
    }
}
