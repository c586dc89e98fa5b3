//! `pathsonde serve`: the server's options (limits, authentication, allow
//! list; docs/security.md) and the client's `--key-file`.

use crate::args;
use crate::exit::Exit;
use crate::Failure;
use clap::Args;
use pathsonde_core::{BitRate, Bytes, DurationNs};
use pathsonde_net::allow::AllowList;
use pathsonde_net::auth::{self, Key};
use pathsonde_net::limits::Limits;
use pathsonde_net::{Server, ServerConfig};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// The server's security options.  Defaults are safe for a server left
/// running on a public address (docs/security.md says why each).
#[derive(Args, Clone, Debug)]
pub(crate) struct ServeOptions {
    /// Require clients to authenticate with a key from this file (lines of
    /// `<key-id> <hex secret>`, mode 600).  Without it anyone allowed may measure.
    #[arg(long, value_name = "PATH")]
    pub(crate) key_file: Option<PathBuf>,
    /// Only these client addresses may connect: comma-separated addresses
    /// or CIDR blocks (10.0.0.0/8,2001:db8::/32); repeatable.  Default: any.
    #[arg(long, value_name = "CIDRS")]
    pub(crate) allow: Vec<String>,
    /// Longest a session may last.
    #[arg(long, default_value = "60s")]
    pub(crate) max_duration: DurationNs,
    /// Fastest average rate a probe train may arrive at (bits/s; k, M, G).
    #[arg(long, default_value = "10G", value_parser = args::positive_rate)]
    pub(crate) max_rate: BitRate,
    /// Most probe bytes (IP) one session may send (1G = 10⁹ B; sizes as in docs/units.md).
    #[arg(long, default_value = "1G", value_parser = args::positive_size)]
    pub(crate) max_bytes: Bytes,
    /// Connections held at once, measuring or in the handshake; more are
    /// told "busy".  One session measures at a time.
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..=65536))]
    pub(crate) max_connections: u32,
    /// A new connection must finish its handshake and authentication within this.
    #[arg(long, default_value = "5s")]
    pub(crate) handshake_timeout: DurationNs,
    /// A session with no complete control message for this long is closed.
    #[arg(long, default_value = "30s")]
    pub(crate) idle_timeout: DurationNs,
    /// Largest control message a client may send (64k = 64,000 B; docs/units.md).
    #[arg(long, default_value = "64k", value_parser = args::positive_size)]
    pub(crate) max_control_message: Bytes,
}

fn bad_option(message: String) -> Failure {
    Failure {
        exit: Exit::Usage,
        message,
    }
}

impl ServeOptions {
    /// The server configuration these options describe.
    pub(crate) fn config(&self, addr: SocketAddr) -> Result<ServerConfig, Failure> {
        let mut cfg = ServerConfig::new(addr);
        let positive = |name: &str, d: DurationNs| {
            if d.ns() <= 0 {
                Err(bad_option(format!("--{name} must be positive")))
            } else {
                Ok(d.to_std())
            }
        };
        cfg.limits = Limits {
            max_duration: positive("max-duration", self.max_duration)?,
            max_rate: self.max_rate,
            max_bytes: self.max_bytes.get(),
            max_connections: self.max_connections as usize,
            max_control_message: usize::try_from(self.max_control_message.get())
                .unwrap_or(usize::MAX)
                .min(pathsonde_wire::control::MAX_FRAME),
        };
        cfg.handshake_timeout = positive("handshake-timeout", self.handshake_timeout)?;
        cfg.idle_timeout = positive("idle-timeout", self.idle_timeout)?;
        if !self.allow.is_empty() {
            cfg.allow = AllowList::parse(&self.allow.join(","))
                .map_err(|e| bad_option(format!("--allow: {e}")))?;
        }
        if let Some(path) = &self.key_file {
            cfg.keys = Some(load_keys(path)?);
        }
        cfg.log = true;
        Ok(cfg)
    }
}

fn load_keys(path: &Path) -> Result<auth::KeyRing, Failure> {
    auth::load_key_file(path).map_err(|e| bad_option(e.to_string()))
}

/// The key a client presents: `--key-id`'s, or the file's first.
pub(crate) fn client_key(path: &Path, id: Option<&str>) -> Result<Key, Failure> {
    let ring = load_keys(path)?;
    match id {
        None => Ok(ring.first().clone()),
        Some(id) => ring
            .get(id)
            .cloned()
            .ok_or_else(|| bad_option(format!("key id '{id}' is not in {}", path.display()))),
    }
}

/// Runs the server until interrupted, with Prometheus metrics at
/// `metrics_addr` when given (docs/monitoring.md).
pub(crate) fn run(
    addr: SocketAddr,
    opts: &ServeOptions,
    metrics_addr: Option<SocketAddr>,
) -> Result<(), Failure> {
    let cfg = opts.config(addr)?;
    let stats = cfg.stats.clone();
    let auth = match &cfg.keys {
        Some(k) => format!("authentication required ({} key(s))", k.len()),
        None => "no authentication".to_string(),
    };
    let allow = if cfg.allow.is_open() {
        "any address".to_string()
    } else {
        cfg.allow
            .blocks()
            .iter()
            .map(|b| b.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let server = Server::bind(cfg)?;
    let local = server.local_addr()?;
    eprintln!("pathsonde server listening on {local} (TCP control, UDP probes); Ctrl-C to stop");
    eprintln!("  {auth}; clients allowed from {allow}");
    // Kept alive for as long as the server runs.
    let _metrics = match metrics_addr {
        Some(m) => {
            let started = std::time::Instant::now();
            let ms = crate::metrics::MetricsServer::start(
                m,
                std::sync::Arc::new(move || crate::metrics::server_page(&stats, started)),
            )
            .map_err(|e| Failure {
                exit: crate::exit::Exit::Internal,
                message: format!("serving metrics on {m}: {e}"),
            })?;
            eprintln!(
                "pathsonde server metrics on http://{}/metrics",
                ms.local_addr()
            );
            Some(ms)
        }
        None => None,
    };
    let stop = std::sync::atomic::AtomicBool::new(false);
    server.run(&stop)?;
    Ok(())
}
