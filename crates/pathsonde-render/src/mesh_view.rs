//! Drawing the mesh matrix (`pathsonde mesh`): a text table for the
//! terminal and a self-contained HTML heat map.  Rows are sources, columns
//! destinations; each cell is the pair's latest available bandwidth,
//! capacity, RTT and verdict.
//!
//! The heat map colours a cell by its available bandwidth relative to the
//! largest in the matrix (red low, green high), so a path that fell behind
//! its peers stands out at a glance; host-limited results are hatched,
//! since their number is a host's bound, not the path's.  The page needs
//! nothing from outside (a Content-Security-Policy of `default-src 'none'`,
//! as the run report), and its small script only records, on `<body>`,
//! what the browser laid out (the browser test reads it).
//!
//! [`read`] picks the cells from an archive.

pub mod read;

use crate::html::escape;
use pathsonde_core::{BitRate, DurationNs};
use serde::Serialize;
use std::fmt::Write;

/// One pair's latest result.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Cell {
    /// The host the test ran from.
    pub source: String,
    /// The host it measured to.
    pub destination: String,
    /// The run (`pathsonde show ID`).
    pub run_id: i64,
    /// When the run started, ms since the Unix epoch.
    pub started_unix_ms: i64,
    /// The method that measured it, when one is recorded.
    pub method: Option<String>,
    /// Available bandwidth, bits/s (IP layer).
    pub available_bps: Option<f64>,
    /// Capacity, bits/s, when the method inferred it.
    pub capacity_bps: Option<f64>,
    /// Median round-trip time (probe echo, else control), seconds.
    pub rtt_s: Option<f64>,
    /// `ok`, `host-limited` (the estimate is a bound set by a host, not the
    /// path) or `not-converged` (the method stopped before its rule).
    pub verdict: String,
    /// The run's one-line summary, as `history` prints it.
    pub summary: String,
}

/// The skips recorded for one pair (a PostgreSQL archive's `skips`).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Skipped {
    /// The host that was to run the test.
    pub source: String,
    /// The host it was to measure to.
    pub destination: String,
    /// How many slots were skipped.
    pub count: i64,
    /// When the latest was skipped, ms since the Unix epoch.
    pub last_unix_ms: i64,
    /// Why the latest was skipped.
    pub last_reason: String,
}

/// The matrix (read from the archive by `pathsonde mesh`): every host seen, the cells that have a run, and the skips.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Matrix {
    /// The archive read, as the matrix names it in its heading.
    pub archive: String,
    /// Every host seen as a source or a destination, sorted.
    pub hosts: Vec<String>,
    /// The pairs that have a run: each one's latest.
    pub pairs: Vec<Cell>,
    /// Per pair, how many slots were skipped and the latest reason (empty
    /// for a SQLite archive, which has no fleet).
    pub skips: Vec<Skipped>,
}

impl Matrix {
    /// The latest result from `source` to `destination`, if any.
    pub fn cell(&self, source: &str, destination: &str) -> Option<&Cell> {
        self.pairs
            .iter()
            .find(|c| c.source == source && c.destination == destination)
    }
}

fn rate(bps: Option<f64>) -> String {
    bps.map_or_else(
        || "–".into(),
        |b| format!("{:.1}", BitRate::from_mbps(b / 1e6)),
    )
}

fn rtt(s: Option<f64>) -> String {
    s.map_or_else(|| "–".into(), |s| DurationNs::from_secs_f64(s).to_string())
}

/// One line per cell's reading, for the text table.
fn cell_lines(c: Option<&Cell>) -> [String; 4] {
    match c {
        None => ["·".into(), String::new(), String::new(), String::new()],
        Some(c) => [
            format!("A {}", rate(c.available_bps)),
            format!("C {}", rate(c.capacity_bps)),
            format!("RTT {}", rtt(c.rtt_s)),
            c.verdict.clone(),
        ],
    }
}

/// The matrix as a text table, four lines per source (A, C, RTT, verdict).
pub fn text(m: &Matrix) -> String {
    let mut s = String::new();
    if m.pairs.is_empty() && m.skips.is_empty() {
        let _ = writeln!(
            s,
            "no mesh runs in {} (agents started with --mesh write them)",
            m.archive
        );
        return s;
    }
    let _ = writeln!(
        s,
        "latest per source → destination in {} ({} pair(s)):",
        m.archive,
        m.pairs.len()
    );
    let cells: Vec<Vec<[String; 4]>> = m
        .hosts
        .iter()
        .map(|src| {
            m.hosts
                .iter()
                .map(|dst| {
                    if src == dst {
                        ["—".into(), String::new(), String::new(), String::new()]
                    } else {
                        cell_lines(m.cell(src, dst))
                    }
                })
                .collect()
        })
        .collect();
    let first = m
        .hosts
        .iter()
        .map(|h| h.chars().count())
        .max()
        .unwrap_or(0)
        .max(4);
    let widths: Vec<usize> = (0..m.hosts.len())
        .map(|j| {
            cells
                .iter()
                .flat_map(|row| row[j].iter().map(|l| l.chars().count()))
                .chain(std::iter::once(m.hosts[j].chars().count()))
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut header = format!("{:<first$}", "from");
    for (h, w) in m.hosts.iter().zip(&widths) {
        let _ = write!(header, "  {h:<w$}");
    }
    s.push_str(header.trim_end());
    s.push('\n');
    for (src, row) in m.hosts.iter().zip(&cells) {
        for line in 0..4 {
            if line > 0 && row.iter().all(|c| c[line].is_empty()) {
                continue;
            }
            let label = if line == 0 { src.as_str() } else { "" };
            let mut l = format!("{label:<first$}");
            for (c, w) in row.iter().zip(&widths) {
                let _ = write!(l, "  {:<w$}", c[line]);
            }
            s.push_str(l.trim_end());
            s.push('\n');
        }
    }
    s.push_str("rows: source; columns: destination; A available, C capacity (when the method infers it), RTT median; `pathsonde show ID` for a run (--json has the ids)\n");
    for k in &m.skips {
        let _ = writeln!(
            s,
            "skipped {} -> {}: {} slot(s); latest: {}",
            k.source, k.destination, k.count, k.last_reason
        );
    }
    s
}

/// Red (0) to green (1), as an HSL colour.
fn heat(x: f64) -> String {
    format!("hsl({:.0}, 70%, 78%)", 120.0 * x.clamp(0.0, 1.0))
}

/// The matrix as a self-contained HTML page.
pub fn html(m: &Matrix) -> String {
    let max_a = m
        .pairs
        .iter()
        .filter_map(|c| c.available_bps)
        .fold(0.0_f64, f64::max);
    let mut t = String::new();
    let _ = write!(t, "<table id=\"matrix\"><thead><tr><th>from \\ to</th>");
    for h in &m.hosts {
        let _ = write!(t, "<th scope=\"col\">{}</th>", escape(h));
    }
    t.push_str("</tr></thead><tbody>\n");
    for src in &m.hosts {
        let _ = write!(t, "<tr><th scope=\"row\">{}</th>", escape(src));
        for dst in &m.hosts {
            match m.cell(src, dst) {
                _ if src == dst => t.push_str("<td class=\"self\">—</td>"),
                None => t.push_str("<td class=\"none\">no run</td>"),
                Some(c) => {
                    let x = match (c.available_bps, max_a > 0.0) {
                        (Some(a), true) => a / max_a,
                        _ => 0.0,
                    };
                    let class = if c.verdict == "ok" {
                        "cell"
                    } else {
                        "cell warn"
                    };
                    let _ = write!(
                        t,
                        "<td class=\"{class}\" style=\"background:{}\" data-source=\"{}\" \
                         data-destination=\"{}\" title=\"run {} ({})\"><span class=\"a\">{}</span>\
                         <span>C {}</span><span>RTT {}</span><span class=\"v\">{}</span></td>",
                        heat(x),
                        escape(&c.source),
                        escape(&c.destination),
                        c.run_id,
                        escape(&c.summary),
                        escape(&rate(c.available_bps)),
                        escape(&rate(c.capacity_bps)),
                        escape(&rtt(c.rtt_s)),
                        escape(&c.verdict),
                    );
                }
            }
        }
        t.push_str("</tr>\n");
    }
    t.push_str("</tbody></table>");
    if !m.skips.is_empty() {
        t.push_str("\n<h2>Skipped slots</h2>\n<ul id=\"skips\">");
        for k in &m.skips {
            let _ = write!(
                t,
                "<li>{} → {}: {} slot(s); latest: {}</li>",
                escape(&k.source),
                escape(&k.destination),
                k.count,
                escape(&k.last_reason)
            );
        }
        t.push_str("</ul>");
    }
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>pathsonde mesh</title>\n<style>{STYLE}</style></head>\n\
         <body data-pairs=\"{}\">\n<h1>pathsonde mesh</h1>\n\
         <p>Latest available bandwidth (A), capacity (C), RTT and verdict per source → destination, from {}. \
         Colour: A relative to the largest in the matrix ({}), red low, green high; hatched: not a plain path result.</p>\n\
         {t}\n<script>{SCRIPT}</script>\n</body></html>\n",
        m.pairs.len(),
        escape(&m.archive),
        escape(&rate(Some(max_a))),
    )
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}\
table{border-collapse:collapse}th,td{border:1px solid #bbb;padding:.4em .6em;text-align:left}\
td.cell span{display:block;font-size:.85em}td.cell span.a{font-size:1.05em;font-weight:600}\
td.warn{background-image:repeating-linear-gradient(45deg,transparent 0 6px,rgba(0,0,0,.08) 6px 12px)}\
td.self,td.none{color:#999;text-align:center}";

/// Records what the browser laid out: how many cells have a box and text,
/// and the first cell's text.
const SCRIPT: &str = "(function(){var c=document.querySelectorAll('td.cell'),n=0;\
for(var i=0;i<c.length;i++){var r=c[i].getBoundingClientRect();\
if(r.width>0&&r.height>0&&c[i].innerText.trim())n++;}\
document.body.setAttribute('data-cells-visible',String(n));\
if(c.length)document.body.setAttribute('data-first-cell',c[0].innerText.replace(/\\s+/g,' ').trim());})();";

#[cfg(test)]
mod tests {
    use super::*;

    fn matrix() -> Matrix {
        let cell = |s: &str, d: &str, a: f64, v: &str| Cell {
            source: s.into(),
            destination: d.into(),
            run_id: 7,
            started_unix_ms: 0,
            method: Some("fac2".into()),
            available_bps: Some(a),
            capacity_bps: None,
            rtt_s: Some(0.000_42),
            verdict: v.into(),
            summary: "A <b>".into(),
        };
        Matrix {
            archive: "postgresql://u@h/db".into(),
            hosts: vec!["a".into(), "b".into(), "c".into()],
            pairs: vec![
                cell("a", "b", 94.1e6, "ok"),
                cell("b", "a", 40e6, "host-limited"),
            ],
            skips: vec![Skipped {
                source: "c".into(),
                destination: "a".into(),
                count: 3,
                last_unix_ms: 0,
                last_reason: "server:a held by <b>".into(),
            }],
        }
    }

    #[test]
    fn the_text_table_has_a_row_per_source_and_every_reading() {
        let t = text(&matrix());
        assert!(t.contains("A 94.1 Mb/s"), "{t}");
        assert!(t.contains("RTT 420.000 µs"), "{t}");
        assert!(t.contains("host-limited"), "{t}");
        assert!(t.contains("C –"), "{t}");
        let header = t.lines().nth(1).unwrap();
        assert!(header.starts_with("from") && header.contains("  c"), "{t}");
        assert!(
            t.contains("skipped c -> a: 3 slot(s); latest: server:a held by <b>"),
            "{t}"
        );
        let empty = Matrix {
            pairs: vec![],
            skips: vec![],
            ..matrix()
        };
        assert!(text(&empty).starts_with("no mesh runs"));
    }

    #[test]
    fn the_page_is_self_contained_and_escapes_text() {
        let h = html(&matrix());
        assert!(h.contains("default-src 'none'"));
        assert!(h.contains("<span class=\"a\">94.1 Mb/s</span>"));
        assert!(h.contains("A &lt;b&gt;") && !h.contains("A <b>"));
        assert!(h.contains("hsl(120, 70%, 78%)"), "largest A is green");
        assert!(h.contains("class=\"cell warn\""));
        assert_eq!(h.matches("no run").count(), 4);
        assert!(h.contains("3 slot(s); latest: server:a held by &lt;b&gt;"));
    }
}
