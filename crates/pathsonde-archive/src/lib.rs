//! pathsonde's results archive: every measurement a command makes is kept so
//! it can be listed, shown, exported, re-plotted and compared later without
//! re-running (flent's `.json.gz`, crusader's `.crr`).
//!
//! Two stores behind one [`Store`] trait, chosen by the location
//! ([`Location`]): a local SQLite file (the default), or a PostgreSQL
//! database (`postgresql://…`) that many hosts share (docs/fleet.md).
//!
//! What makes it last, on both stores:
//! - **One transaction per run.**  A run's row and its raw data are written
//!   together or not at all; a process killed mid-write (SIGKILL, power cut)
//!   leaves the previous state, never half a run.
//! - **Durable commits.**  SQLite uses the WAL journal with
//!   `synchronous=FULL`; PostgreSQL its own WAL.  A committed run survives
//!   the writer dying at any instant.
//! - **One schema definition, ordered migrations** ([`schema`]), each in its
//!   own transaction, so an archive written by an older pathsonde is
//!   upgraded in place and one written by a newer pathsonde is refused
//!   ([`ArchiveError::TooNew`]), not damaged.
//! - **Bounded raw data.**  Observations and truth series are stored gzip-
//!   compressed beside the result, up to [`MAX_RAW_BYTES`] compressed; above
//!   that the run is kept without them and says so.
//!
//! The result itself is the exact JSON text of the object the command
//! prints under `--json`, so `pathsonde show ID --json` gives back what the
//! run printed, whichever store holds it.

// Nothing here needs `unsafe`; forbidding it keeps it that way.
#![forbid(unsafe_code)]

mod archive;
mod location;
mod path;
mod raw;
mod record;
pub mod schema;
mod store;
#[cfg(feature = "test-support")]
#[doc(hidden)]
pub mod testing;

pub use archive::{Archive, CopyReport};
pub use location::Location;
pub use path::{default_path, ENV_ARCHIVE};
/// The PostgreSQL client the archive uses, for crates that share its
/// database (pathsonde-fleet's leases) without a second copy of it.
pub use postgres;
pub use raw::runs as raw_runs;
pub use raw::{compress, decompress, started_ago, MAX_RAW_BYTES, MAX_RAW_UNCOMPRESSED};
pub use record::{RawBlob, RawInfo, Record, RunData, Stored, Summary};
pub use schema::SCHEMA_VERSION;
pub use store::sqlite::create_at_version;
pub use store::Store;

/// A connection to the PostgreSQL database at `url`, configured exactly as
/// an archive's (libpq's URL forms, the `PG*` environment, `~/.pgpass`;
/// a URL carrying a password is refused): for pathsonde-fleet's leases and
/// skips, which live beside the runs (docs/fleet.md).
pub fn connect_postgres(url: &str) -> Result<postgres::Client> {
    store::postgres::connect_plain(url)
}

/// What can go wrong with the archive.  No variant ever carries a password:
/// PostgreSQL locations are shown redacted ([`Location`]'s `Display`).
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    #[error("archive {path}: {source}")]
    Sqlite {
        path: String,
        #[source]
        source: rusqlite::Error,
    },
    /// A PostgreSQL error, with the (password-free) location and the
    /// server's own message, which the client library's `Display` omits.
    #[error("archive {location}: {message}")]
    Postgres {
        location: String,
        message: String,
        #[source]
        source: postgres::Error,
    },
    /// A PostgreSQL location that cannot be used as given (a password in
    /// it, a TLS mode this build cannot honour, a malformed URL).
    #[error("archive {location}: {message}")]
    BadLocation { location: String, message: String },
    #[error("archive {path}: {message}")]
    Io { path: String, message: String },
    #[error("archive {path} has schema version {found}, newer than this pathsonde understands ({supported}); use a newer pathsonde")]
    TooNew {
        path: String,
        found: i64,
        supported: i64,
    },
    #[error("no run {0} in the archive (see `pathsonde history`)")]
    NoSuchRun(i64),
    #[error("{0}")]
    Invalid(String),
    #[error("no archive location: {0} (pass --archive PATH)")]
    NoLocation(String),
    /// The file (or database schema) belongs to some other program: left
    /// as it was.
    #[error("{path} is not a pathsonde archive ({why}); left untouched: pass --archive with another location")]
    Foreign { path: String, why: String },
}

pub type Result<T> = std::result::Result<T, ArchiveError>;
