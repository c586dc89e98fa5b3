//! What a method concludes, and what it cost to conclude it.

pub mod host;

use crate::units::{BitRate, Bytes, DurationNs};
use serde::{Deserialize, Serialize};

/// How much probe traffic a method spent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ProbeCost {
    pub bytes: Bytes,
    pub packets: u64,
    pub trains: u32,
}

/// The spread of per-car receive rates in one train: a diagnostic for bursty
/// cross traffic and for receivers that bunch arrivals.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RateSpread {
    pub min: BitRate,
    pub median: BitRate,
    pub max: BitRate,
}

/// What the arrival stamps say about the receiver coalescing interrupts
/// (man-hasegawa-murata, ICIM, II.B and III.C): a receiver that coalesces
/// releases packets in bunches stamped nearly at once, so most gaps between
/// consecutive arrivals are tiny and the bunches recur every coalescing delay.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Coalescing {
    /// More than half of the gaps were below 1 µs (ICIM's rule), over at
    /// least 4 gaps.
    pub detected: bool,
    /// Share of gaps between consecutive arrivals below 1 µs (or below the
    /// receive clock's step, if coarser), in [0, 1].
    pub share_tiny_gaps: f64,
    /// How many gaps the share was taken over.
    pub gaps: u64,
    /// Median time from one bunch's first arrival to the next's: about the
    /// coalescing delay.  `None` when coalescing was not detected.
    pub bunch_period: Option<DurationNs>,
    /// Mean packets per bunch; `None` when coalescing was not detected.
    pub packets_per_bunch: Option<f64>,
}

/// One train of a train-based method, as it appears in the convergence trace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrainRecord {
    pub train: u32,
    /// The rate the method asked for.
    pub target_rate: BitRate,
    /// The rate the sender achieved, from its own send stamps.
    pub sending_rate: BitRate,
    /// The rate at which the train arrived; `None` when too little arrived to say.
    pub receiving_rate: Option<BitRate>,
    /// Per-car receive rates, when cars had more than one packet.
    pub car_rate_spread: Option<RateSpread>,
    pub packets: u64,
    pub bytes: Bytes,
    pub loss_fraction: f64,
    /// What the method read from this probe, in a few words (SLoPS: the
    /// fleet's vote and verdict), for the trace; `None` when it says nothing
    /// beyond the rates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reading: Option<String>,
}

/// Why a method that aims at a precision stopped probing (`abw
/// --precision`, `--max-bytes`): reports say whether the band asked for was
/// reached and, if not, what stopped it.  Methods that do not aim at a band
/// width (pair, IGI/PTR, chirp, burst) leave it unset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stopped {
    /// The band is as narrow as asked.
    TargetReached,
    /// The byte budget was spent first.
    ByteBudget,
    /// The method's cap on trains (FAC²) or fleets (SLoPS) came first.
    ProbeCap,
    /// The path carried every rate probed: only a lower bound is known.
    LowerBound,
    /// Nothing could be measured (or nothing classified).
    NoMeasurement,
}

impl Stopped {
    /// In a few words, for reports.
    pub fn phrase(self) -> &'static str {
        match self {
            Stopped::TargetReached => "the band reached the precision asked",
            Stopped::ByteBudget => "the byte budget was spent",
            Stopped::ProbeCap => "the method's cap on trains was reached",
            Stopped::LowerBound => "the path carried every rate probed (only a lower bound)",
            Stopped::NoMeasurement => "nothing could be measured",
        }
    }
}

/// A method's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    /// The method that made it (`fac2` in JSON).
    pub method: crate::method_name::MethodName,
    /// Available bandwidth A.
    pub available: BitRate,
    /// Lower bound on A (a confidence band's lower edge or a bracketing
    /// rate; the method's docs say which).
    pub low: BitRate,
    /// Upper bound on A; `None` when nothing bounds A from above (the path
    /// carried every rate probed, so the answer is "at least `low`").
    pub high: Option<BitRate>,
    /// Capacity C of the tight link, when the method can infer it.
    pub capacity: Option<BitRate>,
    /// Cross traffic X at the tight link, when the method can infer it.
    pub cross_traffic: Option<BitRate>,
    pub cost: ProbeCost,
    /// From the first probe's send to the last probe's send, on the sender's clock.
    pub probe_span: DurationNs,
    /// Whether the method met its stopping rule, so that it stands behind
    /// its band `low..high` (otherwise it ran out of probes, or saw
    /// something — coalescing, a sender that could not pace — that makes
    /// the band doubtful; `notes` say which).  How often each method's band
    /// held the truth on the lab is measured, not promised: docs/compare.md.
    pub converged: bool,
    /// Set when the result is bounded by a host rather than the path, with why.
    pub host_limited: Option<String>,
    /// The trace of every train.
    pub trains: Vec<TrainRecord>,
    /// Anything a reader should know to trust or doubt the number.
    pub notes: Vec<String>,
    /// Receiver interrupt coalescing as the arrival stamps show it, when the
    /// method looked (see [`Coalescing`]).
    #[serde(default)]
    pub coalescing: Option<Coalescing>,
    /// What the run's own trains said of the hosts (sender pacing, receiver
    /// drops, timing noise) and how that bounded this answer; set by the
    /// runner for every method ([`crate::verdict::evidence`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_evidence: Option<host::HostEvidence>,
    /// Why the method stopped, where it aims at a precision ([`Stopped`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<Stopped>,
}

impl Estimate {
    /// The estimate if it is an answer a runner may report, else why not.
    /// A method that ends with A ≤ 0 (or not finite) has not found the
    /// available bandwidth, whatever it believes: every runner turns such
    /// an "estimate" into no estimate with this reason, so no report ever
    /// says 0.0 Mb/s with a success exit.
    pub(crate) fn into_answer(self) -> Result<Estimate, String> {
        let a = self.available.bps();
        if a.is_finite() && a > 0.0 {
            Ok(self)
        } else {
            let mut why = format!(
                "{} ended with an available bandwidth of {} b/s, which is no measurement",
                self.method, a
            );
            if !self.notes.is_empty() {
                why.push_str(": ");
                why.push_str(&self.notes.join("; "));
            }
            Err(why)
        }
    }

    /// Whether the band this estimate stands behind, `low..=high` (no upper
    /// edge when `high` is `None`), holds `truth`: the test every report
    /// counts as band coverage.
    pub fn band_holds(&self, truth: BitRate) -> bool {
        band_holds(self.low, self.high, truth)
    }

    /// Whether the band *covers* the truth, as accuracy tables score it: a
    /// closed band that holds it.  A band with no top ([0, ∞) or a
    /// host-limited "A ≥ x") promises nothing about how high the truth may
    /// be, so it counts as a miss there, never as a free hit (issue 28).
    pub fn band_covers(&self, truth: BitRate) -> bool {
        self.high.is_some() && self.band_holds(truth)
    }
}

#[cfg(test)]
impl Estimate {
    /// A converged estimate of `method` with A and its band in Mb/s and
    /// nothing else: the unit tests' one way to make an answer.
    pub(crate) fn test_band(
        method: crate::method_name::MethodName,
        a_mbps: f64,
        low_mbps: f64,
        high_mbps: Option<f64>,
    ) -> Estimate {
        Estimate {
            stopped: None,
            method,
            available: BitRate::from_mbps(a_mbps),
            low: BitRate::from_mbps(low_mbps),
            high: high_mbps.map(BitRate::from_mbps),
            capacity: None,
            cross_traffic: None,
            cost: ProbeCost::default(),
            probe_span: DurationNs::ZERO,
            converged: true,
            host_limited: None,
            trains: vec![],
            notes: vec![],
            coalescing: None,
            host_evidence: None,
        }
    }
}

/// [`Estimate::band_holds`] for a band kept apart from its estimate.
pub fn band_holds(low: BitRate, high: Option<BitRate>, truth: BitRate) -> bool {
    truth >= low && high.map_or(true, |h| truth <= h)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn estimate(a_mbps: f64, low: f64, high: Option<f64>) -> Estimate {
        let mut e = Estimate::test_band(crate::method_name::MethodName::Pair, a_mbps, low, high);
        e.notes = vec!["capacity probe bunched".into()];
        e
    }

    #[test]
    fn zero_or_nonsense_is_no_answer_and_says_why() {
        assert!(estimate(80.0, 70.0, Some(90.0)).into_answer().is_ok());
        for a in [0.0, -3.0, f64::NAN, f64::INFINITY] {
            let why = estimate(a, 0.0, None).into_answer().unwrap_err();
            assert!(
                why.contains("pair") && why.contains("capacity probe bunched"),
                "{why}"
            );
        }
    }

    #[test]
    fn the_band_holds_the_truth_inclusively_and_an_open_band_has_no_top() {
        let e = estimate(80.0, 70.0, Some(90.0));
        assert!(e.band_holds(BitRate::from_mbps(70.0)));
        assert!(e.band_holds(BitRate::from_mbps(90.0)));
        assert!(!e.band_holds(BitRate::from_mbps(69.9)));
        assert!(!e.band_holds(BitRate::from_mbps(90.1)));
        assert!(estimate(80.0, 70.0, None).band_holds(BitRate::from_gbps(10.0)));
        // Scored, an open band covers nothing.
        assert!(!estimate(80.0, 70.0, None).band_covers(BitRate::from_mbps(80.0)));
        assert!(e.band_covers(BitRate::from_mbps(80.0)));
    }
}
