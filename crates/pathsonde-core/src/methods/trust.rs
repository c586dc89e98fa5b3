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
//! `compare` (the lookup is [`super::registry::under_coalescing`]); this
//! module holds the verdict's type only, so the registry depends on it and
//! not the other way round.

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
