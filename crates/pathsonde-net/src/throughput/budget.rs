//! A throughput flow's share of the session's limits (docs/security.md,
//! "Limits"), decided before any data moves, and the memory one flow
//! request can make the server hold.
//!
//! A flow is charged to the same [`SessionBudget`] as probe trains: its
//! rate is checked against `max_rate`, its duration against the session's
//! deadline, and the IP bytes it may move are charged up front (and what it
//! did not move given back after).  [`FlowGate`](super::gate::FlowGate)
//! then holds the flow to what was granted while it runs.

use super::engine::{TCP_CHUNK, TCP_UNIT_IP_BYTES, UDP_SEND_BATCH};
use super::gate::GateLimits;
use super::GRACE;
use crate::limits::{LimitExceeded, SessionBudget};
use pathsonde_wire::flow::{
    FlowProto, FlowSpec, FLOW_HEADER_LEN, MAX_FLOW_PAYLOAD, MAX_FLOW_STREAMS,
};
use std::time::{Duration, Instant};

/// Largest socket buffer (SO_SNDBUF / SO_RCVBUF) the server sets for one
/// stream at a client's request, bytes: enough for 1 Gb/s over 128 ms.
pub const MAX_STREAM_WINDOW: u32 = 16 << 20;
/// Most socket buffer the server sets for all of one flow's streams
/// together, per direction, bytes: more streams each get a smaller share.
pub const MAX_FLOW_WINDOWS: u32 = 32 << 20;

/// Memory one stream's mover holds on the server, at most: its one data
/// buffer (a TCP chunk of ≈ 128 KiB, or a UDP body of < 64 KiB with
/// [`UDP_SEND_BATCH`] headers and the `sendmmsg` vectors), its interval
/// meter and the copy it reports (≤ 601 × 8 B each), and its thread's
/// touched stack.  Independent of the request: a burst is sent batch by
/// batch from one shared body, never as burst × payload.
pub const MAX_STREAM_MEMORY: u64 = 256 << 10;
/// Memory one flow holds beyond its streams: the 64 KiB UDP receive
/// buffer, the report (≤ 16 streams × 601 intervals), allocator slack.
pub const MAX_FLOW_SHARED_MEMORY: u64 = 4 << 20;
/// The most memory (heap and touched stack, i.e. resident set) one flow
/// request can make the server hold, for the largest request
/// [`FlowSpec::check`] allows (16 streams of 8192-datagram bursts of
/// 65 000 bytes, 64 MiB windows, 40 Gb/s, 60 s): 16 × 256 KiB + 4 MiB =
/// 8 MiB.  Before these bounds the same request could allocate
/// 16 × 8192 × 65 000 B ≈ 8.5 GB of burst buffers.  Socket buffers are
/// kernel memory, not counted here; see [`server_window`] and
/// `docs/security.md`.
pub const MAX_FLOW_MEMORY: u64 =
    MAX_FLOW_STREAMS as u64 * MAX_STREAM_MEMORY + MAX_FLOW_SHARED_MEMORY;

/// What a stream's buffers take, checked against the stated bound when
/// compiling: a larger chunk or batch must come with a larger bound.
const _: () = {
    let meters = 2 * 601 * 8;
    let sendmmsg = UDP_SEND_BATCH * (FLOW_HEADER_LEN + 64 + 128 + 32 + 136);
    let udp = MAX_FLOW_PAYLOAD as usize + sendmmsg + meters;
    let tcp = TCP_CHUNK + meters;
    let stack = 64 << 10;
    assert!((udp + stack) as u64 <= MAX_STREAM_MEMORY);
    assert!((tcp + stack) as u64 <= MAX_STREAM_MEMORY);
};

/// The socket buffer the server sets for each of `spec`'s streams: what it
/// asked, but at most [`MAX_STREAM_WINDOW`] and an equal share of
/// [`MAX_FLOW_WINDOWS`] (0, the system's autotuning, stays 0).
pub fn server_window(spec: &FlowSpec) -> u32 {
    let share = MAX_FLOW_WINDOWS / u32::from(spec.streams.max(1));
    spec.window.min(MAX_STREAM_WINDOW).min(share)
}

/// IP bits/s of a UDP flow asking `udp_rate_bps` of payload in
/// `udp_payload`-byte datagrams, each carrying `overhead` header bytes.
fn udp_ip_rate(spec: &FlowSpec, overhead: u64) -> f64 {
    let payload = f64::from(spec.udp_payload.max(1));
    spec.udp_rate_bps as f64 * (payload + overhead as f64) / payload
}

/// Decides what `spec` may move in this session and charges it, or refuses
/// it with the limit named:
///
/// - a flow that would outlast the session is refused;
/// - UDP (either way): a rate above `max_rate` (IP bytes) is refused; the
///   bytes of the asked rate over the duration are charged, and a flow that
///   would pass `max_bytes` is refused;
/// - TCP (either way): the flow is paced at `max_rate`, and charged what it
///   could move at that rate while the server's movers run (a sender for
///   the duration; a receiver also for the [`GRACE`] in which it drains
///   what the sockets buffered) — or, if the session has less left, what
///   is left (the flow then ends early when that is used); a session with
///   nothing left refuses it.
///
/// `overhead` is the IP and UDP header bytes per datagram on this path.
pub fn admit(
    spec: &FlowSpec,
    budget: &mut SessionBudget,
    overhead: u64,
    now: Instant,
) -> Result<GateLimits, LimitExceeded> {
    let flow = super::duration(spec);
    let left = budget.check_time(now)?;
    if flow > left {
        return Err(LimitExceeded::FlowDuration {
            flow_ms: flow.as_millis() as u64,
            left_ms: left.as_millis() as u64,
            max_s: budget.limits().max_duration.as_secs(),
        });
    }
    let max_bps = budget.limits().max_rate.bps();
    let bytes_at = |bps: f64, d: Duration| (bps / 8.0 * d.as_secs_f64()).ceil() as u64;
    let deadline = budget.deadline();
    let limits = |allowance, capped| GateLimits {
        rate_bps: max_bps,
        allowance,
        capped,
        deadline,
    };
    match spec.proto {
        FlowProto::Udp => {
            let asked = udp_ip_rate(spec, overhead);
            if asked > max_bps {
                return Err(LimitExceeded::FlowRate {
                    asked_mbps: asked / 1e6,
                    max_mbps: max_bps / 1e6,
                });
            }
            // A paced sender sends a burst at the start of every period,
            // so it may send one burst per stream beyond the average.
            let burst = u64::from(spec.udp_burst_packets)
                * (u64::from(spec.udp_payload) + overhead)
                * u64::from(spec.streams);
            let bytes = bytes_at(asked, flow).saturating_add(if spec.reverse { 0 } else { burst });
            budget.charge(bytes)?;
            Ok(limits(bytes, false))
        }
        FlowProto::Tcp => {
            let moving = if spec.reverse { flow } else { flow + GRACE };
            let want = bytes_at(max_bps, moving);
            let grant = want.min(budget.remaining());
            if grant < TCP_UNIT_IP_BYTES {
                return Err(LimitExceeded::Bytes {
                    used: budget.used(),
                    wanted: want,
                    max: budget.limits().max_bytes,
                });
            }
            budget.charge(grant)?;
            Ok(limits(grant, grant < want))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::Limits;
    use pathsonde_core::BitRate;
    use pathsonde_wire::flow::{MAX_FLOW_BUFFER, MAX_FLOW_BURST_PACKETS};

    fn udp(rate_bps: u64, reverse: bool) -> FlowSpec {
        FlowSpec {
            proto: FlowProto::Udp,
            streams: 2,
            duration_ms: 1000,
            interval_ms: 250,
            reverse,
            window: 0,
            full_duplex_buffers: false,
            udp_rate_bps: rate_bps,
            udp_payload: 1472,
            udp_burst_packets: 1,
        }
    }

    fn budget(max_mbps: f64, max_bytes: u64) -> SessionBudget {
        SessionBudget::new(
            &Limits {
                max_rate: BitRate::from_mbps(max_mbps),
                max_bytes,
                max_duration: Duration::from_secs(10),
                ..Limits::default()
            },
            Instant::now(),
        )
    }

    #[test]
    fn a_udp_flow_faster_than_the_limit_is_refused_with_the_limit_named() {
        let mut b = budget(50.0, 1_000_000_000);
        let e = admit(&udp(1_000_000_000, true), &mut b, 28, Instant::now()).unwrap_err();
        assert!(
            e.to_string()
                .contains("flow asks 1019 Mb/s, above the server's 50 Mb/s"),
            "{e}"
        );
        assert_eq!(b.used(), 0, "a refused flow is not charged");
        // 40 Mb/s of payload is 40.8 Mb/s of IP: allowed, and charged.
        let g = admit(&udp(40_000_000, true), &mut b, 28, Instant::now()).unwrap();
        assert_eq!(g.allowance, 5_095_109);
        assert_eq!(b.used(), g.allowance);
        assert!(!g.capped && g.rate_bps == 50e6);
    }

    #[test]
    fn a_udp_flow_past_the_session_bytes_is_refused() {
        let mut b = budget(50.0, 4_000_000);
        let e = admit(&udp(40_000_000, true), &mut b, 28, Instant::now()).unwrap_err();
        assert!(matches!(e, LimitExceeded::Bytes { .. }), "{e}");
        // Forward: the receiver allows one burst per stream beyond the average.
        let mut b = budget(50.0, 1_000_000_000);
        let g = admit(&udp(40_000_000, false), &mut b, 28, Instant::now()).unwrap();
        assert_eq!(g.allowance, 5_095_109 + 2 * 1500);
    }

    #[test]
    fn a_tcp_flow_is_paced_and_cut_to_what_the_session_has_left() {
        let mut b = budget(50.0, 1_000_000_000);
        let mut tcp = udp(0, true);
        tcp.proto = FlowProto::Tcp;
        let g = admit(&tcp, &mut b, 28, Instant::now()).unwrap();
        assert_eq!((g.allowance, g.capped), (6_250_000, false));
        let mut b = budget(50.0, 2_000_000);
        let g = admit(&tcp, &mut b, 28, Instant::now()).unwrap();
        assert_eq!((g.allowance, g.capped), (2_000_000, true));
        let e = admit(&tcp, &mut b, 28, Instant::now()).unwrap_err();
        assert!(matches!(e, LimitExceeded::Bytes { .. }), "{e}");
        // Received, it may also drain for the grace after the duration.
        tcp.reverse = false;
        let mut b = budget(50.0, 1_000_000_000);
        let g = admit(&tcp, &mut b, 28, Instant::now()).unwrap();
        assert_eq!(g.allowance, 6_250_000 * (1 + GRACE.as_secs()));
    }

    #[test]
    fn a_flow_that_would_outlast_the_session_is_refused() {
        let mut b = budget(50.0, 1_000_000_000);
        let mut long = udp(1_000_000, true);
        long.duration_ms = 9_000;
        let e = admit(&long, &mut b, 28, Instant::now() + Duration::from_secs(2)).unwrap_err();
        assert!(e.to_string().contains("would outlast the session"), "{e}");
    }

    #[test]
    fn windows_are_capped_per_stream_and_per_flow() {
        let mut s = udp(1, true);
        s.window = MAX_FLOW_BUFFER;
        s.streams = 1;
        assert_eq!(server_window(&s), MAX_STREAM_WINDOW);
        s.streams = MAX_FLOW_STREAMS;
        assert_eq!(server_window(&s), MAX_FLOW_WINDOWS / 16);
        s.window = 0;
        assert_eq!(server_window(&s), 0);
    }

    #[test]
    fn the_stated_bound_is_far_below_what_burst_buffers_would_take() {
        let burst_buffers = u64::from(MAX_FLOW_BURST_PACKETS)
            * u64::from(MAX_FLOW_PAYLOAD)
            * MAX_FLOW_STREAMS as u64;
        assert_eq!(MAX_FLOW_MEMORY, 8 << 20);
        assert!(MAX_FLOW_MEMORY * 100 < burst_buffers);
    }
}
