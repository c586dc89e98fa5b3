//! Where the archive lives when nobody says: the XDG data directory.

use crate::{ArchiveError, Result};
use std::path::PathBuf;

/// Environment variable naming the archive file; `--archive PATH` wins over
/// it, and it wins over the per-user default.  Tests set it so that they never
/// touch a person's real archive.
pub const ENV_ARCHIVE: &str = "PATHSONDE_ARCHIVE";

/// The archive file to use when `--archive` is not given: `$PATHSONDE_ARCHIVE`,
/// else `$XDG_DATA_HOME/pathsonde/archive.sqlite`, else
/// `$HOME/.local/share/pathsonde/archive.sqlite` (the XDG base-directory
/// default, the same place the `directories` crate would pick on Linux).
pub fn default_path() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os(ENV_ARCHIVE).filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    let data = match std::env::var_os("XDG_DATA_HOME").filter(|p| !p.is_empty()) {
        Some(d) if PathBuf::from(&d).is_absolute() => PathBuf::from(d),
        _ => {
            let home = std::env::var_os("HOME")
                .filter(|h| !h.is_empty())
                .ok_or_else(|| {
                    ArchiveError::NoLocation("neither XDG_DATA_HOME nor HOME is set".into())
                })?;
            PathBuf::from(home).join(".local").join("share")
        }
    };
    Ok(data.join("pathsonde").join("archive.sqlite"))
}
