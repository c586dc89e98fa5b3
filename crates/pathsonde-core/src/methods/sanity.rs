//! Sanity before sending: whether the first train a method plans at the
//! user's `--max-rate` lasts no longer than a bound the runner sets (the CLI:
//! 10 s), and if not, the slowest `--max-rate` whose first train does.  A rate of 1 kb/s asks for
//! a FAC² opening of 252 s; saying so at once beats a silent wait and a
//! server timeout.

use crate::methods::registry::{self, MethodName, MethodSettings};
use crate::units::{BitRate, DurationNs};

/// How long the first train of `name` lasts with `settings` (first packet
/// sent to last), or `None` for a method that plans nothing.
pub(crate) fn first_train_span(name: MethodName, settings: &MethodSettings) -> Option<DurationNs> {
    let mut m = registry::build(name, settings);
    Some(m.next_plan().schedule()?.span())
}

/// Why a `--max-rate` cannot work, with the range that can.
#[derive(Debug, Clone, PartialEq)]
pub struct TooSlow {
    /// The first train's span at the rate asked.
    pub span: DurationNs,
    /// The slowest `--max-rate` whose first train fits, if any does below
    /// 10 Tb/s.
    pub slowest_usable: Option<BitRate>,
}

/// `Err` when the first train at `settings.max_rate` would outlast `within`.
pub fn check_max_rate(
    name: MethodName,
    settings: &MethodSettings,
    within: DurationNs,
) -> Result<(), TooSlow> {
    let span_at = |bps: f64| {
        let s = MethodSettings {
            max_rate: BitRate::from_bps(bps),
            ..*settings
        };
        first_train_span(name, &s)
    };
    let fits = |bps: f64| span_at(bps).map_or(true, |s| s <= within);
    let asked = settings.max_rate.bps();
    if fits(asked) {
        return Ok(());
    }
    let span = span_at(asked).unwrap_or(DurationNs::ZERO);
    // The span falls as the rate rises: bisect on a log scale up to 10 Tb/s.
    let top = 1e13;
    let slowest_usable = fits(top).then(|| {
        let (mut lo, mut hi) = (asked.max(1.0).ln(), top.ln());
        for _ in 0..60 {
            let mid = (lo + hi) / 2.0;
            if fits(mid.exp()) {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        BitRate::from_bps(round_up(hi.exp()))
    });
    Err(TooSlow {
        span,
        slowest_usable,
    })
}

/// `x` rounded up to two significant digits: a rate a person would type.
fn round_up(x: f64) -> f64 {
    let scale = 10f64.powf(x.log10().floor() - 1.0);
    (x / scale).ceil() * scale
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(max_rate: BitRate) -> MethodSettings {
        MethodSettings {
            max_rate,
            ..MethodSettings::default()
        }
    }

    #[test]
    fn a_rate_too_slow_for_the_timeout_is_refused_with_the_slowest_that_works() {
        let within = DurationNs::from_secs(3);
        let e = check_max_rate(MethodName::Fac2, &at(BitRate::from_kbps(1.0)), within).unwrap_err();
        assert!(e.span > DurationNs::from_secs(100), "{e:?}");
        let slowest = e.slowest_usable.unwrap();
        // The rate given fits, a little less does not.
        assert!(check_max_rate(MethodName::Fac2, &at(slowest), within).is_ok());
        assert!(check_max_rate(MethodName::Fac2, &at(slowest.scale(0.9)), within).is_err());
        assert!(slowest.bps() < 1e6, "{slowest}");
    }

    #[test]
    fn ordinary_rates_pass_for_every_method() {
        for name in MethodName::ALL {
            let r = check_max_rate(name, &at(BitRate::from_gbps(1.0)), DurationNs::from_secs(3));
            assert!(r.is_ok(), "{name}: {r:?}");
        }
    }
}
