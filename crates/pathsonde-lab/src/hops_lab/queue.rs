//! `lab run --method hops --queue-probe`: `hops --queue`'s bursts scored
//! against the chain's own queues.
//!
//! The truth is the chain's configuration, not a counter: the short queue
//! is the shaped link with the least tbf `limit` (ties go to the earlier
//! link, which a burst meets first), and what it can hold of a burst is
//! that limit and the tbf's bucket ([`TBF_BURST`]), which lets a burst's
//! head through at once.  A burst that comes in much faster than the link
//! also gets out what the link sends while it arrives (about `C/R` of it:
//! a few per cent from a sender at gigabits per second), and cross traffic
//! waiting in the queue takes room from it, so the bracket the method
//! reports should straddle that figure, a little above or below; the
//! report shows the two side by side rather than a pass mark.
//!
//! The hop is scored like the tight link (`names_link`): the hop that first
//! lost a burst names link `j` when it is `j`, or when the hops between it
//! and the last answering hop before it were all reported silent.

use super::{names_link, HopsRunRecord};
use crate::chain::{ChainSpec, TBF_BURST};
use pathsonde_core::methods::hops::queue::QueueEstimate;
use pathsonde_core::{stats, Bytes};
use serde::Serialize;

/// One run's bursts beside the chain's queues.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QueueScore {
    /// The shaped link with the least queue limit.
    pub true_short: usize,
    /// Its limit and tbf bucket: what a burst can leave in it.
    pub truth_bytes: Bytes,
    /// The hop where the smallest lost burst was first lost.
    pub first_overflow: Option<u8>,
    /// Whether that hop names `true_short`.
    pub short_named: bool,
    /// The path's MBS bracket: the largest burst no hop lost, the smallest
    /// some hop lost.
    pub mbs_passed: Option<Bytes>,
    pub mbs_lost: Option<Bytes>,
    /// The bursts' bytes (not in the run's `probe_bytes`).
    pub probe_bytes: Bytes,
}

/// Over the scored runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QueueSummary {
    pub runs: usize,
    pub short_named: usize,
    /// What the short link can hold (the same in every run of a chain).
    pub truth_bytes: Bytes,
    pub median_passed: Option<f64>,
    pub median_lost: Option<f64>,
    pub median_probe_bytes: Option<f64>,
}

/// The short queue of the chain: the shaped link with the least limit and
/// what it holds, `None` when no link is shaped.
pub fn short_queue(spec: &ChainSpec) -> Option<(usize, Bytes)> {
    spec.links
        .iter()
        .enumerate()
        .filter(|(_, l)| l.rate.is_some())
        .map(|(idx, l)| (idx + 1, l.queue.unwrap_or(spec.queue)))
        .min_by_key(|&(j, limit)| (limit, j))
        .map(|(j, limit)| (j, limit + TBF_BURST))
}

/// Scores one run's `hops --queue` against the chain; `silent` are the hops
/// the run reported silent.  `None` when no link is shaped.
pub fn score(spec: &ChainSpec, q: &QueueEstimate, silent: &[u8]) -> Option<QueueScore> {
    let (true_short, truth_bytes) = short_queue(spec)?;
    let short_named = q.first_overflow.is_some_and(|to| {
        let from = (1..to).rev().find(|h| !silent.contains(h)).unwrap_or(0);
        names_link(from, to, true_short, silent)
    });
    Some(QueueScore {
        true_short,
        truth_bytes,
        first_overflow: q.first_overflow,
        short_named,
        mbs_passed: q.mbs_passed,
        mbs_lost: q.mbs_lost,
        probe_bytes: q.probe_bytes,
    })
}

/// The summary over the runs that carried bursts (`None` when none did).
pub fn summarise(runs: &[HopsRunRecord]) -> Option<QueueSummary> {
    let scored: Vec<&QueueScore> = runs.iter().filter_map(|r| r.queue.as_ref()).collect();
    let first = scored.first()?;
    let median = |f: &dyn Fn(&QueueScore) -> Option<Bytes>| {
        let v: Vec<f64> = scored
            .iter()
            .filter_map(|s| f(s))
            .map(|b| b.get() as f64)
            .collect();
        stats::median(&v)
    };
    Some(QueueSummary {
        runs: scored.len(),
        short_named: scored.iter().filter(|s| s.short_named).count(),
        truth_bytes: first.truth_bytes,
        median_passed: median(&|s| s.mbs_passed),
        median_lost: median(&|s| s.mbs_lost),
        median_probe_bytes: median(&|s| Some(s.probe_bytes)),
    })
}
