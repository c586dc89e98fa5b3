//! `pathsonde archive copy FROM TO`: every run of one archive into another
//! (SQLite or PostgreSQL, either way), nothing lost; running it again copies
//! nothing twice (`pathsonde_archive::Archive::copy_into`).

use super::archive_failure;
use crate::exit::Exit;
use crate::{output, Failure};
use clap::Subcommand;
use pathsonde_archive::{Archive, ArchiveError, Location};
use serde_json::json;
use std::path::PathBuf;

#[derive(Subcommand)]
pub enum ArchiveAdmin {
    /// Copy every run (result, raw data, times) from one archive to another:
    /// a SQLite file or a postgresql:// URL each (docs/fleet.md).  Runs the
    /// destination already has are skipped, so it can be run again.
    Copy {
        /// The archive to copy from (it must exist).
        from: PathBuf,
        /// The archive to copy into (created when missing).
        to: PathBuf,
        #[command(flatten)]
        json: crate::args::JsonFlags,
    },
}

impl ArchiveAdmin {
    pub fn json(&self) -> crate::args::JsonFlags {
        let ArchiveAdmin::Copy { json, .. } = self;
        *json
    }
}

pub fn run(cmd: ArchiveAdmin) -> Result<(), Failure> {
    let ArchiveAdmin::Copy { from, to, .. } = cmd;
    let (from, to) = (Location::parse(from), Location::parse(to));
    if from == to {
        return Err(Failure {
            exit: Exit::Usage,
            message: format!("archive copy: {from} is both the source and the destination"),
        });
    }
    Archive::check_location(&to).map_err(archive_failure)?;
    let mut src = Archive::open_existing(&from)
        .map_err(archive_failure)?
        .ok_or_else(|| {
            archive_failure(ArchiveError::NoLocation(format!(
                "there is no archive at {from} to copy"
            )))
        })?;
    let mut dst = Archive::open(&to).map_err(archive_failure)?;
    let report = src
        .copy_into(&mut dst, |from_id, to_id, copied| {
            output::event(
                "copied",
                json!({ "from_id": from_id, "to_id": to_id, "copied": copied }),
            );
        })
        .map_err(archive_failure)?;
    let v = json!({
        "from": from.to_string(),
        "to": to.to_string(),
        "copied": report.copied,
        "already_there": report.already_there,
    });
    output::result(&v, || {
        format!(
            "copied {} run(s) from {from} to {to}{}\n",
            report.copied,
            if report.already_there > 0 {
                format!(" ({} already there, skipped)", report.already_there)
            } else {
                String::new()
            }
        )
    });
    Ok(())
}
