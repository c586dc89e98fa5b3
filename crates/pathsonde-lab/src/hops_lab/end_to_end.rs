//! `lab run --method hops --end-to-end`: a pathsonde server on the chain's
//! receiver, and each run's end-to-end measurement (the default method, as
//! `pathsonde hops` makes it when the far end runs a server) scored against
//! the path's truth, beside the verdict `hops` gave on whether the tight
//! link it named agrees (`pathsonde_core::methods::hops::end_to_end`).
//!
//! The truth is the tight link's, over the end-to-end measurement's own
//! window (a few tenths of a second, so its cross traffic is that window's,
//! not the whole run's) and in IP bytes of the end-to-end probes (1500
//! bytes, not the hops trains' 500): the chain's only other shaped link is
//! idle and has more available bandwidth, and its last link is an unshaped
//! veth, so the path's available bandwidth is the tight link's.  The
//! verdict should then be "consistent": the tight link is a router-to-router
//! link `hops` measures.

use super::HopsRunRecord;
use crate::truth;
use pathsonde_core::methods::hops::end_to_end::{Agreement, Comparison};
use pathsonde_core::{stats, BitRate, Bytes, Estimate, TimeNs};
use serde::Serialize;

/// The end-to-end probes' IP size (`pathsonde hops`'s end-to-end settings).
pub const PROBE_SIZE: Bytes = Bytes(1500);

/// What one run's end-to-end measurement gave: the estimate and the
/// verdict beside the tight link, or why there is none, and its window.
#[derive(Debug, Clone)]
pub struct EndToEndRun {
    pub outcome: Result<(Estimate, Comparison), String>,
    pub from: TimeNs,
    pub to: TimeNs,
}

/// One run's end-to-end measurement beside the truth.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EndToEndScore {
    /// The default method's estimate and band; `None` when it gave none.
    pub available_bps: Option<BitRate>,
    pub low_bps: Option<BitRate>,
    /// `None` for a band with no upper end (or no estimate).
    pub high_bps: Option<BitRate>,
    /// The tight link's available bandwidth over the end-to-end window,
    /// in IP bytes of the end-to-end probes.
    pub truth_available_bps: BitRate,
    /// (estimate − truth) / truth.
    pub error: Option<f64>,
    /// The band holds the truth (an open band never does).
    pub band_holds_truth: bool,
    /// `hops`'s verdict on the tight link beside the estimate.
    pub agreement: Option<Agreement>,
    /// Why there is no estimate (the client's words).
    pub failed: Option<String>,
    /// The estimate's own word that the hosts, not the path, set its
    /// limit (`Estimate::host_limited`), so a far-off reading says so.
    pub host_limited: Option<String>,
}

/// Over the runs that measured end to end.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EndToEndSummary {
    pub runs: usize,
    /// Runs with an estimate.
    pub measured: usize,
    pub median_abs_error: Option<f64>,
    pub band_holds_truth: usize,
    pub consistent: usize,
}

/// Scores one run's end-to-end measurement; `capacity_l2` is the tight
/// link's tbf rate and `cross` its cross source's send log.
pub fn score(
    run: &EndToEndRun,
    capacity_l2: BitRate,
    cross: &[Vec<truth::LogPoint>],
) -> EndToEndScore {
    let cross_l2 = truth::cross_l2_rate(cross, run.from, run.to).unwrap_or(BitRate::ZERO);
    let t = truth::available_ip(capacity_l2, cross_l2, PROBE_SIZE);
    match &run.outcome {
        Ok((e, c)) => EndToEndScore {
            available_bps: Some(e.available),
            low_bps: Some(e.low),
            high_bps: e.high,
            truth_available_bps: t,
            error: (t.bps() > 0.0).then(|| (e.available.bps() - t.bps()) / t.bps()),
            band_holds_truth: e.band_covers(t),
            agreement: Some(c.agreement),
            failed: None,
            host_limited: e.host_limited.clone(),
        },
        Err(why) => EndToEndScore {
            available_bps: None,
            low_bps: None,
            high_bps: None,
            truth_available_bps: t,
            error: None,
            band_holds_truth: false,
            agreement: None,
            failed: Some(why.clone()),
            host_limited: None,
        },
    }
}

/// The summary over the runs that measured end to end (`None` when none did).
pub fn summarise(runs: &[HopsRunRecord]) -> Option<EndToEndSummary> {
    let scored: Vec<&EndToEndScore> = runs.iter().filter_map(|r| r.end_to_end.as_ref()).collect();
    if scored.is_empty() {
        return None;
    }
    let errs: Vec<f64> = scored
        .iter()
        .filter_map(|s| s.error.map(f64::abs))
        .collect();
    Some(EndToEndSummary {
        runs: scored.len(),
        measured: scored.iter().filter(|s| s.available_bps.is_some()).count(),
        median_abs_error: stats::median(&errs),
        band_holds_truth: scored.iter().filter(|s| s.band_holds_truth).count(),
        consistent: scored
            .iter()
            .filter(|s| s.agreement == Some(Agreement::Consistent))
            .count(),
    })
}
