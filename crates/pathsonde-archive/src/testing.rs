//! Test support (feature `test-support`): the archive locations a test
//! runs against, a fresh SQLite file and, when a server is available, a
//! PostgreSQL schema of its own, so that every archive test runs on both
//! stores against real databases, never a mock.
//!
//! The server is named by [`ENV_TEST_POSTGRES`] (scripts/ci-postgres.sh
//! starts one and prints the line to export).  Each [`TestPg`] creates a
//! schema with a unique name (process id and a counter) and drops it when
//! dropped, so tests running at once never see each other's runs.  Without
//! the variable a test says "skipped" on the terminal and goes on with
//! SQLite only, except under CI (`CI` set, as `.ci/run` sets `CI=true`),
//! where a missing PostgreSQL is a failure: CI must test both stores.

use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};

/// The PostgreSQL URL the tests use, e.g.
/// `postgresql://pathsonde@/pathsonde_test?host=/tmp/pathsonde-pg/sock`.
pub const ENV_TEST_POSTGRES: &str = "PATHSONDE_TEST_POSTGRES";

static COUNTER: AtomicU32 = AtomicU32::new(0);

fn unique(tag: &str) -> String {
    let tag: String = tag
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .take(30)
        .collect();
    format!(
        "pathsonde_t{}_{}_{tag}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// Says something on the terminal even when the test harness captures
/// output (it captures `print!`/`eprint!`, not writes to the handle).
fn tell(message: &str) {
    let _ = writeln!(std::io::stderr(), "{message}");
}

/// Whether this is a CI run, where nothing may be skipped: `CI` set, as
/// `.ci/run` runs (`CI=true`), the rule the lab tests follow too
/// (`pathsonde_lab::exclusive::cannot_run`).
pub fn in_ci() -> bool {
    std::env::var_os("CI").is_some()
}

/// The base URL of the test server: `None` (after saying "skipped") when
/// none is configured outside CI; a panic under CI.
pub fn server(tag: &str) -> Option<String> {
    match std::env::var(ENV_TEST_POSTGRES)
        .ok()
        .filter(|v| !v.is_empty())
    {
        Some(url) => Some(url),
        None if in_ci() => panic!(
            "{ENV_TEST_POSTGRES} is not set under CI: the archive tests must run on \
             PostgreSQL too (scripts/ci-postgres.sh starts one)"
        ),
        None => {
            tell(&format!(
                "{tag}: PostgreSQL skipped ({ENV_TEST_POSTGRES} is not set; \
                 `eval \"$(bash scripts/ci-postgres.sh)\"` starts one)"
            ));
            None
        }
    }
}

/// `url` with the user-info replaced by `user`.
pub fn with_user(url: &str, user: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let hosts = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    format!("{scheme}://{user}@{hosts}{tail}")
}

/// A schema of one's own on the test server, dropped with everything in it
/// when this is dropped.
pub struct TestPg {
    admin: postgres::Client,
    schema: String,
    base: String,
    /// Login roles made for this test, dropped after the schema.
    roles: Vec<String>,
}

impl TestPg {
    /// A fresh schema, or `None` when no server is configured (outside CI).
    /// A server that is configured but cannot be reached is a failure.
    pub fn new(tag: &str) -> Option<TestPg> {
        let base = server(tag)?;
        let mut admin = crate::store::postgres::connect_plain(&base)
            .unwrap_or_else(|e| panic!("{ENV_TEST_POSTGRES}: {e}"));
        let schema = unique(tag);
        admin
            .batch_execute(&format!(
                "DROP SCHEMA IF EXISTS {schema} CASCADE; CREATE SCHEMA {schema};"
            ))
            .unwrap_or_else(|e| panic!("creating schema {schema}: {e}"));
        Some(TestPg {
            admin,
            schema,
            base,
            roles: Vec::new(),
        })
    }

    pub fn schema(&self) -> &str {
        &self.schema
    }

    /// The archive location: the server's URL with this schema first on
    /// the search path (libpq's `options`, as a user would write it).
    pub fn url(&self) -> String {
        self.url_as(None)
    }

    /// [`TestPg::url`] logging in as `user` instead (see [`TestPg::grant`]).
    pub fn url_as(&self, user: Option<&str>) -> String {
        let base = match user {
            Some(u) => with_user(&self.base, u),
            None => self.base.clone(),
        };
        let sep = if base.contains('?') { '&' } else { '?' };
        format!("{base}{sep}options=-csearch_path%3D{}", self.schema)
    }

    /// Lets `role` create and use tables in this schema.
    pub fn grant(&mut self, role: &str) -> Result<(), postgres::Error> {
        self.admin.batch_execute(&format!(
            "GRANT USAGE, CREATE ON SCHEMA {} TO {role}",
            self.schema
        ))
    }

    /// Whether the server has a login role `role` (scripts/ci-postgres.sh
    /// makes `pathsonde_pw`, which logs in with a password).
    pub fn has_role(&mut self, role: &str) -> bool {
        self.admin
            .query_opt("SELECT 1 FROM pg_roles WHERE rolname = $1", &[&role])
            .map(|r| r.is_some())
            .unwrap_or(false)
    }

    /// A new login role named `<schema>_<suffix>` with an agent's
    /// privileges on this schema's archive ([`crate::schema::postgres_agent_grants`]),
    /// which must exist already; its name.
    pub fn agent_role(&mut self, suffix: &str) -> Result<String, postgres::Error> {
        let role = format!("{}_{suffix}", self.schema);
        self.admin.batch_execute(&format!(
            "DROP ROLE IF EXISTS {role}; CREATE ROLE {role} LOGIN;"
        ))?;
        self.roles.push(role.clone());
        self.admin
            .batch_execute(&crate::schema::postgres_agent_grants(&self.schema, &role))?;
        Ok(role)
    }

    /// Runs SQL as the administration role, in this schema.
    pub fn admin_sql(&mut self, sql: &str) -> Result<(), postgres::Error> {
        self.admin
            .batch_execute(&format!("SET search_path TO {}; {sql}", self.schema))
    }
}

impl Drop for TestPg {
    fn drop(&mut self) {
        let _ = self
            .admin
            .batch_execute(&format!("DROP SCHEMA IF EXISTS {} CASCADE", self.schema));
        for r in &self.roles {
            let _ = self
                .admin
                .batch_execute(&format!("DROP ROLE IF EXISTS {r}"));
        }
    }
}

/// A temporary directory removed when dropped.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        let d = std::env::temp_dir().join(unique(tag));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("creating a temporary directory");
        TempDir(d)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// One archive location for a test, and what cleans it up.
pub struct TestArchive {
    /// `sqlite` or `postgres`, for assertion messages.
    pub store: &'static str,
    pub location: String,
    pub pg: Option<TestPg>,
    _dir: Option<TempDir>,
}

impl TestArchive {
    pub fn sqlite(tag: &str) -> TestArchive {
        let dir = TempDir::new(tag);
        TestArchive {
            store: "sqlite",
            location: dir.0.join("a.sqlite").display().to_string(),
            pg: None,
            _dir: Some(dir),
        }
    }

    pub fn postgres(tag: &str) -> Option<TestArchive> {
        let pg = TestPg::new(tag)?;
        Some(TestArchive {
            store: "postgres",
            location: pg.url(),
            pg: Some(pg),
            _dir: None,
        })
    }
}

/// A fresh SQLite archive and, when a server is configured, a fresh
/// PostgreSQL one: run the same test on each.
pub fn both(tag: &str) -> Vec<TestArchive> {
    let mut v = vec![TestArchive::sqlite(tag)];
    v.extend(TestArchive::postgres(tag));
    v
}
