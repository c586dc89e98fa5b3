//! Throughput flows and the MBS search over loopback, with the real client
//! and server: both ends report, reverse flows run, limits are enforced.

use pathsonde_core::{BitRate, Bytes};
use pathsonde_net::client::{Client, ClientConfig};
use pathsonde_net::limits::Limits;
use pathsonde_net::throughput::{measure_mbs, run_flow};
use pathsonde_net::{NetError, Server, ServerConfig};
use pathsonde_wire::control::ErrorCode;
use pathsonde_wire::flow::{FlowProto, FlowSpec};
use std::net::SocketAddr;
use std::time::Duration;

/// A session on a server whose byte limit loopback will not reach: TCP
/// over loopback moves even the default 10 GB in seconds, and these
/// tests are about flows, not the limit (which has tests of its own).
fn session() -> (pathsonde_net::ServerHandle, Client) {
    limited_session(roomy())
}

fn roomy() -> Limits {
    Limits {
        max_bytes: 1 << 40,
        ..Limits::default()
    }
}

/// A server with `limits` on loopback, and a client's session on it.
fn limited_session(limits: Limits) -> (pathsonde_net::ServerHandle, Client) {
    let mut cfg = ServerConfig::new(SocketAddr::from(([127, 0, 0, 1], 0)));
    cfg.limits = limits;
    let h = Server::bind(cfg).unwrap().spawn().unwrap();
    let c = Client::connect(ClientConfig::new(h.local_addr())).unwrap();
    (h, c)
}

fn limits(max_mbps: f64, max_bytes: u64) -> Limits {
    Limits {
        max_rate: BitRate::from_mbps(max_mbps),
        max_bytes,
        ..Limits::default()
    }
}

/// Payload bits the client received per second of the flow's duration:
/// what the server sent, over the time it was allowed to send it.
fn received_rate_mbps(r: &pathsonde_net::throughput::FlowResult) -> f64 {
    r.received().get() as f64 * 8.0 / (f64::from(r.spec.duration_ms) / 1e3) / 1e6
}

fn spec(proto: FlowProto, streams: u16, reverse: bool) -> FlowSpec {
    FlowSpec {
        proto,
        streams,
        duration_ms: 600,
        interval_ms: 200,
        reverse,
        window: 0,
        full_duplex_buffers: false,
        udp_rate_bps: 50_000_000,
        udp_payload: 1472,
        udp_burst_packets: 4,
    }
}

#[test]
fn tcp_flows_both_ways_with_both_ends_reporting() {
    let (h, mut c) = session();
    for reverse in [false, true] {
        let r = run_flow(&mut c, &spec(FlowProto::Tcp, 2, reverse)).unwrap();
        assert_eq!(r.sender().streams.len(), 2, "{r:?}");
        assert_eq!(r.receiver().streams.len(), 2);
        assert!(r.sender().sender && !r.receiver().sender);
        let sent: u64 = r.sender().streams.iter().map(|s| s.bytes).sum();
        // Every byte written arrived (TCP), and loopback moves plenty.
        assert_eq!(r.received().get(), sent, "reverse={reverse}");
        assert!(r.throughput().mbps() > 50.0, "{}", r.throughput());
        // TCP_INFO from both ends.
        let tcp = r.sender().streams[0].tcp.unwrap();
        assert!(tcp.bytes_acked > 0 && tcp.snd_cwnd > 0);
        assert!(r.receiver().streams[0].tcp.unwrap().bytes_received > 0);
        assert!(r.interval_rates().len() >= 3);
    }
    c.close();
    h.stop().unwrap();
}

#[test]
fn udp_flows_are_paced_and_counted() {
    let (h, mut c) = session();
    for reverse in [false, true] {
        let r = run_flow(&mut c, &spec(FlowProto::Udp, 2, reverse)).unwrap();
        let rate = r.sent_rate().mbps();
        // 50 Mb/s of payload asked; pacing holds it within a loose band.
        assert!((35.0..65.0).contains(&rate), "reverse={reverse}: {rate}");
        assert!(r.udp_loss().unwrap() < 0.2, "{:?}", r.udp_loss());
        assert!(r.received().get() > 1_000_000, "{}", r.received());
    }
    c.close();
    h.stop().unwrap();
}

#[test]
fn a_flow_the_hosts_carried_in_full_names_no_host_limit() {
    let (h, mut c) = session();
    for reverse in [false, true] {
        let r = run_flow(&mut c, &spec(FlowProto::Udp, 1, reverse)).unwrap();
        // Both ends count their receiving socket's own drops.
        assert!(r.receiver_drops.is_some(), "reverse={reverse}");
        let binding: Vec<_> = r.host_limits().binding().cloned().collect();
        assert!(binding.is_empty(), "reverse={reverse}: {binding:?}");
    }
    c.close();
    h.stop().unwrap();
}

#[test]
fn a_udp_sender_asked_more_than_it_can_send_reads_at_least() {
    // 5 Gb/s of 64-byte datagrams is ten million a second: no socket
    // sender reaches it, and loopback loses nothing but what a socket
    // drops, which the receiver counts apart.
    let (h, mut c) = session();
    for reverse in [false, true] {
        let mut fast = spec(FlowProto::Udp, 1, reverse);
        fast.udp_rate_bps = 5_000_000_000;
        fast.udp_payload = 64;
        fast.udp_burst_packets = 64;
        let r = run_flow(&mut c, &fast).unwrap();
        let e = r.evidence();
        assert!(e.sent.bps() < 0.95 * 5e9, "sent {}", e.sent);
        let lost = e.datagrams_sent - e.datagrams_received;
        let drops = r.receiver_drops.expect("the receiver counts its drops");
        assert!(drops <= lost, "{drops} socket drops of {lost} lost");
        let limits = r.host_limits().limits;
        let pacing = limits
            .iter()
            .find(|l| l.resource == pathsonde_core::verdict::Resource::Pacing)
            .unwrap_or_else(|| panic!("reverse={reverse}: no pacing limit in {limits:?}"));
        let sender = if reverse {
            pathsonde_core::verdict::HostRole::Server
        } else {
            pathsonde_core::verdict::HostRole::Client
        };
        assert_eq!(pacing.host, sender);
        // Loopback lost nothing the receiving socket did not drop (a few
        // datagrams may still sit unread when the receiver stops).
        assert!(
            pacing.binds_result || (lost - drops) as f64 > 0.01 * e.datagrams_sent as f64,
            "reverse={reverse}: {pacing:?}"
        );
    }
    c.close();
    h.stop().unwrap();
}

#[test]
fn a_tcp_flow_held_by_a_tiny_receive_window_is_the_receivers() {
    let (h, mut c) = session();
    let mut small = spec(FlowProto::Tcp, 1, false);
    // 1 KiB: the kernel rounds it up to its minimum receive buffer, which
    // holds a loopback stream to its window most of its busy time even on a
    // loaded machine (4 KiB did so only 42–49 % of the time under load).
    small.window = 1024;
    // Loopback is CPU-bound as well: on a busy machine a stream is
    // sometimes held by its sender's core more than by its window.  Up to
    // three flows until one the kernel counted window-limited at least
    // half its busy time; the verdict must bind on the receiving end's
    // window in that one, and in none where the share was under the rule.
    // Which resource it names depends on loopback's microsecond RTT: at
    // about 10 µs a 1 KiB buffer can be 4 BDPs, and the rule then names
    // the reader (verdict/flow.rs's unit tests hold the distinction).
    let mut shares = Vec::new();
    let named = (0..3).any(|_| {
        let r = run_flow(&mut c, &small).unwrap();
        let e = r.evidence();
        assert!(e.busy.ns() > 0, "the kernel counted no busy time: {e:?}");
        let share = e.rwnd_limited.ns() as f64 / e.busy.ns() as f64;
        shares.push(share);
        let limits = r.host_limits().limits;
        let blamed = limits.iter().any(|l| {
            use pathsonde_core::verdict::{HostRole, Resource};
            l.binds_result
                && l.host == HostRole::Server
                && matches!(l.resource, Resource::SocketBuffer | Resource::Receiver)
        });
        assert_eq!(
            blamed,
            share >= pathsonde_core::verdict::flow::WINDOW_LIMITED_SHARE,
            "{e:?}: {limits:?}"
        );
        blamed
    });
    assert!(
        named,
        "no 1 KiB flow was window-limited half its busy time: {shares:?}"
    );
    // The same flow with the kernel's autotuning is not held by its
    // buffer; at loopback's gigabits a window the reader kept full is the
    // receiver's (its CPU), and is named so.
    let r = run_flow(&mut c, &spec(FlowProto::Tcp, 1, false)).unwrap();
    let limits = r.host_limits().limits;
    assert!(
        !limits
            .iter()
            .any(|l| l.resource == pathsonde_core::verdict::Resource::SocketBuffer),
        "{:?}: {limits:?}",
        r.evidence()
    );
    c.close();
    h.stop().unwrap();
}

#[test]
fn out_of_bounds_flows_are_refused() {
    let (h, mut c) = session();
    let mut bad = spec(FlowProto::Tcp, 1, false);
    bad.streams = 100;
    assert!(matches!(run_flow(&mut c, &bad), Err(NetError::Input(_))));
    bad.streams = 1;
    bad.duration_ms = 3_600_000;
    assert!(run_flow(&mut c, &bad).is_err());
    c.close();
    h.stop().unwrap();
}

#[test]
fn a_server_limited_to_50_mbps_never_sends_a_flow_faster() {
    // TCP, server sending: paced at the limit (loopback alone would carry
    // gigabits).  Upper bounds only: a loaded machine may send less.
    let (h, mut c) = limited_session(limits(50.0, 1_000_000_000));
    let mut tcp = spec(FlowProto::Tcp, 4, true);
    tcp.duration_ms = 1000;
    let r = run_flow(&mut c, &tcp).unwrap();
    let rate = received_rate_mbps(&r);
    assert!(rate <= 1.1 * 50.0, "TCP -R moved {rate:.1} Mb/s");
    assert!(r.received().get() > 0, "{r:?}");
    // UDP at 45 Mb/s in bursts of 8192 datagrams: allowed, and still never
    // faster than the limit over the flow.
    let mut udp = spec(FlowProto::Udp, 2, true);
    udp.duration_ms = 1000;
    udp.udp_rate_bps = 45_000_000;
    udp.udp_burst_packets = 8192;
    let r = run_flow(&mut c, &udp).unwrap();
    let rate = received_rate_mbps(&r);
    assert!(rate <= 1.1 * 50.0, "UDP -R moved {rate:.1} Mb/s");
    // The server receiving TCP reads no faster than the limit either, and
    // TCP's flow control holds the client to it (what the socket buffers
    // held when the client stopped is read after its duration, so this is
    // the server's rate over its first to last byte).
    let mut fwd = spec(FlowProto::Tcp, 2, false);
    fwd.duration_ms = 1000;
    let r = run_flow(&mut c, &fwd).unwrap();
    let rate = r.throughput().mbps();
    assert!(
        rate <= 1.1 * 50.0,
        "TCP forward: the server took {rate:.1} Mb/s"
    );
    assert!(r.received().get() > 0, "{r:?}");
    c.close();
    // A UDP flow asking more than the limit is refused, the limit named.
    let mut fast = spec(FlowProto::Udp, 1, true);
    fast.udp_rate_bps = 1_000_000_000;
    let (_, mut c) = (
        0,
        Client::connect(ClientConfig::new(h.local_addr())).unwrap(),
    );
    match run_flow(&mut c, &fast) {
        Err(NetError::Server(m)) => {
            assert_eq!(m.code, ErrorCode::Limit);
            assert!(
                m.message
                    .contains("session limit: flow asks 1019 Mb/s, above the server's 50 Mb/s"),
                "{m}"
            )
        }
        other => panic!("a 1 Gb/s flow from a 50 Mb/s server: {other:?}"),
    }
    h.stop().unwrap();
}

#[test]
fn flows_beyond_the_session_bytes_are_refused_or_cut() {
    // 2 MB per session at 50 Mb/s.  A UDP flow of 40 Mb/s for a second
    // (5 MB) is refused before anything moves.
    let (h, mut c) = limited_session(limits(50.0, 2_000_000));
    let mut udp = spec(FlowProto::Udp, 1, true);
    udp.duration_ms = 1000;
    udp.udp_rate_bps = 40_000_000;
    match run_flow(&mut c, &udp) {
        Err(NetError::Server(m)) => {
            assert_eq!(m.code, ErrorCode::Limit);
            assert!(m.message.contains("session limit"), "{m}")
        }
        other => panic!("a 5 MB flow in a 2 MB session: {other:?}"),
    }
    // TCP either way is cut to what the session has left, and says so.
    for reverse in [true, false] {
        let mut c = Client::connect(ClientConfig::new(h.local_addr())).unwrap();
        let mut tcp = spec(FlowProto::Tcp, 2, reverse);
        tcp.duration_ms = 1000;
        let r = run_flow(&mut c, &tcp).unwrap();
        assert!(
            r.received().get() <= 2_000_000,
            "reverse={reverse}: {} bytes",
            r.received()
        );
        let why = r.server.error.clone().unwrap_or_default();
        assert!(why.contains("session limit"), "reverse={reverse}: {why:?}");
        // The session's bytes are used: the next flow is refused.
        assert!(matches!(run_flow(&mut c, &tcp), Err(NetError::Server(_))));
    }
    h.stop().unwrap();
}

#[test]
fn mbs_over_loopback_finds_no_limit_below_the_cap() {
    let (h, mut c) = session();
    let m = measure_mbs(
        &mut c,
        Bytes(1500),
        Bytes(150_000),
        2,
        Duration::from_millis(50),
        &mut |_| {},
    )
    .unwrap();
    // Loopback with 4 MiB socket buffers holds a 150 KB burst.
    assert_eq!(m.summary.median, Bytes(150_000), "{m:?}");
    assert!(m.summary.at_least);
    assert!(m.bursts >= 2);
    // Loopback drains as fast as the sender bursts: the line speed and the
    // unbounded MBS are the sender's, and the report says so.
    assert_eq!(m.receiver_drops, Some(0), "{m:?}");
    let pacing = m
        .host_limits
        .iter()
        .find(|l| l.resource == pathsonde_core::verdict::Resource::Pacing)
        .unwrap_or_else(|| panic!("no pacing limit: {m:?}"));
    assert!(pacing.binds_result, "{pacing:?}");
    c.close();
    h.stop().unwrap();
}

#[test]
fn measure_over_loopback_reports_bounds_and_sizes_nothing_from_them() {
    use pathsonde_net::throughput::measure::{measure, MeasureOptions};
    let mut cfg = ServerConfig::new(SocketAddr::from(([127, 0, 0, 1], 0)));
    cfg.limits = roomy();
    let h = Server::bind(cfg).unwrap().spawn().unwrap();
    let mut opts = MeasureOptions::new(h.local_addr());
    opts.budget = Duration::from_secs(12);
    opts.sweep = vec![1, 2];
    opts.max_burst = Bytes(300_000);
    opts.max_rate = pathsonde_core::BitRate::from_mbps(300.0);
    let mut lines = Vec::new();
    let r = measure(&opts, &mut |l| lines.push(l.to_string())).unwrap();
    assert!(r.mbs.is_some() && !r.udp_ramp.is_empty() && r.udp_single.is_some());
    assert_eq!(r.tcp_sweep.len(), 2, "{:?}", r.notes);
    // Loopback is faster than the 300 Mb/s ceiling: FAC² and the UDP ramp
    // only show lower bounds, and no window or stream count is sized from
    // a bound (the lab test covers a path that pushes back).
    assert!(r.optimal_window.is_none() && r.streams.is_none() && r.tcp_tuned.is_none());
    assert!(
        r.notes.iter().any(|n| n.contains("lower bound")),
        "{:?}",
        r.notes
    );
    assert!(!lines.is_empty());
    // Loose: the budget is a plan, not a guarantee, on a shared machine.
    assert!(r.duration_s.secs_f64() < 30.0, "{}", r.duration_s);
    h.stop().unwrap();
}
