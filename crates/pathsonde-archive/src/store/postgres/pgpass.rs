//! The password file libpq reads (`PGPASSFILE`, else `~/.pgpass`), so a
//! password never has to be on a command line, in a config or in a URL.
//!
//! Format, as libpq's: one `hostname:port:database:username:password` per
//! line; `#` starts a comment line; `*` in any of the first four fields
//! matches anything; `\:` and `\\` escape a colon and a backslash; an
//! unescaped colon ends the password.  The first matching line wins.  A
//! file readable or writable by group or others is ignored (libpq's rule,
//! with its warning), as is a missing one.

use std::path::{Path, PathBuf};

/// What a line must match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Wanted {
    pub host: String,
    pub port: u16,
    pub database: String,
    pub user: String,
}

/// A line's fields, unescaped; `None` for a comment or a line with fewer
/// than five fields.
fn fields(line: &str) -> Option<[String; 5]> {
    if line.starts_with('#') {
        return None;
    }
    let mut out: Vec<String> = vec![String::new()];
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let Some(n) = chars.next() {
                    out.last_mut()?.push(n);
                }
            }
            // The password ends at an unescaped colon too (libpq ignores
            // anything after it).
            ':' => out.push(String::new()),
            c => out.last_mut()?.push(c),
        }
    }
    if out.len() < 5 {
        return None;
    }
    out.truncate(5);
    out.try_into().ok()
}

/// The password of the first line of `text` matching `want`.
pub(crate) fn lookup(text: &str, want: &Wanted) -> Option<String> {
    let port = want.port.to_string();
    let wanted = [
        want.host.as_str(),
        port.as_str(),
        want.database.as_str(),
        want.user.as_str(),
    ];
    text.lines()
        .map(|l| l.trim_end_matches('\r'))
        .filter_map(fields)
        .find(|f| {
            f.iter()
                .zip(wanted)
                .all(|(have, w)| have == "*" || have == w)
        })
        .map(|[.., password]| password)
}

/// The password file to read: `$PGPASSFILE`, else `$HOME/.pgpass`.
pub(crate) fn file(env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    if let Some(p) = env("PGPASSFILE").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    env("HOME")
        .filter(|h| !h.is_empty())
        .map(|h| Path::new(&h).join(".pgpass"))
}

/// Why a password file is not read, when it exists but is unfit.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Unfit {
    NotAFile,
    /// Group or others may read or write it (its mode).
    Permissions(u32),
}

/// The text of the password file at `path`: `Ok(None)` when there is none,
/// `Err` when it exists but libpq would ignore it.
pub(crate) fn read(path: &Path) -> Result<Option<String>, Unfit> {
    use std::os::unix::fs::PermissionsExt;
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(_) => return Ok(None),
    };
    if !meta.is_file() {
        return Err(Unfit::NotAFile);
    }
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(Unfit::Permissions(mode));
    }
    Ok(std::fs::read_to_string(path).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn want(host: &str, port: u16, db: &str, user: &str) -> Wanted {
        Wanted {
            host: host.into(),
            port,
            database: db.into(),
            user: user.into(),
        }
    }

    #[test]
    fn first_matching_line_wins_with_wildcards() {
        let text = "# a comment\n\
                    db.example:5432:archive:agent1:one\n\
                    *:5432:archive:agent2:two\n\
                    *:*:*:agent1:fallback\n\
                    short:line\n";
        assert_eq!(
            lookup(text, &want("db.example", 5432, "archive", "agent1")).as_deref(),
            Some("one")
        );
        assert_eq!(
            lookup(text, &want("other", 5432, "archive", "agent1")).as_deref(),
            Some("fallback")
        );
        assert_eq!(
            lookup(text, &want("any", 5432, "archive", "agent2")).as_deref(),
            Some("two")
        );
        assert_eq!(lookup(text, &want("any", 5433, "archive", "agent2")), None);
        assert_eq!(lookup(text, &want("any", 5432, "x", "nobody")), None);
    }

    #[test]
    fn escapes_and_colons_in_the_password() {
        let text = "/run/pg\\:x:5432:db:u:pa\\:ss\\\\word\n*:*:*:v:a:b:c\n";
        assert_eq!(
            lookup(text, &want("/run/pg:x", 5432, "db", "u")).as_deref(),
            Some("pa:ss\\word")
        );
        // An unescaped colon ends the password, as in libpq.
        assert_eq!(lookup(text, &want("h", 1, "d", "v")).as_deref(), Some("a"));
        assert_eq!(
            lookup("*:*:*:*:crlf\r\n", &want("h", 1, "d", "u")).as_deref(),
            Some("crlf")
        );
    }

    #[test]
    fn the_file_location_and_its_permissions() {
        let env = |k: &str| match k {
            "PGPASSFILE" => Some("/x/pass".to_string()),
            "HOME" => Some("/home/u".to_string()),
            _ => None,
        };
        assert_eq!(file(&env), Some(PathBuf::from("/x/pass")));
        let env = |k: &str| (k == "HOME").then(|| "/home/u".to_string());
        assert_eq!(file(&env), Some(PathBuf::from("/home/u/.pgpass")));
        assert_eq!(file(&|_| None), None);

        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("pathsonde-pgpass-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("pgpass");
        std::fs::write(&p, "*:*:*:*:pw\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(read(&p), Err(Unfit::Permissions(0o644)));
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(read(&p), Ok(Some("*:*:*:*:pw\n".to_string())));
        assert_eq!(read(&dir.join("missing")), Ok(None));
        assert_eq!(read(&dir), Err(Unfit::NotAFile));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
