//! The UDPST server is safe to leave running (issue 27, docs/security.md
//! 4a), driven with raw PDUs on loopback: tests without a key only where
//! opted into; the one test slot taken by a valid Test Activation, not by a
//! setup anyone can spoof; and downstream load that stops as soon as the
//! client stops showing it receives it — an ICMP error, silence, a Status
//! PDU that claims more than was sent.  The blind spoofer in namespaces is
//! `crates/pathsonde/tests/udpst_spoof.rs`.

use pathsonde_core::BitRate;
use pathsonde_net::udpst::server::UdpstStats;
use pathsonde_net::udpst::{spawn_server, Direction, UdpstServerConfig, UdpstServerHandle};
use pathsonde_wire::udpst::activation::{ActivationResult, Repr as Ta};
use pathsonde_wire::udpst::setup::{Repr as SetupRepr, SetupModifiers};
use pathsonde_wire::udpst::status::Repr as StatusRepr;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::Ordering;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// One server at a time: the load tests count bytes on loopback.
static SERIAL: Mutex<()> = Mutex::new(());

fn open_server(ceiling_mbps: f64) -> UdpstServerHandle {
    let mut c = UdpstServerConfig::new("127.0.0.1:0".parse().unwrap());
    c.open = Some(BitRate::from_mbps(ceiling_mbps));
    spawn_server(c).expect("UDPST server")
}

fn client_socket() -> UdpSocket {
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    s.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    s
}

/// Sends a Setup Request for `mc_ident` and returns the setup answer's
/// result code and test port.
fn setup(s: &UdpSocket, srv: SocketAddr, mc_ident: u16) -> (u8, u16) {
    let req = SetupRepr::request(
        0,
        1,
        mc_ident,
        Default::default(),
        SetupModifiers::new(true, false),
    );
    s.send_to(&req.to_bytes(), srv).unwrap();
    let mut b = [0u8; 256];
    loop {
        let (n, from) = s.recv_from(&mut b).expect("a setup answer");
        if from == srv {
            let r = SetupRepr::decode(&b[..n]).unwrap();
            return (b[9], r.test_port);
        }
    }
}

/// A downstream activation at a fixed row (`row` ≈ Mb/s below 1 Gb/s).
fn downstream_at(row: u16) -> Ta {
    let mut ta = Ta::request(Direction::Downstream);
    ta.test_duration_s = 5;
    ta.sr_index = Some(row);
    ta
}

/// Activates on `port` and returns the answer's result.
fn activate(s: &UdpSocket, port: u16, ta: &Ta) -> ActivationResult {
    let to: SocketAddr = ([127, 0, 0, 1], port).into();
    s.send_to(&ta.to_bytes(), to).unwrap();
    let mut b = [0u8; 256];
    let deadline = Instant::now() + Duration::from_secs(3);
    while Instant::now() < deadline {
        if let Ok((n, from)) = s.recv_from(&mut b) {
            if from == to && n == 104 {
                return Ta::decode(&b[..n]).unwrap().result;
            }
        }
    }
    panic!("no activation answer");
}

/// Bytes of load that reach `s` from `port` over `for_`.
fn load_bytes(s: &UdpSocket, port: u16, for_: Duration) -> u64 {
    let mut b = vec![0u8; 65536];
    let mut total = 0;
    let end = Instant::now() + for_;
    while Instant::now() < end {
        if let Ok((n, from)) = s.recv_from(&mut b) {
            if from.port() == port && n >= 32 && b[0..2] == [0xBE, 0xEF] {
                total += n as u64;
            }
        }
    }
    total
}

fn wait_for(stats: &UdpstStats, what: impl Fn(&UdpstStats) -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if what(stats) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}

/// Defaults: a setup without a key gets code 5 and nothing else — no test
/// port, no Null Request.  A restricted allow list or `open` opts in.
#[test]
fn tests_without_a_key_are_refused_by_default() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let srv = spawn_server(UdpstServerConfig::new("127.0.0.1:0".parse().unwrap())).unwrap();
    let s = client_socket();
    let (code, port) = setup(&s, srv.local_addr(), 0x4141);
    assert_eq!((code, port), (5, 0));
    let mut b = [0u8; 256];
    assert!(
        s.recv_from(&mut b).is_err(),
        "something followed the refusal"
    );
    srv.stop();

    let mut c = UdpstServerConfig::new("127.0.0.1:0".parse().unwrap());
    c.allow = pathsonde_net::allow::AllowList::parse("127.0.0.0/8").unwrap();
    let srv = spawn_server(c).unwrap();
    assert_eq!(setup(&client_socket(), srv.local_addr(), 0x4142).0, 1);
    srv.stop();
}

/// A setup that is never activated (what a spoofer can make) does not hold
/// the slot: another test sets up and activates beside it, and the first
/// one's late activation is refused (code 2) while the other runs.
#[test]
fn the_slot_is_taken_by_an_activation_not_a_setup() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let srv = open_server(50.0);
    let stats = srv.stats();
    let (squatter, real) = (client_socket(), client_socket());
    let (code, squat_port) = setup(&squatter, srv.local_addr(), 0x1111);
    assert_eq!(code, 1);
    let (code, real_port) = setup(&real, srv.local_addr(), 0x2222);
    assert_eq!(
        code, 1,
        "a setup that was never activated kept a real client out"
    );
    assert_eq!(
        activate(&real, real_port, &downstream_at(5)),
        ActivationResult::Ack
    );
    assert_eq!(
        activate(&squatter, squat_port, &downstream_at(5)),
        ActivationResult::Rejected
    );
    // While the test runs, a new setup of another test is refused at once.
    assert_eq!(setup(&client_socket(), srv.local_addr(), 0x3333).0, 13);
    assert_eq!(stats.tests_activated.load(Ordering::Relaxed), 1);
    srv.stop();
}

/// A client whose socket is gone (its host answers the load with ICMP port
/// unreachable) stops the load at once, not after the 3 s watchdog.
#[test]
fn load_stops_when_the_clients_host_refuses_it() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let srv = open_server(50.0);
    let stats = srv.stats();
    let s = client_socket();
    let (_, port) = setup(&s, srv.local_addr(), 0x5151);
    assert_eq!(
        activate(&s, port, &downstream_at(20)),
        ActivationResult::Ack
    );
    assert!(
        load_bytes(&s, port, Duration::from_millis(200)) > 0,
        "no load"
    );
    drop(s);
    assert!(
        wait_for(&stats, |st| st.load_stopped.load(Ordering::Relaxed) == 1),
        "the load went on after ICMP port unreachable"
    );
    srv.stop();
}

/// No Status PDU: the load pauses after a quarter second instead of
/// running until the 3 s watchdog.  Over 2.5 s at a fixed 50 Mb/s row,
/// without the pause ~15 MB would arrive; the bound allows one second's
/// worth (4× the pause), so a loaded machine can only make it pass more
/// easily, never fail it by being slow.
#[test]
fn load_pauses_when_status_pdus_stop() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let srv = open_server(50.0);
    let s = client_socket();
    s.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
    let (_, port) = setup(&s, srv.local_addr(), 0x6161);
    assert_eq!(
        activate(&s, port, &downstream_at(50)),
        ActivationResult::Ack
    );
    let got = load_bytes(&s, port, Duration::from_millis(2500));
    let one_second = 50e6 / 8.0;
    println!("{got} bytes of load in 2.5 s without a Status PDU");
    assert!(got > 0, "no load at all: the test would pass vacuously");
    assert!(
        (got as f64) < one_second,
        "{got} bytes: the load did not pause"
    );
    srv.stop();
}

/// A Status PDU claiming more received bytes than were sent is a forgery
/// (a blind spoofer guessing counts): the load ends at once.
#[test]
fn a_status_that_claims_more_than_was_sent_ends_the_load() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let srv = open_server(50.0);
    let stats = srv.stats();
    let s = client_socket();
    s.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
    let (_, port) = setup(&s, srv.local_addr(), 0x7171);
    assert_eq!(
        activate(&s, port, &downstream_at(10)),
        ActivationResult::Ack
    );
    let to: SocketAddr = ([127, 0, 0, 1], port).into();
    // An honest status first: the load goes on.
    let honest = StatusRepr {
        status_seq: 1,
        ti_rx_datagrams: 1,
        ti_rx_bytes: 1000,
        ..StatusRepr::default()
    };
    s.send_to(&honest.to_bytes(), to).unwrap();
    assert!(load_bytes(&s, port, Duration::from_millis(200)) > 0);
    assert_eq!(stats.load_stopped.load(Ordering::Relaxed), 0);
    let forged = StatusRepr {
        status_seq: 2,
        ti_rx_datagrams: 1_000_000,
        ti_rx_bytes: 1_000_000_000,
        ..StatusRepr::default()
    };
    s.send_to(&forged.to_bytes(), to).unwrap();
    assert!(
        wait_for(&stats, |st| st.load_stopped.load(Ordering::Relaxed) == 1),
        "a forged status was believed"
    );
    // Stragglers in flight aside, nothing more comes.
    let _ = load_bytes(&s, port, Duration::from_millis(100));
    assert_eq!(load_bytes(&s, port, Duration::from_millis(500)), 0);
    srv.stop();
}

/// `--max-bytes` binds UDPST too: a downstream test stops gracefully (a
/// stop-marked Load PDU) once it has sent its bytes, long before its
/// duration, and no more testing load than that arrives.
#[test]
fn a_test_stops_at_its_byte_limit() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut c = UdpstServerConfig::new("127.0.0.1:0".parse().unwrap());
    c.open = Some(BitRate::from_mbps(50.0));
    c.max_bytes = 2_000_000;
    let srv = spawn_server(c).unwrap();
    let s = client_socket();
    s.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
    let (_, port) = setup(&s, srv.local_addr(), 0x8181);
    assert_eq!(
        activate(&s, port, &downstream_at(50)),
        ActivationResult::Ack
    );
    let to: SocketAddr = ([127, 0, 0, 1], port).into();
    let (mut testing, mut stopped) = (0u64, false);
    let mut seq = 0;
    let mut next_status = Instant::now();
    let mut b = vec![0u8; 65536];
    let end = Instant::now() + Duration::from_secs(5);
    while Instant::now() < end && !stopped {
        if Instant::now() >= next_status {
            // Honest statuses keep the load going (they claim nothing).
            seq += 1;
            let st = StatusRepr {
                status_seq: seq,
                ..StatusRepr::default()
            };
            s.send_to(&st.to_bytes(), to).unwrap();
            next_status += Duration::from_millis(50);
        }
        if let Ok((n, from)) = s.recv_from(&mut b) {
            if from.port() == port && n >= 32 && b[0..2] == [0xBE, 0xEF] {
                if b[2] == 0 {
                    testing += n as u64;
                } else {
                    stopped = true;
                }
            }
        }
    }
    println!("{testing} bytes of testing load under a 2,000,000-byte limit; stopped: {stopped}");
    assert!(stopped, "the test did not stop at its byte limit");
    assert!(testing > 1_000_000, "{testing} bytes: the load hardly ran");
    assert!(
        testing <= 2_000_000 + 64_000,
        "{testing} bytes: past the limit"
    );
    srv.stop();
}
