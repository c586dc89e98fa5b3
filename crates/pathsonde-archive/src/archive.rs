//! [`Archive`]: an open archive, whichever store holds it.  Commands deal
//! only with this type and a location string; the store behind it is
//! chosen by [`Location::parse`].

mod copy;

pub use copy::CopyReport;

use crate::location::Location;
use crate::raw;
use crate::record::{Record, RunData, Stored, Summary};
use crate::schema::SCHEMA_VERSION;
use crate::store::postgres::PgStore;
use crate::store::sqlite::SqliteStore;
use crate::store::Store;
use crate::{ArchiveError, Result};
use std::ffi::OsStr;
use std::path::Path;

/// An open archive.
pub struct Archive {
    store: Box<dyn Store>,
    location: Location,
}

impl Archive {
    /// Opens the archive at `location` (a SQLite file path or a
    /// `postgresql://` URL), creating it if needed and bringing its schema
    /// up to [`SCHEMA_VERSION`].  A SQLite file is created, not its
    /// directory: a path someone typed in a missing directory is more
    /// likely a typo than a wish.  A file or schema that is not a pathsonde
    /// archive is refused before anything is written to it.
    pub fn open(location: impl AsRef<OsStr>) -> Result<Archive> {
        Archive::open_location(Location::parse(location))
    }

    /// [`Archive::open`] for a parsed location.
    pub fn open_location(location: Location) -> Result<Archive> {
        Archive::open_at(location, SCHEMA_VERSION, true).map(|a| a.expect("created when missing"))
    }

    /// The archive at `location` if there is one, `None` when there is
    /// nothing there yet (no file; a database without pathsonde's tables),
    /// in which case nothing is created: readers (`history`, `show`) must
    /// not leave empty archives behind.
    pub fn open_existing(location: impl AsRef<OsStr>) -> Result<Option<Archive>> {
        let location = Location::parse(location);
        if let Location::Sqlite(p) = &location {
            if !p.exists() {
                return Ok(None);
            }
        }
        Archive::open_at(location, SCHEMA_VERSION, false)
    }

    /// Opens with the schema at `version` (older than [`SCHEMA_VERSION`]),
    /// as an older pathsonde would have left it: for migration tests.
    #[doc(hidden)]
    pub fn open_at_version(location: impl AsRef<OsStr>, version: i64) -> Result<Archive> {
        Archive::open_at(Location::parse(location), version, true)
            .map(|a| a.expect("created when missing"))
    }

    fn open_at(location: Location, version: i64, create: bool) -> Result<Option<Archive>> {
        let store: Box<dyn Store> = match &location {
            Location::Sqlite(p) => {
                Archive::check_directory(p)?;
                Box::new(SqliteStore::open(p, version)?)
            }
            Location::Postgres(url) => match PgStore::open(url, version, create)? {
                Some(s) => Box::new(s),
                None => return Ok(None),
            },
        };
        Ok(Some(Archive { store, location }))
    }

    /// Whether an archive can live at `location`, checked before a command
    /// measures so a typo costs no measurement: a SQLite file's directory
    /// must exist; a PostgreSQL URL must parse and carry no password.  The
    /// server is not contacted.
    pub fn check_location(location: impl AsRef<OsStr>) -> Result<()> {
        match Location::parse(location) {
            Location::Sqlite(p) => Archive::check_directory(&p),
            Location::Postgres(url) => crate::store::postgres::check(&url),
        }
    }

    /// Whether a SQLite archive can live at `path` without creating
    /// directories: its directory must exist.
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
    /// A default that is a PostgreSQL URL (`PATHSONDE_ARCHIVE`) is opened
    /// as it is.
    pub fn open_default(location: impl AsRef<OsStr>) -> Result<Archive> {
        let location = Location::parse(location);
        if let Location::Sqlite(path) = &location {
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir).map_err(|e| ArchiveError::Io {
                    path: path.display().to_string(),
                    message: format!("creating {}: {e}", dir.display()),
                })?;
            }
        }
        Archive::open_location(location)
    }

    /// Where this archive lives; its `Display` shows no password.
    pub fn location(&self) -> &Location {
        &self.location
    }

    /// Keeps one run: its row and its raw data in one transaction, so a
    /// crash at any point leaves either the whole run or nothing of it.
    pub fn save(&mut self, rec: &Record) -> Result<i64> {
        let run = RunData::from_record(rec)?;
        self.store.insert(&run).map(|(id, _)| id)
    }

    /// Keeps one run exactly as given (a fleet agent's, with its
    /// [`RunData::run_uuid`]): its id, and whether it was written now
    /// (`false` when that UUID was stored already: a retry stores nothing
    /// twice).
    pub fn save_run(&mut self, run: &RunData) -> Result<(i64, bool)> {
        self.store.insert(run)
    }

    /// The newest `limit` runs (optionally of one kind), newest first.
    pub fn list(&mut self, limit: usize, kind: Option<&str>) -> Result<Vec<Summary>> {
        self.store.list(limit, kind)
    }

    /// One run, whole.
    pub fn get(&mut self, id: i64) -> Result<Stored> {
        self.store.get(id)
    }

    /// One run exactly as stored (result text, raw bytes): what
    /// [`Archive::copy_into`] moves.
    pub fn fetch(&mut self, id: i64) -> Result<RunData> {
        self.store.fetch(id)
    }

    /// A run's raw data, `None` when it kept none.
    pub fn raw(&mut self, id: i64) -> Result<Option<serde_json::Value>> {
        self.store.get(id)?;
        self.store
            .raw_blob(id)?
            .map(|b| raw::decompress(&b))
            .transpose()
    }

    /// Removes one run and its raw data.
    pub fn remove(&mut self, id: i64) -> Result<()> {
        self.store.remove(id)
    }

    /// How many runs are kept.
    pub fn count(&mut self) -> Result<u64> {
        self.store.count()
    }

    /// The store's own consistency check: `"ok"` when sound (SQLite's
    /// `integrity_check`; PostgreSQL: no raw data without its run).
    pub fn integrity_check(&mut self) -> Result<String> {
        self.store.health_check()
    }

    /// Runs SQL on this connection (tests use it to inject a failure
    /// between a run's two inserts, or write rows as an older pathsonde).
    #[doc(hidden)]
    pub fn execute_batch_for_tests(&mut self, sql: &str) -> Result<()> {
        self.store.execute_batch(sql)
    }

    /// The schema version of the open archive.
    pub fn schema_version(&mut self) -> Result<i64> {
        self.store.schema_version()
    }
}
