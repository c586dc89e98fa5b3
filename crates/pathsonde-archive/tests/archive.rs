//! The archive end to end on both stores (a SQLite file and, when
//! `PATHSONDE_TEST_POSTGRES` names a server, a PostgreSQL schema of the
//! test's own): save and read back, migrations from an older schema,
//! refusal of a newer one, the raw-data bound, one transaction per run, and
//! `copy` between stores with nothing lost.

use pathsonde_archive::testing::{both, TestArchive};
use pathsonde_archive::{
    create_at_version, Archive, ArchiveError, Location, Record, SCHEMA_VERSION,
};
use serde_json::json;
use std::time::{Duration, SystemTime};

fn record(n: u64, raw: Option<serde_json::Value>) -> Record {
    Record {
        kind: "abw".into(),
        target: format!("127.0.0.1:{n}"),
        method: Some("fac2".into()),
        started: SystemTime::now(),
        duration: Duration::from_millis(1500),
        summary: format!("A {n} Mb/s"),
        result: json!({ "available_bps": n as f64 * 1e6, "n": n }),
        raw,
    }
}

#[test]
fn saves_lists_shows_and_removes() {
    for t in both("basic") {
        let p = &t.location;
        let mut a = Archive::open(p).unwrap();
        assert_eq!(a.location().is_postgres(), t.store == "postgres");
        assert_eq!(a.schema_version().unwrap(), SCHEMA_VERSION, "{}", t.store);
        let raw = json!({ "observations": [[1, 2], [3, 4]] });
        let id1 = a.save(&record(100, Some(raw.clone()))).unwrap();
        let id2 = a.save(&record(200, None)).unwrap();
        assert!(id2 > id1);
        let list = a.list(10, None).unwrap();
        assert_eq!(
            list.iter().map(|s| s.id).collect::<Vec<_>>(),
            vec![id2, id1]
        );
        assert!(list[1].raw.present && !list[0].raw.present);
        assert!(list[1].raw.compressed_bytes.unwrap() > 0);
        assert_eq!(a.list(10, Some("lab-run")).unwrap().len(), 0);
        assert_eq!(a.list(10, Some("abw")).unwrap().len(), 2);
        assert_eq!(a.list(1, None).unwrap().len(), 1);
        let s = a.get(id1).unwrap();
        assert_eq!(s.result["n"], 100);
        assert_eq!(s.summary.method.as_deref(), Some("fac2"));
        assert!((s.summary.duration_s - 1.5).abs() < 1e-9);
        assert_eq!(a.raw(id1).unwrap(), Some(raw));
        assert_eq!(a.raw(id2).unwrap(), None);
        drop(a);
        // Reopened: all still there.
        let mut a = Archive::open(p).unwrap();
        assert_eq!(a.count().unwrap(), 2);
        a.remove(id1).unwrap();
        assert!(matches!(a.get(id1), Err(ArchiveError::NoSuchRun(_))));
        assert!(matches!(a.remove(id1), Err(ArchiveError::NoSuchRun(_))));
        assert!(matches!(a.raw(id1), Err(ArchiveError::NoSuchRun(_))));
        assert_eq!(a.count().unwrap(), 1);
        assert_eq!(a.integrity_check().unwrap(), "ok", "{}", t.store);
    }
}

#[test]
fn the_result_text_is_kept_exactly() {
    for t in both("exact") {
        let mut a = Archive::open(&t.location).unwrap();
        let mut rec = record(1, None);
        // Key order, float spelling and unicode as serde_json writes them.
        rec.result = json!({ "z": 1, "a": 0.1, "m": [1e300, -0.0], "s": "δ \"q\" \u{1F600}" });
        let id = a.save(&rec).unwrap();
        let want = serde_json::to_string(&rec.result).unwrap();
        assert_eq!(a.fetch(id).unwrap().result_json, want, "{}", t.store);
        assert_eq!(a.get(id).unwrap().result, rec.result, "{}", t.store);
    }
}

#[test]
fn an_older_archive_is_migrated_in_place_keeping_its_runs() {
    for t in both("migrate") {
        let p = &t.location;
        let mut old = Archive::open_at_version(p, 1).unwrap();
        assert_eq!(old.schema_version().unwrap(), 1);
        old.execute_batch_for_tests(
            "INSERT INTO runs (kind, target, method, started_unix_ms, duration_s, summary, software, result_json)
             VALUES ('abw', 'old:1', 'fac2', 1, 2.0, 'old run', 'pathsonde 0.0.1', '{\"old\":true}')",
        )
        .unwrap();
        drop(old);
        let mut a = Archive::open(p).unwrap();
        assert_eq!(a.schema_version().unwrap(), SCHEMA_VERSION, "{}", t.store);
        let old = a.list(10, None).unwrap();
        assert_eq!(old.len(), 1);
        assert_eq!(a.get(old[0].id).unwrap().result["old"], true);
        assert!(!old[0].raw.present);
        // The migrated archive takes new runs with raw data.
        let id = a.save(&record(5, Some(json!([1, 2, 3])))).unwrap();
        assert_eq!(a.raw(id).unwrap(), Some(json!([1, 2, 3])));
    }
}

#[test]
fn the_sqlite_helper_makes_the_same_older_schema() {
    let t = TestArchive::sqlite("helper");
    let conn = create_at_version(std::path::Path::new(&t.location), 1).unwrap();
    let v: i64 = conn
        .query_row("SELECT MAX(version) FROM schema_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(v, 1);
}

#[test]
fn a_newer_archive_is_refused_untouched() {
    for t in both("newer") {
        let p = &t.location;
        let mut a = Archive::open(p).unwrap();
        a.execute_batch_for_tests(&format!(
            "INSERT INTO schema_version (version, applied_unix_ms) VALUES ({}, 0)",
            SCHEMA_VERSION + 1
        ))
        .unwrap();
        drop(a);
        match Archive::open(p) {
            Err(ArchiveError::TooNew { found, .. }) => {
                assert_eq!(found, SCHEMA_VERSION + 1, "{}", t.store)
            }
            Err(e) => panic!("{}: wrong error {e}", t.store),
            Ok(_) => panic!("{}: a newer schema was accepted", t.store),
        }
        // Readers refuse it too.
        assert!(matches!(
            Archive::open_existing(p),
            Err(ArchiveError::TooNew { .. })
        ));
    }
}

#[test]
fn nothing_there_is_no_archive_for_a_reader_and_nothing_is_created() {
    for t in both("absent") {
        assert!(Archive::open_existing(&t.location).unwrap().is_none());
        if let Some(p) = Location::parse(&t.location).sqlite_path() {
            assert!(!p.exists());
        }
        // Still nothing: a writer then creates it.
        assert!(Archive::open_existing(&t.location).unwrap().is_none());
        Archive::open(&t.location).unwrap();
        let mut a = Archive::open_existing(&t.location).unwrap().unwrap();
        assert_eq!(a.count().unwrap(), 0);
    }
}

#[test]
fn raw_data_above_the_bound_is_dropped_with_a_note_and_the_result_kept() {
    // Incompressible: a pseudo-random hex string of 24 MB (12 MB of entropy).
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut s = String::with_capacity(24 << 20);
    while s.len() < 24 << 20 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        s.push_str(&format!("{x:016x}"));
    }
    let noise = json!({ "noise": s });
    for t in both("bound") {
        let mut a = Archive::open(&t.location).unwrap();
        let id = a.save(&record(1, Some(noise.clone()))).unwrap();
        let got = a.get(id).unwrap();
        assert_eq!(got.result["n"], 1);
        assert!(!got.summary.raw.present);
        assert!(got.summary.raw.note.unwrap().contains("not kept"));
        assert_eq!(a.raw(id).unwrap(), None);
    }
}

#[test]
fn an_unwritable_location_is_a_clear_error() {
    let e = Archive::open(std::path::Path::new("/proc/pathsonde/archive.sqlite"))
        .err()
        .expect("opening under /proc must fail");
    assert!(e.to_string().contains("/proc/pathsonde"), "{e}");
}

#[test]
fn a_run_whose_raw_data_fails_to_write_leaves_nothing_behind() {
    // The run's row and its raw data are one transaction: make the second
    // insert fail and the first must not survive.
    for t in both("atomic") {
        let mut a = Archive::open(&t.location).unwrap();
        let kept = a.save(&record(1, Some(json!([1])))).unwrap();
        let trigger = match t.store {
            "sqlite" => "CREATE TEMP TRIGGER fail_raw BEFORE INSERT ON raw BEGIN SELECT RAISE(ABORT, 'injected failure'); END;",
            _ => "CREATE FUNCTION fail_raw() RETURNS trigger LANGUAGE plpgsql AS $$
                  BEGIN RAISE EXCEPTION 'injected failure'; END $$;
                  CREATE TRIGGER fail_raw BEFORE INSERT ON raw FOR EACH ROW EXECUTE FUNCTION fail_raw();",
        };
        a.execute_batch_for_tests(trigger).unwrap();
        let e = a.save(&record(2, Some(json!([2])))).unwrap_err();
        assert!(
            e.to_string().contains("injected failure"),
            "{}: {e}",
            t.store
        );
        assert_eq!(
            a.count().unwrap(),
            1,
            "{}: half a run was left behind",
            t.store
        );
        assert_eq!(a.list(10, None).unwrap()[0].id, kept);
        // Without raw data the same archive still takes runs.
        a.save(&record(3, None)).unwrap();
        assert_eq!(a.count().unwrap(), 2);
    }
}

/// SQLite → PostgreSQL → a new SQLite file: every field of every run and
/// the raw bytes arrive unchanged; a second copy adds nothing.
#[test]
fn copy_round_trips_between_the_stores_with_nothing_lost() {
    let Some(pg) = TestArchive::postgres("copy") else {
        return;
    };
    let first = TestArchive::sqlite("copy-from");
    let last = TestArchive::sqlite("copy-back");
    let mut src = Archive::open(&first.location).unwrap();
    let mut big = String::new();
    for i in 0..20_000u32 {
        big.push_str(&format!("{:08x}", i.wrapping_mul(2_654_435_761)));
    }
    let runs = [
        record(1, Some(json!({ "observations": [[1, 2], [3, 4]] }))),
        record(2, None),
        Record {
            kind: "lab-run".into(),
            method: None,
            started: SystemTime::UNIX_EPOCH + Duration::from_millis(1_700_000_000_123),
            ..record(3, Some(json!({ "noise": big })))
        },
        record(4, Some(json!([]))),
    ];
    for r in &runs {
        src.save(r).unwrap();
    }
    // A removed run leaves a gap in the ids: copied runs get new ids.
    let gone = src.save(&record(99, None)).unwrap();
    src.remove(gone).unwrap();
    let ids = src.list(100, None).unwrap();
    let want: Vec<_> = ids.iter().rev().map(|s| src.fetch(s.id).unwrap()).collect();
    assert_eq!(want.len(), runs.len());

    let mut mid = Archive::open(&pg.location).unwrap();
    // PostgreSQL records the role that wrote each run: the copier's here.
    let me = std::iter::once(Some(current_role(&pg)));
    let r = src.copy_into(&mut mid, |_, _, _| {}).unwrap();
    assert_eq!((r.copied, r.already_there), (4, 0));
    // Idempotent: nothing is copied twice.
    let r = src.copy_into(&mut mid, |_, _, _| {}).unwrap();
    assert_eq!((r.copied, r.already_there), (0, 4));
    assert_eq!(mid.count().unwrap(), 4);

    let mut back = Archive::open(&last.location).unwrap();
    let r = mid.copy_into(&mut back, |_, _, _| {}).unwrap();
    assert_eq!((r.copied, r.already_there), (4, 0));
    let me = me.collect::<Vec<_>>().remove(0);
    for (arch, name) in [(&mut mid, "postgres"), (&mut back, "sqlite copy")] {
        let got: Vec<_> = arch
            .list(100, None)
            .unwrap()
            .iter()
            .rev()
            .map(|s| {
                let mut r = arch.fetch(s.id).unwrap();
                assert_eq!(r.agent, me, "{name}: the writing role is kept");
                r.agent = None;
                r
            })
            .collect();
        assert_eq!(got, want, "{name}: a field changed in the copy");
        let bytes: Vec<_> = got
            .iter()
            .map(|r| r.raw.as_ref().map(|b| &b.data))
            .collect();
        let want_bytes: Vec<_> = want
            .iter()
            .map(|r| r.raw.as_ref().map(|b| &b.data))
            .collect();
        assert_eq!(bytes, want_bytes, "{name}: raw bytes changed");
        // The summaries (sizes, notes) agree too.
        let s: Vec<_> = arch
            .list(100, None)
            .unwrap()
            .into_iter()
            .map(|mut s| {
                s.id = 0;
                s.agent = None;
                s
            })
            .collect();
        let w: Vec<_> = src
            .list(100, None)
            .unwrap()
            .into_iter()
            .map(|mut s| {
                s.id = 0;
                s
            })
            .collect();
        assert_eq!(s, w, "{name}");
        assert_eq!(arch.integrity_check().unwrap(), "ok");
    }
    let third = back.list(100, None).unwrap()[1].id;
    assert_eq!(
        back.raw(third).unwrap(),
        Some(json!({ "noise": big })),
        "the raw data reads back"
    );
}

/// The role a test archive's URL logs in as.
fn current_role(t: &TestArchive) -> String {
    let mut a = Archive::open(&t.location).unwrap();
    let id = a.save(&record(0, None)).unwrap();
    let who = a
        .fetch(id)
        .unwrap()
        .agent
        .expect("PostgreSQL records the role");
    a.remove(id).unwrap();
    who
}

/// One role per agent: each reads every run, adds runs only as itself and
/// removes only its own; the archive's owner is not bound (docs/fleet.md).
#[test]
fn each_agent_role_writes_and_removes_only_its_own_runs() {
    let Some(mut t) = TestArchive::postgres("rls") else {
        return;
    };
    let mut owner = Archive::open(&t.location).unwrap();
    let pg = t.pg.as_mut().unwrap();
    let (ra, rb) = (pg.agent_role("a").unwrap(), pg.agent_role("b").unwrap());
    let mut a = Archive::open(pg.url_as(Some(&ra))).unwrap();
    let mut b = Archive::open(pg.url_as(Some(&rb))).unwrap();
    let ida = a.save(&record(1, Some(json!([1])))).unwrap();
    let idb = b.save(&record(2, None)).unwrap();
    let idb2 = b.save(&record(3, None)).unwrap();
    assert_eq!(
        a.get(ida).unwrap().summary.agent.as_deref(),
        Some(ra.as_str())
    );
    // Everyone reads everything.
    assert_eq!(a.list(10, None).unwrap().len(), 3);
    assert_eq!(b.raw(ida).unwrap(), Some(json!([1])));
    // Removing another role's run is refused, saying whose it is.
    let e = b.remove(ida).unwrap_err().to_string();
    assert!(e.contains(&ra), "{e}");
    assert_eq!(owner.count().unwrap(), 3);
    b.remove(idb).unwrap();
    // A run claiming to be another role's, or raw data added to another
    // role's run, is refused by the database itself.
    let e = a
        .execute_batch_for_tests(&format!(
            "INSERT INTO runs (kind, target, started_unix_ms, duration_s, summary, software, result_json, agent)
             VALUES ('abw', 'forged', 0, 0, '', 'x', '{{}}', '{rb}')"
        ))
        .unwrap_err()
        .to_string();
    assert!(e.contains("row-level security"), "{e}");
    let e = a
        .execute_batch_for_tests(&format!(
            "INSERT INTO raw (run_id, encoding, uncompressed_bytes, data) VALUES ({idb2}, 'json+gzip', 1, '\\x00')"
        ))
        .unwrap_err()
        .to_string();
    assert!(e.contains("row-level security"), "{e}");
    // Nor can an agent change a run (no UPDATE privilege at all).
    assert!(a
        .execute_batch_for_tests(&format!("UPDATE runs SET summary = 'x' WHERE id = {ida}"))
        .is_err());
    // The owner may remove anyone's run.
    owner.remove(idb2).unwrap();
    assert_eq!(owner.count().unwrap(), 1);
}

/// Many openers of one new SQLite file, over and over: the switch to the
/// WAL journal is refused at once (no busy wait) while another opener holds
/// the file, so an opener that did not retry it failed about one round in
/// eight ("database is locked").  Twenty rounds make that failure all but
/// certain, and every open must succeed.
#[test]
fn a_new_sqlite_file_opened_by_many_at_once_opens_for_all() {
    for round in 0..20 {
        let t = TestArchive::sqlite(&format!("wal{round}"));
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let loc = t.location.clone();
                std::thread::spawn(move || Archive::open(&loc).map(|_| ()))
            })
            .collect();
        for th in threads {
            if let Err(e) = th.join().unwrap() {
                panic!("round {round}: {e}");
            }
        }
    }
}

/// Agents starting together on a fresh archive: every one opens it, the
/// migrations run once each (the advisory lock), every save lands.
#[test]
fn openers_racing_on_a_fresh_archive_migrate_it_once() {
    for t in both("race") {
        let threads: Vec<_> = (0..6)
            .map(|i| {
                let loc = t.location.clone();
                std::thread::spawn(move || {
                    let mut a = Archive::open(&loc).unwrap();
                    a.save(&record(i, None)).unwrap()
                })
            })
            .collect();
        for th in threads {
            th.join().unwrap();
        }
        let mut a = Archive::open(&t.location).unwrap();
        assert_eq!(a.count().unwrap(), 6, "{}", t.store);
        assert_eq!(a.schema_version().unwrap(), SCHEMA_VERSION);
        // One row per migration, none applied twice.
        a.execute_batch_for_tests(&format!(
            "CREATE TEMP TABLE check_once AS SELECT COUNT(*) AS n FROM schema_version;
             INSERT INTO runs (kind, target, started_unix_ms, duration_s, summary, software, result_json)
             SELECT 'check', 'x', 0, 0, '', '', '{{}}' FROM check_once WHERE n <> {SCHEMA_VERSION};"
        ))
        .unwrap();
        assert_eq!(a.list(10, Some("check")).unwrap().len(), 0, "{}", t.store);
    }
}

/// A fleet agent's retried write (its first commit landed but the
/// acknowledgement was lost) stores nothing twice: the run's UUID decides.
#[test]
fn a_run_uuid_is_stored_once() {
    for t in both("uuid") {
        let mut a = Archive::open(&t.location).unwrap();
        let mut run =
            pathsonde_archive::RunData::from_record(&record(7, Some(json!([1])))).unwrap();
        run.run_uuid = Some("5a1e0c1d-0000-4000-8000-000000000001".into());
        let (id, fresh) = a.save_run(&run).unwrap();
        assert!(fresh, "{}", t.store);
        let (again, fresh) = a.save_run(&run).unwrap();
        assert_eq!((again, fresh), (id, false), "{}", t.store);
        assert_eq!(a.count().unwrap(), 1, "{}", t.store);
        assert_eq!(a.fetch(id).unwrap().run_uuid, run.run_uuid, "{}", t.store);
        // Runs without a UUID are never taken for one another.
        a.save(&record(8, None)).unwrap();
        a.save(&record(8, None)).unwrap();
        assert_eq!(a.count().unwrap(), 3, "{}", t.store);
    }
}
