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
    Migration {
        version: 3,
        description: "who wrote each run: on PostgreSQL the database role, and each role may \
                      add and remove only its own runs (row-level security; docs/fleet.md)",
        sql: "ALTER TABLE runs ADD COLUMN agent TEXT;",
        // Every role reads every run; a role other than the tables' owner
        // inserts runs only as itself and raw data only for its own runs,
        // deletes only its own, and updates nothing.  The owner (the role
        // that created the archive) is not bound by the policies, so it
        // can copy runs in and clean up.  Foreign-key cascades bypass
        // row security, as PostgreSQL's referential actions always do.
        postgres_only: "ALTER TABLE runs ALTER COLUMN agent SET DEFAULT current_user;
    ALTER TABLE runs ENABLE ROW LEVEL SECURITY;
    ALTER TABLE raw ENABLE ROW LEVEL SECURITY;
    CREATE POLICY runs_read ON runs FOR SELECT USING (true);
    CREATE POLICY runs_insert_own ON runs FOR INSERT WITH CHECK (agent = current_user);
    CREATE POLICY runs_delete_own ON runs FOR DELETE USING (agent = current_user);
    CREATE POLICY raw_read ON raw FOR SELECT USING (true);
    CREATE POLICY raw_insert_own ON raw FOR INSERT WITH CHECK (
        EXISTS (SELECT 1 FROM runs r WHERE r.id = run_id AND r.agent = current_user));",
    },
    Migration {
        version: 4,
        description: "the fleet (docs/fleet.md): a run's UUID so a retried write is stored \
                      once, the leases tests take on servers and shared paths, and the \
                      tests skipped with their reason",
        // `run_uuid` is NULL for runs written outside a mesh; a unique index
        // treats NULLs as distinct on both stores.  The lease and skip
        // tables exist on both stores so the schemas stay equal, but only
        // PostgreSQL-backed fleets use them (pathsonde-fleet).
        sql: "ALTER TABLE runs ADD COLUMN run_uuid TEXT;
    CREATE UNIQUE INDEX runs_run_uuid ON runs(run_uuid);
    CREATE TABLE leases (
        resource TEXT PRIMARY KEY,
        holder TEXT NOT NULL,
        test TEXT NOT NULL,
        run_uuid TEXT NOT NULL,
        taken_unix_ms {int} NOT NULL,
        expires_unix_ms {int} NOT NULL
    );
    CREATE TABLE skips (
        id {serial_id},
        run_uuid TEXT NOT NULL UNIQUE,
        test TEXT NOT NULL,
        source TEXT NOT NULL,
        destination TEXT NOT NULL,
        scheduled_unix_ms {int} NOT NULL,
        recorded_unix_ms {int} NOT NULL,
        reason TEXT NOT NULL,
        agent TEXT
    );
    CREATE INDEX skips_scheduled ON skips(scheduled_unix_ms);",
        postgres_only: "ALTER TABLE skips ALTER COLUMN agent SET DEFAULT current_user;",
    },
];

/// The schema this pathsonde writes.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// The privileges one agent's role needs on a PostgreSQL archive in
/// `schema` (docs/fleet.md): read every run, add its own (row-level
/// security makes them its own), remove its own, read the schema version;
/// take, renew and release leases (any role may retake an expired one) and
/// record skips.
/// Run by the archive's owner after the archive exists.
pub fn postgres_agent_grants(schema: &str, role: &str) -> String {
    format!(
        "GRANT USAGE ON SCHEMA {schema} TO {role};
GRANT SELECT, INSERT, DELETE ON {schema}.runs, {schema}.raw TO {role};
GRANT SELECT ON {schema}.schema_version TO {role};
GRANT USAGE ON SEQUENCE {schema}.runs_id_seq TO {role};
GRANT SELECT, INSERT, UPDATE, DELETE ON {schema}.leases TO {role};
GRANT SELECT, INSERT ON {schema}.skips TO {role};
GRANT USAGE ON SEQUENCE {schema}.skips_id_seq TO {role};"
    )
}

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
