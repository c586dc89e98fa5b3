//! `pathsonde trace`'s text reports: `analyze` (a latency trace's facts,
//! distribution, bands, periodicity, queue cycles and regime;
//! docs/trace.md), and the one-paragraph reports of `capture`, `model`,
//! `generate`, `synth`, `two-router` and `bench`.  Each takes what
//! `pathsonde_trace` returns; the command (`trace_cmd`) does the work and
//! prints.

use pathsonde_core::{BitRate, ClockSource, DurationNs};
use pathsonde_trace::analysis::Analysis;
use pathsonde_trace::bench::BenchReport;
use pathsonde_trace::capture::CaptureReport;
use pathsonde_trace::commands::{ModelReport, TwoRouterSweep};
use pathsonde_trace::oracle::{ClockedRouter, OracleTruth};
use pathsonde_trace::Trace;
use std::fmt::Write as _;
use std::path::Path;

/// `trace analyze`'s text report of the trace read from `file`: its
/// facts, distribution, bands, periodicity, queue cycles and regime with
/// the evidence for it.
pub fn analysis_text(file: &Path, t: &Trace, a: &Analysis) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let m = &t.meta;
    let _ = writeln!(s, "trace {}", file.display());
    let _ = writeln!(
        s,
        "  {} packets, {} received, {} lost ({:.2} %); load {}; packets {}; spacing {}; clock {}; latencies {}",
        a.packets,
        a.received,
        a.lost,
        a.loss_fraction * 100.0,
        m.rate.map_or("unknown".into(), |r| format!("{r:.1}")),
        m.packet_size.map_or("unknown".into(), |b| format!("{} B", b.get())),
        a.interval_us.map_or("unknown".into(), |i| format!("{i:.3} µs")),
        m.clock.map_or("unknown", ClockSource::describe),
        if m.absolute { "one-way (one clock)" } else { "with an unknown constant offset" }
    );
    let d = &a.distribution;
    let _ = writeln!(s, "\ndistribution (µs)");
    let _ = writeln!(
        s,
        "  min {:.3}  mean {:.3}  std {:.3}  max {:.3}  timestamp step {:.4}",
        d.min_us, d.mean_us, d.std_us, d.max_us, d.resolution_us
    );
    let pct: Vec<String> = d
        .percentiles
        .iter()
        .map(|(p, v)| format!("p{p:.0} {v:.3}"))
        .collect();
    let _ = writeln!(s, "  {}", pct.join("  "));
    let b = &a.banding;
    let _ = writeln!(s, "\nbanding");
    match b.step_us {
        Some(q) => {
            let _ = writeln!(
                s,
                "  step {q:.4} µs, strength {:.3} (0 none … 1 every latency on the lattice), {} levels, lattice offset {:.3} µs",
                b.strength,
                b.levels,
                b.offset_us.unwrap_or(0.0)
            );
        }
        None => {
            let _ = writeln!(s, "  none (strength {:.3})", b.strength);
        }
    }
    let _ = writeln!(s, "  evidence: {}", b.evidence);
    let _ = writeln!(s, "\nperiodicity (strongest spectral peaks)");
    for p in &a.periodicity {
        let _ = writeln!(
            s,
            "  every {:>9.2} packets{}  {:.4} cycles/packet{}  {:5.1} % of variance",
            p.period_packets,
            p.period_us
                .map_or(String::new(), |u| format!(" = {u:>9.1} µs")),
            p.cycles_per_packet,
            p.hz.map_or(String::new(), |h| format!(" = {:>8.3} kHz", h / 1e3)),
            p.power_share * 100.0
        );
    }
    let c = &a.cycles;
    let _ = writeln!(s, "\nqueue cycles");
    if c.found {
        let _ = writeln!(
            s,
            "  {} cycles, every {:.2} packets{}; latency rises {:.1} µs per cycle; {:.2} packets lost per cycle",
            c.count,
            c.period_packets.unwrap_or(0.0),
            c.period_us.map_or(String::new(), |u| format!(" = {u:.1} µs")),
            c.rise_us.unwrap_or(0.0),
            c.losses_per_cycle.unwrap_or(0.0)
        );
    } else {
        let _ = writeln!(s, "  none");
    }
    let _ = writeln!(s, "  evidence: {}", c.evidence);
    let _ = writeln!(s, "\nregime: {}", a.regime.kind.describe());
    for e in &a.regime.evidence {
        let _ = writeln!(s, "  - {e}");
    }
    s
}

/// `trace capture`'s report: what was captured across which path, the load
/// asked, sent and received, the clocks, and the notes.
pub fn capture_text(report: &CaptureReport) -> String {
    let mut t = String::new();
    let _ = writeln!(
        t,
        "captured {} packets ({} lost) across {} into {}{}",
        report.packets,
        report.lost,
        report.path,
        report.file.display(),
        report
            .csv
            .as_ref()
            .map_or(String::new(), |c| format!(" and {}", c.display()))
    );
    let _ = writeln!(
        t,
        "load asked {:.1}, sent {:.1} ({:.1} %){}, received {}",
        BitRate::from_bps(report.asked_rate_bps),
        BitRate::from_bps(report.achieved_rate_bps),
        report.drive * 100.0,
        if report.host_drove_load {
            ""
        } else {
            " — this host cannot drive the asked load"
        },
        report
            .received_rate_bps
            .map_or("–".into(), |r| format!("{:.1}", BitRate::from_bps(r)))
    );
    let _ = writeln!(
        t,
        "clocks: send {}, receive {}; latencies {}",
        report.send_clock,
        report.recv_clock,
        if report.absolute {
            "are one-way delays (one clock)"
        } else {
            "are relative to the fastest packet (two clocks)"
        }
    );
    for n in &report.notes {
        let _ = writeln!(t, "note: {n}");
    }
    let _ = writeln!(
        t,
        "analyse it: pathsonde trace analyze {}",
        report.file.display()
    );
    t
}

/// `trace model`'s report: the model written and its regeneration against
/// the original.
pub fn model_text(report: &ModelReport) -> String {
    let mut t = String::new();
    let f = &report.fidelity;
    let _ = writeln!(
        t,
        "model of {} written to {}: N = {}, K = {} coefficients ({:.1} % of the variance) + two {}-point CDF tables",
        report.file.display(),
        report.model_file.display(),
        report.n,
        report.k,
        report.variance_kept * 100.0,
        pathsonde_trace::model::CDF_POINTS
    );
    let _ = writeln!(
        t,
        "regenerated vs original: mean {:.3} vs {:.3} µs ({:+.2} %), std {:.3} vs {:.3} µs ({:+.2} %), KS distance {:.4}, RMS point error {:.3} µs",
        f.mean_model_us,
        f.mean_original_us,
        f.mean_error * 100.0,
        f.std_model_us,
        f.std_original_us,
        f.std_error * 100.0,
        f.ks,
        f.rms_error_us
    );
    t
}

/// `trace generate`'s report when it wrote a file: `n` values from the
/// model at `model_path` (of `model_n` points, `model_k` coefficients)
/// written to `out` in `seconds`.
pub fn generate_text(
    n: usize,
    model_path: &Path,
    model_n: usize,
    model_k: usize,
    out: &Path,
    seconds: f64,
) -> String {
    let mut t = String::new();
    let _ = writeln!(
        t,
        "{n} values from {} (N = {model_n}, K = {model_k}) written to {} in {:.2} ms",
        model_path.display(),
        out.display(),
        seconds * 1e3
    );
    t
}

/// `trace synth`'s report: the oracle trace written to `out` and the truth
/// it carries.
pub fn synth_text(
    out: &Path,
    n: usize,
    preset: &str,
    router: &ClockedRouter,
    truth: &OracleTruth,
) -> String {
    let mut t = String::new();
    let _ = writeln!(
        t,
        "wrote {} ({n} packets, {} lost) from a {preset} router at {:.1}: band step {:.3} µs, cycle period {}",
        out.display(),
        truth.lost,
        router.rate(),
        truth.band_step_us,
        match (truth.cycle_period_packets, truth.cycle_period_us) {
            (Some(p), Some(u)) => format!("{p:.2} packets = {u:.1} µs"),
            _ => "none (no queueing)".into(),
        }
    );
    t
}

/// `trace two-router`'s table: jitter and mean at each alignment, with and
/// without router 1's added `jitter`, and how far apart they move.
pub fn two_router_text(jitter: DurationNs, s: &TwoRouterSweep) -> String {
    let mut t = String::new();
    let (jl, jh) = s.jitter_range_us;
    let (ml, mh) = s.mean_range_us;
    let _ = writeln!(
        t,
        "two routers, 1.4 µs clocks, 1024-byte packets at 300 Mb/s; router 1 adds 0..{} of jitter",
        jitter
    );
    let _ = writeln!(
        t,
        "{:>10} {:>12} {:>12} {:>18} {:>18}",
        "alignment", "mean µs", "jitter µs", "mean (no added)", "jitter (no added)"
    );
    for (a, b) in s.with.iter().zip(&s.without) {
        let _ = writeln!(
            t,
            "{:>10.2} {:>12.3} {:>12.3} {:>18.3} {:>18.3}",
            a.alignment, a.mean_us, a.jitter_us, b.mean_us, b.jitter_us
        );
    }
    let _ = writeln!(
        t,
        "jitter {jl:.3}–{jh:.3} µs ({:.0} % apart) while the mean moves {ml:.3}–{mh:.3} µs ({:.1} %)",
        (jh - jl) / jl * 100.0,
        (mh - ml) / ml * 100.0
    );
    t
}

/// `trace bench`'s table: each case's speed, and the ratios and targets.
pub fn bench_text(r: &BenchReport) -> String {
    let mut t = String::new();
    let _ = writeln!(t, "trace bench: N = {}, K = {} (one thread)", r.n, r.k);
    let _ = writeln!(
        t,
        "{:<50} {:>8} {:>12} {:>12} {:>12} {:>12}",
        "case", "values", "wall", "values/s", "CPU", "values/CPU-s"
    );
    for c in &r.cases {
        let _ = writeln!(
            t,
            "{:<50} {:>8} {:>9.1} µs {:>10.2} M {:>9.1} µs {:>10.2} M",
            c.name,
            c.values,
            c.median_s * 1e6,
            c.values_per_s / 1e6,
            c.median_cpu_s * 1e6,
            c.values_per_cpu_s / 1e6
        );
    }
    let _ = writeln!(
        t,
        "analysis+regeneration: {:.1}× the baseline, {:.0}× the paper's 0.3 M/s; target 30 M/CPU-s {}",
        r.analysis_ratio,
        r.vs_paper_analysis,
        if r.targets.analysis_met { "met" } else { "NOT met" }
    );
    let _ = writeln!(
        t,
        "generation:            {:.1}× the baseline, {:.0}× the paper's 1 M/s; target 100 M/CPU-s {}",
        r.generation_ratio,
        r.vs_paper_generation,
        if r.targets.generation_met { "met" } else { "NOT met" }
    );
    let _ = writeln!(t, "note: {}", r.note);
    t
}

/// The lab path `trace capture` builds, as its report and progress name it:
/// `lab NAME (CAPACITY tbf, queue BYTES B[, threaded NAPI])`.
pub fn capture_lab_text(spec: &pathsonde_lab::topology::LabSpec) -> String {
    format!(
        "lab {} ({} tbf, queue {} B{})",
        spec.name,
        spec.capacity,
        spec.queue.get(),
        if spec.threaded_napi {
            ", threaded NAPI"
        } else {
            ""
        }
    )
}
