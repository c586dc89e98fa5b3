//! `pathsonde serve`: the server's options (limits, authentication, allow
//! list; docs/security.md) and the client's `--key-file`.

use crate::args;
use crate::exit::Exit;
use crate::Failure;
use clap::Args;
use pathsonde_core::{BitRate, Bytes, DurationNs};
use pathsonde_net::allow::AllowList;
use pathsonde_net::auth::{self, Key};
use pathsonde_net::error::NetError;
use pathsonde_net::limits::Limits;
use pathsonde_net::udpst::server::MAX_SERVER_CONNECTIONS;
use pathsonde_net::udpst::{CapacityError, UdpstServer, UdpstServerConfig, UdpstServerHandle};
use pathsonde_net::{Server, ServerConfig};
use pathsonde_wire::udpst::DEFAULT_CONTROL_PORT;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};

/// What a default server exposes and what each flag opens, shown after
/// `serve --help`'s options; README and docs/security.md carry the same
/// table.
pub(crate) const EXPOSURE: &str = "\
What a default `pathsonde serve` exposes (docs/security.md):
  TCP+UDP 5310   measurement sessions for anyone (one at a time), each within
                 --max-duration 60s, --max-rate 10G, --max-bytes 10G: probe
                 trains, UDP/TCP throughput flows and burst (MBS) tests alike.
                 UDP goes only to the session's own peer.
  UDP 24601      UDPST (RFC 9946): setups are answered, but a test without a
                 key is refused (code 5): UDPST cannot prove a source address.
  the NIC        untouched (kernel software stamps).
What each flag opens:
  --key-file F       sessions and UDPST tests only with a key from F
  --allow CIDRS      only those addresses; they may run UDPST tests without a
                     key up to --max-rate
  --udpst-open [R]   UDPST tests without a key from anyone allowed, at most R
                     (default 100M): a blind spoofer who guesses a test port
                     could aim up to R at a third party for one test
  --no-udpst         no UDPST at all
  --hw-stamps        NIC hardware receive stamps: the NIC's configuration is
                     read, only its receive filter raised, and restored after
                     each session
  --metrics ADDR     a Prometheus page on ADDR (bind it to localhost)";

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
    /// Fastest average rate a probe train may arrive at, and a throughput
    /// flow may move (bits/s; k, M, G).
    #[arg(long, default_value = "10G", value_parser = args::positive_rate)]
    pub(crate) max_rate: BitRate,
    /// Most bytes one session may move — probe trains, throughput flows and
    /// burst tests (IP bytes) — and one UDPST test (UDP payload bytes)
    /// (10G = 10¹⁰ B; sizes as in docs/units.md).
    #[arg(long, default_value = "10G", value_parser = args::positive_size)]
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
    /// UDP port for the UDP Speed Test Protocol (RFC 9946; `pathsonde
    /// capacity` and OB-UDPST clients; docs/capacity.md).  Default 24601; if
    /// that is taken serve warns and goes on without it, if a port given here
    /// is taken serve exits.
    #[arg(long, value_name = "PORT", value_parser = clap::value_parser!(u16).range(1..))]
    pub(crate) udpst_port: Option<u16>,
    /// Do not answer the UDP Speed Test Protocol at all.
    #[arg(long, conflicts_with = "udpst_port")]
    pub(crate) no_udpst: bool,
    /// UDPST without jumbo datagram sizes above 1 Gb/s (the reference
    /// server's -j); clients must say the same (`capacity --no-jumbo`).
    #[arg(long, conflicts_with = "no_udpst")]
    pub(crate) udpst_no_jumbo: bool,
    /// UDPST with traditional 1500-byte-MTU datagram sizes (the reference
    /// server's -T); clients must say the same (`capacity --traditional-mtu`).
    #[arg(long, conflicts_with = "no_udpst")]
    pub(crate) udpst_traditional_mtu: bool,
    /// Let anyone allowed run a UDPST test without a key, at most RATE per
    /// test (default 100M, never above --max-rate).  Off by default: UDPST
    /// cannot prove a source address, so an open server can be aimed at a
    /// third party up to this rate (docs/security.md, 4a).  A restricted
    /// --allow list also opts its sources in (up to --max-rate); a key file
    /// requires keys unless this is given.
    #[arg(
        long,
        value_name = "RATE",
        num_args = 0..=1,
        default_missing_value = "100M",
        value_parser = args::positive_rate,
        conflicts_with = "no_udpst"
    )]
    pub(crate) udpst_open: Option<BitRate>,
    /// Use the NIC's hardware receive stamps where it has them (needs --bind
    /// to one interface's address, usually root).  Each session reads the
    /// NIC's stamping configuration, raises only its receive filter to all
    /// packets (a PTP daemon's transmit setting is kept) and puts back what
    /// it found when the session ends.  Without it the NIC's configuration
    /// is never read or written and kernel software stamps are used.
    #[arg(long)]
    pub(crate) hw_stamps: bool,
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
        cfg.hw_stamps = self.hw_stamps;
        Ok(cfg)
    }
}

/// The UDPST server's configuration beside `cfg` (the same allow list,
/// key file, --max-rate, --max-duration and --max-connections), and a
/// warning when the key file holds no key UDPST can use.
fn udpst_config(
    addr: SocketAddr,
    opts: &ServeOptions,
    cfg: &ServerConfig,
) -> (UdpstServerConfig, Option<String>) {
    let mut u = UdpstServerConfig::new(addr);
    u.allow = cfg.allow.clone();
    u.max_rate = opts.max_rate;
    u.open = opts.udpst_open;
    u.max_duration = opts.max_duration;
    u.max_bytes = opts.max_bytes.get();
    u.max_connections = (opts.max_connections as usize).min(MAX_SERVER_CONNECTIONS);
    u.jumbo = !opts.udpst_no_jumbo;
    u.traditional_mtu = opts.udpst_traditional_mtu;
    u.log = true;
    let mut warning = None;
    if let Some(ring) = &cfg.keys {
        let table = pathsonde_net::udpst::numeric_keys(ring);
        if table.is_empty() {
            warning = Some(
                "pathsonde serve: warning: the key file has no numeric key id (0-255) with a secret of at most 64 bytes, so every UDPST client will be refused"
                    .to_string(),
            );
        }
        u.keys = Some(table);
    }
    (u, warning)
}

/// Starts the UDPST listener unless `--no-udpst`: a taken default port is a
/// warning, a taken `--udpst-port` a failure.  Returns the handle and the
/// lines to print once the server has said where it listens (the listener
/// starts first, so a client that can reach the TCP port finds it up).
fn start_udpst(
    bind: IpAddr,
    opts: &ServeOptions,
    cfg: &ServerConfig,
) -> Result<(Option<UdpstServerHandle>, Vec<String>), Failure> {
    if opts.no_udpst {
        return Ok((None, Vec::new()));
    }
    let port = opts.udpst_port.unwrap_or(DEFAULT_CONTROL_PORT);
    let (ucfg, warning) = udpst_config(SocketAddr::new(bind, port), opts, cfg);
    let who = ucfg.who_may_test();
    let server = match UdpstServer::bind(ucfg) {
        Ok(s) => s,
        Err(CapacityError::Io { context, source }) if opts.udpst_port.is_some() => {
            return Err(NetError::io(context, source).into())
        }
        Err(e) => {
            return Ok((
                None,
                vec![format!("pathsonde serve: warning: not serving UDPST: {e} (use --udpst-port PORT or --no-udpst)")],
            ));
        }
    };
    let handle = match server.spawn() {
        Ok(h) => h,
        Err(e) => {
            return Err(Failure {
                exit: Exit::Internal,
                message: e.to_string(),
            })
        }
    };
    let mut lines = vec![format!(
        "  UDPST (RFC 9946, `pathsonde capacity` and OB-UDPST clients) on UDP {}: {who}",
        handle.local_addr()
    )];
    lines.extend(warning);
    Ok((Some(handle), lines))
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
    // Kept alive for as long as the server runs.
    let (_udpst, udpst_lines) = start_udpst(addr.ip(), opts, &cfg)?;
    let server = Server::bind(cfg)?;
    let local = server.local_addr()?;
    eprintln!("pathsonde server listening on {local} (TCP control, UDP probes); Ctrl-C to stop");
    eprintln!("  {auth}; clients allowed from {allow}");
    eprintln!(
        "  {}",
        ServerConfig::stamps_line(opts.hw_stamps, local.ip())
    );
    for line in udpst_lines {
        eprintln!("{line}");
    }
    // Kept alive for as long as the server runs.
    let _metrics = match metrics_addr {
        Some(m) => {
            let started = std::time::Instant::now();
            let udpst_stats = _udpst.as_ref().map(UdpstServerHandle::stats);
            let ms = pathsonde_net::metrics::MetricsServer::start(
                m,
                std::sync::Arc::new(move || {
                    pathsonde_net::metrics::server_page(&stats, udpst_stats.as_deref(), started)
                }),
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
