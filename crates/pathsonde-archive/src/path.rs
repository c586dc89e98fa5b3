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

#[cfg(test)]
mod tests {
    use super::*;

    /// One test for every variable, so no other test sees them changed.
    #[test]
    fn precedence_of_the_locations() {
        let saved: Vec<_> = [ENV_ARCHIVE, "XDG_DATA_HOME", "HOME"]
            .iter()
            .map(|k| (*k, std::env::var_os(k)))
            .collect();
        std::env::set_var(ENV_ARCHIVE, "/tmp/x/a.sqlite");
        std::env::set_var("XDG_DATA_HOME", "/data");
        std::env::set_var("HOME", "/home/u");
        assert_eq!(default_path().unwrap(), PathBuf::from("/tmp/x/a.sqlite"));
        std::env::remove_var(ENV_ARCHIVE);
        assert_eq!(
            default_path().unwrap(),
            PathBuf::from("/data/pathsonde/archive.sqlite")
        );
        // A relative XDG_DATA_HOME is invalid by the spec and ignored.
        std::env::set_var("XDG_DATA_HOME", "rel");
        assert_eq!(
            default_path().unwrap(),
            PathBuf::from("/home/u/.local/share/pathsonde/archive.sqlite")
        );
        std::env::remove_var("XDG_DATA_HOME");
        std::env::remove_var("HOME");
        assert!(matches!(default_path(), Err(ArchiveError::NoLocation(_))));
        for (k, v) in saved {
            match v {
                Some(v) => std::env::set_var(k, v),
                None => std::env::remove_var(k),
            }
        }
    }
}
