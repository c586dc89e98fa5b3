//! `pathsonde agent --config FILE`: regular testing (perfSONAR's idea, on
//! one host).  Measures each listed peer on its own schedule — interval plus
//! a random jitter so that many agents do not probe in step — one
//! measurement at a time (two at once would each see the other as cross
//! traffic), archives every result, and serves the latest per peer and
//! method as Prometheus metrics (docs/monitoring.md).

mod mesh;

use crate::{archive_cmd, output, Failure};
use clap::Subcommand;
use pathsonde_archive::Record;
use pathsonde_core::methods::registry::MethodSettings;
use pathsonde_core::BitRate;
use pathsonde_fleet::agent::{self, Event, Failed, Hooks, LoadError, Status};
use pathsonde_net::client::{self, ClientConfig};
use pathsonde_net::MeasurementRun;
use serde_json::json;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Subcommand)]
pub enum AgentCommand {
    /// Measure the peers of a TOML config (or, with --mesh, this host's
    /// tests of a fleet's mesh file) on a schedule, archive every result,
    /// and serve the latest as Prometheus metrics (docs/monitoring.md,
    /// docs/fleet.md).
    Agent {
        /// The TOML config: peers, method, interval, jitter (docs/monitoring.md).
        /// With --mesh: only its listen, timeout and archive are used.
        #[arg(long, required_unless_present = "mesh")]
        config: Option<PathBuf>,
        /// Run the tests this host originates in a mesh file, with leases
        /// and recorded skips in a PostgreSQL archive (docs/fleet.md).
        #[arg(long, value_name = "FILE", requires = "name")]
        mesh: Option<PathBuf>,
        /// This host's name in the mesh file.
        #[arg(long, value_name = "HOST", requires = "mesh")]
        name: Option<String>,
        /// With --mesh: where results wait while the database is
        /// unreachable [default: $XDG_STATE_HOME/pathsonde/spool/HOST].
        #[arg(long, value_name = "DIR", requires = "mesh")]
        spool: Option<PathBuf>,
        /// Serve metrics here (overrides the config's `listen`).
        #[arg(long)]
        metrics: Option<SocketAddr>,
        /// Stop after measuring every peer this many times (default: run until stopped).
        #[arg(long)]
        rounds: Option<u32>,
        #[command(flatten)]
        save: crate::args::SaveFlags,
    },
}

impl AgentCommand {
    /// Where the agent archives its results.
    pub fn save(&self) -> &crate::args::SaveFlags {
        let AgentCommand::Agent { save, .. } = self;
        save
    }
}

use pathsonde_fleet::agent::{Config, Peer};

/// What a peer's method is told, from its max rate and known capacity.
fn peer_settings(max_rate: Option<BitRate>, known_capacity: Option<BitRate>) -> MethodSettings {
    crate::settings::settings_of(
        max_rate.unwrap_or_else(crate::settings::default_max_rate),
        pathsonde_core::Bytes(1500),
        known_capacity,
    )
}

/// Reads and checks the config; every mistake is a usage error naming the field.
fn load(path: &Path) -> Result<(Config, Vec<Peer>), Failure> {
    agent::load(
        path,
        crate::DEFAULT_PORT,
        peer_settings,
        |method, settings| crate::settings::method_by_name(method, settings).map(drop),
    )
    .map_err(|e| match e {
        LoadError::Config(e) => crate::usage(e.to_string()),
        LoadError::Method(f) => f,
    })
}

fn measure(peer: &Peer, timeout: Duration) -> Result<MeasurementRun, Failure> {
    let addr = crate::resolve(&peer.host, peer.port)?;
    let mut method = crate::settings::method_by_name(&peer.method, &peer.settings)?;
    let mut cfg = ClientConfig::new(addr);
    cfg.reply_timeout = timeout;
    cfg.connect_timeout = timeout;
    cfg.key = peer.key.clone();
    Ok(client::measure(cfg, method.as_mut(), &mut |_| {})?)
}

pub fn run(cmd: AgentCommand) -> Result<(), Failure> {
    let AgentCommand::Agent {
        config,
        mesh,
        name,
        spool,
        metrics,
        rounds,
        save,
    } = cmd;
    if let (Some(mesh), Some(name)) = (mesh, name) {
        if save.no_save || save.no_raw {
            return Err(crate::usage(
                "--no-save and --no-raw do not apply with --mesh: every slot of a mesh is kept \
                 (as a run without raw data, or a skip)"
                    .into(),
            ));
        }
        return mesh::run(mesh::MeshArgs {
            mesh,
            name,
            spool,
            config,
            metrics,
            rounds,
        });
    }
    let config = config
        .ok_or_else(|| crate::usage("give --config FILE or --mesh FILE --name HOST".into()))?;
    let (cfg, peers) = load(&config)?;
    if let Some(a) = &cfg.archive {
        archive_cmd::use_config_archive(a)?;
    }
    let timeout = cfg.timeout();
    let listen = cfg.listen(metrics);
    let state = Status::new(&peers);
    let server = state.serve(listen).map_err(|e| Failure {
        exit: crate::exit::Exit::Internal,
        message: format!("serving metrics on {listen}: {e}"),
    })?;
    let addr = server.local_addr();
    output::event(
        "start",
        json!({ "command": "agent", "metrics": format!("http://{addr}/metrics"), "peers": peers.len() }),
    );
    eprintln!(
        "pathsonde agent: {} peer(s); metrics on http://{addr}/metrics; archive {}",
        peers.len(),
        archive_cmd::archive_location().map_or_else(|f| f.message, |p| p.to_string())
    );
    agent::single::run(&peers, timeout, &state, rounds, &mut Cli);
    server.stop();
    Ok(())
}

/// The agents' measurements, records and output, as the CLI makes them.
struct Cli;

impl Hooks for Cli {
    fn measure(&mut self, peer: &Peer, timeout: Duration) -> Result<MeasurementRun, Failed> {
        measure(peer, timeout).map_err(|f| Failed {
            kind: f.exit.kind(),
            message: f.message,
        })
    }

    fn result_json(&self, run: &MeasurementRun, settings: &MethodSettings) -> serde_json::Value {
        crate::report::abw_json(run, settings)
    }

    fn summary(&self, run: &MeasurementRun) -> String {
        archive_cmd::abw_summary(run)
    }

    fn save(&mut self, record: &Record) -> Option<serde_json::Value> {
        archive_cmd::save(record)
    }

    fn event(&mut self, event: Event<'_>) {
        if let Event::Warning(w) = &event {
            eprintln!("pathsonde agent: warning: {w}");
        }
        if let Some((name, value)) = event.json() {
            output::event(name, value);
        }
        if output::mode() == output::Mode::Text {
            if let Some(line) = event.line() {
                println!("{line}");
            }
        }
    }
}
