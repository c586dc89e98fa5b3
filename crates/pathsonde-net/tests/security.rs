//! The server's defences over loopback (docs/security.md): authentication,
//! the allow list, no reflection to spoofed sources, and hostile clients —
//! garbage, slow, 200 at once — while a real client still measures.

use pathsonde_core::{
    BitRate, Bytes, DurationNs, Estimate, Method, Observation, ProbeCost, ProbePlan, TrainSpec,
};
use pathsonde_net::allow::AllowList;
use pathsonde_net::auth::{Key, KeyRing};
use pathsonde_net::client::{measure, Client, ClientConfig};
use pathsonde_net::limits::Limits;
use pathsonde_net::{NetError, Server, ServerConfig, ServerHandle};
use pathsonde_wire::control::{decode_frame, encode_frame, ClientMessage, ServerMessage};
use pathsonde_wire::handshake::{ClientHello, HelloStatus, ServerHello, HELLO_LEN};
use pathsonde_wire::probe::{ProbeHeader, ProbeKind};
use pathsonde_wire::PROTOCOL_VERSION;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

fn server_with(f: impl FnOnce(&mut ServerConfig)) -> ServerHandle {
    let mut cfg = ServerConfig::new(SocketAddr::from(([127, 0, 0, 1], 0)));
    cfg.host_report = false;
    f(&mut cfg);
    Server::bind(cfg).unwrap().spawn().unwrap()
}

fn key(id: &str, byte: u8) -> Key {
    Key::new(id, &[byte; 32]).unwrap()
}

/// Sends a fixed list of trains; the estimate is the last train's rate.
struct FixedTrains {
    plans: Vec<TrainSpec>,
    seen: Vec<Observation>,
}

impl Method for FixedTrains {
    fn name(&self) -> &'static str {
        "fixed"
    }
    fn next_plan(&mut self) -> ProbePlan {
        match self.plans.get(self.seen.len()) {
            Some(s) => ProbePlan::Train(*s),
            None => ProbePlan::Done,
        }
    }
    fn observe(&mut self, obs: &Observation) {
        self.seen.push(obs.clone());
    }
    fn estimate(&self) -> Option<Estimate> {
        let last = self.seen.last()?;
        Some(Estimate {
            stopped: None,
            method: pathsonde_core::methods::registry::MethodName::Fac2,
            available: last.spec.rate,
            low: last.spec.rate,
            high: None,
            capacity: None,
            cross_traffic: None,
            cost: ProbeCost {
                bytes: Bytes(0),
                packets: 0,
                trains: self.seen.len() as u32,
            },
            probe_span: DurationNs::ZERO,
            converged: true,
            host_limited: None,
            trains: vec![],
            notes: vec![],
            coalescing: None,
            host_evidence: None,
        })
    }
}

fn trains(n: usize, packets: u32) -> FixedTrains {
    FixedTrains {
        plans: vec![
            TrainSpec {
                packet_size: Bytes(1200),
                packets_per_car: 1,
                cars: packets,
                rate: BitRate::from_mbps(50.0),
                idle_before: DurationNs::ZERO,
            };
            n
        ],
        seen: vec![],
    }
}

/// A measurement that must succeed and see every packet (loopback at
/// 50 Mb/s loses nothing).
fn measure_ok(cfg: ClientConfig) {
    let mut m = trains(3, 50);
    let run = measure(cfg, &mut m, &mut |_| {});
    let run = run.unwrap_or_else(|e| panic!("the real client failed: {e}"));
    assert_eq!(m.seen.len(), 3);
    for o in &m.seen {
        assert_eq!(o.received_packets(), 50, "lost {}", o.lost_packets());
    }
    assert!(run.rtt_echo.is_some(), "echoes answered");
}

#[test]
fn the_right_key_measures_and_a_wrong_or_missing_key_is_refused() {
    let ring = KeyRing::new(vec![key("alice", 1), key("bob", 2)]).unwrap();
    let server = server_with(|c| c.keys = Some(ring));
    let mut cfg = ClientConfig::new(server.local_addr());
    cfg.key = Some(key("bob", 2));
    measure_ok(cfg.clone());

    cfg.key = Some(key("bob", 3));
    let e = Client::connect(cfg.clone())
        .err()
        .expect("wrong key refused");
    assert!(
        matches!(&e, NetError::Auth(m) if m.contains("wrong key for key id 'bob'")),
        "{e}"
    );
    cfg.key = Some(key("carol", 2));
    let e = Client::connect(cfg.clone())
        .err()
        .expect("unknown id refused");
    assert!(
        matches!(&e, NetError::Auth(m) if m.contains("unknown key id 'carol'")),
        "{e}"
    );
    cfg.key = None;
    let e = Client::connect(cfg.clone()).err().expect("no key refused");
    assert!(
        matches!(&e, NetError::Auth(m) if m.contains("--key-file")),
        "{e}"
    );
    // Failed attempts hold nothing: the right key still measures at once.
    cfg.key = Some(key("alice", 1));
    measure_ok(cfg);
    server.stop().unwrap();
}

#[test]
fn a_client_with_a_key_measures_against_a_server_without_auth() {
    let server = server_with(|_| {});
    let mut cfg = ClientConfig::new(server.local_addr());
    cfg.key = Some(key("alice", 1));
    measure_ok(cfg);
    server.stop().unwrap();
}

#[test]
fn an_address_outside_the_allow_list_is_refused() {
    let server = server_with(|c| c.allow = AllowList::parse("10.0.0.0/8").unwrap());
    let e = Client::connect(ClientConfig::new(server.local_addr()))
        .err()
        .unwrap();
    assert!(matches!(e, NetError::Refused { .. }), "{e}");
    assert!(e.to_string().contains("--allow"), "{e}");
    server.stop().unwrap();
    let server = server_with(|c| c.allow = AllowList::parse("127.0.0.0/8").unwrap());
    measure_ok(ClientConfig::new(server.local_addr()));
    server.stop().unwrap();
}

/// Opens a session by hand and returns the control stream, session id and
/// probe port.
fn open_session(addr: SocketAddr) -> (TcpStream, u64, u16) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(
        &ClientHello {
            version: PROTOCOL_VERSION,
        }
        .encode(),
    )
    .unwrap();
    let mut hello = [0u8; HELLO_LEN];
    s.read_exact(&mut hello).unwrap();
    assert_eq!(ServerHello::decode(&hello).unwrap().status, HelloStatus::Ok);
    s.write_all(
        &encode_frame(&ClientMessage::OpenSession {
            software: "test".into(),
        })
        .unwrap(),
    )
    .unwrap();
    match read_msg(&mut s) {
        Some(ServerMessage::SessionOpened {
            session,
            probe_port,
            ..
        }) => (s, session, probe_port),
        other => panic!("expected SessionOpened, got {other:?}"),
    }
}

fn read_msg(s: &mut TcpStream) -> Option<ServerMessage> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Ok(Some((m, _))) = decode_frame::<ServerMessage>(&buf) {
            return Some(m);
        }
        let n = s.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

fn echo_request(session: u64, seq: u32, len: usize) -> Vec<u8> {
    ProbeHeader {
        kind: ProbeKind::EchoRequest,
        session,
        train: u32::MAX,
        car: 0,
        seq,
        send_ns: 1,
    }
    .encode(len)
    .unwrap()
}

/// Counts the datagrams `sock` receives within `wait`.
fn datagrams_back(sock: &UdpSocket, wait: Duration) -> usize {
    sock.set_read_timeout(Some(Duration::from_millis(20)))
        .unwrap();
    let mut buf = [0u8; 2048];
    let mut n = 0;
    let until = Instant::now() + wait;
    while Instant::now() < until {
        if sock.recv_from(&mut buf).is_ok() {
            n += 1;
        }
    }
    n
}

#[test]
fn a_spoofed_source_gets_no_probe_traffic_back() {
    let server = server_with(|_| {});
    let (ctrl, session, probe_port) = open_session(server.local_addr());
    let probe = SocketAddr::from(([127, 0, 0, 1], probe_port));

    // The real client's probe socket: its echo comes back (so this test
    // can see traffic when there is some).
    let client = UdpSocket::bind("127.0.0.1:0").unwrap();
    client
        .send_to(&echo_request(session, 0, 64), probe)
        .unwrap();
    assert_eq!(datagrams_back(&client, Duration::from_millis(300)), 1);

    // A victim at another address: packets "from" it — even carrying the
    // right session id, of every kind and size — get nothing back.
    let victim = UdpSocket::bind("127.0.0.2:0").unwrap();
    for seq in 0..50 {
        victim
            .send_to(&echo_request(session, seq, 64), probe)
            .unwrap();
        victim
            .send_to(&echo_request(session, seq, 1400), probe)
            .unwrap();
        victim
            .send_to(&echo_request(0x1234, seq, 64), probe)
            .unwrap();
        victim.send_to(b"GET / HTTP/1.0\r\n\r\n", probe).unwrap();
    }
    assert_eq!(datagrams_back(&victim, Duration::from_millis(500)), 0);

    // Another port on the client's own address, once the session's source
    // is known: nothing either.
    let same_host = UdpSocket::bind("127.0.0.1:0").unwrap();
    for seq in 0..20 {
        same_host
            .send_to(&echo_request(session, seq, 64), probe)
            .unwrap();
    }
    assert_eq!(datagrams_back(&same_host, Duration::from_millis(300)), 0);

    // Oversized echo requests from the real source are not answered (a
    // reply is small and never larger than its request).
    client
        .send_to(&echo_request(session, 1, 1400), probe)
        .unwrap();
    assert_eq!(datagrams_back(&client, Duration::from_millis(300)), 0);

    // With no session at all, nobody gets anything.
    drop(ctrl);
    std::thread::sleep(Duration::from_millis(200));
    let stranger = UdpSocket::bind("127.0.0.3:0").unwrap();
    for seq in 0..20 {
        stranger
            .send_to(&echo_request(session, seq, 64), probe)
            .unwrap();
        client
            .send_to(&echo_request(session, seq, 64), probe)
            .unwrap();
    }
    assert_eq!(datagrams_back(&stranger, Duration::from_millis(300)), 0);
    assert_eq!(datagrams_back(&client, Duration::from_millis(100)), 0);
    server.stop().unwrap();
}

#[test]
fn garbage_and_oversized_frames_end_the_connection_and_the_server_serves_on() {
    let server = server_with(|_| {});
    let addr = server.local_addr();
    // Not a pathsonde hello.
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut sink = Vec::new();
    let _ = s.read_to_end(&mut sink);
    // A valid hello, then a frame that claims 4 MiB (above the control limit).
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    s.write_all(
        &ClientHello {
            version: PROTOCOL_VERSION,
        }
        .encode(),
    )
    .unwrap();
    s.write_all(&(4u32 << 20).to_be_bytes()).unwrap();
    let mut hello = [0u8; HELLO_LEN];
    s.read_exact(&mut hello).unwrap();
    match read_msg(&mut s) {
        Some(ServerMessage::Error { message, .. }) => {
            assert!(message.contains("exceeds the limit"), "{message}")
        }
        other => panic!("expected an error, got {other:?}"),
    }
    // A valid session, then random bytes as a control frame.
    let (mut ctrl, _, _) = open_session(addr);
    ctrl.write_all(&[0, 0, 0, 9, 0xff, 0xfe, 0x13, 0x37, 0, 1, 2, 3, 4])
        .unwrap();
    match read_msg(&mut ctrl) {
        Some(ServerMessage::Error { .. }) | None => {}
        other => panic!("expected an error, got {other:?}"),
    }
    measure_ok(ClientConfig::new(addr));
    server.stop().unwrap();
}

#[test]
fn a_client_that_sends_one_byte_a_second_is_cut_off_at_the_handshake_deadline() {
    let server = server_with(|c| c.handshake_timeout = Duration::from_secs(2));
    let addr = server.local_addr();
    let slow = std::thread::spawn(move || {
        let mut s = TcpStream::connect(addr).unwrap();
        let hello = ClientHello {
            version: PROTOCOL_VERSION,
        }
        .encode();
        let started = Instant::now();
        for b in hello {
            if s.write_all(&[b]).is_err() {
                break;
            }
            std::thread::sleep(Duration::from_secs(1));
            // Stop once the server has hung up.
            s.set_nonblocking(true).unwrap();
            let mut one = [0u8; 1];
            if matches!(s.read(&mut one), Ok(0)) {
                break;
            }
            s.set_nonblocking(false).unwrap();
        }
        started.elapsed()
    });
    // Meanwhile a real client measures.
    std::thread::sleep(Duration::from_millis(300));
    measure_ok(ClientConfig::new(addr));
    let held = slow.join().unwrap();
    assert!(
        held < Duration::from_secs(6),
        "the slow client was held {held:?} (handshake deadline 2 s)"
    );
    server.stop().unwrap();
}

#[test]
fn two_hundred_hostile_connections_do_not_keep_a_real_client_out() {
    let server = server_with(|c| c.handshake_timeout = Duration::from_secs(20));
    let addr = server.local_addr();
    let mut hostile = Vec::new();
    for i in 0..200 {
        let mut s = TcpStream::connect(addr).unwrap();
        match i % 4 {
            // Silent: connects and says nothing.
            0 => {}
            // Half a hello.
            1 => s
                .write_all(
                    &ClientHello {
                        version: PROTOCOL_VERSION,
                    }
                    .encode()[..5],
                )
                .unwrap(),
            // Garbage.
            2 => s.write_all(&[0xde, 0xad, 0xbe, 0xef].repeat(16)).unwrap(),
            // A hello and half a frame header.
            _ => {
                s.write_all(
                    &ClientHello {
                        version: PROTOCOL_VERSION,
                    }
                    .encode(),
                )
                .unwrap();
                s.write_all(&[0, 0]).unwrap();
            }
        }
        hostile.push(s);
    }
    std::thread::sleep(Duration::from_millis(200));
    // Every connection that did not send garbage is still held by the
    // server (none was told busy or closed); garbage was closed at once.
    let mut open = 0;
    for (i, s) in hostile.iter().enumerate() {
        s.set_nonblocking(true).unwrap();
        let mut b = [0u8; 64];
        let mut r = s;
        // Closed: end of stream, or a reset (unread garbage makes the
        // server's close a reset).
        let gone = |x: std::io::Result<usize>| match x {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
        };
        let closed = gone(r.read(&mut b)) || gone(r.read(&mut b));
        if i % 4 == 2 {
            assert!(closed, "garbage connection {i} still open");
        } else if !closed {
            open += 1;
        }
    }
    assert_eq!(open, 150, "hostile connections still open");
    // … and a real client measures correctly, twice.
    measure_ok(ClientConfig::new(addr));
    measure_ok(ClientConfig::new(addr));
    drop(hostile);
    server.stop().unwrap();
}

#[test]
fn session_limits_end_the_session_with_a_named_error() {
    // Bytes: two 50-packet trains of 1200 B fit in 150 kB, a third does not.
    let server = server_with(|c| {
        c.limits = Limits {
            max_bytes: 150_000,
            ..Limits::default()
        }
    });
    let mut m = trains(3, 50);
    let e = measure(ClientConfig::new(server.local_addr()), &mut m, &mut |_| {})
        .err()
        .unwrap();
    assert!(
        matches!(&e, NetError::Server(msg) if msg.message.contains("session limit")),
        "{e}"
    );
    assert_eq!(m.seen.len(), 2);
    server.stop().unwrap();

    // Duration: the session ends at its maximum even while the client idles.
    let server = server_with(|c| {
        c.limits = Limits {
            max_duration: Duration::from_millis(800),
            ..Limits::default()
        }
    });
    let (mut ctrl, _, _) = open_session(server.local_addr());
    let started = Instant::now();
    match read_msg(&mut ctrl) {
        Some(ServerMessage::Error { message, .. }) => {
            assert!(message.contains("maximum"), "{message}")
        }
        other => panic!("expected a limit error, got {other:?}"),
    }
    assert!(started.elapsed() < Duration::from_secs(5));
    server.stop().unwrap();

    // Rate: a train arriving faster than the limit ends the session.
    let server = server_with(|c| {
        c.limits = Limits {
            max_rate: BitRate::from_mbps(10.0),
            ..Limits::default()
        }
    });
    let mut m = trains(2, 50);
    let e = measure(ClientConfig::new(server.local_addr()), &mut m, &mut |_| {})
        .err()
        .unwrap();
    assert!(
        matches!(&e, NetError::Server(msg) if msg.message.contains("Mb/s")),
        "{e}"
    );
    server.stop().unwrap();
}

#[test]
fn past_max_connections_new_clients_are_told_busy_at_once() {
    let server = server_with(|c| {
        c.limits = Limits {
            max_connections: 3,
            ..Limits::default()
        }
    });
    let addr = server.local_addr();
    let silent: Vec<TcpStream> = (0..3).map(|_| TcpStream::connect(addr).unwrap()).collect();
    std::thread::sleep(Duration::from_millis(200));
    let started = Instant::now();
    let e = Client::connect(ClientConfig::new(addr))
        .err()
        .expect("busy");
    assert!(matches!(e, NetError::Busy { .. }), "{e}");
    assert!(started.elapsed() < Duration::from_secs(1));
    drop(silent);
    // The slots come back as soon as the connections close.
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        match Client::connect(ClientConfig::new(addr)) {
            Ok(c) => {
                c.close();
                break;
            }
            Err(NetError::Busy { .. }) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20))
            }
            Err(e) => panic!("{e}"),
        }
    }
    server.stop().unwrap();
}
