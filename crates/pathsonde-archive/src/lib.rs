//! pathsonde's results archive: every measurement a command makes is kept in
//! one local SQLite file so it can be listed, shown, exported, re-plotted and
//! compared later without re-running (flent's `.json.gz`, crusader's `.crr`).
//!
//! What makes it last:
//! - **One transaction per run.**  A run's row and its raw data are written
//!   together or not at all; a process killed mid-write (SIGKILL, power cut)
//!   leaves the previous state, never half a run.
//! - **WAL journal, `synchronous=FULL`.**  A committed run survives the
//!   writer dying at any instant; readers never see a torn page.
//! - **A schema version table and ordered migrations**, each in its own
//!   transaction, so an archive written by an older pathsonde is upgraded in
//!   place and one written by a newer pathsonde is refused, not damaged.
//! - **Bounded raw data.**  Observations and truth series are stored gzip-
//!   compressed beside the result, up to [`MAX_RAW_BYTES`] compressed; above
//!   that the run is kept without them and says so.
//!
//! The result itself is the exact JSON object the command prints under
//! `--json`, so `pathsonde show ID --json` gives back what the run printed.

mod path;
mod raw;
mod schema;
mod store;

pub use path::{default_path, ENV_ARCHIVE};
pub use raw::{compress, decompress, MAX_RAW_BYTES, MAX_RAW_UNCOMPRESSED};
pub use schema::{create_at_version, SCHEMA_VERSION};
pub use store::{Archive, RawInfo, Record, Stored, Summary};

/// What can go wrong with the archive.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    #[error("archive {path}: {source}")]
    Sqlite {
        path: String,
        #[source]
        source: rusqlite::Error,
    },
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
    /// The file is an SQLite database of some other program (or not a
    /// database at all): left as it was.
    #[error("{path} is not a pathsonde archive ({why}); left untouched: pass --archive with another file")]
    Foreign { path: String, why: String },
}

pub type Result<T> = std::result::Result<T, ArchiveError>;
