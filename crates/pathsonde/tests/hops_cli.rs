//! `pathsonde hops` without a lab: over loopback (one hop, the far end
//! answering port unreachable, unprivileged) the JSON and `--json-lines`
//! contracts hold, and bad input is one clear line with exit code 2.

use assert_cmd::cargo::CommandCargoExt;
use serde_json::Value;
use std::process::Command;

mod ports;
use ports::free_port;

fn pathsonde() -> Command {
    Command::cargo_bin("pathsonde").unwrap()
}

/// `pathsonde hops 127.0.0.1` with 3 trains 0.1 s apart (loopback answers
/// at once), then `extra`.
fn quick_hops(extra: &[&str]) -> Command {
    let mut c = pathsonde();
    c.args(["hops", "127.0.0.1", "--trains", "3", "--train-gap", "0.1"])
        .args(extra);
    c
}

#[test]
fn loopback_gives_one_hop_that_is_the_far_end() {
    let out = quick_hops(&["--json"]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    assert_eq!(v["method"], "hops");
    assert_eq!(v["destination_ttl"], 1);
    let h = &v["hops"][0];
    assert_eq!(h["ttl"], 1);
    assert_eq!(h["address"], "127.0.0.1");
    assert!(h["rtt_s"].as_f64().unwrap() > 0.0);
    assert!(v["notes"]
        .as_array()
        .unwrap()
        .iter()
        .any(|n| n.as_str().unwrap().contains("far end is not measured")));
    assert!(v["probe_bytes"].as_u64().unwrap() >= 33_600);
}

#[test]
fn json_lines_streams_a_train_event_per_train() {
    let out = quick_hops(&["--json-lines"]).output().unwrap();
    assert!(out.status.success());
    let events: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("every line is JSON"))
        .collect();
    let trains = events.iter().filter(|e| e["type"] == "train").count();
    assert_eq!(trains, 3);
    assert_eq!(events.last().unwrap()["type"], "result");
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    for args in [
        vec!["hops", "127.0.0.1", "--trains", "1"],
        vec!["hops", "127.0.0.1", "--trains", "2"],
        vec!["hops", "127.0.0.1", "--trains", "61"],
        vec!["hops", "127.0.0.1", "--train-gap", "61s"],
        vec!["hops", "127.0.0.1:notaport"],
        vec!["hops", "127.0.0.1", "--train-gap", "-1"],
    ] {
        let out = pathsonde().args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.trim().is_empty(), "{args:?}");
    }
    let out = pathsonde()
        .args(["hops", "127.0.0.1", "--trains", "99", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let v: Value = serde_json::from_slice(&out.stdout).expect("the error object");
    assert_eq!(v["error"]["kind"], "usage");
}

fn run_ok(cmd: &mut Command) -> Value {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("one JSON object")
}

/// A hops run is archived like any other: `show` gives its hop table,
/// `export` its raw trains, `report --html` a page that names the hop, and
/// `--no-save` keeps nothing.
#[test]
fn hops_runs_are_archived_shown_exported_and_reported() {
    let dir = std::env::temp_dir().join(format!("pathsonde-hops-archive-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let archive = dir.join("a.sqlite");
    let arch = archive.to_str().unwrap();
    let hops = |extra: &[&str]| {
        let mut c = quick_hops(&["--json", "--archive", arch]);
        c.args(extra);
        c
    };
    let printed = run_ok(&mut hops(&[]));
    let id = printed["archive"]["id"].as_i64().expect("saved as a run");

    let shown = run_ok(pathsonde().args(["show", &id.to_string(), "--archive", arch, "--json"]));
    assert_eq!(shown["kind"], "hops");
    assert_eq!(shown["result"]["hops"][0]["address"], "127.0.0.1");
    let text = pathsonde()
        .args(["show", &id.to_string(), "--archive", arch])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("127.0.0.1") && text.contains("ttl"), "{text}");

    let raw = run_ok(pathsonde().args([
        "export",
        &id.to_string(),
        "--format",
        "json",
        "--archive",
        arch,
    ]));
    let trains = raw["raw_data"]["observations"]
        .as_array()
        .expect("raw trains");
    assert_eq!(trains.len(), 3);
    assert!(!trains[0]["answers"].as_array().unwrap().is_empty());

    let page = dir.join("r.html");
    run_ok(pathsonde().args([
        "report",
        &id.to_string(),
        "--html",
        page.to_str().unwrap(),
        "--archive",
        arch,
        "--json",
    ]));
    let html = std::fs::read_to_string(&page).unwrap();
    // One hop, the far end: no link to name, and the page says so.
    assert!(html.contains("Tight link not found"), "{html}");
    assert!(html.contains("far end is not measured"));

    let before = run_ok(pathsonde().args(["history", "--archive", arch, "--json"]));
    let n = before["runs"].as_array().map_or(0, Vec::len);
    let unsaved = run_ok(&mut hops(&["--no-save"]));
    assert!(unsaved.get("archive").is_none());
    let after = run_ok(pathsonde().args(["history", "--archive", arch, "--json"]));
    assert_eq!(after["runs"].as_array().map_or(0, Vec::len), n);
    let _ = std::fs::remove_dir_all(&dir);
}

struct Serve(std::process::Child);

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn hops_json(port: u16) -> Value {
    run_ok(&mut quick_hops(&[
        "--server-port",
        &port.to_string(),
        "--json",
        "--no-save",
    ]))
}

#[test]
fn a_pathsonde_server_at_the_far_end_adds_the_end_to_end_a() {
    // No server: one line says why, and hops stands on ICMP alone.
    let port = free_port();
    let v = hops_json(port);
    let e = &v["end_to_end"];
    assert_eq!(e["server"], format!("127.0.0.1:{port}"), "{v}");
    assert!(e["error"].as_str().is_some_and(|s| !s.is_empty()), "{v}");
    assert!(v["hops"].as_array().is_some_and(|h| !h.is_empty()));
    // With one: the default method's A, and (loopback has no routers, so
    // no tight link) the agreement says there was nothing to compare.
    let server = Serve(
        pathsonde()
            .args(["serve", "--no-udpst", "--bind", "127.0.0.1", "--port"])
            .arg(port.to_string())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(std::time::Instant::now() < deadline, "server did not start");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::thread::sleep(std::time::Duration::from_millis(100));
    let v = hops_json(port);
    let e = &v["end_to_end"];
    assert_eq!(e["method"], "fac2", "{v}");
    assert!(e["available_bps"].as_f64().unwrap() > 0.0, "{v}");
    assert_eq!(e["agreement"], "no_tight_link", "{v}");
    drop(server);
    // --no-server: nothing is looked for.
    let v = run_ok(&mut quick_hops(&["--no-server", "--json", "--no-save"]));
    assert!(v.get("end_to_end").is_none(), "{v}");
}
