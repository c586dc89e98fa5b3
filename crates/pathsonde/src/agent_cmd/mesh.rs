//! `pathsonde agent --mesh FILE --name HOST`: one agent of a fleet.  Runs
//! the tests this host originates on the mesh's schedule, each under
//! leases on its server and shared paths, writes every run — or the skip
//! and its reason — to the PostgreSQL archive, keeps what the database
//! cannot take in a local spool until it returns, and serves the latest
//! result per peer as Prometheus metrics like the single-host agent.
//!
//! Glue only: the mesh file, the schedule, the leases and the spool are
//! pathsonde-fleet's (docs/fleet.md); the measurement and the metrics page
//! are agent_cmd's.

use super::{self as agent_cmd, Config, Peer, PeerState, State};
use crate::metrics::MetricsServer;
use crate::{archive_cmd, output, Failure};
use pathsonde_archive::{Record, RunData};
use pathsonde_fleet::{
    Action, FleetDb, LeaseRequest, Mesh, MeshTest, Scheduler, Skip, Spool, SpoolEntry, Taken,
    UnixMs, Written,
};
use serde_json::json;
use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

/// What `agent --mesh` was given.
pub struct MeshArgs {
    pub mesh: PathBuf,
    pub name: String,
    pub spool: Option<PathBuf>,
    pub config: Option<PathBuf>,
    pub metrics: Option<SocketAddr>,
    pub rounds: Option<u32>,
}

/// How often a waiting test asks for its leases again.
const LEASE_RETRY: Duration = Duration::from_millis(250);
/// How often the spool is offered to a database that was away.
const FLUSH_EVERY: Duration = Duration::from_secs(5);
/// At most this many missed slots per test are recorded at a restart (a
/// day of 30 s slots is 2880).
const MAX_BACKFILL: usize = 10_000;

fn internal(message: String) -> Failure {
    Failure {
        exit: crate::exit::Exit::Internal,
        message,
    }
}

/// `$XDG_STATE_HOME/pathsonde/spool/HOST`, else `~/.local/state/…`.
fn default_spool(name: &str) -> Result<PathBuf, Failure> {
    let base = std::env::var_os("XDG_STATE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/state")))
        .ok_or_else(|| crate::usage("no spool directory: pass --spool DIR".into()))?;
    Ok(base.join("pathsonde").join("spool").join(name))
}

/// The agent's view of one mesh test: the peer agent_cmd measures.
fn peer_of(t: &MeshTest) -> Result<Peer, Failure> {
    let o = &t.options;
    let settings = crate::settings::settings_of(
        o.max_rate.unwrap_or_else(crate::settings::default_max_rate),
        pathsonde_core::Bytes(1500),
        o.known_capacity,
    );
    // An unknown method is refused before the first slot.
    crate::settings::method_by_name(&t.method, &settings)
        .map_err(|f| crate::usage(format!("test {}: {}", t.id(), f.message)))?;
    let d = &t.destination;
    let key = match &d.key_file {
        Some(f) => Some(crate::serve_cmd::client_key(f, d.key_id.as_deref())?),
        None => None,
    };
    Ok(Peer {
        name: d.name.clone(),
        host: d.host.clone(),
        port: d.port,
        method: t.method.clone(),
        interval: t.interval.to_std(),
        jitter: Duration::ZERO,
        settings,
        key,
    })
}

/// The config's listen, timeout and archive (its peers belong to the
/// single-host agent: with a mesh they must be absent).
fn config(path: &PathBuf) -> Result<Config, Failure> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| crate::usage(format!("reading {}: {e}", path.display())))?;
    let cfg: Config =
        toml::from_str(&text).map_err(|e| crate::usage(format!("{}: {e}", path.display())))?;
    if !cfg.peers.is_empty() {
        return Err(crate::usage(format!(
            "{}: [[peer]] entries and --mesh do not mix: the mesh file names the peers",
            path.display()
        )));
    }
    Ok(cfg)
}

struct Agent {
    name: String,
    url: String,
    tests: Vec<MeshTest>,
    peers: Vec<Peer>,
    timeout: Duration,
    spool: Spool,
    db: Option<FleetDb>,
    state: State,
    last_flush: Option<Instant>,
}

pub fn run(args: MeshArgs) -> Result<(), Failure> {
    let mesh = Mesh::load(&args.mesh).map_err(|e| crate::usage(e.to_string()))?;
    if mesh.host(&args.name).is_none() {
        return Err(crate::usage(format!(
            "--name {}: no such host in {} (hosts: {})",
            args.name,
            args.mesh.display(),
            mesh.hosts
                .iter()
                .map(|h| h.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    let tests = mesh.originated_by(&args.name);
    if tests.is_empty() {
        return Err(crate::usage(format!(
            "host {} originates no test in {}",
            args.name,
            args.mesh.display()
        )));
    }
    let cfg = match &args.config {
        Some(p) => config(p)?,
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
        None => default_spool(&args.name)?,
    };
    let spool = Spool::open(&spool_dir).map_err(|e| internal(e.to_string()))?;
    let peers = tests.iter().map(peer_of).collect::<Result<Vec<_>, _>>()?;
    let timeout = cfg
        .timeout
        .map_or(Duration::from_secs(3), Duration::from_secs_f64);
    let state: State = Arc::new(Mutex::new(BTreeMap::new()));
    for p in &peers {
        state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert((p.name.clone(), p.method.clone()), PeerState::default());
    }
    let listen = args
        .metrics
        .or(cfg.listen)
        .unwrap_or_else(|| agent_cmd::DEFAULT_LISTEN.parse().expect("a valid address"));
    let st2 = state.clone();
    let server = MetricsServer::start(listen, Arc::new(move || agent_cmd::page(&st2)))
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
    let mut agent = Agent {
        name: args.name,
        url,
        tests,
        peers,
        timeout,
        spool,
        db,
        state,
        last_flush: None,
    };
    let result = agent.run(args.rounds);
    server.stop();
    result
}

impl Agent {
    fn run(&mut self, rounds: Option<u32>) -> Result<(), Failure> {
        let mut scheduler = Scheduler::new(&self.tests, UnixMs::now());
        self.flush(true);
        self.backfill(&scheduler)?;
        for (i, t) in self.tests.iter().enumerate() {
            if let Some(first) = scheduler.first(i) {
                self.spool
                    .remember_first_slot(&t.id(), first)
                    .map_err(|e| internal(e.to_string()))?;
            }
        }
        let mut handled = vec![0u32; self.tests.len()];
        let mut queue: VecDeque<Action> = VecDeque::new();
        loop {
            if rounds.is_some_and(|r| handled.iter().all(|&h| h >= r)) && queue.is_empty() {
                self.flush(true);
                return Ok(());
            }
            self.flush(false);
            queue.extend(
                scheduler
                    .poll(UnixMs::now())
                    .into_iter()
                    .filter(|a| !rounds.is_some_and(|r| handled[a.slot().test] >= r)),
            );
            let Some(action) = queue.pop_front() else {
                let wait = scheduler
                    .next_due()
                    .map_or(FLUSH_EVERY, |t| t.since(UnixMs::now()).to_std())
                    .min(FLUSH_EVERY);
                std::thread::sleep(wait.max(Duration::from_millis(10)));
                continue;
            };
            handled[action.slot().test] += 1;
            match action {
                Action::Missed { slot, reason } => self.skip(slot.test, &slot, reason)?,
                Action::Run(slot) => self.slot(&slot)?,
            }
        }
    }

    /// Records the slots that passed while no agent of this host was
    /// running (it was stopped, or killed in the middle of one) as skips,
    /// so every slot since the archive's last record of each test is a run
    /// or a skip.  Needs the database (and the spool written back first);
    /// without it the gap is left unrecorded, with a warning.
    fn backfill(&mut self, scheduler: &Scheduler) -> Result<(), Failure> {
        let Some(db) = self.db.as_mut() else {
            eprintln!("pathsonde agent: warning: the database is unreachable: slots missed before this start are not recorded");
            return Ok(());
        };
        let mut gaps = Vec::new();
        let firsts = self.spool.first_slots();
        for (i, t) in self.tests.iter().enumerate() {
            // Without a record in the archive, the record starts at the
            // first slot this host ever scheduled (killed in its first slot).
            let first = firsts.get(&t.id()).map(|f| UnixMs(f.0 - 1));
            match db.last_slot(t) {
                Ok(last) => {
                    if let Some(last) = last.or(first) {
                        gaps.extend(scheduler.gap(i, last, MAX_BACKFILL));
                    }
                }
                Err(e) => {
                    eprintln!("pathsonde agent: warning: {e}: slots missed before this start are not recorded");
                    self.db = None;
                    return Ok(());
                }
            }
        }
        let started = UnixMs::now();
        for slot in gaps {
            let reason = format!(
                "no agent ran this slot: the agent was stopped or killed (it started again at {} ms)",
                started.0
            );
            self.skip(slot.test, &slot, reason)?;
        }
        Ok(())
    }

    /// Writes the spool back when there is something in it and the
    /// database answers (tried every [`FLUSH_EVERY`], or now when `force`).
    fn flush(&mut self, force: bool) {
        if !force && self.last_flush.is_some_and(|t| t.elapsed() < FLUSH_EVERY) {
            return;
        }
        self.last_flush = Some(Instant::now());
        if self.spool.pending().map_or(true, |p| p.is_empty()) {
            return;
        }
        let done = (|| {
            if self.db.is_none() {
                self.db = Some(FleetDb::connect(&self.url)?);
            }
            self.spool.flush(self.db.as_mut().expect("connected"))
        })();
        match done {
            Ok(r) => {
                for (path, why) in &r.rejected {
                    eprintln!(
                        "pathsonde agent: warning: the database refuses {} for good ({why}); set aside",
                        path.display()
                    );
                }
                output::event(
                    "spool_flushed",
                    json!({ "written": r.written, "already_there": r.already_there,
                            "damaged": r.damaged, "rejected": r.rejected.len() }),
                )
            }
            Err(_) => self.db = None,
        }
    }

    fn keep(&mut self, entry: &SpoolEntry) -> Result<Written, Failure> {
        self.spool
            .write_or_spool(&mut self.db, &self.url, entry)
            .map_err(|e| internal(format!("{e}: a result could be neither written nor kept")))
    }

    /// Records that slot `slot` of test `test` did not run, and why.
    fn skip(
        &mut self,
        test: usize,
        slot: &pathsonde_fleet::Slot,
        reason: String,
    ) -> Result<(), Failure> {
        let t = &self.tests[test];
        let skip = Skip {
            run_uuid: slot.run_uuid.clone(),
            test: t.id(),
            source: t.source.clone(),
            destination: t.destination.name.clone(),
            scheduled: slot.scheduled,
            recorded: UnixMs::now(),
            reason,
        };
        let w = self.keep(&SpoolEntry::Skip(skip.clone()))?;
        output::event(
            "skip",
            json!({ "test": skip.test, "reason": skip.reason, "spooled": matches!(w, Written::Spooled { .. }) }),
        );
        if output::mode() == output::Mode::Text {
            println!("test {}: skipped: {}", skip.test, skip.reason);
        }
        Ok(())
    }

    /// One due slot: leases, measurement, the run (or the skip) kept.
    fn slot(&mut self, slot: &pathsonde_fleet::Slot) -> Result<(), Failure> {
        let t = self.tests[slot.test].clone();
        let deadline = slot.scheduled.plus(t.wait);
        if self.db.is_none() {
            match FleetDb::connect(&self.url) {
                Ok(db) => self.db = Some(db),
                Err(e) => {
                    return self.skip(
                        slot.test,
                        slot,
                        format!("no lease: the database is unreachable ({e})"),
                    )
                }
            }
        }
        let req = LeaseRequest {
            resources: t.resources(),
            holder: self.name.clone(),
            test: t.id(),
            run_uuid: slot.run_uuid.clone(),
            hold: t.lease,
        };
        let db = self.db.as_mut().expect("connected");
        let taken = db.take_within(
            &req,
            deadline,
            LEASE_RETRY,
            &mut UnixMs::now,
            &mut std::thread::sleep,
        );
        let lease = match taken {
            Ok(Taken::Granted(l)) => l,
            Ok(Taken::Busy {
                resource,
                holder,
                test,
                until,
            }) => {
                let reason = format!(
                    "{resource} held by {holder} ({test}) until {} ms; waited {} (the test's wait)",
                    until.0, t.wait
                );
                return self.skip(slot.test, slot, reason);
            }
            Err(e) => {
                self.db = None;
                return self.skip(slot.test, slot, format!("no lease: {e}"));
            }
        };
        let peer = self.peers[slot.test].clone();
        let timeout = t.options.timeout.map_or(self.timeout, |d| d.to_std());
        // Renewed while the test runs, so a long measurement keeps its
        // server; a renewer that cannot start leaves the lease to its
        // length, as before.
        let renewer = match pathsonde_fleet::Renewer::start(&self.url, &lease, t.lease) {
            Ok(r) => Some(r),
            Err(e) => {
                eprintln!(
                    "pathsonde agent: warning: {e}: the lease is not renewed during this test"
                );
                None
            }
        };
        let wall = SystemTime::now();
        let outcome = agent_cmd::measure(&peer, timeout);
        // Whether every lease was ours throughout (unknown without a
        // renewer: then the lease's length had to cover the test).
        let lease_held = renewer.and_then(|r| r.stop().ok());
        if let Some(db) = self.db.as_mut() {
            if db.release(&lease).is_err() {
                // It expires by itself; the next write reconnects.
                self.db = None;
            }
        }
        let key = (peer.name.clone(), peer.method.clone());
        let run = match outcome {
            Ok(run) => run,
            Err(f) => {
                {
                    let mut g = self.state.lock().unwrap_or_else(|p| p.into_inner());
                    let s = g.entry(key).or_default();
                    *s.failures.entry(f.exit.kind().to_string()).or_default() += 1;
                    s.last_attempt_unix = Some(agent_cmd::unix_now());
                }
                let reason = format!("measurement failed ({}): {}", f.exit.kind(), f.message);
                return self.skip(slot.test, slot, reason);
            }
        };
        let mut result = crate::report::abw_json(&run, &peer.settings);
        if let Some(o) = result.as_object_mut() {
            o.insert("peer".into(), json!(peer.name));
            o.insert(
                "mesh".into(),
                json!({ "source": t.source, "destination": t.destination.name, "test": t.test,
                        "run_uuid": slot.run_uuid, "scheduled_unix_ms": slot.scheduled.0,
                        "lease_held": lease_held }),
            );
        }
        let rec = Record {
            kind: "mesh".into(),
            target: format!("{}->{}", t.source, t.destination.name),
            method: Some(run.estimate.method.to_string()),
            started: wall,
            duration: run.duration.to_std(),
            summary: archive_cmd::abw_summary(&run),
            result,
            raw: None,
        };
        let mut data = RunData::from_record(&rec).map_err(|e| internal(e.to_string()))?;
        data.run_uuid = Some(slot.run_uuid.clone());
        let written = self.keep(&SpoolEntry::run(&data))?;
        let latest = agent_cmd::latest_of(&run, None);
        {
            let mut g = self.state.lock().unwrap_or_else(|p| p.into_inner());
            let s = g.entry(key).or_default();
            s.measurements += 1;
            s.last = Some(latest);
            s.last_attempt_unix = Some(agent_cmd::unix_now());
        }
        let spooled = matches!(written, Written::Spooled { .. });
        output::event(
            "measurement",
            json!({ "test": t.id(), "run_uuid": slot.run_uuid, "summary": rec.summary, "spooled": spooled }),
        );
        if output::mode() == output::Mode::Text {
            println!(
                "test {}: {}{}",
                t.id(),
                rec.summary,
                if spooled {
                    " [spooled: database unreachable]"
                } else {
                    ""
                }
            );
        }
        Ok(())
    }
}
