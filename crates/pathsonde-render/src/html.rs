//! `pathsonde report ID --html FILE`: one self-contained page per archived
//! run — the run's facts, its headline figures, its main table, every plot
//! as inline SVG, and the full result — with no external fetch of any kind
//! (a Content-Security-Policy of `default-src 'none'` says so to the
//! browser, which then refuses anything else).  A few lines of inline script
//! count the plots the browser actually laid out and put the count on
//! `<body data-plots-drawn=…>`, which the browser test reads.

mod headline;

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

/// The card a reader sees first ([`headline`]): the answer, then the
/// advisory.
fn headline_card(h: &mut String, stored: &Stored) {
    let (lines, advisory) = headline::lines(stored);
    h.push_str("<section class=\"card\" id=\"headline\">\n");
    for (i, l) in lines.iter().enumerate() {
        let tag = if i == 0 { "p class=\"answer\"" } else { "p" };
        let _ = writeln!(h, "<{tag}>{}</p>", escape(l));
    }
    if !advisory.is_empty() {
        h.push_str("<ul class=\"advisory\">\n");
        for a in advisory {
            let _ = writeln!(h, "<li>{}</li>", escape(&a));
        }
        h.push_str("</ul>\n");
    }
    h.push_str("</section>\n");
}

/// The whole page.
pub fn report(stored: &Stored, plots: &[Plot]) -> Result<String, crate::DrawError> {
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
