//! The PostgreSQL store: the archive many hosts share (docs/fleet.md).
//!
//! Tables live in the connection's current schema (the first of its
//! `search_path`, `public` by default; a URL may choose another with
//! `?options=-csearch_path%3DNAME`), so one database can hold several
//! archives and the tests give each its own schema.  Migrations take a
//! transaction-scoped advisory lock, so agents starting together migrate
//! once, one after the other, never twice at the same time.

mod connect;
mod pgpass;
mod tls;

use crate::record::{self, RawBlob, RunData, Stored, Summary};
use crate::schema::{Dialect, MIGRATIONS, SCHEMA_VERSION, VERSION_TABLE};
use crate::store::Store;
use crate::{ArchiveError, Result};
use postgres::{Client, GenericClient, Row};

/// An open connection to a PostgreSQL archive.
pub struct PgStore {
    client: Client,
    /// The location as shown: no password.
    shown: String,
}

/// The error for `e` on the archive shown as `shown`, with the server's
/// own message (which `postgres::Error`'s `Display` leaves out) or the
/// cause of a failed connection.
fn pg_error(shown: &str, e: postgres::Error) -> ArchiveError {
    let message = match e.as_db_error() {
        Some(db) => {
            let mut m = format!("{}: {}", db.severity(), db.message());
            if let Some(d) = db.detail() {
                m.push_str(&format!(" ({d})"));
            }
            if let Some(h) = db.hint() {
                m.push_str(&format!("; hint: {h}"));
            }
            m
        }
        None => match std::error::Error::source(&e) {
            // The client's words for "the server asked for a password and
            // none was configured".
            Some(s) if s.to_string() == "password missing" => "the server asks for a password \
                 and none was found: put it in ~/.pgpass (or the file PGPASSFILE names; mode \
                 0600) or in PGPASSWORD (docs/fleet.md)"
                .to_string(),
            Some(s) if e.to_string().starts_with("error connecting") => {
                format!("{e}: {s} (is the server running there, on that port?)")
            }
            Some(s) => format!("{e}: {s}"),
            None => e.to_string(),
        },
    };
    ArchiveError::Postgres {
        location: shown.to_string(),
        message,
        source: e,
    }
}

const SUMMARY_COLUMNS: &str = "r.id, r.kind, r.target, r.method, r.started_unix_ms, r.duration_s, r.summary, r.raw_note, octet_length(w.data)::bigint, w.uncompressed_bytes, r.agent";

fn summary_of(row: &Row) -> std::result::Result<Summary, postgres::Error> {
    Ok(Summary {
        id: row.try_get(0)?,
        kind: row.try_get(1)?,
        target: row.try_get(2)?,
        method: row.try_get(3)?,
        started_unix_ms: row.try_get(4)?,
        duration_s: row.try_get(5)?,
        summary: row.try_get(6)?,
        agent: row.try_get(10)?,
        raw: record::raw_info(row.try_get(8)?, row.try_get(9)?, row.try_get(7)?),
    })
}

/// Which of pathsonde's tables the current schema holds.
fn our_tables(c: &mut impl GenericClient) -> std::result::Result<Vec<String>, postgres::Error> {
    let rows = c.query(
        "SELECT table_name::text FROM information_schema.tables
         WHERE table_schema = current_schema() AND table_name IN ('runs', 'raw', 'schema_version')",
        &[],
    )?;
    rows.iter().map(|r| r.try_get(0)).collect()
}

fn version_of(c: &mut impl GenericClient) -> std::result::Result<i64, postgres::Error> {
    c.query_one(
        "SELECT COALESCE(MAX(version), 0)::bigint FROM schema_version",
        &[],
    )?
    .try_get(0)
}

/// What one pass of [`PgStore::migrate`] did.
enum Step {
    /// Applied the next migration: go on.
    Applied,
    /// Nothing left to apply; the version found.
    Done(i64),
}

impl PgStore {
    /// Connects to `url` and brings the schema up to `target` (normally
    /// [`SCHEMA_VERSION`]).  With `create` false, a database without a
    /// pathsonde archive is `None` and left as it was (a reader must not
    /// create tables).
    pub(crate) fn open(url: &str, target: i64, create: bool) -> Result<Option<PgStore>> {
        let shown = crate::location::redact(url);
        let prepared = connect::prepare(url, &|k| std::env::var(k).ok())?;
        for w in &prepared.warnings {
            eprintln!("pathsonde: warning: {w}");
        }
        let client = connect_with(&prepared, &shown)?;
        let mut store = PgStore { client, shown };
        let tables = our_tables(&mut store.client).map_err(|e| store.pg(e))?;
        let has = |t: &str| tables.iter().any(|x| x == t);
        if !has("schema_version") {
            if has("runs") || has("raw") {
                return Err(ArchiveError::Foreign {
                    path: store.shown.clone(),
                    why: "its schema has a runs or raw table but no schema_version".into(),
                });
            }
            if !create {
                return Ok(None);
            }
            let schema: Option<String> = store
                .client
                .query_one("SELECT current_schema()::text", &[])
                .and_then(|r| r.try_get(0))
                .map_err(|e| store.pg(e))?;
            if schema.is_none() {
                return Err(ArchiveError::BadLocation {
                    location: store.shown.clone(),
                    message: "no schema to create the archive's tables in (search_path names \
                              none that exists)"
                        .into(),
                });
            }
        }
        store.migrate(target)?;
        Ok(Some(store))
    }

    fn pg(&self, e: postgres::Error) -> ArchiveError {
        pg_error(&self.shown, e)
    }

    /// Applies the migrations the schema lacks, up to `target`, each in its
    /// own transaction holding an advisory lock for this schema, so that
    /// two pathsondes opening one archive at once never both migrate it.
    fn migrate(&mut self, target: i64) -> Result<()> {
        loop {
            let mut tx = self
                .client
                .transaction()
                .map_err(|e| pg_error(&self.shown, e))?;
            let step = (|| {
                tx.execute(
                    "SELECT pg_advisory_xact_lock(hashtext('pathsonde schema ' || current_schema()))",
                    &[],
                )?;
                // Only when missing: CREATE ... IF NOT EXISTS still needs
                // the CREATE privilege, which an agent's role lacks.
                if !our_tables(&mut tx)?.iter().any(|t| t == "schema_version") {
                    tx.batch_execute(&Dialect::Postgres.render(VERSION_TABLE))?;
                }
                let found = version_of(&mut tx)?;
                if found > SCHEMA_VERSION || found >= target {
                    return Ok(Step::Done(found));
                }
                let m = &MIGRATIONS[found as usize];
                tx.batch_execute(&m.sql_for(Dialect::Postgres))?;
                tx.execute(
                    "INSERT INTO schema_version (version, applied_unix_ms) VALUES ($1, $2)",
                    &[&m.version, &record::now_ms()],
                )?;
                Ok(Step::Applied)
            })();
            match step.map_err(|e| pg_error(&self.shown, e))? {
                Step::Applied => tx.commit().map_err(|e| pg_error(&self.shown, e))?,
                Step::Done(found) => {
                    tx.commit().map_err(|e| pg_error(&self.shown, e))?;
                    if found > SCHEMA_VERSION {
                        return Err(ArchiveError::TooNew {
                            path: self.shown.clone(),
                            found,
                            supported: SCHEMA_VERSION,
                        });
                    }
                    return Ok(());
                }
            }
        }
    }

    fn insert_tx(&mut self, run: &RunData) -> std::result::Result<(i64, bool), postgres::Error> {
        let mut tx = self.client.transaction()?;
        // A UUID already stored (a retried write whose first commit did
        // land) inserts nothing and returns the stored run's id; the unique
        // index decides, so two writers racing with one UUID store it once.
        let inserted = tx.query_opt(
                "INSERT INTO runs (kind, target, method, started_unix_ms, duration_s, summary, software, result_json, raw_note, agent, run_uuid)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, COALESCE($10, current_user), $11)
                 ON CONFLICT (run_uuid) DO NOTHING RETURNING id",
                &[
                    &run.kind,
                    &run.target,
                    &run.method,
                    &run.started_unix_ms,
                    &run.duration_s,
                    &run.summary,
                    &run.software,
                    &run.result_json,
                    &run.raw_note,
                    &run.agent,
                    &run.run_uuid,
                ],
            )?;
        let id: i64 = match inserted {
            Some(row) => row.try_get(0)?,
            None => {
                let id = tx
                    .query_one("SELECT id FROM runs WHERE run_uuid = $1", &[&run.run_uuid])?
                    .try_get(0)?;
                tx.commit()?;
                return Ok((id, false));
            }
        };
        if let Some(b) = &run.raw {
            tx.execute(
                "INSERT INTO raw (run_id, encoding, uncompressed_bytes, data) VALUES ($1, $2, $3, $4)",
                &[&id, &b.encoding, &b.uncompressed_bytes, &b.data],
            )?;
        }
        tx.commit()?;
        Ok((id, true))
    }
}

impl Store for PgStore {
    fn insert(&mut self, run: &RunData) -> Result<(i64, bool)> {
        self.insert_tx(run).map_err(|e| self.pg(e))
    }

    fn list(&mut self, limit: usize, kind: Option<&str>) -> Result<Vec<Summary>> {
        let sql = format!(
            "SELECT {SUMMARY_COLUMNS} FROM runs r LEFT JOIN raw w ON w.run_id = r.id
             WHERE ($1::text IS NULL OR r.kind = $1) ORDER BY r.id DESC LIMIT $2"
        );
        let limit = limit.min(i64::MAX as usize) as i64;
        let rows = self
            .client
            .query(&sql, &[&kind, &limit])
            .map_err(|e| self.pg(e))?;
        rows.iter()
            .map(summary_of)
            .collect::<std::result::Result<_, _>>()
            .map_err(|e| self.pg(e))
    }

    fn ids(&mut self) -> Result<Vec<i64>> {
        let rows = self
            .client
            .query("SELECT id FROM runs ORDER BY id", &[])
            .map_err(|e| self.pg(e))?;
        rows.iter()
            .map(|r| r.try_get(0))
            .collect::<std::result::Result<_, _>>()
            .map_err(|e| self.pg(e))
    }

    fn get(&mut self, id: i64) -> Result<Stored> {
        let sql = format!(
            "SELECT {SUMMARY_COLUMNS}, r.software, r.result_json FROM runs r LEFT JOIN raw w ON w.run_id = r.id WHERE r.id = $1"
        );
        let row = self
            .client
            .query_opt(&sql, &[&id])
            .map_err(|e| self.pg(e))?
            .ok_or(ArchiveError::NoSuchRun(id))?;
        let (summary, software, result): (Summary, String, String) =
            (|| Ok((summary_of(&row)?, row.try_get(11)?, row.try_get(12)?)))()
                .map_err(|e| self.pg(e))?;
        record::stored(summary, software, &result)
    }

    fn fetch(&mut self, id: i64) -> Result<RunData> {
        let row = self
            .client
            .query_opt(
                "SELECT r.kind, r.target, r.method, r.started_unix_ms, r.duration_s, r.summary,
                        r.software, r.result_json, r.raw_note, w.encoding, w.uncompressed_bytes, w.data,
                        r.agent, r.run_uuid
                 FROM runs r LEFT JOIN raw w ON w.run_id = r.id WHERE r.id = $1",
                &[&id],
            )
            .map_err(|e| self.pg(e))?
            .ok_or(ArchiveError::NoSuchRun(id))?;
        (|| {
            let encoding: Option<String> = row.try_get(9)?;
            let raw = match encoding {
                Some(encoding) => Some(RawBlob {
                    encoding,
                    uncompressed_bytes: row.try_get(10)?,
                    data: row.try_get(11)?,
                }),
                None => None,
            };
            Ok(RunData {
                kind: row.try_get(0)?,
                target: row.try_get(1)?,
                method: row.try_get(2)?,
                started_unix_ms: row.try_get(3)?,
                duration_s: row.try_get(4)?,
                summary: row.try_get(5)?,
                software: row.try_get(6)?,
                result_json: row.try_get(7)?,
                raw_note: row.try_get(8)?,
                agent: row.try_get(12)?,
                run_uuid: row.try_get(13)?,
                raw,
            })
        })()
        .map_err(|e| self.pg(e))
    }

    fn raw_blob(&mut self, id: i64) -> Result<Option<Vec<u8>>> {
        let row = self
            .client
            .query_opt("SELECT data FROM raw WHERE run_id = $1", &[&id])
            .map_err(|e| self.pg(e))?;
        row.map(|r| r.try_get(0))
            .transpose()
            .map_err(|e| self.pg(e))
    }

    fn find_same(&mut self, run: &RunData) -> Result<Option<i64>> {
        let row = self
            .client
            .query_opt(
                "SELECT id FROM runs WHERE started_unix_ms = $1 AND kind = $2 AND target = $3 AND result_json = $4 LIMIT 1",
                &[&run.started_unix_ms, &run.kind, &run.target, &run.result_json],
            )
            .map_err(|e| self.pg(e))?;
        row.map(|r| r.try_get(0))
            .transpose()
            .map_err(|e| self.pg(e))
    }

    fn remove(&mut self, id: i64) -> Result<()> {
        let n = self
            .client
            .execute("DELETE FROM runs WHERE id = $1", &[&id])
            .map_err(|e| self.pg(e))?;
        if n == 0 {
            // Row security hides another role's run from DELETE: say so
            // rather than claim the run is not there.
            let owner = self
                .client
                .query_opt("SELECT agent FROM runs WHERE id = $1", &[&id])
                .map_err(|e| self.pg(e))?;
            return Err(match owner {
                None => ArchiveError::NoSuchRun(id),
                Some(row) => ArchiveError::Invalid(format!(
                    "run {id} was written by role {}; only that role (or the archive's \
                     owner) may remove it (docs/fleet.md)",
                    row.try_get::<_, Option<String>>(0)
                        .ok()
                        .flatten()
                        .unwrap_or_else(|| "(none)".into())
                )),
            });
        }
        Ok(())
    }

    fn count(&mut self) -> Result<u64> {
        self.client
            .query_one("SELECT COUNT(*) FROM runs", &[])
            .and_then(|r| r.try_get::<_, i64>(0))
            .map(|n| n.max(0) as u64)
            .map_err(|e| self.pg(e))
    }

    fn schema_version(&mut self) -> Result<i64> {
        version_of(&mut self.client).map_err(|e| self.pg(e))
    }

    /// PostgreSQL checks its own pages (checksums, WAL); what is left to
    /// check here is the archive's own invariant: no raw data without its
    /// run (the foreign key's promise).
    fn health_check(&mut self) -> Result<String> {
        let orphans: i64 = self
            .client
            .query_one(
                "SELECT COUNT(*) FROM raw w LEFT JOIN runs r ON r.id = w.run_id WHERE r.id IS NULL",
                &[],
            )
            .and_then(|r| r.try_get(0))
            .map_err(|e| self.pg(e))?;
        Ok(if orphans == 0 {
            "ok".into()
        } else {
            format!("{orphans} raw data rows without their run")
        })
    }

    fn execute_batch(&mut self, sql: &str) -> Result<()> {
        self.client.batch_execute(sql).map_err(|e| self.pg(e))
    }
}

/// Whether `url` can be used, without contacting the server: it parses,
/// carries no password and asks for no TLS this build lacks.
pub(crate) fn check(url: &str) -> Result<()> {
    connect::prepare(url, &|k| std::env::var(k).ok()).map(|_| ())
}

/// A plain connection to `url`, configured as an archive's would be (URL,
/// `PG*` environment, password file; no password in the URL): the test
/// support's administration connection, and the fleet's lease connection.
pub fn connect_plain(url: &str) -> Result<Client> {
    let prepared = connect::prepare(url, &|k| std::env::var(k).ok())?;
    connect_with(&prepared, &crate::location::redact(url))
}

/// Connects as `prepared` says, TLS included (`tls.rs`).
fn connect_with(prepared: &connect::Prepared, shown: &str) -> Result<Client> {
    tls::connect(&prepared.config, &prepared.tls).map_err(|e| match e {
        tls::ConnectError::Postgres(e) => pg_error(shown, e),
        tls::ConnectError::Tls(message) => ArchiveError::BadLocation {
            location: shown.to_string(),
            message,
        },
    })
}
