//! The archive file: open (creating and migrating), save one run, read back.

use crate::raw::{self, MAX_RAW_BYTES};
use crate::schema::{self, SCHEMA_VERSION};
use crate::{ArchiveError, Result};
use rusqlite::{params, Connection, OptionalExtension};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// One measurement to keep: everything [`Archive::save`] needs, in one value.
#[derive(Debug, Clone)]
pub struct Record {
    /// What made it: the command (`abw`, `lab-run`, `demo`, `agent`, ...).
    pub kind: String,
    /// What was measured: a server address, a lab's description.
    pub target: String,
    /// The method, when the command has one (`fac2`, ...).
    pub method: Option<String>,
    /// When the measurement started (wall clock).
    pub started: SystemTime,
    /// How long it took.
    pub duration: Duration,
    /// One line for `history` (e.g. "A 208.1 Mb/s, C 300 Mb/s").
    pub summary: String,
    /// The exact object the command prints under `--json`.
    pub result: serde_json::Value,
    /// Raw data for re-analysis and plots (observations, truth series), kept
    /// compressed when it fits [`MAX_RAW_BYTES`].
    pub raw: Option<serde_json::Value>,
}

/// One line of `history`.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub id: i64,
    pub kind: String,
    pub target: String,
    pub method: Option<String>,
    /// Milliseconds since the Unix epoch.
    pub started_unix_ms: i64,
    pub duration_s: f64,
    pub summary: String,
    pub raw: RawInfo,
}

/// Whether a run kept its raw data, how big it is, or why it has none.
#[derive(Debug, Clone, Serialize)]
pub struct RawInfo {
    pub present: bool,
    pub compressed_bytes: Option<u64>,
    pub uncompressed_bytes: Option<u64>,
    pub note: Option<String>,
}

/// A whole archived run.
#[derive(Debug, Clone, Serialize)]
pub struct Stored {
    #[serde(flatten)]
    pub summary: Summary,
    pub software: String,
    pub result: serde_json::Value,
}

/// An open archive file.
pub struct Archive {
    conn: Connection,
    path: PathBuf,
}

fn now_ms() -> i64 {
    unix_ms(SystemTime::now())
}

fn unix_ms(t: SystemTime) -> i64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_millis().min(i64::MAX as u128) as i64,
        Err(e) => -(e.duration().as_millis().min(i64::MAX as u128) as i64),
    }
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
        .map_err(|e| foreign(e.to_string()))?;
    if !tables.is_empty() && !tables.iter().any(|t| t == "schema_version") {
        let mut some = tables;
        some.truncate(3);
        return Err(foreign(format!("it holds tables {}", some.join(", "))));
    }
    Ok(())
}

impl Archive {
    /// Opens the archive at `path`, creating the file if needed (not its
    /// directory: a path someone typed in a missing directory is more likely
    /// a typo than a wish) and bringing its schema up to [`SCHEMA_VERSION`].
    /// A file that is not a pathsonde archive is refused before anything is
    /// written to it.
    pub fn open(path: &Path) -> Result<Archive> {
        Archive::check_directory(path)?;
        let sq = |source| ArchiveError::Sqlite {
            path: path.display().to_string(),
            source,
        };
        let mut conn = Connection::open(path).map_err(sq)?;
        refuse_foreign(&conn, path)?;
        // Another pathsonde (the agent, a second shell) may be writing: wait
        // for it rather than fail.
        conn.busy_timeout(Duration::from_secs(15)).map_err(sq)?;
        let mode: String = conn
            .query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))
            .map_err(sq)?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(ArchiveError::Io {
                path: path.display().to_string(),
                message: format!("cannot use the WAL journal here (got {mode})"),
            });
        }
        conn.execute_batch("PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON;")
            .map_err(sq)?;
        let found = schema::current_version(&conn).map_err(sq)?;
        if found > SCHEMA_VERSION {
            return Err(ArchiveError::TooNew {
                path: path.display().to_string(),
                found,
                supported: SCHEMA_VERSION,
            });
        }
        if found < SCHEMA_VERSION {
            schema::migrate(&mut conn, found, now_ms()).map_err(sq)?;
        }
        Ok(Archive {
            conn,
            path: path.to_path_buf(),
        })
    }

    /// Whether an archive can live at `path` without creating directories:
    /// its directory must exist.  [`Archive::open`] checks it; a command
    /// checks it before it measures, so a typo costs no measurement.
    pub fn check_directory(path: &Path) -> Result<()> {
        match path.parent().filter(|d| !d.as_os_str().is_empty()) {
            Some(dir) if !dir.is_dir() => Err(ArchiveError::Io {
                path: path.display().to_string(),
                message: format!(
                    "directory {} does not exist (create it, or give another path)",
                    dir.display()
                ),
            }),
            _ => Ok(()),
        }
    }

    /// [`Archive::open`] for the per-user default location, whose directory
    /// is created when missing (`$XDG_DATA_HOME/pathsonde` on a first run).
    pub fn open_default(path: &Path) -> Result<Archive> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| ArchiveError::Io {
                path: path.display().to_string(),
                message: format!("creating {}: {e}", dir.display()),
            })?;
        }
        Archive::open(path)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn sq(&self, source: rusqlite::Error) -> ArchiveError {
        ArchiveError::Sqlite {
            path: self.path.display().to_string(),
            source,
        }
    }

    /// Keeps one run: its row and its raw data in one transaction, so a crash
    /// at any point leaves either the whole run or nothing of it.
    pub fn save(&mut self, rec: &Record) -> Result<i64> {
        let result = serde_json::to_string(&rec.result)
            .map_err(|e| ArchiveError::Invalid(format!("result is not JSON: {e}")))?;
        // Compress outside the transaction: the write lock is held only for
        // the inserts.
        let (blob, uncompressed, note) = match &rec.raw {
            None => (None, 0, None),
            Some(v) => {
                let uncompressed = serde_json::to_vec(v).map(|b| b.len()).unwrap_or(0);
                let blob = raw::compress(v)?;
                if blob.len() > MAX_RAW_BYTES {
                    let note = format!(
                        "raw data not kept: {} bytes compressed exceeds the {} byte bound",
                        blob.len(),
                        MAX_RAW_BYTES
                    );
                    (None, 0, Some(note))
                } else {
                    (Some(blob), uncompressed, None)
                }
            }
        };
        let software = format!("pathsonde {}", env!("CARGO_PKG_VERSION"));
        let tx = self.conn.transaction().map_err(|e| ArchiveError::Sqlite {
            path: self.path.display().to_string(),
            source: e,
        })?;
        let id = (|| {
            tx.execute(
                "INSERT INTO runs (kind, target, method, started_unix_ms, duration_s, summary, software, result_json, raw_note)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                params![
                    rec.kind,
                    rec.target,
                    rec.method,
                    unix_ms(rec.started),
                    rec.duration.as_secs_f64(),
                    rec.summary,
                    software,
                    result,
                    note
                ],
            )?;
            let id = tx.last_insert_rowid();
            if let Some(b) = &blob {
                tx.execute(
                    "INSERT INTO raw (run_id, encoding, uncompressed_bytes, data) VALUES (?1, 'json+gzip', ?2, ?3)",
                    params![id, uncompressed as i64, b],
                )?;
            }
            tx.commit()?;
            Ok(id)
        })()
        .map_err(|e| self.sq(e))?;
        Ok(id)
    }

    const SUMMARY_COLUMNS: &'static str = "r.id, r.kind, r.target, r.method, r.started_unix_ms, r.duration_s, r.summary, r.raw_note, length(w.data), w.uncompressed_bytes";

    fn summary_of(row: &rusqlite::Row<'_>) -> rusqlite::Result<Summary> {
        let compressed: Option<i64> = row.get(8)?;
        let uncompressed: Option<i64> = row.get(9)?;
        Ok(Summary {
            id: row.get(0)?,
            kind: row.get(1)?,
            target: row.get(2)?,
            method: row.get(3)?,
            started_unix_ms: row.get(4)?,
            duration_s: row.get(5)?,
            summary: row.get(6)?,
            raw: RawInfo {
                present: compressed.is_some(),
                compressed_bytes: compressed.map(|b| b.max(0) as u64),
                uncompressed_bytes: uncompressed.map(|b| b.max(0) as u64),
                note: row.get(7)?,
            },
        })
    }

    /// The newest `limit` runs (optionally of one kind), newest first.
    pub fn list(&self, limit: usize, kind: Option<&str>) -> Result<Vec<Summary>> {
        let sql = format!(
            "SELECT {} FROM runs r LEFT JOIN raw w ON w.run_id = r.id
             WHERE (?1 IS NULL OR r.kind = ?1) ORDER BY r.id DESC LIMIT ?2",
            Self::SUMMARY_COLUMNS
        );
        let mut st = self.conn.prepare(&sql).map_err(|e| self.sq(e))?;
        let rows = st
            .query_map(
                params![kind, limit.min(i64::MAX as usize) as i64],
                Self::summary_of,
            )
            .map_err(|e| self.sq(e))?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
            .map_err(|e| self.sq(e))
    }

    /// One run, whole.
    pub fn get(&self, id: i64) -> Result<Stored> {
        let sql = format!(
            "SELECT {}, r.software, r.result_json FROM runs r LEFT JOIN raw w ON w.run_id = r.id WHERE r.id = ?1",
            Self::SUMMARY_COLUMNS
        );
        let got = self
            .conn
            .query_row(&sql, [id], |row| {
                Ok((
                    Self::summary_of(row)?,
                    row.get::<_, String>(10)?,
                    row.get::<_, String>(11)?,
                ))
            })
            .optional()
            .map_err(|e| self.sq(e))?;
        let (summary, software, result) = got.ok_or(ArchiveError::NoSuchRun(id))?;
        let result = serde_json::from_str(&result)
            .map_err(|e| ArchiveError::Invalid(format!("run {id}'s result is damaged: {e}")))?;
        Ok(Stored {
            summary,
            software,
            result,
        })
    }

    /// A run's raw data, `None` when it kept none.
    pub fn raw(&self, id: i64) -> Result<Option<serde_json::Value>> {
        self.get(id)?;
        let blob: Option<Vec<u8>> = self
            .conn
            .query_row("SELECT data FROM raw WHERE run_id = ?1", [id], |r| r.get(0))
            .optional()
            .map_err(|e| self.sq(e))?;
        blob.map(|b| raw::decompress(&b)).transpose()
    }

    /// Removes one run and its raw data.
    pub fn remove(&mut self, id: i64) -> Result<()> {
        let n = self
            .conn
            .execute("DELETE FROM runs WHERE id = ?1", [id])
            .map_err(|e| self.sq(e))?;
        if n == 0 {
            return Err(ArchiveError::NoSuchRun(id));
        }
        Ok(())
    }

    /// How many runs are kept.
    pub fn count(&self) -> Result<u64> {
        self.conn
            .query_row("SELECT COUNT(*) FROM runs", [], |r| r.get::<_, i64>(0))
            .map(|n| n.max(0) as u64)
            .map_err(|e| self.sq(e))
    }

    /// SQLite's own check of every page and index: `"ok"` when sound.
    pub fn integrity_check(&self) -> Result<String> {
        self.conn
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .map_err(|e| self.sq(e))
    }

    /// Runs SQL on this connection (tests use it to inject a failure
    /// between a run's two inserts).
    #[doc(hidden)]
    pub fn execute_batch_for_tests(&self, sql: &str) -> Result<()> {
        self.conn.execute_batch(sql).map_err(|e| self.sq(e))
    }

    /// The schema version of the open file.
    pub fn schema_version(&self) -> Result<i64> {
        schema::current_version(&self.conn).map_err(|e| self.sq(e))
    }
}
