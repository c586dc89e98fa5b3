//! The `pathsonde` command.  It parses arguments, runs a measurement through
//! pathsonde-net and prints the result; no measurement logic lives here.

mod args;
mod exit;
mod flow_cmd;
mod host_cmd;
mod lab_cmd;
mod measure_cmd;
mod report;
mod serve_cmd;
mod sim_cmd;
mod trace_cmd;

use clap::{Args, Parser, Subcommand};
use exit::Exit;
use pathsonde_core::methods::registry::{self, MethodSettings};
use pathsonde_core::{BitRate, Bytes, Method};
use pathsonde_net::client::{self, ClientConfig};
use pathsonde_net::{NetError, Server, ServerConfig};
use std::io::IsTerminal;
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
struct Cli {
    #[command(subcommand)]
    command: Command,
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
}

#[derive(Args, Clone)]
pub(crate) struct AbwOptions {
    /// Measurement method.
    #[arg(long, default_value = "fac2", value_parser = ["fac2"])]
    pub(crate) method: String,
    /// Highest rate to probe at (bits/s; suffixes k, M, G): the first train's
    /// rate [default: 1G; in the lab: twice the capacity].
    #[arg(long, value_parser = args::parse_rate)]
    pub(crate) max_rate: Option<BitRate>,
    /// IP packet size of probes in bytes (headers included).
    #[arg(long, default_value = "1500", value_parser = args::parse_packet_size)]
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
        Command::Serve { .. } | Command::Lab { .. } => false,
    };
    install_cleanup_on_signals();
    match run(cli.command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            let code = failure.exit;
            if json {
                let v = serde_json::json!({
                    "error": { "kind": code.kind(), "message": failure.message, "exit_code": code as u8 }
                });
                println!("{v}");
            }
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
            security,
        } => serve_cmd::run(SocketAddr::new(bind, port), &security),
        Command::Abw { host, port, opts } => {
            let addr = resolve(&host, port)?;
            abw(addr, &opts, None)
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
    }
}

fn resolve(host: &str, port: u16) -> Result<SocketAddr, Failure> {
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

pub(crate) fn build_method(opts: &AbwOptions) -> Result<Box<dyn Method + Send>, Failure> {
    let settings = MethodSettings {
        max_rate: opts
            .max_rate
            .unwrap_or(BitRate::from_bps(DEFAULT_MAX_RATE_BPS)),
        packet_size: opts.packet_size,
        clock_resolution: pathsonde_net::clock::monotonic_resolution(),
        capacity_hint: None,
    };
    registry::build(&opts.method, &settings).map_err(|e| usage(e.to_string()))
}

fn abw(addr: SocketAddr, opts: &AbwOptions, banner: Option<&str>) -> Result<(), Failure> {
    if !(opts.timeout.is_finite() && opts.timeout > 0.0 && opts.timeout <= 3600.0) {
        return Err(usage(format!(
            "--timeout {} must be in (0, 3600] seconds",
            opts.timeout
        )));
    }
    let mut method = build_method(opts)?;
    let mut cfg = ClientConfig::new(addr);
    cfg.reply_timeout = Duration::from_secs_f64(opts.timeout);
    cfg.connect_timeout = cfg.reply_timeout;
    if let Some(path) = &opts.key_file {
        cfg.key = Some(serve_cmd::client_key(path, opts.key_id.as_deref())?);
    }
    let show_progress = !opts.json && std::io::stderr().is_terminal();
    let mut progress = |o: &pathsonde_core::Observation| {
        if show_progress {
            eprintln!("{}", report::progress_line(o));
        }
    };
    let run = client::measure(cfg, method.as_mut(), &mut progress)?;
    if opts.json {
        println!("{}", report::abw_json(&run));
    } else {
        if let Some(b) = banner {
            println!("{b}\n");
        }
        print!("{}", report::abw_text(&run));
    }
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
    let report = lab_cmd::lab_run(&path, 1, opts)?;
    if opts.json {
        println!("{}", report::lab_json(&report));
        return Ok(());
    }
    println!(
        "demo: an emulated path in network namespaces — tight link 300 Mb/s (tbf), \
         30 % Poisson cross traffic, 10 ms one-way delay — measured by pathsonde's \
         own client and server, beside the ground truth.\n"
    );
    if let Some(m) = report.measurements.first() {
        print!("{}", report::abw_text(m));
        println!();
    }
    print!("{}", report::lab_text(&report));
    Ok(())
}

fn demo_loopback(opts: &AbwOptions, banner: &str) -> Result<(), Failure> {
    let server = Server::bind(ServerConfig::new(SocketAddr::from(([127, 0, 0, 1], 0))))?;
    let handle = server.spawn()?;
    let addr = handle.local_addr();
    let banner = format!("{banner}\nServer and client in one process over loopback ({addr}).");
    let result = abw(addr, opts, Some(&banner));
    let stopped = handle.stop();
    result?;
    stopped?;
    Ok(())
}
