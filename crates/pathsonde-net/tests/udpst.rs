//! `pathsonde capacity` against `pathsonde serve`'s UDPSTP server on
//! loopback: both directions, Type B and C, 1 and 4 connections, with and
//! without authentication, and a `--max-rate` ceiling the maximum must sit
//! at (or, short of it on a loaded host, the run must name the host).
//! Four 5-second tests carry the combinations that matter (each direction,
//! each algorithm, each auth mode and each connection count appears at
//! least once): up/B/1/no auth, down/C/1/auth, up/C/4/auth,
//! down/B/4/no auth.  Two more 5-second tests: IPv6 (up/B/1) and a server
//! that vanishes mid-test (the watchdog).  The refusals (103, 105, 107,
//! 110, 111, 200) cost no test time.
//!
//! These tests run one at a time (a mutex): two capacity tests at once on
//! two shared cores would measure each other.

use pathsonde_core::capacity::summary::SubIntervalRow;
use pathsonde_core::capacity::{Unclear, ZeroLoss};
use pathsonde_core::{BitRate, DurationNs};
use pathsonde_net::udpst::{
    run, spawn_server, Algorithm, CapacityConfig, CapacityRun, Direction, UdpstKey,
    UdpstServerConfig, UdpstServerHandle,
};
use std::collections::BTreeMap;
use std::sync::Mutex;

static SERIAL: Mutex<()> = Mutex::new(());

fn server(max_rate_mbps: f64, keys: Option<BTreeMap<u8, Vec<u8>>>) -> UdpstServerHandle {
    let mut c = UdpstServerConfig::new("127.0.0.1:0".parse().unwrap());
    c.max_rate = BitRate::from_mbps(max_rate_mbps);
    // Tests without a key are opted into, up to the ceiling.
    c.open = keys.is_none().then_some(c.max_rate);
    c.keys = keys;
    spawn_server(c).expect("UDPST server")
}

fn client(srv: &UdpstServerHandle, dir: Direction, algo: Algorithm, conns: u8) -> CapacityConfig {
    CapacityConfig {
        server: srv.local_addr(),
        direction: dir,
        duration: DurationNs::from_secs(5),
        algorithm: algo,
        connections: conns,
        ..CapacityConfig::default()
    }
}

fn run_ok(cfg: &CapacityConfig) -> (CapacityRun, Vec<SubIntervalRow>) {
    let mut seen = Vec::new();
    let r = run(cfg, &mut |row| seen.push(row.clone())).unwrap_or_else(|e| {
        panic!(
            "capacity test failed: {e} (ErrorStatus {})",
            e.error_status()
        )
    });
    (r, seen)
}

/// The checks every completed test must pass.  `ceiling`: the server's
/// ceiling in Mb/s, which the maximum must reach within 10 %.
fn check(r: &CapacityRun, rows: &[SubIntervalRow], conns: u32, ceiling: Option<f64>) {
    let s = r.report.summary.as_ref().expect("a summary");
    let max = s.max_ip_layer_capacity_bps.mbps();
    eprintln!(
        "{:?} {:?} x{conns}: max {max:.1} Mb/s at interval {}, mean {:.1}, loss {}, rows {:?}",
        r.config.direction,
        r.config.algorithm,
        s.max_interval,
        s.ip_layer_capacity_bps.mbps(),
        s.loss_count,
        rows.iter()
            .map(|x| format!("{:.0}", x.ip_layer_capacity_bps.mbps()))
            .collect::<Vec<_>>()
    );
    assert_eq!(r.error_status, 0, "warnings: {:?}", r.warnings);
    assert_eq!(
        r.report.sub_intervals.len(),
        5,
        "rows = duration / sub-interval"
    );
    assert_eq!(rows.len(), 5, "on_row saw every row");
    assert_eq!(s.active_connections, conns);
    assert!(max > 1.0, "maximum {max} Mb/s");
    for (i, row) in r.report.sub_intervals.iter().enumerate() {
        assert_eq!(row.interval as usize, i + 1);
        assert!(row.rx_datagrams > 0 && row.ip_layer_capacity_bps.bps() > 0.0);
    }
    // The rate climbs: the search starts at row 0 (0.1 Mb/s).
    let first = r.report.sub_intervals[0].ip_layer_capacity_bps.mbps();
    assert!(max > first, "no climb: first {first}, max {max}");
    if let Some(c) = ceiling {
        // The ceiling holds whatever the machine's load: the server polices
        // it.  Reaching it is the hosts' work, not the protocol's: on a
        // quiet machine every test reaches it within a second, but a
        // loaded CI machine has held whole tests at 81–84 % of it.  A test
        // short of it must then say, from its own figures, that the host
        // (not the path) set the maximum — never a confident path figure —
        // and still have climbed well up (40 %: 59 % seen beside three busy
        // loops on both cores; a search that stalls low fails here).
        assert!(
            max <= 1.10 * c,
            "maximum {max:.1} Mb/s above the ceiling {c} Mb/s"
        );
        if max < 0.90 * c {
            assert!(
                max >= 0.4 * c,
                "maximum {max:.1} Mb/s, ceiling {c} Mb/s: the search stalled low"
            );
            let why = r.sender_held_maximum();
            eprintln!("short of the ceiling: {why:?}");
            assert!(
                why.is_some(),
                "maximum {max:.1} Mb/s short of the ceiling {c} Mb/s without the host named"
            );
        }
    }
    // Upstream the client knows the fastest row it was asked for; a server
    // ceiling keeps it near what arrived, so the sender is not blamed.
    match r.config.direction {
        pathsonde_net::udpst::Direction::Upstream => {
            let asked = r.max_row_requested.expect("rows asked upstream").mbps();
            assert!(asked >= 0.9 * max, "asked {asked} Mb/s, max {max} Mb/s");
            if let Some(c) = ceiling {
                assert!(asked <= 1.2 * c, "asked {asked} Mb/s above the ceiling {c}");
            }
        }
        pathsonde_net::udpst::Direction::Downstream => assert_eq!(r.max_row_requested, None),
    }
    // Trials reached the zero-loss fit, the connections' trials pooled by
    // number: a 5 s test less 200 ms of warm-up is 48 windows of 100 ms on
    // a quiet machine, a few more when staggered connections end apart,
    // fewer when a busy machine delays the server's status timer (38 seen
    // under a full suite) — never none, and never 48 per connection.
    let (windows, congested) = r.report.zero_loss.windows();
    assert!((20..=60).contains(&windows), "{:?}", r.report.zero_loss);
    if s.loss_count == 0 {
        assert_eq!(congested, 0);
        assert!(matches!(
            r.report.zero_loss,
            ZeroLoss::Unclear {
                reason: Unclear::NoLoss,
                ..
            }
        ));
    }
    if let (Some(c), Some((a, _, _))) = (ceiling, r.report.zero_loss.fitted()) {
        // A ceiling is not a shared queue: nothing to read above it.
        assert!(a.mbps() <= 1.1 * c, "zero-loss {a} above the ceiling {c}");
    }
    assert_eq!(r.server_test_ports.len(), conns as usize);
    assert!(r.server_test_ports.iter().all(|&p| p != 0));
    assert!(r.bytes_sent.get() > 0 && r.bytes_received.get() > 0);
    assert_eq!(r.negotiated.test_duration_s, 5);
    assert_eq!(r.negotiated.direction, r.config.direction);
    assert!(
        r.local.ip().is_loopback() && r.local.port() != 0,
        "{}",
        r.local
    );
    assert!(r.ended > r.started);
}

/// Upstream, Type B, 1 connection, no authentication, a 200 Mb/s ceiling:
/// Type B climbs 10 Mb/s per 50 ms, so it sits at the ceiling from about
/// 1 s on, and the maximum (what the server received) must be 200 ± 10 %.
#[test]
fn upstream_type_b_reaches_the_ceiling() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let srv = server(200.0, None);
    let (r, rows) = run_ok(&client(&srv, Direction::Upstream, Algorithm::B, 1));
    check(&r, &rows, 1, Some(200.0));
    srv.stop();
}

/// Downstream, Type C, 1 connection, authenticated (key id 7), 200 Mb/s
/// ceiling: what this client received must sit at the ceiling.
#[test]
fn downstream_type_c_authenticated_reaches_the_ceiling() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let keys = BTreeMap::from([(7u8, b"testkey123".to_vec())]);
    let srv = server(200.0, Some(keys));
    let mut cfg = client(&srv, Direction::Downstream, Algorithm::C, 1);
    cfg.key = Some(UdpstKey {
        key_id: 7,
        secret: b"testkey123".to_vec(),
    });
    let (r, rows) = run_ok(&cfg);
    check(&r, &rows, 1, Some(200.0));
    srv.stop();
}

/// Upstream, Type C, 4 connections sharing one mc_ident, authenticated:
/// the 200 Mb/s ceiling is split over the four (50 each), so the summed
/// rows must still sit at 200.
#[test]
fn upstream_four_connections_sum_to_the_ceiling() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let keys = BTreeMap::from([(0u8, b"a-longer-secret-0".to_vec())]);
    let srv = server(200.0, Some(keys));
    let mut cfg = client(&srv, Direction::Upstream, Algorithm::C, 4);
    cfg.key = Some(UdpstKey {
        key_id: 0,
        secret: b"a-longer-secret-0".to_vec(),
    });
    let (r, rows) = run_ok(&cfg);
    check(&r, &rows, 4, Some(200.0));
    assert!(rows.iter().all(|x| x.active_connections == 4));
    srv.stop();
}

/// Downstream, Type B, 4 connections, no authentication, 100 Mb/s ceiling.
#[test]
fn downstream_four_connections_sum_to_the_ceiling() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let srv = server(100.0, None);
    let (r, rows) = run_ok(&client(&srv, Direction::Downstream, Algorithm::B, 4));
    check(&r, &rows, 4, Some(100.0));
    srv.stop();
}

fn refused(cfg: &CapacityConfig) -> u16 {
    match run(cfg, &mut |_| {}) {
        Ok(r) => panic!(
            "accepted: {:?}",
            r.report.summary.map(|s| s.max_ip_layer_capacity_bps)
        ),
        Err(e) => {
            eprintln!("refused as expected: {e}");
            e.error_status()
        }
    }
}

/// A wrong key gives 107, a missing key 105, a key the server has no keys
/// for 107 (its unauthenticated code-4 answer fails our check), a
/// mismatched jumbo bit 103, and no server at all 200 — all within the
/// 3 s set-up timer, with no test run.
#[test]
fn refusals_carry_the_reference_error_status() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let keys = BTreeMap::from([(7u8, b"testkey123".to_vec())]);
    let srv = server(100.0, Some(keys));
    let mut cfg = client(&srv, Direction::Upstream, Algorithm::B, 1);
    assert_eq!(refused(&cfg), 105);
    cfg.key = Some(UdpstKey {
        key_id: 7,
        secret: b"wrongkey".to_vec(),
    });
    assert_eq!(refused(&cfg), 107);
    cfg.key = Some(UdpstKey {
        key_id: 8,
        secret: b"testkey123".to_vec(),
    });
    assert_eq!(refused(&cfg), 107);
    srv.stop();

    let open = server(100.0, None);
    let mut cfg = client(&open, Direction::Downstream, Algorithm::B, 1);
    cfg.key = Some(UdpstKey {
        key_id: 0,
        secret: b"testkey123".to_vec(),
    });
    assert_eq!(refused(&cfg), 107);
    cfg.key = None;
    cfg.jumbo = false;
    assert_eq!(refused(&cfg), 103);
    cfg.jumbo = true;
    cfg.traditional_mtu = true;
    assert_eq!(refused(&cfg), 111);
    // More bandwidth than the server has: 110.
    cfg.traditional_mtu = false;
    cfg.max_rate = Some(BitRate::from_mbps(500.0));
    assert_eq!(refused(&cfg), 110);
    let addr = open.local_addr();
    open.stop();

    // Nobody listening: timeout awaiting response, 200.
    let mut cfg = CapacityConfig {
        server: addr,
        duration: DurationNs::from_secs(5),
        ..CapacityConfig::default()
    };
    cfg.direction = Direction::Upstream;
    let t0 = std::time::Instant::now();
    assert_eq!(refused(&cfg), 200);
    assert!(t0.elapsed() < std::time::Duration::from_secs(5));
}

#[test]
fn invalid_configurations_are_refused_before_sending() {
    let mut cfg = CapacityConfig {
        duration: DurationNs::from_secs(4),
        ..CapacityConfig::default()
    };
    assert_eq!(refused(&cfg), 50);
    cfg.duration = DurationNs::from_ms(5500);
    assert_eq!(refused(&cfg), 50);
    cfg.duration = DurationNs::from_secs(5);
    cfg.connections = 25;
    assert_eq!(refused(&cfg), 50);
    cfg.connections = 0;
    assert_eq!(refused(&cfg), 50);
}

/// The server vanishes 2.5 s into a downstream test: the client's watchdog
/// ends the connection 3 s later with warning 1 and ErrorStatus 200, and
/// keeps the sub-intervals it had.
#[test]
fn a_vanished_server_ends_the_test_by_the_watchdog() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let srv = server(100.0, None);
    let cfg = client(&srv, Direction::Downstream, Algorithm::B, 1);
    let t0 = std::time::Instant::now();
    let r = std::thread::scope(|s| {
        let h = s.spawn(|| run(&cfg, &mut |_| {}));
        std::thread::sleep(std::time::Duration::from_millis(2500));
        srv.stop();
        h.join().unwrap()
    })
    .expect("the rows so far, with ErrorStatus 200");
    let took = t0.elapsed().as_secs_f64();
    eprintln!("ended after {took:.1} s: {:?}", r.warnings);
    assert_eq!(r.error_status, 200);
    assert!(r.warnings.iter().any(|w| w.code == 1), "{:?}", r.warnings);
    // Sub-intervals keep closing while nothing arrives (as the reference's
    // do); the ones after the server vanished are empty.
    let rows = &r.report.sub_intervals;
    eprintln!(
        "rows: {:?}",
        rows.iter().map(|x| x.rx_datagrams).collect::<Vec<_>>()
    );
    assert!(rows.iter().filter(|x| x.rx_datagrams > 0).count() >= 2);
    assert!(rows.iter().skip(3).all(|x| x.rx_datagrams == 0));
    assert!((5.0..7.5).contains(&took), "{took} s");
}

/// Over IPv6 (when the host has ::1): payloads are 20 bytes shorter so the
/// packets keep IPv4's sizes, the rates count 48 header bytes, and the
/// maximum still sits at the ceiling.
#[test]
fn ipv6_upstream_reaches_the_ceiling() {
    if std::net::UdpSocket::bind("[::1]:0").is_err() {
        // A CI machine must run every test; elsewhere a host without IPv6
        // says why this one did not run.
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "no IPv6 loopback (::1): this test cannot run under CI=true"
        );
        eprintln!("no IPv6 loopback: skipped");
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut c = UdpstServerConfig::new("[::1]:0".parse().unwrap());
    c.max_rate = BitRate::from_mbps(100.0);
    c.open = Some(c.max_rate);
    let srv = spawn_server(c).expect("UDPST server on ::1");
    let (r, rows) = run_ok(&client(&srv, Direction::Upstream, Algorithm::B, 1));
    check(&r, &rows, 1, Some(100.0));
    srv.stop();
}
