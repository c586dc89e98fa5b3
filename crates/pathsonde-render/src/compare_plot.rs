//! The comparison's figures, as PNG and SVG, after the comparison paper
//! (Shriram et al. 2005): estimate against actual available bandwidth, one
//! panel per method (its Figure 3), and estimates over time against the
//! truth series (its Figure 4).
//!
//! Text needs a TrueType font: plotters draws glyphs through ab_glyph with
//! no system library, so the first of `PATHSONDE_FONT` and a few usual
//! system paths (Debian's `fonts-dejavu-core`, Liberation, Noto) is loaded.

use crate::font::ensure_font;
use crate::DrawError;
use pathsonde_core::BitRate;
use pathsonde_lab::compare::{CompareReport, CompareRun};
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::{Path, PathBuf};

/// Colours for the methods, in order (repeats past eight).
fn colour(i: usize) -> RGBColor {
    const C: [RGBColor; 8] = [
        RGBColor(31, 119, 180),
        RGBColor(214, 39, 40),
        RGBColor(44, 160, 44),
        RGBColor(148, 103, 189),
        RGBColor(255, 127, 14),
        RGBColor(140, 86, 75),
        RGBColor(227, 119, 194),
        RGBColor(23, 190, 207),
    ];
    C[i % C.len()]
}

fn err<E: std::fmt::Display>(e: E) -> DrawError {
    DrawError::draw(e)
}

/// A file-name-safe form of a cross-traffic kind.
pub fn slug(kind: &str) -> String {
    kind.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

/// Writes both figures for every cross-traffic kind into `dir`, as PNG and
/// SVG; returns the files written.
pub fn write_all(report: &CompareReport, dir: &Path) -> Result<Vec<PathBuf>, DrawError> {
    ensure_font()?;
    let mut files = Vec::new();
    for kind in &report.kinds {
        let s = slug(kind);
        for (name, draw) in [
            (
                format!("fig3-estimate-vs-actual-{s}"),
                Figure::EstimateVsActual,
            ),
            (format!("fig4-estimates-over-time-{s}"), Figure::OverTime),
        ] {
            let (w, h) = size(report, draw);
            let png = dir.join(format!("{name}.png"));
            {
                let root = BitMapBackend::new(&png, (w, h)).into_drawing_area();
                draw.draw(&root, report, kind)?;
                root.present().map_err(err)?;
            }
            files.push(png);
            let svg = dir.join(format!("{name}.svg"));
            {
                let root = SVGBackend::new(&svg, (w, h)).into_drawing_area();
                draw.draw(&root, report, kind)?;
                root.present().map_err(err)?;
            }
            files.push(svg);
        }
    }
    Ok(files)
}

#[derive(Clone, Copy)]
enum Figure {
    EstimateVsActual,
    OverTime,
}

/// Panels in a grid of two columns (one column for a single method).
fn grid(methods: usize) -> (usize, usize) {
    let cols = if methods <= 1 { 1 } else { 2 };
    (methods.div_ceil(cols).max(1), cols)
}

fn size(report: &CompareReport, f: Figure) -> (u32, u32) {
    let (rows, cols) = grid(report.methods.len());
    let (pw, ph) = match f {
        Figure::EstimateVsActual => (520, 380),
        Figure::OverTime => (760, 300),
    };
    (pw * cols as u32, ph * rows as u32 + 40)
}

const MBPS: f64 = 1e6;

impl Figure {
    fn draw<DB: DrawingBackend>(
        self,
        root: &DrawingArea<DB, Shift>,
        report: &CompareReport,
        kind: &str,
    ) -> Result<(), DrawError>
    where
        DB::ErrorType: 'static,
    {
        root.fill(&WHITE).map_err(err)?;
        let title = match self {
            Figure::EstimateVsActual => format!(
                "Estimate vs actual A: {:.0} Mb/s, {kind}",
                report.lab.capacity.mbps()
            ),
            Figure::OverTime => format!(
                "Estimates over time vs truth: {:.0} Mb/s, {kind}, loads {}",
                report.lab.capacity.mbps(),
                report
                    .loads
                    .iter()
                    .map(|l| format!("{l}%"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        let body = root.titled(&title, ("sans-serif", 18)).map_err(err)?;
        let (rows, cols) = grid(report.methods.len());
        let panels = body.split_evenly((rows, cols));
        for (i, method) in report.methods.iter().enumerate() {
            let runs: Vec<&CompareRun> = report
                .runs
                .iter()
                .filter(|r| r.kind == kind && &r.method == method)
                .collect();
            match self {
                Figure::EstimateVsActual => {
                    fig3_panel(&panels[i], report, kind, method, &runs, colour(i))?
                }
                Figure::OverTime => fig4_panel(&panels[i], report, kind, method, &runs, colour(i))?,
            }
        }
        Ok(())
    }
}

/// Upper end of the rate axis: a little above C, stretched for estimates
/// above it but never past 2 C (points beyond are drawn at the edge).
fn rate_axis_top(report: &CompareReport, runs: &[&CompareRun]) -> f64 {
    let c = report.capacity_ip_bps.bps() / MBPS;
    let top = runs
        .iter()
        .map(|r| r.estimate_bps.bps() / MBPS)
        .fold(c * 1.1, f64::max);
    top.min(2.0 * c) * 1.02
}

fn fig3_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    report: &CompareReport,
    kind: &str,
    method: &str,
    runs: &[&CompareRun],
    col: RGBColor,
) -> Result<(), DrawError>
where
    DB::ErrorType: 'static,
{
    let xmax = report.capacity_ip_bps.bps() / MBPS * 1.05;
    let ymax = rate_axis_top(report, runs);
    let mut chart = ChartBuilder::on(area)
        .caption(method, ("sans-serif", 16))
        .margin(10)
        .x_label_area_size(38)
        .y_label_area_size(52)
        .build_cartesian_2d(0f64..xmax, 0f64..ymax)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("actual available bandwidth (Mb/s)")
        .y_desc("estimate (Mb/s)")
        .x_label_formatter(&|v| format!("{v:.0}"))
        .y_label_formatter(&|v| format!("{v:.0}"))
        .light_line_style(WHITE)
        .draw()
        .map_err(err)?;
    let diag = xmax.min(ymax);
    chart
        .draw_series(DashedLineSeries::new(
            vec![(0.0, 0.0), (diag, diag)],
            6,
            4,
            BLACK.mix(0.6).into(),
        ))
        .map_err(err)?;
    let clip = |y: f64| y.min(ymax * 0.995);
    chart
        .draw_series(runs.iter().map(|r| {
            Circle::new(
                (r.truth_bps.bps() / MBPS, clip(r.estimate_bps.bps() / MBPS)),
                3,
                col.mix(0.35).filled(),
            )
        }))
        .map_err(err)?;
    for row in report
        .rows
        .iter()
        .filter(|r| r.kind == kind && r.method == method)
    {
        let (Some(x), Some(m)) = (row.truth_mean_bps, row.estimate_mean_bps) else {
            continue;
        };
        let s = row.estimate_std_bps.map_or(0.0, BitRate::bps);
        let (x, m, s) = (x.bps() / MBPS, m.bps() / MBPS, s / MBPS);
        chart
            .draw_series(std::iter::once(ErrorBar::new_vertical(
                x,
                clip((m - s).max(0.0)),
                clip(m),
                clip(m + s),
                col.stroke_width(2),
                10,
            )))
            .map_err(err)?;
        chart
            .draw_series(std::iter::once(Circle::new((x, clip(m)), 4, col.filled())))
            .map_err(err)?;
    }
    Ok(())
}

fn fig4_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    report: &CompareReport,
    kind: &str,
    method: &str,
    runs: &[&CompareRun],
    col: RGBColor,
) -> Result<(), DrawError>
where
    DB::ErrorType: 'static,
{
    let phases: Vec<_> = report.phases.iter().filter(|p| p.kind == kind).collect();
    let (Some(first), Some(last)) = (phases.first(), phases.last()) else {
        return Ok(());
    };
    let start = first.start_s.secs_f64();
    let (x0, x1) = (start, last.end_s.secs_f64().max(start + 1.0));
    let pad = (x1 - x0) * 0.02;
    let (x0, x1) = ((x0 - pad).max(0.0), x1 + pad);
    let ymax = rate_axis_top(report, runs);
    let mut chart = ChartBuilder::on(area)
        .caption(method, ("sans-serif", 16))
        .margin(10)
        .x_label_area_size(38)
        .y_label_area_size(52)
        .build_cartesian_2d(x0..x1, 0f64..ymax)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("time since the sweep started (s)")
        .y_desc("available bandwidth (Mb/s)")
        .x_label_formatter(&|v| format!("{v:.0}"))
        .y_label_formatter(&|v| format!("{v:.0}"))
        .light_line_style(WHITE)
        .draw()
        .map_err(err)?;
    // The truth, phase by phase (no line across a change of load).
    for p in &phases {
        chart
            .draw_series(LineSeries::new(
                p.truth_series
                    .iter()
                    .map(|t| (t.t_s.secs_f64(), (t.available_bps.bps() / MBPS).min(ymax))),
                BLACK.mix(0.55),
            ))
            .map_err(err)?;
    }
    // Each estimate when it was returned, with the span its probes covered.
    let clip = |y: f64| y.min(ymax * 0.995);
    for r in runs {
        let y = clip(r.estimate_bps.bps() / MBPS);
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![
                    (r.window_start_s.secs_f64(), y),
                    (r.window_end_s.secs_f64(), y),
                ],
                col.stroke_width(1),
            )))
            .map_err(err)?;
    }
    chart
        .draw_series(runs.iter().map(|r| {
            Circle::new(
                (r.end_s.secs_f64(), clip(r.estimate_bps.bps() / MBPS)),
                3,
                col.filled(),
            )
        }))
        .map_err(err)?;
    Ok(())
}
