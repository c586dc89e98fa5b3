//! The archive file end to end: save and read back, migrations from an older
//! schema, refusal of a newer one, and the raw-data bound.

use pathsonde_archive::{create_at_version, Archive, ArchiveError, Record, SCHEMA_VERSION};
use serde_json::json;
use std::time::{Duration, SystemTime};

/// A temporary archive file whose directory is removed when dropped.
struct Tmp(std::path::PathBuf);

impl Tmp {
    fn path(&self) -> std::path::PathBuf {
        self.0.join("a.sqlite")
    }
}

impl Drop for Tmp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn tmp(name: &str) -> Tmp {
    let d = std::env::temp_dir().join(format!(
        "pathsonde-archive-test-{}-{name}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    Tmp(d)
}

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
    let dir = tmp("basic");
    let p = dir.path();
    let mut a = Archive::open(&p).unwrap();
    assert_eq!(a.schema_version().unwrap(), SCHEMA_VERSION);
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
    assert_eq!(a.list(10, Some("lab-run")).unwrap().len(), 0);
    let s = a.get(id1).unwrap();
    assert_eq!(s.result["n"], 100);
    assert_eq!(s.summary.method.as_deref(), Some("fac2"));
    assert!((s.summary.duration_s - 1.5).abs() < 1e-9);
    assert_eq!(a.raw(id1).unwrap(), Some(raw));
    assert_eq!(a.raw(id2).unwrap(), None);
    drop(a);
    // Reopened: all still there.
    let mut a = Archive::open(&p).unwrap();
    assert_eq!(a.count().unwrap(), 2);
    a.remove(id1).unwrap();
    assert!(matches!(a.get(id1), Err(ArchiveError::NoSuchRun(_))));
    assert!(matches!(a.remove(id1), Err(ArchiveError::NoSuchRun(_))));
    assert!(matches!(a.raw(id1), Err(ArchiveError::NoSuchRun(_))));
    assert_eq!(a.count().unwrap(), 1);
    assert_eq!(a.integrity_check().unwrap(), "ok");
}

#[test]
fn an_older_archive_is_migrated_in_place_keeping_its_runs() {
    let dir = tmp("migrate");
    let p = dir.path();
    let conn = create_at_version(&p, 1).unwrap();
    conn.execute(
        "INSERT INTO runs (kind, target, method, started_unix_ms, duration_s, summary, software, result_json)
         VALUES ('abw', 'old:1', 'fac2', 1, 2.0, 'old run', 'pathsonde 0.0.1', '{\"old\":true}')",
        [],
    )
    .unwrap();
    drop(conn);
    let mut a = Archive::open(&p).unwrap();
    assert_eq!(a.schema_version().unwrap(), SCHEMA_VERSION);
    let old = a.list(10, None).unwrap();
    assert_eq!(old.len(), 1);
    assert_eq!(a.get(old[0].id).unwrap().result["old"], true);
    assert!(!old[0].raw.present);
    // The migrated file takes new runs with raw data.
    let id = a.save(&record(5, Some(json!([1, 2, 3])))).unwrap();
    assert_eq!(a.raw(id).unwrap(), Some(json!([1, 2, 3])));
}

#[test]
fn a_newer_archive_is_refused_untouched() {
    let dir = tmp("newer");
    let p = dir.path();
    let conn = create_at_version(&p, SCHEMA_VERSION).unwrap();
    conn.execute(
        "INSERT INTO schema_version (version, applied_unix_ms) VALUES (?1, 0)",
        [SCHEMA_VERSION + 1],
    )
    .unwrap();
    drop(conn);
    match Archive::open(&p) {
        Err(ArchiveError::TooNew { found, .. }) => assert_eq!(found, SCHEMA_VERSION + 1),
        Err(e) => panic!("wrong error {e}"),
        Ok(_) => panic!("a newer schema was accepted"),
    }
}

#[test]
fn raw_data_above_the_bound_is_dropped_with_a_note_and_the_result_kept() {
    let dir = tmp("bound");
    let p = dir.path();
    let mut a = Archive::open(&p).unwrap();
    // Incompressible: a pseudo-random hex string of 24 MB (12 MB of entropy).
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut s = String::with_capacity(24 << 20);
    while s.len() < 24 << 20 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        s.push_str(&format!("{x:016x}"));
    }
    let id = a.save(&record(1, Some(json!({ "noise": s })))).unwrap();
    let got = a.get(id).unwrap();
    assert_eq!(got.result["n"], 1);
    assert!(!got.summary.raw.present);
    assert!(got.summary.raw.note.unwrap().contains("not kept"));
    assert_eq!(a.raw(id).unwrap(), None);
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
    let dir = tmp("atomic");
    let p = dir.path();
    let mut a = Archive::open(&p).unwrap();
    let kept = a.save(&record(1, Some(json!([1])))).unwrap();
    a.execute_batch_for_tests(
        "CREATE TEMP TRIGGER fail_raw BEFORE INSERT ON raw BEGIN SELECT RAISE(ABORT, 'injected failure'); END;",
    )
    .unwrap();
    let e = a.save(&record(2, Some(json!([2])))).unwrap_err();
    assert!(e.to_string().contains("injected failure"), "{e}");
    assert_eq!(a.count().unwrap(), 1, "half a run was left behind");
    assert_eq!(a.list(10, None).unwrap()[0].id, kept);
    // Without raw data the same archive still takes runs.
    a.save(&record(3, None)).unwrap();
    assert_eq!(a.count().unwrap(), 2);
}
