//! The `pathsonde` command: glue.  It parses the arguments, sets the output
//! mode and the archive, and hands the command to its module with one
//! `match` (`run`); each `*_cmd` module turns its flags into a plan, runs it
//! through the library crates and prints.  No measurement logic lives here.

// Every `unsafe` block says why it is sound (`// SAFETY: ...`); CI denies warnings.
#![warn(clippy::undocumented_unsafe_blocks)]

mod abw_cmd;
mod agent_cmd;
mod archive_cmd;
mod args;
mod capacity_cmd;
mod compare_cmd;
mod demo_cmd;
mod exit;
mod flow_cmd;
mod hops_cmd;
mod host_cmd;
mod lab_cmd;
mod measure_cmd;
mod mesh_cmd;
mod meta_cmd;
mod output;
mod serve_cmd;
mod settings;
mod sim_cmd;
mod stdio;
mod trace_cmd;

// The printer lives in `pathsonde-render`; its modules are named here so
// the command modules reach them as `crate::report`, `crate::plot`, ... as
// before the move.
use pathsonde_render::{html, plot, report, view};

use clap::{Parser, Subcommand};
pub(crate) use exit::{usage, Failure};
use settings::AbwOptions;
use std::net::{IpAddr, SocketAddr};
use std::process::ExitCode;

/// `pathsonde -V`: the version and the commit it was built from (build.rs).
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (",
    env!("PATHSONDE_COMMIT"),
    ")"
);

/// The port `serve` listens on (TCP control and UDP probes) unless told otherwise.
pub(crate) const DEFAULT_PORT: u16 = 5310;

#[derive(Parser)]
#[command(
    name = "pathsonde",
    version = VERSION,
    about = "Measure high-speed network paths: available bandwidth, capacity, cross traffic and RTT."
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Append what would go to stdout (the report, the JSON) to this file
    /// instead, as iperf3's --logfile does; errors still go to stderr.
    #[arg(long, global = true, value_name = "PATH")]
    logfile: Option<std::path::PathBuf>,
}

#[derive(Subcommand)]
enum Command {
    /// Run a measurement server (TCP control and UDP probes on the same port).
    #[command(after_help = serve_cmd::EXPOSURE)]
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
        /// The server: HOST, HOST:PORT, [V6] or [V6]:PORT.
        host: String,
        /// The server's port, unless HOST names one.
        #[arg(long, short, default_value_t = DEFAULT_PORT)]
        port: u16,
        #[command(flatten)]
        opts: AbwOptions,
        #[command(flatten)]
        save: args::SaveFlags,
    },
    /// Measure an emulated lab path beside its truth (as root); without
    /// namespaces, a server and client in this process over loopback.
    Demo {
        #[command(flatten)]
        opts: AbwOptions,
        #[command(flatten)]
        save: args::SaveFlags,
    },
    /// Emulated paths in network namespaces with known cross traffic and ground truth.
    Lab {
        #[command(subcommand)]
        command: lab_cmd::LabCommand,
    },
    /// This host's capabilities: CPU, memory, clock and syscall costs,
    /// interfaces, socket limits, and the rates it can pace (docs/host.md).
    Host {
        #[command(flatten)]
        json: args::JsonFlags,
        #[command(flatten)]
        save: args::SaveFlags,
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
    /// Where the bottleneck is: the hop list (TTL, address, RTT), each hop's
    /// rate and the tight link, from trains with per-packet TTLs and the
    /// routers' ICMP answers; no server needed (docs/hops.md).
    Hops(hops_cmd::HopsArgs),
    /// The maximum burst size the path absorbs without loss (docs/measure.md).
    Mbs(measure_cmd::MbsArgs),
    /// RFC 9097's maximum IP-layer capacity over the UDP Speed Test Protocol,
    /// against `pathsonde serve` or an OB-UDPST server (-u/-d, -t, --algorithm
    /// b|c, -C; docs/capacity.md).
    Capacity(capacity_cmd::CapacityArgs),
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
    /// A fleet's latest A, C, RTT and verdict for every source→destination
    /// pair, as a matrix (text, --json) and an HTML heat map (docs/fleet.md).
    Mesh(mesh_cmd::MeshArgs),
    #[command(flatten)]
    Meta(meta_cmd::MetaCommand),
}

impl Command {
    /// The output flags and archive settings this command was given; a
    /// command that does not offer one has its default.
    fn flags(&self) -> (args::JsonFlags, args::SaveFlags) {
        let none = args::JsonFlags::default();
        match self {
            Command::Abw { opts, save, .. } | Command::Demo { opts, save } => {
                (opts.json, save.clone())
            }
            Command::Host { json, save } => (*json, save.clone()),
            Command::Lab { command } => command.flags(),
            Command::Sim { command } => (command.json(), Default::default()),
            Command::Measure(a) => (a.json, a.save.clone()),
            Command::Mbs(a) => (a.json, a.save.clone()),
            Command::Hops(a) => (a.json, a.save.clone()),
            Command::Capacity(a) => (a.json, a.save.clone()),
            Command::Tcp(a) => (a.flow.json, a.flow.save.clone()),
            Command::Udp(a) => (a.flow.json, a.flow.save.clone()),
            Command::Trace { command } => (command.json(), Default::default()),
            Command::Compare(a) => (a.json, Default::default()),
            Command::Archive(a) => a.flags(),
            Command::Agent(a) => (none, a.save().clone()),
            Command::Mesh(a) => (a.json, a.archive.settings()),
            Command::Serve { .. } | Command::Meta(_) => (none, Default::default()),
        }
    }
}

fn main() -> ExitCode {
    stdio::install();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return bad_command_line(e),
    };
    let (json, save) = cli.command.flags();
    if let Some(path) = &cli.logfile {
        if let Err(e) = stdio::log_to(path) {
            let message = format!("--logfile {}: {e}", path.display());
            eprintln!("pathsonde: {message}");
            return ExitCode::from(exit::Exit::Usage as u8);
        }
    }
    output::init(json.mode());
    let checked = save
        .archive
        .as_deref()
        .map_or(Ok(()), archive_cmd::check_explicit);
    archive_cmd::init(save);
    match checked.and_then(|()| run(cli.command)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            let code = failure.exit;
            output::error(code.kind(), &failure.message, code as u8);
            eprintln!("pathsonde: {}", failure.message);
            ExitCode::from(code as u8)
        }
    }
}

/// Clap could not read the command line: `--help` and `--version` print as
/// clap prints them; anything else is a usage error (exit 2) with clap's
/// message on stderr and, under `--json` or `--json-lines`, the error object
/// or event on stdout, so a script always gets JSON it can parse.
fn bad_command_line(e: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
        e.exit();
    }
    let args: Vec<String> = std::env::args().collect();
    let mode = if args
        .iter()
        .any(|a| a == "--json-lines" || a == "--json-stream")
    {
        output::Mode::JsonLines
    } else if args.iter().any(|a| a == "--json" || a == "-J") {
        output::Mode::Json
    } else {
        output::Mode::Text
    };
    output::init(mode);
    let rendered = e.render().to_string();
    let first = rendered.lines().next().unwrap_or("bad command line");
    let message = first.strip_prefix("error: ").unwrap_or(first);
    let code = exit::Exit::Usage;
    output::error(code.kind(), message, code as u8);
    let _ = e.print();
    ExitCode::from(code as u8)
}

fn run(command: Command) -> Result<(), Failure> {
    match command {
        Command::Serve {
            bind,
            port,
            metrics,
            security,
        } => serve_cmd::run(SocketAddr::new(bind, port), &security, metrics),
        Command::Abw {
            host, port, opts, ..
        } => abw_cmd::run(&host, port, &opts),
        Command::Demo { opts, .. } => demo_cmd::run(&opts),
        Command::Lab { command } => lab_cmd::run(command),
        Command::Host { .. } => host_cmd::run(),
        Command::Sim { command } => sim_cmd::run(command),
        Command::Measure(a) => measure_cmd::run(&a),
        Command::Mbs(a) => measure_cmd::run_mbs(&a),
        Command::Hops(a) => hops_cmd::run(&a),
        Command::Capacity(a) => capacity_cmd::run(&a),
        Command::Tcp(a) => flow_cmd::run_tcp(&a),
        Command::Udp(a) => flow_cmd::run_udp(&a),
        Command::Trace { command } => trace_cmd::run(command),
        Command::Compare(args) => compare_cmd::run(args),
        Command::Archive(c) => archive_cmd::run(c),
        Command::Agent(c) => agent_cmd::run(c),
        Command::Mesh(a) => mesh_cmd::run(&a),
        Command::Meta(c) => meta_cmd::run(c),
    }
}

/// The server a command names, as `pathsonde_net::target` reads it: a
/// malformed target is a usage error, a name that does not resolve exit 3.
pub(crate) fn resolve(target: &str, port: u16) -> Result<SocketAddr, Failure> {
    let (host, written) =
        pathsonde_net::target::split_host_port(target).map_err(|e| usage(e.to_string()))?;
    Ok(pathsonde_net::target::resolve(
        target,
        host,
        written.unwrap_or(port),
    )?)
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// Every option and argument of every command says what it is for.
    #[test]
    fn every_option_and_argument_has_a_help_line() {
        fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
            for a in cmd.get_arguments() {
                let id = a.get_id().as_str();
                if id == "help" || id == "version" {
                    continue;
                }
                if a.get_help().is_none() && a.get_long_help().is_none() {
                    missing.push(format!("{path} {id}"));
                }
            }
            for sub in cmd.get_subcommands() {
                walk(sub, &format!("{path} {}", sub.get_name()), missing);
            }
        }
        let mut missing = Vec::new();
        walk(&super::Cli::command(), "pathsonde", &mut missing);
        assert!(missing.is_empty(), "no help line: {missing:#?}");
    }

    /// The leaf commands (by path) that offer the argument `id`.
    fn offering(id: &str) -> Vec<String> {
        fn walk(cmd: &clap::Command, path: &str, id: &str, found: &mut Vec<String>) {
            if cmd.get_subcommands().next().is_none()
                && cmd.get_arguments().any(|a| a.get_id().as_str() == id)
            {
                found.push(path.trim().to_string());
            }
            for sub in cmd.get_subcommands() {
                walk(sub, &format!("{path} {}", sub.get_name()), id, found);
            }
        }
        let mut found = Vec::new();
        walk(&super::Cli::command(), "", id, &mut found);
        found.sort();
        found
    }

    /// `--no-save` and `--no-raw` only where a run is archived; `--archive`
    /// there and where runs are read (`mesh` too); nowhere else (serve, man, sim, ...).
    #[test]
    fn archive_options_are_offered_only_where_they_mean_something() {
        let mut archived = vec![
            "abw", "agent", "capacity", "demo", "hops", "host", "lab run", "mbs", "measure", "tcp",
            "udp",
        ];
        archived.sort();
        assert_eq!(offering("no_save"), archived);
        assert_eq!(offering("no_raw"), archived);
        let mut with_archive = archived.clone();
        with_archive.extend(["export", "history", "mesh", "plot", "report", "rm", "show"]);
        with_archive.sort();
        assert_eq!(offering("archive"), with_archive);
    }

    /// `--json-lines` goes with `--json`: a command that prints a result
    /// offers both; one that prints none (serve, lab down, man) neither.
    #[test]
    fn json_lines_is_offered_exactly_where_json_is() {
        let lines = offering("json_lines");
        assert_eq!(lines, offering("json"));
        for quiet in ["serve", "lab down", "man", "completions", "trace plot"] {
            assert!(!lines.iter().any(|c| c == quiet), "{quiet} offers it");
        }
    }
}
