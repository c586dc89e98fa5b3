//! One train as FAC² reads it: why it was sent, how fast it left and
//! arrived, and what that says about A.

use crate::dispersion;
use crate::methods::common::{self, Seen};
use crate::observation::Observation;
use crate::units::DurationNs;

/// Why a train was sent; the phases of the algorithm in `mod.rs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    /// At `max_rate`, no longer than the queue budget (the first train), or
    /// longer after a shorter one was carried.
    Opening,
    /// Classic FAC² feedback: at the previous train's receiving rate.
    Feedback,
    /// Clearly below the fitted A, to find a rate the path carries.
    Lower,
    /// Just clear of the fitted A, as long as the queue budget allows: the
    /// trains that carry the estimate.
    Near,
    /// After a train that could not be measured, at a lower rate.
    Retry,
}

impl Role {
    pub fn describe(self) -> &'static str {
        match self {
            Role::Opening => "opening",
            Role::Feedback => "feedback",
            Role::Lower => "lower",
            Role::Near => "near",
            Role::Retry => "retry",
        }
    }
}

/// What a train showed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Class {
    /// Arrived slower than it left (ratio below `1 − tolerance`): sent above A.
    Above,
    /// Arrived (nearly) as fast as it left.
    Carried,
    /// Too little arrived, or the stamps made no sense.
    Unusable,
}

/// One observed train.
#[derive(Debug, Clone)]
pub(crate) struct Train {
    pub index: u32,
    pub role: Role,
    pub class: Class,
    /// The rate asked for (b/s).
    pub target_bps: f64,
    /// Achieved sending rate (b/s); the requested rate when the send stamps
    /// give none.
    pub sent_bps: f64,
    pub recv_bps: Option<f64>,
    /// Receive-side span of the rate fit (seconds): the time the train kept
    /// the tight link busy, and the weight of its point in the fit.
    pub recv_span: f64,
    /// How long it lasted at its sending rate (seconds).
    pub secs: f64,
    pub loss: f64,
    /// Packets that arrived (de-duplicated).
    pub packets: usize,
    /// The receiver bunched this train's arrivals.
    pub bunched: bool,
    /// Arrival gaps from the tight link's busy queue (opening trains whose
    /// arrivals were not bunched), for `capacity.rs`.
    pub queue_gaps: Vec<(f64, crate::units::Bytes)>,
    /// The cross traffic's noise scale read from those gaps
    /// (`capacity::gap_noise`), for the same trains.
    pub gap_noise: Option<f64>,
}

impl Train {
    /// Reads one observation; `seen` is what the ledger made of it.
    ///
    /// With `bunch_ends` (a train that spans many of the receiver's bunches)
    /// the receiving rate is read at the end of each bunch: the packet that
    /// arrived last before an interrupt waited least for it, so its stamp
    /// is nearest its arrival (Prasad, Jain & Dovrolis's IC-aware reading,
    /// as the ICIM paper cites it).  A slope through every stamp of a
    /// staircase of bunches is off by up to a bunch period over the train;
    /// the bunch ends by about one packet time.  Over a few bunches the
    /// first and last bunch decide it, and the plain slope is kept.
    pub fn read(
        obs: &Observation,
        seen: &Seen,
        role: Role,
        target_bps: f64,
        tolerance: f64,
        bunch_ends: bool,
    ) -> Train {
        let sent_bps = seen.sending.map_or(target_bps, |s| s.bps());
        // The ledger has read the plain slope already.
        let recv_fit = if bunch_ends {
            dispersion::receiving_rate_at_bunch_ends(obs, common::tiny_gap(obs))
                .or(seen.receiving_fit)
        } else {
            seen.receiving_fit
        };
        let recv_bps = recv_fit.map(|f| f.rate.bps());
        let bytes = seen.bytes.get();
        let ratio = recv_bps.map(|r| r / sent_bps);
        // The opening leaves faster than the tight link drains: its gaps
        // are a busy queue's, unless the receiver bunched them.
        let busy_queue = role == Role::Opening && !seen.coalesced();
        // A lower train is planned well below A; a short train there still
        // arrives a per cent or two slow at high load, as its own load
        // deepens the queue, so it is read with three times the tolerance.
        let tolerance = if role == Role::Lower {
            3.0 * tolerance
        } else {
            tolerance
        };
        let class = match ratio {
            Some(q) if q.is_finite() && q > 0.0 && sent_bps > 0.0 => {
                if q >= 1.0 - tolerance {
                    Class::Carried
                } else {
                    Class::Above
                }
            }
            _ => Class::Unusable,
        };
        Train {
            index: obs.train,
            role,
            class,
            target_bps,
            sent_bps,
            recv_bps,
            recv_span: recv_fit.map_or(0.0, |f| f.span.secs_f64()),
            secs: if sent_bps.is_finite() && sent_bps > 0.0 {
                bytes as f64 * 8.0 / sent_bps
            } else {
                0.0
            },
            loss: seen.loss,
            packets: seen.packets.len(),
            bunched: seen.coalesced(),
            queue_gaps: if busy_queue {
                super::capacity::queue_gaps(&seen.packets)
            } else {
                Vec::new()
            },
            gap_noise: busy_queue
                .then(|| super::capacity::gap_noise(&seen.packets))
                .flatten(),
        }
    }

    /// `R / r`, the fluid line's ordinate.
    pub(crate) fn ratio_y(&self) -> Option<f64> {
        let r = self.recv_bps?;
        let y = self.sent_bps / r;
        (y.is_finite() && y > 0.0).then_some(y)
    }

    /// The train met no queue at all: it arrived at its sending rate to
    /// within a tenth of the carried-train `tolerance`.  The tolerance
    /// itself is too wide for a near train: at 90 % load one sent 8 % above
    /// A arrives only 0.8 % slow.  Such a train only says its own A is
    /// above its rate (a censored reading, `fit::given_capacity_censored`).
    pub(crate) fn met_no_queue(&self, tolerance: f64) -> bool {
        self.ratio_y().is_some_and(|y| y <= 1.0 + 0.1 * tolerance)
    }

    /// The queue this train added at the tight link beyond what drained,
    /// `(R/r − 1)·C·T` in bits, given C (b/s): the excess the queue budget
    /// limits.
    pub(crate) fn excess_bits(&self, capacity_bps: f64) -> f64 {
        self.ratio_y()
            .map_or(0.0, |y| ((y - 1.0) * capacity_bps * self.secs).max(0.0))
    }
}

/// How long to leave the path idle before the next train so that `excess`
/// bits drain at `drain_bps`, with a quarter to spare, up to 200 ms (64 KiB
/// drains in 52 ms at 10 Mb/s).
pub(crate) fn drain_idle(excess_bits: f64, drain_bps: f64) -> DurationNs {
    if !(excess_bits > 0.0 && drain_bps > 0.0) {
        return DurationNs::ZERO;
    }
    DurationNs::from_secs_f64((1.25 * excess_bits / drain_bps).min(0.2))
}
