//! The `pathsonde` command.  It parses arguments, runs a measurement through
//! pathsonde-net and prints the result; no measurement logic lives here.

mod agent_cmd;
mod archive_cmd;
mod args;
mod compare_cmd;
mod compare_plot;
mod exit;
mod flow_cmd;
mod font;
mod host_cmd;
mod html;
mod lab_cmd;
mod measure_cmd;
mod meta_cmd;
mod metrics;
mod output;
mod plot;
mod report;
mod serve_cmd;
mod sim_cmd;
mod trace_cmd;
mod trust;
mod view;

use clap::{Args, Parser, Subcommand};
use exit::Exit;
use pathsonde_core::methods::registry::{self, MethodSettings};
use pathsonde_core::{BitRate, Bytes, Method};
use pathsonde_net::client::{self, ClientConfig};
use pathsonde_net::{NetError, Server, ServerConfig};
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::process::ExitCode;
use std::time::Duration;

/// The port `serve` listens on (TCP control and UDP probes) unless told otherwise.
pub(crate) const DEFAULT_PORT: u16 = 5310;

#[derive(Parser)]
#[command(
    name = "pathsonde",
    version,
    about = "Measure high-speed network paths: available bandwidth, capacity, cross traffic and RTT."
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    command: Command,
    /// The results archive to use (SQLite; default: $PATHSONDE_ARCHIVE, else
    /// $XDG_DATA_HOME/pathsonde/archive.sqlite; docs/archive.md).
    #[arg(long, global = true, value_name = "PATH")]
    archive: Option<std::path::PathBuf>,
    /// Do not archive this run's result.
    #[arg(long, global = true)]
    no_save: bool,
    /// Archive the result but not its raw data (every probe's stamps).
    #[arg(long, global = true)]
    no_raw: bool,
    /// Stream {"type": ..., "data": ...} events, one JSON object per line
    /// (progress, each train, the result); docs/archive.md.
    #[arg(long, global = true)]
    json_lines: bool,
}

#[derive(Subcommand)]
enum Command {
    /// Run a measurement server (TCP control and UDP probes on the same port).
    Serve {
        /// Address to listen on.
        #[arg(long, default_value = "0.0.0.0")]
        bind: IpAddr,
        /// Port for control (TCP) and probes (UDP).
        #[arg(long, short, default_value_t = DEFAULT_PORT)]
        port: u16,
        /// Serve Prometheus metrics about this server at http://ADDR/metrics
        /// (docs/monitoring.md), e.g. 127.0.0.1:9311.
        #[arg(long, value_name = "ADDR")]
        metrics: Option<SocketAddr>,
        #[command(flatten)]
        security: serve_cmd::ServeOptions,
    },
    /// Measure available bandwidth, capacity and cross traffic to a server.
    Abw {
        /// The server's host name or address.
        host: String,
        /// The server's port.
        #[arg(long, short, default_value_t = DEFAULT_PORT)]
        port: u16,
        #[command(flatten)]
        opts: AbwOptions,
    },
    /// Measure an emulated lab path beside its truth (as root); without
    /// namespaces, a server and client in this process over loopback.
    Demo {
        #[command(flatten)]
        opts: AbwOptions,
    },
    /// Emulated paths in network namespaces with known cross traffic and ground truth.
    Lab {
        #[command(subcommand)]
        command: lab_cmd::LabCommand,
    },
    /// This host's capabilities: CPU, memory, clock and syscall costs,
    /// interfaces, socket limits, and the rates it can pace (docs/host.md).
    Host {
        /// Print one JSON object instead of the text report.
        #[arg(long)]
        json: bool,
    },
    /// Packet-level simulated paths (1–100 Gb/s, coalescing NICs, cross
    /// traffic, TCP Reno, ICIM) with exact truth (docs/sim.md).
    Sim {
        #[command(subcommand)]
        command: sim_cmd::SimCommand,
    },
    /// netest's full report: RTT, available bandwidth, maximum burst size,
    /// UDP and TCP achievable throughput, optimal window, parallel streams,
    /// advice (docs/measure.md).
    Measure(measure_cmd::MeasureArgs),
    /// The maximum burst size the path absorbs without loss (docs/measure.md).
    Mbs(measure_cmd::MbsArgs),
    /// TCP throughput with both ends' reports (-t, -P, -R, -i, --window).
    Tcp(flow_cmd::TcpArgs),
    /// UDP throughput with both ends' reports (-b, --burst/--period, -t, -P, -R, -i).
    Udp(flow_cmd::UdpArgs),
    /// Micro-time-scale latency traces: capture, analysis (bands, queue
    /// cycles, spectra), truncated-Fourier models, plots (docs/trace.md).
    Trace {
        #[command(subcommand)]
        command: trace_cmd::TraceCommand,
    },
    /// Run methods one at a time on a lab path over a sweep of cross-traffic
    /// loads and kinds, each beside the truth: table, JSON and figures
    /// (docs/compare.md; as root).
    Compare(compare_cmd::CompareArgs),
    #[command(flatten)]
    Archive(archive_cmd::ArchiveCommand),
    #[command(flatten)]
    Agent(agent_cmd::AgentCommand),
    #[command(flatten)]
    Meta(meta_cmd::MetaCommand),
}

#[derive(Args, Clone)]
pub(crate) struct AbwOptions {
    /// Measurement method (docs/methods/); `lab run` also takes `all`.
    #[arg(long, default_value = "fac2", value_parser = parse_method)]
    pub(crate) method: String,
    /// Highest rate to probe at (bits/s; suffixes k, M, G): the first train's
    /// rate [default: 1G, in the lab too; 500M on a lab path with a delay
    /// line, the most the delay line carries].
    #[arg(long, value_parser = args::positive_rate)]
    pub(crate) max_rate: Option<BitRate>,
    /// The tight link's capacity at the IP layer, if you know it (e.g. the
    /// shaped rate of your access link): methods that need C use it instead
    /// of measuring it.  Printed and recorded with the result
    /// [default: not known; each method measures what it needs].
    #[arg(long, value_name = "RATE", value_parser = args::positive_rate)]
    pub(crate) known_capacity: Option<BitRate>,
    /// IP packet size of probes in bytes (headers included).
    #[arg(long, default_value = "1500", value_parser = args::packet_size)]
    pub(crate) packet_size: Bytes,
    /// Seconds to wait for any one answer from the server.
    #[arg(long, default_value_t = 3.0)]
    pub(crate) timeout: f64,
    /// Print one JSON object instead of the text report.
    #[arg(long)]
    pub(crate) json: bool,
    /// Authenticate to the server with a key from this file (lines of
    /// `<key-id> <hex secret>`, mode 600; docs/security.md).
    #[arg(long, value_name = "PATH")]
    pub(crate) key_file: Option<std::path::PathBuf>,
    /// Which key of --key-file to use [default: the first].
    #[arg(long, value_name = "ID", requires = "key_file")]
    pub(crate) key_id: Option<String>,
}

/// A registry name, or `all` (which only `lab run` accepts).
fn parse_method(s: &str) -> Result<String, String> {
    if s == "all" || registry::NAMES.contains(&s) {
        Ok(s.to_string())
    } else {
        Err(format!(
            "unknown method '{s}' (known: {})",
            registry::NAMES.join(", ")
        ))
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let json = match &cli.command {
        Command::Abw { opts, .. } | Command::Demo { opts } => opts.json,
        Command::Lab {
            command: lab_cmd::LabCommand::Run { opts, .. },
        } => opts.json,
        Command::Lab {
            command:
                lab_cmd::LabCommand::List { json }
                | lab_cmd::LabCommand::Up { json, .. }
                | lab_cmd::LabCommand::Truth { json, .. },
        } => *json,
        Command::Host { json } => *json,
        Command::Sim { command } => command.json(),
        Command::Measure(a) => a.json,
        Command::Mbs(a) => a.json,
        Command::Tcp(a) => a.flow.json,
        Command::Udp(a) => a.flow.json,
        Command::Trace { command } => command.json(),
        Command::Compare(a) => a.json,
        Command::Archive(a) => a.json(),
        Command::Serve { .. } | Command::Lab { .. } | Command::Agent(_) | Command::Meta(_) => false,
    };
    output::init(if cli.json_lines {
        output::Mode::JsonLines
    } else if json {
        output::Mode::Json
    } else {
        output::Mode::Text
    });
    archive_cmd::init(archive_cmd::Settings {
        path: cli.archive.clone(),
        no_save: cli.no_save,
        no_raw: cli.no_raw,
    });
    install_cleanup_on_signals();
    match run(cli.command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            let code = failure.exit;
            output::error(code.kind(), &failure.message, code as u8);
            eprintln!("pathsonde: {}", failure.message);
            ExitCode::from(code as u8)
        }
    }
}

/// A failure with the exit code it maps to.
#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) exit: Exit,
    pub(crate) message: String,
}

/// On SIGINT or SIGTERM, remove every namespace this process made, then exit
/// with the conventional 128 + signal.  Runs on its own thread, so it works
/// while the main thread is blocked in a measurement.
fn install_cleanup_on_signals() {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGINT, SIGTERM]) else {
        return;
    };
    std::thread::spawn(move || {
        if let Some(sig) = signals.forever().next() {
            let removed = pathsonde_lab::registry::remove_all();
            if removed > 0 {
                eprintln!("pathsonde: interrupted; removed {removed} lab namespace(s)");
            } else {
                eprintln!("pathsonde: interrupted");
            }
            std::process::exit(128 + sig);
        }
    });
}

impl From<NetError> for Failure {
    fn from(e: NetError) -> Self {
        Failure {
            exit: Exit::of(&e),
            message: e.to_string(),
        }
    }
}

pub(crate) fn usage(message: String) -> Failure {
    Failure {
        exit: Exit::Usage,
        message,
    }
}

fn run(command: Command) -> Result<(), Failure> {
    match command {
        Command::Serve {
            bind,
            port,
            metrics,
            security,
        } => serve_cmd::run(SocketAddr::new(bind, port), &security, metrics),
        Command::Abw { host, port, opts } => {
            let addr = resolve(&host, port)?;
            abw(addr, &opts, None, "abw")
        }
        Command::Demo { opts } => demo(&opts),
        Command::Lab { command } => lab_cmd::run(command),
        Command::Host { json } => host_cmd::run(json),
        Command::Sim { command } => sim_cmd::run(command),
        Command::Measure(a) => measure_cmd::run(&a),
        Command::Mbs(a) => measure_cmd::run_mbs(&a),
        Command::Tcp(a) => flow_cmd::run_tcp(&a),
        Command::Udp(a) => flow_cmd::run_udp(&a),
        Command::Trace { command } => trace_cmd::run(command),
        Command::Compare(args) => compare_cmd::run(args),
        Command::Archive(c) => archive_cmd::run(c),
        Command::Agent(c) => agent_cmd::run(c),
        Command::Meta(c) => meta_cmd::run(c),
    }
}

pub(crate) fn resolve(host: &str, port: u16) -> Result<SocketAddr, Failure> {
    let mut addrs = (host, port).to_socket_addrs().map_err(|e| {
        Failure::from(NetError::Resolve {
            host: host.to_string(),
            reason: e.to_string(),
        })
    })?;
    addrs.next().ok_or_else(|| {
        Failure::from(NetError::Resolve {
            host: host.to_string(),
            reason: "no address".into(),
        })
    })
}

/// The default first-train rate of `abw` and the loopback demo.
const DEFAULT_MAX_RATE_BPS: f64 = 1e9;

/// What a method is told, from the options every measuring command shares:
/// only what the user said (or the defaults `abw` uses on a real path).
/// `default_max_rate` is abw's 1 Gb/s, or less where the equipment cannot
/// carry it (a lab's delay line); never anything derived from the path.
pub(crate) fn method_settings(opts: &AbwOptions, default_max_rate: BitRate) -> MethodSettings {
    settings_of(
        opts.max_rate.unwrap_or(default_max_rate),
        opts.packet_size,
        opts.known_capacity,
    )
}

/// [`MethodSettings`] from their parts, with this host's clock.
pub(crate) fn settings_of(
    max_rate: BitRate,
    packet_size: Bytes,
    known_capacity: Option<BitRate>,
) -> MethodSettings {
    MethodSettings {
        max_rate,
        packet_size,
        clock_resolution: pathsonde_net::clock::monotonic_resolution(),
        known_capacity,
    }
}

/// abw's default `--max-rate`.
pub(crate) fn default_max_rate() -> BitRate {
    BitRate::from_bps(DEFAULT_MAX_RATE_BPS)
}

/// Checks a measuring command's settings (`--known-capacity`).
pub(crate) fn check_settings(settings: &MethodSettings) -> Result<(), Failure> {
    check_known_capacity(settings.known_capacity)
}

/// `--known-capacity` must be a rate a link can have.
pub(crate) fn check_known_capacity(c: Option<BitRate>) -> Result<(), Failure> {
    match c {
        Some(c) if !(c.bps().is_finite() && c.bps() >= 1e3 && c.bps() <= 1e13) => Err(usage(
            format!("--known-capacity {c} must be between 1 kb/s and 10 Tb/s"),
        )),
        _ => Ok(()),
    }
}

/// The method `opts` names, told what [`method_settings`] says.
pub(crate) fn build_method(
    opts: &AbwOptions,
    settings: &MethodSettings,
) -> Result<Box<dyn Method + Send>, Failure> {
    if opts.method == "all" {
        return Err(usage(
            "--method all runs every method in turn: use it with `lab run` (or `compare`)".into(),
        ));
    }
    method_by_name(&opts.method, settings)
}

/// A method from its name and its settings.
pub(crate) fn method_by_name(
    name: &str,
    settings: &MethodSettings,
) -> Result<Box<dyn Method + Send>, Failure> {
    check_settings(settings)?;
    registry::build(name, settings).map_err(|e| usage(e.to_string()))
}

fn abw(
    addr: SocketAddr,
    opts: &AbwOptions,
    banner: Option<&str>,
    kind: &str,
) -> Result<(), Failure> {
    if !(opts.timeout.is_finite() && opts.timeout > 0.0 && opts.timeout <= 3600.0) {
        return Err(usage(format!(
            "--timeout {} must be in (0, 3600] seconds",
            opts.timeout
        )));
    }
    let settings = method_settings(opts, default_max_rate());
    let mut method = build_method(opts, &settings)?;
    let mut cfg = ClientConfig::new(addr);
    cfg.reply_timeout = Duration::from_secs_f64(opts.timeout);
    cfg.connect_timeout = cfg.reply_timeout;
    if let Some(path) = &opts.key_file {
        cfg.key = Some(serve_cmd::client_key(path, opts.key_id.as_deref())?);
    }
    output::event(
        "start",
        serde_json::json!({ "command": kind, "target": addr.to_string(), "method": opts.method, "settings": report::settings_json(&settings) }),
    );
    let show_progress = output::show_progress();
    // Every probe's stamps, for the archive's raw data (bounded).
    let mut kept: Vec<pathsonde_core::Observation> = Vec::new();
    let mut kept_packets = 0usize;
    let mut progress = |o: &pathsonde_core::Observation| {
        if show_progress {
            eprintln!("{}", report::progress_line(o));
        }
        output::event("train", output::train_event(o));
        if kept_packets + o.packets.len() <= pathsonde_lab::run::KEEP_OBSERVATIONS_PACKETS {
            kept_packets += o.packets.len();
            kept.push(o.clone());
        }
    };
    let run = client::measure(cfg, method.as_mut(), &mut progress)?;
    let record = pathsonde_archive::Record {
        kind: kind.into(),
        target: addr.to_string(),
        method: Some(run.estimate.method.clone()),
        started: archive_cmd::started_ago(run.duration.to_std()),
        duration: run.duration.to_std(),
        summary: archive_cmd::abw_summary(&run),
        result: report::abw_json(&run, &settings),
        raw: Some(archive_cmd::raw_observations(&[(0, &kept)])),
    };
    archive_cmd::finish(record, || {
        let mut t = String::new();
        if let Some(b) = banner {
            t.push_str(b);
            t.push_str("\n\n");
        }
        t.push_str(&report::abw_text(&run, &settings));
        t
    });
    Ok(())
}

/// The README's main command.  As root with namespaces, an emulated lab
/// path with ground truth (300 Mb/s tight link, 30 % Poisson cross traffic,
/// 10 ms delay); otherwise a server and client over loopback, saying why.
fn demo(opts: &AbwOptions) -> Result<(), Failure> {
    match pathsonde_lab::netns::check_permitted() {
        Ok(()) => demo_lab(opts),
        Err(why) => {
            let banner = format!(
                "demo: no lab here ({why}); measuring loopback instead.\n\
                 Loopback has no bottleneck, so expect the host, not the path, to set the limit."
            );
            demo_loopback(opts, &banner)
        }
    }
}

fn demo_lab(opts: &AbwOptions) -> Result<(), Failure> {
    let path = lab_cmd::PathArgs {
        capacity: BitRate::from_mbps(300.0),
        cross: vec!["poisson:30%".into()],
        delay: Some(pathsonde_core::DurationNs::from_ms(10)),
        queue: Bytes(256 * 1024),
        mtu: 1500,
        narrow: None,
        threaded_napi: false,
        name: None,
        settle: 1.0,
        seed: 1,
    };
    let started = std::time::Instant::now();
    let report = lab_cmd::lab_run(&path, 1, opts)?;
    if report.runs.is_empty() {
        return Err(Failure {
            exit: exit::Exit::NoEstimate,
            message: format!("the demo produced no estimate: {}", report.notes.join("; ")),
        });
    }
    let record = archive_cmd::lab_record(
        "demo",
        &report,
        report::lab_json(&report),
        started.elapsed(),
    );
    archive_cmd::finish(record, || {
        let mut t = String::from(
            "demo: an emulated path in network namespaces — tight link 300 Mb/s (tbf), \
             30 % Poisson cross traffic, 10 ms one-way delay — measured by pathsonde's \
             own client and server, blind (told nothing of the path, as on a real one), \
             beside the ground truth.\n\n",
        );
        if let Some(m) = report.measurements.first() {
            t.push_str(&report::abw_text(m, &report.settings));
            t.push('\n');
        }
        t.push_str(&report::lab_text(&report));
        t
    });
    Ok(())
}

fn demo_loopback(opts: &AbwOptions, banner: &str) -> Result<(), Failure> {
    let server = Server::bind(ServerConfig::new(SocketAddr::from(([127, 0, 0, 1], 0))))?;
    let handle = server.spawn()?;
    let addr = handle.local_addr();
    let banner = format!("{banner}\nServer and client in one process over loopback ({addr}).");
    let result = abw(addr, opts, Some(&banner), "demo");
    let stopped = handle.stop();
    result?;
    stopped?;
    Ok(())
}
