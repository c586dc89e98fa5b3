//! A blind spoofer against `pathsonde serve`'s UDPST listener, in network
//! namespaces (issue 27; docs/security.md, 4a).  Three namespaces: the
//! server, a victim, and a spoofer that sends with the victim's address but
//! is routed so it never sees the server's answers.  The victim counts every
//! UDP byte the server sends it (a raw socket: what reached its host,
//! listening or not).
//!
//! - Default server: the victim gets at most the setup refusals' bytes,
//!   whatever the spoofer sends (setups, then a Test Activation to every
//!   port of the server's ephemeral range, as a port guesser would).
//! - `--udpst-open 10M`: the port guesser's sweep runs into a tripwire
//!   port and its setup ends; a spoofer who guessed right, with the
//!   victim's port closed (its host answers with ICMP), sees the load stop
//!   at the victim's first ICMP error.
//! - `--udpst-open 10M`, a socket open on the victim's port (no ICMP), and
//!   a spoofer that guessed right and keeps faking Status PDUs: at most the
//!   documented ceiling for the test's duration, its grace and the 3 s stop.
//!
//! Needs root; under `CI` a missing root is a failure.  Runs under the lab
//! lock; the namespaces have unique names and are deleted however it ends.

use pathsonde_lab::exclusive::is_root;
use pathsonde_lab::netns;
use pathsonde_wire::udpst::activation::{Direction, Repr as Ta};
use pathsonde_wire::udpst::setup::{Repr as SetupRepr, SetupModifiers};
use pathsonde_wire::udpst::status::Repr as StatusRepr;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, UdpSocket};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const SERVER_VICTIM_SIDE: Ipv4Addr = Ipv4Addr::new(10, 77, 1, 1);
const VICTIM: Ipv4Addr = Ipv4Addr::new(10, 77, 1, 2);
const SERVER_SPOOFER_SIDE: Ipv4Addr = Ipv4Addr::new(10, 77, 2, 1);
const UDPST_PORT: u16 = 24601;
/// The victim's port the spoofed requests name.
const VICTIM_PORT: u16 = 40404;

/// The three namespaces and their links; deleted on drop.
struct Lab {
    prefix: String,
}

impl Lab {
    fn ns(&self, role: &str) -> String {
        format!("{}-{role}", self.prefix)
    }

    fn build() -> Lab {
        let lab = Lab {
            prefix: format!("pathsonde-spoof{}", std::process::id()),
        };
        let (srv, vic, spf) = (lab.ns("srv"), lab.ns("vic"), lab.ns("spf"));
        for ns in [&srv, &vic, &spf] {
            netns::add(ns).expect("adding a namespace");
            netns::exec_in(ns, "ip", &["link", "set", "lo", "up"]).unwrap();
        }
        let pid = std::process::id() % 100_000;
        let (sv, vs) = (format!("sv{pid}"), format!("vs{pid}"));
        let (sp, ps) = (format!("sp{pid}"), format!("ps{pid}"));
        for (a, an, b, bn) in [(&sv, &srv, &vs, &vic), (&sp, &srv, &ps, &spf)] {
            netns::ip(&[
                "link", "add", a, "netns", an, "type", "veth", "peer", "name", b, "netns", bn,
            ])
            .unwrap();
        }
        let ex = |ns: &str, args: &[&str]| netns::exec_in(ns, "ip", args).unwrap();
        ex(&srv, &["addr", "add", "10.77.1.1/24", "dev", &sv]);
        ex(&srv, &["addr", "add", "10.77.2.1/24", "dev", &sp]);
        ex(&vic, &["addr", "add", "10.77.1.2/24", "dev", &vs]);
        ex(&spf, &["addr", "add", "10.77.2.2/24", "dev", &ps]);
        // The spoofer may send from the victim's address; the server's
        // route to that address still leads to the victim.
        ex(&spf, &["addr", "add", "10.77.1.2/32", "dev", &ps]);
        for (ns, dev) in [(&srv, &sv), (&srv, &sp), (&vic, &vs), (&spf, &ps)] {
            ex(ns, &["link", "set", dev, "up"]);
        }
        ex(&vic, &["route", "add", "default", "via", "10.77.1.1"]);
        ex(&spf, &["route", "add", "default", "via", "10.77.2.1"]);
        // No reverse-path filter at the server: a spoofed source arriving on
        // the "wrong" link is exactly what this test is about.
        for key in ["all", "default", sv.as_str(), sp.as_str()] {
            netns::sysctl(&srv, &format!("net.ipv4.conf.{key}.rp_filter"), "0").unwrap();
        }
        lab
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        for role in ["srv", "vic", "spf"] {
            let _ = netns::delete(&self.ns(role));
        }
    }
}

/// `pathsonde serve` in the server namespace, its stderr in a file; killed
/// on drop.
struct Serve {
    child: Child,
    log: std::path::PathBuf,
}

impl Serve {
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.log);
    }
}

fn serve(lab: &Lab, extra: &[&str]) -> Serve {
    let bin = assert_cmd::cargo::cargo_bin("pathsonde");
    let mut args = vec![
        "netns".to_string(),
        "exec".into(),
        lab.ns("srv"),
        bin.display().to_string(),
        "serve".into(),
        "--bind".into(),
        "0.0.0.0".into(),
        "--port".into(),
        "4000".into(),
        "--udpst-port".into(),
        UDPST_PORT.to_string(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    let log = std::env::temp_dir().join(format!(
        "pathsonde-spoof-{}-{}.log",
        std::process::id(),
        next_log_number()
    ));
    let child = Command::new("ip")
        .args(&args)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let s = Serve { child, log };
    // Up when its UDPST socket is bound.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let out = netns::exec_in(&lab.ns("srv"), "ss", &["-uln"]).unwrap_or_default();
        if out.contains(&format!(":{UDPST_PORT}")) {
            return s;
        }
        assert!(Instant::now() < deadline, "serve did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A different number per call: with the process id, a log name no other
/// server of this run or another test process uses.
fn next_log_number() -> u64 {
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::SeqCst)
}

/// Counts the UDP payload bytes the server's addresses send into the victim
/// namespace, listening socket or not, until stopped.
struct VictimCounter {
    bytes: Arc<AtomicU64>,
    /// The test port of the last accepted setup answer that reached the
    /// victim (0: none): the oracle that plays a spoofer who guessed right.
    test_port: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<pathsonde_lab::Result<()>>>,
}

impl VictimCounter {
    fn start(lab: &Lab) -> VictimCounter {
        let bytes = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let test_port = Arc::new(AtomicU64::new(0));
        let (b, st, tp) = (bytes.clone(), stop.clone(), test_port.clone());
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let thread = netns::spawn_in(&lab.ns("vic"), "victim-counter", move || {
            // SAFETY: plain socket(2); the descriptor is closed below.
            let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_RAW, libc::IPPROTO_UDP) };
            assert!(fd >= 0, "raw socket: {}", std::io::Error::last_os_error());
            let tv = libc::timeval {
                tv_sec: 0,
                tv_usec: 50_000,
            };
            // SAFETY: `tv` is a valid timeval of the size passed.
            unsafe {
                libc::setsockopt(
                    fd,
                    libc::SOL_SOCKET,
                    libc::SO_RCVTIMEO,
                    (&tv as *const libc::timeval).cast(),
                    std::mem::size_of::<libc::timeval>() as u32,
                )
            };
            let _ = ready_tx.send(());
            let mut buf = vec![0u8; 70_000];
            while !st.load(Ordering::SeqCst) {
                // SAFETY: `buf` is writable for its length.
                let n = unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), 0) };
                if n < 28 {
                    continue;
                }
                let n = n as usize;
                let src = Ipv4Addr::new(buf[12], buf[13], buf[14], buf[15]);
                if src != SERVER_VICTIM_SIDE && src != SERVER_SPOOFER_SIDE {
                    continue;
                }
                let ihl = usize::from(buf[0] & 0x0f) * 4;
                let udp_payload = n.saturating_sub(ihl + 8);
                b.fetch_add(udp_payload as u64, Ordering::SeqCst);
                let p = &buf[ihl + 8..n];
                let src_port = u16::from_be_bytes([buf[ihl], buf[ihl + 1]]);
                if src_port == UDPST_PORT && p.len() == 56 && p[9] == 1 {
                    tp.store(
                        u64::from(u16::from_be_bytes([p[12], p[13]])),
                        Ordering::SeqCst,
                    );
                }
            }
            // SAFETY: closing the descriptor opened above.
            unsafe { libc::close(fd) };
            Ok(())
        })
        .unwrap();
        ready_rx
            .recv_timeout(Duration::from_secs(5))
            .expect("the victim's counter started");
        VictimCounter {
            bytes,
            test_port,
            stop,
            thread: Some(thread),
        }
    }

    fn test_port(&self) -> u16 {
        self.test_port.load(Ordering::SeqCst) as u16
    }

    fn finish(mut self) -> u64 {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.bytes.load(Ordering::SeqCst)
    }
}

/// A socket in the spoofer namespace bound to the victim's address.
fn spoofer_socket(lab: &Lab) -> UdpSocket {
    netns::run_in(&lab.ns("spf"), || {
        let s = UdpSocket::bind(SocketAddrV4::new(VICTIM, VICTIM_PORT)).unwrap();
        Ok(s)
    })
    .unwrap()
}

fn setup_request(mc_ident: u16) -> Vec<u8> {
    SetupRepr::request(
        0,
        1,
        mc_ident,
        Default::default(),
        SetupModifiers::new(true, false),
    )
    .to_bytes()
}

/// A downstream Test Activation for a 5 s test at the highest row (the
/// server caps it at its ceiling).
fn activation() -> Vec<u8> {
    let mut ta = Ta::request(Direction::Downstream);
    ta.test_duration_s = 5;
    ta.sr_index = Some(1000);
    ta.to_bytes()
}

/// The server namespace's ephemeral port range (where test ports come from).
fn ephemeral_range(lab: &Lab) -> (u16, u16) {
    let out = netns::exec_in(
        &lab.ns("srv"),
        "cat",
        &["/proc/sys/net/ipv4/ip_local_port_range"],
    )
    .unwrap();
    let v: Vec<u16> = out
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    (v[0], v[1])
}

/// What a blind port guesser sends: `setups` Setup Requests "from" the
/// victim, then a Test Activation to every port of the ephemeral range.
fn guess_ports(lab: &Lab, spoofer: &UdpSocket, setups: usize) {
    let server: SocketAddr = (SERVER_SPOOFER_SIDE, UDPST_PORT).into();
    for i in 0..setups {
        let _ = spoofer.send_to(&setup_request(0x5000 + i as u16), server);
        std::thread::sleep(Duration::from_millis(2));
    }
    let ta = activation();
    let (lo, hi) = ephemeral_range(lab);
    for port in lo..=hi {
        let _ = spoofer.send_to(&ta, (SERVER_SPOOFER_SIDE, port));
    }
}

fn prerequisites() -> bool {
    if is_root() {
        return true;
    }
    pathsonde_lab::exclusive::cannot_run("the spoofing test needs root (network namespaces)");
    false
}

#[test]
fn a_blind_spoofer_cannot_aim_the_udpst_server_at_a_victim() {
    if !prerequisites() {
        return;
    }
    let _lock = pathsonde_lab::exclusive::lab_lock().expect("taking the lab lock");
    let lab = Lab::build();
    let setup_answer = 56u64;
    // What the victim received per case, for docs/security.md's table
    // (scripts/spoof_table.py writes it from the file this test stores
    // when PATHSONDE_SPOOF_OUT names one).
    let mut figures = serde_json::Map::new();

    // 1. The default server: refusals only.
    {
        let _s = serve(&lab, &[]);
        let victim = VictimCounter::start(&lab);
        let spoofer = spoofer_socket(&lab);
        guess_ports(&lab, &spoofer, 20);
        std::thread::sleep(Duration::from_secs(2));
        let got = victim.finish();
        println!(
            "default server: the victim got {got} bytes of UDP (20 setups, every port guessed)"
        );
        figures.insert("default".into(), got.into());
        assert!(
            got >= setup_answer,
            "the victim saw no refusal: the test sees nothing"
        );
        assert!(
            got <= 20 * setup_answer,
            "{got} bytes: more than the setup answers"
        );
    }

    // 2a. Open: the port guesser's sweep runs into a tripwire port long
    // before it can matter (32 of them among the range; docs/security.md,
    // 4a): its setup, and any test it did activate, end.
    {
        let s = serve(&lab, &["--udpst-open", "10M"]);
        let victim = VictimCounter::start(&lab);
        let spoofer = spoofer_socket(&lab);
        guess_ports(&lab, &spoofer, 1);
        std::thread::sleep(Duration::from_secs(4));
        let got = victim.finish();
        println!("--udpst-open 10M, a sweep: the victim got {got} bytes of UDP");
        figures.insert("open_sweep".into(), got.into());
        assert!(
            s.log().contains("its address swept the server's ports"),
            "the sweep was not caught: {}",
            s.log()
        );
        // The setup answer and Null Request, and at most a TA Response and
        // one status interval's load if the sweep hit the test port first.
        assert!(got <= 56 + 48 + 104 + 64_000, "{got} bytes");
    }

    // 2b. Open, the victim's port closed, and a spoofer that guessed right
    // (told the port) and fakes Status PDUs: the victim host's ICMP error
    // stops the load.  Linux sends those at most one a second per peer
    // after a burst of 6 (icmp_ratelimit), and step 1's refusals spent that
    // burst: so up to a second of the ceiling, against the 8.5 s the test
    // would otherwise run.
    {
        let s = serve(&lab, &["--udpst-open", "10M"]);
        let victim = VictimCounter::start(&lab);
        let spoofer = spoofer_socket(&lab);
        spoofer
            .send_to(&setup_request(0x5555), (SERVER_SPOOFER_SIDE, UDPST_PORT))
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(3);
        while victim.test_port() == 0 {
            assert!(
                Instant::now() < deadline,
                "no setup answer reached the victim"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        spoofer
            .send_to(&activation(), (SERVER_SPOOFER_SIDE, victim.test_port()))
            .unwrap();
        // The activated test socket is connected to the victim, so it takes
        // datagrams only on the address that route chose: the victim side.
        let test: SocketAddr = (SERVER_VICTIM_SIDE, victim.test_port()).into();
        let t0 = Instant::now();
        let mut seq = 0;
        while t0.elapsed() < Duration::from_secs(4) {
            seq += 1;
            let st = StatusRepr {
                status_seq: seq,
                ..StatusRepr::default()
            };
            let _ = spoofer.send_to(&st.to_bytes(), test);
            std::thread::sleep(Duration::from_millis(50));
        }
        let got = victim.finish();
        let one_second = 10e6 / 8.0;
        println!(
            "--udpst-open 10M, victim port closed: the victim got {got} bytes of UDP ({:.2} s of the ceiling)",
            got as f64 / one_second
        );
        figures.insert("open_port_closed".into(), got.into());
        assert!(
            s.log().contains("test of 5 s activated"),
            "the right guess did not activate a test: {}",
            s.log()
        );
        assert!(
            s.log()
                .contains("load stopped: the client's host refused it"),
            "the ICMP error did not stop the load: {}",
            s.log()
        );
        assert!(
            (got as f64) <= 56.0 + 48.0 + 104.0 + 1.5 * one_second,
            "{got} bytes: the load went on after the ICMP error"
        );
    }

    // 3. Open, a socket on the victim's port (no ICMP), and a spoofer that
    // guessed right and fakes Status PDUs: bounded by the ceiling.
    {
        let _s = serve(&lab, &["--udpst-open", "10M"]);
        let victim = VictimCounter::start(&lab);
        let listener = netns::run_in(&lab.ns("vic"), || {
            let s = UdpSocket::bind(SocketAddrV4::new(VICTIM, VICTIM_PORT)).unwrap();
            s.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
            Ok(s)
        })
        .unwrap();
        let spoofer = spoofer_socket(&lab);
        spoofer
            .send_to(&setup_request(0x6001), (SERVER_SPOOFER_SIDE, UDPST_PORT))
            .unwrap();
        // The oracle: the victim's socket holds the answer naming the test
        // port; handing it over plays a spoofer whose guess was right.
        let mut buf = vec![0u8; 65536];
        let deadline = Instant::now() + Duration::from_secs(3);
        let port = loop {
            assert!(
                Instant::now() < deadline,
                "no setup answer reached the victim"
            );
            if let Ok((n, from)) = listener.recv_from(&mut buf) {
                if n == 56 && from.port() == UDPST_PORT {
                    break SetupRepr::decode(&buf[..n]).unwrap().test_port;
                }
            }
        };
        spoofer
            .send_to(&activation(), (SERVER_SPOOFER_SIDE, port))
            .unwrap();
        let test: SocketAddr = (SERVER_VICTIM_SIDE, port).into();
        let t0 = Instant::now();
        let mut seq = 0;
        while t0.elapsed() < Duration::from_secs(10) {
            seq += 1;
            let st = StatusRepr {
                status_seq: seq,
                ..StatusRepr::default()
            };
            let _ = spoofer.send_to(&st.to_bytes(), test);
            // Drain the victim's socket so it never overflows into ICMP-less drops.
            while listener.recv_from(&mut buf).is_ok() {}
        }
        let got = victim.finish();
        // The documented bound: the ceiling for the test's duration, its
        // 0.5 s grace, and the stop state, which sends stop-marked load
        // until the client confirms or the 3 s watchdog ends it (spec
        // §11.2; a spoofer never confirms).
        let ceiling_bytes = 10e6 / 8.0 * (5.0 + 0.5 + 3.0);
        println!(
            "--udpst-open 10M, a right guess and faked statuses: the victim got {got} bytes ({:.0} % of the ceiling's {ceiling_bytes:.0})",
            got as f64 / ceiling_bytes * 100.0
        );
        figures.insert("open_port_listening".into(), got.into());
        figures.insert("bound_bytes".into(), (ceiling_bytes as u64).into());
        assert!(
            got as f64 > 0.1 * ceiling_bytes,
            "{got} bytes: the spoofer never got load going, so the bound was not tested"
        );
        assert!(
            (got as f64) <= ceiling_bytes * 1.05 + 10_000.0,
            "{got} bytes: above the documented ceiling"
        );
    }
    if let Ok(out) = std::env::var("PATHSONDE_SPOOF_OUT") {
        let text = serde_json::to_string_pretty(&serde_json::Value::Object(figures)).unwrap();
        std::fs::write(&out, text + "\n").expect("writing PATHSONDE_SPOOF_OUT");
    }
}
