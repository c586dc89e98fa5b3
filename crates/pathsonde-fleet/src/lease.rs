//! Leases and skips in the PostgreSQL archive: how agents that never talk
//! to each other keep two tests off one server (docs/fleet.md).
//!
//! A lease is a row of the archive's `leases` table (migration 4 in
//! pathsonde-archive's schema): one per resource (`server:NAME`,
//! `path:NAME`), naming its holder, the test and run, and when it expires.
//! Taking the leases for a test is one transaction that, for each resource
//! in sorted order, inserts the row or takes over an expired one
//! (`INSERT … ON CONFLICT DO UPDATE … WHERE expires <= now`).  PostgreSQL's
//! unique index does the locking: a second taker of the same resource
//! waits for the first's transaction and then sees its unexpired row, so
//! two takers never both win; the sorted order means two takers of
//! overlapping sets never deadlock; and a killed agent's rows simply
//! expire, since nothing but the expiry time keeps them.  Times are the
//! agents' clocks ([`UnixMs`]), which a fleet keeps in step with NTP; a
//! lease's length (the mesh's `lease`) must be well above that error.  A
//! [`Renewer`] extends the leases while the test runs, so a long test
//! keeps them, and a killed agent's lapse within one length.
//!
//! A test that cannot get its leases within its `wait` is a row of
//! `skips` with the reason, keyed by its run UUID like the run it would
//! have been, so it is recorded once however often it is retried.

use crate::{FleetError, Result, UnixMs};
use pathsonde_archive::postgres::{Client, Transaction};
use pathsonde_archive::{Archive, Location};
use pathsonde_core::DurationNs;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// What one test asks to lease.
#[derive(Debug, Clone)]
pub struct LeaseRequest {
    /// `server:NAME` and `path:NAME`s ([`crate::MeshTest::resources`]).
    pub resources: Vec<String>,
    /// The agent's mesh name.
    pub holder: String,
    /// The test's id (`test/source->destination`).
    pub test: String,
    pub run_uuid: String,
    /// How long the leases hold unless released.
    pub hold: DurationNs,
}

/// Leases held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    pub resources: Vec<String>,
    pub run_uuid: String,
    pub expires: UnixMs,
}

/// The outcome of asking for leases.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Taken {
    Granted(Lease),
    /// Someone holds `resource` until `until`.
    Busy {
        resource: String,
        holder: String,
        test: String,
        until: UnixMs,
    },
}

/// A test that did not run, and why: a row of `skips`, or a spool file
/// while the database is away.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Skip {
    pub run_uuid: String,
    /// The test's id (`test/source->destination`).
    pub test: String,
    pub source: String,
    pub destination: String,
    /// When the slot was to start.
    #[serde(rename = "scheduled_unix_ms")]
    pub scheduled: UnixMs,
    /// When the skip was decided.
    #[serde(rename = "recorded_unix_ms")]
    pub recorded: UnixMs,
    pub reason: String,
}

/// A lease row as stored (for diagnosis and tests).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseRow {
    pub resource: String,
    pub holder: String,
    pub test: String,
    pub run_uuid: String,
    pub taken: UnixMs,
    pub expires: UnixMs,
}

/// The fleet's view of the PostgreSQL archive: the archive of runs and a
/// second connection for leases and skips (a lease transaction must not
/// wait behind a large run being written).
pub struct FleetDb {
    archive: Archive,
    client: Client,
    shown: String,
}

fn db_err(shown: &str, what: &'static str, e: pathsonde_archive::postgres::Error) -> FleetError {
    let message = match e.as_db_error() {
        Some(db) => format!("{}: {}", db.severity(), db.message()),
        None => match std::error::Error::source(&e) {
            Some(s) => format!("{e}: {s}"),
            None => e.to_string(),
        },
    };
    FleetError::Database {
        location: shown.to_string(),
        what,
        message,
        sqlstate: e.as_db_error().map(|d| d.code().code().to_string()),
    }
}

impl FleetDb {
    /// Opens the archive at `url` (which must be PostgreSQL), bringing its
    /// schema up to date (an agent's role cannot: the owner runs `pathsonde
    /// archive init` first, docs/fleet.md), and the lease connection.
    pub fn connect(url: &str) -> Result<FleetDb> {
        let location = Location::parse(url);
        if !location.is_postgres() {
            return Err(FleetError::NotPostgres(location.to_string()));
        }
        let archive = Archive::open_location(location.clone())?;
        let client = pathsonde_archive::connect_postgres(url)?;
        Ok(FleetDb {
            archive,
            client,
            shown: location.to_string(),
        })
    }

    /// The archive of runs.
    pub fn archive(&mut self) -> &mut Archive {
        &mut self.archive
    }

    /// Where, without a password.
    pub fn location(&self) -> &str {
        &self.shown
    }

    /// Takes every lease of `req` at `now`, or none (and says who holds
    /// the first one it could not take).
    pub fn try_take(&mut self, req: &LeaseRequest, now: UnixMs) -> Result<Taken> {
        let mut resources = req.resources.clone();
        resources.sort();
        resources.dedup();
        let expires = now.plus(req.hold);
        let shown = self.shown.clone();
        let mut tx = self
            .client
            .transaction()
            .map_err(|e| db_err(&shown, "taking leases", e))?;
        for r in &resources {
            match take_one(&mut tx, r, req, now, expires) {
                Ok(None) => {}
                Ok(Some(busy)) => {
                    tx.rollback()
                        .map_err(|e| db_err(&shown, "taking leases", e))?;
                    return Ok(busy);
                }
                Err(e) => return Err(db_err(&shown, "taking leases", e)),
            }
        }
        tx.commit()
            .map_err(|e| db_err(&shown, "taking leases", e))?;
        Ok(Taken::Granted(Lease {
            resources,
            run_uuid: req.run_uuid.clone(),
            expires,
        }))
    }

    /// [`FleetDb::try_take`] again every `retry` until granted or until
    /// `clock()` reaches `deadline`; the last answer.  The clock and the
    /// sleep are passed in, so a test can drive them.
    pub fn take_within(
        &mut self,
        req: &LeaseRequest,
        deadline: UnixMs,
        retry: Duration,
        clock: &mut dyn FnMut() -> UnixMs,
        sleep: &mut dyn FnMut(Duration),
    ) -> Result<Taken> {
        loop {
            let now = clock();
            let got = self.try_take(req, now)?;
            if matches!(got, Taken::Granted(_)) || now >= deadline {
                return Ok(got);
            }
            let left = Duration::from_millis((deadline.0 - now.0).max(0) as u64);
            sleep(retry.min(left).max(Duration::from_millis(1)));
        }
    }

    /// Gives the leases back (those still ours: one that expired and was
    /// taken over is left to its new holder).
    pub fn release(&mut self, lease: &Lease) -> Result<()> {
        self.client
            .execute(
                "DELETE FROM leases WHERE run_uuid = $1 AND resource = ANY($2)",
                &[&lease.run_uuid, &lease.resources],
            )
            .map_err(|e| db_err(&self.shown, "releasing leases", e))?;
        Ok(())
    }

    /// Extends the leases of `lease` to `now + hold`, if they are still
    /// ours and unexpired: `false` when any was lost.
    pub fn renew(&mut self, lease: &Lease, now: UnixMs, hold: DurationNs) -> Result<bool> {
        renew(&mut self.client, &self.shown, lease, now, hold)
    }

    /// Every lease row, by resource.
    pub fn leases(&mut self) -> Result<Vec<LeaseRow>> {
        let rows = self
            .client
            .query(
                "SELECT resource, holder, test, run_uuid, taken_unix_ms, expires_unix_ms
                 FROM leases ORDER BY resource",
                &[],
            )
            .map_err(|e| db_err(&self.shown, "reading leases", e))?;
        rows.iter()
            .map(|r| {
                Ok(LeaseRow {
                    resource: r.try_get(0)?,
                    holder: r.try_get(1)?,
                    test: r.try_get(2)?,
                    run_uuid: r.try_get(3)?,
                    taken: UnixMs(r.try_get(4)?),
                    expires: UnixMs(r.try_get(5)?),
                })
            })
            .collect::<std::result::Result<_, _>>()
            .map_err(|e| db_err(&self.shown, "reading leases", e))
    }

    /// Records a skip; `false` when its run UUID was recorded already.
    pub fn record_skip(&mut self, s: &Skip) -> Result<bool> {
        let n = self
            .client
            .execute(
                "INSERT INTO skips (run_uuid, test, source, destination, scheduled_unix_ms,
                                    recorded_unix_ms, reason)
                 VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (run_uuid) DO NOTHING",
                &[
                    &s.run_uuid,
                    &s.test,
                    &s.source,
                    &s.destination,
                    &s.scheduled.0,
                    &s.recorded.0,
                    &s.reason,
                ],
            )
            .map_err(|e| db_err(&self.shown, "recording a skip", e))?;
        Ok(n == 1)
    }

    /// The latest slot of `test` the archive has a run or a skip for: where
    /// a restarted agent's record resumes ([`crate::Scheduler::gap`]).
    /// Runs are found by their `mesh` object (`test`, `scheduled_unix_ms`)
    /// among the pair's newest 50.
    pub fn last_slot(&mut self, test: &crate::MeshTest) -> Result<Option<UnixMs>> {
        let shown = self.shown.clone();
        let err = |e| db_err(&shown, "finding the last recorded slot", e);
        let skipped: Option<i64> = self
            .client
            .query_one(
                "SELECT max(scheduled_unix_ms)::bigint FROM skips WHERE test = $1",
                &[&test.id()],
            )
            .and_then(|r| r.try_get(0))
            .map_err(err)?;
        let target = format!("{}->{}", test.source, test.destination.name);
        let rows = self
            .client
            .query(
                "SELECT result_json FROM runs WHERE kind = 'mesh' AND target = $1
                 ORDER BY started_unix_ms DESC LIMIT 50",
                &[&target],
            )
            .map_err(err)?;
        let ran = rows
            .iter()
            .filter_map(|r| r.try_get::<_, String>(0).ok())
            .filter_map(|j| serde_json::from_str::<serde_json::Value>(&j).ok())
            .filter(|v| v["mesh"]["test"] == test.test.as_str())
            .filter_map(|v| v["mesh"]["scheduled_unix_ms"].as_i64())
            .max();
        Ok(skipped.max(ran).map(UnixMs))
    }

    /// Every recorded skip, oldest slot first.
    pub fn skips(&mut self) -> Result<Vec<Skip>> {
        let rows = self
            .client
            .query(
                "SELECT run_uuid, test, source, destination, scheduled_unix_ms,
                        recorded_unix_ms, reason
                 FROM skips ORDER BY scheduled_unix_ms, id",
                &[],
            )
            .map_err(|e| db_err(&self.shown, "reading skips", e))?;
        rows.iter()
            .map(|r| {
                Ok(Skip {
                    run_uuid: r.try_get(0)?,
                    test: r.try_get(1)?,
                    source: r.try_get(2)?,
                    destination: r.try_get(3)?,
                    scheduled: UnixMs(r.try_get(4)?),
                    recorded: UnixMs(r.try_get(5)?),
                    reason: r.try_get(6)?,
                })
            })
            .collect::<std::result::Result<_, _>>()
            .map_err(|e| db_err(&self.shown, "reading skips", e))
    }
}

/// Keeps leases alive while a test runs longer than expected: a thread
/// with its own connection renews them every `hold / 3`, so a long
/// measurement never outlives its lease, while a killed agent's leases
/// still lapse within `hold` (the thread dies with it).
pub struct Renewer {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<std::result::Result<bool, String>>,
}

impl Renewer {
    /// Starts renewing `lease` in the database at `url`.
    pub fn start(url: &str, lease: &Lease, hold: DurationNs) -> Result<Renewer> {
        use std::sync::atomic::{AtomicBool, Ordering};
        let shown = Location::parse(url).to_string();
        let mut client = pathsonde_archive::connect_postgres(url)?;
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let lease = lease.clone();
        let every = Duration::from_nanos((hold.ns() / 3).max(1_000_000) as u64);
        let thread = std::thread::spawn(move || {
            let mut next = std::time::Instant::now() + every;
            loop {
                while std::time::Instant::now() < next {
                    if flag.load(Ordering::Relaxed) {
                        return Ok(true);
                    }
                    std::thread::sleep(Duration::from_millis(20).min(every));
                }
                next += every;
                match renew(&mut client, &shown, &lease, UnixMs::now(), hold) {
                    Ok(true) => {}
                    Ok(false) => return Ok(false),
                    Err(e) => return Err(e.to_string()),
                }
            }
        });
        Ok(Renewer { stop, thread })
    }

    /// Stops renewing: `Ok(true)` when the leases were held throughout,
    /// `Ok(false)` when one was lost, `Err` when renewing failed.
    pub fn stop(self) -> std::result::Result<bool, String> {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread
            .join()
            .unwrap_or_else(|_| Err("the lease renewer panicked".into()))
    }
}

/// Extends `lease`'s rows that still carry its run UUID and have not
/// expired to `now + hold` (an expired lease may have been taken and
/// released by someone else meanwhile: it is not ours to revive).
fn renew(
    client: &mut Client,
    shown: &str,
    lease: &Lease,
    now: UnixMs,
    hold: DurationNs,
) -> Result<bool> {
    let n = client
        .execute(
            "UPDATE leases SET expires_unix_ms = $3
             WHERE run_uuid = $1 AND resource = ANY($2) AND expires_unix_ms > $4",
            &[&lease.run_uuid, &lease.resources, &now.plus(hold).0, &now.0],
        )
        .map_err(|e| db_err(shown, "renewing leases", e))?;
    Ok(n as usize == lease.resources.len())
}

/// Takes one resource inside the transaction: `None` when taken, the
/// holder when busy.
fn take_one(
    tx: &mut Transaction<'_>,
    resource: &str,
    req: &LeaseRequest,
    now: UnixMs,
    expires: UnixMs,
) -> std::result::Result<Option<Taken>, pathsonde_archive::postgres::Error> {
    let got = tx.query_opt(
        "INSERT INTO leases (resource, holder, test, run_uuid, taken_unix_ms, expires_unix_ms)
         VALUES ($1, $2, $3, $4, $5, $6)
         ON CONFLICT (resource) DO UPDATE SET holder = EXCLUDED.holder, test = EXCLUDED.test,
             run_uuid = EXCLUDED.run_uuid, taken_unix_ms = EXCLUDED.taken_unix_ms,
             expires_unix_ms = EXCLUDED.expires_unix_ms
         WHERE leases.expires_unix_ms <= EXCLUDED.taken_unix_ms
         RETURNING resource",
        &[
            &resource,
            &req.holder,
            &req.test,
            &req.run_uuid,
            &now.0,
            &expires.0,
        ],
    )?;
    if got.is_some() {
        return Ok(None);
    }
    let row = tx.query_one(
        "SELECT holder, test, expires_unix_ms FROM leases WHERE resource = $1",
        &[&resource],
    )?;
    Ok(Some(Taken::Busy {
        resource: resource.to_string(),
        holder: row.try_get(0)?,
        test: row.try_get(1)?,
        until: UnixMs(row.try_get(2)?),
    }))
}
