//! `pathsonde archive copy FROM TO`: every run of one archive into another
//! (SQLite or PostgreSQL, either way), nothing lost; running it again copies
//! nothing twice (`pathsonde_archive::Archive::copy_into`).  And `archive
//! init LOCATION`: create or upgrade an archive's schema, which on a shared
//! PostgreSQL archive its owner does before the agents' roles use it.

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
    /// Create an archive, or bring its schema up to this pathsonde's: on a
    /// shared PostgreSQL archive, run by the role that owns it, before the
    /// agents' roles use it (docs/fleet.md).
    Init {
        /// A SQLite file or a postgresql:// URL.
        location: PathBuf,
        #[command(flatten)]
        json: crate::args::JsonFlags,
    },
}

impl ArchiveAdmin {
    pub fn json(&self) -> crate::args::JsonFlags {
        match self {
            ArchiveAdmin::Copy { json, .. } | ArchiveAdmin::Init { json, .. } => *json,
        }
    }
}

pub fn run(cmd: ArchiveAdmin) -> Result<(), Failure> {
    match cmd {
        ArchiveAdmin::Copy { from, to, .. } => copy(from, to),
        ArchiveAdmin::Init { location, .. } => init(location),
    }
}

fn init(location: PathBuf) -> Result<(), Failure> {
    let location = Location::parse(location);
    Archive::check_location(&location).map_err(archive_failure)?;
    let mut a = Archive::open(&location).map_err(archive_failure)?;
    let version = a.schema_version().map_err(archive_failure)?;
    let runs = a.count().map_err(archive_failure)?;
    let v = json!({ "archive": location.to_string(), "schema_version": version, "runs": runs });
    output::result(&v, || {
        format!("archive {location}: schema version {version}, {runs} run(s)\n")
    });
    Ok(())
}

fn copy(from: PathBuf, to: PathBuf) -> Result<(), Failure> {
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
