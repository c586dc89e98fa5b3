//! The one-line target and summary an archived run carries, which
//! `history` lists: for `abw`-style measurements (`abw`, the agent, the
//! mesh) and for `lab run`.  Written once here so a run reads the same
//! whichever command made it.

use std::fmt::Write as _;

/// `history`'s line for an `abw`-style measurement.
pub fn abw_summary(run: &pathsonde_net::MeasurementRun) -> String {
    let e = &run.estimate;
    let host_limited =
        e.host_limited.is_some() || pathsonde_net::verdict::judge(run).is_host_limited();
    // A host-limited result is a lower bound, whatever band the method gave.
    let mut s = match e.high {
        Some(h) if !host_limited => format!("A {} ({} .. {})", e.available, e.low, h),
        _ => format!("A ≥ {}", e.available),
    };
    if let Some(c) = e.capacity {
        let _ = write!(s, ", C {c}");
    }
    let rtt = run.rtt_echo.as_ref().unwrap_or(&run.rtt_control).median;
    let _ = write!(s, ", RTT {rtt}");
    if host_limited {
        s.push_str(", host-limited");
    }
    s
}

/// What a lab run measured, for `history`'s target column.
pub fn lab_target(r: &pathsonde_lab::run::LabRunReport) -> String {
    let l = &r.lab;
    let mut s = format!("lab {} {}", l.name, l.capacity);
    if let Some(d) = l.delay {
        let _ = write!(s, " {d}");
    }
    if !r.cross.is_empty() {
        let _ = write!(s, " +{} cross", r.cross.len());
    }
    s
}

/// `history`'s line for a lab run.
pub fn lab_summary(r: &pathsonde_lab::run::LabRunReport) -> String {
    match (&r.summary, r.runs.first()) {
        (Some(sum), Some(first)) if sum.runs > 1 => format!(
            "{} runs, |error| median {:.1} %, p90 {:.1} %; truth {}",
            sum.runs,
            sum.median_abs_error * 100.0,
            sum.p90_abs_error * 100.0,
            first.truth_bps
        ),
        (_, Some(first)) => format!(
            "A {} vs truth {} ({:+.1} %)",
            first.estimate_bps,
            first.truth_bps,
            first.error * 100.0
        ),
        _ => "no estimate".into(),
    }
}
