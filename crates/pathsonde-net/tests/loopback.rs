//! The real client and server over loopback: sessions, RTT, trains with
//! kernel timestamps, busy and version handling, a server that goes silent.

use pathsonde_core::{
    BitRate, Bytes, ClockSource, DurationNs, Estimate, Method, Observation, ProbeCost, ProbePlan,
    TrainSpec,
};
use pathsonde_net::client::{measure, Client, ClientConfig};
use pathsonde_net::pacer::PacerMode;
use pathsonde_net::{NetError, ProtocolError, Server, ServerConfig};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::time::{Duration, Instant};

fn local_server() -> pathsonde_net::ServerHandle {
    Server::bind(ServerConfig::new(SocketAddr::from(([127, 0, 0, 1], 0))))
        .unwrap()
        .spawn()
        .unwrap()
}

/// A method that sends a fixed list of trains and reports what arrived: just
/// enough logic to exercise the runner end to end.
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
            high: Some(last.spec.rate),
            capacity: None,
            cross_traffic: None,
            cost: ProbeCost {
                bytes: Bytes(self.seen.iter().map(|o| o.sent_bytes().get()).sum()),
                packets: self.seen.iter().map(|o| o.sent_packets()).sum(),
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

fn train(rate_mbps: f64, cars: u32, per_car: u32) -> TrainSpec {
    TrainSpec {
        packet_size: Bytes(1200),
        packets_per_car: per_car,
        cars,
        rate: BitRate::from_mbps(rate_mbps),
        idle_before: DurationNs::ZERO,
    }
}

#[test]
fn a_session_carries_trains_with_kernel_stamps() {
    let server = local_server();
    let mut method = FixedTrains {
        plans: vec![train(50.0, 20, 2), train(100.0, 30, 4)],
        seen: vec![],
    };
    let run = measure(
        ClientConfig::new(server.local_addr()),
        &mut method,
        &mut |_| {},
    )
    .unwrap();
    assert_eq!(run.rtt_control.samples, 10);
    assert!(run.rtt_control.min <= run.rtt_control.median);
    assert!(run.rtt_control.max < DurationNs::from_ms(500));
    let echo = run.rtt_echo.expect("loopback echoes come back");
    assert!(echo.samples >= 5);
    assert_eq!(run.recv_clock.source, ClockSource::KernelSoftware);
    assert_eq!(method.seen.len(), 2);
    let obs = &method.seen[1];
    assert_eq!(obs.sent_packets(), 120);
    // Loopback at 100 Mb/s loses nothing with a 4 MiB buffer.
    assert_eq!(obs.received_packets(), 120, "lost {}", obs.lost_packets());
    assert!(obs.packets.iter().all(|p| p.size == Bytes(1200)));
    // Cars left on schedule: the last car's send time is ~ (cars-1) * interval after the first.
    let interval = obs.spec.car_interval().unwrap();
    let span = obs.send_span();
    let expected = interval.ns() * 29;
    assert_paced(span.ns(), expected, "the train");
    // Arrival stamps are in order of sequence on loopback and span a similar time.
    let arrivals: Vec<i64> = obs
        .packets
        .iter()
        .filter_map(|p| p.received)
        .map(|t| t.ns())
        .collect();
    let recv_span = arrivals.iter().max().unwrap() - arrivals.iter().min().unwrap();
    assert!(recv_span > expected / 2, "receive span {recv_span} ns");
    server.stop().unwrap();
}

#[test]
fn send_times_are_the_kernels_transmit_stamps() {
    let server = local_server();
    // The second train (800 packets) is long enough that the pacer drains
    // the error queue during the train.  Batches: one stamp per packet.
    let mut method = FixedTrains {
        plans: vec![train(50.0, 20, 2), train(200.0, 200, 4)],
        seen: vec![],
    };
    let mut cfg = ClientConfig::new(server.local_addr());
    cfg.pacer_mode = PacerMode::Batch;
    let run = measure(cfg, &mut method, &mut |_| {}).unwrap();
    assert_eq!(run.client_host.pacer, Some(PacerMode::Batch));
    // This kernel gives software TX stamps on loopback.
    assert_eq!(run.send_clock.source, ClockSource::KernelSoftware);
    for obs in &method.seen {
        assert_eq!(obs.send_clock.source, ClockSource::KernelSoftware);
        assert_eq!(obs.send_clock.resolution, DurationNs::from_ns(1));
        // Kernel stamps are per packet: in sequence order, never backwards,
        // and not all of a car's packets share one stamp.
        let sent: Vec<i64> = obs.packets.iter().map(|p| p.sent.ns()).collect();
        assert!(sent.windows(2).all(|w| w[1] >= w[0]), "stamps go backwards");
        assert!(
            obs.packets
                .windows(2)
                .any(|w| w[0].car == w[1].car && w[1].sent > w[0].sent),
            "every packet of a car carries the same stamp"
        );
        // Shifted onto CLOCK_MONOTONIC (the pacer's and the lab's timeline).
        let now = pathsonde_net::clock::monotonic().ns();
        assert!(
            sent[0] < now && now - sent[0] < 60_000_000_000,
            "{}",
            sent[0]
        );
        // Cars left on schedule: consistent with the plan.
        let cars = i64::from(obs.spec.cars);
        let expected = obs.spec.car_interval().unwrap().ns() * (cars - 1);
        let span = obs.send_span().ns();
        assert_paced(span, expected, &format!("train {}", obs.train));
    }
    assert_eq!(method.seen[1].sent_packets(), 800);
    server.stop().unwrap();
}

#[test]
fn gso_cars_arrive_whole_with_one_kernel_stamp_per_car() {
    let server = local_server();
    let mut method = FixedTrains {
        // Fast enough for GSO cars (8 × 1200 B every 77 µs; the pacer
        // keeps slower trains as batches).
        plans: vec![train(1000.0, 20, 4), train(1000.0, 200, 8)],
        seen: vec![],
    };
    let run = measure(
        ClientConfig::new(server.local_addr()),
        &mut method,
        &mut |_| {},
    )
    .unwrap();
    // GSO is the default where the kernel takes it (this one does).
    assert_eq!(run.client_host.pacer, Some(PacerMode::Gso));
    assert_eq!(run.send_clock.source, ClockSource::KernelSoftware);
    // The server names the receiver-drops feature and counts its probe
    // socket's own drops around every train (none lost here, so none).
    assert!(run
        .server_software
        .contains(pathsonde_wire::control::RECEIVER_DROPS_FEATURE));
    for obs in &method.seen {
        assert_eq!(obs.send_clock.source, ClockSource::KernelSoftware);
        assert_eq!(obs.receiver_drops, Some(0), "train {}", obs.train);
        // The server saw every probe as its own datagram under its own
        // number: nothing merged, nothing renumbered.
        assert_eq!(obs.received_packets(), obs.sent_packets());
        let want = u64::from(obs.spec.cars) * u64::from(obs.spec.packets_per_car);
        assert_eq!(obs.packets.len() as u64, want);
        for (i, p) in obs.packets.iter().enumerate() {
            assert_eq!(p.seq as usize, i);
            assert_eq!(p.car, i as u32 / obs.spec.packets_per_car);
        }
        // One stamp per car (one GSO send each), cars in order.
        for car in obs.packets.chunk_by(|a, b| a.car == b.car) {
            assert!(
                car.iter().all(|p| p.sent == car[0].sent),
                "car {}",
                car[0].car
            );
        }
        let firsts: Vec<i64> = obs
            .packets
            .chunk_by(|a, b| a.car == b.car)
            .map(|c| c[0].sent.ns())
            .collect();
        assert!(
            firsts.windows(2).all(|w| w[1] > w[0]),
            "stamps go backwards"
        );
        let cars = i64::from(obs.spec.cars);
        let expected = obs.spec.car_interval().unwrap().ns() * (cars - 1);
        assert_paced(
            obs.send_span().ns(),
            expected,
            &format!("train {}", obs.train),
        );
    }
    server.stop().unwrap();
}

#[test]
fn a_second_client_is_told_busy() {
    let server = local_server();
    let first = Client::connect(ClientConfig::new(server.local_addr())).unwrap();
    let second = Client::connect(ClientConfig::new(server.local_addr()));
    assert!(
        matches!(second, Err(NetError::Busy { .. })),
        "got {:?}",
        second.err()
    );
    first.close();
    // Once the first session is closed the server serves again at once: the
    // client's close waits for the server to release the session.
    let deadline = Instant::now() + Duration::from_secs(3);
    let mut busy_answers = 0;
    loop {
        match Client::connect(ClientConfig::new(server.local_addr())) {
            Ok(c) => {
                c.close();
                break;
            }
            Err(NetError::Busy { .. }) if Instant::now() < deadline => {
                busy_answers += 1;
                std::thread::sleep(Duration::from_millis(2))
            }
            Err(e) => panic!("server did not come back: {e}"),
        }
    }
    assert_eq!(busy_answers, 0, "busy after the first client closed");
    server.stop().unwrap();
}

#[test]
fn a_version_mismatch_is_named() {
    let server = local_server();
    let mut s = std::net::TcpStream::connect(server.local_addr()).unwrap();
    s.write_all(&pathsonde_wire::handshake::ClientHello { version: 999 }.encode())
        .unwrap();
    let mut reply = [0u8; 12];
    s.read_exact(&mut reply).unwrap();
    let hello = pathsonde_wire::handshake::ServerHello::decode(&reply).unwrap();
    assert_eq!(
        hello.status,
        pathsonde_wire::handshake::HelloStatus::VersionMismatch
    );
    server.stop().unwrap();
}

#[test]
fn no_server_is_a_connect_error_quickly() {
    // Bind then drop to get a port nobody listens on.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let started = Instant::now();
    let r = Client::connect(ClientConfig::new(SocketAddr::from(([127, 0, 0, 1], port))));
    assert!(matches!(r, Err(NetError::Connect { .. })));
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[test]
fn a_server_that_goes_silent_times_out() {
    // A listener that accepts and answers the hello, then says nothing more.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let t = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut hello = [0u8; 12];
        s.read_exact(&mut hello).unwrap();
        s.write_all(
            &pathsonde_wire::handshake::ServerHello {
                version: pathsonde_wire::PROTOCOL_VERSION,
                status: pathsonde_wire::handshake::HelloStatus::Ok,
            }
            .encode(),
        )
        .unwrap();
        std::thread::sleep(Duration::from_millis(800));
    });
    let mut cfg = ClientConfig::new(addr);
    cfg.reply_timeout = Duration::from_millis(300);
    let r = Client::connect(cfg);
    assert!(
        matches!(r, Err(NetError::Timeout { .. })),
        "got {:?}",
        r.err()
    );
    t.join().unwrap();
}

#[test]
fn garbage_instead_of_a_server_is_a_protocol_error() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let t = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let _ = s.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n");
    });
    let r = Client::connect(ClientConfig::new(addr));
    assert!(
        matches!(
            r,
            Err(NetError::Protocol(ProtocolError::NotPathsonde { .. }))
        ),
        "got {:?}",
        r.err()
    );
    t.join().unwrap();
}

#[test]
fn a_schedule_of_uneven_cars_is_carried_at_its_offsets() {
    use pathsonde_core::{CarSlot, ScheduleSpec};
    let server = local_server();
    let mut client = Client::connect(ClientConfig::new(server.local_addr())).unwrap();
    // A chirp-like schedule: cars of 1, 2 and 3 packets whose gaps shrink
    // from 2 ms to 0.5 ms.
    let offsets_us = [0i64, 2000, 3000, 3500];
    let sizes = [1u32, 2, 3, 1];
    let sched = ScheduleSpec {
        packet_size: Bytes(1000),
        cars: offsets_us
            .iter()
            .zip(sizes)
            .map(|(&us, packets)| CarSlot {
                offset: DurationNs::from_us(us),
                packets,
            })
            .collect(),
        idle_before: DurationNs::ZERO,
    };
    let obs = client
        .run_plan(
            &ProbePlan::Schedule(sched.clone()),
            Duration::from_millis(50),
        )
        .unwrap();
    assert_eq!(obs.schedule.as_ref(), Some(&sched));
    assert_eq!(obs.spec.cars, 4);
    assert_eq!(obs.spec.packets_per_car, 3);
    assert_eq!(obs.sent_packets(), 7);
    assert_eq!(obs.received_packets(), 7);
    // Packets are numbered across the schedule and belong to their cars.
    let cars: Vec<u32> = obs.packets.iter().map(|p| p.car).collect();
    assert_eq!(cars, vec![0, 1, 1, 2, 2, 2, 3]);
    let seqs: Vec<u32> = obs.packets.iter().map(|p| p.seq).collect();
    assert_eq!(seqs, (0..7).collect::<Vec<_>>());
    // Each car left near its offset: compare car starts with the plan.
    let start = |car: u32| obs.packets.iter().find(|p| p.car == car).unwrap().sent;
    for (car, &us) in offsets_us.iter().enumerate() {
        let achieved = start(car as u32).since(start(0)).ns();
        assert_paced(achieved, us * 1000, &format!("car {car}"));
    }
    // Done is not a probe.
    assert!(client
        .run_plan(&ProbePlan::Done, Duration::from_millis(10))
        .is_err());
    client.close();
    server.stop().unwrap();
}

/// A span the pacer achieved (`got` ns) against the plan (`planned` ns):
/// never more than 20 % early (a sender that ignored the schedule would send
/// the whole train in a fraction of it), and no more than twice the plan
/// plus 1 ms late (a pacer at half the rate fails).  Lateness is bounded
/// loosely because the machine running the tests is shared: a loaded
/// scheduler delays wake-ups, which says nothing about the pacer.
fn assert_paced(got: i64, planned: i64, what: &str) {
    assert!(
        got >= planned - planned / 5 && got <= 2 * planned + 1_000_000,
        "{what}: sent over {} where the plan said {}",
        DurationNs::from_ns(got),
        DurationNs::from_ns(planned)
    );
}
