//! The SQLite store: one local file, WAL journal, `synchronous=FULL`.

use crate::record::{self, RawBlob, RunData, Stored, Summary};
use crate::schema::{Dialect, MIGRATIONS, SCHEMA_VERSION, VERSION_TABLE};
use crate::store::Store;
use crate::{ArchiveError, Result};
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// An open archive file.
pub struct SqliteStore {
    conn: Connection,
    path: PathBuf,
}

/// Refuses a database that is someone else's: one with tables, none of
/// them pathsonde's version table, or a file SQLite cannot read as a
/// database.  Only reads: a refused file keeps every byte (no journal mode
/// set, no table created).
fn refuse_foreign(conn: &Connection, path: &Path) -> Result<()> {
    let foreign = |why: String| ArchiveError::Foreign {
        path: path.display().to_string(),
        why,
    };
    let tables: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table'")
        .and_then(|mut st| {
            st.query_map([], |r| r.get::<_, String>(0))?
                .collect::<rusqlite::Result<Vec<_>>>()
        })
        .map_err(|e| match e.sqlite_error_code() {
            // Held by another pathsonde past the wait: locked, not foreign.
            Some(rusqlite::ErrorCode::DatabaseBusy) => ArchiveError::Sqlite {
                path: path.display().to_string(),
                source: e,
            },
            _ => foreign(e.to_string()),
        })?;
    if !tables.is_empty() && !tables.iter().any(|t| t == "schema_version") {
        let mut some = tables;
        some.truncate(3);
        return Err(foreign(format!("it holds tables {}", some.join(", "))));
    }
    Ok(())
}

/// How long an opener waits for another pathsonde holding the file.
const BUSY_WAIT: Duration = Duration::from_secs(15);

/// Switches the file to the WAL journal and returns the mode SQLite took.
///
/// The switch needs the file to itself, and SQLite answers "database is
/// locked" at once, without its busy handler, when another connection is
/// switching or reading it at that moment (six agents opening a new file
/// together hit this about one time in eight).  So the switch is retried,
/// with a short growing pause, for as long as the busy handler would have
/// waited.
fn wal_journal(conn: &Connection) -> rusqlite::Result<String> {
    let give_up = std::time::Instant::now() + BUSY_WAIT;
    let mut pause = Duration::from_millis(2);
    loop {
        match conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0)) {
            Err(rusqlite::Error::SqliteFailure(e, _))
                if e.code == rusqlite::ErrorCode::DatabaseBusy
                    && std::time::Instant::now() < give_up =>
            {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(100));
            }
            other => return other,
        }
    }
}

fn current_version(conn: &Connection) -> rusqlite::Result<i64> {
    conn.execute_batch(&Dialect::Sqlite.render(VERSION_TABLE))?;
    conn.query_row(
        "SELECT COALESCE(MAX(version), 0) FROM schema_version",
        [],
        |r| r.get(0),
    )
}

/// Applies the migrations the file lacks, up to version `to`, one
/// transaction each.  Each transaction takes the write lock first
/// (`BEGIN IMMEDIATE`) and reads the version under it, so two pathsondes
/// opening a new file at once (agents started together) apply each
/// migration once, one after the other, instead of both trying.
fn migrate(conn: &mut Connection, to: i64, now_ms: i64) -> rusqlite::Result<()> {
    loop {
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let found: i64 = tx.query_row(
            "SELECT COALESCE(MAX(version), 0) FROM schema_version",
            [],
            |r| r.get(0),
        )?;
        let Some(m) = MIGRATIONS.get(found.max(0) as usize).filter(|_| found < to) else {
            return tx.commit();
        };
        tx.execute_batch(&m.sql_for(Dialect::Sqlite))?;
        tx.execute(
            "INSERT INTO schema_version (version, applied_unix_ms) VALUES (?1, ?2)",
            (m.version, now_ms),
        )?;
        tx.commit()?;
    }
}

/// Creates a fresh SQLite archive at an older schema `version` (for
/// migration tests).
#[doc(hidden)]
pub fn create_at_version(path: &Path, version: i64) -> rusqlite::Result<Connection> {
    let mut conn = Connection::open(path)?;
    current_version(&conn)?;
    migrate(&mut conn, version, 0)?;
    Ok(conn)
}

const SUMMARY_COLUMNS: &str = "r.id, r.kind, r.target, r.method, r.started_unix_ms, r.duration_s, r.summary, r.raw_note, length(w.data), w.uncompressed_bytes, r.agent";

fn summary_of(row: &rusqlite::Row<'_>) -> rusqlite::Result<Summary> {
    Ok(Summary {
        id: row.get(0)?,
        kind: row.get(1)?,
        target: row.get(2)?,
        method: row.get(3)?,
        started_unix_ms: row.get(4)?,
        duration_s: row.get(5)?,
        summary: row.get(6)?,
        agent: row.get(10)?,
        raw: record::raw_info(row.get(8)?, row.get(9)?, row.get(7)?),
    })
}

impl SqliteStore {
    /// Opens the archive at `path`, creating the file if needed and
    /// bringing its schema up to `target` (normally [`SCHEMA_VERSION`]).
    /// A file that is not a pathsonde archive is refused before anything is
    /// written to it.
    pub(crate) fn open(path: &Path, target: i64) -> Result<SqliteStore> {
        let sq = |source| ArchiveError::Sqlite {
            path: path.display().to_string(),
            source,
        };
        let mut conn = Connection::open(path).map_err(sq)?;
        // Another pathsonde (the agent, a second shell) may be writing: wait
        // for it rather than fail.  Set before the first read, so a file
        // another opener holds for a moment is waited for, not called
        // foreign.
        conn.busy_timeout(BUSY_WAIT).map_err(sq)?;
        refuse_foreign(&conn, path)?;
        let mode = wal_journal(&conn).map_err(sq)?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(ArchiveError::Io {
                path: path.display().to_string(),
                message: format!("cannot use the WAL journal here (got {mode})"),
            });
        }
        conn.execute_batch("PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON;")
            .map_err(sq)?;
        let found = current_version(&conn).map_err(sq)?;
        if found > SCHEMA_VERSION {
            return Err(ArchiveError::TooNew {
                path: path.display().to_string(),
                found,
                supported: SCHEMA_VERSION,
            });
        }
        if found < target {
            migrate(&mut conn, target, record::now_ms()).map_err(sq)?;
        }
        Ok(SqliteStore {
            conn,
            path: path.to_path_buf(),
        })
    }

    fn sq(&self, source: rusqlite::Error) -> ArchiveError {
        ArchiveError::Sqlite {
            path: self.path.display().to_string(),
            source,
        }
    }

    fn insert_tx(&mut self, run: &RunData) -> rusqlite::Result<(i64, bool)> {
        // IMMEDIATE: the UUID check and the insert see one state of the file.
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        if let Some(uuid) = &run.run_uuid {
            let there: Option<i64> = tx
                .query_row("SELECT id FROM runs WHERE run_uuid = ?1", [uuid], |r| {
                    r.get(0)
                })
                .optional()?;
            if let Some(id) = there {
                return Ok((id, false));
            }
        }
        tx.execute(
            "INSERT INTO runs (kind, target, method, started_unix_ms, duration_s, summary, software, result_json, raw_note, agent, run_uuid)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
            params![
                run.kind,
                run.target,
                run.method,
                run.started_unix_ms,
                run.duration_s,
                run.summary,
                run.software,
                run.result_json,
                run.raw_note,
                run.agent,
                run.run_uuid
            ],
        )?;
        let id = tx.last_insert_rowid();
        if let Some(b) = &run.raw {
            tx.execute(
                "INSERT INTO raw (run_id, encoding, uncompressed_bytes, data) VALUES (?1, ?2, ?3, ?4)",
                params![id, b.encoding, b.uncompressed_bytes, b.data],
            )?;
        }
        tx.commit()?;
        Ok((id, true))
    }
}

impl Store for SqliteStore {
    fn insert(&mut self, run: &RunData) -> Result<(i64, bool)> {
        self.insert_tx(run).map_err(|e| self.sq(e))
    }

    fn list(&mut self, limit: usize, kind: Option<&str>) -> Result<Vec<Summary>> {
        let sql = format!(
            "SELECT {SUMMARY_COLUMNS} FROM runs r LEFT JOIN raw w ON w.run_id = r.id
             WHERE (?1 IS NULL OR r.kind = ?1) ORDER BY r.id DESC LIMIT ?2"
        );
        let mut st = self.conn.prepare(&sql).map_err(|e| self.sq(e))?;
        let rows = st
            .query_map(
                params![kind, limit.min(i64::MAX as usize) as i64],
                summary_of,
            )
            .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>());
        drop(st);
        rows.map_err(|e| self.sq(e))
    }

    fn ids(&mut self) -> Result<Vec<i64>> {
        let mut st = self
            .conn
            .prepare("SELECT id FROM runs ORDER BY id")
            .map_err(|e| self.sq(e))?;
        let ids = st
            .query_map([], |r| r.get(0))
            .and_then(|rows| rows.collect::<rusqlite::Result<Vec<i64>>>());
        drop(st);
        ids.map_err(|e| self.sq(e))
    }

    fn get(&mut self, id: i64) -> Result<Stored> {
        let sql = format!(
            "SELECT {SUMMARY_COLUMNS}, r.software, r.result_json FROM runs r LEFT JOIN raw w ON w.run_id = r.id WHERE r.id = ?1"
        );
        let got = self
            .conn
            .query_row(&sql, [id], |row| {
                Ok((
                    summary_of(row)?,
                    row.get::<_, String>(11)?,
                    row.get::<_, String>(12)?,
                ))
            })
            .optional()
            .map_err(|e| self.sq(e))?;
        let (summary, software, result) = got.ok_or(ArchiveError::NoSuchRun(id))?;
        record::stored(summary, software, &result)
    }

    fn fetch(&mut self, id: i64) -> Result<RunData> {
        let got = self
            .conn
            .query_row(
                "SELECT r.kind, r.target, r.method, r.started_unix_ms, r.duration_s, r.summary,
                        r.software, r.result_json, r.raw_note, w.encoding, w.uncompressed_bytes, w.data,
                        r.agent, r.run_uuid
                 FROM runs r LEFT JOIN raw w ON w.run_id = r.id WHERE r.id = ?1",
                [id],
                |row| {
                    let encoding: Option<String> = row.get(9)?;
                    let raw = match encoding {
                        Some(encoding) => Some(RawBlob {
                            encoding,
                            uncompressed_bytes: row.get(10)?,
                            data: row.get(11)?,
                        }),
                        None => None,
                    };
                    Ok(RunData {
                        kind: row.get(0)?,
                        target: row.get(1)?,
                        method: row.get(2)?,
                        started_unix_ms: row.get(3)?,
                        duration_s: row.get(4)?,
                        summary: row.get(5)?,
                        software: row.get(6)?,
                        result_json: row.get(7)?,
                        raw_note: row.get(8)?,
                        agent: row.get(12)?,
                        run_uuid: row.get(13)?,
                        raw,
                    })
                },
            )
            .optional()
            .map_err(|e| self.sq(e))?;
        got.ok_or(ArchiveError::NoSuchRun(id))
    }

    fn raw_blob(&mut self, id: i64) -> Result<Option<Vec<u8>>> {
        self.conn
            .query_row("SELECT data FROM raw WHERE run_id = ?1", [id], |r| r.get(0))
            .optional()
            .map_err(|e| self.sq(e))
    }

    fn find_same(&mut self, run: &RunData) -> Result<Option<i64>> {
        self.conn
            .query_row(
                "SELECT id FROM runs WHERE started_unix_ms = ?1 AND kind = ?2 AND target = ?3 AND result_json = ?4 LIMIT 1",
                params![run.started_unix_ms, run.kind, run.target, run.result_json],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| self.sq(e))
    }

    fn remove(&mut self, id: i64) -> Result<()> {
        let n = self
            .conn
            .execute("DELETE FROM runs WHERE id = ?1", [id])
            .map_err(|e| self.sq(e))?;
        if n == 0 {
            return Err(ArchiveError::NoSuchRun(id));
        }
        Ok(())
    }

    fn count(&mut self) -> Result<u64> {
        self.conn
            .query_row("SELECT COUNT(*) FROM runs", [], |r| r.get::<_, i64>(0))
            .map(|n| n.max(0) as u64)
            .map_err(|e| self.sq(e))
    }

    fn schema_version(&mut self) -> Result<i64> {
        current_version(&self.conn).map_err(|e| self.sq(e))
    }

    /// SQLite's own check of every page and index.
    fn health_check(&mut self) -> Result<String> {
        self.conn
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .map_err(|e| self.sq(e))
    }

    fn execute_batch(&mut self, sql: &str) -> Result<()> {
        self.conn.execute_batch(sql).map_err(|e| self.sq(e))
    }
}
