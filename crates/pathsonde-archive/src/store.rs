//! The store trait: the operations an archive needs from its database, so
//! that [`crate::Archive`] and every command work the same over a SQLite
//! file ([`sqlite`]) or a PostgreSQL database ([`postgres`]).
//!
//! A store keeps tables beside `runs` as the schema grows (a later
//! `leases` and `skips`, migration 4 in [`crate::schema`], used by
//! pathsonde-fleet over its own connection); this trait carries only what
//! the archive of runs needs.

pub(crate) mod postgres;
pub(crate) mod sqlite;

use crate::record::{RunData, Stored, Summary};
use crate::Result;

/// One archive's database.  Every method that writes does so in one
/// transaction: a failure or a crash leaves all of it or none of it.
pub trait Store: Send {
    /// Writes one run (its row and raw data) in one transaction: its id,
    /// and whether it was written now (`false`: a run with the same
    /// [`RunData::run_uuid`] was stored already, and is what the id names).
    fn insert(&mut self, run: &RunData) -> Result<(i64, bool)>;
    /// The newest `limit` runs (optionally of one kind), newest first.
    fn list(&mut self, limit: usize, kind: Option<&str>) -> Result<Vec<Summary>>;
    /// Every run's id, oldest first.
    fn ids(&mut self) -> Result<Vec<i64>>;
    /// One run without its raw bytes; [`crate::ArchiveError::NoSuchRun`]
    /// when there is none.
    fn get(&mut self, id: i64) -> Result<Stored>;
    /// One run exactly as stored, raw bytes included.
    fn fetch(&mut self, id: i64) -> Result<RunData>;
    /// The compressed raw data of run `id` (which must exist), if it has any.
    fn raw_blob(&mut self, id: i64) -> Result<Option<Vec<u8>>>;
    /// The id of a run already stored with the same kind, target, start
    /// time and result text as `run` (so copying twice adds nothing).
    fn find_same(&mut self, run: &RunData) -> Result<Option<i64>>;
    /// Removes one run and its raw data.
    fn remove(&mut self, id: i64) -> Result<()>;
    /// How many runs are kept.
    fn count(&mut self) -> Result<u64>;
    /// The schema version the database is at.
    fn schema_version(&mut self) -> Result<i64>;
    /// The database's own consistency check: `"ok"` when sound.
    fn health_check(&mut self) -> Result<String>;
    /// Runs SQL on this connection (tests use it to inject failures and
    /// to write rows as an older pathsonde would have).
    #[doc(hidden)]
    fn execute_batch(&mut self, sql: &str) -> Result<()>;
}
