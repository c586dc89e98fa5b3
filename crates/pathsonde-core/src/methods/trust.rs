//! Whether a method's estimate can be trusted when the receiver coalesces
//! interrupts (ICIM paper, II.B and III.C; comparison paper, 3.1): a
//! coalescing receiver stamps a bunch of packets at nearly one instant, so
//! any method that reads single inter-arrival gaps reads the coalescing
//! timer instead of the path.  Methods whose principle rests on timing over
//! many packets — a train's first-to-last dispersion, a burst's length, a
//! delay trend over group medians — keep working at bunch level.
//!
//! This is a property of each method's principle (docs/methods/), so each
//! method's verdict is a fact in its registry entry
//! ([`super::registry::METHODS`]), said once for `abw`, `lab run` and
//! `compare`; this module holds the verdict's type and the lookup.

use super::registry;

/// What a report says about a method's estimate under coalescing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trust {
    /// The estimate rests on timing over many packets: it stands.
    Stands(&'static str),
    /// The estimate rests on single gaps: treat it as unreliable.
    Unreliable(&'static str),
}

impl Trust {
    /// True when the estimate stands under coalescing.
    pub fn trustworthy(self) -> bool {
        matches!(self, Trust::Stands(_))
    }
    /// The reason, from the method's principle.
    pub fn why(self) -> &'static str {
        match self {
            Trust::Stands(w) | Trust::Unreliable(w) => w,
        }
    }

    /// The verdict in a sentence about "its estimate".
    pub fn describe(self) -> String {
        match self {
            Trust::Stands(why) => {
                format!(
                    "its estimate can be trusted: by its principle it survives coalescing ({why})"
                )
            }
            Trust::Unreliable(why) => {
                format!("its estimate is unreliable under coalescing ({why})")
            }
        }
    }
}

/// The verdict for the method called `name` (unreliable, saying so, for a
/// name the registry does not know).
pub fn under_coalescing(name: &str) -> Trust {
    registry::info(name).map_or(
        Trust::Unreliable("no analysis of this method under coalescing"),
        |m| m.under_coalescing,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_method_has_a_verdict_with_a_reason() {
        for name in registry::NAMES {
            let t = under_coalescing(name);
            assert!(!t.describe().contains("no analysis"), "{name}");
        }
        assert!(under_coalescing("fac2").trustworthy());
        assert!(!under_coalescing("pair").trustworthy());
        assert!(!under_coalescing("nope").trustworthy());
    }
}
