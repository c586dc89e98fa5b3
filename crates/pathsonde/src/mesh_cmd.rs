//! `pathsonde mesh --archive URL [--json] [--html FILE]`: the latest
//! result of every source→destination pair a fleet measured (runs of kind
//! `mesh`, written by `agent --mesh`), as a matrix (docs/fleet.md).
//!
//! This module reads the archive and picks the cells; drawing them (text,
//! JSON, the HTML heat map) is `pathsonde_render::mesh_view`'s.  It reads any
//! archive, SQLite or PostgreSQL, and creates nothing.

use crate::archive_cmd::{archive_failure, archive_location};
use crate::{output, Failure};
use clap::Args;
use pathsonde_archive::Archive;
use pathsonde_render::mesh_view;
pub use pathsonde_render::mesh_view::{Cell, Matrix, Skipped};
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::PathBuf;

#[derive(Args)]
pub struct MeshArgs {
    #[command(flatten)]
    pub json: crate::args::JsonFlags,
    #[command(flatten)]
    pub archive: crate::args::ArchiveFlag,
    /// Also write a self-contained HTML heat map of the matrix here.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// How many of the newest mesh runs to look through for each pair's latest.
    #[arg(long, default_value_t = 10_000, value_name = "N")]
    pub scan: usize,
}

/// A run's verdict from its result JSON.
fn verdict(result: &Value) -> String {
    if result["available_is_host_limit"].as_bool() == Some(true) {
        "host-limited".into()
    } else if result["converged"].as_bool() == Some(false) {
        "not-converged".into()
    } else {
        "ok".into()
    }
}

fn rtt(result: &Value) -> Option<f64> {
    result["rtt_echo_s"]["median"]
        .as_f64()
        .or_else(|| result["rtt_s"]["median"].as_f64())
}

/// The latest run of each pair among the newest `scan` mesh runs.
pub fn matrix(
    archive: Option<&mut Archive>,
    shown: String,
    scan: usize,
) -> Result<Matrix, Failure> {
    let mut m = Matrix {
        archive: shown,
        hosts: Vec::new(),
        pairs: Vec::new(),
        skips: Vec::new(),
    };
    let Some(a) = archive else {
        return Ok(m);
    };
    let mut seen = BTreeSet::new();
    let mut hosts = BTreeSet::new();
    for s in a.list(scan, Some("mesh")).map_err(archive_failure)? {
        let Some((src, dst)) = s.target.split_once("->") else {
            continue;
        };
        if !seen.insert((src.to_string(), dst.to_string())) {
            continue;
        }
        hosts.insert(src.to_string());
        hosts.insert(dst.to_string());
        let stored = a.get(s.id).map_err(archive_failure)?;
        let r = &stored.result;
        m.pairs.push(Cell {
            source: src.into(),
            destination: dst.into(),
            run_id: s.id,
            started_unix_ms: s.started_unix_ms,
            method: s.method.clone(),
            available_bps: r["available_bps"].as_f64(),
            capacity_bps: r["capacity_bps"].as_f64(),
            rtt_s: rtt(r),
            verdict: verdict(r),
            summary: s.summary.clone(),
        });
    }
    m.hosts = hosts.into_iter().collect();
    m.pairs.sort_by(|a, b| {
        (a.source.as_str(), a.destination.as_str())
            .cmp(&(b.source.as_str(), b.destination.as_str()))
    });
    Ok(m)
}

/// The skips per pair of the PostgreSQL archive at `url`, read without
/// creating anything (none when the archive predates the fleet's tables).
fn skips(url: &str) -> Result<Vec<Skipped>, Failure> {
    let fail = |e: String| Failure {
        exit: crate::exit::Exit::Internal,
        message: format!("reading skips: {e}"),
    };
    let mut c = pathsonde_archive::connect_postgres(url).map_err(archive_failure)?;
    let has = c
        .query_one("SELECT to_regclass('skips') IS NOT NULL", &[])
        .and_then(|r| r.try_get::<_, bool>(0))
        .map_err(|e| fail(e.to_string()))?;
    if !has {
        return Ok(Vec::new());
    }
    let rows = c
        .query(
            "SELECT DISTINCT ON (source, destination) source, destination,
                    count(*) OVER (PARTITION BY source, destination), scheduled_unix_ms, reason
             FROM skips ORDER BY source, destination, scheduled_unix_ms DESC",
            &[],
        )
        .map_err(|e| fail(e.to_string()))?;
    rows.iter()
        .map(|r| {
            Ok(Skipped {
                source: r.try_get(0)?,
                destination: r.try_get(1)?,
                count: r.try_get(2)?,
                last_unix_ms: r.try_get(3)?,
                last_reason: r.try_get(4)?,
            })
        })
        .collect::<Result<_, pathsonde_archive::postgres::Error>>()
        .map_err(|e| fail(e.to_string()))
}

pub fn run(args: &MeshArgs) -> Result<(), Failure> {
    let location = archive_location()?;
    let mut archive = Archive::open_existing(&location).map_err(archive_failure)?;
    let mut m = matrix(archive.as_mut(), location.to_string(), args.scan)?;
    if archive.is_some() && location.is_postgres() {
        let url = location.as_ref().to_str().expect("a URL is text");
        m.skips = skips(url)?;
        let mut hosts: BTreeSet<String> = m.hosts.iter().cloned().collect();
        for s in &m.skips {
            hosts.insert(s.source.clone());
            hosts.insert(s.destination.clone());
        }
        m.hosts = hosts.into_iter().collect();
    }
    if let Some(path) = &args.html {
        std::fs::write(path, mesh_view::html(&m)).map_err(|e| Failure {
            exit: crate::exit::Exit::Internal,
            message: format!("writing {}: {e}", path.display()),
        })?;
        output::event("html", serde_json::json!({ "path": path }));
    }
    let mut value = serde_json::to_value(&m).expect("the matrix is JSON");
    if let (Some(path), Some(o)) = (&args.html, value.as_object_mut()) {
        o.insert("html".into(), serde_json::json!(path));
    }
    output::result(&value, || {
        let mut s = mesh_view::text(&m);
        if let Some(p) = &args.html {
            s.push_str(&format!("heat map written to {}\n", p.display()));
        }
        s
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn verdicts_read_the_result() {
        assert_eq!(verdict(&json!({ "converged": true })), "ok");
        assert_eq!(verdict(&json!({ "converged": false })), "not-converged");
        assert_eq!(
            verdict(&json!({ "converged": true, "available_is_host_limit": true })),
            "host-limited"
        );
        assert_eq!(
            rtt(&json!({ "rtt_s": { "median": 0.002 }, "rtt_echo_s": null })),
            Some(0.002)
        );
        assert_eq!(
            rtt(&json!({ "rtt_s": { "median": 0.002 }, "rtt_echo_s": { "median": 0.001 } })),
            Some(0.001)
        );
    }
}
