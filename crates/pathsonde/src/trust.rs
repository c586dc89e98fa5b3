//! Whether a method's estimate can be trusted when the receiver coalesces
//! interrupts (ICIM paper, II.B and III.C; comparison paper, 3.1): a
//! coalescing receiver stamps a bunch of packets at nearly one instant, so
//! any method that reads single inter-arrival gaps reads the coalescing
//! timer instead of the path.  Methods whose principle rests on timing over
//! many packets — a train's first-to-last dispersion, a burst's length, a
//! delay trend over group medians — keep working at bunch level.
//!
//! This is a property of each method's principle (docs/methods/), said here
//! once so that `abw`, `lab run` and `compare` say the same.

use pathsonde_core::estimate::Coalescing;

/// What a report says about a method's estimate under coalescing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trust {
    /// The estimate rests on timing over many packets: it stands.
    Stands(&'static str),
    /// The estimate rests on single gaps: treat it as unreliable.
    Unreliable(&'static str),
}

impl Trust {
    pub fn trustworthy(self) -> bool {
        matches!(self, Trust::Stands(_))
    }
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

/// The report's line on coalescing for one estimate, when it was detected.
pub fn coalescing_line(method: &str, c: Option<Coalescing>) -> Option<String> {
    let c = c.filter(|c| c.detected)?;
    Some(format!(
        "receive coalescing detected ({:.0} % of {} gaps below 1 µs{}): {method}'s {}",
        c.share_tiny_gaps * 100.0,
        c.gaps,
        c.bunch_period
            .map_or(String::new(), |p| format!(", bunches every {p}")),
        under_coalescing(method)
            .describe()
            .trim_start_matches("its ")
    ))
}

/// The same for JSON: `null` unless coalescing was detected, else
/// `{"trustworthy": bool, "why": "..."}`.
pub fn coalescing_json(method: &str, c: Option<Coalescing>) -> serde_json::Value {
    match c.filter(|c| c.detected) {
        None => serde_json::Value::Null,
        Some(_) => {
            let t = under_coalescing(method);
            let why = match t {
                Trust::Stands(w) | Trust::Unreliable(w) => w,
            };
            serde_json::json!({ "trustworthy": t.trustworthy(), "why": why })
        }
    }
}

/// The verdict for the method called `name`.
pub fn under_coalescing(name: &str) -> Trust {
    match name {
        "fac2" => Trust::Stands(
            "rates come from first-to-last dispersion of long trains of cars, so a bunch boundary moves a train's span by at most one coalescing delay",
        ),
        "slops" => Trust::Stands(
            "the one-way-delay trend is read from medians of packet groups over long streams, which bunching shifts together",
        ),
        "burst" => Trust::Stands(
            "the ICIM principle: each burst's rate comes from its whole length, and the interval-increase test compares bunches, not single gaps",
        ),
        "ptr" => Trust::Stands(
            "the train's rate is taken over the whole train, not its single gaps",
        ),
        "chirp" => Trust::Unreliable(
            "queueing-delay excursions are read packet by packet inside one chirp, and bunching flattens them",
        ),
        "pair" => Trust::Unreliable(
            "each pair's output gap is one gap, which the coalescing timer sets (the comparison paper's abing and Spruce failure)",
        ),
        "igi" => Trust::Unreliable(
            "the gap increases are single gaps, which the coalescing timer sets",
        ),
        _ => Trust::Unreliable("no analysis of this method under coalescing"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_method_has_a_verdict_with_a_reason() {
        for name in pathsonde_core::methods::registry::NAMES {
            let t = under_coalescing(name);
            assert!(!t.describe().contains("no analysis"), "{name}");
        }
        assert!(under_coalescing("fac2").trustworthy());
        assert!(!under_coalescing("pair").trustworthy());
    }
}
