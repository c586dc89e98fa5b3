//! What a run made of the precision asked for (`--precision`, `--max-bytes`):
//! the band half-width it reached beside the target, the bytes it took, and,
//! when the target was not reached, what stopped the method and about how
//! many bytes would reach it.  Printed by `abw` and `demo`, recorded in their
//! JSON and in every `lab run`/`compare` row.

use pathsonde_core::methods::registry::{self, MethodSettings};
use pathsonde_core::{Bytes, Estimate, Stopped};
use serde_json::{json, Value};

/// The band's half-width relative to A: `(high − low) / 2 / A`, or `None`
/// for an open band (or no answer).
pub fn half_width(e: &Estimate) -> Option<f64> {
    let a = e.available.bps();
    let high = e.high?.bps();
    (a > 0.0).then(|| (high - e.low.bps()) / 2.0 / a)
}

/// One run's precision outcome.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// The half-width aimed at: `--precision`, or the method's own rule.
    pub target: f64,
    /// Whether `--precision` set it.
    pub asked: bool,
    /// The band's half-width relative to A ([`half_width`]); `None` when open.
    pub half_width: Option<f64>,
    /// Whether the half-width is at or below the target.
    pub reached: bool,
    /// What ended the method.
    pub stopped: Stopped,
    /// The probe bytes the run took.
    pub bytes: Bytes,
    /// About the bytes that would reach the target (the band narrows as
    /// 1/√bytes), when a budget or cap stopped the method short of it.
    pub bytes_for_target: Option<Bytes>,
}

/// The outcome, or `None` for a method that does not aim at a band width.
pub fn outcome(e: &Estimate, s: &MethodSettings) -> Option<Outcome> {
    let stopped = e.stopped?;
    let target = s
        .precision
        .or_else(|| registry::default_precision(e.method))?;
    let hw = half_width(e);
    // Reached means the method met its rule, stands behind the band, and
    // the band it reports (floors included) is as narrow as asked.
    let reached =
        stopped == Stopped::TargetReached && e.converged && hw.is_some_and(|h| h <= target * 1.02);
    let bytes_for_target = match (reached, stopped, hw) {
        (false, Stopped::ByteBudget | Stopped::ProbeCap, Some(h)) if h > target => {
            let scale = (h / target).powi(2);
            Some(Bytes((e.cost.bytes.get() as f64 * scale).ceil() as u64))
        }
        _ => None,
    };
    Some(Outcome {
        target,
        asked: s.precision.is_some(),
        half_width: hw,
        reached,
        stopped,
        bytes: e.cost.bytes,
        bytes_for_target,
    })
}

/// The `precision` object of the JSON reports.
pub fn json(e: &Estimate, s: &MethodSettings) -> Value {
    match outcome(e, s) {
        None => json!({
            "applies": false,
            "why": format!("{} does not aim at a band width: --precision and --max-bytes steer fac2 and slops", e.method),
        }),
        Some(o) => json!({
            "applies": true,
            "target": o.target,
            "asked": o.asked,
            "half_width": o.half_width,
            "reached": o.reached,
            "stopped_by": o.stopped,
            "bytes": o.bytes.get(),
            "max_bytes": s.max_bytes.map(Bytes::get),
            "bytes_for_target": o.bytes_for_target.map(Bytes::get),
        }),
    }
}

/// The report's line, e.g. `±2.0 % asked: reached ±1.7 % with 3.1 MB`.
pub fn line(e: &Estimate, s: &MethodSettings) -> String {
    let Some(o) = outcome(e, s) else {
        return format!(
            "{} does not aim at a band width (--precision and --max-bytes steer fac2 and slops)",
            e.method
        );
    };
    let pct = |v: f64| format!("±{:.1} %", v * 100.0);
    let aim = if o.asked {
        format!("{} asked", pct(o.target))
    } else {
        format!("{} (the method's own rule)", pct(o.target))
    };
    let band = o.half_width.map_or("an open band".to_string(), pct);
    if o.reached {
        return format!("{aim}: reached {band} with {}", o.bytes);
    }
    let mut out = format!(
        "{aim}: not reached ({band} with {}): {}",
        o.bytes,
        o.stopped.phrase()
    );
    if o.stopped == Stopped::TargetReached {
        let why = if e.converged {
            "the method floors its band at what its samples of the window support (docs/methods/)"
        } else {
            "the run's own evidence doubts the band (see notes)"
        };
        out = format!("{aim}: not reached ({band} with {}): {why}", o.bytes);
    }
    if let Some(b) = o.bytes_for_target {
        out.push_str(&format!(
            "; about {b} would reach it at this path's variation (--max-bytes)"
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use pathsonde_core::BitRate;

    fn estimate(
        method: &str,
        a: f64,
        low: f64,
        high: Option<f64>,
        stopped: Option<Stopped>,
    ) -> Estimate {
        let mut e: Estimate = serde_json::from_value(json!({
            "method": method,
            "available": a,
            "low": low,
            "high": high,
            "capacity": null,
            "cross_traffic": null,
            "cost": {"bytes": 2_000_000, "packets": 1333, "trains": 12},
            "probe_span": 0,
            "converged": stopped == Some(Stopped::TargetReached),
            "host_limited": null,
            "trains": [],
            "notes": [],
        }))
        .unwrap();
        e.stopped = stopped;
        e.available = BitRate::from_bps(a);
        e
    }

    fn asked(p: f64) -> MethodSettings {
        MethodSettings {
            precision: Some(p),
            ..MethodSettings::default()
        }
    }

    #[test]
    fn a_reached_target_says_so_with_the_bytes() {
        let e = estimate(
            "fac2",
            100e6,
            98.5e6,
            Some(101.5e6),
            Some(Stopped::TargetReached),
        );
        let o = outcome(&e, &asked(0.02)).unwrap();
        assert!(o.reached && (o.half_width.unwrap() - 0.015).abs() < 1e-9);
        assert_eq!(o.bytes_for_target, None);
        assert!(line(&e, &asked(0.02)).starts_with("±2.0 % asked: reached ±1.5 %"));
    }

    #[test]
    fn a_spent_budget_says_what_stopped_it_and_what_would_do() {
        // ±4 % after 2 MB, ±2 % asked: four times the bytes.
        let e = estimate("fac2", 100e6, 96e6, Some(104e6), Some(Stopped::ByteBudget));
        let o = outcome(&e, &asked(0.02)).unwrap();
        assert!(!o.reached);
        assert_eq!(o.bytes_for_target, Some(Bytes(8_000_000)));
        let l = line(&e, &asked(0.02));
        assert!(
            l.contains("not reached") && l.contains("byte budget"),
            "{l}"
        );
        let j = json(&e, &asked(0.02));
        assert_eq!(j["stopped_by"], "byte_budget");
        assert_eq!(j["reached"], false);
    }

    #[test]
    fn methods_without_a_band_target_say_so() {
        let e = estimate("pair", 100e6, 90e6, Some(110e6), None);
        assert!(outcome(&e, &asked(0.02)).is_none());
        assert_eq!(json(&e, &asked(0.02))["applies"], false);
        assert!(line(&e, &asked(0.02)).contains("does not aim"));
        // Unasked, FAC² is judged against its own ±8 %.
        let e = estimate(
            "fac2",
            100e6,
            95e6,
            Some(105e6),
            Some(Stopped::TargetReached),
        );
        let o = outcome(&e, &MethodSettings::default()).unwrap();
        assert!(!o.asked && (o.target - 0.08).abs() < 1e-12 && o.reached);
    }
}
