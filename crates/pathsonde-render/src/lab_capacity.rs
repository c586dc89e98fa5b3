//! `lab run --method capacity`'s report: each UDPST test's maximum beside
//! the tight link's truth, the accuracy summary, the progress lines printed
//! before the lab is built and after each test, and the archive's target
//! and summary.  The lab
//! (`pathsonde_lab::capacity`) runs the tests and scores them; this only
//! says what they found, so the binary is left with the flags and the exit
//! code.

use pathsonde_core::capacity::Unclear;
use pathsonde_core::DurationNs;
use pathsonde_lab::capacity::{CapacityRecord, CapacityRunOptions, LabCapacityReport};
use pathsonde_net::udpst::Algorithm;
use std::fmt::Write as _;

/// The load-adjustment algorithm as the report names it: "B" or "C".
pub fn algorithm_letter(a: Algorithm) -> &'static str {
    match a {
        Algorithm::B => "B",
        Algorithm::C => "C",
    }
}

/// The progress line before the lab is built: the path, how long the
/// cross traffic settles, and the tests to come.
pub fn start_line(o: &CapacityRunOptions, settle: DurationNs) -> String {
    format!(
        "building lab {} ({} tight link, {} cross source(s)); cross traffic settles for {:.1} s, then {} UDPST test(s) of {} (Type {})",
        o.spec.name,
        o.spec.capacity,
        o.cross.len(),
        settle.secs_f64(),
        o.runs,
        o.test.duration_s,
        algorithm_letter(o.test.algorithm),
    )
}

/// What `history` shows as the run's target: the lab, its tight link and
/// how many cross sources loaded it.
pub fn target(report: &LabCapacityReport) -> String {
    let l = &report.lab;
    format!(
        "lab {} {}{}",
        l.name,
        l.capacity,
        if report.cross.is_empty() {
            String::new()
        } else {
            format!(" +{} cross", report.cross.len())
        }
    )
}

/// What `history` shows as the run's method: "capacity-b" or "capacity-c".
pub fn method(a: Algorithm) -> String {
    format!("capacity-{}", algorithm_letter(a).to_lowercase())
}

/// `history`'s line for the run: the maximum's accuracy over the tests.
pub fn summary_line(report: &LabCapacityReport) -> String {
    match &report.summary {
        Some(s) => format!(
            "{} tests, |max − truth| median {:.1} %, p90 {:.1} %; truth {}",
            s.runs,
            s.median_abs_error * 100.0,
            s.p90_abs_error * 100.0,
            report.runs[0].truth_bps
        ),
        None => "no result".into(),
    }
}

/// A signed error in percent: "+1.2 %".
fn pct(x: f64) -> String {
    format!("{:+.1} %", x * 100.0)
}

/// The line printed after each test.
pub fn progress_line(r: &CapacityRecord) -> String {
    format!(
        "run {:>3}: max {}  truth {}  error {}  at zero loss {}  (median {}; {:.1} s){}",
        r.run,
        r.max_ip_layer_capacity_bps,
        r.truth_bps,
        pct(r.error),
        zero_loss_cell(r),
        r.median_ip_layer_capacity_bps,
        r.duration_s.secs_f64(),
        if r.error_status == 0 {
            String::new()
        } else {
            format!("  ErrorStatus {}", r.error_status)
        }
    )
}

/// The zero-loss fit's reading for a table cell: "69.1 Mb/s (+0.4 %, held)",
/// or why there is none.
fn zero_loss_cell(r: &CapacityRecord) -> String {
    match (
        r.zero_loss.reading(),
        r.zero_loss_error,
        r.zero_loss_in_band,
    ) {
        (Ok((a, _, _)), Some(e), Some(held)) => {
            format!("{a} ({}, {})", pct(e), if held { "held" } else { "missed" })
        }
        (Err(reason), ..) => format!("unclear ({})", unclear_word(reason)),
        _ => "-".into(),
    }
}

/// A reason the zero-loss fit gave none, in one word for a table.
fn unclear_word(u: Unclear) -> &'static str {
    match u {
        Unclear::NoLoss => "no loss",
        Unclear::TooFewWindows => "few windows",
        Unclear::RateIndependent => "flat",
    }
}

/// The readable report of `lab run --method capacity`.
pub fn text(r: &LabCapacityReport) -> String {
    let mut s = String::new();
    crate::report::lab_header(
        &mut s,
        &r.lab,
        &format!(
            "{} at the IP layer for 1250-byte UDPST datagrams",
            r.capacity_ip_bps
        ),
        None,
        &r.cross,
        r.truth_check.as_ref(),
        "no test",
    );
    let _ = writeln!(
        s,
        "test: RFC 9097 maximum IP-layer capacity, UDPST {} Type {} for {} against {} (pathsonde's UDPST server in the receiver)",
        r.direction,
        algorithm_letter(r.test.algorithm),
        r.test.duration_s,
        r.udpst_server
    );
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "--- Tests (truth = tight link at the IP layer − cross traffic, over each test's load) ---"
    );
    let _ = writeln!(
        s,
        "{:>4} {:>13} {:>13} {:>8} {:>26} {:>13} {:>8} {:>5} {:>7} {:>9} {:>6} {:>6}",
        "run",
        "maximum",
        "truth",
        "error",
        "at zero loss (error, band)",
        "median",
        "error",
        "at s",
        "time s",
        "sent MB",
        "loss",
        "drops"
    );
    for x in &r.runs {
        let _ = writeln!(
            s,
            "{:>4} {:>13} {:>13} {:>8} {:>26} {:>13} {:>8} {:>5.1} {:>7.1} {:>9.1} {:>6} {:>6}",
            x.run,
            x.max_ip_layer_capacity_bps.to_string(),
            x.truth_bps.to_string(),
            pct(x.error),
            zero_loss_cell(x),
            x.median_ip_layer_capacity_bps.to_string(),
            pct(x.median_error),
            x.max_time_s.secs_f64(),
            x.duration_s.secs_f64(),
            x.bytes_sent as f64 / 1e6,
            x.loss_count,
            x.drops_caused.map_or("?".into(), |d| format!("{d:.0}")),
        );
    }
    let held: Vec<&CapacityRecord> = r.runs.iter().filter(|x| x.host_limited.is_some()).collect();
    if !held.is_empty() {
        let _ = writeln!(s);
        for x in held {
            let _ = writeln!(
                s,
                "run {}: host-limited: {}",
                x.run,
                x.host_limited.as_deref().unwrap_or_default()
            );
        }
    }
    if let Some(sum) = &r.summary {
        let _ = writeln!(s);
        let _ = writeln!(
            s,
            "--- Accuracy of the maximum over {} test(s) ---",
            sum.runs
        );
        if sum.host_limited > 0 {
            let _ = writeln!(
                s,
                "{} of {} maxima were held by the sending host: lower bounds, not the path's capacity",
                sum.host_limited, sum.runs
            );
        }
        let _ = writeln!(
            s,
            "|error| median {:.1} %, p90 {:.1} %, max {:.1} %; signed mean {}; band: none (the maximum is one number)",
            sum.median_abs_error * 100.0,
            sum.p90_abs_error * 100.0,
            sum.max_abs_error * 100.0,
            pct(sum.mean_signed_error)
        );
        let z = &sum.zero_loss;
        let _ = writeln!(
            s,
            "at zero loss: a reading in {} of {} test(s){}",
            z.estimates,
            z.runs,
            match (z.median_abs_error, z.p90_abs_error, z.band_coverage) {
                (Some(m), Some(p), Some(c)) => format!(
                    "; |error| median {:.1} %, p90 {:.1} %; band held the truth in {:.0} %",
                    m * 100.0,
                    p * 100.0,
                    c * 100.0
                ),
                _ => String::new(),
            }
        );
        let _ = writeln!(
            s,
            "mean sub-interval rate |error| median {}; median sub-interval rate |error| median {}; median test time {:.1} s; drops caused median {}",
            sum.median_abs_error_of_mean.map_or("-".into(), |e| format!("{:.1} %", e * 100.0)),
            sum.median_abs_error_of_median.map_or("-".into(), |e| format!("{:.1} %", e * 100.0)),
            sum.median_duration_s,
            sum.median_drops_caused.map_or("?".into(), |d| format!("{d:.0}")),
        );
    }
    let mut notes = r.notes.clone();
    for x in &r.runs {
        notes.extend(x.notes.iter().map(|n| format!("run {}: {n}", x.run)));
    }
    if !notes.is_empty() {
        let _ = writeln!(s);
        let _ = writeln!(s, "--- Notes ---");
        for n in notes {
            let _ = writeln!(s, "- {n}");
        }
    }
    s
}
