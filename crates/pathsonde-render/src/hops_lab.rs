//! `lab run --method hops`'s report: the chain it built, each run's tight
//! and narrow links beside the links' truth, the summary over the runs, the
//! line printed after each run and `history`'s line.  The lab
//! (`pathsonde_lab::hops_lab`) builds the chain, runs the method and scores
//! it; this only says what the scores are.

use pathsonde_core::methods::hops::end_to_end::Agreement;
use pathsonde_core::Bytes;
use pathsonde_lab::hops_lab::end_to_end::EndToEndScore;
use pathsonde_lab::hops_lab::queue::QueueScore;
use pathsonde_lab::hops_lab::{HopsLabPlan, HopsLabReport, HopsRunRecord, NarrowScore, LINK_QUEUE};
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
    if p.queue != LINK_QUEUE || p.queue_probe {
        let _ = write!(s, ", tight link's queue {}", p.queue);
    }
    if p.queue_probe {
        s.push_str(", bursts probed (hops --queue)");
    }
    if p.end_to_end {
        s.push_str(", server on the receiver (end to end)");
    }
    s
}

/// One run's end-to-end measurement: "end to end 41.2 Mb/s vs 39.6 Mb/s
/// (+4.0 %), consistent", or why there was none.
fn end_to_end_words(e: &EndToEndScore) -> String {
    match (e.available_bps, &e.failed) {
        (Some(a), _) => format!(
            "end to end {a} vs {} ({}), {}{}",
            e.truth_available_bps,
            pct(e.error),
            e.agreement.map_or("—".into(), agreement_word),
            e.host_limited
                .as_ref()
                .map_or(String::new(), |h| format!(" (host-limited: {h})"))
        ),
        (None, why) => format!(
            "end to end: none ({})",
            why.as_deref().unwrap_or("no estimate")
        ),
    }
}

fn agreement_word(a: Agreement) -> String {
    match a {
        Agreement::Consistent => "consistent",
        Agreement::EndToEndLower => "end to end lower",
        Agreement::EndToEndHigher => "END TO END HIGHER",
        Agreement::NoTightLink => "no tight link to compare",
    }
    .into()
}

/// A size in kB (1000 bytes), as the docs' tables give bursts: "33.6 kB".
fn kb(b: Option<Bytes>) -> String {
    b.map_or("—".into(), |b| {
        format!("{:.1} kB", b.get() as f64 / 1000.0)
    })
}

/// One run's bursts: "short queue at 2 (right), MBS 28.0 kB–33.6 kB (holds 33.0 kB)".
fn queue_words(q: &QueueScore) -> String {
    format!(
        "short queue at {} ({}), MBS {}–{} (holds {})",
        q.first_overflow.map_or("—".into(), |h| h.to_string()),
        if q.short_named { "right" } else { "wrong" },
        kb(q.mbs_passed),
        kb(q.mbs_lost),
        kb(Some(q.truth_bytes))
    )
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
    let queue = r
        .queue
        .as_ref()
        .map_or(String::new(), |q| format!(", {}", queue_words(q)));
    let e2e = r
        .end_to_end
        .as_ref()
        .map_or(String::new(), |e| format!(", {}", end_to_end_words(e)));
    format!(
        "run {:>3}: tight {} ({}), narrow {}, available {} vs {} ({}), {} B, {:.1} s{queue}{e2e}",
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
            let queue = s.queue.as_ref().map_or(String::new(), |q| {
                format!("; short queue named {}/{}", q.short_named, q.runs)
            });
            let e2e = s.end_to_end.as_ref().map_or(String::new(), |e| {
                format!("; end to end consistent {}/{}", e.consistent, e.runs)
            });
            format!(
                "{} runs: tight link named {}/{}{narrow}; |available error| median {}{queue}{e2e}",
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
    if r.runs.iter().any(|x| x.queue.is_some()) {
        let _ = writeln!(s);
        let _ = writeln!(
            s,
            "bursts (hops --queue): the short queue is the shaped link with the least tbf limit; it holds its limit and the tbf bucket"
        );
        for x in &r.runs {
            if let Some(q) = &x.queue {
                let _ = writeln!(
                    s,
                    "{:>4} link {} {}, {} B",
                    x.run,
                    q.true_short,
                    queue_words(q),
                    q.probe_bytes.get()
                );
            }
        }
    }
    if r.runs.iter().any(|x| x.end_to_end.is_some()) {
        let _ = writeln!(s);
        let _ = writeln!(
            s,
            "end to end (the default method against the receiver's server), beside the tight link's A over its own window, in IP bytes of 1500-byte probes"
        );
        for x in &r.runs {
            if let Some(e) = &x.end_to_end {
                let _ = writeln!(s, "{:>4} {}", x.run, end_to_end_words(e));
            }
        }
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
        if let Some(es) = &sum.end_to_end {
            let _ = writeln!(
                s,
                "end to end: measured {}/{}; |error| median {}; band held the truth {}/{}; consistent with the tight link {}/{}",
                es.measured,
                es.runs,
                q(es.median_abs_error),
                es.band_holds_truth,
                es.runs,
                es.consistent,
                es.runs
            );
        }
        if let Some(qs) = &sum.queue {
            let med = |b: Option<f64>| kb(b.map(|b| Bytes(b.round() as u64)));
            let _ = writeln!(
                s,
                "short queue named {}/{}; median MBS bracket {}–{} beside the {} it holds; median burst bytes {}",
                qs.short_named,
                qs.runs,
                med(qs.median_passed),
                med(qs.median_lost),
                kb(Some(qs.truth_bytes)),
                qs.median_probe_bytes.map_or("—".into(), |b| format!("{b:.0}"))
            );
        }
    }
    if !r.notes.is_empty() {
        let _ = writeln!(s);
        for n in &r.notes {
            let _ = writeln!(s, "note: {n}");
        }
    }
    s
}
