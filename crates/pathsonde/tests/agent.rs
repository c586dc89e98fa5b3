//! `pathsonde agent` against two loopback servers (bound to port 0 in this
//! process): every measurement is archived, and `/metrics` shows the latest
//! result for each peer with the labels peer and method.

use assert_cmd::cargo::CommandCargoExt;
use pathsonde_net::{Server, ServerConfig};
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn server() -> pathsonde_net::ServerHandle {
    let mut cfg = ServerConfig::new(SocketAddr::from(([127, 0, 0, 1], 0)));
    cfg.host_report = false;
    Server::bind(cfg).unwrap().spawn().unwrap()
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

/// The value of `name{labels…}` where every wanted label matches.
fn sample(page: &str, name: &str, labels: &[&str]) -> Option<f64> {
    page.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")))
        .find(|l| labels.iter().all(|w| l.contains(w)))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

#[test]
fn agent_measures_two_peers_archives_each_result_and_serves_metrics() {
    let dir = std::env::temp_dir().join(format!("pathsonde-agent-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let archive = dir.join("a.sqlite");
    let (a, b) = (server(), server());
    let config = dir.join("agent.toml");
    std::fs::write(
        &config,
        format!(
            r#"method = "fac2"
interval = "3s"
jitter = "500ms"
max_rate = "50M"

[[peer]]
name = "alpha"
host = "127.0.0.1"
port = {}

[[peer]]
name = "beta"
host = "127.0.0.1"
port = {}
max_rate = "80M"
"#,
            a.local_addr().port(),
            b.local_addr().port()
        ),
    )
    .unwrap();
    let mut child = Command::cargo_bin("pathsonde")
        .unwrap()
        .args([
            "agent",
            "--config",
            config.to_str().unwrap(),
            "--metrics",
            "127.0.0.1:0",
            "--rounds",
            "2",
        ])
        .env("PATHSONDE_ARCHIVE", &archive)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The agent names its metrics address on its first stderr line.
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut first = String::new();
    err.read_line(&mut first).unwrap();
    let maddr = first
        .split("http://")
        .nth(1)
        .and_then(|s| s.split("/metrics").next())
        .unwrap_or_else(|| panic!("no metrics address in: {first}"))
        .to_string();
    // Both peers measured once: the metrics show both.
    let deadline = Instant::now() + Duration::from_secs(60);
    let page = loop {
        assert!(Instant::now() < deadline, "metrics never showed both peers");
        if let Some(p) = scrape(&maddr) {
            let both = ["alpha", "beta"].iter().all(|peer| {
                sample(
                    &p,
                    "pathsonde_agent_measurements_total",
                    &[&format!("peer=\"{peer}\""), "method=\"fac2\""],
                )
                .is_some_and(|n| n >= 1.0)
            });
            if both {
                break p;
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    for peer in ["alpha", "beta"] {
        let l = [format!("peer=\"{peer}\""), "method=\"fac2\"".to_string()];
        let l: Vec<&str> = l.iter().map(String::as_str).collect();
        let avail = sample(&page, "pathsonde_agent_available_bps", &l).unwrap();
        assert!(avail > 1e6, "{peer}: {avail}\n{page}");
        assert!(sample(&page, "pathsonde_agent_rtt_seconds", &l).unwrap() > 0.0);
        assert!(sample(&page, "pathsonde_agent_last_archive_id", &l).unwrap() >= 1.0);
        assert!(
            sample(&page, "pathsonde_agent_last_success_timestamp_seconds", &l).unwrap() > 1.7e9
        );
    }
    assert!(page.contains("# TYPE pathsonde_agent_available_bps gauge"));
    let status = child.wait().unwrap();
    assert!(status.success(), "agent exited {status}");
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    assert_eq!(
        out.lines().filter(|l| l.starts_with("peer ")).count(),
        4,
        "{out}"
    );

    // Two rounds of two peers: four archived results, two per peer.
    let h = Command::cargo_bin("pathsonde")
        .unwrap()
        .args([
            "history",
            "--json",
            "--kind",
            "agent",
            "--archive",
            archive.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(h.status.success());
    let v: Value = serde_json::from_slice(&h.stdout).unwrap();
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 4, "{v}");
    for peer in ["alpha", "beta"] {
        assert_eq!(runs.iter().filter(|r| r["target"] == peer).count(), 2);
    }
    let id = runs[0]["id"].as_i64().unwrap();
    let shown = Command::cargo_bin("pathsonde")
        .unwrap()
        .args([
            "show",
            &id.to_string(),
            "--json",
            "--archive",
            archive.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let s: Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert!(s["result"]["available_bps"].as_f64().unwrap() > 0.0);
    assert!(s["result"]["peer"] == "alpha" || s["result"]["peer"] == "beta");
    a.stop().unwrap();
    b.stop().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_bad_agent_config_is_a_usage_error_naming_the_problem() {
    let dir = std::env::temp_dir().join(format!("pathsonde-agent-bad-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for (body, want) in [
        ("interval = \"10s\"\n", "no [[peer]]"),
        (
            "[[peer]]\nhost = \"127.0.0.1\"\nmethod = \"nope\"\n",
            "nope",
        ),
        (
            "[[peer]]\nhost = \"127.0.0.1\"\ninterval = \"often\"\n",
            "interval",
        ),
        (
            "[[peer]]\nhost = \"127.0.0.1\"\ncolour = \"blue\"\n",
            "colour",
        ),
        ("this is not toml", "agent.toml"),
    ] {
        let f = dir.join("agent.toml");
        std::fs::write(&f, body).unwrap();
        let out = Command::cargo_bin("pathsonde")
            .unwrap()
            .args([
                "agent",
                "--config",
                f.to_str().unwrap(),
                "--metrics",
                "127.0.0.1:0",
            ])
            .env("PATHSONDE_ARCHIVE", dir.join("a.sqlite"))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{body}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want), "{body}: {err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The config's `archive = "…"` (a SQLite file or a PostgreSQL URL) is
/// where the agent archives, over `PATHSONDE_ARCHIVE`.
#[test]
fn the_config_names_the_archive_on_either_store() {
    use pathsonde_archive::testing::{both, TempDir};
    let a = server();
    for t in both("agent-config") {
        let dir = TempDir::new("agent-config");
        let config = dir.0.join("agent.toml");
        std::fs::write(
            &config,
            format!(
                "archive = \"{}\"\nmethod = \"fac2\"\nmax_rate = \"50M\"\n\n[[peer]]\nname = \"alpha\"\nhost = \"127.0.0.1\"\nport = {}\n",
                t.location,
                a.local_addr().port()
            ),
        )
        .unwrap();
        let env_archive = dir.0.join("env.sqlite");
        let out = Command::cargo_bin("pathsonde")
            .unwrap()
            .args(["agent", "--config", config.to_str().unwrap()])
            .args(["--metrics", "127.0.0.1:0", "--rounds", "1"])
            .env("PATHSONDE_ARCHIVE", &env_archive)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}: {out:?}", t.store);
        let h = Command::cargo_bin("pathsonde")
            .unwrap()
            .args(["history", "--json", "--archive", &t.location])
            .output()
            .unwrap();
        assert!(h.status.success(), "{h:?}");
        let v: Value = serde_json::from_slice(&h.stdout).unwrap();
        let runs = v["runs"].as_array().unwrap();
        assert_eq!(runs.len(), 1, "{}: {v}", t.store);
        assert_eq!(runs[0]["kind"], "agent");
        assert!(
            !env_archive.exists(),
            "{}: the environment's archive was used",
            t.store
        );
    }
    a.stop().unwrap();
}
