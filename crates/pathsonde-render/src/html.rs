//! `pathsonde report ID --html FILE`: one self-contained page per archived
//! run — the run's facts, its headline figures, its main table, every plot
//! as inline SVG, and the full result — with no external fetch of any kind
//! (a Content-Security-Policy of `default-src 'none'` says so to the
//! browser, which then refuses anything else).  A few lines of inline script
//! count the plots the browser actually laid out and put the count on
//! `<body data-plots-drawn=…>`, which the browser test reads.

use crate::plot::{self, Plot};
use crate::view;
use pathsonde_archive::Stored;
use std::fmt::Write;

/// `s` with `&`, `<`, `>`, `"` and `'` escaped, for HTML text and attribute
/// values (every string from a result goes through it).
pub fn escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

/// Strips the XML declaration so the SVG can sit inside HTML.
fn inline_svg(svg: &str) -> &str {
    match svg.find("<svg") {
        Some(i) => &svg[i..],
        None => svg,
    }
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1000px;color:#222;padding:0 1em}\
table{border-collapse:collapse;margin:1em 0;font-size:0.9em}\
td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}\
section.card{border:1px solid #ccd;border-radius:6px;padding:.6em 1em;margin:1em 0;background:#f7f9ff}\
p.answer{font-size:1.4em;font-weight:600;margin:.2em 0}\
th{background:#f3f3f3}td.k{text-align:left;font-weight:600}table.meta td,table.headline td{text-align:left}\
figure{margin:1.5em 0}figure svg{max-width:100%;height:auto;border:1px solid #eee}\
figcaption{font-size:0.9em;color:#555}div.scroll{overflow-x:auto}pre{background:#f7f7f7;padding:1em;overflow:auto;font-size:0.8em}";

const SCRIPT: &str = "(function(){\
var figs=document.querySelectorAll('figure.plot');var drawn=0;\
figs.forEach(function(f){var s=f.querySelector('svg');if(!s)return;var b=s.getBBox();if(b.width>0&&b.height>0)drawn++;});\
document.body.setAttribute('data-plots-drawn',String(drawn));\
var card=document.getElementById('headline');var r=card?card.getBoundingClientRect():null;\
document.body.setAttribute('data-headline',r&&r.width>0&&r.height>0&&r.top<window.innerHeight?'visible':'hidden');\
if(drawn!==figs.length){console.error('pathsonde report: '+(figs.length-drawn)+' plot(s) did not render');}\
})();";

/// A key as a person reads it: `general.available.available_low_bps` →
/// `general › available › available low` (the unit goes to the value).
fn label(key: &str) -> String {
    key.split('.')
        .map(|part| {
            let bare = ["_bps", "_bytes", "_s", "_ns"]
                .iter()
                .find_map(|u| part.strip_suffix(u))
                .unwrap_or(part);
            bare.replace('_', " ")
        })
        .collect::<Vec<_>>()
        .join(" › ")
}

/// The card a reader sees first: the run's answer in plain words.  For a
/// measurement of available bandwidth, A with its band (or "at least" when
/// nothing bounds it from above or a host bounded it), C and X when the
/// method inferred them, the RTT, the verdict and the advisory; for any
/// other run, its one-line summary.
fn headline_card(h: &mut String, stored: &Stored) {
    let r = &stored.result;
    let num = |k: &str| r.get(k).and_then(serde_json::Value::as_f64);
    let rate = |x: f64| pathsonde_core::BitRate::from_bps(x).to_string();
    let mut lines: Vec<String> = Vec::new();
    let host_limited = r.get("host_limited").and_then(serde_json::Value::as_str);
    if let Some(a) = num("available_bps") {
        let bound = host_limited.is_some() || num("available_high_bps").is_none();
        lines.push(
            match (bound, num("available_low_bps"), num("available_high_bps")) {
                (false, Some(lo), Some(hi)) => format!(
                    "Available bandwidth {} (95 % band {} to {})",
                    rate(a),
                    rate(lo),
                    rate(hi)
                ),
                _ => format!("Available bandwidth at least {}", rate(a)),
            },
        );
        if let Some(c) = num("capacity_bps") {
            lines.push(format!("Capacity {}", rate(c)));
        }
        if let Some(x) = num("cross_traffic_bps") {
            lines.push(format!("Cross traffic {}", rate(x)));
        }
        let rtt = r
            .get("rtt_echo_s")
            .filter(|v| !v.is_null())
            .or_else(|| r.get("rtt_s"))
            .and_then(|v| v.get("median"))
            .and_then(serde_json::Value::as_f64);
        if let Some(t) = rtt {
            lines.push(format!(
                "Round-trip time {}",
                pathsonde_core::DurationNs::from_secs_f64(t)
            ));
        }
        lines.push(match host_limited {
            Some(why) => format!("Host-limited: {why}"),
            None => "The path, not the hosts, set this result.".into(),
        });
    } else if let Some(max) = num("max_ip_layer_capacity_bps") {
        // `capacity`: RFC 9097's maximum, when it was reached, and the
        // delay variation under that load.
        let at = num("max_time_s").map_or(String::new(), |t| {
            format!(" at {}", pathsonde_core::DurationNs::from_secs_f64(t))
        });
        lines.push(format!("Maximum IP-layer capacity {}{at}", rate(max)));
        if let Some(mean) = num("mean_ip_layer_capacity_bps") {
            lines.push(format!("Mean over the test {}", rate(mean)));
        }
        let summary = r.get("summary");
        let secs = |k: &str| {
            summary
                .and_then(|s| s.get(k))
                .and_then(serde_json::Value::as_f64)
                .map(|t| pathsonde_core::DurationNs::from_secs_f64(t).to_string())
        };
        if let (Some(lo), Some(hi)) = (secs("pdv_min_s"), secs("pdv_max_s")) {
            lines.push(format!("One-way delay variation under load {lo} to {hi}"));
        }
        if let Some(rtt) = secs("min_rtt_s") {
            lines.push(format!("Minimum round-trip time {rtt}"));
        }
        for note in r
            .get("notes")
            .and_then(serde_json::Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(serde_json::Value::as_str)
        {
            lines.push(format!("Note: {note}"));
        }
    } else if r.get("hops").is_some_and(serde_json::Value::is_array) {
        hops_lines(r, &mut lines);
    } else {
        lines.push(stored.summary.summary.clone());
    }
    let advisory: Vec<&str> = r
        .get("advisory")
        .and_then(serde_json::Value::as_array)
        .map(|a| a.iter().filter_map(serde_json::Value::as_str).collect())
        .unwrap_or_default();
    h.push_str("<section class=\"card\" id=\"headline\">\n");
    for (i, l) in lines.iter().enumerate() {
        let tag = if i == 0 { "p class=\"answer\"" } else { "p" };
        let _ = writeln!(h, "<{tag}>{}</p>", escape(l));
    }
    if !advisory.is_empty() {
        h.push_str("<ul class=\"advisory\">\n");
        for a in advisory {
            let _ = writeln!(h, "<li>{}</li>", escape(a));
        }
        h.push_str("</ul>\n");
    }
    h.push_str("</section>\n");
}

/// `hops`: which link limits the path, in words, then the narrow link, the
/// silent hops and the run's notes.
fn hops_lines(r: &serde_json::Value, lines: &mut Vec<String>) {
    use serde_json::Value;
    let rate = |v: &Value| {
        v.as_f64()
            .map(|x| pathsonde_core::BitRate::from_bps(x).to_string())
    };
    let hop = |ttl: &Value, addr: &Value| match (ttl.as_u64(), addr.as_str()) {
        (Some(0), _) => "this host".to_string(),
        (Some(n), Some(a)) => format!("TTL {n} ({a})"),
        (Some(n), None) => format!("TTL {n}"),
        (None, _) => "?".to_string(),
    };
    let t = &r["tight_link"];
    lines.push(match rate(&t["available_bps"]) {
        Some(a) => format!(
            "Tight link {} → {}: available about {a} ({} of {} trains agree)",
            hop(&t["from_ttl"], &t["from_address"]),
            hop(&t["to_ttl"], &t["to_address"]),
            t["agreeing"],
            t["considered"]
        ),
        None => "Tight link not found".into(),
    });
    let n = &r["narrow_link"];
    if let Some(c) = rate(&n["rate_bps"]) {
        lines.push(format!(
            "Narrow link {} → {}: capacity at least {c}",
            hop(&n["from_ttl"], &n["from_address"]),
            hop(&n["to_ttl"], &n["to_address"])
        ));
    }
    let silent: Vec<String> = r["silent"]
        .as_array()
        .into_iter()
        .flatten()
        .map(Value::to_string)
        .collect();
    if !silent.is_empty() {
        lines.push(format!("Silent hops: TTL {}", silent.join(", ")));
    }
    for note in r["notes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        lines.push(format!("Note: {note}"));
    }
}

/// The whole page.
pub fn report(stored: &Stored, plots: &[Plot]) -> Result<String, crate::PlotError> {
    let s = &stored.summary;
    let mut h = String::new();
    let title = format!("pathsonde run {} — {} {}", s.id, s.kind, s.target);
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{}</title><style>{STYLE}</style></head>\n<body data-plots=\"{}\">\n<h1>{}</h1>\n",
        escape(&title),
        plots.len(),
        escape(&title)
    );
    headline_card(&mut h, stored);
    h.push_str("<h2>Run</h2>\n<table class=\"meta\">\n");
    let raw = if s.raw.present {
        format!(
            "kept: {} bytes compressed ({} bytes of JSON)",
            s.raw.compressed_bytes.unwrap_or(0),
            s.raw.uncompressed_bytes.unwrap_or(0)
        )
    } else {
        s.raw.note.clone().unwrap_or_else(|| "none".into())
    };
    for (k, v) in [
        ("archive id", s.id.to_string()),
        ("command", s.kind.clone()),
        ("target", s.target.clone()),
        ("method", s.method.clone().unwrap_or_else(|| "-".into())),
        ("started", view::utc(s.started_unix_ms)),
        ("duration", format!("{:.2} s", s.duration_s)),
        ("summary", s.summary.clone()),
        ("software", stored.software.clone()),
        ("raw data", raw),
    ] {
        let _ = writeln!(
            h,
            "<tr><td class=\"k\">{}</td><td>{}</td></tr>",
            escape(k),
            escape(&v)
        );
    }
    h.push_str("</table>\n<h2>Result</h2>\n<table class=\"headline\">\n");
    for (k, v) in view::headline(&stored.result) {
        let _ = writeln!(
            h,
            "<tr><td class=\"k\" title=\"{}\">{}</td><td>{}</td></tr>",
            escape(&k),
            escape(&label(&k)),
            escape(&view::format_value(&k, &v))
        );
    }
    h.push_str("</table>\n");
    if let Some(t) = view::main_table(&stored.result) {
        let _ = writeln!(
            h,
            "<h2>{}</h2>\n<div class=\"scroll\"><table class=\"main\"><tr>",
            escape(&t.name)
        );
        for c in &t.columns {
            let _ = write!(h, "<th>{}</th>", escape(c));
        }
        h.push_str("</tr>\n");
        for r in &t.rows {
            h.push_str("<tr>");
            for (c, v) in t.columns.iter().zip(r) {
                let _ = write!(h, "<td>{}</td>", escape(&view::format_value(c, v)));
            }
            h.push_str("</tr>\n");
        }
        h.push_str("</table></div>\n");
    }
    h.push_str("<h2>Plots</h2>\n");
    if plots.is_empty() {
        h.push_str("<p>This run has nothing to plot.</p>\n");
    }
    for p in plots {
        let svg = plot::svg(p)?;
        let _ = writeln!(
            h,
            "<figure class=\"plot\" id=\"plot-{}\">{}<figcaption>{}</figcaption></figure>",
            escape(&p.name),
            inline_svg(&svg),
            escape(&p.caption)
        );
    }
    let pretty = serde_json::to_string_pretty(&stored.result).unwrap_or_default();
    let _ = writeln!(
        h,
        "<h2>Full result</h2>\n<details><summary>the command's JSON output</summary><pre>{}</pre></details>",
        escape(&pretty)
    );
    let _ = writeln!(h, "<script>{SCRIPT}</script>\n</body></html>");
    Ok(h)
}
