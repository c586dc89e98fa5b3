//! An archived run's pictures written as files (`pathsonde plot ID`): an
//! SVG and/or a PNG per picture, named `run<ID>-<picture>` so that the
//! files of several runs can share a directory.

use crate::plot::{self, Plot};
use std::path::{Path, PathBuf};
use thiserror::Error;

/// Why a picture's file was not written; the message names the file.
#[derive(Debug, Error)]
pub enum WriteError {
    /// The directory could not be made.
    #[error("creating {}: {source}", .path.display())]
    Dir {
        /// The directory.
        path: PathBuf,
        /// What the system said.
        #[source]
        source: std::io::Error,
    },
    /// The picture could not be drawn.
    #[error("drawing {}: {reason}", .path.display())]
    Draw {
        /// The file it was for.
        path: PathBuf,
        /// What the drawing library said.
        #[source]
        reason: crate::DrawError,
    },
    /// The SVG file could not be written.
    #[error("writing {}: {source}", .path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// What the system said.
        #[source]
        source: std::io::Error,
    },
}

/// Writes run `id`'s `plots` into `out` (made if missing): for each, the
/// SVG file when `svg` and the PNG file when `png`.  Returns the files in
/// the order written; stops at the first that fails.
pub fn write(
    plots: &[Plot],
    id: i64,
    out: &Path,
    svg: bool,
    png: bool,
) -> Result<Vec<PathBuf>, WriteError> {
    std::fs::create_dir_all(out).map_err(|source| WriteError::Dir {
        path: out.to_path_buf(),
        source,
    })?;
    let mut files = Vec::new();
    for p in plots {
        let stem = out.join(format!("run{id}-{}", p.name));
        if svg {
            let f = stem.with_extension("svg");
            let text = plot::svg(p).map_err(|reason| WriteError::Draw {
                path: f.clone(),
                reason,
            })?;
            std::fs::write(&f, text.as_bytes()).map_err(|source| WriteError::Write {
                path: f.clone(),
                source,
            })?;
            files.push(f);
        }
        if png {
            let f = stem.with_extension("png");
            plot::png(p, &f).map_err(|reason| WriteError::Draw {
                path: f.clone(),
                reason,
            })?;
            files.push(f);
        }
    }
    Ok(files)
}
