//! From a `postgresql://` location to a connection configuration, the way
//! libpq would read it: the URL first, then the `PG*` environment for what
//! it leaves out, then the password from `PGPASSWORD` or the password file.
//!
//! The `postgres` crate parses URLs and `key=value` strings but reads
//! neither the environment nor `~/.pgpass`; this module adds the part of
//! libpq's behaviour pathsonde's users rely on: `PGHOST`, `PGPORT`,
//! `PGUSER`, `PGDATABASE`, `PGPASSWORD`, `PGPASSFILE` and `~/.pgpass`.
//! A URL that carries a password is refused: passwords never go on a
//! command line (where `ps` shows them) or in a config file.

use super::pgpass;
use super::tls;
use crate::location::redact;
use crate::{ArchiveError, Result};
use postgres::config::Host;
use std::time::Duration;

/// The socket directory Debian's libpq uses when no host is given.
pub(crate) const DEFAULT_SOCKET_DIR: &str = "/var/run/postgresql";

/// How long to wait for the server before giving up (unless the URL says,
/// with `connect_timeout`): a dead database must not hang a measurement.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A connection configuration and anything worth warning about.
pub(crate) struct Prepared {
    pub config: postgres::Config,
    /// What TLS the URL and environment ask for (`tls.rs`).
    pub tls: tls::Settings,
    /// e.g. a password file ignored for its permissions.
    pub warnings: Vec<String>,
}

const NO_PASSWORDS: &str =
    "the URL carries a password, and passwords never go on the command line \
     or in a config file: remove it and put it in ~/.pgpass (or the file PGPASSFILE names; \
     mode 0600) or in the PGPASSWORD environment variable (docs/fleet.md)";

/// The configuration for `url`, completed from `env` (a lookup of
/// environment variables, `std::env::var` outside tests).
pub(crate) fn prepare(url: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<Prepared> {
    let bad = |message: String| ArchiveError::BadLocation {
        location: redact(url),
        message,
    };
    let (rest, tls) = tls::split(url, env).map_err(bad)?;
    let mut config: postgres::Config = rest.parse().map_err(|e: postgres::Error| {
        let why = std::error::Error::source(&e)
            .map(|s| format!("{e}: {s}"))
            .unwrap_or_else(|| e.to_string());
        bad(format!("not a PostgreSQL URL libpq would accept ({why})"))
    })?;
    if config.get_password().is_some() {
        return Err(bad(NO_PASSWORDS.into()));
    }
    config.ssl_mode(tls::crate_mode(tls.mode));
    let env_set = |k: &str| env(k).filter(|v| !v.is_empty());
    if config.get_hosts().is_empty() && config.get_hostaddrs().is_empty() {
        let hosts = env_set("PGHOST").unwrap_or_else(|| DEFAULT_SOCKET_DIR.into());
        for h in hosts.split(',') {
            if h.starts_with('/') {
                config.host_path(h);
            } else {
                config.host(h);
            }
        }
    }
    if config.get_ports().is_empty() {
        if let Some(p) = env_set("PGPORT") {
            let port = p
                .parse::<u16>()
                .map_err(|_| bad(format!("PGPORT={p} is not a port number")))?;
            config.port(port);
        }
    }
    if config.get_user().is_none() {
        let user = env_set("PGUSER")
            .or_else(|| whoami::username().ok())
            .ok_or_else(|| bad("no user: give one in the URL (USER@HOST) or in PGUSER".into()))?;
        config.user(&user);
    }
    let user = config.get_user().unwrap_or_default().to_string();
    if config.get_dbname().is_none() {
        // libpq's default database is the user's name.
        let db = env_set("PGDATABASE").unwrap_or_else(|| user.clone());
        config.dbname(&db);
    }
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(CONNECT_TIMEOUT);
    }
    if config.get_application_name().is_none() {
        config.application_name("pathsonde");
    }
    let mut warnings = Vec::new();
    if let Some(pw) = env_set("PGPASSWORD") {
        config.password(pw);
    } else if let Some(file) = pgpass::file(env) {
        match pgpass::read(&file) {
            Ok(Some(text)) => {
                if let Some(pw) = pgpass::lookup(&text, &wanted(&config, &user)) {
                    config.password(pw);
                }
            }
            Ok(None) => {}
            Err(pgpass::Unfit::NotAFile) => warnings.push(format!(
                "password file {} is not a plain file: ignored",
                file.display()
            )),
            Err(pgpass::Unfit::Permissions(mode)) => warnings.push(format!(
                "password file {} has group or world access (mode {mode:04o}); permissions \
                 should be u=rw (0600) or less: ignored, as libpq does",
                file.display()
            )),
        }
    }
    Ok(Prepared {
        config,
        tls,
        warnings,
    })
}

/// What a password-file line must match for this connection: the first
/// host (a socket directory by its path, libpq's default one as
/// `localhost`), its port, the database and the user.
fn wanted(config: &postgres::Config, user: &str) -> pgpass::Wanted {
    let host = match config.get_hosts().first() {
        Some(Host::Tcp(h)) => h.clone(),
        Some(Host::Unix(p)) => {
            let p = p.display().to_string();
            let p = p.trim_end_matches('/');
            if p == DEFAULT_SOCKET_DIR || p == "/run/postgresql" {
                "localhost".to_string()
            } else {
                p.to_string()
            }
        }
        None => config
            .get_hostaddrs()
            .first()
            .map(|a| a.to_string())
            .unwrap_or_else(|| "localhost".into()),
    };
    pgpass::Wanted {
        host,
        port: config.get_ports().first().copied().unwrap_or(5432),
        database: config.get_dbname().unwrap_or(user).to_string(),
        user: user.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| m.get(k).cloned()
    }

    fn message(e: ArchiveError) -> String {
        e.to_string()
    }

    #[test]
    fn a_password_in_the_url_is_refused_and_never_shown() {
        for url in [
            "postgresql://agent:s3cret@db.example/archive",
            "postgresql://agent@db.example/archive?password=s3cret",
        ] {
            let e = message(prepare(url, &env_of(&[])).err().expect("refused"));
            assert!(!e.contains("s3cret"), "{e}");
            assert!(e.contains("~/.pgpass") && e.contains("PGPASSWORD"), "{e}");
        }
    }

    #[test]
    fn the_url_wins_over_the_environment() {
        let env = env_of(&[
            ("PGHOST", "/elsewhere"),
            ("PGPORT", "6000"),
            ("PGUSER", "other"),
            ("PGDATABASE", "otherdb"),
        ]);
        let p = prepare("postgresql://agent@db.example:5433/archive", &env).unwrap();
        let c = &p.config;
        assert_eq!(c.get_hosts(), &[Host::Tcp("db.example".into())]);
        assert_eq!(c.get_ports(), &[5433]);
        assert_eq!(c.get_user(), Some("agent"));
        assert_eq!(c.get_dbname(), Some("archive"));
        assert_eq!(c.get_password(), None);
        assert_eq!(c.get_connect_timeout(), Some(&CONNECT_TIMEOUT));
    }

    #[test]
    fn the_environment_fills_what_the_url_leaves_out() {
        let env = env_of(&[
            ("PGHOST", "/run/pathsonde-pg"),
            ("PGPORT", "6000"),
            ("PGUSER", "agent7"),
            ("PGDATABASE", "fleet"),
            ("PGPASSWORD", "from-env"),
        ]);
        let p = prepare("postgresql://", &env).unwrap();
        let c = &p.config;
        assert_eq!(c.get_hosts(), &[Host::Unix("/run/pathsonde-pg".into())]);
        assert_eq!(c.get_ports(), &[6000]);
        assert_eq!(c.get_user(), Some("agent7"));
        assert_eq!(c.get_dbname(), Some("fleet"));
        assert_eq!(c.get_password(), Some(&b"from-env"[..]));
        // Nothing set: Debian's socket directory, the database named as the user.
        let p = prepare("postgresql://u@", &env_of(&[])).unwrap();
        assert_eq!(
            p.config.get_hosts(),
            &[Host::Unix(DEFAULT_SOCKET_DIR.into())]
        );
        assert_eq!(p.config.get_dbname(), Some("u"));
        let e = prepare("postgresql://", &env_of(&[("PGPORT", "x")])).err();
        assert!(message(e.unwrap()).contains("PGPORT=x"));
    }

    #[test]
    fn a_socket_directory_in_the_query_is_a_unix_socket() {
        let p = prepare(
            "postgresql://pathsonde@/pathsonde_test?host=/run/pathsonde-pg",
            &env_of(&[]),
        )
        .unwrap();
        assert_eq!(
            p.config.get_hosts(),
            &[Host::Unix("/run/pathsonde-pg".into())]
        );
        assert_eq!(p.config.get_dbname(), Some("pathsonde_test"));
    }

    #[test]
    fn the_password_file_is_read_when_private_and_pgpassword_wins() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("pathsonde-connect-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("pgpass");
        std::fs::write(
            &file,
            "db.example:5432:archive:agent1:tcp-pw\n\
             /run/pg:5432:*:agent1:socket-pw\n\
             localhost:*:*:agent1:default-socket-pw\n",
        )
        .unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        let f = file.display().to_string();
        let env = env_of(&[("PGPASSFILE", &f)]);
        let pw = |url: &str, env: &dyn Fn(&str) -> Option<String>| {
            let p = prepare(url, env).unwrap();
            (
                p.config
                    .get_password()
                    .map(|b| String::from_utf8_lossy(b).into_owned()),
                p.warnings,
            )
        };
        assert_eq!(
            pw("postgresql://agent1@db.example/archive", &env)
                .0
                .as_deref(),
            Some("tcp-pw")
        );
        assert_eq!(
            pw("postgresql://agent1@/x?host=/run/pg", &env).0.as_deref(),
            Some("socket-pw")
        );
        assert_eq!(
            pw("postgresql://agent1@/x", &env).0.as_deref(),
            Some("default-socket-pw")
        );
        assert_eq!(pw("postgresql://agent2@db.example/archive", &env).0, None);
        let env_pw = env_of(&[("PGPASSFILE", &f), ("PGPASSWORD", "env-pw")]);
        assert_eq!(
            pw("postgresql://agent1@db.example/archive", &env_pw)
                .0
                .as_deref(),
            Some("env-pw")
        );
        // Readable by others: ignored with a warning that shows no password.
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        let (got, warnings) = pw("postgresql://agent1@db.example/archive", &env);
        assert_eq!(got, None);
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].contains("0644") && !warnings[0].contains("tcp-pw"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn every_sslmode_libpq_knows_is_read_and_a_bad_one_is_refused() {
        for (url, mode) in [
            ("postgresql://u@h/db?sslmode=disable", tls::Mode::Disable),
            ("postgresql://u@h/db?sslmode=prefer", tls::Mode::Prefer),
            ("postgresql://u@h/db?sslmode=require", tls::Mode::Require),
            ("postgresql://u@h/db?sslmode=verify-ca", tls::Mode::VerifyCa),
            (
                "postgresql://u@h/db?sslmode=verify-full&sslrootcert=/r.pem",
                tls::Mode::VerifyFull,
            ),
        ] {
            let p = prepare(url, &env_of(&[])).unwrap();
            assert_eq!(p.tls.mode, mode, "{url}");
            assert_eq!(p.config.get_ssl_mode(), tls::crate_mode(mode), "{url}");
        }
        let e = message(
            prepare("postgresql://u@h/db?sslmode=often", &env_of(&[]))
                .err()
                .expect("refused"),
        );
        assert!(e.contains("sslmode=often"), "{e}");
    }
}
