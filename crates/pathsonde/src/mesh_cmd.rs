//! `pathsonde mesh --archive URL [--json] [--html FILE]`: the latest
//! result of every source→destination pair a fleet measured (runs of kind
//! `mesh`, written by `agent --mesh`), as a matrix (docs/fleet.md).
//!
//! This module reads the archive and picks the cells; drawing them (text,
//! JSON, the HTML heat map) is [`crate::mesh_view`]'s.  It reads any
//! archive, SQLite or PostgreSQL, and creates nothing.

use crate::archive_cmd::{archive_failure, archive_location};
use crate::{mesh_view, output, Failure};
use clap::Args;
use pathsonde_archive::Archive;
use serde::Serialize;
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

/// One pair's latest result.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Cell {
    pub source: String,
    pub destination: String,
    /// The run (`pathsonde show ID`).
    pub run_id: i64,
    pub started_unix_ms: i64,
    pub method: Option<String>,
    pub available_bps: Option<f64>,
    pub capacity_bps: Option<f64>,
    /// Median round-trip time (probe echo, else control), seconds.
    pub rtt_s: Option<f64>,
    /// `ok`, `host-limited` (the estimate is a bound set by a host, not the
    /// path) or `not-converged` (the method stopped before its rule).
    pub verdict: String,
    pub summary: String,
}

/// The matrix: every host seen, and the cells that have a run.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Matrix {
    pub archive: String,
    pub hosts: Vec<String>,
    pub pairs: Vec<Cell>,
}

impl Matrix {
    pub fn cell(&self, source: &str, destination: &str) -> Option<&Cell> {
        self.pairs
            .iter()
            .find(|c| c.source == source && c.destination == destination)
    }
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

pub fn run(args: &MeshArgs) -> Result<(), Failure> {
    let location = archive_location()?;
    let mut archive = Archive::open_existing(&location).map_err(archive_failure)?;
    let m = matrix(archive.as_mut(), location.to_string(), args.scan)?;
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
