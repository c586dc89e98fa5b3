//! The work behind `pathsonde trace`'s file commands (`analyze`, `model`,
//! `generate`, `plot`, `synth`, `two-router`): read a trace or a model,
//! compute, write files, and return what was done as typed values.
//!
//! Kept here rather than in the binary so the binary is glue (issue 31): it
//! checks its flags, calls these, prints through `pathsonde-render` and
//! turns a [`TraceError`] into an exit code.  Nothing here prints.

use crate::analysis::analyze;
use crate::error::Result;
use crate::fft::Fft;
use crate::model::{fidelity, Fidelity, Generator, Model};
use crate::oracle::{AlignmentPoint, ClockedRouter, OracleTruth, TwoRouters};
use crate::trace::{Trace, TraceMeta, LOST};
use crate::{plot, TraceError};
use pathsonde_core::{ClockSource, DurationNs};
use serde::Serialize;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The most bytes of a model file `generate` reads: a model is a few
/// hundred kilobytes, so anything this large is not one.
const MAX_MODEL_BYTES: u64 = 64 << 20;

/// The trace at `file`, cut to its middle `middle` packets when asked
/// (`Some(0)` means the whole trace, as no `--middle`).
pub fn load(file: &Path, middle: Option<usize>) -> Result<Trace> {
    let t = Trace::read_path(file)?;
    Ok(match middle {
        Some(n) if n > 0 => t.middle(n),
        _ => t,
    })
}

/// What `trace model` did: the model written and how close its
/// regeneration comes to the original.  Serialized as `--json` prints it.
#[derive(Debug, Serialize)]
pub struct ModelReport {
    pub file: PathBuf,
    pub model_file: PathBuf,
    pub n: usize,
    pub k: usize,
    pub variance_kept: f64,
    /// The regenerated series against the original.
    pub fidelity: Fidelity,
}

/// Builds the `k`-coefficient model of the trace at `file` (its middle
/// packets when asked), writes it as JSON to `out` (default
/// FILE.model.json) and judges a regeneration against the original.
pub fn model_file(
    file: &Path,
    k: usize,
    middle: Option<usize>,
    out: Option<PathBuf>,
) -> Result<ModelReport> {
    let t = load(file, middle)?;
    let x = t.filled_us();
    let mut fft = Fft::new();
    let mut model = Model::build(&x, k, &mut fft)?;
    model.interval_ns = t.interval().map(|i| i.ns());
    model.loss_fraction = t.lost() as f64 / t.len().max(1) as f64;
    let out = out.unwrap_or_else(|| file.with_extension("model.json"));
    std::fs::write(&out, model.to_json())
        .map_err(|e| TraceError::io(format!("writing {}", out.display()), e))?;
    let y = Generator::new(&model, &mut fft).generate(x.len());
    Ok(ModelReport {
        file: file.to_path_buf(),
        model_file: out,
        n: model.n,
        k: model.k,
        variance_kept: model.variance_kept,
        fidelity: fidelity(&x, &y),
    })
}

/// The model at `path`, refusing a file too large to be one (a usage
/// error: the user named the wrong file).
pub fn read_model(path: &Path) -> Result<Model> {
    Model::from_json(&read_bounded(path, MAX_MODEL_BYTES)?)
}

fn read_bounded(path: &Path, max: u64) -> Result<String> {
    use std::io::Read;
    let f = std::fs::File::open(path)
        .map_err(|e| TraceError::io(format!("opening {}", path.display()), e))?;
    let mut s = String::new();
    f.take(max + 1)
        .read_to_string(&mut s)
        .map_err(|e| TraceError::io(format!("reading {}", path.display()), e))?;
    if s.len() as u64 > max {
        return Err(TraceError::TooLarge {
            path: path.to_path_buf(),
            max,
        });
    }
    Ok(s)
}

/// `n` latencies (µs) regenerated from `model`, and the seconds it took.
pub fn generate(model: &Model, n: usize) -> (Vec<f64>, f64) {
    let mut fft = Fft::new();
    let started = std::time::Instant::now();
    let y = Generator::new(model, &mut fft).generate(n);
    (y, started.elapsed().as_secs_f64())
}

/// Writes generated latencies (µs) to `out`: CSV when its extension is
/// `csv`, the binary trace format otherwise; the trace carries the model's
/// spacing and a simulated clock.
pub fn write_generated(model: &Model, y: &[f64], out: &Path) -> Result<()> {
    let latency_ns: Vec<i64> = y.iter().map(|v| (v * 1e3).round() as i64).collect();
    let mut meta = TraceMeta::unknown();
    meta.interval = model.interval_ns.map(DurationNs::from_ns);
    meta.clock = Some(ClockSource::Simulated);
    let t = Trace::from_latencies(meta, latency_ns);
    if out
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("csv"))
    {
        let f = std::fs::File::create(out)
            .map_err(|e| TraceError::io(format!("creating {}", out.display()), e))?;
        t.write_csv(&mut std::io::BufWriter::new(f))
    } else {
        t.write_path(out)
    }
}

/// Generated latencies (µs) as seconds, one a line, on `w`; stops quietly
/// when the reader goes away (`| head`).
pub fn print_generated(y: &[f64], w: impl Write) {
    let mut w = std::io::BufWriter::new(w);
    for v in y {
        if writeln!(w, "{:.9}", v * 1e-6).is_err() {
            break;
        }
    }
    let _ = w.flush();
}

/// Draws the trace at `file`'s four figures (trace, distribution, spectrum,
/// model vs original) into `out` as PNG and SVG; returns the files written.
/// `name` is the figures' prefix (default: the file's stem), `window` the
/// packets shown from the middle, `k` the model's coefficients.
pub fn plot_files(
    file: &Path,
    out: &Path,
    name: Option<String>,
    window: usize,
    k: usize,
    middle: Option<usize>,
) -> Result<Vec<PathBuf>> {
    let t = load(file, middle)?;
    let mut fft = Fft::new();
    let a = analyze(&t, &mut fft)?;
    std::fs::create_dir_all(out)
        .map_err(|e| TraceError::io(format!("creating {}", out.display()), e))?;
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
    written.extend(plot::trace_plot(
        &base("trace"),
        &format!("latency trace{load_txt} ({} packets)", series.len()),
        &series,
    )?);
    written.extend(plot::distribution_plot(
        &base("distribution"),
        &format!(
            "latency distribution{load_txt}: {}",
            a.regime.kind.describe()
        ),
        &a.distribution.histogram,
    )?);
    let x = t.filled_us();
    let power = fft.power_spectrum(&x);
    written.extend(plot::spectrum_plot(
        &base("spectrum"),
        &format!("latency spectrum{load_txt}"),
        &power,
        x.len(),
        a.interval_us,
    )?);
    let model = Model::build(&x, k.max(1), &mut fft)?;
    let y = Generator::new(&model, &mut fft).generate(x.len());
    let start = (x.len() - win.len().min(x.len())) / 2;
    let end = start + win.len().min(x.len());
    written.extend(plot::model_plot(
        &base("model"),
        &format!("{}-coefficient model with CDF nudge{load_txt}", model.k),
        &x[start..end],
        &y[start..end],
    )?);
    Ok(written)
}

/// Runs the oracle router of `preset` (`banded`, or anything else for
/// queueing) for `n` packets and writes its trace to `out`; returns the
/// router and the truth it was built to show.
pub fn synth(
    preset: &str,
    n: usize,
    seed: u64,
    out: &Path,
) -> Result<(ClockedRouter, OracleTruth)> {
    let router = if preset == "banded" {
        ClockedRouter::paper_banded(seed)
    } else {
        ClockedRouter::paper_queueing(seed)
    };
    let (t, truth) = router.run(n);
    t.write_path(out)?;
    Ok((router, truth))
}

/// The two-router experiment's sweep, with and without router 1's jitter,
/// and the ranges of jitter and mean over the alignments.
#[derive(Debug)]
pub struct TwoRouterSweep {
    pub model: TwoRouters,
    pub with: Vec<AlignmentPoint>,
    pub without: Vec<AlignmentPoint>,
    /// Lowest and highest end-to-end jitter (µs) with router 1's jitter.
    pub jitter_range_us: (f64, f64),
    /// Lowest and highest mean latency (µs) with router 1's jitter.
    pub mean_range_us: (f64, f64),
}

/// Sweeps `steps` alignments of the paper's two routers, `packets` each,
/// with router 1 adding `jitter` and without.
pub fn two_router(jitter: DurationNs, steps: usize, packets: usize) -> TwoRouterSweep {
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
    TwoRouterSweep {
        model,
        jitter_range_us: range(&j),
        mean_range_us: range(&m),
        with,
        without,
    }
}
