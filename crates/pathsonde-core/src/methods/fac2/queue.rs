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
}

/// The overflows seen so far.
#[derive(Debug, Clone, Default)]
pub(crate) struct QueueBudget {
    overflows: Vec<Overflow>,
}

/// Fraction of the estimated queue a train may build.
const SHARE: f64 = 0.5;

impl QueueBudget {
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
        self.overflows
            .iter()
            .map(|o| ((1.0 - o.loss) * o.sent_bps - a_bps) * o.secs)
            .filter(|q| q.is_finite() && *q > 0.0)
            .reduce(f64::min)
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
