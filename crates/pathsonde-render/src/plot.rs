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
    /// A wide translucent line, drawn beneath the others: a series that
    /// would otherwise hide under one that follows it closely.
    Wide,
}

/// What the y axis measures; points are kept in base units (bits per
/// second, seconds) and the axis takes the unit that suits the data.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Quantity {
    Rate,
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
    /// What y is, without its unit ("rate"): the unit follows the data.
    pub y_label: String,
    pub y: Quantity,
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

fn f(v: &Value) -> Option<f64> {
    v.as_f64().filter(|x| x.is_finite())
}

/// A rate in bits per second.
fn bps(v: &Value) -> Option<f64> {
    f(v)
}

/// Convergence trace of a list of train records, whichever spelling
/// (`abw --json` uses `target_bps`, the lab's trace `target_rate`).
fn trace_plot(trains: &[Value], title: String) -> Option<Plot> {
    let get = |t: &Value, a: &str, b: &str| bps(&t[a]).or_else(|| bps(&t[b]));
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
        y_label: "rate".into(),
        y: Quantity::Rate,
        series: vec![
            Series { name: "sent".into(), points: sending, style: Style::Wide },
            Series { name: "target".into(), points: target, style: Style::LinePoints },
            Series { name: "received".into(), points: receiving, style: Style::LinePoints },
        ],
        bars: vec![],
        integer_x: true,
        x: None,
    })
}

/// Lab runs: each estimate (with its bounds) beside the truth over its window.
fn estimate_vs_truth(runs: &[Value]) -> Option<Plot> {
    let mut est = Vec::new();
    let mut truth = Vec::new();
    let mut bars = Vec::new();
    for (i, r) in runs.iter().enumerate() {
        let x = f(&r["run"]).unwrap_or(i as f64);
        let Some(e) = bps(&r["estimate_bps"]) else {
            continue;
        };
        est.push((x, e));
        if let Some(t) = bps(&r["truth_bps"]) {
            truth.push((x, t));
        }
        let low = bps(&r["estimate_low_bps"]).unwrap_or(e);
        if let Some(high) = bps(&r["estimate_high_bps"]) {
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
        y_label: "available bandwidth".into(),
        y: Quantity::Rate,
        series: vec![
            Series { name: "estimate".into(), points: est, style: Style::LinePoints },
            Series { name: "truth".into(), points: truth, style: Style::LinePoints },
        ],
        bars,
        integer_x: true,
        x: None,
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
            pts.push(((tb - t0) / 1e9, (bb - ba) * 8.0 / ((tb - ta) / 1e9)));
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
    if let Some(c) = bps(&result["lab"]["capacity"]) {
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
        x_label: "time since the lab started".into(),
        y_label: "rate".into(),
        y: Quantity::Rate,
        series,
        bars: vec![],
        integer_x: false,
        x: Some(Quantity::Delay),
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
                .map(|(s, d)| ((s - first_sent) / 1e9, (d - min_owd) / 1e9))
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
        x_label: "send time since the first probe".into(),
        y_label: "relative one-way delay".into(),
        y: Quantity::Delay,
        series: vec![
            Series { name: "even trains".into(), points: even, style: Style::Points },
            Series { name: "odd trains".into(), points: odd, style: Style::Points },
        ],
        bars: vec![],
        integer_x: false,
        x: Some(Quantity::Delay),
    })
}

/// `capacity`: the delivered IP-layer rate and the delay variation under
/// that load, sub-interval by sub-interval.
fn capacity_plots(rows: &[Value]) -> Vec<Plot> {
    let time = |r: &Value| f(&r["time_s"]);
    let points = |key: &str| -> Vec<(f64, f64)> {
        rows.iter()
            .filter_map(|r| Some((time(r)?, f(&r[key])?)))
            .collect()
    };
    let mut out = Vec::new();
    let rate = points("ip_layer_capacity_bps");
    if !rate.is_empty() {
        out.push(Plot {
            name: "capacity".into(),
            title: "Delivered IP-layer rate per sub-interval".into(),
            caption: "What arrived in each sub-interval at the IP layer (RFC 9097); the maximum over them is the Maximum IP-Layer Capacity.".into(),
            x_label: "time since the first status feedback".into(),
            y_label: "rate".into(),
            y: Quantity::Rate,
            series: vec![Series { name: "delivered IP-layer rate".into(), points: rate, style: Style::LinePoints }],
            bars: vec![],
            integer_x: false,
            x: Some(Quantity::Delay),
        });
    }
    let series: Vec<Series> = [
        ("pdv_max_s", "one-way delay variation, max"),
        ("pdv_avg_s", "one-way delay variation, mean"),
        ("rtt_var_max_s", "RTT variation, max"),
    ]
    .iter()
    .map(|(k, name)| Series {
        name: (*name).into(),
        points: points(k),
        style: Style::LinePoints,
    })
    .filter(|s| !s.points.is_empty())
    .collect();
    if !series.is_empty() {
        out.push(Plot {
            name: "delay-variation".into(),
            title: "Delay variation under the test's load".into(),
            caption: "Above the test's smallest one-way delay and RTT, per sub-interval: how much queue the load built.".into(),
            x_label: "time since the first status feedback".into(),
            y_label: "delay variation".into(),
            y: Quantity::Delay,
            series,
            bars: vec![],
            integer_x: false,
            x: Some(Quantity::Delay),
        });
    }
    out
}

/// `hops`: each hop's rate as a bar (the rate back-to-back trains left it
/// at), with the tight link's available bandwidth as a line across, so the
/// hop where the rate falls and the link that limits the path are seen
/// together.
fn hops_plot(result: &Value) -> Option<Plot> {
    let hops = result["hops"].as_array()?;
    let bars: Vec<(f64, f64, f64)> = hops
        .iter()
        .filter_map(|h| Some((f(&h["ttl"])?, 0.0, bps(&h["rate_bps"])?)))
        .collect();
    if bars.is_empty() {
        return None;
    }
    let first = bars.iter().map(|b| b.0).fold(f64::INFINITY, f64::min);
    let last = bars.iter().map(|b| b.0).fold(f64::NEG_INFINITY, f64::max);
    let tight = &result["tight_link"];
    let mut series = vec![Series {
        name: "rate the back-to-back trains left each hop at".into(),
        points: bars.iter().map(|b| (b.0, b.2)).collect(),
        style: Style::Points,
    }];
    let mut caption = "Each hop's exit rate for back-to-back trains (bars).".to_string();
    if let (Some(a), Some(from), Some(to)) = (
        bps(&tight["available_bps"]),
        f(&tight["from_ttl"]),
        f(&tight["to_ttl"]),
    ) {
        series.push(Series {
            name: format!("tight link TTL {from} -> {to}: available about"),
            points: vec![(first - 0.5, a), (last + 0.5, a)],
            style: Style::Line,
        });
        caption.push_str(&format!(
            " The line is the available bandwidth bracketed at the tight link, TTL {from} -> {to}."
        ));
    }
    Some(Plot {
        name: "hops".into(),
        title: "Rate per hop".into(),
        caption,
        x_label: "hop (TTL)".into(),
        y_label: "rate".into(),
        y: Quantity::Rate,
        series,
        bars,
        integer_x: true,
        x: None,
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
    } else if let Some(rows) = result["sub_intervals"].as_array() {
        out.extend(capacity_plots(rows));
    } else if result["hops"].is_array() {
        out.extend(hops_plot(result));
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
pub fn draw<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, p: &Plot) -> Result<(), String> {
    use pathsonde_trace::plot::{legend_row, with_legend_strip, LegendEntry, Mark};
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
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
