//! The single-host agent's TOML config (docs/monitoring.md): its peers,
//! their methods and schedules, where to serve metrics and where to archive.
//! Read and checked here, every mistake an error naming the field, so the
//! CLI only maps them to its usage exit; with a mesh only its listen,
//! timeout and archive are used.

use pathsonde_core::methods::registry::MethodSettings;
use pathsonde_core::units::UnitError;
use pathsonde_core::{BitRate, DurationNs};
use serde::Deserialize;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The config file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Where to serve `/metrics` (default 127.0.0.1:9310).
    pub listen: Option<SocketAddr>,
    /// Default method for every peer (default fac2).
    pub method: Option<String>,
    /// Default time between two measurements of one peer, e.g. "5m" (default "60s").
    pub interval: Option<String>,
    /// Up to this much is added to or taken from each interval at random (default "0s").
    pub jitter: Option<String>,
    /// Default first-train rate, e.g. "1G".
    pub max_rate: Option<String>,
    /// Default tight-link capacity the user knows, e.g. "300M" (as
    /// `abw --known-capacity`); unset: the methods measure it.
    pub known_capacity: Option<String>,
    /// Seconds to wait for any answer (default 3).
    pub timeout: Option<f64>,
    /// Where to archive results: a SQLite file or a PostgreSQL URL without
    /// a password (docs/fleet.md); `--archive` wins over it, and it over
    /// `$PATHSONDE_ARCHIVE`.
    pub archive: Option<String>,
    #[serde(rename = "peer", default)]
    pub peers: Vec<PeerConfig>,
}

impl Config {
    /// Where to serve `/metrics`: the command line's `flag`, else the
    /// config's `listen`, else [`super::DEFAULT_LISTEN`].
    pub fn listen(&self, flag: Option<SocketAddr>) -> SocketAddr {
        flag.or(self.listen)
            .unwrap_or_else(|| super::DEFAULT_LISTEN.parse().expect("a valid address"))
    }

    /// How long to wait for any answer (default 3 s).
    pub fn timeout(&self) -> Duration {
        self.timeout
            .map_or(Duration::from_secs(3), Duration::from_secs_f64)
    }
}

/// One `[[peer]]` as written; unset fields take the config's defaults.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PeerConfig {
    /// The `peer` label (default host:port).
    pub name: Option<String>,
    pub host: String,
    /// Default 5310.
    pub port: Option<u16>,
    pub method: Option<String>,
    pub interval: Option<String>,
    pub jitter: Option<String>,
    pub max_rate: Option<String>,
    pub known_capacity: Option<String>,
}

/// One peer, ready to measure.
#[derive(Debug, Clone)]
pub struct Peer {
    pub name: String,
    pub host: String,
    pub port: u16,
    pub method: String,
    pub interval: Duration,
    pub jitter: Duration,
    /// What the peer's method is told (max rate, known capacity).
    pub settings: MethodSettings,
    /// The key the peer's `serve` asks for, when it asks for one.
    pub key: Option<pathsonde_net::auth::Key>,
}

/// A rate field that is not a positive rate.
#[derive(Debug, thiserror::Error)]
pub enum RateError {
    #[error(transparent)]
    Unit(#[from] UnitError),
    #[error("rate '{0}' must be positive")]
    NotPositive(String),
}

/// What is wrong with a config file; each says which file or field.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("reading {}: {source}", .path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: {source}", .path.display())]
    Parse {
        path: PathBuf,
        #[source]
        source: toml::de::Error,
    },
    #[error("{}: no [[peer]] to measure", .0.display())]
    NoPeers(PathBuf),
    #[error("{}: [[peer]] entries and --mesh do not mix: the mesh file names the peers", .0.display())]
    PeersWithMesh(PathBuf),
    #[error("timeout {0} must be in (0, 3600] seconds")]
    Timeout(f64),
    #[error("{field}: {source}")]
    Duration {
        field: String,
        #[source]
        source: UnitError,
    },
    #[error("peer {0}: interval below 100ms")]
    IntervalTooShort(usize),
    #[error("peer {peer} {field}: {source}")]
    Rate {
        peer: usize,
        field: &'static str,
        #[source]
        source: RateError,
    },
    #[error("peer {name} with method {method} is listed twice")]
    Twice { name: String, method: String },
}

/// A config error, or the caller's refusal of a peer's method (its own
/// error type, so its exit code and words are the caller's).
#[derive(Debug, thiserror::Error)]
pub enum LoadError<E> {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("{0}")]
    Method(E),
}

fn read(path: &Path) -> Result<Config, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    toml::from_str(&text).map_err(|source| ConfigError::Parse {
        path: path.to_path_buf(),
        source,
    })
}

fn duration(field: String, s: &str) -> Result<Duration, ConfigError> {
    let d: DurationNs = s
        .parse()
        .map_err(|source| ConfigError::Duration { field, source })?;
    Ok(d.to_std())
}

fn positive_rate(s: &str) -> Result<BitRate, RateError> {
    let r: BitRate = s.parse()?;
    if !r.is_positive() {
        return Err(RateError::NotPositive(s.to_string()));
    }
    Ok(r)
}

/// The config's listen, timeout and archive for `agent --mesh` (its peers
/// belong to the single-host agent: with a mesh they must be absent).
pub fn load_for_mesh(path: &Path) -> Result<Config, ConfigError> {
    let cfg = read(path)?;
    if !cfg.peers.is_empty() {
        return Err(ConfigError::PeersWithMesh(path.to_path_buf()));
    }
    Ok(cfg)
}

/// Reads and checks the config and its peers.  `settings` makes a peer's
/// method settings from its max rate and known capacity (the CLI's
/// defaults); `check` refuses an unknown method now, not at the first
/// measurement.  Checks run peer by peer, in the file's order, so the first
/// mistake is the one reported.
pub fn load<E>(
    path: &Path,
    default_port: u16,
    settings: impl Fn(Option<BitRate>, Option<BitRate>) -> MethodSettings,
    mut check: impl FnMut(&str, &MethodSettings) -> Result<(), E>,
) -> Result<(Config, Vec<Peer>), LoadError<E>> {
    let cfg = read(path)?;
    if cfg.peers.is_empty() {
        return Err(ConfigError::NoPeers(path.to_path_buf()).into());
    }
    if let Some(t) = cfg.timeout {
        if !(t.is_finite() && t > 0.0 && t <= 3600.0) {
            return Err(ConfigError::Timeout(t).into());
        }
    }
    let mut peers = Vec::new();
    for (i, p) in cfg.peers.iter().enumerate() {
        let port = p.port.unwrap_or(default_port);
        let interval = match p.interval.as_ref().or(cfg.interval.as_ref()) {
            Some(s) => duration(format!("peer {i} interval"), s)?,
            None => Duration::from_secs(60),
        };
        let jitter = match p.jitter.as_ref().or(cfg.jitter.as_ref()) {
            Some(s) => duration(format!("peer {i} jitter"), s)?,
            None => Duration::ZERO,
        };
        if interval < Duration::from_millis(100) {
            return Err(ConfigError::IntervalTooShort(i).into());
        }
        let rate = |field: &'static str, v: Option<&String>| {
            v.map(|s| {
                positive_rate(s).map_err(|source| ConfigError::Rate {
                    peer: i,
                    field,
                    source,
                })
            })
            .transpose()
        };
        let max_rate = rate("max_rate", p.max_rate.as_ref().or(cfg.max_rate.as_ref()))?;
        let known_capacity = rate(
            "known_capacity",
            p.known_capacity.as_ref().or(cfg.known_capacity.as_ref()),
        )?;
        let settings = settings(max_rate, known_capacity);
        let method = p
            .method
            .clone()
            .or_else(|| cfg.method.clone())
            .unwrap_or_else(|| "fac2".into());
        check(&method, &settings).map_err(LoadError::Method)?;
        let name = p
            .name
            .clone()
            .unwrap_or_else(|| format!("{}:{port}", p.host));
        if peers
            .iter()
            .any(|q: &Peer| q.name == name && q.method == method)
        {
            return Err(ConfigError::Twice { name, method }.into());
        }
        peers.push(Peer {
            name,
            host: p.host.clone(),
            port,
            method,
            interval,
            jitter,
            settings,
            key: None,
        });
    }
    Ok((cfg, peers))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The config shown in docs/monitoring.md loads as it says: `5m` and `1m`
    /// are minutes (core's duration grammar, docs/units.md).
    #[test]
    fn the_documented_config_loads_with_minutes() {
        let doc = include_str!("../../../../docs/monitoring.md");
        let start = doc.find("```toml\n").expect("a toml block") + "```toml\n".len();
        let body = &doc[start..start + doc[start..].find("```").unwrap()];
        let path =
            std::env::temp_dir().join(format!("pathsonde-agent-doc-{}.toml", std::process::id()));
        std::fs::write(&path, body).unwrap();
        let settings = |max_rate: Option<BitRate>, known_capacity| MethodSettings {
            max_bytes: None,
            precision: None,
            max_rate: max_rate.unwrap_or(BitRate::from_bps(1e9)),
            packet_size: pathsonde_core::Bytes(1500),
            clock_resolution: DurationNs::from_ns(1),
            known_capacity,
        };
        let loaded = load(&path, 5310, settings, |_, _| {
            Ok::<(), std::convert::Infallible>(())
        });
        let _ = std::fs::remove_file(&path);
        let (_, peers) = loaded.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(peers.len(), 2);
        assert_eq!(peers[0].interval, Duration::from_secs(300));
        assert_eq!(peers[0].jitter, Duration::from_secs(30));
        assert_eq!(peers[1].interval, Duration::from_secs(60));
    }
}
