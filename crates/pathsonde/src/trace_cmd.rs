//! `pathsonde trace …`: micro-time-scale latency traces (issue 8).
//!
//! `capture` sends one constant-rate stream across a lab path (or to a
//! server) and records each packet's one-way latency; `analyze`, `model`,
//! `generate`, `plot` and `synth` work on files through `pathsonde-trace`;
//! `bench` times the analysis and the models.  Formats and every printed
//! number are described in `docs/trace.md`.

use crate::exit::Exit;
use crate::lab_cmd::lab_failure;
use crate::Failure;
use clap::{Args, Subcommand};
use pathsonde_core::{BitRate, Bytes, ClockSource, DurationNs, TrainSpec};
use pathsonde_lab::live::LivePath;
use pathsonde_lab::topology::{Lab, LabSpec, Role};
use pathsonde_net::client::{Client, ClientConfig};
use pathsonde_net::{clock, NetError};
use pathsonde_trace::analysis::{analyze, Analysis};
use pathsonde_trace::fft::Fft;
use pathsonde_trace::model::{fidelity, Fidelity, Generator, Model};
use pathsonde_trace::oracle::ClockedRouter;
use pathsonde_trace::{plot, Trace, TraceError, TraceMeta, LOST};
use serde::Serialize;
use std::io::IsTerminal;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Most packets one capture may hold: the server's per-train limit.
const MAX_CAPTURE: u32 = pathsonde_wire::control::MAX_TRAIN_PACKETS;
/// Below this share of the asked rate the host is said not to drive the load.
const DRIVEN: f64 = 0.95;

#[derive(Subcommand)]
pub enum TraceCommand {
    /// Send a constant-rate stream across a path and record each packet's
    /// one-way latency (or loss): a lab path built for the purpose (root) or
    /// `--server HOST`.
    Capture(CaptureArgs),
    /// Distribution, banding, periodicity, queue cycles and regime of a
    /// trace (pathsonde's binary format, or CSV of latencies in seconds).
    Analyze {
        file: PathBuf,
        /// Analyse only the middle N packets (the paper takes 30 000).
        #[arg(long)]
        middle: Option<usize>,
        #[arg(long)]
        json: bool,
    },
    /// Build a truncated-Fourier model: the K largest coefficients of the
    /// N-point FFT plus 100-point CDF tables of the original and truncated series.
    Model {
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
        #[arg(long)]
        json: bool,
    },
    /// Regenerate latencies from a model, nudged through y = G⁻¹(F(x)).
    Generate {
        model: PathBuf,
        /// Values to generate (past the model's N the series repeats).
        #[arg(short, default_value_t = 30_000)]
        n: usize,
        /// Output: a .csv (one latency per line, s) or a binary trace;
        /// default: CSV on standard output.
        #[arg(long, short)]
        out: Option<PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// Draw a trace's figures (PNG and SVG): trace, distribution, spectrum,
    /// and model vs original.
    Plot {
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
        #[arg(long)]
        middle: Option<usize>,
    },
    /// Write an oracle trace with a known band step and cycle period
    /// (a router with a service clock and a finite queue).
    Synth {
        /// banded (the paper's 300 Mb/s quantum regime) or queueing (700 Mb/s cycles).
        #[arg(long, default_value = "queueing", value_parser = ["banded", "queueing"])]
        preset: String,
        #[arg(long, short, default_value_t = 30_000)]
        n: usize,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        #[arg(long, short)]
        out: PathBuf,
        #[arg(long)]
        json: bool,
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
        #[arg(long)]
        json: bool,
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
        #[arg(long)]
        json: bool,
    },
}

#[derive(Args)]
pub struct CaptureArgs {
    /// Offered load, e.g. 300M.
    #[arg(long, default_value = "300M", value_parser = crate::args::positive_rate)]
    rate: BitRate,
    /// IP packet size, bytes.
    #[arg(long, default_value = "1024", value_parser = crate::args::packet_size)]
    size: Bytes,
    /// Packets to send (at most 100 000, the server's train limit).
    #[arg(long, short, default_value_t = 50_000)]
    count: u32,
    /// Packets per car: 1 is a uniform stream; more send back-to-back
    /// groups at the same average rate when the host cannot space single packets.
    #[arg(long, default_value_t = 1)]
    car: u32,
    /// Output file (binary trace).
    #[arg(long, short)]
    out: PathBuf,
    /// Also write the trace as CSV here.
    #[arg(long)]
    csv: Option<PathBuf>,
    /// Measure to this pathsonde server (HOST or HOST:PORT) instead of a lab.
    #[arg(long)]
    server: Option<String>,
    /// Lab: tight-link capacity (tbf rate).
    #[arg(long, default_value = "1gbit", value_parser = crate::args::positive_rate)]
    capacity: BitRate,
    /// Lab: tight-link queue limit.
    #[arg(long, default_value = "256KiB", value_parser = crate::args::positive_size)]
    queue: Bytes,
    /// Lab: threaded NAPI on the receiver's veth (batches receive stamps, as
    /// NIC interrupt coalescing does).
    #[arg(long)]
    threaded_napi: bool,
    /// Lab name (namespaces pathsonde-NAME-ROLE); default t8<pid>.
    #[arg(long)]
    name: Option<String>,
    #[arg(long)]
    json: bool,
}

impl TraceCommand {
    pub fn json(&self) -> bool {
        match self {
            TraceCommand::Capture(a) => a.json,
            TraceCommand::Analyze { json, .. }
            | TraceCommand::Model { json, .. }
            | TraceCommand::Generate { json, .. }
            | TraceCommand::Synth { json, .. }
            | TraceCommand::TwoRouter { json, .. }
            | TraceCommand::Bench { json, .. } => *json,
            TraceCommand::Plot { .. } => false,
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
        TraceCommand::Capture(a) => capture(&a),
        TraceCommand::Analyze { file, middle, json } => {
            let t = load(&file, middle)?;
            let a = analyze(&t, &mut Fft::new()).map_err(trace_failure)?;
            if json {
                let v = serde_json::json!({ "file": file, "trace": t.meta, "analysis": a });
                println!("{v}");
            } else {
                print!("{}", analysis_text(&file, &t, &a));
            }
            Ok(())
        }
        TraceCommand::Model {
            file,
            k,
            middle,
            out,
            json,
        } => model_cmd(&file, k, middle, out, json),
        TraceCommand::Generate {
            model,
            n,
            out,
            json,
        } => generate_cmd(&model, n, out, json),
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
            json,
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
            if json {
                println!(
                    "{}",
                    serde_json::json!({"file": out, "router": router, "truth": truth})
                );
            } else {
                println!(
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
            }
            Ok(())
        }
        TraceCommand::TwoRouter {
            jitter,
            steps,
            packets,
            json,
        } => two_router(jitter, steps, packets, json),
        TraceCommand::Bench {
            n,
            k,
            seconds,
            json,
        } => {
            if !(64..=10_000_000).contains(&n) || k == 0 || !(0.01..=60.0).contains(&seconds) {
                return Err(crate::usage(
                    "bench needs -n 64..=10000000, -k ≥ 1, --seconds 0.01..=60".into(),
                ));
            }
            if !json && std::io::stderr().is_terminal() {
                eprintln!("timing 6 cases for about {seconds} s each …");
            }
            let r = pathsonde_trace::bench::run(n, k, Duration::from_secs_f64(seconds));
            if json {
                println!("{}", serde_json::to_string(&r).expect("plain data"));
            } else {
                println!("trace bench: N = {}, K = {} (one thread)", r.n, r.k);
                println!(
                    "{:<50} {:>8} {:>12} {:>12} {:>12} {:>12}",
                    "case", "values", "wall", "values/s", "CPU", "values/CPU-s"
                );
                for c in &r.cases {
                    println!(
                        "{:<50} {:>8} {:>9.1} µs {:>10.2} M {:>9.1} µs {:>10.2} M",
                        c.name,
                        c.values,
                        c.median_s * 1e6,
                        c.values_per_s / 1e6,
                        c.median_cpu_s * 1e6,
                        c.values_per_cpu_s / 1e6
                    );
                }
                println!(
                    "analysis+regeneration: {:.1}× the baseline, {:.0}× the paper's 0.3 M/s; target 30 M/CPU-s {}",
                    r.analysis_ratio,
                    r.vs_paper_analysis,
                    if r.targets.analysis_met { "met" } else { "NOT met" }
                );
                println!(
                    "generation:            {:.1}× the baseline, {:.0}× the paper's 1 M/s; target 100 M/CPU-s {}",
                    r.generation_ratio,
                    r.vs_paper_generation,
                    if r.targets.generation_met { "met" } else { "NOT met" }
                );
                println!("note: {}", r.note);
            }
            Ok(())
        }
    }
}

fn two_router(jitter: DurationNs, steps: usize, packets: usize, json: bool) -> Result<(), Failure> {
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
    if json {
        println!(
            "{}",
            serde_json::json!({"model": model, "points": with, "without_router1_jitter": without,
                "jitter_range_us": [jl, jh], "mean_range_us": [ml, mh]})
        );
        return Ok(());
    }
    println!(
        "two routers, 1.4 µs clocks, 1024-byte packets at 300 Mb/s; router 1 adds 0..{} of jitter",
        jitter
    );
    println!(
        "{:>10} {:>12} {:>12} {:>18} {:>18}",
        "alignment", "mean µs", "jitter µs", "mean (no added)", "jitter (no added)"
    );
    for (a, b) in with.iter().zip(&without) {
        println!(
            "{:>10.2} {:>12.3} {:>12.3} {:>18.3} {:>18.3}",
            a.alignment, a.mean_us, a.jitter_us, b.mean_us, b.jitter_us
        );
    }
    println!(
        "jitter {jl:.3}–{jh:.3} µs ({:.0} % apart) while the mean moves {ml:.3}–{mh:.3} µs ({:.1} %)",
        (jh - jl) / jl * 100.0,
        (mh - ml) / ml * 100.0
    );
    Ok(())
}

// ------------------------------------------------------------------ report

fn analysis_text(file: &Path, t: &Trace, a: &Analysis) -> String {
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
    json: bool,
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
    if json {
        println!("{}", serde_json::to_string(&report).expect("plain data"));
    } else {
        let f = &report.fidelity;
        println!(
            "model of {} written to {}: N = {}, K = {} coefficients ({:.1} % of the variance) + two {}-point CDF tables",
            file.display(),
            out.display(),
            model.n,
            model.k,
            model.variance_kept * 100.0,
            pathsonde_trace::model::CDF_POINTS
        );
        println!(
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
    }
    Ok(())
}

fn generate_cmd(
    model_path: &Path,
    n: usize,
    out: Option<PathBuf>,
    json: bool,
) -> Result<(), Failure> {
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
    if json {
        println!(
            "{}",
            serde_json::json!({"model": model_path, "out": p, "values": n, "seconds": elapsed})
        );
    } else {
        println!(
            "{n} values from {} (N = {}, K = {}) written to {} in {:.2} ms",
            model_path.display(),
            model.n,
            model.k,
            p.display(),
            elapsed * 1e3
        );
    }
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

// ----------------------------------------------------------------- capture

#[derive(Debug, Serialize)]
struct CaptureReport {
    file: PathBuf,
    csv: Option<PathBuf>,
    path: String,
    packets: usize,
    lost: usize,
    asked_rate_bps: f64,
    /// From the send stamps: (packets − 1) × size / (last send − first send).
    achieved_rate_bps: f64,
    /// From the receive stamps, the same way.
    received_rate_bps: Option<f64>,
    /// Achieved / asked.
    drive: f64,
    /// False when the host sent below 95 % of the asked load.
    host_drove_load: bool,
    send_clock: String,
    recv_clock: String,
    /// Latencies are true one-way delays (lab: one clock at both ends).
    absolute: bool,
    notes: Vec<String>,
}

fn capture(a: &CaptureArgs) -> Result<(), Failure> {
    if a.count < 16 || a.count > MAX_CAPTURE {
        return Err(crate::usage(format!(
            "--count {} must be 16..={MAX_CAPTURE}",
            a.count
        )));
    }
    if a.car == 0 || a.car > 64 || a.count % a.car != 0 {
        return Err(crate::usage(format!(
            "--car {} must be 1..=64 and divide --count",
            a.car
        )));
    }
    let spec = TrainSpec {
        packet_size: a.size,
        packets_per_car: a.car,
        cars: a.count / a.car,
        rate: a.rate,
        idle_before: DurationNs::ZERO,
    };
    let show = !a.json && std::io::stderr().is_terminal();
    let secs = spec.duration().map_or(0.0, |d| d.secs_f64());
    let (trace, mut report) = match &a.server {
        Some(host) => {
            let addr = resolve(host)?;
            if show {
                eprintln!(
                    "capturing {} packets of {} B at {} to {addr} (about {secs:.1} s)",
                    a.count,
                    a.size.get(),
                    a.rate
                );
            }
            let (t, r) = capture_on(addr, &spec, false)?;
            (t, r.with_path(format!("server {addr}")))
        }
        None => capture_lab(a, &spec, show, secs)?,
    };
    trace.write_path(&a.out).map_err(trace_failure)?;
    if let Some(c) = &a.csv {
        let f = std::fs::File::create(c)
            .map_err(|e| trace_failure(TraceError::io(format!("creating {}", c.display()), e)))?;
        trace
            .write_csv(&mut std::io::BufWriter::new(f))
            .map_err(trace_failure)?;
    }
    report.file = a.out.clone();
    report.csv = a.csv.clone();
    if a.json {
        println!("{}", serde_json::to_string(&report).expect("plain data"));
    } else {
        println!(
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
        println!(
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
        println!(
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
            println!("note: {n}");
        }
        println!(
            "analyse it: pathsonde trace analyze {}",
            report.file.display()
        );
    }
    Ok(())
}

impl CaptureReport {
    fn with_path(mut self, p: String) -> Self {
        self.path = p;
        self
    }
}

fn resolve(host: &str) -> Result<SocketAddr, Failure> {
    use std::net::ToSocketAddrs;
    let with_port =
        if host.contains(':') && !host.starts_with('[') && host.matches(':').count() == 1
            || host.ends_with(']')
            || host.contains("]:")
        {
            host.to_string()
        } else {
            format!("{host}:5310")
        };
    with_port
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| {
            Failure::from(NetError::Resolve {
                host: host.into(),
                reason: "no address".into(),
            })
        })
}

fn capture_lab(
    a: &CaptureArgs,
    spec: &TrainSpec,
    show: bool,
    secs: f64,
) -> Result<(Trace, CaptureReport), Failure> {
    pathsonde_lab::netns::check_permitted().map_err(lab_failure)?;
    let lab_spec = LabSpec {
        name: a
            .name
            .clone()
            .unwrap_or_else(|| format!("t8{}", std::process::id())),
        capacity: a.capacity,
        queue: a.queue,
        mtu: 1500,
        cross_sources: 0,
        narrow: None,
        delay: None,
        threaded_napi: a.threaded_napi,
    };
    lab_spec.validate().map_err(lab_failure)?;
    if show {
        eprintln!(
            "waiting for the lab lock ({})",
            pathsonde_lab::exclusive::LOCK_PATH
        );
    }
    let _lock = pathsonde_lab::exclusive::lab_lock().map_err(lab_failure)?;
    if show {
        eprintln!(
            "building lab {} ({} tbf, queue {} B{}); capturing {} packets of {} B at {} (about {secs:.1} s)",
            lab_spec.name,
            lab_spec.capacity,
            lab_spec.queue.get(),
            if a.threaded_napi { ", threaded NAPI" } else { "" },
            a.count,
            a.size.get(),
            a.rate
        );
    }
    let desc = format!(
        "lab {} ({} tbf, queue {} B{})",
        lab_spec.name,
        lab_spec.capacity,
        lab_spec.queue.get(),
        if a.threaded_napi {
            ", threaded NAPI"
        } else {
            ""
        }
    );
    let lab = Lab::build(lab_spec).map_err(lab_failure)?;
    let live = match LivePath::start(&lab, &[], 1, a.rate) {
        Ok(l) => l,
        Err(e) => {
            drop(lab);
            return Err(lab_failure(e));
        }
    };
    let spec = *spec;
    let snd = lab.ns(Role::Sender);
    let got = pathsonde_lab::netns::run_in(&snd, move || {
        capture_on(LivePath::server_addr(), &spec, true)
            .map_err(|f| pathsonde_lab::LabError::Capability(f.message))
    });
    let (_, notes) = live.stop();
    drop(lab);
    let (t, mut r) = got.map_err(lab_failure)?;
    r.notes.extend(notes);
    Ok((t, r.with_path(desc)))
}

/// Sends one train to the server at `addr` and turns its observation into a
/// trace.  With `same_clock` the receiver's CLOCK_REALTIME stamps are put
/// on this host's CLOCK_MONOTONIC timeline (where the send stamps are), so
/// latencies are one-way delays; otherwise they are shifted to start at 0.
fn capture_on(
    addr: SocketAddr,
    spec: &TrainSpec,
    same_clock: bool,
) -> Result<(Trace, CaptureReport), Failure> {
    let mut cfg = ClientConfig::new(addr);
    let secs = spec.duration().map_or(1.0, |d| d.secs_f64());
    cfg.reply_timeout = Duration::from_secs_f64(5.0 + 2.0 * secs);
    let mut client = Client::connect(cfg)?;
    let obs = client.run_train(spec, Duration::from_millis(200))?;
    let offset = clock::realtime_minus_monotonic();
    client.close();
    let first = obs.packets.iter().map(|p| p.sent.ns()).min().unwrap_or(0);
    let mut sent_ns = Vec::with_capacity(obs.packets.len());
    let mut latency_ns = Vec::with_capacity(obs.packets.len());
    for p in &obs.packets {
        sent_ns.push(p.sent.ns() - first);
        latency_ns.push(match p.received {
            Some(r) => r.ns() - (p.sent.ns() + offset),
            None => LOST,
        });
    }
    let mut notes = Vec::new();
    if !same_clock {
        if let Some(min) = latency_ns.iter().filter(|&&l| l != LOST).min().copied() {
            for l in latency_ns.iter_mut().filter(|l| **l != LOST) {
                *l -= min;
            }
        }
        notes.push(
            "sender and receiver read different clocks: latencies are relative to the fastest packet"
                .into(),
        );
    } else if latency_ns.iter().any(|&l| l != LOST && l < 0) {
        notes.push("some latencies are negative: the two ends' stamps are not on one clock".into());
    }
    let size = spec.packet_size;
    let rate_of = |span_ns: i64, n: usize| {
        (span_ns > 0 && n >= 2)
            .then(|| (n as f64 - 1.0) * size.bits() as f64 * 1e9 / span_ns as f64)
    };
    let span = sent_ns.iter().max().copied().unwrap_or(0);
    let achieved = rate_of(span, sent_ns.len()).unwrap_or(0.0);
    let recv: Vec<i64> = obs
        .packets
        .iter()
        .filter_map(|p| p.received.map(|r| r.ns()))
        .collect();
    let received_rate = match (recv.iter().min(), recv.iter().max()) {
        (Some(a), Some(b)) => rate_of(b - a, recv.len()),
        _ => None,
    };
    let drive = achieved / spec.rate.bps();
    if drive < DRIVEN {
        notes.push(format!(
            "the sender reached {:.1} % of the asked load: sendto and pacing cost more than the {:.2} µs spacing (docs/trace.md, host limits)",
            drive * 100.0,
            spec.car_interval().map_or(0.0, |d| d.us_f64())
        ));
    }
    let lost = latency_ns.iter().filter(|&&l| l == LOST).count();
    let meta = TraceMeta {
        rate: Some(spec.rate),
        packet_size: Some(size),
        interval: spec
            .car_interval()
            .map(|d| DurationNs::from_ns(d.ns() / i64::from(spec.packets_per_car.max(1)))),
        clock: Some(obs.recv_clock.source),
        resolution: Some(obs.recv_clock.resolution.max(obs.send_clock.resolution)),
        absolute: same_clock,
        measured_send_times: true,
    };
    let report = CaptureReport {
        file: PathBuf::new(),
        csv: None,
        path: String::new(),
        packets: latency_ns.len(),
        lost,
        asked_rate_bps: spec.rate.bps(),
        achieved_rate_bps: achieved,
        received_rate_bps: received_rate,
        drive,
        host_drove_load: drive >= DRIVEN,
        send_clock: obs.send_clock.source.describe().into(),
        recv_clock: obs.recv_clock.source.describe().into(),
        absolute: same_clock,
        notes,
    };
    Ok((
        Trace {
            meta,
            sent_ns,
            latency_ns,
        },
        report,
    ))
}
