//! The paper's figures, as PNG and SVG: latency trace (Figure 2), latency
//! distribution (Figure 3), spectrum, and model beside original (Figures 7
//! and 8).  Each `*_plot` writes `BASE.png` and `BASE.svg`.
//!
//! Text needs a TrueType font: `PATHSONDE_FONT` if set, else DejaVu Sans or
//! Liberation Sans from the usual system places.

use crate::analysis::Histogram;
use crate::error::{Result, TraceError};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

const FONT_PLACES: [&str; 4] = [
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
];

fn ensure_font() -> Result<()> {
    static FONT: OnceLock<std::result::Result<(), String>> = OnceLock::new();
    FONT.get_or_init(|| {
        let mut places: Vec<String> = std::env::var("PATHSONDE_FONT").into_iter().collect();
        places.extend(FONT_PLACES.iter().map(|s| s.to_string()));
        for p in &places {
            if let Ok(bytes) = std::fs::read(p) {
                let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
                if plotters::style::register_font("sans-serif", FontStyle::Normal, bytes).is_ok() {
                    return Ok(());
                }
            }
        }
        Err(format!(
            "no TrueType font found (tried {}); set PATHSONDE_FONT to a .ttf file",
            places.join(", ")
        ))
    })
    .clone()
    .map_err(|why| TraceError::Plot {
        what: "text".into(),
        why,
    })
}

fn plot_err<E: std::fmt::Debug>(what: &str) -> impl Fn(E) -> TraceError + '_ {
    move |e| TraceError::Plot {
        what: what.into(),
        why: format!("{e:?}"),
    }
}

const SIZE: (u32, u32) = (1000, 600);

/// Renders `draw` into BASE.png and BASE.svg.
macro_rules! both {
    ($base:expr, $what:expr, |$root:ident| $body:expr) => {{
        ensure_font()?;
        let base: &Path = $base;
        let png = base.with_extension("png");
        let svg = base.with_extension("svg");
        {
            let $root = BitMapBackend::new(&png, SIZE).into_drawing_area();
            $body.map_err(plot_err($what))?;
            $root.present().map_err(plot_err($what))?;
        }
        {
            let $root = SVGBackend::new(&svg, SIZE).into_drawing_area();
            $body.map_err(plot_err($what))?;
            $root.present().map_err(plot_err($what))?;
        }
        Ok(vec![png, svg])
    }};
}

type DrawResult<DB> =
    std::result::Result<(), DrawingAreaErrorKind<<DB as DrawingBackend>::ErrorType>>;

fn bounds(v: &[f64]) -> (f64, f64) {
    let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if !lo.is_finite() {
        return (0.0, 1.0);
    }
    let pad = ((hi - lo) * 0.05).max(0.01);
    (lo - pad, hi + pad)
}

/// A chart of latency (µs) against packet number.
type LatencyChart<'a, DB> = ChartContext<'a, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// The frame of every per-packet figure: latency (µs) from `lo` to `hi`
/// against packet number, captioned in `caption.0` at `caption.1` points
/// (the margins shrink with the caption for panels of a split figure).
fn latency_axes<'a, DB: DrawingBackend>(
    area: &'a DrawingArea<DB, Shift>,
    caption: (&str, u32),
    packets: usize,
    (lo, hi): (f64, f64),
) -> std::result::Result<LatencyChart<'a, DB>, DrawingAreaErrorKind<DB::ErrorType>> {
    let (text, size) = caption;
    let large = size >= 20;
    let mut chart = ChartBuilder::on(area)
        .caption(text, ("sans-serif", size))
        .margin(if large { 12 } else { 8 })
        .x_label_area_size(if large { 40 } else { 30 })
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..packets.max(1) as f64, lo..hi)?;
    chart
        .configure_mesh()
        .x_label_formatter(&|x| format!("{x:.0}"))
        .x_desc("packet")
        .y_desc("latency (µs)")
        .draw()?;
    Ok(chart)
}

/// How a legend entry shows its series.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mark {
    Line,
    /// A wide translucent line (a series drawn under another).
    WideLine,
    Dot,
    Cross,
}

/// One entry of a legend row.
#[derive(Debug, Clone)]
pub struct LegendEntry {
    pub label: String,
    pub color: RGBColor,
    pub mark: Mark,
}

/// Height of the strip a legend row takes below a figure.
pub const LEGEND_STRIP: u32 = 30;

/// Splits `root` into the figure and a strip below it for the legend: a
/// legend in its own strip never covers the data, whatever the data do.
pub fn with_legend_strip<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
) -> (DrawingArea<DB, Shift>, DrawingArea<DB, Shift>) {
    let h = root.dim_in_pixel().1;
    root.split_vertically(h.saturating_sub(LEGEND_STRIP))
}

/// Draws `entries` left to right, centred in `strip`.
pub fn legend_row<DB: DrawingBackend>(
    strip: &DrawingArea<DB, Shift>,
    entries: &[LegendEntry],
) -> DrawResult<DB> {
    const KEY: i32 = 22;
    const GAP: i32 = 24;
    let font: TextStyle = ("sans-serif", 14).into_font().into();
    let widths: Vec<i32> = entries
        .iter()
        .map(|e| {
            let (w, _) = strip.estimate_text_size(&e.label, &font).unwrap_or((0, 0));
            KEY + 6 + w as i32
        })
        .collect();
    let total: i32 = widths.iter().sum::<i32>() + GAP * (entries.len() as i32 - 1).max(0);
    let (w, h) = strip.dim_in_pixel();
    let y = h as i32 / 2;
    let mut x = ((w as i32 - total) / 2).max(4);
    for (e, width) in entries.iter().zip(&widths) {
        let c = e.color;
        match e.mark {
            Mark::Line => strip.draw(&PathElement::new(
                vec![(x, y), (x + KEY, y)],
                c.stroke_width(2),
            ))?,
            Mark::WideLine => strip.draw(&PathElement::new(
                vec![(x, y), (x + KEY, y)],
                c.mix(0.35).stroke_width(7),
            ))?,
            Mark::Dot => strip.draw(&Circle::new((x + KEY / 2, y), 3, c.filled()))?,
            Mark::Cross => strip.draw(&Cross::new((x + KEY / 2, y), 4, c.stroke_width(2)))?,
        }
        strip.draw(&Text::new(
            e.label.clone(),
            (x + KEY + 6, y - 8),
            font.clone(),
        ))?;
        x += width + GAP;
    }
    Ok(())
}

/// The runs of consecutive received packets, as line segments: a lost
/// packet breaks the line rather than being drawn through.
fn received_runs(series: &[Option<f64>]) -> Vec<Vec<(f64, f64)>> {
    let mut runs = vec![Vec::new()];
    for (i, v) in series.iter().enumerate() {
        match v {
            Some(v) => runs.last_mut().expect("never empty").push((i as f64, *v)),
            None if !runs.last().expect("never empty").is_empty() => runs.push(Vec::new()),
            None => {}
        }
    }
    runs.retain(|r| !r.is_empty());
    runs
}

/// Latency (µs) per packet as a line broken at each loss, losses as red
/// crosses along the bottom, both named in the legend below (like the
/// paper's Figure 2).
pub fn trace_plot(base: &Path, title: &str, series: &[Option<f64>]) -> Result<Vec<PathBuf>> {
    both!(base, "the trace", |root| draw_trace(&root, title, series))
}

fn draw_trace<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    series: &[Option<f64>],
) -> DrawResult<DB> {
    root.fill(&WHITE)?;
    let (figure, strip) = with_legend_strip(root);
    let got: Vec<f64> = series.iter().flatten().copied().collect();
    let (lo, hi) = bounds(&got);
    let mut chart = latency_axes(&figure, (title, 22), series.len(), (lo, hi))?;
    for run in received_runs(series) {
        chart.draw_series(LineSeries::new(run, BLUE.stroke_width(1)))?;
    }
    let lost = series.iter().filter(|v| v.is_none()).count();
    chart.draw_series(
        series
            .iter()
            .enumerate()
            .filter(|(_, v)| v.is_none())
            .map(|(i, _)| Cross::new((i as f64, lo + (hi - lo) * 0.01), 3, RED)),
    )?;
    let mut legend = vec![LegendEntry {
        label: format!("latency of each received packet ({})", got.len()),
        color: BLUE,
        mark: Mark::Line,
    }];
    legend.push(LegendEntry {
        label: format!("lost packet ({lost} of {})", series.len()),
        color: RED,
        mark: Mark::Cross,
    });
    legend_row(&strip, &legend)
}

/// The latency histogram (fraction of packets per bin), like Figure 3.
pub fn distribution_plot(base: &Path, title: &str, h: &Histogram) -> Result<Vec<PathBuf>> {
    both!(base, "the distribution", |root| draw_distribution(
        &root, title, h
    ))
}

fn draw_distribution<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    h: &Histogram,
) -> DrawResult<DB> {
    root.fill(&WHITE)?;
    // Re-bin to at most 400 bars so bands stay visible at print size.
    let group = h.counts.len().div_ceil(400).max(1);
    let total: f64 = h.counts.iter().map(|&c| f64::from(c)).sum::<f64>().max(1.0);
    let bars: Vec<(f64, f64)> = h
        .counts
        .chunks(group)
        .enumerate()
        .map(|(i, c)| {
            (
                h.lo_us + (i * group) as f64 * h.width_us,
                c.iter().map(|&v| f64::from(v)).sum::<f64>() / total,
            )
        })
        .collect();
    let w = h.width_us * group as f64;
    let top = bars.iter().map(|b| b.1).fold(0.0, f64::max) * 1.05 + 1e-9;
    let x_hi = h.lo_us + bars.len() as f64 * w;
    let mut chart = ChartBuilder::on(root)
        .caption(title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(h.lo_us..x_hi, 0f64..top)?;
    chart
        .configure_mesh()
        .x_desc("latency (µs)")
        .y_desc("fraction of packets")
        .draw()?;
    chart.draw_series(
        bars.iter()
            .map(|&(x, y)| Rectangle::new([(x, 0.0), (x + w, y)], BLUE.mix(0.8).filled())),
    )?;
    Ok(())
}

/// Power spectrum of the latency series on a log scale; the x axis is in
/// cycles per packet, or kHz when `interval_us` is known.
pub fn spectrum_plot(
    base: &Path,
    title: &str,
    power: &[f64],
    n: usize,
    interval_us: Option<f64>,
) -> Result<Vec<PathBuf>> {
    both!(base, "the spectrum", |root| draw_spectrum(
        &root,
        title,
        power,
        n,
        interval_us
    ))
}

fn draw_spectrum<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    power: &[f64],
    n: usize,
    interval_us: Option<f64>,
) -> DrawResult<DB> {
    root.fill(&WHITE)?;
    let scale = |k: usize| match interval_us {
        Some(i) => k as f64 / n as f64 / (i * 1e-6) / 1e3,
        None => k as f64 / n as f64,
    };
    let pts: Vec<(f64, f64)> = power
        .iter()
        .enumerate()
        .skip(1)
        .map(|(k, &p)| (scale(k), (p.max(1e-30)).log10()))
        .collect();
    let ys: Vec<f64> = pts.iter().map(|p| p.1).collect();
    let (lo, hi) = bounds(&ys);
    let x_hi = scale(power.len().max(2) - 1).max(1e-9);
    let mut chart = ChartBuilder::on(root)
        .caption(title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..x_hi, lo.max(hi - 12.0)..hi)?;
    chart
        .configure_mesh()
        .x_desc(if interval_us.is_some() {
            "frequency (kHz)"
        } else {
            "frequency (cycles/packet)"
        })
        .y_desc("log10 power")
        .draw()?;
    chart.draw_series(LineSeries::new(pts, BLUE))?;
    Ok(())
}

/// Original (top) and model (bottom) over the same window, like Figures 7–8.
pub fn model_plot(
    base: &Path,
    title: &str,
    original: &[f64],
    model: &[f64],
) -> Result<Vec<PathBuf>> {
    both!(base, "model vs original", |root| draw_model(
        &root, title, original, model
    ))
}

fn draw_model<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    original: &[f64],
    model: &[f64],
) -> DrawResult<DB> {
    root.fill(&WHITE)?;
    let root = root.titled(title, ("sans-serif", 22))?;
    let parts = root.split_evenly((2, 1));
    let all: Vec<f64> = original.iter().chain(model).copied().collect();
    let (lo, hi) = bounds(&all);
    for (area, (name, series, colour)) in parts
        .iter()
        .zip([("original", original, BLUE), ("model", model, RED)])
    {
        let mut chart = latency_axes(area, (name, 16), series.len(), (lo, hi))?;
        chart.draw_series(LineSeries::new(
            series.iter().enumerate().map(|(i, &v)| (i as f64, v)),
            colour.stroke_width(1),
        ))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A loss breaks the line; it is not drawn through.
    #[test]
    fn received_packets_are_joined_and_losses_break_the_line() {
        let runs = received_runs(&[Some(1.0), Some(2.0), None, None, Some(3.0), None]);
        assert_eq!(runs, vec![vec![(0.0, 1.0), (1.0, 2.0)], vec![(4.0, 3.0)]]);
        assert!(received_runs(&[None, None]).is_empty());
    }

    /// The trace figure's legend names the line and counts the losses.
    #[test]
    fn the_trace_legend_counts_the_losses() {
        let dir = std::env::temp_dir().join(format!("pathsonde-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let series: Vec<Option<f64>> = (0..100)
            .map(|i| (i % 10 != 3).then_some(40.0 + f64::from(i % 7)))
            .collect();
        let files = trace_plot(&dir.join("t"), "t", &series).unwrap();
        let svg = std::fs::read_to_string(
            files
                .iter()
                .find(|f| f.extension().unwrap() == "svg")
                .unwrap(),
        )
        .unwrap();
        assert!(svg.contains("lost packet (10 of 100)"), "no loss legend");
        assert!(svg.contains("latency of each received packet (90)"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
