//! The fleet from the command line, against loopback servers and the real
//! PostgreSQL of CI (`PATHSONDE_TEST_POSTGRES`, a schema per test):
//! `agent --mesh` runs its tests under leases and keeps every slot as a run
//! or a skip, spools while the database is unreachable and writes the spool
//! back on its next start; `mesh` shows the matrix.  Usage errors need no
//! database.

mod common;

use assert_cmd::cargo::CommandCargoExt;
use pathsonde_archive::testing::{TempDir, TestPg};
use pathsonde_fleet::FleetDb;
use pathsonde_net::{Server, ServerConfig};
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn server() -> pathsonde_net::ServerHandle {
    let mut cfg = ServerConfig::new(SocketAddr::from(([127, 0, 0, 1], 0)));
    cfg.host_report = false;
    Server::bind(cfg).unwrap().spawn().unwrap()
}

/// Hosts a (not serving: it only originates), b and c (loopback servers);
/// a measures b and c every 2 s.
fn mesh_file(dir: &Path, b: u16, c: u16) -> String {
    let p = dir.join("mesh.toml");
    std::fs::write(
        &p,
        format!(
            r#"[defaults]
interval = "2s"
lease = "30s"

[[host]]
name = "a"
address = "127.0.0.1:1"

[[host]]
name = "b"
address = "127.0.0.1:{b}"

[[host]]
name = "c"
address = "127.0.0.1:{c}"

[[test]]
name = "abw"
method = "fac2"
pairs = [["a", "b"], ["a", "c"]]
options = {{ max_rate = "50M" }}
"#
        ),
    )
    .unwrap();
    p.display().to_string()
}

fn scrape(addr: &str) -> Option<String> {
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    out.starts_with("HTTP/1.1 200").then_some(out)
}

/// Runs and skips waiting in a spool directory (`*.json`; the agent keeps
/// its first-slots state beside them).
fn spooled(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .filter(|f| {
            f.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "json")
        })
        .count()
}

fn runs_and_skips(url: &str) -> (Vec<Value>, Vec<pathsonde_fleet::Skip>) {
    let mut db = FleetDb::connect(url).unwrap();
    let ids: Vec<i64> = db
        .archive()
        .list(1000, Some("mesh"))
        .unwrap()
        .iter()
        .map(|s| s.id)
        .collect();
    let runs = ids
        .iter()
        .map(|&id| db.archive().get(id).unwrap().result)
        .collect();
    (runs, db.skips().unwrap())
}

/// Every slot of every test from its first recorded to its last is in the
/// archive exactly once, as a run or a skip: the slot times of each test
/// are consecutive points of its grid (`interval_ms` apart).  The number of
/// slots per test.
fn assert_every_slot_once(
    url: &str,
    interval_ms: i64,
) -> std::collections::BTreeMap<String, usize> {
    let (runs, skips) = runs_and_skips(url);
    let mut by_test: std::collections::BTreeMap<String, Vec<i64>> = Default::default();
    for r in &runs {
        let m = &r["mesh"];
        let id = format!(
            "{}/{}->{}",
            m["test"].as_str().unwrap(),
            m["source"].as_str().unwrap(),
            m["destination"].as_str().unwrap()
        );
        by_test
            .entry(id)
            .or_default()
            .push(m["scheduled_unix_ms"].as_i64().unwrap());
    }
    for s in &skips {
        by_test
            .entry(s.test.clone())
            .or_default()
            .push(s.scheduled.0);
    }
    by_test
        .into_iter()
        .map(|(id, mut times)| {
            times.sort();
            for w in times.windows(2) {
                assert_eq!(
                    w[1] - w[0],
                    interval_ms,
                    "{id}: slots {times:?}\n{skips:#?}"
                );
            }
            (id, times.len())
        })
        .collect()
}

#[test]
fn a_mesh_agent_keeps_every_slot_as_a_run_or_a_skip_and_serves_metrics() {
    let Some(pg) = TestPg::new("mesh-agent") else {
        return;
    };
    let url = pg.url();
    let (b, c) = (server(), server());
    let dir = TempDir::new("mesh-agent");
    let mesh = mesh_file(&dir.0, b.local_addr().port(), c.local_addr().port());
    let spool = dir.0.join("spool");
    let mut child = Command::cargo_bin("pathsonde")
        .unwrap()
        .args(["agent", "--mesh", &mesh, "--name", "a", "--archive", &url])
        .args(["--metrics", "127.0.0.1:0", "--rounds", "2"])
        .args(["--spool", spool.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    while !line.contains("http://") {
        line.clear();
        assert!(err.read_line(&mut line).unwrap() > 0, "no metrics address");
    }
    let maddr = line
        .split("http://")
        .nth(1)
        .and_then(|s| s.split("/metrics").next())
        .unwrap()
        .to_string();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        assert!(
            Instant::now() < deadline,
            "metrics never showed a measurement"
        );
        if scrape(&maddr).is_some_and(|p| {
            p.lines().any(|l| {
                l.starts_with("pathsonde_agent_measurements_total{")
                    && l.contains("peer=\"b\"")
                    && !l.ends_with(" 0")
            })
        }) {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let status = child.wait().unwrap();
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    assert!(status.success(), "agent exited {status}: {out}");
    // Two tests × two rounds: four slots, each a run or a recorded skip.
    let (runs, skips) = runs_and_skips(&url);
    assert_eq!(runs.len() + skips.len(), 4, "{out}\n{skips:?}");
    assert!(runs.len() >= 2, "{out}\n{skips:?}");
    let slots = assert_every_slot_once(&url, 2_000);
    assert!(
        slots.len() == 2 && slots.values().all(|&n| n == 2),
        "{slots:?}"
    );
    for r in &runs {
        assert_eq!(r["mesh"]["source"], "a");
        assert_eq!(r["mesh"]["lease_held"], true, "renewed throughout: {r}");
        assert!(r["available_bps"].as_f64().unwrap() > 0.0);
    }
    // Leases were given back; nothing waits in the spool.
    assert!(FleetDb::connect(&url).unwrap().leases().unwrap().is_empty());
    assert_eq!(spooled(&spool), 0);
    b.stop().unwrap();
    c.stop().unwrap();

    // The view: the matrix has a's rows, in text, JSON and HTML.
    let page = dir.0.join("mesh.html");
    let out = Command::cargo_bin("pathsonde")
        .unwrap()
        .args(["mesh", "--archive", &url, "--json", "--html"])
        .arg(&page)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let m: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(m["hosts"], serde_json::json!(["a", "b", "c"]), "{m}");
    let pairs = m["pairs"].as_array().unwrap();
    assert!(!pairs.is_empty() && pairs.len() <= 2, "{m}");
    let first = &pairs[0];
    assert_eq!(first["source"], "a");
    assert!(first["available_bps"].as_f64().unwrap() > 0.0);
    assert!(first["rtt_s"].as_f64().unwrap() > 0.0);
    assert!(first["verdict"].is_string());
    let text = Command::cargo_bin("pathsonde")
        .unwrap()
        .args(["mesh", "--archive", &url])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("from") && text.contains("A ") && text.contains("RTT "),
        "{text}"
    );

    // The heat map in a real browser: the first cell's reading is laid out
    // and visible, with no console message.
    if let Some(browser) = common::chromium() {
        let seen = common::load(&browser, &page);
        assert!(seen.console.is_empty(), "{:#?}", seen.console);
        assert_eq!(
            seen.body_attr("data-cells-visible"),
            Some(pairs.len().to_string())
        );
        let shown = seen.body_attr("data-first-cell").unwrap();
        let want = format!(
            "{:.1}",
            pathsonde_core::BitRate::from_mbps(first["available_bps"].as_f64().unwrap() / 1e6)
        );
        assert!(shown.starts_with(&want), "{shown:?} vs {want:?}");
    }
}

#[test]
fn while_the_database_is_down_skips_wait_in_the_spool_and_arrive_later() {
    let Some(pg) = TestPg::new("mesh-spool") else {
        return;
    };
    let url = pg.url();
    let (b, c) = (server(), server());
    let dir = TempDir::new("mesh-spool");
    let mesh = mesh_file(&dir.0, b.local_addr().port(), c.local_addr().port());
    let spool = dir.0.join("spool");
    // Down: nothing listens on port 1.
    let down = "postgresql://pathsonde@127.0.0.1:1/pathsonde_test?connect_timeout=1";
    let out = Command::cargo_bin("pathsonde")
        .unwrap()
        .args(["agent", "--mesh", &mesh, "--name", "a", "--archive", down])
        .args(["--metrics", "127.0.0.1:0", "--rounds", "1"])
        .args(["--spool", spool.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(stdout.matches("skipped: no lease: ").count(), 2, "{stdout}");
    assert_eq!(spooled(&spool), 2);
    // Back: the next start writes the spool first, once.
    let out = Command::cargo_bin("pathsonde")
        .unwrap()
        .args(["agent", "--mesh", &mesh, "--name", "a", "--archive", &url])
        .args(["--metrics", "127.0.0.1:0", "--rounds", "1"])
        .args(["--spool", spool.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let (_, skips) = runs_and_skips(&url);
    let unreachable = skips
        .iter()
        .filter(|s| s.reason.contains("database is unreachable"))
        .count();
    assert_eq!(unreachable, 2, "{skips:?}");
    // The slots between the two starts are recorded too (no agent ran
    // them): every slot of both tests, once.
    let slots = assert_every_slot_once(&url, 2_000);
    assert_eq!(slots.len(), 2, "{slots:?}");
    assert!(slots.values().all(|&n| n >= 2), "{slots:?}");
    // The view counts them per pair.
    let out = Command::cargo_bin("pathsonde")
        .unwrap()
        .args(["mesh", "--archive", &url, "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let m: Value = serde_json::from_slice(&out.stdout).unwrap();
    let k = m["skips"].as_array().unwrap();
    assert_eq!(k.len(), 2, "{m}");
    let total: i64 = k.iter().map(|x| x["count"].as_i64().unwrap()).sum();
    assert_eq!(total as usize, skips.len(), "{m}");
    assert_eq!(m["hosts"], serde_json::json!(["a", "b", "c"]));
    assert_eq!(spooled(&spool), 0);
    b.stop().unwrap();
    c.stop().unwrap();
}

#[test]
fn the_mesh_view_of_an_archive_without_mesh_runs_says_so() {
    let dir = TempDir::new("mesh-empty");
    let a = dir.0.join("none.sqlite");
    let out = Command::cargo_bin("pathsonde")
        .unwrap()
        .args(["mesh", "--archive", a.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("no mesh runs in "));
    assert!(!a.exists(), "a reader creates nothing");
    // A password in the URL: refused, exit 2, a JSON error object.
    let out = Command::cargo_bin("pathsonde")
        .unwrap()
        .args(["mesh", "--json", "--archive", "postgresql://u:secret@h/db"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let e: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(e["error"]["exit_code"], 2);
    assert!(!String::from_utf8_lossy(&out.stdout).contains("secret"));
}

#[test]
fn mesh_agent_usage_errors_are_one_line_and_exit_2() {
    let dir = TempDir::new("mesh-usage");
    let mesh = mesh_file(&dir.0, 5400, 5401);
    let sqlite = dir.0.join("a.sqlite");
    let cases: [(&[&str], &str); 4] = [
        (
            &[
                "--name",
                "a",
                "--archive",
                "postgresql://u@h/db",
                "--no-save",
            ],
            "do not apply with --mesh",
        ),
        (
            &["--name", "a", "--archive", sqlite.to_str().unwrap()],
            "needs a PostgreSQL archive",
        ),
        (
            &["--name", "zz", "--archive", "postgresql://u@h/db"],
            "--name zz: no such host",
        ),
        (
            &["--name", "b", "--archive", "postgresql://u@h/db"],
            "host b originates no test",
        ),
    ];
    for (args, want) in cases {
        let out = Command::cargo_bin("pathsonde")
            .unwrap()
            .args(["agent", "--mesh", &mesh])
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want), "{err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }
    std::fs::write(dir.0.join("bad.toml"), "[[host]]\nname = \"a\"\n").unwrap();
    let out = Command::cargo_bin("pathsonde")
        .unwrap()
        .args(["agent", "--mesh", dir.0.join("bad.toml").to_str().unwrap()])
        .args(["--name", "a"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("missing field `address`"));
}

/// A small fleet: three hosts, each with a server and an agent, every host
/// measuring every other every 2 s, all at once against one PostgreSQL.
/// Every slot is a run or a skip, and no two runs overlap on any server
/// (checked from the stored start times and durations), nor does a server
/// ever answer "busy".
#[test]
fn three_agents_measuring_each_other_never_overlap_on_a_server() {
    let Some(pg) = TestPg::new("mesh-fleet") else {
        return;
    };
    let url = pg.url();
    let servers = [server(), server(), server()];
    let dir = TempDir::new("mesh-fleet");
    let names = ["a", "b", "c"];
    let mut text =
        String::from("[defaults]\ninterval = \"2s\"\nwait = \"1500ms\"\nlease = \"30s\"\n");
    for (n, s) in names.iter().zip(&servers) {
        text.push_str(&format!(
            "[[host]]\nname = \"{n}\"\naddress = \"127.0.0.1:{}\"\n",
            s.local_addr().port()
        ));
    }
    text.push_str(
        "[[test]]\nname = \"abw\"\nbetween = \"all\"\noptions = { max_rate = \"50M\" }\n",
    );
    let mesh = dir.0.join("mesh.toml");
    std::fs::write(&mesh, text).unwrap();
    // The archive exists (as its owner would have made it) before the
    // agents start together.
    FleetDb::connect(&url).unwrap();
    let agents: Vec<_> = names
        .iter()
        .map(|n| {
            Command::cargo_bin("pathsonde")
                .unwrap()
                .args(["agent", "--mesh", mesh.to_str().unwrap(), "--name", n])
                .args([
                    "--archive",
                    &url,
                    "--metrics",
                    "127.0.0.1:0",
                    "--rounds",
                    "3",
                ])
                .arg("--spool")
                .arg(dir.0.join(n))
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for a in agents {
        let out = a.wait_with_output().unwrap();
        assert!(out.status.success(), "{out:?}");
    }
    let mut db = FleetDb::connect(&url).unwrap();
    let runs = db.archive().list(1000, Some("mesh")).unwrap();
    let skips = db.skips().unwrap();
    eprintln!(
        "fleet of 3: {} runs, {} skips: {:?}",
        runs.len(),
        skips.len(),
        skips.iter().map(|s| &s.reason).collect::<Vec<_>>()
    );
    // 3 hosts × 2 destinations × 3 rounds.
    assert_eq!(runs.len() + skips.len(), 18, "{skips:#?}");
    assert!(runs.len() >= 6, "{skips:#?}");
    assert!(
        skips.iter().all(|s| !s.reason.contains("(busy)")),
        "a server answered busy: {skips:#?}"
    );
    for dst in names {
        let mut spans: Vec<(f64, f64)> = runs
            .iter()
            .filter(|r| r.target.ends_with(&format!("->{dst}")))
            .map(|r| {
                let s = r.started_unix_ms as f64;
                (s, s + r.duration_s * 1e3)
            })
            .collect();
        spans.sort_by(|x, y| x.0.total_cmp(&y.0));
        for w in spans.windows(2) {
            // Start times are whole milliseconds (rounded down): 1 ms slack.
            assert!(
                w[1].0 + 1.0 >= w[0].1,
                "two runs overlap on server {dst}: {:?} and {:?}",
                w[0],
                w[1]
            );
        }
    }
    assert!(db.leases().unwrap().is_empty());
    let slots = assert_every_slot_once(&url, 2_000);
    assert_eq!(slots.len(), 6, "{slots:?}");
    assert!(slots.values().all(|&n| n == 3), "{slots:?}");
    for s in servers {
        s.stop().unwrap();
    }
}

/// An agent SIGKILLed in the middle of a test (its server never answers,
/// so it is caught holding the lease) leaves no run, half-written or
/// otherwise, and its lease lapses at its expiry for the next taker; when
/// it starts again, the slot it was killed in is recorded as a skip.
#[test]
fn a_killed_agent_leaves_no_run_its_lease_expires_and_a_restart_records_its_slot() {
    let Some(pg) = TestPg::new("mesh-kill") else {
        return;
    };
    let url = pg.url();
    // b accepts connections (the kernel does) but never answers.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dir = TempDir::new("mesh-kill");
    let mesh = dir.0.join("mesh.toml");
    std::fs::write(
        &mesh,
        format!(
            "[[host]]\nname = \"a\"\naddress = \"127.0.0.1:1\"\n[[host]]\nname = \"b\"\naddress = \"127.0.0.1:{}\"\n\
             [[test]]\nname = \"abw\"\npairs = [[\"a\", \"b\"]]\ninterval = \"2s\"\nwait = \"1s\"\nlease = \"5s\"\n\
             options = {{ timeout = \"4s\" }}\n",
            silent.local_addr().unwrap().port()
        ),
    )
    .unwrap();
    FleetDb::connect(&url).unwrap();
    let mut agent = Command::cargo_bin("pathsonde")
        .unwrap()
        .args(["agent", "--mesh", mesh.to_str().unwrap(), "--name", "a"])
        .args(["--archive", &url, "--metrics", "127.0.0.1:0"])
        .arg("--spool")
        .arg(dir.0.join("spool"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut db = FleetDb::connect(&url).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let lease = loop {
        assert!(Instant::now() < deadline, "the agent never took its lease");
        if let Some(l) = db.leases().unwrap().into_iter().next() {
            break l;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    agent.kill().unwrap(); // SIGKILL
    agent.wait().unwrap();
    // As it was left (its renewer may have extended it before dying).
    let lease = db
        .leases()
        .unwrap()
        .into_iter()
        .find(|l| l.run_uuid == lease.run_uuid)
        .expect("the killed agent's lease is still there");
    assert_eq!(
        (lease.resource.as_str(), lease.holder.as_str()),
        ("server:b", "a")
    );
    // Nothing was written for the test it was in, and its lease is still
    // there: no one cleaned up after it.
    assert_eq!(db.archive().count().unwrap(), 0);
    assert_eq!(db.leases().unwrap(), vec![lease.clone()]);
    let req = pathsonde_fleet::LeaseRequest {
        resources: vec!["server:b".into()],
        holder: "c".into(),
        test: "abw/c->b".into(),
        run_uuid: pathsonde_fleet::new_run_uuid(),
        hold: pathsonde_core::DurationNs::from_secs(5),
    };
    let before = pathsonde_fleet::UnixMs(lease.expires.0 - 1);
    assert!(matches!(
        db.try_take(&req, before).unwrap(),
        pathsonde_fleet::Taken::Busy { .. }
    ));
    let pathsonde_fleet::Taken::Granted(mine) = db.try_take(&req, lease.expires).unwrap() else {
        panic!("the lease is taken over at its expiry");
    };
    db.release(&mine).unwrap();
    // Started again: the slot it was killed in (and any that passed) is
    // recorded as a skip, so every slot is in the archive once.
    let out = Command::cargo_bin("pathsonde")
        .unwrap()
        .args(["agent", "--mesh", mesh.to_str().unwrap(), "--name", "a"])
        .args([
            "--archive",
            &url,
            "--metrics",
            "127.0.0.1:0",
            "--rounds",
            "1",
        ])
        .arg("--spool")
        .arg(dir.0.join("spool"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let skips = db.skips().unwrap();
    let killed = skips
        .iter()
        .find(|s| s.scheduled.0 <= lease.taken.0 && lease.taken.0 - s.scheduled.0 < 2_000)
        .unwrap_or_else(|| panic!("the slot it was killed in is not recorded: {skips:#?}"));
    assert!(
        killed.reason.contains("no agent ran this slot"),
        "{killed:?}"
    );
    assert_eq!(assert_every_slot_once(&url, 2_000).len(), 1);
    drop(silent);
}
