//! The schema and its migrations.
//!
//! `schema_version` holds one row per migration applied.  Migrations run in
//! order, each inside its own transaction together with the row recording it,
//! so a crash between two migrations leaves a consistent, older schema that
//! the next open carries forward.  Never edit a migration that has shipped:
//! append a new one.

use rusqlite::{Connection, Transaction};

/// The schema this pathsonde writes.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// Migration `i` takes the schema from version `i` to `i + 1`.
pub(crate) const MIGRATIONS: &[&str] = &[
    // 1: one row per measurement; the result is the command's `--json` object.
    "CREATE TABLE runs (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        kind TEXT NOT NULL,
        target TEXT NOT NULL,
        method TEXT,
        started_unix_ms INTEGER NOT NULL,
        duration_s REAL NOT NULL,
        summary TEXT NOT NULL,
        software TEXT NOT NULL,
        result_json TEXT NOT NULL
    );",
    // 2: raw data (observations, truth series) beside the result, compressed
    // and optional; a note says why a run has none.
    "CREATE TABLE raw (
        run_id INTEGER PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
        encoding TEXT NOT NULL,
        uncompressed_bytes INTEGER NOT NULL,
        data BLOB NOT NULL
    );
    ALTER TABLE runs ADD COLUMN raw_note TEXT;
    CREATE INDEX runs_started ON runs(started_unix_ms);",
];

pub(crate) fn current_version(conn: &Connection) -> rusqlite::Result<i64> {
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS schema_version (
            version INTEGER PRIMARY KEY,
            applied_unix_ms INTEGER NOT NULL
        );",
    )?;
    conn.query_row(
        "SELECT COALESCE(MAX(version), 0) FROM schema_version",
        [],
        |r| r.get(0),
    )
}

/// Applies migrations `from..` one transaction each.
pub(crate) fn migrate(conn: &mut Connection, from: i64, now_ms: i64) -> rusqlite::Result<()> {
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(from.max(0) as usize) {
        let tx: Transaction<'_> = conn.transaction()?;
        tx.execute_batch(sql)?;
        tx.execute(
            "INSERT INTO schema_version (version, applied_unix_ms) VALUES (?1, ?2)",
            (i as i64 + 1, now_ms),
        )?;
        tx.commit()?;
    }
    Ok(())
}

/// Creates a fresh archive at an older schema `version` (for migration tests).
#[doc(hidden)]
pub fn create_at_version(path: &std::path::Path, version: i64) -> rusqlite::Result<Connection> {
    let mut conn = Connection::open(path)?;
    current_version(&conn)?;
    let mut done = 0;
    for (i, sql) in MIGRATIONS.iter().enumerate().take(version.max(0) as usize) {
        let tx = conn.transaction()?;
        tx.execute_batch(sql)?;
        tx.execute(
            "INSERT INTO schema_version (version, applied_unix_ms) VALUES (?1, 0)",
            [i as i64 + 1],
        )?;
        tx.commit()?;
        done += 1;
    }
    debug_assert_eq!(done, version);
    Ok(conn)
}
