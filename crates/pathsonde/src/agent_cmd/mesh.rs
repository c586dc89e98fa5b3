//! `pathsonde agent --mesh FILE --name HOST`: one agent of a fleet.  Runs
//! the tests this host originates on the mesh's schedule, each under
//! leases on its server and shared paths, writes every run — or the skip
//! and its reason — to the PostgreSQL archive, keeps what the database
//! cannot take in a local spool until it returns, and serves the latest
//! result per peer as Prometheus metrics like the single-host agent.
//!
//! Glue only: the mesh file, the schedule, the leases, the spool, the loop
//! and the metrics page are pathsonde-fleet's (docs/fleet.md); here are the
//! checks of the command line, the measurement (agent_cmd's), the record's
//! JSON and summary, and the output.

use super::{self as agent_cmd, Config, Peer};
use crate::{archive_cmd, output, Failure};
use pathsonde_fleet::agent::mesh_agent::{self, MeshAgent};
use pathsonde_fleet::agent::Status;
use pathsonde_fleet::{FleetDb, MeshTest, Spool};
use serde_json::json;
use std::net::SocketAddr;
use std::path::PathBuf;

/// What `agent --mesh` was given.
pub struct MeshArgs {
    pub mesh: PathBuf,
    pub name: String,
    pub spool: Option<PathBuf>,
    pub config: Option<PathBuf>,
    pub metrics: Option<SocketAddr>,
    pub rounds: Option<u32>,
}

fn internal(message: String) -> Failure {
    Failure {
        exit: crate::exit::Exit::Internal,
        message,
    }
}

/// The agent's view of one mesh test: the peer agent_cmd measures.
fn peer_of(t: &MeshTest) -> Result<Peer, Failure> {
    let o = &t.options;
    let settings = agent_cmd::peer_settings(o.max_rate, o.known_capacity);
    // An unknown method is refused before the first slot.
    crate::settings::method_by_name(&t.method, &settings)
        .map_err(|f| crate::usage(format!("test {}: {}", t.id(), f.message)))?;
    let d = &t.destination;
    let key = match &d.key_file {
        Some(f) => Some(crate::serve_cmd::client_key(f, d.key_id.as_deref())?),
        None => None,
    };
    Ok(mesh_agent::peer_of(t, settings, key))
}

pub fn run(args: MeshArgs) -> Result<(), Failure> {
    let tests =
        mesh_agent::tests_of(&args.mesh, &args.name).map_err(|e| crate::usage(e.to_string()))?;
    let cfg = match &args.config {
        Some(p) => {
            pathsonde_fleet::agent::load_for_mesh(p).map_err(|e| crate::usage(e.to_string()))?
        }
        None => Config::default(),
    };
    if let Some(a) = &cfg.archive {
        archive_cmd::use_config_archive(a)?;
    }
    let location = archive_cmd::archive_location()?;
    if !location.is_postgres() {
        return Err(crate::usage(format!(
            "agent --mesh needs a PostgreSQL archive (--archive postgresql://…, the config's \
             archive, or PATHSONDE_ARCHIVE), not {location}: leases and skips are shared by \
             every agent (docs/fleet.md)"
        )));
    }
    let url = location
        .as_ref()
        .to_str()
        .expect("a PostgreSQL URL is text")
        .to_string();
    let spool_dir = match &args.spool {
        Some(d) => d.clone(),
        None => mesh_agent::default_spool(&args.name)
            .ok_or_else(|| crate::usage("no spool directory: pass --spool DIR".into()))?,
    };
    let spool = Spool::open(&spool_dir).map_err(|e| internal(e.to_string()))?;
    let peers = tests.iter().map(peer_of).collect::<Result<Vec<_>, _>>()?;
    let timeout = cfg.timeout();
    let state = Status::new(&peers);
    let listen = cfg.listen(args.metrics);
    let server = state
        .serve(listen)
        .map_err(|e| internal(format!("serving metrics on {listen}: {e}")))?;
    let addr = server.local_addr();
    // Connected now when possible, so a wrong role or schema shows at once;
    // a database that is merely down is waited for (the spool keeps runs).
    let db = match FleetDb::connect(&url) {
        Ok(db) => Some(db),
        Err(e) => {
            eprintln!(
                "pathsonde agent: warning: {e}; results wait in {}",
                spool_dir.display()
            );
            None
        }
    };
    output::event(
        "start",
        json!({ "command": "agent", "mesh": args.mesh, "name": args.name,
                "metrics": format!("http://{addr}/metrics"), "tests": tests.len(),
                "spool": spool_dir }),
    );
    eprintln!(
        "pathsonde agent {}: {} test(s) from {}; metrics on http://{addr}/metrics; archive {location}; spool {}",
        args.name,
        tests.len(),
        args.mesh.display(),
        spool_dir.display()
    );
    let agent = MeshAgent {
        name: args.name,
        url,
        tests,
        peers,
        timeout,
        spool,
        db,
        state,
    };
    let result = agent
        .run(args.rounds, &mut agent_cmd::Cli)
        .map_err(|e| internal(e.to_string()));
    server.stop();
    result
}
