//! SIGKILL while the archive is being written leaves every run saved before
//! readable and the file sound.
//!
//! The test re-runs its own binary as a writer (selected by an environment
//! variable) that saves runs with ~1.5 MB of incompressible raw data each, in
//! a loop, announcing "writing N" before and "saved N ID" after each save.
//! The parent times the writer's saves and kills it with SIGKILL at ten
//! points spread across one save (5 %, 15 %, … 95 % of its duration after a
//! "writing" line), so the kills land while compressing, inside the
//! transaction, during the commit's fsync and at the WAL checkpoint; after
//! each it opens the archive and checks SQLite's integrity check, every
//! announced run (result and raw data) and that no row lacks its raw data.

use pathsonde_archive::{Archive, Record};
use serde_json::json;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

const CHILD_ENV: &str = "PATHSONDE_ARCHIVE_CRASH_CHILD";

fn noise(seed: u64, bytes: usize) -> String {
    let mut x = seed | 1;
    let mut s = String::with_capacity(bytes);
    while s.len() < bytes {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        s.push_str(&format!("{x:016x}"));
    }
    s
}

fn digest(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}

/// The writer: runs only when the parent starts it.
#[test]
fn crash_child_writer() {
    let Some(path) = std::env::var_os(CHILD_ENV) else {
        return;
    };
    let mut a = Archive::open(std::path::Path::new(&path)).unwrap();
    let out = std::io::stdout();
    for n in 0u64.. {
        let seed = n.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ u64::from(std::process::id());
        let data = noise(seed, 1_500_000);
        let rec = Record {
            kind: "crash-test".into(),
            target: format!("writer {}", std::process::id()),
            method: None,
            started: SystemTime::now(),
            duration: Duration::from_millis(n),
            summary: format!("run {n}"),
            result: json!({ "n": n, "digest": digest(&data) }),
            raw: Some(json!({ "data": data })),
        };
        {
            let mut o = out.lock();
            let _ = writeln!(o, "writing {n}");
            let _ = o.flush();
        }
        let id = a.save(&rec).unwrap();
        let mut o = out.lock();
        let _ = writeln!(o, "saved {n} {id}");
        let _ = o.flush();
    }
}

#[test]
fn sigkill_mid_write_leaves_every_earlier_run_readable() {
    let dir = std::env::temp_dir().join(format!("pathsonde-archive-crash-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("archive.sqlite");
    let exe = std::env::current_exe().unwrap();
    // (run number, id) of every save the writers announced.
    let mut saved: Vec<(u64, i64)> = Vec::new();
    const CYCLES: u64 = 10;
    // How long one save takes, as the parent sees it (median of those seen).
    let mut save_times: Vec<Duration> = Vec::new();
    for cycle in 0..CYCLES {
        let mut child = Command::new(&exe)
            .args([
                "--exact",
                "crash_child_writer",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, &path)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let want = 2;
        let mut got = 0;
        let mut writing_since = Instant::now();
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            assert!(Instant::now() < deadline, "the writer made no progress");
            let line = lines.next().expect("writer ended early").unwrap();
            let mut w = line.split_whitespace();
            match (w.next(), w.next(), w.next()) {
                (Some("saved"), Some(n), Some(id)) => {
                    saved.push((n.parse().unwrap(), id.parse().unwrap()));
                    save_times.push(writing_since.elapsed());
                    got += 1;
                }
                (Some("writing"), Some(_), None) if got >= want => break,
                (Some("writing"), Some(_), None) => writing_since = Instant::now(),
                _ => {}
            }
        }
        // Into the next save by a different fraction of a save each cycle.
        save_times.sort();
        let typical = save_times[save_times.len() / 2];
        std::thread::sleep(typical.mul_f64((cycle as f64 + 0.5) / CYCLES as f64));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        // Anything the writer announced afterwards (before the kill landed) counts too.
        for line in lines.map_while(Result::ok) {
            let mut w = line.split_whitespace();
            if let (Some("saved"), Some(n), Some(id)) = (w.next(), w.next(), w.next()) {
                saved.push((n.parse().unwrap(), id.parse().unwrap()));
            }
        }

        let mut a = Archive::open(&path).unwrap();
        assert_eq!(a.integrity_check().unwrap(), "ok", "after kill {cycle}");
        for &(n, id) in &saved {
            let s = a
                .get(id)
                .unwrap_or_else(|e| panic!("run {id} lost after kill {cycle}: {e}"));
            assert_eq!(s.result["n"], n);
            let raw = a.raw(id).unwrap().expect("raw kept");
            let data = raw["data"].as_str().unwrap();
            assert_eq!(
                s.result["digest"],
                digest(data),
                "run {id}'s raw data damaged"
            );
        }
        // Nothing half-written: every row is whole.
        for s in a.list(1000, None).unwrap() {
            let r = a.get(s.id).unwrap();
            let raw = a.raw(s.id).unwrap().expect("every row has its raw data");
            assert_eq!(r.result["digest"], digest(raw["data"].as_str().unwrap()));
        }
    }
    assert!(saved.len() as u64 >= 2 * CYCLES, "{saved:?}");
    let _ = std::fs::remove_dir_all(&dir);
}
