//! The data movers both ends share: a TCP sender and receiver, a paced UDP
//! sender and a counting UDP receiver, each keeping bytes per interval.

use super::tcp_info;
use crate::clock;
use crate::udp::BatchSender;
use pathsonde_core::{BitRate, DurationNs, TimeNs};
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

const TCP_CHUNK: usize = 128 << 10;

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

/// Writes to `s` until `until`, then closes the sending half and waits (up
/// to `drain`) for the receiver to close, so the final TCP_INFO counts
/// every acknowledgement.
pub fn tcp_send(
    mut s: TcpStream,
    stream: u16,
    until: Instant,
    drain: Duration,
    mut meter: Meter,
) -> Moved {
    let buf = vec![0x5au8; TCP_CHUNK];
    let mut bytes = 0u64;
    let _ = s.set_write_timeout(Some(Duration::from_millis(200)));
    while Instant::now() < until {
        match s.write(&buf) {
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
    let _ = s.shutdown(std::net::Shutdown::Write);
    let _ = s.set_read_timeout(Some(Duration::from_millis(100)));
    let waited = Instant::now();
    let mut sink = [0u8; 4096];
    while waited.elapsed() < drain {
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

/// Reads `s` until the sender closes or `deadline`; TCP_INFO is read before
/// this end closes.
pub fn tcp_recv(mut s: TcpStream, stream: u16, deadline: Instant, mut meter: Meter) -> Moved {
    let mut buf = vec![0u8; TCP_CHUNK];
    let mut bytes = 0u64;
    let _ = s.set_read_timeout(Some(Duration::from_millis(100)));
    while Instant::now() < deadline {
        match s.read(&mut buf) {
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

/// Waits until `deadline`, sleeping all but the last 50 µs: a throughput
/// sender needs its average rate, not microsecond gaps, and a sender that
/// spins through every period is the first a loaded host preempts.
fn wait_sleeping(deadline: TimeNs) {
    let left = deadline.since(clock::monotonic()).ns();
    if left > 100_000 {
        std::thread::sleep(Duration::from_nanos((left - 50_000) as u64));
    }
    clock::wait_until(deadline);
}

/// Most bursts a late sender sends at once to catch up with its schedule;
/// beyond that the backlog is dropped (the sender was descheduled: on a
/// loaded host the achieved rate then falls short and says so).
pub const MAX_CATCH_UP_BURSTS: u64 = 4;

/// Sends `pace` on the connected socket `sock` until `until`: one burst per
/// period (burst × payload × 8 / rate), each burst back to back.  A sender
/// that falls behind sends up to [`MAX_CATCH_UP_BURSTS`] due bursts at once.
/// Sends one paced UDP stream from each socket, each in its own thread at
/// `rate_bps` (of payload), from `start` for the flow's duration; the
/// streams' tallies (a sender thread that panicked is left out).  Both ends
/// use it: the client for forward flows, the server for reverse ones.
pub fn udp_send_all(
    socks: &[(u16, UdpSocket)],
    token: u64,
    rate_bps: BitRate,
    spec: &FlowSpec,
    start: Instant,
    meter: &Meter,
) -> Vec<Moved> {
    let until = start + super::duration(spec);
    std::thread::scope(|s| {
        let handles: Vec<_> = socks
            .iter()
            .map(|(i, sock)| {
                let m = meter.clone();
                let pace = UdpPace {
                    token,
                    stream: *i,
                    rate_bps,
                    payload: usize::from(spec.udp_payload),
                    burst: spec.udp_burst_packets,
                };
                s.spawn(move || udp_send(sock, pace, until, m))
            })
            .collect();
        handles.into_iter().filter_map(|h| h.join().ok()).collect()
    })
}

pub fn udp_send(sock: &UdpSocket, pace: UdpPace, until: Instant, mut meter: Meter) -> Moved {
    let burst = pace.burst.max(1) as usize;
    let mut bufs = vec![vec![0u8; pace.payload.max(FLOW_HEADER_LEN)]; burst];
    let period_ns = (burst as f64 * pace.payload as f64 * 8.0 / pace.rate_bps.bps().max(1.0) * 1e9)
        .max(1.0) as i64;
    let mut batch = BatchSender::new(burst.min(1024));
    let mut seq = 0u64;
    let mut bytes = 0u64;
    let mut packets = 0u64;
    let start: TimeNs = clock::monotonic();
    let mut done = 0u64;
    while Instant::now() < until {
        wait_sleeping(start + DurationNs::from_ns(done as i64 * period_ns));
        let elapsed = clock::monotonic().since(start).ns().max(0) as u64;
        let due_total = elapsed / period_ns as u64 + 1;
        let due = due_total.saturating_sub(done).clamp(1, MAX_CATCH_UP_BURSTS);
        for _ in 0..due {
            for b in bufs.iter_mut() {
                let _ = FlowDatagram {
                    token: pace.token,
                    stream: pace.stream,
                    hello: false,
                    seq,
                }
                .write(b);
                seq += 1;
            }
            // A refused batch (ENOBUFS: the qdisc or device queue is full)
            // is counted as sent-and-lost by the sequence numbers.
            let n = batch.send(sock, &bufs).unwrap_or(0);
            bytes += (n * pace.payload) as u64;
            packets += n as u64;
            meter.add(Instant::now(), (n * pace.payload) as u64);
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

/// Counts UDP flow datagrams carrying `token` from `peer` on `sock` for
/// `streams` streams until `window` says stop; hello datagrams are skipped.
pub fn udp_recv(
    sock: &UdpSocket,
    token: u64,
    peer: IpAddr,
    streams: u16,
    window: RecvWindow,
    meter: &Meter,
) -> Vec<Moved> {
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
        side.highest_seq = side.highest_seq.max(d.seq + 1);
        m.add(now, len as u64);
    }
    let (sndbuf, rcvbuf) = buffers(SockRef::from(sock));
    sides
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
        .collect()
}
