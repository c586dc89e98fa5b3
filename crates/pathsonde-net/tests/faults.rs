//! A lossy, reordering, duplicating path between the real client and the
//! real server: an in-process relay that forwards the control connection
//! (rewriting the probe port in `SessionOpened` to its own) and the probes
//! (through a fault injector).  Every fault ends in an estimate or a clear
//! error — never a hang, never a panic.

use pathsonde_core::methods::registry::{self, MethodSettings};
use pathsonde_core::{BitRate, Bytes};
use pathsonde_net::client::{measure, ClientConfig, MeasurementRun};
use pathsonde_net::{NetError, Server, ServerConfig};
use pathsonde_wire::control::{decode_frame, encode_frame, ServerMessage};
use pathsonde_wire::handshake::HELLO_LEN;
use pathsonde_wire::probe::{ProbeHeader, ProbeKind};
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What the relay does to probe packets (client to server).
#[derive(Debug, Clone, Copy)]
struct Faults {
    /// Chance in a million that a packet is dropped.
    loss_ppm: u32,
    /// Chance that a packet is held back and sent after the next one.
    reorder_ppm: u32,
    /// Chance that a packet is sent twice.
    duplicate_ppm: u32,
}

/// Counts of what the relay did.
#[derive(Default, Debug)]
struct Done {
    dropped: AtomicU64,
    reordered: AtomicU64,
    duplicated: AtomicU64,
    forwarded: AtomicU64,
}

struct Relay {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    done: Arc<Done>,
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// A tiny deterministic generator (xorshift), so each run injects the
/// same faults.
struct Dice(u64);
impl Dice {
    fn roll(&mut self, ppm: u32) -> bool {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % 1_000_000) < u64::from(ppm)
    }
}

fn bind_pair() -> (TcpListener, UdpSocket) {
    loop {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        if let Ok(u) = UdpSocket::bind(l.local_addr().unwrap()) {
            return (l, u);
        }
    }
}

fn relay(server: SocketAddr, faults: Faults) -> Relay {
    let (listener, udp) = bind_pair();
    let addr = listener.local_addr().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(Done::default());
    let server_probe: Arc<Mutex<Option<SocketAddr>>> = Arc::new(Mutex::new(None));
    let client_probe: Arc<Mutex<Option<SocketAddr>>> = Arc::new(Mutex::new(None));
    let upstream = UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_read_timeout(Some(Duration::from_millis(20)))
        .unwrap();
    upstream
        .set_read_timeout(Some(Duration::from_millis(20)))
        .unwrap();

    // Control: accept, connect upstream, pump both ways.
    {
        let (stop, server_probe) = (stop.clone(), server_probe.clone());
        listener.set_nonblocking(true).unwrap();
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                let Ok((down, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(5));
                    continue;
                };
                down.set_nonblocking(false).unwrap();
                let up = TcpStream::connect(server).unwrap();
                let (d2, u2) = (down.try_clone().unwrap(), up.try_clone().unwrap());
                std::thread::spawn(move || pump_raw(d2, u2));
                let sp = server_probe.clone();
                std::thread::spawn(move || pump_server(up, down, addr.port(), &sp));
            }
        });
    }
    // Probes: client -> faults -> server.
    {
        let (stop, done, up, udp) = (
            stop.clone(),
            done.clone(),
            upstream.try_clone().unwrap(),
            udp.try_clone().unwrap(),
        );
        let (server_probe, client_probe) = (server_probe.clone(), client_probe.clone());
        std::thread::spawn(move || {
            let mut dice = Dice(0x9E37_79B9_7F4A_7C15);
            let mut held: Option<Vec<u8>> = None;
            let mut buf = vec![0u8; 65536];
            while !stop.load(Ordering::SeqCst) {
                let Ok((n, from)) = udp.recv_from(&mut buf) else {
                    // Quiet: release a held packet rather than keep it forever.
                    if let (Some(p), Some(to)) = (held.take(), *server_probe.lock().unwrap()) {
                        let _ = up.send_to(&p, to);
                    }
                    continue;
                };
                *client_probe.lock().unwrap() = Some(from);
                let Some(to) = *server_probe.lock().unwrap() else {
                    continue;
                };
                let pkt = buf[..n].to_vec();
                let is_probe =
                    matches!(ProbeHeader::decode(&pkt), Ok(h) if h.kind == ProbeKind::Probe);
                if is_probe && dice.roll(faults.loss_ppm) {
                    done.dropped.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                if is_probe && held.is_none() && dice.roll(faults.reorder_ppm) {
                    done.reordered.fetch_add(1, Ordering::Relaxed);
                    held = Some(pkt);
                    continue;
                }
                let _ = up.send_to(&pkt, to);
                done.forwarded.fetch_add(1, Ordering::Relaxed);
                if is_probe && dice.roll(faults.duplicate_ppm) {
                    done.duplicated.fetch_add(1, Ordering::Relaxed);
                    let _ = up.send_to(&pkt, to);
                }
                if let Some(p) = held.take() {
                    let _ = up.send_to(&p, to);
                }
            }
        });
    }
    // Echo replies: server -> client, untouched.
    {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut buf = vec![0u8; 65536];
            while !stop.load(Ordering::SeqCst) {
                if let Ok(n) = upstream.recv(&mut buf) {
                    if let Some(to) = *client_probe.lock().unwrap() {
                        let _ = udp.send_to(&buf[..n], to);
                    }
                }
            }
        });
    }
    Relay { addr, stop, done }
}

fn pump_raw(mut from: TcpStream, mut to: TcpStream) {
    let mut buf = [0u8; 16384];
    while let Ok(n) = from.read(&mut buf) {
        if n == 0 || to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = to.shutdown(Shutdown::Write);
}

/// Server to client: the hello as is, then frame by frame, with
/// `SessionOpened`'s probe port pointed at the relay.
fn pump_server(
    mut from: TcpStream,
    mut to: TcpStream,
    relay_port: u16,
    server_probe: &Mutex<Option<SocketAddr>>,
) {
    let mut hello = [0u8; HELLO_LEN];
    if from.read_exact(&mut hello).is_err() || to.write_all(&hello).is_err() {
        return;
    }
    let peer = from.peer_addr().unwrap();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16384];
    loop {
        while let Ok(Some((msg, used))) = decode_frame::<ServerMessage>(&buf) {
            let out = match msg {
                ServerMessage::SessionOpened {
                    session,
                    probe_port,
                    clock,
                    max_train_packets,
                    software,
                } => {
                    *server_probe.lock().unwrap() = Some(SocketAddr::new(peer.ip(), probe_port));
                    encode_frame(&ServerMessage::SessionOpened {
                        session,
                        probe_port: relay_port,
                        clock,
                        max_train_packets,
                        software,
                    })
                    .unwrap()
                }
                _ => buf[..used].to_vec(),
            };
            if to.write_all(&out).is_err() {
                return;
            }
            buf.drain(..used);
        }
        match from.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    let _ = to.shutdown(Shutdown::Write);
}

fn fac2_through(faults: Faults) -> (Result<MeasurementRun, NetError>, Duration, Arc<Done>) {
    let mut cfg = ServerConfig::new(SocketAddr::from(([127, 0, 0, 1], 0)));
    cfg.host_report = false;
    let server = Server::bind(cfg).unwrap().spawn().unwrap();
    let relay = relay(server.local_addr(), faults);
    let mut method = registry::build(
        registry::MethodName::Fac2,
        &MethodSettings {
            max_bytes: None,
            precision: None,
            max_rate: BitRate::from_mbps(100.0),
            packet_size: Bytes(1200),
            clock_resolution: pathsonde_net::clock::monotonic_resolution(),
            known_capacity: None,
        },
    );
    let mut cfg = ClientConfig::new(relay.addr);
    cfg.reply_timeout = Duration::from_secs(2);
    let started = Instant::now();
    let run = measure(cfg, method.as_mut(), &mut |_| {});
    let took = started.elapsed();
    let done = relay.done.clone();
    eprintln!("{faults:?}: {took:?}, relay {done:?}");
    drop(relay);
    server.stop().unwrap();
    (run, took, done)
}

/// An estimate, or one of the errors that say what went wrong with the path.
fn estimate_or_clear_error(run: &Result<MeasurementRun, NetError>) {
    match run {
        Ok(r) => eprintln!("estimate {} (low {})", r.estimate.available, r.estimate.low),
        Err(e) => eprintln!("error: {e}"),
    }
    match run {
        Ok(r) => assert!(r.estimate.available.bps() > 0.0, "{:?}", r.estimate),
        Err(NetError::NoEstimate(why)) => assert!(!why.is_empty()),
        Err(NetError::ProbesLost { .. }) => {}
        Err(e) => panic!("not an estimate nor a clear path error: {e}"),
    }
}

const HANG_GUARD: Duration = Duration::from_secs(120);

#[test]
fn a_clean_relay_changes_nothing() {
    let clean = Faults {
        loss_ppm: 0,
        reorder_ppm: 0,
        duplicate_ppm: 0,
    };
    let (mut run, mut took, mut done) = fac2_through(clean);
    // On a busy machine the debug-built sender may not reach the 100 Mb/s
    // asked and the relay's thread may forward its trains in bunches; the
    // host verdict then honestly gives no estimate, naming the hosts (a CI
    // run at ff8ef46: sent 70 of 100 Mb/s, 38 packets).  That is the
    // machine, not the relay: one more run must give the estimate.
    if let Err(NetError::NoEstimate(why)) = &run {
        if why.contains("the hosts limited the run") {
            eprintln!("the hosts limited the first run; once more: {why}");
            (run, took, done) = fac2_through(clean);
        }
    }
    let run = run.unwrap_or_else(|e| panic!("clean relay: {e}"));
    assert!(run.estimate.available.bps() > 0.0);
    // Every probe went through, untouched.  (How many there were depends
    // on how the method ended: about 70 when FAC² shows A ≥ 100 Mb/s, as
    // few as 38 when a busy host made it stop sooner, so the count itself
    // is not asserted.)
    assert!(done.forwarded.load(Ordering::Relaxed) > 0);
    for (what, n) in [
        ("dropped", &done.dropped),
        ("reordered", &done.reordered),
        ("duplicated", &done.duplicated),
    ] {
        assert_eq!(
            n.load(Ordering::Relaxed),
            0,
            "the clean relay {what} packets"
        );
    }
    assert!(took < HANG_GUARD);
}

#[test]
fn probe_loss_gives_an_estimate_or_a_clear_error() {
    // FAC² shows A ≥ 100 Mb/s on a clean loopback with 40–70 packets, so
    // the rates are high enough that every run meets the fault (at 5 %, one
    // run in seven lost nothing).
    let (run, took, done) = fac2_through(Faults {
        loss_ppm: 200_000,
        reorder_ppm: 0,
        duplicate_ppm: 0,
    });
    assert!(
        done.dropped.load(Ordering::Relaxed) > 0,
        "the relay dropped nothing"
    );
    estimate_or_clear_error(&run);
    assert!(took < HANG_GUARD, "took {took:?}");
}

#[test]
fn reordering_gives_an_estimate_or_a_clear_error() {
    let (run, took, done) = fac2_through(Faults {
        loss_ppm: 0,
        reorder_ppm: 250_000,
        duplicate_ppm: 0,
    });
    assert!(
        done.reordered.load(Ordering::Relaxed) > 0,
        "the relay reordered nothing"
    );
    estimate_or_clear_error(&run);
    assert!(took < HANG_GUARD, "took {took:?}");
}

#[test]
fn duplication_gives_an_estimate_or_a_clear_error() {
    let (run, took, done) = fac2_through(Faults {
        loss_ppm: 0,
        reorder_ppm: 0,
        duplicate_ppm: 250_000,
    });
    assert!(
        done.duplicated.load(Ordering::Relaxed) > 0,
        "the relay duplicated nothing"
    );
    estimate_or_clear_error(&run);
    assert!(took < HANG_GUARD, "took {took:?}");
}

#[test]
fn all_three_at_once_give_an_estimate_or_a_clear_error() {
    let (run, took, _) = fac2_through(Faults {
        loss_ppm: 20_000,
        reorder_ppm: 50_000,
        duplicate_ppm: 50_000,
    });
    estimate_or_clear_error(&run);
    assert!(took < HANG_GUARD, "took {took:?}");
}

#[test]
fn a_path_that_loses_every_probe_is_named_quickly() {
    let (run, took, _) = fac2_through(Faults {
        loss_ppm: 1_000_000,
        reorder_ppm: 0,
        duplicate_ppm: 0,
    });
    assert!(
        matches!(run, Err(NetError::ProbesLost { trains: 3 })),
        "{:?}",
        run.err()
    );
    assert!(took < Duration::from_secs(30), "took {took:?}");
}
