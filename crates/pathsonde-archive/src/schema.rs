//! The one schema definition both stores share, and its migrations.
//!
//! `schema_version` holds one row per migration applied.  Migrations run in
//! order, each inside its own transaction together with the row recording
//! it, so a crash between two migrations leaves a consistent, older schema
//! that the next open carries forward.  Never edit a migration that has
//! shipped: append a new one.
//!
//! Each migration is written once, in SQL common to SQLite and PostgreSQL,
//! with a few type tokens ([`Dialect::render`]) where the two differ: the
//! run id (`INTEGER PRIMARY KEY AUTOINCREMENT` / `BIGSERIAL PRIMARY KEY`),
//! 64-bit integers, doubles and byte strings.  What only one store has
//! (PostgreSQL's storage hints) is a migration's `postgres_only` part.  So
//! both stores always have the same tables, columns and versions.

/// Which SQL a store speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Sqlite,
    Postgres,
}

/// The type tokens and what each store calls them.
const TOKENS: &[(&str, &str, &str)] = &[
    (
        "{serial_id}",
        "INTEGER PRIMARY KEY AUTOINCREMENT",
        "BIGSERIAL PRIMARY KEY",
    ),
    ("{int}", "INTEGER", "BIGINT"),
    ("{real}", "REAL", "DOUBLE PRECISION"),
    ("{blob}", "BLOB", "BYTEA"),
];

impl Dialect {
    /// `sql` with its type tokens replaced by this store's types.
    pub fn render(self, sql: &str) -> String {
        TOKENS.iter().fold(sql.to_string(), |s, (token, lite, pg)| {
            s.replace(
                token,
                match self {
                    Dialect::Sqlite => lite,
                    Dialect::Postgres => pg,
                },
            )
        })
    }
}

/// One step of the schema.
#[derive(Debug)]
pub struct Migration {
    /// The version this migration takes the schema to (1, 2, ...).
    pub version: i64,
    /// What it is for, in one line.
    pub description: &'static str,
    /// SQL for both stores, with type tokens.
    pub sql: &'static str,
    /// SQL run after `sql` on PostgreSQL only.
    pub postgres_only: &'static str,
}

impl Migration {
    /// The statements to run on a store of `dialect`.
    pub fn sql_for(&self, dialect: Dialect) -> String {
        let mut s = dialect.render(self.sql);
        if dialect == Dialect::Postgres && !self.postgres_only.is_empty() {
            s.push('\n');
            s.push_str(self.postgres_only);
        }
        s
    }
}

/// The version table both stores keep, created before anything else.
pub const VERSION_TABLE: &str = "CREATE TABLE IF NOT EXISTS schema_version (
            version {int} PRIMARY KEY,
            applied_unix_ms {int} NOT NULL
        );";

/// Every migration, in order: `MIGRATIONS[i].version == i + 1`.
pub const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        description: "one row per measurement; the result is the command's --json object",
        sql: "CREATE TABLE runs (
        id {serial_id},
        kind TEXT NOT NULL,
        target TEXT NOT NULL,
        method TEXT,
        started_unix_ms {int} NOT NULL,
        duration_s {real} NOT NULL,
        summary TEXT NOT NULL,
        software TEXT NOT NULL,
        result_json TEXT NOT NULL
    );",
        postgres_only: "",
    },
    Migration {
        version: 2,
        description:
            "raw data beside the result, compressed and optional; a note says why a run has none",
        sql: "CREATE TABLE raw (
        run_id {int} PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
        encoding TEXT NOT NULL,
        uncompressed_bytes {int} NOT NULL,
        data {blob} NOT NULL
    );
    ALTER TABLE runs ADD COLUMN raw_note TEXT;
    CREATE INDEX runs_started ON runs(started_unix_ms);",
        // The data is gzip already: PostgreSQL's own compression of it
        // would cost CPU and save nothing.
        postgres_only: "ALTER TABLE raw ALTER COLUMN data SET STORAGE EXTERNAL;",
    },
];

/// The schema this pathsonde writes.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

pub use crate::store::sqlite::create_at_version;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_consecutive_from_one() {
        for (i, m) in MIGRATIONS.iter().enumerate() {
            assert_eq!(m.version, i as i64 + 1, "{}", m.description);
        }
    }

    /// The SQLite text of the shipped migrations is what earlier pathsonde
    /// versions ran, character for character: archives they made and
    /// archives made now have the same schema.
    #[test]
    fn sqlite_rendering_is_the_shipped_sql() {
        assert_eq!(
            MIGRATIONS[0].sql_for(Dialect::Sqlite),
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
    );"
        );
        assert_eq!(
            MIGRATIONS[1].sql_for(Dialect::Sqlite),
            "CREATE TABLE raw (
        run_id INTEGER PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
        encoding TEXT NOT NULL,
        uncompressed_bytes INTEGER NOT NULL,
        data BLOB NOT NULL
    );
    ALTER TABLE runs ADD COLUMN raw_note TEXT;
    CREATE INDEX runs_started ON runs(started_unix_ms);"
        );
    }

    #[test]
    fn postgres_rendering_has_no_token_left() {
        for m in MIGRATIONS {
            let s = m.sql_for(Dialect::Postgres);
            assert!(!s.contains('{'), "{s}");
            assert!(!s.contains("AUTOINCREMENT") && !s.contains("BLOB"), "{s}");
        }
        assert!(MIGRATIONS[0]
            .sql_for(Dialect::Postgres)
            .contains("id BIGSERIAL PRIMARY KEY"));
    }
}
