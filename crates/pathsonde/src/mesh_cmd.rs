//! `pathsonde mesh --archive URL [--json] [--html FILE]`: the latest
//! result of every source→destination pair a fleet measured (runs of kind
//! `mesh`, written by `agent --mesh`), as a matrix (docs/fleet.md).
//!
//! Glue: picking the cells from the archive (`pathsonde_render::mesh_view::
//! read`) and drawing them (text, JSON, the HTML heat map) are
//! `pathsonde_render::mesh_view`'s; here the archive is opened and the
//! result written.  It reads any archive, SQLite or PostgreSQL, and creates
//! nothing.

use crate::archive_cmd::{archive_failure, archive_location};
use crate::{output, Failure};
use clap::Args;
use pathsonde_archive::Archive;
use pathsonde_render::mesh_view::{self, read::ReadError};
use std::path::PathBuf;

#[derive(Args)]
pub struct MeshArgs {
    #[command(flatten)]
    pub json: crate::args::JsonFlags,
    #[command(flatten)]
    pub archive: crate::args::ArchiveFlag,
    /// Also write a self-contained HTML heat map of the matrix here.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// How many of the newest mesh runs to look through for each pair's latest.
    #[arg(long, default_value_t = 10_000, value_name = "N")]
    pub scan: usize,
}

pub fn run(args: &MeshArgs) -> Result<(), Failure> {
    let location = archive_location()?;
    let mut archive = Archive::open_existing(&location).map_err(archive_failure)?;
    let url = location
        .is_postgres()
        .then(|| location.as_ref().to_str().expect("a URL is text"));
    let m = mesh_view::read::read(archive.as_mut(), location.to_string(), args.scan, url).map_err(
        |e| match e {
            ReadError::Archive(e) => archive_failure(e),
            e @ ReadError::Skips(_) => Failure {
                exit: crate::exit::Exit::Internal,
                message: e.to_string(),
            },
        },
    )?;
    if let Some(path) = &args.html {
        std::fs::write(path, mesh_view::html(&m)).map_err(|e| Failure {
            exit: crate::exit::Exit::Internal,
            message: format!("writing {}: {e}", path.display()),
        })?;
        output::event("html", serde_json::json!({ "path": path }));
    }
    let mut value = serde_json::to_value(&m).expect("the matrix is JSON");
    if let (Some(path), Some(o)) = (&args.html, value.as_object_mut()) {
        o.insert("html".into(), serde_json::json!(path));
    }
    output::result(&value, || {
        let mut s = mesh_view::text(&m);
        if let Some(p) = &args.html {
            s.push_str(&format!("heat map written to {}\n", p.display()));
        }
        s
    });
    Ok(())
}
