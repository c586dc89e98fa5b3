//! The fleet's database side against a real PostgreSQL (the one CI starts,
//! `PATHSONDE_TEST_POSTGRES`; each test in a schema of its own): leases
//! never overlap between concurrent takers, expire and are retaken, a test
//! that cannot get its slot is a recorded skip, and results spooled while
//! the database was unreachable arrive once when it is back.  Without a
//! server these tests say "skipped" and pass; under CI (`CI` set) they fail.

use pathsonde_archive::testing::{TempDir, TestPg};
use pathsonde_archive::{Archive, Record, RunData};
use pathsonde_core::DurationNs;
use pathsonde_fleet::{
    FleetDb, FleetError, LeaseRequest, Skip, Spool, SpoolEntry, Taken, UnixMs, Written,
};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

fn request(resources: &[&str], holder: &str, hold_ms: i64) -> LeaseRequest {
    LeaseRequest {
        resources: resources.iter().map(|s| s.to_string()).collect(),
        holder: holder.into(),
        test: format!("abw/{holder}->x"),
        run_uuid: pathsonde_fleet::new_run_uuid(),
        hold: DurationNs::from_ms(hold_ms),
    }
}

/// A fresh archive in a schema of the test's own, or `None` (skipped).
fn archive(tag: &str) -> Option<(TestPg, String)> {
    let pg = TestPg::new(tag)?;
    let url = pg.url();
    // Created (migrated to the current schema) as the owner would.
    Archive::open(&url).expect("creating the archive");
    Some((pg, url))
}

#[test]
fn concurrent_takers_never_hold_one_server_at_once() {
    let Some((_pg, url)) = archive("overlap") else {
        return;
    };
    let inside_x = Arc::new(AtomicU32::new(0));
    let inside_p = Arc::new(AtomicU32::new(0));
    let mut threads = Vec::new();
    // Two agents on server x; a third on server y sharing path p with the
    // second: overlapping sets, taken in sorted order, never deadlock.
    let sets: [&[&str]; 3] = [
        &["server:x"],
        &["server:x", "path:p"],
        &["path:p", "server:y"],
    ];
    for (n, set) in sets.into_iter().enumerate() {
        let url = url.clone();
        let (inside_x, inside_p) = (inside_x.clone(), inside_p.clone());
        threads.push(std::thread::spawn(move || {
            let mut db = FleetDb::connect(&url).unwrap();
            let mut granted = 0;
            for _ in 0..15 {
                let req = request(set, &format!("agent{n}"), 10_000);
                let deadline = UnixMs::now().plus(DurationNs::from_secs(5));
                let got = db
                    .take_within(
                        &req,
                        deadline,
                        Duration::from_millis(2),
                        &mut UnixMs::now,
                        &mut std::thread::sleep,
                    )
                    .unwrap();
                let Taken::Granted(lease) = got else {
                    continue;
                };
                granted += 1;
                let x = set.contains(&"server:x");
                let p = set.contains(&"path:p");
                if x {
                    assert_eq!(
                        inside_x.fetch_add(1, Ordering::SeqCst),
                        0,
                        "two on server x"
                    );
                }
                if p {
                    assert_eq!(inside_p.fetch_add(1, Ordering::SeqCst), 0, "two on path p");
                }
                std::thread::sleep(Duration::from_millis(8));
                if x {
                    inside_x.fetch_sub(1, Ordering::SeqCst);
                }
                if p {
                    inside_p.fetch_sub(1, Ordering::SeqCst);
                }
                db.release(&lease).unwrap();
            }
            granted
        }));
    }
    let granted: Vec<i32> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    assert!(granted.iter().all(|&g| g > 0), "{granted:?}");
}

#[test]
fn an_expired_lease_is_retaken_and_the_old_holder_cannot_release_it() {
    let Some((_pg, url)) = archive("expiry") else {
        return;
    };
    let mut a = FleetDb::connect(&url).unwrap();
    let mut b = FleetDb::connect(&url).unwrap();
    let t0 = UnixMs(1_800_000_000_000);
    let ra = request(&["server:x"], "chicago", 1_000);
    let Taken::Granted(la) = a.try_take(&ra, t0).unwrap() else {
        panic!("the first taker gets it");
    };
    let rb = request(&["server:x"], "geneva", 1_000);
    match b.try_take(&rb, UnixMs(t0.0 + 500)).unwrap() {
        Taken::Busy {
            resource,
            holder,
            until,
            ..
        } => {
            assert_eq!(
                (resource.as_str(), holder.as_str()),
                ("server:x", "chicago")
            );
            assert_eq!(until, UnixMs(t0.0 + 1_000));
        }
        other => panic!("{other:?}"),
    }
    // chicago was killed: its lease lapses, geneva takes it over.
    let Taken::Granted(lb) = b.try_take(&rb, UnixMs(t0.0 + 1_000)).unwrap() else {
        panic!("an expired lease is retaken");
    };
    // chicago comes back and releases what it thinks it holds: geneva's
    // lease stays.
    a.release(&la).unwrap();
    let rows = b.leases().unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].holder, "geneva");
    assert_eq!(rows[0].run_uuid, lb.run_uuid);
    b.release(&lb).unwrap();
    assert!(b.leases().unwrap().is_empty());
}

#[test]
fn a_test_that_cannot_get_its_slot_is_a_recorded_skip() {
    let Some((_pg, url)) = archive("skip") else {
        return;
    };
    let mut a = FleetDb::connect(&url).unwrap();
    let mut b = FleetDb::connect(&url).unwrap();
    let t0 = UnixMs(1_800_000_000_000);
    let Taken::Granted(_) = a
        .try_take(&request(&["server:x"], "chicago", 60_000), t0)
        .unwrap()
    else {
        panic!("granted");
    };
    // geneva waits up to 3 s of its (driven) clock, retrying every 500 ms.
    let rb = request(&["server:x"], "geneva", 60_000);
    let now = std::cell::Cell::new(t0);
    let tries = std::cell::Cell::new(0);
    let got = b
        .take_within(
            &rb,
            UnixMs(t0.0 + 3_000),
            Duration::from_millis(500),
            &mut || {
                tries.set(tries.get() + 1);
                now.get()
            },
            &mut |d| now.set(UnixMs(now.get().0 + d.as_millis() as i64)),
        )
        .unwrap();
    let now = now.get();
    assert_eq!(tries.get(), 7, "tried at 0, 0.5, … 3 s");
    let Taken::Busy { holder, test, .. } = got else {
        panic!("still busy");
    };
    let skip = Skip {
        run_uuid: rb.run_uuid.clone(),
        test: rb.test.clone(),
        source: "geneva".into(),
        destination: "x".into(),
        scheduled: t0,
        recorded: now,
        reason: format!("server:x held by {holder} ({test}) past the 3 s wait"),
    };
    assert!(b.record_skip(&skip).unwrap());
    assert!(!b.record_skip(&skip).unwrap(), "recorded once");
    assert_eq!(a.skips().unwrap(), vec![skip]);
}

fn run(n: u64) -> RunData {
    let mut r = RunData::from_record(&Record {
        kind: "mesh".into(),
        target: "chicago->geneva".into(),
        method: Some("fac2".into()),
        started: SystemTime::now(),
        duration: Duration::from_secs(2),
        summary: format!("A {n} Mb/s"),
        result: serde_json::json!({ "available_bps": n as f64 * 1e6 }),
        raw: Some(serde_json::json!({ "observations": [n] })),
    })
    .unwrap();
    r.run_uuid = Some(pathsonde_fleet::new_run_uuid());
    r
}

#[test]
fn results_spooled_while_the_database_is_down_arrive_once() {
    let Some((_pg, url)) = archive("spool") else {
        return;
    };
    let dir = TempDir::new("spool");
    let spool = Spool::open(&dir.0).unwrap();
    // Down: nothing listens on port 1.
    let down = "postgresql://pathsonde@127.0.0.1:1/pathsonde_test?connect_timeout=2";
    let mut db: Option<FleetDb> = None;
    let r = run(100);
    let skip = Skip {
        run_uuid: pathsonde_fleet::new_run_uuid(),
        test: "abw/chicago->tokyo".into(),
        source: "chicago".into(),
        destination: "tokyo".into(),
        scheduled: UnixMs(r.started_unix_ms + 1),
        recorded: UnixMs(r.started_unix_ms + 2),
        reason: "database unreachable".into(),
    };
    for e in [SpoolEntry::run(&r), SpoolEntry::Skip(skip.clone())] {
        match spool.write_or_spool(&mut db, down, &e).unwrap() {
            Written::Spooled { reason, .. } => assert!(reason.contains("127.0.0.1"), "{reason}"),
            other => panic!("{other:?}"),
        }
    }
    assert!(db.is_none());
    assert_eq!(spool.pending().unwrap().len(), 2);
    // A write killed half-way leaves a .tmp, removed on the next open.
    std::fs::write(dir.0.join("x.json.tmp"), b"{\"kind\":").unwrap();
    let spool = Spool::open(&dir.0).unwrap();
    assert_eq!(spool.pending().unwrap().len(), 2);

    // Back: flushed in order, exactly once.
    let mut back = FleetDb::connect(&url).unwrap();
    let report = spool.flush(&mut back).unwrap();
    assert_eq!(
        (report.written, report.already_there, report.damaged),
        (2, 0, 0)
    );
    assert!(spool.pending().unwrap().is_empty());
    assert_eq!(back.archive().count().unwrap(), 1);
    let id = back.archive().list(1, Some("mesh")).unwrap()[0].id;
    let stored = back.archive().fetch(id).unwrap();
    assert_eq!(stored.run_uuid, r.run_uuid);
    assert_eq!(stored.raw, r.raw, "raw bytes arrive unchanged");
    assert_eq!(back.skips().unwrap(), vec![skip.clone()]);

    // The commit landed but the agent never heard (killed before removing
    // the file): the same entries again store nothing twice.
    spool.put(&SpoolEntry::run(&r)).unwrap();
    spool.put(&SpoolEntry::Skip(skip)).unwrap();
    let report = spool.flush(&mut back).unwrap();
    assert_eq!((report.written, report.already_there), (0, 2));
    assert_eq!(back.archive().count().unwrap(), 1);
    assert_eq!(back.skips().unwrap().len(), 1);

    // With the database up, write_or_spool writes straight through.
    let mut db = None;
    let r2 = run(200);
    let w = spool
        .write_or_spool(&mut db, &url, &SpoolEntry::run(&r2))
        .unwrap();
    assert_eq!(w, Written::Stored { fresh: true });
    assert!(spool.pending().unwrap().is_empty());
}

#[test]
fn the_fleet_refuses_a_sqlite_archive() {
    match FleetDb::connect("/tmp/some/archive.sqlite") {
        Err(e @ FleetError::NotPostgres(_)) => {
            assert!(e.to_string().contains("needs a PostgreSQL archive"), "{e}")
        }
        other => panic!("{:?}", other.map(|_| ())),
    }
}

/// An agent's own role (docs/fleet.md: one role per agent, granted by
/// `postgres_agent_grants`) can do everything the fleet needs: take and
/// release leases, take over another role's expired lease, record skips,
/// and write its runs once.
#[test]
fn an_agent_role_has_every_privilege_the_fleet_needs() {
    let Some((mut pg, _owner_url)) = archive("role") else {
        return;
    };
    let chicago = pg.agent_role("chicago").unwrap();
    let geneva = pg.agent_role("geneva").unwrap();
    let mut a = FleetDb::connect(&pg.url_as(Some(&chicago))).unwrap();
    let mut b = FleetDb::connect(&pg.url_as(Some(&geneva))).unwrap();
    let t0 = UnixMs(1_800_000_000_000);
    let Taken::Granted(la) = a
        .try_take(&request(&["server:x"], "chicago", 1_000), t0)
        .unwrap()
    else {
        panic!("granted");
    };
    let rb = request(&["server:x"], "geneva", 1_000);
    let Taken::Granted(lb) = b.try_take(&rb, UnixMs(t0.0 + 2_000)).unwrap() else {
        panic!("another role's expired lease is taken over");
    };
    a.release(&la).unwrap();
    b.release(&lb).unwrap();
    let skip = Skip {
        run_uuid: rb.run_uuid.clone(),
        test: rb.test.clone(),
        source: "geneva".into(),
        destination: "x".into(),
        scheduled: t0,
        recorded: t0,
        reason: "test".into(),
    };
    assert!(b.record_skip(&skip).unwrap());
    let r = run(5);
    assert!(a.archive().save_run(&r).unwrap().1);
    assert!(!a.archive().save_run(&r).unwrap().1);
    let id = a.archive().list(1, None).unwrap()[0].id;
    assert_eq!(
        a.archive().get(id).unwrap().summary.agent.as_deref(),
        Some(chicago.as_str())
    );
}

/// A test that runs longer than its lease keeps it: the renewer extends it
/// while the test runs, and once stopped the lease lapses as usual.
#[test]
fn a_renewed_lease_outlives_its_hold_and_lapses_when_renewal_stops() {
    let Some((_pg, url)) = archive("renew") else {
        return;
    };
    let mut a = FleetDb::connect(&url).unwrap();
    let mut b = FleetDb::connect(&url).unwrap();
    let req = request(&["server:x", "path:p"], "chicago", 600);
    let Taken::Granted(lease) = a.try_take(&req, UnixMs::now()).unwrap() else {
        panic!("granted");
    };
    let renewer = pathsonde_fleet::Renewer::start(&url, &lease, req.hold).unwrap();
    std::thread::sleep(Duration::from_millis(1_500));
    let other = request(&["server:x"], "geneva", 600);
    assert!(
        matches!(
            b.try_take(&other, UnixMs::now()).unwrap(),
            Taken::Busy { .. }
        ),
        "still held 1.5 s into a 0.6 s lease"
    );
    assert_eq!(renewer.stop(), Ok(true));
    std::thread::sleep(Duration::from_millis(700));
    assert!(matches!(
        b.try_take(&other, UnixMs::now()).unwrap(),
        Taken::Granted(_)
    ));
    // The old holder's renewal now finds its lease gone.
    assert!(!a.renew(&lease, UnixMs::now(), req.hold).unwrap());
}

/// An entry the database refuses for its data (here a NUL character, which
/// PostgreSQL text cannot hold) is set aside as `.rejected` with the reason,
/// and the entries after it are still written; a lost connection is not
/// taken for such a refusal.
#[test]
fn an_entry_the_database_refuses_for_good_does_not_hold_back_the_rest() {
    let Some((_pg, url)) = archive("reject") else {
        return;
    };
    let dir = TempDir::new("reject");
    let spool = Spool::open(&dir.0).unwrap();
    let skip = |n: i64, reason: &str| Skip {
        run_uuid: pathsonde_fleet::new_run_uuid(),
        test: "abw/a->b".into(),
        source: "a".into(),
        destination: "b".into(),
        scheduled: UnixMs(1_000 + n),
        recorded: UnixMs(2_000),
        reason: reason.into(),
    };
    spool
        .put(&SpoolEntry::Skip(skip(1, "bad\0reason")))
        .unwrap();
    let good = skip(2, "fine");
    spool.put(&SpoolEntry::Skip(good.clone())).unwrap();
    let mut db = FleetDb::connect(&url).unwrap();
    let report = spool.flush(&mut db).unwrap();
    assert_eq!(report.written, 1);
    assert_eq!(report.rejected.len(), 1, "{report:?}");
    let (aside, why) = &report.rejected[0];
    assert!(aside.extension().is_some_and(|x| x == "rejected") && aside.exists());
    assert!(why.contains("recording a skip"), "{why}");
    assert!(spool.pending().unwrap().is_empty());
    assert_eq!(db.skips().unwrap(), vec![good]);
    // A database that is not there is not a refusal.
    let down = FleetDb::connect("postgresql://pathsonde@127.0.0.1:1/x?connect_timeout=1");
    assert!(!down.err().unwrap().refused_for_good());
}
