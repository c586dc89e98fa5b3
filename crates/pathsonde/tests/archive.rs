//! The archive from the command line, over loopback: real `pathsonde serve`
//! and `pathsonde abw` processes, every run archived into a temporary file
//! (`--archive` or `PATHSONDE_ARCHIVE`, never the user's own), then
//! `history`, `show`, `export`, `plot`, `report --html` and `rm`, on a
//! SQLite file and on PostgreSQL (`PATHSONDE_TEST_POSTGRES`); PostgreSQL
//! locations, passwords from `~/.pgpass`/`PGPASSWORD` and `archive copy`
//! between the stores; the output modes (`--json`, `--json-lines`) with the same exit codes; `serve
//! --metrics`; `completions` and `man`.

use assert_cmd::cargo::CommandCargoExt;
use pathsonde_archive::testing::{both, TempDir, TestArchive};
use serde_json::Value;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

mod ports;
use ports::free_port;

fn tmpdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "pathsonde-cli-archive-{}-{tag}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// `pathsonde` archiving into `archive`.
fn ps(archive: &Path) -> Command {
    let mut c = Command::cargo_bin("pathsonde").unwrap();
    c.env("PATHSONDE_ARCHIVE", archive);
    c
}

struct Killed(Child);
impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn serve(port: u16, extra: &[&str]) -> Killed {
    let child = Command::cargo_bin("pathsonde")
        .unwrap()
        .args([
            "serve",
            "--no-udpst",
            "--bind",
            "127.0.0.1",
            "--port",
            &port.to_string(),
        ])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let s = Killed(child);
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "server did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(100));
    s
}

fn ok(out: &Output) {
    assert!(
        out.status.success(),
        "exit {:?}\nstdout: {}\nstderr: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn json(out: &Output) -> Value {
    ok(out);
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not one JSON object ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

fn abw(archive: &Path, port: u16, extra: &[&str]) -> Output {
    ps(archive)
        .args([
            "abw",
            "127.0.0.1",
            "--port",
            &port.to_string(),
            "--max-rate",
            "100M",
        ])
        .args(extra)
        .output()
        .unwrap()
}

/// On each store: a SQLite file, and a PostgreSQL schema of the test's
/// own when `PATHSONDE_TEST_POSTGRES` names a server (required under CI).
#[test]
fn abw_runs_are_archived_and_shown_exported_plotted_reported_and_removed() {
    for t in both("cli-abw") {
        abw_runs_round_trip(Path::new(&t.location), t.store);
    }
}

fn abw_runs_round_trip(archive: &Path, store: &str) {
    let dir = tmpdir(&format!("abw-{store}"));
    let archive = archive.to_path_buf();
    let port = free_port();
    let _server = serve(port, &[]);

    let printed = json(&abw(&archive, port, &["--json"]));
    let id = printed["archive"]["id"]
        .as_i64()
        .expect("archive id in --json");
    assert_eq!(printed["archive"]["path"], archive.display().to_string());
    // Text mode says where the run went.
    let out = abw(&archive, port, &[]);
    ok(&out);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains(&format!("saved as run {}", id + 1)), "{text}");
    // --no-save keeps nothing; --no-raw keeps the result only; --archive
    // wins over the environment.
    ok(&abw(&archive, port, &["--no-save"]));
    let lean = dir.join("lean.sqlite");
    let v = json(&abw(
        &archive,
        port,
        &["--json", "--no-raw", "--archive", lean.to_str().unwrap()],
    ));
    let h = json(&ps(&lean).args(["history", "--json"]).output().unwrap());
    assert_eq!(h["runs"][0]["id"], v["archive"]["id"]);
    assert_eq!(h["runs"][0]["raw"]["present"], false);
    let other = dir.join("other.sqlite");
    ok(&abw(
        &archive,
        port,
        &["--archive", other.to_str().unwrap()],
    ));

    let h = json(&ps(&archive).args(["history", "--json"]).output().unwrap());
    let runs = h["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2, "{h}");
    assert_eq!(runs[0]["id"], id + 1);
    assert_eq!(runs[1]["kind"], "abw");
    assert_eq!(runs[1]["method"], "fac2");
    assert!(runs[1]["raw"]["present"].as_bool().unwrap());
    let h2 = json(&ps(&other).args(["history", "--json"]).output().unwrap());
    assert_eq!(h2["runs"].as_array().unwrap().len(), 1);
    let text = ps(&archive).args(["history"]).output().unwrap();
    ok(&text);
    assert!(String::from_utf8_lossy(&text.stdout).contains("127.0.0.1:"));

    // show --json gives back exactly what the run printed.
    let shown = json(
        &ps(&archive)
            .args(["show", &id.to_string(), "--json"])
            .output()
            .unwrap(),
    );
    let mut original = printed.clone();
    original.as_object_mut().unwrap().remove("archive");
    assert_eq!(shown["result"], original);
    let text = ps(&archive)
        .args(["show", &id.to_string()])
        .output()
        .unwrap();
    ok(&text);
    let text = String::from_utf8_lossy(&text.stdout);
    for want in ["available_bps", "--- trains ---", "raw data"] {
        assert!(text.contains(want), "missing {want}: {text}");
    }

    // export: JSON with the raw observations, CSV of the trains.
    let ex = json(
        &ps(&archive)
            .args(["export", &id.to_string(), "--format", "json"])
            .output()
            .unwrap(),
    );
    let obs = ex["raw_data"]["runs"][0]["observations"]
        .as_array()
        .unwrap();
    assert_eq!(obs.len() as u64, printed["trains_used"].as_u64().unwrap());
    assert!(obs[0]["packets"].as_array().unwrap().len() > 10);
    let csv = ps(&archive)
        .args(["export", &id.to_string(), "--format", "csv"])
        .output()
        .unwrap();
    ok(&csv);
    let csv = String::from_utf8_lossy(&csv.stdout);
    let mut lines = csv.lines();
    let header = lines.next().unwrap();
    assert!(header.split(',').any(|c| c == "target_bps"), "{header}");
    assert_eq!(
        lines.count() as u64,
        printed["trains_used"].as_u64().unwrap()
    );

    // plot: PNG and SVG files, each a real image.
    let plots = dir.join("plots");
    let p = json(
        &ps(&archive)
            .args([
                "plot",
                &id.to_string(),
                "--out",
                plots.to_str().unwrap(),
                "--json",
            ])
            .output()
            .unwrap(),
    );
    let files: Vec<String> = p["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap().to_string())
        .collect();
    assert!(files.iter().any(|f| f.ends_with("-trace.png")), "{files:?}");
    assert!(files.iter().any(|f| f.ends_with("-owd.svg")), "{files:?}");
    for f in &files {
        let b = std::fs::read(f).unwrap();
        if f.ends_with(".png") {
            assert_eq!(&b[..8], b"\x89PNG\r\n\x1a\n", "{f}");
            assert!(b.len() > 5000, "{f} is {} bytes", b.len());
        } else {
            let s = String::from_utf8(b).unwrap();
            assert!(
                s.contains("<svg") && s.contains("Convergence trace")
                    || s.contains("one-way delay"),
                "{f}"
            );
        }
    }

    // report --html: one page, plots inline, nothing fetched.
    let page = dir.join("r.html");
    let r = json(
        &ps(&archive)
            .args([
                "report",
                &id.to_string(),
                "--html",
                page.to_str().unwrap(),
                "--json",
            ])
            .output()
            .unwrap(),
    );
    assert_eq!(r["plots"], 2);
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert_eq!(html.matches("<figure class=\"plot\"").count(), 2);
    assert!(html.contains("default-src 'none'"));
    for external in [
        "src=\"http",
        "href=\"http",
        "src=\"//",
        "url(http",
        "@import",
    ] {
        assert!(!html.contains(external), "external reference {external}");
    }

    // rm, then the run is gone (exit 2, as for any unknown id).
    let out = ps(&archive).args(["rm", &id.to_string()]).output().unwrap();
    ok(&out);
    for args in [
        vec!["show", "9999"],
        vec!["show", &id.to_string()],
        vec!["rm", &id.to_string()],
        vec!["plot", "9999"],
    ] {
        let out = ps(&archive).args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("no run"),
            "{args:?}"
        );
    }
    let out = ps(&archive)
        .args(["show", "9999", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["error"]["kind"], "usage");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn history_of_an_archive_that_does_not_exist_is_empty_and_creates_nothing() {
    let dir = tmpdir("empty");
    let archive = dir.join("none.sqlite");
    let h = json(&ps(&archive).args(["history", "--json"]).output().unwrap());
    assert_eq!(h["runs"].as_array().unwrap().len(), 0);
    assert!(!archive.exists());
    let out = ps(&archive).args(["history"]).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("no runs archived yet"));
    let _ = std::fs::remove_dir_all(&dir);
}

fn events(out: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON line ({e}): {l}")))
        .collect()
}

#[test]
fn json_lines_streams_start_trains_saved_and_result() {
    let dir = tmpdir("jl");
    let archive = dir.join("a.sqlite");
    let port = free_port();
    let _server = serve(port, &[]);
    let out = abw(&archive, port, &["--json-lines"]);
    ok(&out);
    let ev = events(&out);
    let types: Vec<&str> = ev.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(types.first(), Some(&"start"), "{types:?}");
    assert_eq!(types.last(), Some(&"result"), "{types:?}");
    let trains = types.iter().filter(|t| **t == "train").count();
    let result = &ev.last().unwrap()["data"];
    assert_eq!(trains as u64, result["trains_used"].as_u64().unwrap());
    assert!(types.contains(&"saved"));
    assert!(ev.iter().all(|e| e.get("data").is_some()));
    let t = ev.iter().find(|e| e["type"] == "train").unwrap();
    assert!(t["data"]["packets_sent"].as_u64().unwrap() > 0);
    assert_eq!(
        result["archive"]["id"],
        ev.iter().find(|e| e["type"] == "saved").unwrap()["data"]["id"]
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn exit_codes_are_the_same_in_every_output_mode() {
    let dir = tmpdir("modes");
    let archive = dir.join("a.sqlite");
    let port = free_port(); // nobody listens
    let text = abw(&archive, port, &[]);
    let json_out = abw(&archive, port, &["--json"]);
    let lines = abw(&archive, port, &["--json-lines"]);
    for o in [&text, &json_out, &lines] {
        assert_eq!(o.status.code(), Some(3));
    }
    assert!(text.stdout.is_empty());
    let v: Value = serde_json::from_slice(&json_out.stdout).unwrap();
    assert_eq!(v["error"]["exit_code"], 3);
    let ev = events(&lines);
    let last = ev.last().unwrap();
    assert_eq!(last["type"], "error");
    assert_eq!(last["data"]["kind"], "connect");
    assert_eq!(last["data"]["exit_code"], 3);
    // A usage error (clap's own) is 2 whatever the mode.
    for mode in ["--json", "--json-lines"] {
        let o = ps(&archive)
            .args(["abw", "127.0.0.1", "--max-rate", "fast", mode])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{mode}");
    }
    // Nothing was archived by failed runs.
    assert!(!archive.exists());
    let _ = std::fs::remove_dir_all(&dir);
}

fn scrape(addr: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    assert!(out.starts_with("HTTP/1.1 200"), "{out}");
    out
}

fn metric(page: &str, name: &str) -> f64 {
    page.lines()
        .find(|l| l.starts_with(name) && l[name.len()..].starts_with([' ', '{']))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in:\n{page}"))
}

#[test]
fn serve_metrics_count_sessions_trains_and_bytes() {
    let dir = tmpdir("serve-metrics");
    let port = free_port();
    let mport = free_port();
    let maddr = format!("127.0.0.1:{mport}");
    let _server = serve(port, &["--metrics", &maddr]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(&maddr).is_err() {
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(20));
    }
    let before = scrape(&maddr);
    assert_eq!(metric(&before, "pathsonde_server_trains_total"), 0.0);
    let printed = json(&abw(&dir.join("a.sqlite"), port, &["--json", "--no-save"]));
    let after = scrape(&maddr);
    assert_eq!(metric(&after, "pathsonde_server_sessions_total"), 1.0);
    assert_eq!(metric(&after, "pathsonde_server_sessions_active"), 0.0);
    assert_eq!(
        metric(&after, "pathsonde_server_trains_total"),
        printed["trains_used"].as_f64().unwrap()
    );
    assert!(metric(&after, "pathsonde_server_probe_packets_total") > 0.0);
    assert!(metric(&after, "pathsonde_server_probe_payload_bytes_total") > 0.0);
    assert!(metric(&after, "pathsonde_server_echo_replies_total") > 0.0);
    assert!(after.contains("# TYPE pathsonde_server_trains_total counter"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn completions_and_man_page_come_from_the_cli_definition() {
    let archive = tmpdir("meta").join("a.sqlite");
    for shell in ["bash", "zsh", "fish"] {
        let out = ps(&archive).args(["completions", shell]).output().unwrap();
        ok(&out);
        let s = String::from_utf8_lossy(&out.stdout);
        for word in ["pathsonde", "history", "report", "json-lines"] {
            assert!(s.contains(word), "{shell} completions lack {word}");
        }
    }
    let out = ps(&archive).args(["man"]).output().unwrap();
    ok(&out);
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(s.contains(".TH pathsonde"), "{s}");
    assert!(s.contains("history") && s.contains("agent"));
    let out = ps(&archive).args(["completions", "tcsh"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let _ = std::fs::remove_dir_all(archive.parent().unwrap());
}

#[test]
fn an_explicit_archive_is_named_in_the_hint_and_must_be_somewhere_real() {
    let dir = tmpdir("explicit");
    let port = free_port();
    let _server = serve(port, &[]);
    let elsewhere = dir.join("mine.sqlite");
    // The default archive (PATHSONDE_ARCHIVE) is not the one used here.
    // The default method: any run that ends with an answer will do, and
    // FAC²'s "at least" over loopback is one on a loaded machine, where
    // pair once gave none (its capacity probe, CI at da64002).
    let out = ps(&dir.join("default.sqlite"))
        .args(["abw", &format!("127.0.0.1:{port}")])
        .arg("--archive")
        .arg(&elsewhere)
        .output()
        .unwrap();
    ok(&out);
    let text = String::from_utf8_lossy(&out.stdout);
    let hint = text.lines().last().unwrap();
    let named = elsewhere.display().to_string();
    assert!(
        hint.starts_with("saved as run 1 in ")
            && hint.contains(&format!("pathsonde show 1 --archive {named}")),
        "{hint}"
    );
    // A directory that does not exist is refused before anything runs, and
    // is not created.
    let missing = dir.join("no-such-dir").join("a.sqlite");
    let out = ps(&dir.join("default.sqlite"))
        .args(["host", "--json", "--archive"])
        .arg(&missing)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["error"]["kind"], "usage");
    assert!(!dir.join("no-such-dir").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A stored result whose field a plot needs was renamed (here `trains[].
/// target_bps`, as a careless change to `abw --json` would) is refused by
/// `plot` and `report --html`, naming the field, instead of drawing an
/// empty picture.
#[test]
fn a_renamed_field_is_refused_by_plot_and_report_naming_it() {
    let dir = tmpdir("renamed");
    let archive = dir.join("a.sqlite");
    let port = free_port();
    let _server = serve(port, &[]);
    let id = json(&abw(&archive, port, &["--json"]))["archive"]["id"]
        .as_i64()
        .unwrap();
    {
        let c = rusqlite::Connection::open(&archive).unwrap();
        let n = c
            .execute(
                "UPDATE runs SET result_json = replace(result_json, '\"target_bps\"', '\"target\"') WHERE id = ?1",
                [id],
            )
            .unwrap();
        assert_eq!(n, 1);
    }
    let html = dir.join("r.html");
    for args in [
        vec!["plot", "--out", dir.to_str().unwrap()],
        vec!["report", "--html", html.to_str().unwrap()],
    ] {
        let out = ps(&archive)
            .args(&args)
            .arg(id.to_string())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("result.trains[0]") && err.contains("`target_bps`"),
            "{args:?}: {err}"
        );
    }
    assert!(!html.exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_file_that_is_not_a_pathsonde_archive_is_refused_untouched() {
    let dir = tmpdir("foreign");
    let other = dir.join("other.sqlite");
    {
        let c = rusqlite::Connection::open(&other).unwrap();
        c.execute_batch("CREATE TABLE notes (t TEXT); INSERT INTO notes VALUES ('mine');")
            .unwrap();
    }
    let text = dir.join("notes.txt");
    std::fs::write(&text, "not a database at all\n").unwrap();
    for file in [&other, &text] {
        let before = std::fs::read(file).unwrap();
        for args in [&["history"][..], &["show", "1", "--json"]] {
            let out = ps(&dir.join("default.sqlite"))
                .args(args)
                .arg("--archive")
                .arg(file)
                .output()
                .unwrap();
            assert_eq!(out.status.code(), Some(2), "{args:?} {}", file.display());
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(err.contains("not a pathsonde archive"), "{err}");
        }
        assert_eq!(
            std::fs::read(file).unwrap(),
            before,
            "{} changed",
            file.display()
        );
        let name = file.file_name().unwrap().to_string_lossy().to_string();
        for side in ["-wal", "-shm", "-journal"] {
            assert!(
                !dir.join(format!("{name}{side}")).exists(),
                "{name}{side} appeared"
            );
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn tcp_udp_and_mbs_are_archived_and_stream_json_lines() {
    let dir = tmpdir("flows");
    let archive = dir.join("a.sqlite");
    let port = free_port();
    let _server = serve(port, &[]);
    let target = format!("127.0.0.1:{port}");
    for args in [
        vec!["tcp", &target, "-t", "1"],
        vec!["udp", &target, "-t", "1", "-b", "20M"],
        vec!["mbs", &target, "--max-burst", "60kB", "--searches", "1"],
    ] {
        let out = ps(&archive)
            .args(&args)
            .arg("--json-lines")
            .output()
            .unwrap();
        ok(&out);
        let text = String::from_utf8_lossy(&out.stdout);
        let events: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect();
        let kinds: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
        assert!(kinds.contains(&"progress"), "{args:?}: {kinds:?}");
        assert_eq!(kinds.last(), Some(&"result"), "{args:?}: {kinds:?}");
        assert!(
            events.last().unwrap()["data"]["archive"]["id"].is_i64(),
            "{args:?}"
        );
    }
    let out = ps(&archive).args(["history", "--json"]).output().unwrap();
    ok(&out);
    let runs = json(&out);
    let kinds: Vec<&str> = runs["runs"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["kind"].as_str())
        .collect();
    assert_eq!(kinds, ["mbs", "udp", "tcp"], "{runs}");
    let out = ps(&archive).args(["show", "3"]).output().unwrap();
    ok(&out);
    assert!(String::from_utf8_lossy(&out.stdout).contains("mbs.summary"));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `pathsonde` with no archive of the user's and no PostgreSQL settings
/// from the environment the tests run in: HOME is `home` (no ~/.pgpass
/// unless the test writes one).
fn ps_clean(home: &Path) -> Command {
    let mut c = Command::cargo_bin("pathsonde").unwrap();
    c.env("HOME", home)
        .env("PATHSONDE_ARCHIVE", home.join("default.sqlite"));
    for k in [
        "PGPASSWORD",
        "PGPASSFILE",
        "PGUSER",
        "PGHOST",
        "PGPORT",
        "PGDATABASE",
    ] {
        c.env_remove(k);
    }
    c
}

#[test]
fn a_password_in_an_archive_url_is_refused_before_measuring_and_never_shown() {
    let home = TempDir::new("cli-pw-url");
    for url in [
        "postgresql://agent:s3cret@127.0.0.1:1/archive",
        "postgres://agent@127.0.0.1:1/archive?password=s3cret",
    ] {
        // A measurement command: refused before it measures (no server runs).
        let out = ps_clean(&home.0)
            .args(["host", "--json", "--archive", url])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{url}");
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!all.contains("s3cret"), "{all}");
        assert!(
            all.contains("~/.pgpass") && all.contains("PGPASSWORD"),
            "{all}"
        );
        // A reader too, and through the environment as well as the flag.
        let out = ps_clean(&home.0)
            .env("PATHSONDE_ARCHIVE", url)
            .args(["history"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{url}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("s3cret") && err.contains("password"), "{err}");
    }
}

/// The role with a password (scripts/ci-postgres.sh): found through
/// PGPASSFILE, ~/.pgpass or PGPASSWORD, refused without them, and a
/// password file others can read is ignored, as libpq does.
#[test]
fn postgres_passwords_come_from_pgpass_or_pgpassword() {
    let Some(mut t) = TestArchive::postgres("cli-pgpass") else {
        return;
    };
    let pg = t.pg.as_mut().unwrap();
    if !pg.has_role("pathsonde_pw") {
        assert!(
            !pathsonde_archive::testing::in_ci(),
            "CI's server must have the role pathsonde_pw (scripts/ci-postgres.sh)"
        );
        eprintln!("skipped: no role pathsonde_pw on the test server");
        return;
    }
    pg.grant("pathsonde_pw").unwrap();
    let url = pg.url_as(Some("pathsonde_pw"));
    let home = TempDir::new("cli-pgpass-home");
    let history = |cmd: &mut Command| {
        cmd.args(["history", "--json", "--archive", &url])
            .output()
            .unwrap()
    };
    // No password anywhere: refused, saying where a password goes.
    let out = history(&mut ps_clean(&home.0));
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("asks for a password and none was found"),
        "{out:?}"
    );
    // A wrong one: the server's own words.
    let out = history(ps_clean(&home.0).env("PGPASSWORD", "wrong"));
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("password authentication failed") && !err.contains("wrong"),
        "{err}"
    );
    // PGPASSWORD.
    let v = json(&history(
        ps_clean(&home.0).env("PGPASSWORD", "pathsonde-test"),
    ));
    assert_eq!(v["runs"].as_array().unwrap().len(), 0);
    // ~/.pgpass, mode 0600: a measurement saved and read back with it.
    use std::os::unix::fs::PermissionsExt;
    let pgpass = home.0.join(".pgpass");
    std::fs::write(&pgpass, "# test\n*:*:*:pathsonde_pw:pathsonde-test\n").unwrap();
    std::fs::set_permissions(&pgpass, std::fs::Permissions::from_mode(0o600)).unwrap();
    let saved = json(
        &ps_clean(&home.0)
            .args(["host", "--json", "--archive", &url])
            .output()
            .unwrap(),
    );
    let id = saved["archive"]["id"]
        .as_i64()
        .expect("saved with ~/.pgpass");
    let v = json(&history(&mut ps_clean(&home.0)));
    assert_eq!(v["runs"][0]["id"], id);
    assert_eq!(v["runs"][0]["kind"], "host");
    // PGPASSFILE names another file.
    let other = home.0.join("elsewhere");
    std::fs::rename(&pgpass, &other).unwrap();
    json(&history(ps_clean(&home.0).env("PGPASSFILE", &other)));
    // Readable by others: ignored with a warning.
    std::fs::set_permissions(&other, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = history(ps_clean(&home.0).env("PGPASSFILE", &other));
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("group or world access") && !err.contains("pathsonde-test"),
        "{err}"
    );
}

/// `archive copy` from the command line: a SQLite archive with runs (raw
/// data included) into PostgreSQL and back into a new file; every run's
/// export is the same in all three; copying again copies nothing.
#[test]
fn archive_copy_moves_every_run_between_the_stores() {
    let Some(t) = TestArchive::postgres("cli-copy") else {
        return;
    };
    let dir = TempDir::new("cli-copy");
    let first = dir.0.join("first.sqlite");
    let back = dir.0.join("back.sqlite");
    let port = free_port();
    let _server = serve(port, &[]);
    ok(&abw(&first, port, &["--json"]));
    ok(&abw(&first, port, &["--json", "--no-raw"]));
    ok(&ps(&first).args(["host", "--json"]).output().unwrap());
    let copy = |from: &str, to: &str| {
        json(
            &ps(&dir.0.join("unused.sqlite"))
                .args(["archive", "copy", from, to, "--json"])
                .output()
                .unwrap(),
        )
    };
    let f = first.to_str().unwrap();
    let b = back.to_str().unwrap();
    // `archive init` creates the (empty) PostgreSQL archive.
    let v = json(
        &ps(&first)
            .args(["archive", "init", &t.location, "--json"])
            .output()
            .unwrap(),
    );
    assert_eq!(v["runs"], 0, "{v}");
    assert_eq!(v["schema_version"], pathsonde_archive::SCHEMA_VERSION);
    let v = copy(f, &t.location);
    assert_eq!(
        (v["copied"].as_u64(), v["already_there"].as_u64()),
        (Some(3), Some(0)),
        "{v}"
    );
    let v = copy(f, &t.location);
    assert_eq!(
        (v["copied"].as_u64(), v["already_there"].as_u64()),
        (Some(0), Some(3)),
        "{v}"
    );
    let v = copy(&t.location, b);
    assert_eq!(v["copied"], 3, "{v}");
    let text = ps(&dir.0.join("unused.sqlite"))
        .args(["archive", "copy", &t.location, b])
        .output()
        .unwrap();
    ok(&text);
    assert!(
        String::from_utf8_lossy(&text.stdout).contains("copied 0 run(s)"),
        "{text:?}"
    );
    let exports = |loc: &str| -> Vec<Value> {
        let h = json(
            &ps(Path::new(loc))
                .args(["history", "--json"])
                .output()
                .unwrap(),
        );
        h["runs"]
            .as_array()
            .unwrap()
            .iter()
            .rev()
            .map(|r| {
                let id = r["id"].as_i64().unwrap().to_string();
                let mut e = json(&ps(Path::new(loc)).args(["export", &id]).output().unwrap());
                let o = e.as_object_mut().unwrap();
                o.remove("id");
                // PostgreSQL records the writing role (the copier's here);
                // a SQLite file written by `abw` has none.
                let agent = o.remove("agent");
                assert!(agent.is_none() || agent.as_ref().unwrap().is_string());
                e
            })
            .collect()
    };
    let want = exports(f);
    assert_eq!(want.len(), 3);
    assert!(want[0]["raw_data"]["runs"][0]["observations"].is_array());
    assert!(want[1]["raw_data"].is_null());
    assert_eq!(exports(&t.location), want, "SQLite → PostgreSQL");
    assert_eq!(exports(b), want, "PostgreSQL → SQLite");
    // The same archive both ways, and a source that is not there, are
    // usage errors.
    let out = ps(&first).args(["archive", "copy", f, f]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let missing = dir.0.join("missing.sqlite");
    let out = ps(&first)
        .args(["archive", "copy", missing.to_str().unwrap(), b])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(!missing.exists());
}
