//! `pathsonde trace …`: micro-time-scale latency traces (issue 8).
//!
//! `capture` sends one constant-rate stream across a lab path (or to a
//! server) and records each packet's one-way latency; `analyze`, `model`,
//! `generate`, `plot` and `synth` work on files through `pathsonde-trace`;
//! `bench` times the analysis and the models.  Formats and every printed
//! number are described in `docs/trace.md`.

use crate::exit::Exit;
use crate::Failure;
use clap::Subcommand;
use pathsonde_core::{ClockSource, DurationNs};
use pathsonde_render::trace::analysis_text;
use pathsonde_trace::analysis::analyze;
use pathsonde_trace::fft::Fft;
use pathsonde_trace::model::{fidelity, Fidelity, Generator, Model};
use pathsonde_trace::oracle::ClockedRouter;
use pathsonde_trace::{plot, Trace, TraceError, TraceMeta, LOST};
use serde::Serialize;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

mod capture;

pub use capture::CaptureArgs;

#[derive(Subcommand)]
pub enum TraceCommand {
    /// Send a constant-rate stream across a path and record each packet's
    /// one-way latency (or loss): a lab path built for the purpose (root) or
    /// `--server HOST`.
    Capture(CaptureArgs),
    /// Distribution, banding, periodicity, queue cycles and regime of a
    /// trace (pathsonde's binary format, or CSV of latencies in seconds).
    Analyze {
        /// The trace (pathsonde's .pstrace, or CSV of latencies in seconds).
        file: PathBuf,
        /// Analyse only the middle N packets (the paper takes 30 000).
        #[arg(long)]
        middle: Option<usize>,
        #[command(flatten)]
        json: crate::args::JsonFlags,
    },
    /// Build a truncated-Fourier model: the K largest coefficients of the
    /// N-point FFT plus 100-point CDF tables of the original and truncated series.
    Model {
        /// The trace to model.
        file: PathBuf,
        /// Coefficients kept.
        #[arg(short, default_value_t = 500)]
        k: usize,
        /// Model only the middle N packets.
        #[arg(long)]
        middle: Option<usize>,
        /// Where to write the model (JSON); default FILE.model.json.
        #[arg(long, short)]
        out: Option<PathBuf>,
        #[command(flatten)]
        json: crate::args::JsonFlags,
    },
    /// Regenerate latencies from a model, nudged through y = G⁻¹(F(x)).
    Generate {
        /// The model (written by `trace model`).
        model: PathBuf,
        /// Values to generate (past the model's N the series repeats).
        #[arg(short, default_value_t = 30_000)]
        n: usize,
        /// Output: a .csv (one latency per line, s) or a binary trace;
        /// default: CSV on standard output.
        #[arg(long, short)]
        out: Option<PathBuf>,
        #[command(flatten)]
        json: crate::args::JsonFlags,
    },
    /// Draw a trace's figures (PNG and SVG): trace, distribution, spectrum,
    /// and model vs original.
    Plot {
        /// The trace to draw.
        file: PathBuf,
        /// Directory for the figures (created if missing).
        #[arg(long, short, default_value = ".")]
        out: PathBuf,
        /// Figure name prefix; default: the file's stem.
        #[arg(long)]
        name: Option<String>,
        /// Packets shown in the trace and model figures (from the middle).
        #[arg(long, default_value_t = 2000)]
        window: usize,
        /// Coefficients of the model drawn.
        #[arg(short, default_value_t = 500)]
        k: usize,
        /// Use only the middle N packets.
        #[arg(long)]
        middle: Option<usize>,
    },
    /// Write an oracle trace with a known band step and cycle period
    /// (a router with a service clock and a finite queue).
    Synth {
        /// banded (the paper's 300 Mb/s quantum regime) or queueing (700 Mb/s cycles).
        #[arg(long, default_value = "queueing", value_parser = ["banded", "queueing"])]
        preset: String,
        /// Packets in the trace.
        #[arg(long, short, default_value_t = 30_000)]
        n: usize,
        /// Seed of the oracle's random parts.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// The trace file to write.
        #[arg(long, short)]
        out: PathBuf,
        #[command(flatten)]
        json: crate::args::JsonFlags,
    },
    /// The paper's two-router experiment (section 6) on the oracle model:
    /// end-to-end jitter against the alignment of two routers' 1.4 µs clocks
    /// at 300 Mb/s, with and without a little jitter added by router 1.
    TwoRouter {
        /// Jitter router 1 adds to its output (uniform 0..this), e.g. 700ns.
        #[arg(long, default_value = "0ns")]
        jitter: DurationNs,
        /// Alignments sampled between 0 and 1 tick.
        #[arg(long, default_value_t = 20)]
        steps: usize,
        /// Packets per alignment.
        #[arg(long, default_value_t = 30_000)]
        packets: usize,
        #[command(flatten)]
        json: crate::args::JsonFlags,
    },
    /// Time analysis + regeneration and generation against a baseline run
    /// in the same process (one thread).
    Bench {
        /// Trace length.
        #[arg(short, default_value_t = 30_000)]
        n: usize,
        /// Coefficients.
        #[arg(short, default_value_t = 500)]
        k: usize,
        /// Seconds spent on each case.
        #[arg(long, default_value_t = 1.0)]
        seconds: f64,
        #[command(flatten)]
        json: crate::args::JsonFlags,
    },
}

impl TraceCommand {
    pub fn json(&self) -> crate::args::JsonFlags {
        match self {
            TraceCommand::Capture(a) => a.json,
            TraceCommand::Analyze { json, .. }
            | TraceCommand::Model { json, .. }
            | TraceCommand::Generate { json, .. }
            | TraceCommand::Synth { json, .. }
            | TraceCommand::TwoRouter { json, .. }
            | TraceCommand::Bench { json, .. } => *json,
            TraceCommand::Plot { .. } => Default::default(),
        }
    }
}

fn trace_failure(e: TraceError) -> Failure {
    let exit = match e {
        TraceError::Format { .. } | TraceError::Unusable(_) => Exit::Usage,
        TraceError::Io { .. } | TraceError::Plot { .. } => Exit::Internal,
    };
    Failure {
        exit,
        message: e.to_string(),
    }
}

fn load(file: &Path, middle: Option<usize>) -> Result<Trace, Failure> {
    let t = Trace::read_path(file).map_err(trace_failure)?;
    Ok(match middle {
        Some(n) if n > 0 => t.middle(n),
        _ => t,
    })
}

pub fn run(cmd: TraceCommand) -> Result<(), Failure> {
    match cmd {
        TraceCommand::Capture(a) => capture::capture(&a),
        TraceCommand::Analyze { file, middle, .. } => {
            let t = load(&file, middle)?;
            let a = analyze(&t, &mut Fft::new()).map_err(trace_failure)?;
            // `--json`, `--json-lines` (a `result` event) or the text, as
            // the output mode (set from `--json` in main) says.
            let v = serde_json::json!({ "file": file, "trace": t.meta, "analysis": a });
            crate::output::result(&v, || analysis_text(&file, &t, &a));
            Ok(())
        }
        TraceCommand::Model {
            file,
            k,
            middle,
            out,
            ..
        } => model_cmd(&file, k, middle, out),
        TraceCommand::Generate { model, n, out, .. } => generate_cmd(&model, n, out),
        TraceCommand::Plot {
            file,
            out,
            name,
            window,
            k,
            middle,
        } => plot_cmd(&file, &out, name, window, k, middle),
        TraceCommand::Synth {
            preset,
            n,
            seed,
            out,
            ..
        } => {
            if !(16..=pathsonde_trace::trace::MAX_RECORDS as usize).contains(&n) {
                return Err(crate::usage(format!("-n {n} must be 16..=20000000")));
            }
            let router = if preset == "banded" {
                ClockedRouter::paper_banded(seed)
            } else {
                ClockedRouter::paper_queueing(seed)
            };
            let (t, truth) = router.run(n);
            t.write_path(&out).map_err(trace_failure)?;
            let v = serde_json::json!({"file": out, "router": router, "truth": truth});
            crate::output::result(&v, || {
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
            });
            Ok(())
        }
        TraceCommand::TwoRouter {
            jitter,
            steps,
            packets,
            ..
        } => two_router(jitter, steps, packets),
        TraceCommand::Bench { n, k, seconds, .. } => {
            if !(64..=10_000_000).contains(&n) || k == 0 || !(0.01..=60.0).contains(&seconds) {
                return Err(crate::usage(
                    "bench needs -n 64..=10000000, -k ≥ 1, --seconds 0.01..=60".into(),
                ));
            }
            crate::output::progress(&format!("timing 6 cases for about {seconds} s each …"));
            let r = pathsonde_trace::bench::run(n, k, Duration::from_secs_f64(seconds));
            let v = serde_json::to_value(&r).unwrap_or_default();
            crate::output::result(&v, || {
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
            });
            Ok(())
        }
    }
}

fn two_router(jitter: DurationNs, steps: usize, packets: usize) -> Result<(), Failure> {
    use pathsonde_trace::oracle::TwoRouters;
    if !(2..=1000).contains(&steps) || !(100..=10_000_000).contains(&packets) {
        return Err(crate::usage(
            "--steps must be 2..=1000 and --packets 100..=10000000".into(),
        ));
    }
    if jitter.ns() < 0 || jitter.ns() > 1_000_000 {
        return Err(crate::usage("--jitter must be 0..=1ms".into()));
    }
    let model = TwoRouters::paper(jitter, 1);
    let with = model.sweep(steps, packets);
    let without = TwoRouters::paper(DurationNs::ZERO, 1).sweep(steps, packets);
    let range = |v: &[f64]| {
        let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        (lo, hi)
    };
    let j: Vec<f64> = with.iter().map(|p| p.jitter_us).collect();
    let m: Vec<f64> = with.iter().map(|p| p.mean_us).collect();
    let (jl, jh) = range(&j);
    let (ml, mh) = range(&m);
    let v = serde_json::json!({"model": model, "points": with, "without_router1_jitter": without,
        "jitter_range_us": [jl, jh], "mean_range_us": [ml, mh]});
    crate::output::result(&v, || {
        let mut t = String::new();
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
        for (a, b) in with.iter().zip(&without) {
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
    });
    Ok(())
}

// ------------------------------------------------------------------- model

#[derive(Serialize)]
struct ModelReport<'a> {
    file: &'a Path,
    model_file: &'a Path,
    n: usize,
    k: usize,
    variance_kept: f64,
    /// The regenerated series against the original.
    fidelity: Fidelity,
}

fn model_cmd(
    file: &Path,
    k: usize,
    middle: Option<usize>,
    out: Option<PathBuf>,
) -> Result<(), Failure> {
    if k == 0 {
        return Err(crate::usage("-k must be at least 1".into()));
    }
    let t = load(file, middle)?;
    let x = t.filled_us();
    let mut fft = Fft::new();
    let mut model = Model::build(&x, k, &mut fft).map_err(trace_failure)?;
    model.interval_ns = t.interval().map(|i| i.ns());
    model.loss_fraction = t.lost() as f64 / t.len().max(1) as f64;
    let out = out.unwrap_or_else(|| file.with_extension("model.json"));
    std::fs::write(&out, model.to_json())
        .map_err(|e| trace_failure(TraceError::io(format!("writing {}", out.display()), e)))?;
    let y = Generator::new(&model, &mut fft).generate(x.len());
    let report = ModelReport {
        file,
        model_file: &out,
        n: model.n,
        k: model.k,
        variance_kept: model.variance_kept,
        fidelity: fidelity(&x, &y),
    };
    let v = serde_json::to_value(&report).unwrap_or_default();
    crate::output::result(&v, || {
        let mut t = String::new();
        let f = &report.fidelity;
        let _ = writeln!(
                    t,
            "model of {} written to {}: N = {}, K = {} coefficients ({:.1} % of the variance) + two {}-point CDF tables",
            file.display(),
            out.display(),
            model.n,
            model.k,
            model.variance_kept * 100.0,
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
    });
    Ok(())
}

fn generate_cmd(model_path: &Path, n: usize, out: Option<PathBuf>) -> Result<(), Failure> {
    if n == 0 || n as u64 > pathsonde_trace::trace::MAX_RECORDS {
        return Err(crate::usage(format!("-n {n} must be 1..=20000000")));
    }
    let text = read_bounded(model_path, 64 << 20)?;
    let model = Model::from_json(&text).map_err(trace_failure)?;
    let mut fft = Fft::new();
    let started = std::time::Instant::now();
    let y = Generator::new(&model, &mut fft).generate(n);
    let elapsed = started.elapsed().as_secs_f64();
    let latency_ns: Vec<i64> = y.iter().map(|v| (v * 1e3).round() as i64).collect();
    let mut meta = TraceMeta::unknown();
    meta.interval = model.interval_ns.map(DurationNs::from_ns);
    meta.clock = Some(ClockSource::Simulated);
    let t = Trace::from_latencies(meta, latency_ns);
    match &out {
        Some(p) if p.extension().is_some_and(|e| e.eq_ignore_ascii_case("csv")) => {
            let f = std::fs::File::create(p).map_err(|e| {
                trace_failure(TraceError::io(format!("creating {}", p.display()), e))
            })?;
            t.write_csv(&mut std::io::BufWriter::new(f))
                .map_err(trace_failure)?;
        }
        Some(p) => t.write_path(p).map_err(trace_failure)?,
        None => {
            use std::io::Write;
            let stdout = std::io::stdout();
            let mut w = std::io::BufWriter::new(stdout.lock());
            for v in &y {
                if writeln!(w, "{:.9}", v * 1e-6).is_err() {
                    break;
                }
            }
            let _ = w.flush();
            return Ok(());
        }
    }
    let p = out.as_deref().expect("matched Some above");
    let v = serde_json::json!({"model": model_path, "out": p, "values": n, "seconds": elapsed});
    crate::output::result(&v, || {
        let mut t = String::new();
        let _ = writeln!(
            t,
            "{n} values from {} (N = {}, K = {}) written to {} in {:.2} ms",
            model_path.display(),
            model.n,
            model.k,
            p.display(),
            elapsed * 1e3
        );
        t
    });
    Ok(())
}

fn read_bounded(path: &Path, max: u64) -> Result<String, Failure> {
    use std::io::Read;
    let f = std::fs::File::open(path)
        .map_err(|e| trace_failure(TraceError::io(format!("opening {}", path.display()), e)))?;
    let mut s = String::new();
    f.take(max + 1)
        .read_to_string(&mut s)
        .map_err(|e| trace_failure(TraceError::io(format!("reading {}", path.display()), e)))?;
    if s.len() as u64 > max {
        return Err(crate::usage(format!(
            "{} is larger than {} bytes",
            path.display(),
            max
        )));
    }
    Ok(s)
}

// -------------------------------------------------------------------- plot

fn plot_cmd(
    file: &Path,
    out: &Path,
    name: Option<String>,
    window: usize,
    k: usize,
    middle: Option<usize>,
) -> Result<(), Failure> {
    let t = load(file, middle)?;
    let mut fft = Fft::new();
    let a = analyze(&t, &mut fft).map_err(trace_failure)?;
    std::fs::create_dir_all(out)
        .map_err(|e| trace_failure(TraceError::io(format!("creating {}", out.display()), e)))?;
    let stem = name.unwrap_or_else(|| {
        file.file_stem()
            .map_or("trace".into(), |s| s.to_string_lossy().into_owned())
    });
    let load_txt = t.meta.rate.map_or(String::new(), |r| format!(" at {r:.0}"));
    let win = t.middle(window.max(16));
    let series: Vec<Option<f64>> = win
        .latency_ns
        .iter()
        .map(|&l| (l != LOST).then(|| l as f64 / 1e3))
        .collect();
    let mut written = Vec::new();
    let base = |what: &str| out.join(format!("{stem}-{what}"));
    written.extend(
        plot::trace_plot(
            &base("trace"),
            &format!("latency trace{load_txt} ({} packets)", series.len()),
            &series,
        )
        .map_err(trace_failure)?,
    );
    written.extend(
        plot::distribution_plot(
            &base("distribution"),
            &format!(
                "latency distribution{load_txt}: {}",
                a.regime.kind.describe()
            ),
            &a.distribution.histogram,
        )
        .map_err(trace_failure)?,
    );
    let x = t.filled_us();
    let power = fft.power_spectrum(&x);
    written.extend(
        plot::spectrum_plot(
            &base("spectrum"),
            &format!("latency spectrum{load_txt}"),
            &power,
            x.len(),
            a.interval_us,
        )
        .map_err(trace_failure)?,
    );
    let model = Model::build(&x, k.max(1), &mut fft).map_err(trace_failure)?;
    let y = Generator::new(&model, &mut fft).generate(x.len());
    let start = (x.len() - win.len().min(x.len())) / 2;
    let end = start + win.len().min(x.len());
    written.extend(
        plot::model_plot(
            &base("model"),
            &format!("{}-coefficient model with CDF nudge{load_txt}", model.k),
            &x[start..end],
            &y[start..end],
        )
        .map_err(trace_failure)?,
    );
    for p in written {
        println!("wrote {}", p.display());
    }
    Ok(())
}
