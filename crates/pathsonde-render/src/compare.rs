//! `pathsonde compare`'s tables: the text report (compare.txt and the
//! terminal) and the Markdown table (compare.md), per load and method, with
//! the hosts' and the methods' trust lines.  Takes
//! `pathsonde_lab::compare::CompareReport` as the sweep returns it; the
//! figures are [`crate::compare_plot`]'s, the command (`compare_cmd`) runs
//! the sweep and writes the files.

use pathsonde_core::BitRate;
use pathsonde_lab::compare::{CompareReport, Row};
use std::fmt::Write;

fn mbps(x: Option<BitRate>) -> String {
    x.map_or("-".into(), |b| format!("{:.1}", b.bps() / 1e6))
}

fn pct(x: Option<f64>) -> String {
    x.map_or("-".into(), |e| format!("{:.1} %", e * 100.0))
}

fn ratio(x: Option<f64>) -> String {
    x.map_or("-".into(), |e| format!("{e:.3}"))
}

fn share(x: Option<f64>) -> String {
    x.map_or("-".into(), |e| format!("{:.0} %", e * 100.0))
}

fn count(x: Option<f64>) -> String {
    x.map_or("?".into(), |d| format!("{d:.0}"))
}

/// "yes" when every method was told C (`--known-capacity`), "no" when blind:
/// a column of every table row, so no figure is read without it.
fn c_given(report: &CompareReport) -> &'static str {
    if report.settings.known_capacity.is_some() {
        "yes"
    } else {
        "no"
    }
}

fn header(report: &CompareReport) -> String {
    let l = &report.lab;
    format!(
        "tight link {} (tbf, L2; {} at the IP layer for {}-byte probes), queue {}, MTU {}{}{}; \
         {} run(s) per method and load; cross traffic settles {:.1} s per load, {:.1} s quiet before each run; \
         methods told: {}",
        l.capacity,
        report.capacity_ip_bps,
        report.probe_size_bytes,
        l.queue,
        l.mtu,
        l.narrow.map_or(String::new(), |n| format!(", narrow link {n}")),
        l.delay.map_or(String::new(), |d| format!(", one-way delay {d}")),
        report.runs_per_cell,
        report.settle_s.to_std().as_secs_f64(),
        report.tool_settle_s.to_std().as_secs_f64(),
        crate::report::settings_line(&report.settings),
    ) + &capacity_header(report)
}

/// What the capacity row measures and is judged against, when it is there.
fn capacity_header(report: &CompareReport) -> String {
    let Some(c) = report.capacity else {
        return String::new();
    };
    format!(
        "; capacity: RFC 9097's maximum IP-layer capacity, one UDPST test of {} (Type {}) per run, upstream to the UDPST server in the receiver; its truth is the tight link's IP-layer rate for its own datagrams minus the cross traffic (not A for the probe size), and it has no band; capacity-zero-loss: pathsonde's zero-loss fit of the same tests, banded, no answer where the fit cannot tell",
        c.duration_s,
        match c.algorithm {
            pathsonde_net::udpst::Algorithm::B => "B",
            pathsonde_net::udpst::Algorithm::C => "C",
        }
    )
}

/// The readable report: one table per cross-traffic kind, a row per load and method.
pub fn text(report: &CompareReport) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "--- pathsonde compare ---");
    let _ = writeln!(s, "{}", header(report));
    let _ = writeln!(
        s,
        "sweep took {:.0} s; rates in Mb/s (IP layer); error = |estimate − truth| / truth, truth = A over each run's own window",
        report.elapsed_s.secs_f64()
    );
    let la = |l: Option<[f64; 3]>| l.map_or("?".into(), |l| format!("{:.2}", l[0]));
    let _ = writeln!(
        s,
        "machine load average (1 min) before {}, after {}; per load: {}",
        la(report.load_average_before),
        la(report.load_average_after),
        report
            .phases
            .iter()
            .map(|p| format!(
                "{} {} % {}",
                p.kind,
                p.load,
                p.load_average.map_or("?".into(), |l| format!("{l:.2}"))
            ))
            .collect::<Vec<_>>()
            .join(", ")
    );
    for kind in &report.kinds {
        let _ = writeln!(s);
        let _ = writeln!(s, "{kind} cross traffic");
        let _ = writeln!(
            s,
            "{:>5} {:<8} {:>3} {:>5} {:>8} {:>8} {:>7} {:>8} {:>8} {:>8} {:>7} {:>7} {:>5} {:>5} {:>7} {:>8} {:>7} {:>7} {:>8} {:>5} {:>5} {:>5}",
            "load", "method", "C?", "runs", "truth A", "mean est", "sd", "mean|e|", "med|e|", "p90|e|",
            "floor", "e/floor", "band", "drops", "time s", "probe MB", "packets", "intrus.", "overhead", "conv", "coal", "host"
        );
        for r in report.rows.iter().filter(|r| &r.kind == kind) {
            let _ = writeln!(
                s,
                "{:>4}% {:<8} {:>3} {:>5} {:>8} {:>8} {:>7} {:>8} {:>8} {:>8} {:>7} {:>7} {:>5} {:>5} {:>7} {:>8} {:>7} {:>7} {:>8} {:>5} {:>5} {:>5}",
                r.load,
                r.method,
                c_given(report),
                format!("{}/{}", r.runs, r.runs + r.failed),
                mbps(r.truth_mean_bps),
                mbps(r.estimate_mean_bps),
                mbps(r.estimate_std_bps),
                pct(r.mean_abs_error),
                pct(r.median_abs_error),
                pct(r.p90_abs_error),
                pct(r.sampling_floor),
                r.error_to_floor.map_or("-".into(), |x| format!("{x:.2}")),
                share(r.band_coverage),
                count(r.drops_caused_median),
                r.time_mean_s.map_or("-".into(), |t| format!("{t:.2}")),
                r.probe_bytes_mean.map_or("-".into(), |b| format!("{:.2}", b / 1e6)),
                r.probe_packets_mean.map_or("-".into(), |p| format!("{p:.0}")),
                ratio(r.intrusiveness),
                ratio(r.overhead),
                r.converged,
                r.coalescing_detected,
                r.host_limited,
            );
        }
    }
    trust_lines(&mut s, report);
    host_lines(&mut s, report);
    let mut notes: Vec<String> = report.notes.clone();
    for p in &report.phases {
        notes.extend(
            p.notes
                .iter()
                .map(|n| format!("{} {} %: {n}", p.kind, p.load)),
        );
    }
    for f in &report.failures {
        notes.push(format!(
            "{} {} % {} run {}: no estimate: {}",
            f.kind,
            f.load,
            f.method,
            f.run + 1,
            f.error
        ));
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

/// Per cell, the runs a host limited (the table's `host` column) and the
/// host and resource the run's own evidence named (docs/verdict.md).
fn host_lines(s: &mut String, report: &CompareReport) {
    let mut lines = Vec::new();
    for r in report.rows.iter().filter(|r| r.host_limited > 0) {
        let mut named: std::collections::BTreeMap<&str, u32> = Default::default();
        for run in report.runs.iter().filter(|x| {
            x.kind == r.kind && x.load == r.load && x.method == r.method && x.host_limited.is_some()
        }) {
            *named
                .entry(
                    run.host_resource
                        .as_deref()
                        .unwrap_or("the method's own finding"),
                )
                .or_default() += 1;
        }
        let named: Vec<String> = named.iter().map(|(k, n)| format!("{k} {n}")).collect();
        lines.push(format!(
            "{} {} % {}: {} of {} runs host-limited ({})",
            r.kind,
            r.load,
            r.method,
            r.host_limited,
            r.runs,
            named.join(", ")
        ));
    }
    if !lines.is_empty() {
        let _ = writeln!(s);
        let _ = writeln!(
            s,
            "--- Host-limited runs (lower bounds, not the path's A) ---"
        );
        for l in lines {
            let _ = writeln!(s, "- {l}");
        }
    }
}

/// Per method, whether its estimates stand when the receiver coalesces.
fn trust_lines(s: &mut String, report: &CompareReport) {
    let mut lines = Vec::new();
    for m in &report.methods {
        let runs: Vec<_> = report.runs.iter().filter(|r| &r.method == m).collect();
        let detected = runs
            .iter()
            .filter(|r| r.coalescing.is_some_and(|c| c.detected))
            .count();
        if detected > 0 {
            lines.push(format!(
                "{m}: coalescing detected in {detected} of {} runs; {}",
                runs.len(),
                pathsonde_core::methods::registry::under_coalescing(m).describe()
            ));
        }
    }
    if !lines.is_empty() {
        let _ = writeln!(s);
        let _ = writeln!(s, "--- Receive coalescing ---");
        for l in lines {
            let _ = writeln!(s, "- {l}");
        }
    }
}

/// The same table as markdown (for docs).
pub fn markdown(report: &CompareReport) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "{}\n", header(report));
    let _ = writeln!(
        s,
        "Sweep time {:.0} s; machine load average (1 min) before {}, after {}.\n",
        report.elapsed_s.secs_f64(),
        report
            .load_average_before
            .map_or("?".into(), |l| format!("{:.2}", l[0])),
        report
            .load_average_after
            .map_or("?".into(), |l| format!("{:.2}", l[0])),
    );
    for kind in &report.kinds {
        let _ = writeln!(s, "#### {kind} cross traffic\n");
        let _ = writeln!(
            s,
            "| load | method | C given | runs | truth A (Mb/s) | mean estimate (Mb/s) | sd (Mb/s) | mean \\|error\\| | median \\|error\\| | p90 \\|error\\| | band coverage | drops caused (median, max) | time (s) | probe MB | probe packets | intrusiveness | overhead |"
        );
        let _ = writeln!(
            s,
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
        );
        for r in report.rows.iter().filter(|r| &r.kind == kind) {
            let _ = writeln!(s, "{}", md_row(r, c_given(report)));
        }
        let _ = writeln!(s);
    }
    s
}

fn md_row(r: &Row, c_given: &str) -> String {
    format!(
        "| {} % | {} | {} | {}/{} | {} | {} | {} | {} | {} | {} | {} | {}, {} | {} | {} | {} | {} | {} |",
        r.load,
        r.method,
        c_given,
        r.runs,
        r.runs + r.failed,
        mbps(r.truth_mean_bps),
        mbps(r.estimate_mean_bps),
        mbps(r.estimate_std_bps),
        pct(r.mean_abs_error),
        pct(r.median_abs_error),
        pct(r.p90_abs_error),
        share(r.band_coverage),
        count(r.drops_caused_median),
        count(r.drops_caused_max),
        r.time_mean_s.map_or("-".into(), |t| format!("{t:.2}")),
        r.probe_bytes_mean
            .map_or("-".into(), |b| format!("{:.2}", b / 1e6)),
        r.probe_packets_mean
            .map_or("-".into(), |p| format!("{p:.0}")),
        ratio(r.intrusiveness),
        ratio(r.overhead),
    )
}
