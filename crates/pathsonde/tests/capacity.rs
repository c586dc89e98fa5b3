//! `pathsonde capacity` run as a user runs it, against `pathsonde serve`
//! and, when the reference binary is beside the repository, against
//! OB-UDPST's server: the report in each output mode, the reference-JSON
//! format, the archive and its plots, the server's rate ceiling, and the
//! refusals (bad duration, wrong key).  The protocol itself is tested in
//! pathsonde-net (`tests/udpst.rs`, `tests/udpst_interop.rs`).

use assert_cmd::cargo::CommandCargoExt;
use serde_json::Value;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

mod ports;
use ports::{free_port, free_ports};

fn pathsonde() -> Command {
    Command::cargo_bin("pathsonde").unwrap()
}

fn tmpdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("pathsonde-capacity-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// `pathsonde serve` with its UDPST listener on a port of its own; waits
/// until the listener says it is up.
struct Serve {
    child: Child,
    udpst: u16,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(dir: &Path, extra: &[&str]) -> Serve {
    let [port, udpst] = free_ports();
    let log = dir.join(format!("serve-{udpst}.log"));
    let child = pathsonde()
        .args(["serve", "--bind", "127.0.0.1", "--port", &port.to_string()])
        .args(["--udpst-port", &udpst.to_string()])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let mut s = Serve { child, udpst };
    // The metrics line is the last one `serve` prints before it runs.
    let last = if extra.contains(&"--metrics") {
        "metrics on http"
    } else {
        "UDPST"
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let said = std::fs::read_to_string(&log).unwrap_or_default();
        if said.contains(last) {
            return s;
        }
        if let Ok(Some(status)) = s.child.try_wait() {
            panic!("serve exited ({status}) before it was up:\n{said}");
        }
        assert!(Instant::now() < deadline, "serve did not start:\n{said}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// GET /metrics from `addr`.
fn scrape(addr: &str) -> String {
    use std::io::Read;
    let mut c = std::net::TcpStream::connect(addr).unwrap();
    c.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").unwrap();
    let mut s = String::new();
    c.read_to_string(&mut s).unwrap();
    s
}

/// The value of an unlabelled metric on a page.
fn metric(page: &str, name: &str) -> f64 {
    page.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
        .unwrap_or(f64::NAN)
}

fn capacity(dir: &Path, server: u16, args: &[&str]) -> Output {
    pathsonde()
        .env("PATHSONDE_ARCHIVE", dir.join("a.sqlite"))
        .args(["capacity", &format!("127.0.0.1:{server}"), "-t", "5"])
        .args(args)
        .output()
        .unwrap()
}

fn ok(out: &Output) -> &Output {
    assert_eq!(
        out.status.code(),
        Some(0),
        "stderr: {}\nstdout: {}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    out
}

/// Upstream against pathsonde's server, streamed: a `sub_interval` event per
/// second, the result with the maximum among them, then the archive shows
/// and plots it.
#[test]
fn an_upstream_test_streams_its_sub_intervals_and_is_archived_and_plotted() {
    let dir = tmpdir("lines");
    let maddr = format!("127.0.0.1:{}", free_port());
    let s = serve(&dir, &["--metrics", &maddr, "--udpst-open", "10G"]);
    let out = capacity(&dir, s.udpst, &["--json-lines", "--algorithm", "c"]);
    let text = String::from_utf8_lossy(&ok(&out).stdout).to_string();
    let events: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON lines"))
        .collect();
    let rows: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "sub_interval")
        .map(|e| &e["data"])
        .collect();
    assert_eq!(rows.len(), 5, "{text}");
    let result = &events.last().unwrap()["data"];
    assert_eq!(events.last().unwrap()["type"], "result");
    let max = result["max_ip_layer_capacity_bps"].as_f64().unwrap();
    let best = rows
        .iter()
        .map(|r| r["ip_layer_capacity_bps"].as_f64().unwrap())
        .fold(0.0, f64::max);
    // The maximum is the best sub-interval, not what was sent or a constant.
    assert_eq!(max, best);
    assert!(max > 50e6, "{max}");
    assert_eq!(result["direction"], "upstream");
    assert_eq!(result["error_status"], 0);
    assert_eq!(result["sub_intervals"].as_array().unwrap().len(), 5);
    let id = result["archive"]["id"].as_i64().expect("archived");

    let shown = pathsonde()
        .env("PATHSONDE_ARCHIVE", dir.join("a.sqlite"))
        .args(["show", &id.to_string(), "--json"])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&ok(&shown).stdout).unwrap();
    assert_eq!(v["kind"], "capacity");
    assert_eq!(v["result"]["max_ip_layer_capacity_bps"].as_f64(), Some(max));
    let plots = dir.join("plots");
    let plotted = pathsonde()
        .env("PATHSONDE_ARCHIVE", dir.join("a.sqlite"))
        .args(["plot", &id.to_string(), "--format", "svg", "-o"])
        .arg(&plots)
        .output()
        .unwrap();
    ok(&plotted);
    assert!(plots.join(format!("run{id}-capacity.svg")).exists());
    assert!(plots.join(format!("run{id}-delay-variation.svg")).exists());
    // The server counted the test on its metrics page.
    let page = scrape(&maddr);
    assert_eq!(
        metric(&page, "pathsonde_udpst_setups_accepted_total"),
        1.0,
        "{page}"
    );
    assert!(
        metric(&page, "pathsonde_udpst_received_bytes_total") > 1e6,
        "{page}"
    );
    drop(s);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Downstream behind the server's own `--max-rate 200M`: the maximum sits
/// near the ceiling (what arrived, not what was asked), and the reference's
/// JSON carries it under its own keys with ErrorStatus 0.
#[test]
fn a_downstream_test_in_the_reference_json_stops_at_the_servers_ceiling() {
    let dir = tmpdir("udpst-json");
    let s = serve(&dir, &["--max-rate", "200M", "--udpst-open", "10G"]);
    let out = capacity(
        &dir,
        s.udpst,
        &["-d", "--format", "udpst-json", "--no-save"],
    );
    let v: Value = serde_json::from_slice(&ok(&out).stdout).expect("one JSON object");
    assert_eq!(v["ErrorStatus"], 0);
    assert_eq!(v["Output"]["Status"], "Complete");
    assert_eq!(v["Input"]["Role"], "Receiver");
    assert_eq!(
        v["Output"]["IncrementalResult"].as_array().unwrap().len(),
        5
    );
    let max = v["Output"]["AtMax"]["MaxIPLayerCapacity"].as_f64().unwrap();
    assert!(
        (150.0..=215.0).contains(&max),
        "max {max} Mb/s behind a 200 Mb/s ceiling"
    );
    for k in [
        "IPLayerCapacitySummary",
        "LossRatioSummary",
        "PDVRangeSummary",
        "MinRTTSummary",
    ] {
        assert!(v["Output"]["Summary"].get(k).is_some(), "Summary lacks {k}");
    }
    drop(s);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Bad input is refused before anything is sent; a wrong key is refused by
/// the server and reported with the protocol's ErrorStatus and exit 11.
#[test]
fn bad_durations_and_wrong_keys_are_refused_with_their_codes() {
    let dir = tmpdir("refusals");
    let out = pathsonde()
        .args(["capacity", "127.0.0.1", "-t", "4", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["error"]["kind"], "usage");
    assert!(v["error"]["message"]
        .as_str()
        .unwrap()
        .contains("5 s to 3600 s"));

    let key = |name: &str, line: &str| {
        let p = dir.join(name);
        let mut f = std::fs::File::create(&p).unwrap();
        writeln!(f, "{line}").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        p
    };
    let good = key("good.keys", "7 75647073742d7368617265642d736563726574");
    let wrong = key("wrong.keys", "7 616e6f746865722d77726f6e672d736563726574");
    let named = key("named.keys", "lab 75647073742d7368617265642d736563726574");
    let s = serve(&dir, &["--key-file", good.to_str().unwrap()]);
    let out = capacity(
        &dir,
        s.udpst,
        &["--key-file", wrong.to_str().unwrap(), "--no-save"],
    );
    assert_eq!(
        out.status.code(),
        Some(11),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("ErrorStatus 107"));
    let out = capacity(
        &dir,
        s.udpst,
        &["--key-file", named.to_str().unwrap(), "--no-save"],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a number 0–255"));
    drop(s);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `pathsonde capacity` against the reference server, when its binary is
/// beside the repository (a user's clone has no ../shared): both directions,
/// ErrorStatus 0 in the reference's own JSON keys.
#[test]
fn against_the_reference_server_both_directions_complete() {
    let udpst = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/peers/obudpst/udpst");
    let udpst = if udpst.exists() {
        udpst
    } else {
        PathBuf::from("/work/shared/peers/obudpst/udpst")
    };
    if !udpst.exists() {
        pathsonde_lab::exclusive::cannot_run(
            "udpst interop: ../shared/peers/obudpst/udpst not found",
        );
        return;
    }
    let dir = tmpdir("reference");
    for dir_flag in ["-u", "-d"] {
        let port = free_port();
        let mut server = Command::new(&udpst)
            .args(["-1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(300));
        let out = capacity(
            &dir,
            port,
            &[dir_flag, "--format", "udpst-json", "--no-save"],
        );
        let _ = server.kill();
        let _ = server.wait();
        let v: Value = serde_json::from_slice(&ok(&out).stdout).unwrap();
        assert_eq!(v["ErrorStatus"], 0, "{dir_flag}: {v}");
        assert_eq!(
            v["Output"]["IncrementalResult"].as_array().unwrap().len(),
            5
        );
        assert!(v["Output"]["AtMax"]["MaxIPLayerCapacity"].as_f64().unwrap() > 50.0);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
