//! The memory one throughput flow request can make the server hold is a
//! constant, whatever the request asks (docs/security.md, "Limits"): the
//! largest requests `FlowSpec::check` allows, run against a real server in
//! this process over loopback, grow the process's resident set by less than
//! `MAX_FLOW_MEMORY`.  Its own test binary, so no other test's allocations
//! move the figure.
//!
//! Not vacuous: the request's bursts are 8192 datagrams of 65 000 bytes on
//! each of 16 streams, so a sender that held a burst's datagrams (as the
//! engine once did) would add ≈ 8.5 GB — three orders of magnitude above
//! the bound — and the flows must be seen to move data.

use pathsonde_core::BitRate;
use pathsonde_net::client::{Client, ClientConfig};
use pathsonde_net::limits::Limits;
use pathsonde_net::throughput::budget::MAX_FLOW_MEMORY;
use pathsonde_net::throughput::run_flow;
use pathsonde_net::{Server, ServerConfig};
use pathsonde_wire::flow::{
    FlowProto, FlowSpec, MAX_FLOW_BUFFER, MAX_FLOW_BURST_PACKETS, MAX_FLOW_PAYLOAD,
    MAX_FLOW_STREAMS,
};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// This process's resident set, bytes (VmRSS in /proc/self/status).
fn rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("reading /proc/self/status");
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("a VmRSS line");
    kb * 1024
}

/// The largest request of `proto` the wire allows, except for its rate
/// (kept under the server's limit so it is admitted) and a short duration.
fn largest(proto: FlowProto, reverse: bool) -> FlowSpec {
    let spec = FlowSpec {
        proto,
        streams: MAX_FLOW_STREAMS,
        duration_ms: 600,
        interval_ms: 100,
        reverse,
        window: MAX_FLOW_BUFFER,
        full_duplex_buffers: true,
        udp_rate_bps: 19_000_000,
        udp_payload: MAX_FLOW_PAYLOAD,
        udp_burst_packets: MAX_FLOW_BURST_PACKETS,
    };
    spec.check().expect("the wire allows it");
    spec
}

#[test]
fn the_largest_flow_requests_stay_under_the_stated_memory_bound() {
    let mut cfg = ServerConfig::new(SocketAddr::from(([127, 0, 0, 1], 0)));
    // A low rate keeps the test light; what is held does not depend on it.
    cfg.limits = Limits {
        max_rate: BitRate::from_mbps(20.0),
        ..Limits::default()
    };
    let h = Server::bind(cfg).unwrap().spawn().unwrap();
    let mut c = Client::connect(ClientConfig::new(h.local_addr())).unwrap();

    // Warm up with small flows on as many streams: thread-local and
    // allocator state that any flow creates is in the baseline.
    for proto in [FlowProto::Udp, FlowProto::Tcp] {
        let mut small = largest(proto, true);
        small.duration_ms = 200;
        small.window = 0;
        small.udp_payload = 1000;
        small.udp_burst_packets = 1;
        run_flow(&mut c, &small).unwrap();
    }

    let baseline = rss_bytes();
    let peak = AtomicU64::new(baseline);
    let samples = AtomicU64::new(0);
    let done = AtomicBool::new(false);
    let received = std::thread::scope(|s| {
        s.spawn(|| {
            while !done.load(Ordering::SeqCst) {
                peak.fetch_max(rss_bytes(), Ordering::SeqCst);
                samples.fetch_add(1, Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        let mut received = Vec::new();
        for spec in [
            largest(FlowProto::Udp, true),
            largest(FlowProto::Tcp, true),
            largest(FlowProto::Tcp, false),
        ] {
            let r = run_flow(&mut c, &spec).unwrap();
            received.push((spec.proto, spec.reverse, r.received().get()));
        }
        peak.fetch_max(rss_bytes(), Ordering::SeqCst);
        done.store(true, Ordering::SeqCst);
        received
    });
    c.close();
    h.stop().unwrap();

    let growth = peak.load(Ordering::SeqCst).saturating_sub(baseline);
    eprintln!(
        "RSS {baseline} B before, growth {growth} B at peak over {} samples; bound {MAX_FLOW_MEMORY} B; received {received:?}",
        samples.load(Ordering::SeqCst)
    );
    for (proto, reverse, bytes) in &received {
        assert!(*bytes > 0, "{proto:?} reverse={reverse} moved nothing");
    }
    assert!(
        samples.load(Ordering::SeqCst) >= 20,
        "the flows were sampled"
    );
    assert!(
        growth < MAX_FLOW_MEMORY,
        "the largest flows grew RSS by {growth} B, above the stated {MAX_FLOW_MEMORY} B"
    );
}
