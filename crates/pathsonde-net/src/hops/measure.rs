//! One `hops` measurement from start to end: the trains that find the hops
//! and the tight link, then (when asked) `--queue`'s bursts.  `pathsonde
//! hops` and `lab run --method hops` both call [`measure`], so the lab scores
//! exactly what a user would run.  Saying why there is no estimate is left
//! to [`MeasureError`]; printing progress is left to the caller's callbacks.

use super::{run, HopsProber};
use crate::error::NetError;
use pathsonde_core::methods::hops::queue::{HopQueue, QueueConfig, QueueEstimate};
use pathsonde_core::methods::hops::{
    HopTrainSpec, Hops, HopsConfig, HopsEstimate, HopsObservation, HopsPlan,
};
use pathsonde_core::DurationNs;
use std::net::SocketAddr;
use thiserror::Error;

/// One measurement and what it took.
pub struct Measurement {
    /// The hops, their rates, the tight and narrow links.
    pub estimate: HopsEstimate,
    /// From the first train to the last answer (or burst).
    pub elapsed: DurationNs,
    /// ICMP answers that could not be matched to a probe.
    pub unmatched: u32,
    /// `--queue`'s bursts, after the trains.
    pub queue: Option<QueueEstimate>,
}

/// Why a measurement has no estimate.  The words are `pathsonde hops`'s
/// message; everything but [`MeasureError::Net`] means "no estimate" (exit 9).
#[derive(Debug, Error)]
pub enum MeasureError {
    /// The socket or a send failed.
    #[error(transparent)]
    Net(#[from] NetError),
    /// The method planned no train.
    #[error("hops: no train was sent")]
    NoTrain,
    /// Not one hop answered: ICMP is filtered somewhere.
    #[error("hops: nothing answered any probe to {0} (ICMP filtered on the way, or by this host's firewall)")]
    NothingAnswered(SocketAddr),
    /// `--queue` planned no burst.
    #[error("hops --queue: no burst was sent")]
    NoBurst,
}

/// Runs the method against `target` from this thread's network namespace,
/// calling `on_train` after each train and, with `queue`, `on_burst` after
/// each of the bursts that follow.
pub fn measure(
    target: SocketAddr,
    cfg: HopsConfig,
    queue: bool,
    on_train: impl FnMut(&HopsObservation),
    on_burst: impl FnMut(&HopTrainSpec, &HopsObservation),
) -> Result<Measurement, MeasureError> {
    let mut prober = HopsProber::new(target)?;
    let mut method = Hops::new(cfg);
    let started = std::time::Instant::now();
    let est = run(&mut method, &mut prober, on_train)?.ok_or(MeasureError::NoTrain)?;
    if est.hops.iter().all(|h| h.address.is_none()) {
        return Err(MeasureError::NothingAnswered(target));
    }
    let queue = if queue {
        Some(run_queue(&est, &mut prober, on_burst)?)
    } else {
        None
    };
    Ok(Measurement {
        estimate: est,
        elapsed: DurationNs::from_std(started.elapsed()),
        unmatched: prober.unmatched,
        queue,
    })
}

/// `--queue`: bursts after the main trains, their markers as far as the
/// far end the main trains found.
fn run_queue(
    est: &HopsEstimate,
    prober: &mut HopsProber,
    mut on_burst: impl FnMut(&HopTrainSpec, &HopsObservation),
) -> Result<QueueEstimate, MeasureError> {
    let markers = est
        .destination_ttl
        .unwrap_or(est.hops.len().min(usize::from(u8::MAX)) as u8)
        .max(1);
    let mut q = HopQueue::new(QueueConfig {
        markers,
        ..QueueConfig::default()
    });
    let mut train = est.trains;
    while let HopsPlan::Train(spec) = q.next_plan() {
        let obs = prober.carry(&spec, train)?;
        on_burst(&spec, &obs);
        q.observe(&obs);
        train += 1;
    }
    q.estimate().ok_or(MeasureError::NoBurst)
}
