//! Reading the mesh matrix from an archive (`pathsonde mesh`): the latest
//! run of each source→destination pair among runs of kind `mesh` (written
//! by `agent --mesh`), and, from a PostgreSQL archive, the skips per pair.
//! Beside the drawing so the CLI only opens the archive and prints; it
//! reads any archive and creates nothing.

use super::{Cell, Matrix, Skipped};
use pathsonde_archive::{Archive, ArchiveError};
use serde_json::Value;
use std::collections::BTreeSet;

/// What reading the matrix can fail on.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// Opening or reading the archive's runs.
    #[error(transparent)]
    Archive(#[from] ArchiveError),
    /// Querying the `skips` table.
    #[error("reading skips: {0}")]
    Skips(#[source] pathsonde_archive::postgres::Error),
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

/// The matrix of `archive` (none: an archive that does not exist yet, so
/// an empty matrix) named `shown` in its heading: the latest run of each
/// pair among the newest `scan` mesh runs and, when `postgres_url` names
/// the same archive, its skips, whose hosts join the matrix's.
pub fn read(
    archive: Option<&mut Archive>,
    shown: String,
    scan: usize,
    postgres_url: Option<&str>,
) -> Result<Matrix, ReadError> {
    let has_archive = archive.is_some();
    let mut m = matrix(archive, shown, scan)?;
    if let (true, Some(url)) = (has_archive, postgres_url) {
        m.skips = skips(url)?;
        let mut hosts: BTreeSet<String> = m.hosts.iter().cloned().collect();
        for s in &m.skips {
            hosts.insert(s.source.clone());
            hosts.insert(s.destination.clone());
        }
        m.hosts = hosts.into_iter().collect();
    }
    Ok(m)
}

/// The latest run of each pair among the newest `scan` mesh runs.
fn matrix(archive: Option<&mut Archive>, shown: String, scan: usize) -> Result<Matrix, ReadError> {
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
    for s in a.list(scan, Some("mesh"))? {
        let Some((src, dst)) = s.target.split_once("->") else {
            continue;
        };
        if !seen.insert((src.to_string(), dst.to_string())) {
            continue;
        }
        hosts.insert(src.to_string());
        hosts.insert(dst.to_string());
        let stored = a.get(s.id)?;
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
fn skips(url: &str) -> Result<Vec<Skipped>, ReadError> {
    let mut c = pathsonde_archive::connect_postgres(url)?;
    let has = c
        .query_one("SELECT to_regclass('skips') IS NOT NULL", &[])
        .and_then(|r| r.try_get::<_, bool>(0))
        .map_err(ReadError::Skips)?;
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
        .map_err(ReadError::Skips)?;
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
        .map_err(ReadError::Skips)
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
