//! The data movers both ends share: a TCP sender and receiver, a paced UDP
//! sender and a counting UDP receiver, each keeping bytes per interval and
//! each going only as far and as fast as the flow's [`FlowGate`] allows.
//!
//! What each mover holds is fixed, whatever the request: one TCP chunk, or
//! one UDP payload plus [`UDP_SEND_BATCH`] headers (a burst is sent batch by
//! batch, every datagram gathered from its header and the one shared body).

use super::gate::{self, FlowGate};
use super::tcp_info;
use crate::udp::{ip_udp_overhead, BatchSender, IPV4_UDP_OVERHEAD};
use pathsonde_core::BitRate;
use pathsonde_wire::flow::{FlowDatagram, FlowSpec, StreamSide, FLOW_HEADER_LEN};
use socket2::SockRef;
use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

/// Bytes per interval since a common start.
#[derive(Debug, Clone)]
pub struct Meter {
    start: Instant,
    interval: Duration,
    buckets: Vec<u64>,
    first: Option<Instant>,
    last: Option<Instant>,
}

impl Meter {
    pub fn new(start: Instant, interval: Duration, intervals: usize) -> Meter {
        Meter {
            start,
            interval: interval.max(Duration::from_millis(1)),
            buckets: vec![0; intervals.max(1)],
            first: None,
            last: None,
        }
    }
    pub fn add(&mut self, now: Instant, bytes: u64) {
        let i = (now.saturating_duration_since(self.start).as_nanos()
            / self.interval.as_nanos().max(1)) as usize;
        let last = self.buckets.len() - 1;
        self.buckets[i.min(last)] += bytes;
        self.first.get_or_insert(now);
        self.last = Some(now);
    }
    /// The per-interval counts, and first to last byte in ns.
    pub fn finish(self) -> (Vec<u64>, u64) {
        let elapsed = match self.span() {
            Some((f, l)) => l.duration_since(f).as_nanos() as u64,
            None => 0,
        };
        (self.buckets, elapsed)
    }
    /// When the first and last byte passed.
    pub fn span(&self) -> Option<(Instant, Instant)> {
        Some((self.first?, self.last?))
    }
}

/// Sets the send and receive buffers (0 = leave the system's, so TCP
/// autotunes).  Plain SO_SNDBUF/SO_RCVBUF, as an application would: capped
/// by net.core.wmem_max / rmem_max.
pub fn set_buffers(sock: SockRef<'_>, sndbuf: u32, rcvbuf: u32) {
    if sndbuf > 0 {
        let _ = sock.set_send_buffer_size(sndbuf as usize);
    }
    if rcvbuf > 0 {
        let _ = sock.set_recv_buffer_size(rcvbuf as usize);
    }
}

fn buffers(sock: SockRef<'_>) -> (u32, u32) {
    (
        sock.send_buffer_size().unwrap_or(0) as u32,
        sock.recv_buffer_size().unwrap_or(0) as u32,
    )
}

/// TCP payload bytes counted as one unit against a flow's limits, and the
/// IP bytes charged for it: an Ethernet-MTU segment with timestamps (1448
/// of payload in 1500).  Loopback's larger segments carry relatively less
/// header, so the charge errs high, never low.
pub const TCP_UNIT_PAYLOAD: usize = 1448;
pub const TCP_UNIT_IP_BYTES: u64 = 1500;
/// Units one TCP write or read moves at most (about 128 KiB).
const TCP_CHUNK_UNITS: usize = 90;
/// The one buffer each TCP mover holds, bytes.
pub const TCP_CHUNK: usize = TCP_CHUNK_UNITS * TCP_UNIT_PAYLOAD;
/// Datagrams per `sendmmsg`: a UDP sender holds this many headers, and
/// asks the gate for at most this many datagrams at once.
pub const UDP_SEND_BATCH: usize = 64;

/// One stream's side and when its first and last byte passed.
#[derive(Debug, Clone)]
pub struct Moved {
    pub side: StreamSide,
    pub span: Option<(Instant, Instant)>,
}

/// One end's report from its streams: the union of their spans is the
/// flow's elapsed time.
pub fn flow_side(
    sender: bool,
    moved: Vec<Moved>,
    error: Option<String>,
) -> pathsonde_wire::flow::FlowSide {
    let first = moved.iter().filter_map(|m| m.span.map(|s| s.0)).min();
    let last = moved.iter().filter_map(|m| m.span.map(|s| s.1)).max();
    let elapsed_ns = match (first, last) {
        (Some(f), Some(l)) => l.duration_since(f).as_nanos() as u64,
        _ => 0,
    };
    let mut streams: Vec<StreamSide> = moved.into_iter().map(|m| m.side).collect();
    streams.sort_by_key(|s| s.stream);
    pathsonde_wire::flow::FlowSide {
        sender,
        streams,
        elapsed_ns,
        error,
        limits: buffer_limits(),
    }
}

/// This namespace's socket-buffer limits, read now (a sysctl changed after
/// the server started still shows).
pub fn buffer_limits() -> pathsonde_wire::flow::BufferLimits {
    let sys = crate::host::sysctls::probe();
    pathsonde_wire::flow::BufferLimits {
        tcp_rmem_max: sys.tcp_rmem_bytes.value().map(|t| t[2]),
        tcp_wmem_max: sys.tcp_wmem_bytes.value().map(|t| t[2]),
        rmem_max: sys.rmem_max_bytes.value().copied(),
        wmem_max: sys.wmem_max_bytes.value().copied(),
    }
}

/// Writes to `s` until `until` (or the gate stops the flow, or grants no
/// more), then closes the sending half and waits (up to `drain`) for the
/// receiver to close, so the final TCP_INFO counts every acknowledgement.
pub fn tcp_send(
    mut s: TcpStream,
    stream: u16,
    until: Instant,
    drain: Duration,
    mut meter: Meter,
    gate: &FlowGate,
) -> Moved {
    let buf = vec![0x5au8; TCP_CHUNK];
    let mut bytes = 0u64;
    let _ = s.set_write_timeout(Some(Duration::from_millis(200)));
    'send: while Instant::now() < until {
        let units = gate.take(TCP_CHUNK_UNITS as u64, TCP_UNIT_IP_BYTES, until) as usize;
        if units == 0 {
            break;
        }
        let mut chunk = &buf[..units * TCP_UNIT_PAYLOAD];
        while !chunk.is_empty() {
            if Instant::now() >= until || gate.stopped() {
                break 'send;
            }
            match s.write(chunk) {
                Ok(0) => break 'send,
                Ok(n) => {
                    bytes += n as u64;
                    meter.add(Instant::now(), n as u64);
                    chunk = &chunk[n..];
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                    ) => {}
                Err(_) => break 'send,
            }
        }
    }
    let _ = s.shutdown(std::net::Shutdown::Write);
    let _ = s.set_read_timeout(Some(Duration::from_millis(100)));
    let waited = Instant::now();
    let mut sink = [0u8; 4096];
    // A flow stopped for a reason (a limit, a failed stream) ends now.
    while waited.elapsed() < drain && gate.reason().is_none() {
        match s.read(&mut sink) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                ) => {}
            Err(_) => break,
        }
    }
    tcp_moved(&s, stream, bytes, meter)
}

/// One TCP stream's tally at its end: bytes, intervals, and the kernel's
/// TCP_INFO and buffer sizes read before this end closes.
fn tcp_moved(s: &TcpStream, stream: u16, bytes: u64, meter: Meter) -> Moved {
    let tcp = tcp_info::read(s);
    let (sndbuf, rcvbuf) = buffers(SockRef::from(s));
    let span = meter.span();
    let (intervals, elapsed_ns) = meter.finish();
    let side = StreamSide {
        stream,
        bytes,
        packets: 0,
        highest_seq: 0,
        intervals,
        elapsed_ns,
        tcp,
        sndbuf,
        rcvbuf,
    };
    Moved { side, span }
}

/// Reads `s` until the sender closes, `deadline`, or the gate stops the
/// flow; every read is first granted by the gate, so a limited reader
/// slows the remote sender through TCP's flow control.  TCP_INFO is read
/// before this end closes.
pub fn tcp_recv(
    mut s: TcpStream,
    stream: u16,
    deadline: Instant,
    mut meter: Meter,
    gate: &FlowGate,
) -> Moved {
    let mut buf = vec![0u8; TCP_CHUNK];
    let mut bytes = 0u64;
    let _ = s.set_read_timeout(Some(Duration::from_millis(100)));
    while Instant::now() < deadline {
        let units = gate.take(TCP_CHUNK_UNITS as u64, TCP_UNIT_IP_BYTES, deadline) as usize;
        if units == 0 {
            break;
        }
        let read = s.read(&mut buf[..units * TCP_UNIT_PAYLOAD]);
        let used = match &read {
            Ok(n) => n.div_ceil(TCP_UNIT_PAYLOAD),
            Err(_) => 0,
        };
        gate.give_back((units - used) as u64, TCP_UNIT_IP_BYTES);
        match read {
            Ok(0) => break,
            Ok(n) => {
                bytes += n as u64;
                meter.add(Instant::now(), n as u64);
            }
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                ) => {}
            Err(_) => break,
        }
    }
    tcp_moved(&s, stream, bytes, meter)
}

/// How one UDP stream is paced.
#[derive(Debug, Clone, Copy)]
pub struct UdpPace {
    pub token: u64,
    pub stream: u16,
    /// This stream's rate, of UDP payload.
    pub rate_bps: BitRate,
    pub payload: usize,
    /// Datagrams per burst (sent back to back with one `sendmmsg`).
    pub burst: u32,
}

/// Most bursts a late sender sends at once to catch up with its schedule;
/// beyond that the backlog is dropped (the sender was descheduled: on a
/// loaded host the achieved rate then falls short and says so).
pub const MAX_CATCH_UP_BURSTS: u64 = 4;

/// Sends one paced UDP stream from each socket, each in its own thread at
/// `rate_bps` (of payload), from `start` for the flow's duration; the
/// streams' tallies (a sender thread that panicked is left out, and stops
/// the others through the gate).  Both ends use it: the client for forward
/// flows, the server for reverse ones.
pub fn udp_send_all(
    socks: &[(u16, UdpSocket)],
    token: u64,
    rate_bps: BitRate,
    spec: &FlowSpec,
    start: Instant,
    meter: &Meter,
    gate: &FlowGate,
) -> Vec<Moved> {
    let until = start + super::duration(spec);
    gate::run_streams(gate, socks.iter().collect(), |(i, sock)| {
        let pace = UdpPace {
            token,
            stream: *i,
            rate_bps,
            payload: usize::from(spec.udp_payload),
            burst: spec.udp_burst_packets,
        };
        udp_send(sock, pace, until, meter.clone(), gate)
    })
}

/// A token whose flows' stream 1 panics after its first batch: lets tests
/// show that one failed sender stops the rest.
#[cfg(test)]
pub(crate) const PANIC_TEST_TOKEN: u64 = 0xDEAD_57EA_4000_0001;

/// Sends `pace` on the connected socket `sock` until `until`: one burst per
/// period (burst × payload × 8 / rate), each burst back to back in batches
/// of [`UDP_SEND_BATCH`] as the gate allows.  A sender that falls behind
/// sends up to [`MAX_CATCH_UP_BURSTS`] due bursts at once.  It holds one
/// payload-sized body and a batch of headers, however long the burst.
pub fn udp_send(
    sock: &UdpSocket,
    pace: UdpPace,
    until: Instant,
    mut meter: Meter,
    gate: &FlowGate,
) -> Moved {
    let burst = u64::from(pace.burst.max(1));
    let payload = pace.payload.max(FLOW_HEADER_LEN);
    let body = vec![0u8; payload - FLOW_HEADER_LEN];
    let mut heads = [[0u8; FLOW_HEADER_LEN]; UDP_SEND_BATCH];
    let overhead = sock
        .peer_addr()
        .map(|a| ip_udp_overhead(&a))
        .unwrap_or(IPV4_UDP_OVERHEAD);
    let cost = payload as u64 + overhead;
    let period_s = (burst as f64 * payload as f64 * 8.0 / pace.rate_bps.bps().max(1.0)).max(1e-9);
    let mut batch = BatchSender::new(UDP_SEND_BATCH);
    let mut seq = 0u64;
    let mut bytes = 0u64;
    let mut packets = 0u64;
    let start = Instant::now();
    let mut done = 0u64;
    'flow: while Instant::now() < until {
        let due_at = start
            .checked_add(Duration::from_secs_f64(done as f64 * period_s))
            .unwrap_or(until);
        if !gate::sleep_until(gate, due_at, until) {
            break;
        }
        let elapsed = start.elapsed().as_secs_f64();
        let due_total = (elapsed / period_s) as u64 + 1;
        let due = due_total.saturating_sub(done).clamp(1, MAX_CATCH_UP_BURSTS);
        for _ in 0..due {
            let mut left = burst;
            while left > 0 {
                let want = left.min(UDP_SEND_BATCH as u64);
                let k = gate.take(want, cost, until) as usize;
                if k == 0 {
                    break 'flow;
                }
                for h in heads[..k].iter_mut() {
                    let _ = FlowDatagram {
                        token: pace.token,
                        stream: pace.stream,
                        hello: false,
                        seq,
                    }
                    .write(h);
                    seq = seq.wrapping_add(1);
                }
                // A refused batch (ENOBUFS: the qdisc or device queue is
                // full) is counted as sent-and-lost by the sequence numbers.
                let n = batch.send_headed(sock, &heads[..k], &body).unwrap_or(0);
                bytes += (n * payload) as u64;
                packets += n as u64;
                meter.add(Instant::now(), (n * payload) as u64);
                left -= k as u64;
                #[cfg(test)]
                if pace.token == PANIC_TEST_TOKEN && pace.stream == 1 {
                    panic!("injected failure of stream 1 (PANIC_TEST_TOKEN)");
                }
            }
        }
        done += due;
        // Drop a backlog beyond the catch-up allowance.
        done = done.max(due_total.saturating_sub(MAX_CATCH_UP_BURSTS));
    }
    let span = meter.span();
    let (intervals, elapsed_ns) = meter.finish();
    let (sndbuf, rcvbuf) = buffers(SockRef::from(sock));
    let side = StreamSide {
        stream: pace.stream,
        bytes,
        packets,
        highest_seq: seq,
        intervals,
        elapsed_ns,
        tcp: None,
        sndbuf,
        rcvbuf,
    };
    Moved { side, span }
}

/// When a UDP receiver stops: at `deadline`, when `quiet` passes with
/// nothing after data began, or when `span` has passed since the first datagram.
#[derive(Debug, Clone, Copy)]
pub struct RecvWindow {
    pub deadline: Instant,
    pub quiet: Duration,
    pub span: Duration,
}

/// What a UDP flow's receiver counted: each stream's side, and the
/// datagrams the receiving socket dropped itself (its buffer was full)
/// since `drops_at_bind` was read; `None` where the kernel does not count.
#[derive(Debug)]
pub struct UdpReceived {
    pub moved: Vec<Moved>,
    pub socket_drops: Option<u64>,
}

/// Counts UDP flow datagrams carrying `token` from `peer` on `sock` for
/// `streams` streams until `window` says stop or the gate does (a limited
/// gate counts every datagram's IP bytes against the flow's allowance and
/// the rate limit); hello datagrams are skipped.  `drops_at_bind` is the
/// socket's drop count read when it was bound ([`crate::udp::socket_drops`]),
/// so drops before this call (datagrams that came while the far end was
/// told the port) count too.
#[allow(clippy::too_many_arguments)]
pub fn udp_recv(
    sock: &UdpSocket,
    token: u64,
    peer: IpAddr,
    streams: u16,
    window: RecvWindow,
    meter: &Meter,
    gate: &FlowGate,
    drops_at_bind: Option<u64>,
) -> UdpReceived {
    let overhead = if peer.is_ipv4() {
        IPV4_UDP_OVERHEAD
    } else {
        crate::udp::IPV6_UDP_OVERHEAD
    };
    let mut sides: Vec<(StreamSide, Meter)> = (0..streams)
        .map(|i| {
            (
                StreamSide {
                    stream: i,
                    ..Default::default()
                },
                meter.clone(),
            )
        })
        .collect();
    let _ = sock.set_read_timeout(Some(Duration::from_millis(20)));
    let mut buf = vec![0u8; 65_536];
    let mut last_data: Option<Instant> = None;
    let mut first_data: Option<Instant> = None;
    loop {
        let now = Instant::now();
        if now >= window.deadline
            || last_data.is_some_and(|l| now.duration_since(l) >= window.quiet)
            || first_data.is_some_and(|f| now.duration_since(f) >= window.span)
            || gate.stopped()
        {
            break;
        }
        let (len, from) = match sock.recv_from(&mut buf) {
            Ok(x) => x,
            Err(_) => continue,
        };
        if from.ip() != peer {
            continue;
        }
        let Ok(d) = FlowDatagram::decode(&buf[..len]) else {
            continue;
        };
        if d.token != token || d.stream >= streams {
            continue;
        }
        if d.hello {
            continue;
        }
        let now = Instant::now();
        last_data = Some(now);
        first_data.get_or_insert(now);
        let (side, m) = &mut sides[d.stream as usize];
        side.bytes += len as u64;
        side.packets += 1;
        // The peer chooses seq: u64::MAX must not overflow.
        side.highest_seq = side.highest_seq.max(d.seq.saturating_add(1));
        m.add(now, len as u64);
        if !gate.note_received(len as u64 + overhead, now) {
            break;
        }
    }
    // Read at once: datagrams that come after the flow ended (nobody
    // reads them) are not the flow's.
    let socket_drops = match (drops_at_bind, crate::udp::socket_drops(sock)) {
        (Some(before), Some(now)) => Some(now.saturating_sub(before)),
        _ => None,
    };
    let (sndbuf, rcvbuf) = buffers(SockRef::from(sock));
    let moved = sides
        .into_iter()
        .map(|(mut s, m)| {
            let span = m.span();
            let (intervals, elapsed) = m.finish();
            s.intervals = intervals;
            s.elapsed_ns = elapsed;
            s.sndbuf = sndbuf;
            s.rcvbuf = rcvbuf;
            Moved { side: s, span }
        })
        .collect();
    UdpReceived {
        moved,
        socket_drops,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pathsonde_wire::flow::FlowProto;
    use std::net::SocketAddr;

    fn loopback_udp() -> UdpSocket {
        crate::udp::bind(SocketAddr::from(([127, 0, 0, 1], 0))).unwrap()
    }

    fn datagram(token: u64, stream: u16, seq: u64) -> [u8; 64] {
        let mut b = [0u8; 64];
        FlowDatagram {
            token,
            stream,
            hello: false,
            seq,
        }
        .write(&mut b)
        .unwrap();
        b
    }

    #[test]
    fn a_peer_supplied_sequence_of_u64_max_does_not_overflow() {
        let rx = loopback_udp();
        let tx = loopback_udp();
        let to = rx.local_addr().unwrap();
        tx.send_to(&datagram(7, 0, 5), to).unwrap();
        tx.send_to(&datagram(7, 0, u64::MAX), to).unwrap();
        tx.send_to(&datagram(7, 1, u64::MAX - 1), to).unwrap();
        let now = Instant::now();
        let moved = udp_recv(
            &rx,
            7,
            to.ip(),
            2,
            RecvWindow {
                deadline: now + Duration::from_secs(2),
                quiet: Duration::from_millis(200),
                span: Duration::from_secs(2),
            },
            &Meter::new(now, Duration::from_millis(100), 4),
            &FlowGate::unlimited(),
            crate::udp::socket_drops(&rx),
        )
        .moved;
        assert_eq!(moved[0].side.packets, 2);
        assert_eq!(moved[0].side.highest_seq, u64::MAX, "saturates");
        assert_eq!(moved[1].side.highest_seq, u64::MAX);
    }

    #[test]
    fn datagrams_the_receiving_socket_dropped_are_counted() {
        // A receive buffer of a few datagrams, filled while nobody reads:
        // the kernel drops the rest, and the receiver says how many.
        let rx = loopback_udp();
        set_buffers(SockRef::from(&rx), 0, 4096);
        let at_bind = crate::udp::socket_drops(&rx);
        assert!(at_bind.is_some(), "this kernel's /proc/net/udp is readable");
        let tx = loopback_udp();
        let to = rx.local_addr().unwrap();
        for seq in 0..200 {
            tx.send_to(&datagram(7, 0, seq), to).unwrap();
        }
        let now = Instant::now();
        let got = udp_recv(
            &rx,
            7,
            to.ip(),
            1,
            RecvWindow {
                deadline: now + Duration::from_secs(2),
                quiet: Duration::from_millis(100),
                span: Duration::from_secs(2),
            },
            &Meter::new(now, Duration::from_millis(100), 4),
            &FlowGate::unlimited(),
            at_bind,
        );
        let received = got.moved[0].side.packets;
        assert!(received < 200, "the buffer held every datagram");
        assert_eq!(got.socket_drops, Some(200 - received));
    }

    fn spec(streams: u16, duration_ms: u32) -> FlowSpec {
        FlowSpec {
            proto: FlowProto::Udp,
            streams,
            duration_ms,
            interval_ms: 100,
            reverse: false,
            window: 0,
            full_duplex_buffers: false,
            udp_rate_bps: 30_000_000,
            udp_payload: 1000,
            udp_burst_packets: 4,
        }
    }

    #[test]
    fn one_panicking_sender_stops_the_others_promptly() {
        let sink = loopback_udp();
        let socks: Vec<(u16, UdpSocket)> = (0..3)
            .map(|i| {
                let s = loopback_udp();
                s.connect(sink.local_addr().unwrap()).unwrap();
                (i, s)
            })
            .collect();
        let spec = spec(3, 20_000);
        let start = Instant::now();
        let meter = Meter::new(start, Duration::from_millis(100), spec.intervals());
        let gate = FlowGate::unlimited();
        let moved = udp_send_all(
            &socks,
            PANIC_TEST_TOKEN,
            BitRate::from_mbps(10.0),
            &spec,
            start,
            &meter,
            &gate,
        );
        // Without the stop flag the two others would send for 20 s.
        assert!(
            start.elapsed() < Duration::from_secs(3),
            "{:?}",
            start.elapsed()
        );
        let streams: Vec<u16> = moved.iter().map(|m| m.side.stream).collect();
        assert_eq!(streams, vec![0, 2]);
        assert!(gate.reason().unwrap().contains("panicked"));
    }

    #[test]
    fn a_sender_keeps_one_body_however_long_the_burst() {
        // 8192 × 65 000 B bursts, limited to 8 Mb/s: the gate lets out a
        // few datagrams, each gathered from a header and the shared body.
        let sink = loopback_udp();
        let tx = loopback_udp();
        tx.connect(sink.local_addr().unwrap()).unwrap();
        let pace = UdpPace {
            token: 1,
            stream: 0,
            rate_bps: BitRate::from_mbps(8.0),
            payload: 65_000,
            burst: 8192,
        };
        let start = Instant::now();
        let gate = FlowGate::limited(
            crate::throughput::gate::GateLimits {
                rate_bps: 8e6,
                allowance: u64::MAX,
                capped: false,
                deadline: start + Duration::from_secs(10),
            },
            65_028,
        );
        let until = start + Duration::from_millis(300);
        let m = udp_send(
            &tx,
            pace,
            until,
            Meter::new(start, Duration::from_millis(100), 4),
            &gate,
        );
        let secs = start.elapsed().as_secs_f64();
        // 1 MB/s and a bucket of one datagram: a handful, never a burst.
        assert!(m.side.packets >= 1, "{:?}", m.side);
        assert!(
            (m.side.packets * 65_028) as f64 <= 65_028.0 + 1e6 * secs,
            "{} datagrams in {secs} s",
            m.side.packets
        );
        assert!(start.elapsed() < Duration::from_secs(2));
    }
}
