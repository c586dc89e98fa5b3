//! `pathsonde serve`'s UDPST listener (issue 19): `--udpst-port`,
//! `--no-udpst`, the default port's warning, a taken explicit port's exit,
//! and the same `--allow` list and key file as the TCP server.  Only the
//! setup exchange is driven here (raw Setup Requests); the full protocol is
//! tested in pathsonde-net's `tests/udpst.rs` and `tests/udpst_interop.rs`.

use assert_cmd::cargo::CommandCargoExt;
use pathsonde_wire::udpst::setup::{MaxBandwidth, Repr as SetupRepr, SetupModifiers};
use std::net::{TcpStream, UdpSocket};
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod ports;
use ports::free_port;

fn pathsonde() -> Command {
    Command::cargo_bin("pathsonde").unwrap()
}

struct Serve {
    child: Child,
    log: PathBuf,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.log);
    }
}

impl Serve {
    /// Starts `serve` on a free port.  A port another test took between
    /// `free_port` and the bind makes `serve` exit: that is retried on a
    /// new port, and a server that neither listens nor exits within 30 s
    /// (a loaded CI machine) fails with its log.
    fn start(extra: &[&str]) -> Serve {
        let mut last_log = String::new();
        for _ in 0..3 {
            let port = free_port();
            let log = std::env::temp_dir().join(format!(
                "pathsonde-udpst-serve-{}-{port}.log",
                std::process::id()
            ));
            let p = port.to_string();
            let mut args = vec!["serve", "--bind", "127.0.0.1", "--port", &p];
            args.extend_from_slice(extra);
            let child = pathsonde()
                .args(&args)
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(&log).unwrap())
                .spawn()
                .unwrap();
            let mut s = Serve { child, log };
            let deadline = Instant::now() + Duration::from_secs(30);
            loop {
                if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    return s;
                }
                if let Ok(Some(status)) = s.child.try_wait() {
                    last_log = format!("exited {status}: {}", s.log());
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "server did not start: {}",
                    s.log()
                );
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        panic!("server did not start in 3 tries: {last_log}");
    }
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

fn setup_request() -> Vec<u8> {
    SetupRepr::request(
        0,
        1,
        0x4242,
        MaxBandwidth::default(),
        SetupModifiers::new(true, false),
    )
    .to_bytes()
}

/// Sends a Setup Request to `port` and returns the reply's result code,
/// `None` for no reply.
fn setup_code(port: u16) -> Option<u8> {
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    s.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let req = setup_request();
    s.send_to(&req, ("127.0.0.1", port)).unwrap();
    let mut b = [0u8; 2048];
    loop {
        let (n, from) = s.recv_from(&mut b).ok()?;
        if from.port() != port {
            continue; // the Null Request from the new test port
        }
        assert_eq!(n, req.len(), "the response is the request's size");
        return Some(b[9]);
    }
}

#[test]
fn udpst_port_answers_setup_and_no_udpst_is_silent() {
    let port = free_port();
    let p = port.to_string();
    let s = Serve::start(&["--udpst-port", &p, "--udpst-open"]);
    assert_eq!(setup_code(port), Some(1), "{}", s.log());
    assert!(s.log().contains("UDPST"), "{}", s.log());
    assert!(
        s.log()
            .contains("without a key up to 100 Mb/s (--udpst-open)"),
        "{}",
        s.log()
    );
    drop(s);

    let port = free_port();
    let s = Serve::start(&["--no-udpst"]);
    // Nothing listens on a free port we did not pass, and the default port
    // is not tried either: serve says nothing about UDPST.
    assert_eq!(setup_code(port), None);
    std::thread::sleep(Duration::from_millis(100));
    assert!(!s.log().contains("UDPST"), "{}", s.log());
}

/// A server with its defaults tests nobody without a key: the setup is
/// answered with code 5 (authentication required), no test port is opened
/// (no Null Request follows), and the log and the start-up line say how to
/// open it.  `--udpst-open` and a restricted `--allow` list are the opt-ins.
#[test]
fn tests_without_a_key_are_refused_unless_opted_into() {
    let port = free_port();
    let p = port.to_string();
    let s = Serve::start(&["--udpst-port", &p]);
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    sock.send_to(&setup_request(), ("127.0.0.1", port)).unwrap();
    let mut b = [0u8; 2048];
    let mut got = Vec::new();
    while let Ok((n, from)) = sock.recv_from(&mut b) {
        got.push((n, from.port(), b[9]));
    }
    assert_eq!(
        got,
        vec![(56, port, 5)],
        "one 56-byte refusal, nothing else"
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    while !s.log().contains("tests without a key are off") {
        assert!(Instant::now() < deadline, "{}", s.log());
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(s.log().contains("no tests without a key"), "{}", s.log());
    drop(s);

    let port = free_port();
    let p = port.to_string();
    let s = Serve::start(&["--udpst-port", &p, "--allow", "127.0.0.0/8"]);
    assert_eq!(setup_code(port), Some(1), "{}", s.log());
    drop(s);
}

#[test]
fn the_allow_list_and_the_key_file_apply_to_udpst() {
    let port = free_port();
    let p = port.to_string();
    let s = Serve::start(&["--udpst-port", &p, "--allow", "10.0.0.0/8"]);
    assert_eq!(
        setup_code(port),
        None,
        "a source outside --allow got a reply"
    );
    drop(s);

    let dir = std::env::temp_dir().join(format!("pathsonde-udpst-keys-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let keys = dir.join("keys");
    // Key id 7: "testkey123-longer" as hex (the file holds secrets as hex).
    let hex: String = b"testkey123-longer"
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    std::fs::write(
        &keys,
        format!("alice 00112233445566778899aabbccddeeff\n7 {hex}\n"),
    )
    .unwrap();
    std::fs::set_permissions(&keys, std::fs::Permissions::from_mode(0o600)).unwrap();
    let port = free_port();
    let p = port.to_string();
    let s = Serve::start(&["--udpst-port", &p, "--key-file", keys.to_str().unwrap()]);
    // Unauthenticated while keys are configured: code 5.
    assert_eq!(setup_code(port), Some(5), "{}", s.log());
    drop(s);
    // ... unless --udpst-open says tests without a key are welcome too.
    let port = free_port();
    let p = port.to_string();
    let s = Serve::start(&[
        "--udpst-port",
        &p,
        "--key-file",
        keys.to_str().unwrap(),
        "--udpst-open",
    ]);
    assert_eq!(setup_code(port), Some(1), "{}", s.log());
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_taken_explicit_port_is_fatal_and_a_taken_default_port_a_warning() {
    let taken = UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let tcp = free_port();
    let out = pathsonde()
        .args([
            "serve",
            "--bind",
            "127.0.0.1",
            "--port",
            &tcp.to_string(),
            "--udpst-port",
            &port.to_string(),
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("UDPST"), "{err}");

    // The default port: hold it if we can; either way serve must run.
    let held = UdpSocket::bind(("127.0.0.1", 24601)).ok();
    let s = Serve::start(&[]);
    std::thread::sleep(Duration::from_millis(200));
    if held.is_some() {
        assert!(
            s.log().contains("warning: not serving UDPST"),
            "{}",
            s.log()
        );
    }
}

#[test]
fn serve_help_lists_the_udpst_flags() {
    let out = pathsonde().args(["serve", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("--udpst-port"), "{help}");
    assert!(help.contains("--no-udpst"), "{help}");
    // The one place that says what a default server exposes.
    assert!(
        help.contains("What a default `pathsonde serve` exposes"),
        "{help}"
    );
    assert!(help.contains("--udpst-open [R]"), "{help}");
}

/// `--udpst-no-jumbo` and `--udpst-traditional-mtu` set the server's sizes,
/// which a client must match (the reference's -j and -T): a default client
/// is refused with code 3 or 11.
#[test]
fn the_servers_datagram_sizes_are_set_by_flags_and_must_match() {
    for (flag, code) in [("--udpst-no-jumbo", 3), ("--udpst-traditional-mtu", 11)] {
        let port = free_port();
        let p = port.to_string();
        let s = Serve::start(&["--udpst-port", &p, flag]);
        assert_eq!(setup_code(port), Some(code), "{flag}: {}", s.log());
    }
}
