//! The pictures of an archived run, read from its stored result and raw data
//! alone (no re-run): the convergence trace, estimates beside their truth,
//! the bottleneck's truth series, capacity's sub-intervals, the rate per hop,
//! and every probe's relative one-way delay.
//!
//! Which pictures a result supports is found by its shape (`runs`,
//! `trains`, `sub_intervals`, `hops`), as `show` finds its table.  The
//! fields each picture needs are then read through typed views
//! (`#[derive(Deserialize)]` structs below), not looked up by string key: a
//! field that was renamed or holds the wrong type is a [`PlotError`] naming
//! it, where a lookup by key gave an empty picture and no error.  A field
//! the producer writes as `null` when it has no value (an estimate's upper
//! bound, a lost packet's arrival) is an `Option` that must still be
//! present.

use crate::plot::{Plot, Quantity, Series, Style};
use serde::de::{Deserialize, Deserializer};
use serde_json::Value;

/// A field of an archived result that could not be read for a plot: where
/// (`result.runs[0]`) and what serde said (`missing field `estimate_bps``).
#[derive(Debug, thiserror::Error)]
#[error("cannot plot {at}: {source}")]
pub struct PlotError {
    /// The object that was being read, as a path from `result` or `raw`.
    pub at: String,
    /// The missing or mistyped field, in serde's words.
    #[source]
    pub source: serde_json::Error,
}

/// A number the producer writes as `null` when it has none (or when it was
/// not finite): the key must be there, its value may be `null`.  Used with
/// `deserialize_with`, which (unlike a bare `Option`) makes a missing key an
/// error.
fn nullable<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    Option::<f64>::deserialize(d)
}

/// Reads every element of `rows` as a `T`, naming the first that fails.
fn rows<'a, T: Deserialize<'a>>(rows: &'a [Value], at: &str) -> Result<Vec<T>, PlotError> {
    rows.iter()
        .enumerate()
        .map(|(i, v)| {
            T::deserialize(v).map_err(|source| PlotError {
                at: format!("{at}[{i}]"),
                source,
            })
        })
        .collect()
}

/// Reads one object as a `T`.
fn one<'a, T: Deserialize<'a>>(v: &'a Value, at: &str) -> Result<T, PlotError> {
    T::deserialize(v).map_err(|source| PlotError {
        at: at.into(),
        source,
    })
}

/// One train of a convergence trace: `abw --json`'s `trains` spell the rates
/// `*_bps`, a lab run's `trace` `*_rate`; both are bits per second.
#[derive(serde::Deserialize)]
struct TrainRow {
    #[serde(deserialize_with = "nullable")]
    train: Option<f64>,
    #[serde(alias = "target_rate", deserialize_with = "nullable")]
    target_bps: Option<f64>,
    #[serde(alias = "sending_rate", deserialize_with = "nullable")]
    sending_bps: Option<f64>,
    #[serde(alias = "receiving_rate", deserialize_with = "nullable")]
    receiving_bps: Option<f64>,
}

/// One lab run (`pathsonde_lab::run::RunRecord` as archived).
#[derive(serde::Deserialize)]
struct LabRunRow {
    #[serde(deserialize_with = "nullable")]
    run: Option<f64>,
    #[serde(deserialize_with = "nullable")]
    estimate_bps: Option<f64>,
    #[serde(deserialize_with = "nullable")]
    estimate_low_bps: Option<f64>,
    #[serde(deserialize_with = "nullable")]
    estimate_high_bps: Option<f64>,
    #[serde(deserialize_with = "nullable")]
    truth_bps: Option<f64>,
}

/// One sample of the bottleneck qdisc's counters.
#[derive(serde::Deserialize)]
struct QdiscRow {
    #[serde(deserialize_with = "nullable")]
    at_ns: Option<f64>,
    #[serde(deserialize_with = "nullable")]
    bytes: Option<f64>,
}

/// One capacity sub-interval (`pathsonde_core::capacity::SubIntervalRow`).
#[derive(serde::Deserialize)]
struct SubIntervalRow {
    #[serde(deserialize_with = "nullable")]
    time_s: Option<f64>,
    #[serde(deserialize_with = "nullable")]
    ip_layer_capacity_bps: Option<f64>,
    #[serde(deserialize_with = "nullable")]
    pdv_max_s: Option<f64>,
    #[serde(deserialize_with = "nullable")]
    pdv_avg_s: Option<f64>,
    #[serde(deserialize_with = "nullable")]
    rtt_var_max_s: Option<f64>,
}

/// One hop of `hops --json`.
#[derive(serde::Deserialize)]
struct HopRow {
    #[serde(deserialize_with = "nullable")]
    ttl: Option<f64>,
    #[serde(deserialize_with = "nullable")]
    rate_bps: Option<f64>,
}

/// `hops --json`'s `tight_link`, when one was found.
#[derive(serde::Deserialize)]
struct TightLink {
    #[serde(deserialize_with = "nullable")]
    available_bps: Option<f64>,
    #[serde(deserialize_with = "nullable")]
    from_ttl: Option<f64>,
    #[serde(deserialize_with = "nullable")]
    to_ttl: Option<f64>,
}

/// One run of the raw data (`pathsonde-raw/1`): its trains' packets.
#[derive(serde::Deserialize)]
struct RawRun {
    run: Value,
    observations: Vec<RawObservation>,
}

#[derive(serde::Deserialize)]
struct RawObservation {
    packets: Vec<RawPacket>,
}

/// One probe's send and arrival stamps (ns); a lost probe has no arrival.
#[derive(serde::Deserialize)]
struct RawPacket {
    #[serde(deserialize_with = "nullable")]
    sent: Option<f64>,
    #[serde(deserialize_with = "nullable")]
    received: Option<f64>,
}

/// Convergence trace of a list of train records.
fn trace_plot(trains: &[TrainRow], title: String) -> Option<Plot> {
    let mut target = Vec::new();
    let mut sending = Vec::new();
    let mut receiving = Vec::new();
    for (i, t) in trains.iter().enumerate() {
        let x = t.train.unwrap_or(i as f64);
        if let Some(y) = t.target_bps {
            target.push((x, y));
        }
        if let Some(y) = t.sending_bps {
            sending.push((x, y));
        }
        if let Some(y) = t.receiving_bps {
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
fn estimate_vs_truth(runs: &[LabRunRow]) -> Option<Plot> {
    let mut est = Vec::new();
    let mut truth = Vec::new();
    let mut bars = Vec::new();
    for (i, r) in runs.iter().enumerate() {
        let x = r.run.unwrap_or(i as f64);
        let Some(e) = r.estimate_bps else {
            continue;
        };
        est.push((x, e));
        if let Some(t) = r.truth_bps {
            truth.push((x, t));
        }
        let low = r.estimate_low_bps.unwrap_or(e);
        if let Some(high) = r.estimate_high_bps {
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

/// The bottleneck qdisc's counters as a rate over each sampling interval;
/// `capacity` is the lab's tight link (its `lab.capacity`), drawn across.
fn truth_series(s: &[QdiscRow], capacity: Option<f64>) -> Option<Plot> {
    let mut pts = Vec::new();
    let t0 = s.first()?.at_ns?;
    for w in s.windows(2) {
        let (a, b) = (&w[0], &w[1]);
        let (ta, tb) = (a.at_ns?, b.at_ns?);
        let (ba, bb) = (a.bytes?, b.bytes?);
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
    if let Some(c) = capacity {
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
fn owd_plot(observations: &[RawObservation], which: &str) -> Option<Plot> {
    let mut per_train: Vec<Vec<(f64, f64)>> = Vec::new();
    let mut first_sent = f64::INFINITY;
    let mut min_owd = f64::INFINITY;
    let mut raw = Vec::new();
    for o in observations {
        let mut pts = Vec::new();
        for p in &o.packets {
            let (Some(s), Some(r)) = (p.sent, p.received) else {
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

/// One column of the sub-interval table.
type Field = fn(&SubIntervalRow) -> Option<f64>;

/// `capacity`: the delivered IP-layer rate and the delay variation under
/// that load, sub-interval by sub-interval.
fn capacity_plots(rows: &[SubIntervalRow]) -> Vec<Plot> {
    let points = |key: Field| -> Vec<(f64, f64)> {
        rows.iter()
            .filter_map(|r| Some((r.time_s?, key(r)?)))
            .collect()
    };
    let mut out = Vec::new();
    let rate = points(|r| r.ip_layer_capacity_bps);
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
    let variation: [(Field, &str); 3] = [
        (|r| r.pdv_max_s, "one-way delay variation, max"),
        (|r| r.pdv_avg_s, "one-way delay variation, mean"),
        (|r| r.rtt_var_max_s, "RTT variation, max"),
    ];
    let series: Vec<Series> = variation
        .iter()
        .map(|(k, name)| Series {
            name: (*name).into(),
            points: points(*k),
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
fn hops_plot(hops: &[HopRow], tight: Option<&TightLink>) -> Option<Plot> {
    let bars: Vec<(f64, f64, f64)> = hops
        .iter()
        .filter_map(|h| Some((h.ttl?, 0.0, h.rate_bps?)))
        .collect();
    if bars.is_empty() {
        return None;
    }
    let first = bars.iter().map(|b| b.0).fold(f64::INFINITY, f64::min);
    let last = bars.iter().map(|b| b.0).fold(f64::NEG_INFINITY, f64::max);
    let mut series = vec![Series {
        name: "rate the back-to-back trains left each hop at".into(),
        points: bars.iter().map(|b| (b.0, b.2)).collect(),
        style: Style::Points,
    }];
    let mut caption = "Each hop's exit rate for back-to-back trains (bars).".to_string();
    if let Some(TightLink {
        available_bps: Some(a),
        from_ttl: Some(from),
        to_ttl: Some(to),
    }) = tight
    {
        series.push(Series {
            name: format!("tight link TTL {from} -> {to}: available about"),
            points: vec![(first - 0.5, *a), (last + 0.5, *a)],
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

/// The lab's tight-link capacity of a lab run's result, when it has one.
#[derive(serde::Deserialize)]
struct LabFacts {
    #[serde(default, deserialize_with = "nullable")]
    capacity: Option<f64>,
}

/// Every picture an archived run supports, from its `result` and its raw
/// data.  `kind` is the run's command as archived: a `lab-capacity` run's
/// `runs` are capacity tests, not estimates, so only its truth series is
/// drawn; every other kind is read by shape.  An empty list means the run
/// has nothing to draw; an error names the field that could not be read.
pub fn plots(kind: &str, result: &Value, raw: Option<&Value>) -> Result<Vec<Plot>, PlotError> {
    let mut out = Vec::new();
    if let Some(runs) = result["runs"].as_array() {
        if kind != "lab-capacity" {
            let rows: Vec<LabRunRow> = self::rows(runs, "result.runs")?;
            out.extend(estimate_vs_truth(&rows));
            if let Some(tr) = runs.first().and_then(|r| r["trace"].as_array()) {
                let trains: Vec<TrainRow> = self::rows(tr, "result.runs[0].trace")?;
                out.extend(trace_plot(&trains, "Convergence trace (run 0)".into()));
            }
        }
        if let Some(s) = result["qdisc_series"].as_array() {
            let samples: Vec<QdiscRow> = self::rows(s, "result.qdisc_series")?;
            let lab: Option<LabFacts> = one(&result["lab"], "result.lab")?;
            out.extend(truth_series(&samples, lab.and_then(|l| l.capacity)));
        }
    } else if let Some(trains) = result["trains"].as_array() {
        let trains: Vec<TrainRow> = self::rows(trains, "result.trains")?;
        out.extend(trace_plot(&trains, "Convergence trace".into()));
    } else if let Some(r) = result["sub_intervals"].as_array() {
        let r: Vec<SubIntervalRow> = self::rows(r, "result.sub_intervals")?;
        out.extend(capacity_plots(&r));
    } else if let Some(hops) = result["hops"].as_array() {
        let hops: Vec<HopRow> = self::rows(hops, "result.hops")?;
        let tight: Option<TightLink> = one(&result["tight_link"], "result.tight_link")?;
        out.extend(hops_plot(&hops, tight.as_ref()));
    }
    if let Some(first) = raw
        .and_then(|r| r["runs"].as_array())
        .and_then(|r| r.first())
    {
        let first: RawRun = one(first, "raw.runs[0]")?;
        let which = if result["runs"].is_array() {
            format!(" (run {})", first.run)
        } else {
            String::new()
        };
        out.extend(owd_plot(&first.observations, &which));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn lab_result(run: Value) -> Value {
        json!({ "runs": [run], "qdisc_series": [], "lab": { "capacity": 3e8 } })
    }

    fn lab_run() -> Value {
        json!({
            "run": 0, "estimate_bps": 2e8, "estimate_low_bps": 1.9e8,
            "estimate_high_bps": null, "truth_bps": 2.1e8, "method": "fac2",
        })
    }

    /// A well-formed lab run gives its estimate-vs-truth picture; `null`
    /// where the producer has no value (the open upper bound) is no error.
    #[test]
    fn a_lab_run_is_drawn_beside_its_truth() {
        let p = plots("lab-run", &lab_result(lab_run()), None).unwrap();
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].name, "estimate-vs-truth");
        assert_eq!(p[0].series[0].points, vec![(0.0, 2e8)]);
        assert!(p[0].bars.is_empty());
    }

    /// A renamed field (`estimate_bps` → `estimate`) is refused with a
    /// message naming the field and the row, not drawn as an empty picture.
    #[test]
    fn a_renamed_required_field_is_refused_by_name() {
        let mut run = lab_run();
        let e = run.as_object_mut().unwrap().remove("estimate_bps").unwrap();
        run["estimate"] = e;
        let err = plots("lab-run", &lab_result(run), None).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("`estimate_bps`"), "{msg}");
        assert!(msg.contains("result.runs[0]"), "{msg}");
    }

    /// A field of the wrong type is an error too, and so is a renamed
    /// field in the raw data or in the trains of an `abw` result.
    #[test]
    fn mistyped_and_renamed_fields_elsewhere_are_refused() {
        let mut run = lab_run();
        run["truth_bps"] = json!("fast");
        let msg = plots("lab-run", &lab_result(run), None)
            .unwrap_err()
            .to_string();
        assert!(msg.contains("result.runs[0]"), "{msg}");

        let abw = json!({ "trains": [{ "train": 0, "target": 1e8, "sending_bps": 1e8, "receiving_bps": 9e7 }] });
        let msg = plots("abw", &abw, None).unwrap_err().to_string();
        assert!(
            msg.contains("`target_bps`") && msg.contains("result.trains[0]"),
            "{msg}"
        );

        let raw = json!({ "runs": [{ "run": 0, "observations": [{ "packets": [{ "sent": 1, "arrived": 2 }] }] }] });
        let msg = plots("lab-run", &lab_result(lab_run()), Some(&raw))
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains("`received`") && msg.contains("raw.runs[0]"),
            "{msg}"
        );
    }

    /// Both spellings of a trace's rates are read (`abw`'s `*_bps`, the
    /// lab trace's `*_rate`).
    #[test]
    fn both_spellings_of_a_trace_are_read() {
        let abw = json!({ "trains": [{ "train": 0, "target_bps": 1e8, "sending_bps": 1e8, "receiving_bps": null }] });
        let lab = json!({ "runs": [{ "run": 0, "estimate_bps": null, "estimate_low_bps": null,
            "estimate_high_bps": null, "truth_bps": null,
            "trace": [{ "train": 0, "target_rate": 1e8, "sending_rate": 1e8, "receiving_rate": null }] }] });
        for r in [abw, lab] {
            let p = plots("x", &r, None).unwrap();
            let trace = p.iter().find(|p| p.name == "trace").expect("a trace");
            assert_eq!(trace.series[1].points, vec![(0.0, 1e8)]);
        }
    }
}
