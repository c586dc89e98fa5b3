//! `pathsonde archive copy FROM TO`: every run of one archive into another,
//! either store to either store, with nothing lost (the result's JSON text,
//! the software that wrote it, timestamps, raw bytes and notes as stored).
//!
//! Copying is idempotent: a run already in the destination (same kind,
//! target, start time and result text) is counted and skipped, so a copy
//! interrupted half-way is finished by running it again.  Each run is
//! written in its own transaction; the destination gives it a new id
//! (ids are per archive: a shared archive already has runs of its own).

use super::Archive;
use crate::Result;
use serde::Serialize;

/// What a copy did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct CopyReport {
    /// Runs written to the destination.
    pub copied: u64,
    /// Runs the destination already had.
    pub already_there: u64,
}

impl Archive {
    /// Copies every run of this archive into `to`, oldest first, calling
    /// `progress(source_id, destination_id, copied)` after each.
    pub fn copy_into(
        &mut self,
        to: &mut Archive,
        mut progress: impl FnMut(i64, i64, bool),
    ) -> Result<CopyReport> {
        let mut report = CopyReport::default();
        for id in self.store.ids()? {
            let run = self.store.fetch(id)?;
            match to.store.find_same(&run)? {
                Some(there) => {
                    report.already_there += 1;
                    progress(id, there, false);
                }
                None => {
                    let (new, _) = to.store.insert(&run)?;
                    report.copied += 1;
                    progress(id, new, true);
                }
            }
        }
        Ok(report)
    }
}
