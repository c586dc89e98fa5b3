//! Pictures of an archived run, drawn with plotters from the archived result
//! and raw data alone (no re-run): the convergence trace, estimates beside
//! their truth, the bottleneck's truth series, and every probe's relative
//! one-way delay.  One description ([`Plot`]) is drawn by one function onto
//! either backend, so the PNG, the SVG file and the SVG inlined in the HTML
//! report are the same picture.

use crate::font::ensure_font;
use plotters::coord::Shift;
use plotters::prelude::*;
use serde_json::Value;
use std::path::Path;

/// How a series is drawn.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Style {
    Line,
    Points,
    LinePoints,
}

#[derive(Debug, Clone)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    pub style: Style,
}

/// One picture: what it shows and the data.
#[derive(Debug, Clone)]
pub struct Plot {
    /// File stem: `trace`, `estimate-vs-truth`, `truth-series`, `owd`.
    pub name: String,
    pub title: String,
    pub caption: String,
    pub x_label: String,
    pub y_label: String,
    pub series: Vec<Series>,
    /// Vertical bars (x, low, high), e.g. an estimate's bounds.
    pub bars: Vec<(f64, f64, f64)>,
    /// The x axis counts things (trains, runs): whole-number ticks only.
    pub integer_x: bool,
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

fn f(v: &Value) -> Option<f64> {
    v.as_f64().filter(|x| x.is_finite())
}

fn mbps(v: &Value) -> Option<f64> {
    f(v).map(|x| x / 1e6)
}

/// Convergence trace of a list of train records, whichever spelling
/// (`abw --json` uses `target_bps`, the lab's trace `target_rate`).
fn trace_plot(trains: &[Value], title: String) -> Option<Plot> {
    let get = |t: &Value, a: &str, b: &str| mbps(&t[a]).or_else(|| mbps(&t[b]));
    let mut target = Vec::new();
    let mut sending = Vec::new();
    let mut receiving = Vec::new();
    for (i, t) in trains.iter().enumerate() {
        let x = f(&t["train"]).unwrap_or(i as f64);
        if let Some(y) = get(t, "target_bps", "target_rate") {
            target.push((x, y));
        }
        if let Some(y) = get(t, "sending_bps", "sending_rate") {
            sending.push((x, y));
        }
        if let Some(y) = get(t, "receiving_bps", "receiving_rate") {
            receiving.push((x, y));
        }
    }
    if target.is_empty() && receiving.is_empty() {
        return None;
    }
    Some(Plot {
        name: "trace".into(),
        title,
        caption: "Each train's rate as asked, as sent (sender's stamps) and as received (receiver's stamps): the method's search converging.".into(),
        x_label: "train".into(),
        y_label: "rate (Mb/s)".into(),
        series: vec![
            Series { name: "target".into(), points: target, style: Style::LinePoints },
            Series { name: "sent".into(), points: sending, style: Style::LinePoints },
            Series { name: "received".into(), points: receiving, style: Style::LinePoints },
        ],
        bars: vec![],
        integer_x: true,
    })
}

/// Lab runs: each estimate (with its bounds) beside the truth over its window.
fn estimate_vs_truth(runs: &[Value]) -> Option<Plot> {
    let mut est = Vec::new();
    let mut truth = Vec::new();
    let mut bars = Vec::new();
    for (i, r) in runs.iter().enumerate() {
        let x = f(&r["run"]).unwrap_or(i as f64);
        let Some(e) = mbps(&r["estimate_bps"]) else {
            continue;
        };
        est.push((x, e));
        if let Some(t) = mbps(&r["truth_bps"]) {
            truth.push((x, t));
        }
        let low = mbps(&r["estimate_low_bps"]).unwrap_or(e);
        if let Some(high) = mbps(&r["estimate_high_bps"]) {
            bars.push((x, low, high));
        }
    }
    if est.is_empty() {
        return None;
    }
    Some(Plot {
        name: "estimate-vs-truth".into(),
        title: "Estimate vs truth per run".into(),
        caption: "Available bandwidth as estimated (bars: the method's bounds) and the ground truth over each estimate's own window (IP layer).".into(),
        x_label: "run".into(),
        y_label: "available bandwidth (Mb/s)".into(),
        series: vec![
            Series { name: "estimate".into(), points: est, style: Style::LinePoints },
            Series { name: "truth".into(), points: truth, style: Style::LinePoints },
        ],
        bars,
        integer_x: true,
    })
}

/// The bottleneck qdisc's counters as a rate over each sampling interval.
fn truth_series(result: &Value) -> Option<Plot> {
    let s = result["qdisc_series"].as_array()?;
    let mut pts = Vec::new();
    let t0 = f(&s.first()?["at_ns"])?;
    for w in s.windows(2) {
        let (a, b) = (&w[0], &w[1]);
        let (ta, tb) = (f(&a["at_ns"])?, f(&b["at_ns"])?);
        let (ba, bb) = (f(&a["bytes"])?, f(&b["bytes"])?);
        if tb > ta && bb >= ba {
            pts.push(((tb - t0) / 1e9, (bb - ba) * 8.0 / ((tb - ta) / 1e9) / 1e6));
        }
    }
    if pts.is_empty() {
        return None;
    }
    let mut series = vec![Series {
        name: "bottleneck carried (cross + probes, L2)".into(),
        points: pts.clone(),
        style: Style::Line,
    }];
    if let Some(c) = mbps(&result["lab"]["capacity"]) {
        let (x0, x1) = (pts[0].0, pts[pts.len() - 1].0);
        series.push(Series {
            name: "capacity (tbf rate, L2)".into(),
            points: vec![(x0, c), (x1, c)],
            style: Style::Line,
        });
    }
    Some(Plot {
        name: "truth-series".into(),
        title: "Bottleneck truth series".into(),
        caption: "What the tight link's qdisc sent in each sampling interval (tc counters, L2 bytes), over the whole lab run.".into(),
        x_label: "time since the lab started (s)".into(),
        y_label: "rate (Mb/s)".into(),
        series,
        bars: vec![],
        integer_x: false,
    })
}

/// Relative one-way delay of every probe of one run's observations.
fn owd_plot(observations: &[Value], which: &str) -> Option<Plot> {
    let mut per_train: Vec<Vec<(f64, f64)>> = Vec::new();
    let mut first_sent = f64::INFINITY;
    let mut min_owd = f64::INFINITY;
    let mut raw = Vec::new();
    for o in observations {
        let mut pts = Vec::new();
        for p in o["packets"].as_array().into_iter().flatten() {
            let (Some(s), Some(r)) = (f(&p["sent"]), f(&p["received"])) else {
                continue;
            };
            first_sent = first_sent.min(s);
            min_owd = min_owd.min(r - s);
            pts.push((s, r - s));
        }
        raw.push(pts);
    }
    for pts in raw {
        per_train.push(
            pts.into_iter()
                .map(|(s, d)| ((s - first_sent) / 1e9, (d - min_owd) / 1e6))
                .collect(),
        );
    }
    if per_train.iter().all(Vec::is_empty) {
        return None;
    }
    // Alternate two colours train by train so the trains stand apart.
    let mut even = Vec::new();
    let mut odd = Vec::new();
    for (i, t) in per_train.into_iter().enumerate() {
        if i % 2 == 0 {
            even.extend(t)
        } else {
            odd.extend(t)
        }
    }
    Some(Plot {
        name: "owd".into(),
        title: format!("Relative one-way delay of every probe{which}"),
        caption: "Each probe's arrival minus send time, less the smallest seen (the clocks' offset cancels): delay rising within a train means the train outran the available bandwidth.".into(),
        x_label: "send time since the first probe (s)".into(),
        y_label: "relative one-way delay (ms)".into(),
        series: vec![
            Series { name: "even trains".into(), points: even, style: Style::Points },
            Series { name: "odd trains".into(), points: odd, style: Style::Points },
        ],
        bars: vec![],
        integer_x: false,
    })
}

/// Every picture an archived run supports.
pub fn plots(result: &Value, raw: Option<&Value>) -> Vec<Plot> {
    let mut out = Vec::new();
    if let Some(runs) = result["runs"].as_array() {
        out.extend(estimate_vs_truth(runs));
        if let Some(tr) = runs.first().and_then(|r| r["trace"].as_array()) {
            out.extend(trace_plot(tr, "Convergence trace (run 0)".into()));
        }
        out.extend(truth_series(result));
    } else if let Some(trains) = result["trains"].as_array() {
        out.extend(trace_plot(trains, "Convergence trace".into()));
    }
    if let Some(first) = raw
        .and_then(|r| r["runs"].as_array())
        .and_then(|r| r.first())
    {
        if let Some(obs) = first["observations"].as_array() {
            let which = if result["runs"].is_array() {
                format!(" (run {})", first["run"])
            } else {
                String::new()
            };
            out.extend(owd_plot(obs, &which));
        }
    }
    out
}

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

/// Draws `p` on any plotters backend.
pub fn draw<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, p: &Plot) -> Result<(), String> {
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    root.fill(&WHITE).map_err(e)?;
    let ((x0, x1), (y0, y1)) = bounds(p);
    let mut chart = ChartBuilder::on(root)
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
        .x_desc(p.x_label.as_str())
        .y_desc(p.y_label.as_str())
        .label_style(("sans-serif", 14))
        .draw()
        .map_err(e)?;
    for (i, s) in p.series.iter().enumerate() {
        if s.points.is_empty() {
            continue;
        }
        let c = COLORS[i % COLORS.len()];
        let line = matches!(s.style, Style::Line | Style::LinePoints);
        let dots = matches!(s.style, Style::Points | Style::LinePoints);
        if line {
            chart
                .draw_series(LineSeries::new(s.points.iter().copied(), c.stroke_width(2)))
                .map_err(e)?
                .label(s.name.as_str())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(2))
                });
        }
        if dots {
            let r = if line { 3 } else { 2 };
            let a = chart
                .draw_series(s.points.iter().map(|&q| Circle::new(q, r, c.filled())))
                .map_err(e)?;
            if !line {
                a.label(s.name.as_str())
                    .legend(move |(x, y)| Circle::new((x + 9, y), 3, c.filled()));
            }
        }
    }
    let bar = COLORS[0].mix(0.6);
    chart
        .draw_series(
            p.bars
                .iter()
                .map(|&(x, lo, hi)| PathElement::new(vec![(x, lo), (x, hi)], bar.stroke_width(2))),
        )
        .map_err(e)?;
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 14))
        .position(SeriesLabelPosition::LowerRight)
        .draw()
        .map_err(e)?;
    root.present().map_err(e)
}

/// The picture as an SVG document.
pub fn svg(p: &Plot) -> Result<String, String> {
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
pub fn png(p: &Plot, path: &Path) -> Result<(), String> {
    ensure_font()?;
    let root = BitMapBackend::new(path, SIZE).into_drawing_area();
    draw(&root, p)
}
