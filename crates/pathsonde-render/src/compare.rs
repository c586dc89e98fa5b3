//! `pathsonde compare`'s outputs: the text report (compare.txt and the
//! terminal) and the Markdown table (compare.md), per load and method, with
//! the hosts' and the methods' trust lines; the JSON (compare.json and
//! `--json`), the progress lines, and writing all the files.  Takes
//! `pathsonde_lab::compare::CompareReport` as the sweep returns it; the
//! figures are [`crate::compare_plot`]'s, the command (`compare_cmd`) runs
//! the sweep and calls [`write_outputs`].

use pathsonde_core::BitRate;
use pathsonde_lab::compare::{CompareFailure, CompareReport, CompareRun, Progress, Row};
use std::fmt::Write;
use std::path::{Path, PathBuf};

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

/// The chain a sweep ran on, in the words of `lab run --method hops`
/// (`None` for the two-host path).
fn chain_header(report: &CompareReport) -> Option<String> {
    let c = report.chain.as_ref()?;
    Some(format!(
        "chain of {} routers (links 1..{}{}): tight link {} at link {} (cross traffic enters and leaves there){}{}; \
         {} run(s) per method and load; cross traffic settles {:.1} s per load, {:.1} s quiet before each run ({} s before each hops run); \
         truth: the path's A for each method's probe size, the tight link's for hops; methods told: {}",
        c.routers,
        c.routers + 1,
        if c.ipv6 { ", probed over IPv6" } else { "" },
        c.tight_rate,
        c.tight_at,
        c.narrow_at.map_or(String::new(), |m| format!(", narrow link {} at link {m} (idle)", c.narrow_rate)),
        if c.silent.is_empty() {
            String::new()
        } else {
            format!(", silent routers {:?}", c.silent)
        },
        report.runs_per_cell,
        report.settle_s.to_std().as_secs_f64(),
        report.tool_settle_s.to_std().as_secs_f64(),
        c.gap.secs_f64().max(report.tool_settle_s.secs_f64()),
        crate::report::settings_line(&report.settings),
    ))
}

/// A `hops` row's "hop found" (of every try) and "narrow found" (of the
/// runs whose narrow link is another link) cells; `-` for other methods.
fn hop_cells(r: &Row) -> (String, String) {
    (
        r.hop_found
            .map_or("-".into(), |n| format!("{n}/{}", r.runs + r.failed)),
        match (r.narrow_found, r.narrow_differs) {
            (Some(n), Some(d)) => format!("{n}/{d}"),
            _ => "-".into(),
        },
    )
}

fn header(report: &CompareReport) -> String {
    if let Some(h) = chain_header(report) {
        return h;
    }
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
        let chain = report.chain.is_some();
        if chain {
            s.pop();
            let _ = writeln!(s, " {:>6} {:>6}", "hop", "narrow");
        }
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
            if chain {
                let (hop, narrow) = hop_cells(r);
                s.pop();
                let _ = writeln!(s, " {hop:>6} {narrow:>6}");
            }
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
    let chain = report.chain.is_some();
    for kind in &report.kinds {
        let _ = writeln!(s, "#### {kind} cross traffic\n");
        let _ = writeln!(
            s,
            "| load | method | C given | runs | truth A (Mb/s) | mean estimate (Mb/s) | sd (Mb/s) | mean \\|error\\| | median \\|error\\| | p90 \\|error\\| | band coverage | drops caused (median, max) | time (s) | probe MB | probe packets | intrusiveness | overhead |{}",
            if chain { " hop found | narrow found |" } else { "" }
        );
        let _ = writeln!(
            s,
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|{}",
            if chain { "---|---|" } else { "" }
        );
        for r in report.rows.iter().filter(|r| &r.kind == kind) {
            let mut line = md_row(r, c_given(report));
            if chain {
                let (hop, narrow) = hop_cells(r);
                let _ = write!(line, " {hop} | {narrow} |");
            }
            let _ = writeln!(s, "{line}");
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

/// A file of `compare`'s outputs that could not be written.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// compare.txt, compare.md or compare.json.
    #[error("writing {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The figures ([`crate::compare_plot::write_all`]'s reason).
    #[error("plots: {0}")]
    Plots(#[source] crate::DrawError),
}

/// Writes compare.txt, compare.md, the figures and compare.json (which
/// lists them all, itself last) into `dir`; returns the paths.  `command`
/// is the command line recorded in the JSON.
pub fn write_outputs(
    report: &CompareReport,
    dir: &Path,
    command: &str,
) -> Result<Vec<PathBuf>, WriteError> {
    let write = |path: &Path, data: String| {
        std::fs::write(path, data).map_err(|source| WriteError::Io {
            path: path.to_path_buf(),
            source,
        })
    };
    let mut files = Vec::new();
    let txt = dir.join("compare.txt");
    write(&txt, text(report))?;
    files.push(txt);
    let md = dir.join("compare.md");
    write(&md, markdown(report))?;
    files.push(md);
    files.extend(crate::compare_plot::write_all(report, dir).map_err(WriteError::Plots)?);
    let js = dir.join("compare.json");
    files.push(js.clone());
    write(&js, json(report, &files, command).to_string())?;
    Ok(files)
}

/// The one JSON object `compare --json` prints (and compare.json holds):
/// the report, its settings as every command shows them, the `command`
/// line and the `files` written.
pub fn json(report: &CompareReport, files: &[PathBuf], command: &str) -> serde_json::Value {
    let mut v = serde_json::to_value(report)
        .unwrap_or_else(|e| serde_json::json!({ "error": e.to_string() }));
    if let Some(o) = v.as_object_mut() {
        o.insert(
            "settings".into(),
            crate::report::settings_json(&report.settings),
        );
        o.insert("command".into(), serde_json::json!(command));
        o.insert(
            "files".into(),
            serde_json::json!(files
                .iter()
                .map(|f| f.display().to_string())
                .collect::<Vec<_>>()),
        );
    }
    v
}

/// The terminal's report after a sweep: the text table and the files.
pub fn result_text(report: &CompareReport, files: &[PathBuf]) -> String {
    let mut t = String::new();
    let _ = write!(t, "{}", text(report));
    let _ = writeln!(t);
    for f in files {
        let _ = writeln!(t, "wrote {}", f.display());
    }
    t
}

/// The `--json-lines` event a step of the sweep gives, as (kind, data):
/// each run's result or failure, and a message as each run starts.
pub fn progress_event(p: &Progress<'_>) -> Option<(&'static str, serde_json::Value)> {
    match p {
        Progress::Done(Ok(r)) => Some(("run", serde_json::to_value(r).unwrap_or_default())),
        Progress::Done(Err(f)) => Some(("failure", serde_json::to_value(f).unwrap_or_default())),
        Progress::Start {
            kind,
            load,
            method,
            run,
        } => Some((
            "progress",
            serde_json::json!({ "message": start_line(kind, *load, method, *run) }),
        )),
        Progress::Phase { .. } => None,
    }
}

/// What a terminal's progress bar does at a step of the sweep.
#[derive(Debug, PartialEq)]
pub enum BarUpdate {
    /// Show this beside the bar.
    Message(String),
    /// A run ended: advance the bar and print this line above it.
    Finished(String),
}

/// The progress bar's change at a step of the sweep.
pub fn bar_update(p: &Progress<'_>) -> BarUpdate {
    match p {
        Progress::Phase { kind, load } => {
            BarUpdate::Message(format!("{kind} {load} %: cross traffic settling"))
        }
        Progress::Start {
            kind,
            load,
            method,
            run,
        } => BarUpdate::Message(start_line(kind, *load, method, *run)),
        Progress::Done(Ok(r)) => BarUpdate::Finished(run_line(r)),
        Progress::Done(Err(f)) => BarUpdate::Finished(failure_line(f)),
    }
}

/// The progress line of one run as it starts.
fn start_line(kind: &str, load: f64, method: &str, run: u32) -> String {
    format!("{kind} {load} %: {method} run {}", run + 1)
}

/// The progress line of a run that gave an estimate.
fn run_line(r: &CompareRun) -> String {
    format!(
        "{} {} % {:<6} run {}: {}  truth {}  error {:+.1} %  {}  {:.1} s",
        r.kind,
        r.load,
        r.method,
        r.run + 1,
        r.estimate_bps,
        r.truth_bps,
        r.error * 100.0,
        match (r.hop_found, r.in_band) {
            (Some(true), _) => "hop found",
            (Some(false), _) => "hop missed",
            (None, Some(true)) => "in band",
            (None, Some(false)) => "band missed",
            (None, None) => "no band",
        },
        r.duration_s.secs_f64()
    )
}

/// The progress line of a run that gave none.
fn failure_line(f: &CompareFailure) -> String {
    format!(
        "{} {} % {:<6} run {}: no estimate ({})",
        f.kind,
        f.load,
        f.method,
        f.run + 1,
        f.error
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use pathsonde_core::methods::registry::MethodSettings;
    use pathsonde_core::{Bytes, DurationNs};
    use pathsonde_lab::topology::LabSpec;

    fn run(method: &str, estimate: f64) -> CompareRun {
        CompareRun {
            kind: "poisson".into(),
            load: 30.0,
            method: method.into(),
            run: 0,
            start_s: DurationNs::from_secs_f64(1.0),
            end_s: DurationNs::from_secs_f64(2.0),
            estimate_bps: BitRate::from_bps(estimate),
            estimate_low_bps: BitRate::from_bps(estimate),
            estimate_high_bps: None,
            truth_bps: BitRate::from_bps(200e6),
            truth_qdisc_bps: None,
            cross_bps: BitRate::from_bps(90e6),
            error: (estimate - 200e6) / 200e6,
            sampling_error: None,
            in_band: Some(true),
            drops_caused: Some(0.0),
            duration_s: DurationNs::from_secs_f64(1.0),
            window_s: DurationNs::from_secs_f64(0.5),
            window_start_s: DurationNs::from_secs_f64(1.2),
            window_end_s: DurationNs::from_secs_f64(1.7),
            probe_bytes: 3_000_000,
            probe_packets: 2000,
            probe_rate_bps: BitRate::from_bps(24e6),
            intrusiveness: 0.12,
            overhead: Some(24.0 / 90.0),
            converged: true,
            host_limited: None,
            coalescing: None,
            notes: vec![],
            host_resource: None,
            hop_found: None,
            narrow_found: None,
        }
    }

    fn report() -> CompareReport {
        let runs = vec![run("fac2", 210e6)];
        let failures = vec![CompareFailure {
            kind: "poisson".into(),
            load: 30.0,
            method: "chirp".into(),
            run: 0,
            start_s: DurationNs::from_secs_f64(3.0),
            end_s: DurationNs::from_secs_f64(4.0),
            error: "no usable chirp".into(),
        }];
        CompareReport {
            chain: None,
            lab: LabSpec {
                name: "t".into(),
                capacity: BitRate::from_mbps(300.0),
                queue: Bytes(262_144),
                mtu: 1500,
                cross_sources: 1,
                narrow: None,
                delay: None,
                threaded_napi: false,
            },
            // Blind, as `compare` without --known-capacity.
            settings: MethodSettings {
                max_bytes: None,
                precision: None,
                max_rate: BitRate::from_gbps(1.0),
                packet_size: Bytes(1500),
                clock_resolution: DurationNs::from_ns(1),
                known_capacity: None,
            },
            capacity_ip_bps: BitRate::from_bps(297.2e6),
            probe_size_bytes: 1500,
            kinds: vec!["poisson".into()],
            loads: vec![30.0],
            methods: vec!["fac2".into(), "chirp".into()],
            capacity: None,
            runs_per_cell: 1,
            settle_s: DurationNs::from_secs_f64(2.0),
            tool_settle_s: DurationNs::from_secs_f64(0.5),
            elapsed_s: DurationNs::from_secs_f64(10.0),
            load_average_before: Some([1.0, 1.0, 1.0]),
            load_average_after: None,
            rows: pathsonde_lab::compare::rows(&runs, &failures),
            runs,
            failures,
            phases: vec![],
            qdisc_series: vec![],
            notes: vec![],
        }
    }

    #[test]
    fn the_text_and_markdown_tables_show_every_cell_and_every_failure() {
        let r = report();
        let t = text(&r);
        assert!(t.contains("fac2") && t.contains("chirp"), "{t}");
        // fac2: one run, 5 % off, no standard deviation.
        let line = t.lines().find(|l| l.contains("fac2")).unwrap();
        assert!(
            line.contains("210.0") && line.contains("5.0 %") && line.contains(" - "),
            "{line}"
        );
        assert!(
            t.contains("chirp run 1: no estimate: no usable chirp"),
            "{t}"
        );
        assert!(t.contains("before 1.00, after ?"), "{t}");
        let md = markdown(&r);
        assert!(
            md.contains(
                "| 30 % | fac2 | no | 1/1 | 200.0 | 210.0 | - | 5.0 % | 5.0 % | 5.0 % | 100 % | 0, 0 |"
            ),
            "{md}"
        );
        assert!(md.contains("| 30 % | chirp | no | 0/1 | - |"), "{md}");
        assert!(t.contains("not given: the method measured"), "{t}");
        let v = json(&r, &[PathBuf::from("x/compare.json")], "pathsonde compare");
        assert_eq!(v["rows"][0]["method"], "fac2");
        assert_eq!(v["files"][0], "x/compare.json");
        assert_eq!(v["command"], "pathsonde compare");
    }

    #[test]
    fn progress_shows_each_step_as_an_event_and_on_the_bar() {
        let r = report();
        let start = Progress::Start {
            kind: "poisson",
            load: 30.0,
            method: "fac2",
            run: 0,
        };
        assert_eq!(
            bar_update(&start),
            BarUpdate::Message("poisson 30 %: fac2 run 1".into())
        );
        let (kind, data) = progress_event(&start).unwrap();
        assert_eq!(
            (kind, &data["message"]),
            ("progress", &"poisson 30 %: fac2 run 1".into())
        );
        let phase = Progress::Phase {
            kind: "cbr",
            load: 50.0,
        };
        assert!(progress_event(&phase).is_none());
        assert_eq!(
            bar_update(&phase),
            BarUpdate::Message("cbr 50 %: cross traffic settling".into())
        );
        let BarUpdate::Finished(l) = bar_update(&Progress::Done(Ok(&r.runs[0]))) else {
            panic!("a run's end finishes a step");
        };
        assert!(l.starts_with("poisson 30 % fac2   run 1: "), "{l}");
        assert!(l.contains("error +5.0 %  in band  1.0 s"), "{l}");
        assert_eq!(
            bar_update(&Progress::Done(Err(&r.failures[0]))),
            BarUpdate::Finished("poisson 30 % chirp  run 1: no estimate (no usable chirp)".into())
        );
        assert_eq!(
            progress_event(&Progress::Done(Err(&r.failures[0])))
                .unwrap()
                .0,
            "failure"
        );
    }

    /// On a chain the header says so and `hops`'s rows carry the hop it
    /// found; the other methods' cells there are `-`.
    #[test]
    fn a_chain_sweep_shows_the_chain_and_the_hop_found() {
        let mut r = report();
        let mut h = run("hops", 40e6);
        h.hop_found = Some(true);
        h.narrow_found = Some(false);
        h.in_band = None;
        r.runs.push(h);
        r.failures.push(CompareFailure {
            method: "hops".into(),
            error: "hops named no tight link".into(),
            ..r.failures[0].clone()
        });
        r.rows = pathsonde_lab::compare::rows(&r.runs, &r.failures);
        r.chain = Some(pathsonde_lab::hops_lab::HopsLabPlan {
            name: "t".into(),
            routers: 3,
            tight_at: 2,
            narrow_at: Some(4),
            tight_rate: BitRate::from_mbps(100.0),
            narrow_rate: BitRate::from_mbps(60.0),
            cross: "poisson:30%".into(),
            silent: vec![],
            runs: 1,
            queue: Bytes(262_144),
            queue_probe: false,
            end_to_end: false,
            ipv6: false,
            settle: DurationNs::from_secs(2),
            gap: DurationNs::from_secs(2),
            seed: 1,
        });
        let t = text(&r);
        assert!(
            t.contains("chain of 3 routers (links 1..4): tight link 100"),
            "{t}"
        );
        assert!(
            t.contains("narrow link 60") && t.contains("at link 4"),
            "{t}"
        );
        let hops = t.lines().find(|l| l.contains("% hops")).unwrap();
        // One found of two tries (the failure counts), the narrow link missed.
        assert!(hops.trim_end().ends_with("1/2    0/1"), "{hops}");
        let fac2 = t.lines().find(|l| l.contains("% fac2")).unwrap();
        assert!(fac2.trim_end().ends_with("-      -"), "{fac2}");
        let md = markdown(&r);
        assert!(md.contains("| hop found | narrow found |"), "{md}");
        assert!(md.contains("| 1/2 | 0/1 |"), "{md}");
        let l = run_line(&r.runs[1]);
        assert!(l.contains("hop found"), "{l}");
    }
}
