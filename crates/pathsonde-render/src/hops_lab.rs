//! `lab run --method hops`'s report: the chain it built, each run's tight
//! and narrow links beside the links' truth, the summary over the runs, the
//! line printed after each run and `history`'s line.  The lab
//! (`pathsonde_lab::hops_lab`) builds the chain, runs the method and scores
//! it; this only says what the scores are.

use pathsonde_lab::hops_lab::{HopsLabPlan, HopsLabReport, HopsRunRecord, NarrowScore};
use std::fmt::Write as _;

/// "3 routers, tight link 2 (100 Mb/s, poisson:60%), narrow link 3 (60 Mb/s), r1 silent".
pub fn describe(p: &HopsLabPlan) -> String {
    let mut s = format!(
        "{} router(s), tight link {} ({}, {})",
        p.routers, p.tight_at, p.tight_rate, p.cross
    );
    if let Some(m) = p.narrow_at {
        let _ = write!(s, ", narrow link {m} ({} idle)", p.narrow_rate);
    }
    if !p.silent.is_empty() {
        let list: Vec<String> = p.silent.iter().map(|k| format!("r{k}")).collect();
        let _ = write!(s, ", {} silent", list.join(" "));
    }
    s
}

/// The progress line before the chain is built.
pub fn start_line(p: &HopsLabPlan) -> String {
    format!(
        "building chain {} ({}); cross traffic settles for {:.1} s, then {} run(s) of about 23 s",
        p.name,
        describe(p),
        p.settle.secs_f64(),
        p.runs
    )
}

/// A reported link as "from→to", or "—" when none was named.
fn link_name(x: Option<(u8, u8)>) -> String {
    x.map_or("—".into(), |(f, t)| format!("{f}→{t}"))
}

/// How the narrow link was scored, in a table's words.
fn narrow_word(n: NarrowScore) -> &'static str {
    match n {
        NarrowScore::SameAsTight => "is the tight",
        NarrowScore::Named => "named",
        NarrowScore::NotToldApart => "not told apart",
        NarrowScore::Wrong => "WRONG",
    }
}

/// A signed error in percent: "+1.2 %", or "—".
fn pct(x: Option<f64>) -> String {
    x.map_or("—".into(), |e| format!("{:+.1} %", e * 100.0))
}

/// The line printed after each run.
pub fn run_line(r: &HopsRunRecord) -> String {
    format!(
        "run {:>3}: tight {} ({}), narrow {}, available {} vs {} ({}), {} B, {:.1} s",
        r.run,
        link_name(r.tight_named_as),
        if r.tight_named { "right" } else { "wrong" },
        narrow_word(r.narrow),
        r.available_bps.map_or("—".into(), |a| a.to_string()),
        r.truth_available_bps.map_or("—".into(), |a| a.to_string()),
        pct(r.error),
        r.probe_bytes,
        r.elapsed_s.secs_f64()
    )
}

/// `history`'s line for the whole lab run.
pub fn summary_line(r: &HopsLabReport) -> String {
    match &r.summary {
        Some(s) => {
            let narrow = if s.narrow_differs > 0 {
                format!(", narrow {}/{}", s.narrow_named, s.narrow_differs)
            } else {
                String::new()
            };
            format!(
                "{} runs: tight link named {}/{}{narrow}; |available error| median {}",
                s.runs,
                s.tight_named,
                s.runs,
                s.median_abs_error
                    .map_or("—".into(), |e| format!("{:.1} %", e * 100.0))
            )
        }
        None => "no result".into(),
    }
}

/// The readable report.
pub fn text(r: &HopsLabReport) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "lab {}: {} to {}",
        r.plan.name,
        describe(&r.plan),
        r.target
    );
    let _ = writeln!(
        s,
        "truth: each shaped link's tbf rate in IP bytes of 500-byte load packets, less its cross traffic over the run (from the cross source's log); unshaped links are veths"
    );
    if let Some(first) = r.runs.first() {
        for l in first.truth.iter().filter(|l| l.capacity_l2_bps.is_some()) {
            let _ = writeln!(
                s,
                "  link {} (hop {} → {}): capacity {}, cross {} (L2), available {}{}{}  [run 1]",
                l.link,
                l.link - 1,
                l.link,
                l.capacity_ip_bps.map_or("—".into(), |c| c.to_string()),
                l.cross_l2_bps,
                l.available_ip_bps.map_or("—".into(), |c| c.to_string()),
                if l.link == first.true_tight {
                    ", tight"
                } else {
                    ""
                },
                if l.link == first.true_narrow {
                    ", narrow"
                } else {
                    ""
                },
            );
        }
    }
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "{:>4} {:>6} {:>6} {:>7} {:>15} {:>14} {:>14} {:>8} {:>8} {:>9} {:>6}",
        "run",
        "tight",
        "named",
        "narrow",
        "narrow score",
        "available",
        "truth A",
        "error",
        "silent",
        "bytes",
        "time s"
    );
    for x in &r.runs {
        let silent: Vec<String> = x.silent_reported.iter().map(u8::to_string).collect();
        let _ = writeln!(
            s,
            "{:>4} {:>6} {:>6} {:>7} {:>15} {:>14} {:>14} {:>8} {:>8} {:>9} {:>6.1}",
            x.run,
            link_name(x.tight_named_as),
            if x.tight_named { "yes" } else { "NO" },
            link_name(x.narrow_named_as),
            narrow_word(x.narrow),
            x.available_bps.map_or("—".into(), |a| a.to_string()),
            x.truth_available_bps.map_or("—".into(), |a| a.to_string()),
            pct(x.error),
            if silent.is_empty() {
                "-".into()
            } else {
                silent.join(",")
            },
            x.probe_bytes,
            x.elapsed_s.secs_f64()
        );
    }
    if let Some(sum) = &r.summary {
        let _ = writeln!(s);
        let q = |e: Option<f64>| e.map_or("—".into(), |e| format!("{:.1} %", e * 100.0));
        let _ = writeln!(
            s,
            "tight link named {}/{}; narrow link named {}/{} where it differs (not told apart {}, wrong {}); silent hops right {}/{}",
            sum.tight_named,
            sum.runs,
            sum.narrow_named,
            sum.narrow_differs,
            sum.narrow_not_told_apart,
            sum.narrow_wrong,
            sum.silent_right,
            sum.runs
        );
        let _ = writeln!(
            s,
            "|available − A| median {}, p90 {}; median probe bytes {}; median time {} s",
            q(sum.median_abs_error),
            q(sum.p90_abs_error),
            sum.median_probe_bytes
                .map_or("—".into(), |b| format!("{b:.0}")),
            sum.median_elapsed_s
                .map_or("—".into(), |t| format!("{t:.1}"))
        );
    }
    if !r.notes.is_empty() {
        let _ = writeln!(s);
        for n in &r.notes {
            let _ = writeln!(s, "note: {n}");
        }
    }
    s
}
