//! Where an archive lives, as the user wrote it: a SQLite file path, or a
//! PostgreSQL URL (`postgresql://` or `postgres://`, any form libpq
//! accepts, a unix-socket directory as `?host=/dir` included).
//!
//! A location is shown (in messages, `history`, the "saved as" hint) only
//! through its `Display`, which hides any password, so one pasted by
//! mistake is not echoed back; opening such a location is refused anyway
//! (passwords belong in `~/.pgpass` or `PGPASSWORD`, docs/fleet.md).

use std::ffi::OsStr;
use std::fmt;
use std::path::{Path, PathBuf};

/// An archive location.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// A SQLite file.
    Sqlite(PathBuf),
    /// A PostgreSQL connection URL, as given.
    Postgres(String),
}

impl Location {
    /// A PostgreSQL location when `s` is a `postgresql://` or `postgres://`
    /// URL (scheme in any case), else a SQLite file path.
    pub fn parse(s: impl AsRef<OsStr>) -> Location {
        let s = s.as_ref();
        match s.to_str() {
            Some(t) if is_postgres_url(t) => Location::Postgres(t.to_string()),
            _ => Location::Sqlite(PathBuf::from(s)),
        }
    }

    pub fn is_postgres(&self) -> bool {
        matches!(self, Location::Postgres(_))
    }

    /// The file, for a SQLite location.
    pub fn sqlite_path(&self) -> Option<&Path> {
        match self {
            Location::Sqlite(p) => Some(p),
            Location::Postgres(_) => None,
        }
    }
}

/// The location as the user wrote it (a file path or the URL as given),
/// for handing on to [`crate::Archive::open`]; never for display.
impl AsRef<OsStr> for Location {
    fn as_ref(&self) -> &OsStr {
        match self {
            Location::Sqlite(p) => p.as_os_str(),
            Location::Postgres(url) => OsStr::new(url),
        }
    }
}

fn is_postgres_url(s: &str) -> bool {
    let lower = s.get(..13).unwrap_or(s).to_ascii_lowercase();
    lower.starts_with("postgresql://") || lower.starts_with("postgres://")
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Sqlite(p) => write!(f, "{}", p.display()),
            Location::Postgres(url) => f.write_str(&redact(url)),
        }
    }
}

/// `url` with the password of its user-info (`user:secret@`) and any
/// `password=` parameter replaced by `***`.
pub(crate) fn redact(url: &str) -> String {
    let (head, query) = match url.split_once('?') {
        Some((h, q)) => (h, Some(q)),
        None => (url, None),
    };
    let mut out = String::with_capacity(url.len());
    match head.split_once("://") {
        Some((scheme, rest)) => {
            let (authority, path) = match rest.find('/') {
                Some(i) => rest.split_at(i),
                None => (rest, ""),
            };
            out.push_str(scheme);
            out.push_str("://");
            match authority.rsplit_once('@') {
                Some((userinfo, hosts)) => {
                    match userinfo.split_once(':') {
                        Some((user, _)) => {
                            out.push_str(user);
                            out.push_str(":***");
                        }
                        None => out.push_str(userinfo),
                    }
                    out.push('@');
                    out.push_str(hosts);
                }
                None => out.push_str(authority),
            }
            out.push_str(path);
        }
        None => out.push_str(head),
    }
    if let Some(q) = query {
        out.push('?');
        let params: Vec<String> = q
            .split('&')
            .map(|p| match p.split_once('=') {
                Some((k, _)) if k.eq_ignore_ascii_case("password") => format!("{k}=***"),
                _ => p.to_string(),
            })
            .collect();
        out.push_str(&params.join("&"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_postgres_and_everything_else_a_file() {
        for s in [
            "postgresql://u@h/db",
            "postgres://h/db",
            "POSTGRESQL://u@/db?host=/run/pg",
            "postgresql:///db?host=/tmp",
        ] {
            assert!(Location::parse(s).is_postgres(), "{s}");
        }
        for s in ["a.sqlite", "/tmp/x/archive.sqlite", "postgresql", "pg://x"] {
            assert_eq!(Location::parse(s), Location::Sqlite(PathBuf::from(s)));
        }
    }

    #[test]
    fn passwords_never_show() {
        let cases = [
            (
                "postgresql://u:secret@h:5432/db",
                "postgresql://u:***@h:5432/db",
            ),
            (
                "postgres://u:s%40c@h/db?sslmode=disable",
                "postgres://u:***@h/db?sslmode=disable",
            ),
            (
                "postgresql://u@h/db?password=secret&host=/d",
                "postgresql://u@h/db?password=***&host=/d",
            ),
            (
                "postgresql://u@/db?host=/run/pg",
                "postgresql://u@/db?host=/run/pg",
            ),
            ("postgresql://h", "postgresql://h"),
        ];
        for (given, shown) in cases {
            let l = Location::parse(given);
            assert_eq!(l.to_string(), shown);
            assert!(!l.to_string().contains("secret"));
        }
    }
}
