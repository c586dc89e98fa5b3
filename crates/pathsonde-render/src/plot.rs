//! Pictures, drawn with plotters: what a picture is ([`Plot`]: its series,
//! bars and axes) and how it is drawn.  Which pictures an archived run
//! supports, and their data, are [`crate::archived`]'s.  One description ([`Plot`]) is drawn by one function onto
//! either backend, so the PNG, the SVG file and the SVG inlined in the HTML
//! report are the same picture.

use crate::font::ensure_font;
use crate::DrawError;
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::Path;

/// How a series is drawn.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Style {
    /// Points joined by a line.
    Line,
    /// Points alone (many, unjoined: probes).
    Points,
    /// Points marked and joined.
    LinePoints,
    /// A wide translucent line, drawn beneath the others: a series that
    /// would otherwise hide under one that follows it closely.
    Wide,
}

/// What the y axis measures; points are kept in base units (bits per
/// second, seconds) and the axis takes the unit that suits the data.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Quantity {
    /// Bits per second.
    Rate,
    /// Seconds.
    Delay,
}

impl Quantity {
    /// The divisor and unit for values up to `max` (in base units).
    fn unit(self, max: f64) -> (f64, &'static str) {
        let steps: &[(f64, &str)] = match self {
            Quantity::Rate => &[(1e9, "Gb/s"), (1e6, "Mb/s"), (1e3, "kb/s"), (1.0, "b/s")],
            Quantity::Delay => &[(1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns")],
        };
        steps
            .iter()
            .copied()
            .find(|&(d, _)| max >= d)
            .unwrap_or(steps[steps.len() - 1])
    }
}

/// One named set of points, as the legend names it.
#[derive(Debug, Clone)]
pub struct Series {
    /// Its legend entry.
    pub name: String,
    /// (x, y) in base units (bits per second, seconds) or counts.
    pub points: Vec<(f64, f64)>,
    /// How it is drawn.
    pub style: Style,
}

/// One picture: what it shows and the data.
#[derive(Debug, Clone)]
pub struct Plot {
    /// File stem: `trace`, `estimate-vs-truth`, `truth-series`, `owd`.
    pub name: String,
    /// The heading above the chart.
    pub title: String,
    /// A sentence saying what the picture shows (the HTML report prints it).
    pub caption: String,
    /// What x is; its unit follows when `x` is set.
    pub x_label: String,
    /// What y is, without its unit ("rate"): the unit follows the data.
    pub y_label: String,
    /// What y measures, so the axis takes the unit that suits the data.
    pub y: Quantity,
    /// The series, drawn in order (a `Wide` one beneath the others).
    pub series: Vec<Series>,
    /// Vertical bars (x, low, high), e.g. an estimate's bounds.
    pub bars: Vec<(f64, f64, f64)>,
    /// The x axis counts things (trains, runs): whole-number ticks only.
    pub integer_x: bool,
    /// What x measures when it is not a count: its unit then follows the
    /// data, as y's does (`x_label` is given without it).
    pub x: Option<Quantity>,
}

const SIZE: (u32, u32) = (900, 500);
const COLORS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(255, 127, 14),
    RGBColor(23, 190, 207),
];

fn bounds(p: &Plot) -> ((f64, f64), (f64, f64)) {
    let xs = p
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|q| q.0))
        .chain(p.bars.iter().map(|b| b.0));
    let ys = p
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|q| q.1))
        .chain(p.bars.iter().flat_map(|b| [b.1, b.2]));
    let (mut x0, mut x1) = xs.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| {
        (a.min(x), b.max(x))
    });
    let (_, mut y1) = ys.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), y| {
        (a.min(y), b.max(y))
    });
    if !x0.is_finite() || !x1.is_finite() {
        (x0, x1) = (0.0, 1.0);
    }
    if x1 - x0 < 1e-9 {
        x0 -= 0.5;
        x1 += 0.5;
    }
    if !y1.is_finite() || y1 <= 0.0 {
        y1 = 1.0;
    }
    let pad = (x1 - x0) * 0.03;
    ((x0 - pad, x1 + pad), (0.0, y1 * 1.1))
}

/// `p` with y in the unit that suits its data, and that unit in the label.
fn scaled(p: &Plot) -> Plot {
    let max = p
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|q| q.1.abs()))
        .chain(p.bars.iter().flat_map(|b| [b.1.abs(), b.2.abs()]))
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max);
    let (div, unit) = p.y.unit(max);
    let mut out = p.clone();
    out.y_label = format!("{} ({unit})", p.y_label);
    for s in &mut out.series {
        for q in &mut s.points {
            q.1 /= div;
        }
    }
    for b in &mut out.bars {
        b.1 /= div;
        b.2 /= div;
    }
    if let Some(q) = p.x {
        let span = p
            .series
            .iter()
            .flat_map(|s| s.points.iter().map(|q| q.0.abs()))
            .filter(|v| v.is_finite())
            .fold(0.0, f64::max);
        let (div, unit) = q.unit(span);
        out.x_label = format!("{} ({unit})", p.x_label);
        for s in &mut out.series {
            for q in &mut s.points {
                q.0 /= div;
            }
        }
    }
    out
}

/// Draws `p` on any plotters backend: the chart, and the legend in a strip
/// of its own below it, so no legend ever covers the data.
pub fn draw<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, p: &Plot) -> Result<(), DrawError> {
    use pathsonde_trace::plot::{legend_row, with_legend_strip, LegendEntry, Mark};
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| DrawError::draw(e);
    let p = &scaled(p);
    root.fill(&WHITE).map_err(e)?;
    let (figure, strip) = with_legend_strip(root);
    let ((x0, x1), (y0, y1)) = bounds(p);
    let mut chart = ChartBuilder::on(&figure)
        .caption(&p.title, ("sans-serif", 22))
        .margin(14)
        .x_label_area_size(45)
        .y_label_area_size(65)
        .build_cartesian_2d(x0..x1, y0..y1)
        .map_err(e)?;
    let whole = |x: &f64| format!("{x:.0}");
    let decimal = |x: &f64| {
        let s = format!("{x:.3}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    };
    // Whole-number ticks: at most one per unit, at most 12.
    let ticks = if p.integer_x {
        ((x1 - x0).floor() as usize + 1).clamp(2, 12)
    } else {
        10
    };
    chart
        .configure_mesh()
        .x_labels(ticks)
        .x_label_formatter(if p.integer_x { &whole } else { &decimal })
        .y_label_formatter(&decimal)
        .x_desc(p.x_label.as_str())
        .y_desc(p.y_label.as_str())
        .label_style(("sans-serif", 14))
        .draw()
        .map_err(e)?;
    let mut legend = Vec::new();
    // Wide series first, so the others are drawn over them.
    let mut order: Vec<usize> = (0..p.series.len()).collect();
    order.sort_by_key(|&i| p.series[i].style != Style::Wide);
    for i in order {
        let s = &p.series[i];
        if s.points.is_empty() {
            continue;
        }
        let c = COLORS[i % COLORS.len()];
        let line = matches!(s.style, Style::Line | Style::LinePoints);
        let dots = matches!(s.style, Style::Points | Style::LinePoints);
        if s.style == Style::Wide {
            chart
                .draw_series(LineSeries::new(
                    s.points.iter().copied(),
                    c.mix(0.35).stroke_width(7),
                ))
                .map_err(e)?;
        }
        if line {
            chart
                .draw_series(LineSeries::new(s.points.iter().copied(), c.stroke_width(2)))
                .map_err(e)?;
        }
        if dots {
            let r = if line { 3 } else { 2 };
            chart
                .draw_series(s.points.iter().map(|&q| Circle::new(q, r, c.filled())))
                .map_err(e)?;
        }
        let mark = match s.style {
            Style::Wide => Mark::WideLine,
            Style::Points => Mark::Dot,
            Style::Line | Style::LinePoints => Mark::Line,
        };
        legend.push((
            i,
            LegendEntry {
                label: s.name.clone(),
                color: c,
                mark,
            },
        ));
    }
    let bar = COLORS[0].mix(0.6);
    chart
        .draw_series(
            p.bars
                .iter()
                .map(|&(x, lo, hi)| PathElement::new(vec![(x, lo), (x, hi)], bar.stroke_width(2))),
        )
        .map_err(e)?;
    // The legend lists the series in the order the plot declares them.
    legend.sort_by_key(|(i, _)| *i);
    let mut entries: Vec<LegendEntry> = legend.into_iter().map(|(_, l)| l).collect();
    if !p.bars.is_empty() {
        entries.push(LegendEntry {
            label: "the estimate's bounds".into(),
            color: COLORS[0],
            mark: Mark::Line,
        });
    }
    legend_row(&strip, &entries).map_err(e)?;
    root.present().map_err(e)
}

/// The picture as an SVG document.
pub fn svg(p: &Plot) -> Result<String, DrawError> {
    // The SVG carries text as text, but laying out the axes still measures
    // glyphs.
    ensure_font()?;
    let mut s = String::new();
    {
        let root = SVGBackend::with_string(&mut s, SIZE).into_drawing_area();
        draw(&root, p)?;
    }
    Ok(s)
}

/// Writes the picture as a PNG file.
pub fn png(p: &Plot, path: &Path) -> Result<(), DrawError> {
    ensure_font()?;
    let root = BitMapBackend::new(path, SIZE).into_drawing_area();
    draw(&root, p)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one_series(y: Quantity, points: Vec<(f64, f64)>) -> Plot {
        Plot {
            name: "t".into(),
            title: "t".into(),
            caption: String::new(),
            x_label: "send time".into(),
            y_label: "delay".into(),
            y,
            series: vec![Series {
                name: "s".into(),
                points,
                style: Style::Points,
            }],
            bars: vec![],
            integer_x: false,
            x: Some(Quantity::Delay),
        }
    }

    /// 20 µs of delay is drawn in µs, not as 0.02 ms; 23 Gb/s in Gb/s.
    #[test]
    fn axes_take_the_unit_that_suits_the_data() {
        let p = scaled(&one_series(
            Quantity::Delay,
            vec![(0.004, 20e-6), (0.008, 5e-6)],
        ));
        assert_eq!(p.y_label, "delay (µs)");
        assert_eq!(p.x_label, "send time (ms)");
        assert!((p.series[0].points[0].1 - 20.0).abs() < 1e-9);
        assert!((p.series[0].points[1].0 - 8.0).abs() < 1e-9);
        let r = scaled(&one_series(Quantity::Rate, vec![(1.0, 23e9)]));
        assert_eq!(r.y_label, "delay (Gb/s)");
        assert!((r.series[0].points[0].1 - 23.0).abs() < 1e-9);
        assert_eq!(Quantity::Rate.unit(0.0), (1.0, "b/s"));
        assert_eq!(Quantity::Rate.unit(450e6), (1e6, "Mb/s"));
    }

    /// The legend has a strip of its own: the chart above it is drawn
    /// whatever the data, and the SVG names every series.
    #[test]
    fn the_legend_names_every_series_below_the_chart() {
        let mut p = one_series(Quantity::Rate, vec![(0.0, 1e6), (1.0, 2e6)]);
        p.series[0].name = "first series".into();
        p.series.push(Series {
            name: "second series".into(),
            points: vec![(0.0, 2e6)],
            style: Style::Wide,
        });
        let svg = svg(&p).unwrap();
        assert!(svg.contains("first series"));
        assert!(svg.contains("second series"));
    }
}
