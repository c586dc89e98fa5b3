//! One agent of a fleet (`pathsonde agent --mesh FILE --name HOST`,
//! docs/fleet.md): runs the tests this host originates on the mesh's
//! schedule, each under leases on its server and shared paths, writes every
//! run — or the skip and its reason — to the PostgreSQL archive, keeps what
//! the database cannot take in the local spool until it returns, and keeps
//! the latest result per peer for the metrics page.
//!
//! The loop is here, with the schedule, leases and spool it drives; what
//! only the CLI knows — how to measure a peer, the result's JSON and
//! summary, and how to print what happened — comes in through
//! [`super::Hooks`], so the CLI stays glue.

use super::{Event, Hooks, Peer, Status};
use crate::{
    Action, FleetDb, FleetError, LeaseRequest, Mesh, MeshError, MeshTest, Renewer, Scheduler, Skip,
    Slot, Spool, SpoolEntry, Taken, UnixMs, Written,
};
use pathsonde_archive::{Record, RunData};
use pathsonde_core::methods::registry::MethodSettings;
use serde_json::json;
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

/// How often a waiting test asks for its leases again.
const LEASE_RETRY: Duration = Duration::from_millis(250);
/// How often the spool is offered to a database that was away.
const FLUSH_EVERY: Duration = Duration::from_secs(5);
/// At most this many missed slots per test are recorded at a restart (a
/// day of 30 s slots is 2880).
const MAX_BACKFILL: usize = 10_000;

/// Why a host cannot run an agent of a mesh.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// The mesh file (reading, parsing or checking it).
    #[error(transparent)]
    Mesh(#[from] MeshError),
    #[error("--name {name}: no such host in {} (hosts: {})", .mesh.display(), .hosts.join(", "))]
    NoSuchHost {
        name: String,
        mesh: PathBuf,
        hosts: Vec<String>,
    },
    #[error("host {name} originates no test in {}", .mesh.display())]
    NoTests { name: String, mesh: PathBuf },
}

/// The tests host `name` originates in the mesh file at `path`, checked:
/// the host is in the mesh and originates at least one.
pub fn tests_of(path: &Path, name: &str) -> Result<Vec<MeshTest>, SetupError> {
    let mesh = Mesh::load(path)?;
    if mesh.host(name).is_none() {
        return Err(SetupError::NoSuchHost {
            name: name.to_string(),
            mesh: path.to_path_buf(),
            hosts: mesh.hosts.iter().map(|h| h.name.clone()).collect(),
        });
    }
    let tests = mesh.originated_by(name);
    if tests.is_empty() {
        return Err(SetupError::NoTests {
            name: name.to_string(),
            mesh: path.to_path_buf(),
        });
    }
    Ok(tests)
}

/// The peer a mesh test measures, its method told `settings`, with the
/// key its destination asks for.
pub fn peer_of(
    t: &MeshTest,
    settings: MethodSettings,
    key: Option<pathsonde_net::auth::Key>,
) -> Peer {
    let d = &t.destination;
    Peer {
        name: d.name.clone(),
        host: d.host.clone(),
        port: d.port,
        method: t.method.clone(),
        interval: t.interval.to_std(),
        jitter: Duration::ZERO,
        settings,
        key,
    }
}

/// Where host `name`'s spool is by default: `$XDG_STATE_HOME/pathsonde/
/// spool/HOST`, else `~/.local/state/…` (none without either variable).
pub fn default_spool(name: &str) -> Option<PathBuf> {
    let base = std::env::var_os("XDG_STATE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/state")))?;
    Some(base.join("pathsonde").join("spool").join(name))
}

/// What stops the agent: a result it could neither write nor keep.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The spool could not record a test's first slot.
    #[error(transparent)]
    Spool(FleetError),
    /// A run or skip neither the database nor the spool took.
    #[error("{0}: a result could be neither written nor kept")]
    Keep(#[source] FleetError),
    /// A run that does not make an archive record.
    #[error(transparent)]
    Record(pathsonde_archive::ArchiveError),
}

/// The agent, ready to run: this host's tests and their peers (in the same
/// order), the archive's URL and its connection if one could be made, the
/// spool and the status the metrics show.
pub struct MeshAgent {
    pub name: String,
    pub url: String,
    pub tests: Vec<MeshTest>,
    pub peers: Vec<Peer>,
    /// The default wait for any answer (a test's own timeout wins).
    pub timeout: Duration,
    pub spool: Spool,
    pub db: Option<FleetDb>,
    pub state: Status,
}

impl MeshAgent {
    /// Runs every test `rounds` times (each slot a run or a skip), or
    /// until stopped.
    pub fn run<H: Hooks>(self, rounds: Option<u32>, hooks: &mut H) -> Result<(), AgentError> {
        let MeshAgent {
            name,
            url,
            tests,
            peers,
            timeout,
            spool,
            db,
            state,
        } = self;
        Agent {
            name,
            url,
            tests,
            peers,
            timeout,
            spool,
            db,
            state,
            hooks,
            last_flush: None,
        }
        .run(rounds)
    }
}

struct Agent<'h, H> {
    name: String,
    url: String,
    tests: Vec<MeshTest>,
    peers: Vec<Peer>,
    timeout: Duration,
    spool: Spool,
    db: Option<FleetDb>,
    state: Status,
    hooks: &'h mut H,
    last_flush: Option<Instant>,
}

impl<H: Hooks> Agent<'_, H> {
    fn run(&mut self, rounds: Option<u32>) -> Result<(), AgentError> {
        let mut scheduler = Scheduler::new(&self.tests, UnixMs::now());
        self.flush(true);
        self.backfill(&scheduler)?;
        for (i, t) in self.tests.iter().enumerate() {
            if let Some(first) = scheduler.first(i) {
                self.spool
                    .remember_first_slot(&t.id(), first)
                    .map_err(AgentError::Spool)?;
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
    fn backfill(&mut self, scheduler: &Scheduler) -> Result<(), AgentError> {
        let Some(db) = self.db.as_mut() else {
            self.hooks.event(Event::Warning(
                "the database is unreachable: slots missed before this start are not recorded"
                    .into(),
            ));
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
                    self.hooks.event(Event::Warning(format!(
                        "{e}: slots missed before this start are not recorded"
                    )));
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
                    self.hooks.event(Event::Warning(format!(
                        "the database refuses {} for good ({why}); set aside",
                        path.display()
                    )));
                }
                self.hooks.event(Event::Flushed(&r));
            }
            Err(_) => self.db = None,
        }
    }

    fn keep(&mut self, entry: &SpoolEntry) -> Result<Written, AgentError> {
        self.spool
            .write_or_spool(&mut self.db, &self.url, entry)
            .map_err(AgentError::Keep)
    }

    /// Records that slot `slot` of test `test` did not run, and why.
    fn skip(&mut self, test: usize, slot: &Slot, reason: String) -> Result<(), AgentError> {
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
        self.hooks.event(Event::Skip {
            test: &skip.test,
            reason: &skip.reason,
            spooled: matches!(w, Written::Spooled { .. }),
        });
        Ok(())
    }

    /// One due slot: leases, measurement, the run (or the skip) kept.
    fn slot(&mut self, slot: &Slot) -> Result<(), AgentError> {
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
        let renewer = match Renewer::start(&self.url, &lease, t.lease) {
            Ok(r) => Some(r),
            Err(e) => {
                self.hooks.event(Event::Warning(format!(
                    "{e}: the lease is not renewed during this test"
                )));
                None
            }
        };
        let wall = SystemTime::now();
        let outcome = self.hooks.measure(&peer, timeout);
        // Whether every lease was ours throughout (unknown without a
        // renewer: then the lease's length had to cover the test).
        let lease_held = renewer.and_then(|r| r.stop().ok());
        if let Some(db) = self.db.as_mut() {
            if db.release(&lease).is_err() {
                // It expires by itself; the next write reconnects.
                self.db = None;
            }
        }
        let run = match outcome {
            Ok(run) => run,
            Err(f) => {
                self.state.failed(&peer, f.kind);
                let reason = format!("measurement failed ({}): {}", f.kind, f.message);
                return self.skip(slot.test, slot, reason);
            }
        };
        let mut result = self.hooks.result_json(&run, &peer.settings);
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
            summary: self.hooks.summary(&run),
            result,
            raw: None,
        };
        let mut data = RunData::from_record(&rec).map_err(AgentError::Record)?;
        data.run_uuid = Some(slot.run_uuid.clone());
        let written = self.keep(&SpoolEntry::run(&data))?;
        self.state.measured(&peer, &run, None);
        let spooled = matches!(written, Written::Spooled { .. });
        self.hooks.event(Event::Measured {
            test: &t.id(),
            run_uuid: &slot.run_uuid,
            summary: &rec.summary,
            spooled,
        });
        Ok(())
    }
}
