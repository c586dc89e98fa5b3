//! How reports render a method's verdict under receive coalescing: the
//! verdict itself is the method's registry fact
//! (`pathsonde_core::methods::trust`); this says it in a report line or a
//! JSON object, the same for `abw`, `lab run` and `compare`.

use pathsonde_core::estimate::Coalescing;
use pathsonde_core::methods::registry::under_coalescing;

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
            serde_json::json!({ "trustworthy": t.trustworthy(), "why": t.why() })
        }
    }
}
