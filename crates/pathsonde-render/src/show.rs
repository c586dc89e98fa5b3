//! What `pathsonde history`, `show` and `export --format json` print of the
//! archive: the list of runs, one run's facts, headline figures and main
//! table, or the whole run as JSON.  The figures are read by shape
//! ([`crate::view`]), so any command's archived result shows without code
//! of its own here.  Also the line every archiving command ends with,
//! saying where its run went.

use crate::view;
use pathsonde_archive::{Location, Stored, Summary};
use serde_json::Value;
use std::fmt::{Display, Write as _};

/// `history`'s listing of `runs` (newest first) from the archive at `path`.
pub fn history_text(path: &impl Display, runs: &[Summary]) -> String {
    let mut t = String::new();
    if runs.is_empty() {
        let _ = writeln!(t, "no runs archived yet in {path}");
        return t;
    }
    let _ = writeln!(t, "archive {path}");
    let _ = writeln!(
        t,
        "{:>5}  {:<23}  {:<8} {:<7} {:<26} {:>8}  result",
        "id", "started", "command", "method", "target", "time"
    );
    for r in runs {
        let _ = writeln!(
            t,
            "{:>5}  {:<23}  {:<8} {:<7} {:<26} {:>7.1}s  {}{}",
            r.id,
            view::utc(r.started_unix_ms),
            r.kind,
            r.method.as_deref().unwrap_or("-"),
            r.target,
            r.duration_s,
            r.summary,
            if r.raw.present { "" } else { "  [no raw data]" }
        );
    }
    t
}

/// `show`'s text: the run's facts, its headline figures, its main table.
pub fn show_text(s: &Stored) -> String {
    let m = &s.summary;
    let mut t = String::new();
    let _ = writeln!(t, "run {}: {} {}", m.id, m.kind, m.target);
    let _ = writeln!(t, "started   {}", view::utc(m.started_unix_ms));
    let _ = writeln!(t, "duration  {:.2} s", m.duration_s);
    let _ = writeln!(t, "method    {}", m.method.as_deref().unwrap_or("-"));
    let _ = writeln!(t, "summary   {}", m.summary);
    let _ = writeln!(t, "software  {}", s.software);
    if let Some(agent) = &m.agent {
        // The database role that wrote it (a shared PostgreSQL archive).
        let _ = writeln!(t, "agent     {agent}");
    }
    let _ = writeln!(
        t,
        "raw data  {}",
        if m.raw.present {
            format!(
                "{} bytes compressed ({} bytes of JSON)",
                m.raw.compressed_bytes.unwrap_or(0),
                m.raw.uncompressed_bytes.unwrap_or(0)
            )
        } else {
            m.raw.note.clone().unwrap_or_else(|| "none".into())
        }
    );
    let _ = writeln!(t, "\n--- Result ---");
    let head = view::headline(&s.result);
    let w = head.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    for (k, v) in head {
        let _ = writeln!(t, "{k:<w$}  {}", view::format_value(&k, &v));
    }
    if let Some(tab) = view::main_table(&s.result) {
        let _ = writeln!(t, "\n--- {} ---", tab.name);
        let cells: Vec<Vec<String>> = tab
            .rows
            .iter()
            .map(|r| {
                tab.columns
                    .iter()
                    .zip(r)
                    .map(|(c, v)| view::format_value(c, v))
                    .collect()
            })
            .collect();
        let widths: Vec<usize> = tab
            .columns
            .iter()
            .enumerate()
            .map(|(i, c)| {
                cells
                    .iter()
                    .map(|r| r[i].chars().count())
                    .chain([c.len()])
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let line = |t: &mut String, row: &[String]| {
            let cols: Vec<String> = row
                .iter()
                .zip(&widths)
                .map(|(c, w)| format!("{c:>w$}"))
                .collect();
            let _ = writeln!(t, "{}", cols.join("  "));
        };
        line(&mut t, &tab.columns);
        for r in &cells {
            line(&mut t, r);
        }
    }
    let _ = writeln!(
        t,
        "\n(the full result: pathsonde show {} --json; pathsonde export {} --format json)",
        m.id, m.id
    );
    t
}

/// `export --format json`'s text: the run's facts and result with its raw
/// data (`raw_data`, null when there is none), one JSON object on a line.
pub fn export_json(s: &Stored, raw: Option<Value>) -> String {
    let mut v = serde_json::to_value(s).unwrap_or_default();
    if let Some(o) = v.as_object_mut() {
        o.insert("raw_data".into(), raw.unwrap_or(Value::Null));
    }
    format!("{v}\n")
}

/// Where run `id` went and how to look at it again.  An archive given with
/// `--archive` (or a config), `archive`, is named, and so is it in the
/// commands, which would otherwise read the default archive.
pub fn saved_hint(id: i64, archive: Option<&Location>) -> String {
    match archive {
        None => {
            format!("saved as run {id} (pathsonde show {id}; plot {id}; report {id} --html FILE)")
        }
        Some(p) => {
            let a = shell_word(&p.to_string());
            format!(
                "saved as run {id} in {a} (pathsonde show {id} --archive {a}; plot {id} and report {id} --html FILE with the same --archive)"
            )
        }
    }
}

/// `s` as one shell word: quoted when it holds anything but plain characters.
fn shell_word(s: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "/._-+:=@%,".contains(c);
    if !s.is_empty() && s.chars().all(plain) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}
