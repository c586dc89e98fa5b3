//! How long a train above A may last before it overflows the path's queue.
//!
//! A train at `R > A` grows the tight link's queue at `R − A` for as long as
//! it lasts, so a train of duration `T` builds about `(R − A)·T` bits.  When
//! one overflowed, losing a fraction `ℓ` of its packets, the queue was full at
//! its end: it had admitted `(1 − ℓ)·R·T` bits and drained `A·T`, so the queue
//! holds about `Q = ((1 − ℓ)·R − A)·T`.  Later trains above A are kept short
//! enough to build at most half of the smallest such `Q`: a long train (to
//! average noisy cross traffic) is then sent nearer A, or cut short, instead of
//! overflowing again — and a (rate, length) pair that overflowed is never sent
//! again, since it would build twice the budget.

/// A train above A that lost more than the fit allows.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Overflow {
    pub sent_bps: f64,
    pub secs: f64,
    pub loss: f64,
    /// The train right before it overflowed too: the queue may not have
    /// drained in between, so this one started on a standing queue and
    /// understates the queue's size.
    pub after_overflow: bool,
    /// The previous train, if it was sent above A: (rate b/s, seconds, idle
    /// seconds between it and this one).  It left `(R − A)·T` in the queue,
    /// less `A × idle` drained before this train started.
    pub before: Option<(f64, f64, f64)>,
}

/// The overflows seen so far.
#[derive(Debug, Clone, Default)]
pub(crate) struct QueueBudget {
    overflows: Vec<Overflow>,
    /// The path's capacity (b/s) as the fit has it, once there is one.
    capacity_bps: Option<f64>,
}

/// Fraction of the estimated queue a train may build.
const SHARE: f64 = 0.5;

impl QueueBudget {
    /// Tells the budget the fitted capacity (for the packet reading below).
    pub fn set_capacity(&mut self, c_bps: Option<f64>) {
        self.capacity_bps = c_bps.filter(|c| c.is_finite() && *c > 0.0);
    }

    pub fn record(&mut self, o: Overflow) {
        if o.sent_bps.is_finite() && o.secs.is_finite() && o.secs > 0.0 {
            self.overflows.push(o);
        }
    }

    /// The path's queue (bits) as the overflows tell it for a given A (b/s):
    /// the smallest `((1 − ℓ)·R − A)·T`.  Overflows that do not fit the
    /// picture (sent below A, or losing more than their excess explains) are
    /// ignored; `None` when none is left.
    pub fn queue_bits(&self, a_bps: f64) -> Option<f64> {
        let sized = |after: bool| {
            self.overflows
                .iter()
                .filter(|o| o.after_overflow == after)
                .map(|o| self.queue_from(o, a_bps))
                .filter(|q| q.is_finite() && *q > 0.0)
                .reduce(f64::min)
        };
        sized(false).or_else(|| sized(true))
    }

    /// The queue one overflow implies, the smaller of two readings of a full
    /// queue.  If the cross traffic is a fluid that fills every gap, a full
    /// queue admits the probe at A: `Q = ((1 − ℓ)·R − A)·T`.  If it is made
    /// of packets, a full drop-tail queue drops probe and cross packets alike
    /// and admits the probe at `R·C/(R + X)` (its share of C); the queue then
    /// filled at `R − A` for `t₁ = T·((1 − ℓ) − C/(R + X)) / (1 − C/(R + X))`
    /// and `Q = (R − A)·t₁` (with `X = C − A`; without a fitted C only the
    /// fluid reading is available).
    fn queue_from(&self, o: &Overflow, a_bps: f64) -> f64 {
        let standing = o.before.map_or(0.0, |(r, t, idle)| {
            ((r - a_bps) * t - a_bps * idle).max(0.0)
        });
        self.full_reading(o, a_bps) + standing
    }

    fn full_reading(&self, o: &Overflow, a_bps: f64) -> f64 {
        let fluid = ((1.0 - o.loss) * o.sent_bps - a_bps) * o.secs;
        let Some(c) = self.capacity_bps else {
            return fluid;
        };
        let share = (c / (o.sent_bps + c - a_bps)).clamp(0.0, 1.0);
        let fill = (1.0 - o.loss - share) / (1.0 - share);
        let packets = (o.sent_bps - a_bps) * o.secs * fill;
        if packets.is_finite() && packets > 0.0 {
            fluid.min(packets)
        } else {
            fluid
        }
    }

    /// The queue (bits) a train above A may build, if an overflow sized it.
    pub fn budget_bits(&self, a_bps: f64) -> Option<f64> {
        self.queue_bits(a_bps).map(|q| SHARE * q)
    }

    /// The longest a train at `rate_bps` may last (seconds), or `None` when
    /// nothing limits it (no overflow yet, or the rate is not above A).
    pub fn max_secs(&self, rate_bps: f64, a_bps: f64) -> Option<f64> {
        let excess = rate_bps - a_bps;
        if excess.is_nan() || excess <= 0.0 {
            return None;
        }
        self.queue_bits(a_bps).map(|q| SHARE * q / excess)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_overflow_bounds_later_trains() {
        let mut b = QueueBudget::default();
        assert_eq!(b.max_secs(100e6, 70e6), None);
        // 150 KB queue, A = 70 Mb/s: a 10 ms train at 300 Mb/s admits 70 Mb/s
        // plus the queue: 0.7 Mb + 1.2 Mb of 3 Mb, loss 36.7 %.
        let loss = 1.0 - (0.7e6 + 1.2e6) / 3e6;
        b.record(Overflow {
            sent_bps: 300e6,
            secs: 0.01,
            loss,
            after_overflow: false,
            before: None,
        });
        let q = b.queue_bits(70e6).unwrap();
        assert!((q - 1.2e6).abs() < 1.0, "{q}");
        // At 110 Mb/s (40 above A) half of 1.2 Mb lasts 15 ms.
        let t = b.max_secs(110e6, 70e6).unwrap();
        assert!((t - 0.015).abs() < 1e-9, "{t}");
        // Sending at A builds nothing.
        assert_eq!(b.max_secs(70e6, 70e6), None);
        // Re-sending the overflowing pair would build twice the budget.
        assert!(b.max_secs(300e6, 70e6).unwrap() < 0.01);
    }
}
