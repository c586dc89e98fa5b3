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
use pathsonde_core::DurationNs;
use pathsonde_render::trace as text;
use pathsonde_trace::analysis::analyze;
use pathsonde_trace::commands::{self as work, load};
use pathsonde_trace::fft::Fft;
use pathsonde_trace::TraceError;
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
        TraceError::Format { .. } | TraceError::Unusable(_) | TraceError::TooLarge { .. } => {
            Exit::Usage
        }
        TraceError::Io { .. } | TraceError::Plot { .. } => Exit::Internal,
    };
    Failure {
        exit,
        message: e.to_string(),
    }
}

pub fn run(cmd: TraceCommand) -> Result<(), Failure> {
    match cmd {
        TraceCommand::Capture(a) => capture::capture(&a),
        TraceCommand::Analyze { file, middle, .. } => {
            let t = load(&file, middle).map_err(trace_failure)?;
            let a = analyze(&t, &mut Fft::new()).map_err(trace_failure)?;
            // `--json`, `--json-lines` (a `result` event) or the text, as
            // the output mode (set from `--json` in main) says.
            let v = serde_json::json!({ "file": file, "trace": t.meta, "analysis": a });
            crate::output::result(&v, || text::analysis_text(&file, &t, &a));
            Ok(())
        }
        TraceCommand::Model {
            file,
            k,
            middle,
            out,
            ..
        } => {
            if k == 0 {
                return Err(crate::usage("-k must be at least 1".into()));
            }
            let report = work::model_file(&file, k, middle, out).map_err(trace_failure)?;
            let v = serde_json::to_value(&report).unwrap_or_default();
            crate::output::result(&v, || text::model_text(&report));
            Ok(())
        }
        TraceCommand::Generate { model, n, out, .. } => generate_cmd(&model, n, out),
        TraceCommand::Plot {
            file,
            out,
            name,
            window,
            k,
            middle,
        } => {
            let written =
                work::plot_files(&file, &out, name, window, k, middle).map_err(trace_failure)?;
            for p in written {
                println!("wrote {}", p.display());
            }
            Ok(())
        }
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
            let (router, truth) = work::synth(&preset, n, seed, &out).map_err(trace_failure)?;
            let v = serde_json::json!({"file": out, "router": router, "truth": truth});
            crate::output::result(&v, || text::synth_text(&out, n, &preset, &router, &truth));
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
            crate::output::result(&v, || text::bench_text(&r));
            Ok(())
        }
    }
}

fn two_router(jitter: DurationNs, steps: usize, packets: usize) -> Result<(), Failure> {
    if !(2..=1000).contains(&steps) || !(100..=10_000_000).contains(&packets) {
        return Err(crate::usage(
            "--steps must be 2..=1000 and --packets 100..=10000000".into(),
        ));
    }
    if jitter.ns() < 0 || jitter.ns() > 1_000_000 {
        return Err(crate::usage("--jitter must be 0..=1ms".into()));
    }
    let s = work::two_router(jitter, steps, packets);
    let (jl, jh) = s.jitter_range_us;
    let (ml, mh) = s.mean_range_us;
    let v = serde_json::json!({"model": s.model, "points": s.with, "without_router1_jitter": s.without,
        "jitter_range_us": [jl, jh], "mean_range_us": [ml, mh]});
    crate::output::result(&v, || text::two_router_text(jitter, &s));
    Ok(())
}

fn generate_cmd(model_path: &Path, n: usize, out: Option<PathBuf>) -> Result<(), Failure> {
    if n == 0 || n as u64 > pathsonde_trace::trace::MAX_RECORDS {
        return Err(crate::usage(format!("-n {n} must be 1..=20000000")));
    }
    let model = work::read_model(model_path).map_err(trace_failure)?;
    let (y, elapsed) = work::generate(&model, n);
    let Some(p) = out else {
        work::print_generated(&y, std::io::stdout().lock());
        return Ok(());
    };
    work::write_generated(&model, &y, &p).map_err(trace_failure)?;
    let v = serde_json::json!({"model": model_path, "out": p, "values": n, "seconds": elapsed});
    crate::output::result(&v, || {
        text::generate_text(n, model_path, model.n, model.k, &p, elapsed)
    });
    Ok(())
}
