//! The real binaries under attack and failure (docs/security.md): keys and
//! allow lists end to end with their exit code, a client killed in the
//! middle of a measurement, and the server killed in the middle of one.

use assert_cmd::cargo::CommandCargoExt;
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

mod ports;
use ports::free_port;

fn pathsonde() -> Command {
    Command::cargo_bin("pathsonde").unwrap()
}

/// A `pathsonde serve` child, killed when dropped; its stderr is kept.
struct Serve {
    child: Option<Child>,
    stderr: PathBuf,
}

impl Drop for Serve {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = std::fs::remove_file(&self.stderr);
    }
}

impl Serve {
    fn start(port: u16, extra: &[&str]) -> Serve {
        let stderr =
            std::env::temp_dir().join(format!("pathsonde-sec-{}-{port}.log", std::process::id()));
        let mut args = vec!["serve", "--no-udpst", "--bind", "127.0.0.1", "--port"];
        let p = port.to_string();
        args.push(&p);
        args.extend_from_slice(extra);
        let child = pathsonde()
            .args(&args)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "server did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        Serve {
            child: Some(child),
            stderr,
        }
    }
    fn log(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }
    fn kill(&mut self) {
        let mut c = self.child.take().unwrap();
        c.kill().unwrap();
        c.wait().unwrap();
    }
    /// Stops the server (SIGSTOP): it answers nothing more, so a measurement
    /// in progress cannot finish, however fast it would have been.
    fn freeze(&self) {
        let pid = self.child.as_ref().unwrap().id() as libc::pid_t;
        // SAFETY: kill(2) on our own child with a valid signal.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGSTOP) }, 0);
    }
    fn alive(&mut self) -> bool {
        matches!(self.child.as_mut().unwrap().try_wait(), Ok(None))
    }
}

fn abw(port: u16, extra: &[&str]) -> Command {
    let mut c = pathsonde();
    c.args([
        "abw",
        "127.0.0.1",
        "--port",
        &port.to_string(),
        "--max-rate",
        "100M",
        "--json",
    ]);
    c.args(extra);
    c
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn key_file(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("pathsonde-sec-keys-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
    p
}

const SERVER_KEYS: &str =
    "# test keys\nalice 00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff\n";
const WRONG_KEY: &str = "alice ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100\n";

#[test]
fn keys_end_to_end_and_a_wrong_key_exits_11_with_a_message_on_both_sides() {
    let server_keys = key_file("server.keys", SERVER_KEYS);
    let wrong = key_file("wrong.key", WRONG_KEY);
    let port = free_port();
    let server = Serve::start(port, &["--key-file", server_keys.to_str().unwrap()]);

    let out = abw(port, &["--key-file", server_keys.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "right key: {}", stderr(&out));

    let out = abw(port, &["--key-file", wrong.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(11), "stderr: {}", stderr(&out));
    assert!(
        stderr(&out).contains("wrong key for key id 'alice'"),
        "{}",
        stderr(&out)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["error"]["kind"], "auth");

    let out = abw(port, &[]).output().unwrap();
    assert_eq!(out.status.code(), Some(11));
    assert!(stderr(&out).contains("--key-file"), "{}", stderr(&out));

    // The server said it too.
    std::thread::sleep(Duration::from_millis(100));
    let log = server.log();
    assert!(log.contains("authentication required (1 key(s))"), "{log}");
    assert!(log.contains("wrong key for key id 'alice'"), "{log}");
    assert!(log.contains("authenticated as 'alice'"), "{log}");
}

#[test]
fn key_files_that_others_can_read_are_refused_and_keys_never_go_on_the_command_line() {
    let loose = key_file("loose.keys", SERVER_KEYS);
    std::fs::set_permissions(&loose, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = pathsonde()
        .args([
            "serve",
            "--port",
            "1",
            "--key-file",
            loose.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("chmod 600"), "{}", stderr(&out));
    // There is no option that takes a secret itself.
    let help = pathsonde().args(["serve", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(!help.contains("--key "), "{help}");
    for limit in [
        "--max-duration",
        "--max-rate",
        "--max-bytes",
        "--max-connections",
        "--handshake-timeout",
        "--idle-timeout",
        "--max-control-message",
        "--allow",
    ] {
        assert!(help.contains(limit), "serve --help lacks {limit}");
    }
}

#[test]
fn an_address_outside_allow_exits_11() {
    let port = free_port();
    let server = Serve::start(port, &["--allow", "10.0.0.0/8,192.168.0.0/16"]);
    let out = abw(port, &[]).output().unwrap();
    assert_eq!(out.status.code(), Some(11), "stderr: {}", stderr(&out));
    assert!(stderr(&out).contains("--allow"), "{}", stderr(&out));
    std::thread::sleep(Duration::from_millis(100));
    assert!(
        server.log().contains("refused (not in --allow)"),
        "{}",
        server.log()
    );
}

#[test]
fn the_nic_is_touched_only_with_hw_stamps_and_says_so() {
    let help = pathsonde().args(["serve", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(help.contains("--hw-stamps"), "{help}");
    // Without the flag the server says its stamps are software ones.
    let port = free_port();
    let server = Serve::start(port, &[]);
    let out = abw(port, &[]).output().unwrap();
    assert!(out.status.success(), "stderr: {}", stderr(&out));
    std::thread::sleep(Duration::from_millis(100));
    let log = server.log();
    assert!(log.contains("receive stamps: kernel software"), "{log}");
    assert!(!log.contains("hardware receive stamps ("), "{log}");
    drop(server);
    // With it, on loopback (no SIOCGHWTSTAMP), each session says why not
    // and the measurement goes on with software stamps.
    let port = free_port();
    let server = Serve::start(port, &["--hw-stamps"]);
    let out = abw(port, &[]).output().unwrap();
    assert!(out.status.success(), "stderr: {}", stderr(&out));
    std::thread::sleep(Duration::from_millis(100));
    let log = server.log();
    assert!(
        log.contains("--hw-stamps; its configuration is restored"),
        "{log}"
    );
    assert!(
        log.contains("no hardware receive stamps (lo: SIOCGHWTSTAMP"),
        "{log}"
    );
}

/// Waits until the client has an established control connection to `port`
/// (from /proc/net/tcp): the measurement has begun.
fn wait_established(port: u16, within: Duration) -> bool {
    let until = Instant::now() + within;
    let needle = format!(":{port:04X} ");
    while Instant::now() < until {
        let table = std::fs::read_to_string("/proc/net/tcp").unwrap_or_default();
        // Column 2 is the remote address; state 01 is ESTABLISHED.
        if table.lines().any(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.len() > 3 && format!("{} ", f[2]).ends_with(&needle) && f[3] == "01"
        }) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    false
}

#[test]
fn a_client_killed_mid_measurement_does_not_wedge_the_server() {
    let port = free_port();
    let mut server = Serve::start(port, &[]);
    for delay_ms in [0u64, 60, 200] {
        // `pair` measures for about 1.5 s on loopback, FAC² for a few
        // milliseconds: the kill must land mid-measurement.
        let mut client = abw(port, &["--method", "pair"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let began = wait_established(port, Duration::from_secs(10));
        std::thread::sleep(Duration::from_millis(delay_ms));
        let _ = client.kill();
        let _ = client.wait();
        assert!(began, "the client never connected");
        // The next client measures at once (no "busy" left behind).
        let out = abw(port, &[]).output().unwrap();
        assert!(
            out.status.success(),
            "after a kill at +{delay_ms} ms: {}",
            stderr(&out)
        );
    }
    assert!(server.alive());
}

#[test]
fn the_server_killed_mid_measurement_gives_a_clear_error_within_the_timeout() {
    use std::io::{BufRead, BufReader, Read};
    let port = free_port();
    let mut server = Serve::start(port, &[]);
    // `pair` needs several trains; once the first is reported the client is
    // mid-measurement, and freezing the server then holds it there however
    // fast the machine is (no race against a short run).
    let mut client = abw(
        port,
        &["--timeout", "2", "--method", "pair", "--json-lines"],
    )
    .stderr(Stdio::piped())
    .stdout(Stdio::piped())
    .spawn()
    .unwrap();
    let mut events = BufReader::new(client.stdout.take().unwrap());
    let mut line = String::new();
    loop {
        line.clear();
        let n = events.read_line(&mut line).unwrap();
        assert!(n > 0, "the client ended before its first train");
        if line.contains(r#""type":"train""#) {
            break;
        }
    }
    server.freeze();
    server.kill();
    let killed = Instant::now();
    let mut rest = String::new();
    events.read_to_string(&mut rest).unwrap();
    let out = client.wait_with_output().unwrap();
    let after = killed.elapsed();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(6), "stderr: {err}");
    assert!(
        err.contains("closed the control connection") || err.contains("stopped answering"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "one clear line: {err}");
    assert!(
        rest.lines()
            .last()
            .is_some_and(|l| l.contains(r#""type":"error""#)),
        "{rest}"
    );
    assert!(
        after < Duration::from_secs(4),
        "the client took {after:?} after the kill (timeout 2 s)"
    );
}

#[test]
fn a_flow_faster_than_serve_max_rate_is_refused_and_a_tcp_flow_is_paced() {
    // Issue 27: `serve --max-rate 50M` once sent `udp -R -b 1G` at 1 Gb/s.
    let port = free_port();
    let _server = Serve::start(port, &["--max-rate", "50M"]);
    let target = format!("127.0.0.1:{port}");
    let out = pathsonde()
        .args(["udp", &target, "-R", "-b", "1G", "-t", "1"])
        .output()
        .unwrap();
    assert!(!out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("above the server's 50 Mb/s"),
        "{}",
        stderr(&out)
    );
    // TCP, server sending: the client receives no faster than the limit
    // over the flow's second (an upper bound only: the machine is shared).
    let out = pathsonde()
        .args(["tcp", &target, "-R", "-t", "1", "-P", "2", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let received: u64 = json["client"]["streams"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["bytes"].as_u64().unwrap())
        .sum();
    let mbps = received as f64 * 8.0 / 1.0 / 1e6;
    assert!(
        received > 0 && mbps <= 1.1 * 50.0,
        "tcp -R moved {mbps:.1} Mb/s"
    );
}
