//! The client's side of a throughput flow, and what a flow measured.

use super::duration;
use super::engine::{self, flow_side, Meter, Moved};
use super::gate::{self, FlowGate};
use super::server::{receiver_buffers, sender_buffers};
use super::GRACE;
use crate::client::{unexpected, Client};
use crate::error::{InputError, NetError, Result};
use crate::framing;
use crate::udp;
use pathsonde_core::verdict::flow::{judge_flow, FlowEvidence, FlowKind};
use pathsonde_core::verdict::{HostRole, Verdict};
use pathsonde_core::{BitRate, Bytes, DurationNs};
use pathsonde_wire::control::{ClientMessage, ServerMessage};
use pathsonde_wire::flow::{FlowDatagram, FlowProto, FlowSide, FlowSpec, TcpInfo};
use serde::Serialize;
use socket2::{Domain, SockRef, Socket, Type};
use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// Both ends' reports of one flow.
#[derive(Debug, Clone, Serialize)]
pub struct FlowResult {
    pub spec: FlowSpec,
    pub client: FlowSide,
    pub server: FlowSide,
    /// UDP: datagrams the receiving end's socket dropped itself (its
    /// buffer was full): the receiving host's loss, not the path's.
    /// `None` for TCP, or when the receiver could not count them (another
    /// OS, a server that predates the count).
    pub receiver_drops: Option<u64>,
}

impl FlowResult {
    pub fn sender(&self) -> &FlowSide {
        if self.spec.reverse {
            &self.server
        } else {
            &self.client
        }
    }
    pub fn receiver(&self) -> &FlowSide {
        if self.spec.reverse {
            &self.client
        } else {
            &self.server
        }
    }
    /// Bytes the receiver got, all streams.
    pub fn received(&self) -> Bytes {
        Bytes(self.receiver().streams.iter().map(|s| s.bytes).sum())
    }
    /// Goodput: what the receiver got over its first-to-last-byte span.
    pub fn throughput(&self) -> BitRate {
        let span = DurationNs::from_ns(self.receiver().elapsed_ns.min(i64::MAX as u64) as i64);
        BitRate::from_bytes_per(self.received(), span).unwrap_or(BitRate::ZERO)
    }
    /// Goodput after the first interval (iperf3's "omit"): slow start and
    /// the first RTTs left out, and so are the bytes that arrive after the
    /// sender stopped (what sat in queues and in flight), which would
    /// otherwise inflate a short flow.  Bytes of the whole intervals 2..n
    /// of the flow's duration over their span; the whole-flow figure when
    /// the duration holds fewer than three whole intervals.
    pub fn steady_throughput(&self) -> BitRate {
        let n = (self.spec.duration_ms / self.spec.interval_ms.max(1)) as usize;
        if n < 3 {
            return self.throughput();
        }
        let bytes: u64 = self
            .receiver()
            .streams
            .iter()
            .map(|s| s.intervals.iter().take(n).skip(1).sum::<u64>())
            .sum();
        let secs = (n - 1) as f64 * f64::from(self.spec.interval_ms) / 1e3;
        BitRate::from_bps(bytes as f64 * 8.0 / secs)
    }
    /// What the sender put out over its span.
    pub fn sent_rate(&self) -> BitRate {
        let s = self.sender();
        let bytes = Bytes(s.streams.iter().map(|x| x.bytes).sum());
        let span = DurationNs::from_ns(s.elapsed_ns.min(i64::MAX as u64) as i64);
        BitRate::from_bytes_per(bytes, span).unwrap_or(BitRate::ZERO)
    }
    /// UDP: fraction of the sent datagrams that never arrived.
    pub fn udp_loss(&self) -> Option<f64> {
        if self.spec.proto != FlowProto::Udp {
            return None;
        }
        let sent: u64 = self.sender().streams.iter().map(|s| s.packets).sum();
        let got: u64 = self.receiver().streams.iter().map(|s| s.packets).sum();
        (sent > 0).then(|| sent.saturating_sub(got) as f64 / sent as f64)
    }
    /// UDP: the fraction of the sent datagrams the receiving socket dropped
    /// itself (inside [`udp_loss`](Self::udp_loss)); 0 when not counted.
    pub fn udp_receiver_dropped(&self) -> f64 {
        let sent: u64 = self.sender().streams.iter().map(|s| s.packets).sum();
        match self.receiver_drops {
            Some(d) if sent > 0 => d.min(sent) as f64 / sent as f64,
            _ => 0.0,
        }
    }
    /// What the flow showed of its hosts, for the host verdict.
    pub fn evidence(&self) -> FlowEvidence {
        let datagrams = |side: &FlowSide| side.streams.iter().map(|s| s.packets).sum();
        let us = |f: fn(&TcpInfo) -> u64| {
            let total: u64 = self.sender_tcp().map(f).sum();
            DurationNs::from_ns(total.saturating_mul(1000).min(i64::MAX as u64) as i64)
        };
        FlowEvidence {
            kind: match self.spec.proto {
                FlowProto::Udp => FlowKind::Udp,
                FlowProto::Tcp => FlowKind::Tcp,
            },
            sender: if self.spec.reverse {
                HostRole::Server
            } else {
                HostRole::Client
            },
            target: (self.spec.proto == FlowProto::Udp && self.spec.udp_rate_bps > 0)
                .then(|| BitRate::from_bps(self.spec.udp_rate_bps as f64)),
            sent: self.sent_rate(),
            received: self.throughput(),
            datagrams_sent: datagrams(self.sender()),
            datagrams_received: datagrams(self.receiver()),
            receiver_drops: self.receiver_drops,
            busy: us(|t| t.busy_us),
            rwnd_limited: us(|t| t.rwnd_limited_us),
            sndbuf_limited: us(|t| t.sndbuf_limited_us),
            receive_buffer_cap: if self.spec.window > 0 {
                Some(u64::from(self.spec.window))
            } else {
                self.receiver().limits.tcp_rmem_max
            },
            rtt: self
                .sender_tcp()
                .map(|t| t.rtt_us)
                .filter(|us| *us > 0)
                .max()
                .map(|us| DurationNs::from_us(i64::from(us))),
        }
    }
    /// The host limits the flow's own evidence shows, binding ones first
    /// (`pathsonde_core::verdict::flow`): a binding one makes the
    /// throughput a lower bound of what the path carries.
    pub fn host_limits(&self) -> Verdict {
        judge_flow(&self.evidence())
    }
    /// The sending end's TCP_INFO per stream.
    pub fn sender_tcp(&self) -> impl Iterator<Item = &TcpInfo> {
        self.sender().streams.iter().filter_map(|s| s.tcp.as_ref())
    }
    /// Retransmitted / sent segments over the sender's streams.
    pub fn retrans_fraction(&self) -> Option<f64> {
        let (r, o) = self.sender_tcp().fold((0u64, 0u64), |(r, o), t| {
            (r + u64::from(t.total_retrans), o + u64::from(t.segs_out))
        });
        (o > 0).then(|| r as f64 / o as f64)
    }
    /// Per-interval aggregate throughput at the receiver: one value per
    /// interval of the flow's duration (bytes that arrived after the last
    /// interval, in flight when the sender stopped, count in the last).
    pub fn interval_rates(&self) -> Vec<BitRate> {
        let n = self
            .spec
            .duration_ms
            .div_ceil(self.spec.interval_ms.max(1))
            .max(1) as usize;
        let mut sums = vec![0u64; n];
        for s in &self.receiver().streams {
            for (i, b) in s.intervals.iter().enumerate() {
                sums[i.min(n - 1)] += b;
            }
        }
        let secs = f64::from(self.spec.interval_ms) / 1e3;
        let last = f64::from(self.spec.duration_ms) / 1e3 - secs * (n - 1) as f64;
        sums.iter()
            .enumerate()
            .map(|(i, &b)| {
                let span = if i + 1 == n { last.max(1e-3) } else { secs };
                BitRate::from_bps(b as f64 * 8.0 / span)
            })
            .collect()
    }
}

/// Runs one flow on an open session.
pub fn run_flow(client: &mut Client, spec: &FlowSpec) -> Result<FlowResult> {
    spec.check().map_err(|source| {
        NetError::Input(InputError::Flow {
            refused: false,
            source,
        })
    })?;
    let server_ip = client.server_addr().ip();
    let local_ip = client.local_ip();
    let drops_follow = client.flow_drops();
    let (ctrl, reply) = client.control();
    framing::send(ctrl, &ClientMessage::Flow(spec.clone()))?;
    let (port, token) = match framing::recv(ctrl, reply, "the flow's data port") {
        Ok(ServerMessage::FlowReady { port, token }) => (port, token),
        Ok(other) => return Err(unexpected("FlowReady", &other)),
        Err(NetError::Closed { .. }) => {
            return Err(NetError::protocol(
                "the server closed the session on a throughput request: it predates `pathsonde measure` (upgrade it)",
            ))
        }
        Err(e) => return Err(e),
    };
    let data = SocketAddr::new(server_ip, port);
    let interval = Duration::from_millis(u64::from(spec.interval_ms));
    let (client_side, client_drops) = match spec.proto {
        FlowProto::Tcp => (tcp_side(spec, data, local_ip, token, interval), None),
        FlowProto::Udp => udp_side(spec, data, local_ip, token, interval),
    };
    // The server reports once its receiver saw the end (or its sender ran
    // its course); wait for the whole flow and the grace beyond it.
    let wait = reply + duration(spec) + GRACE + super::server::CONNECT_WAIT;
    let server = match framing::recv(ctrl, wait, "the server's flow report")? {
        ServerMessage::FlowReport(side) => side,
        other => return Err(unexpected("FlowReport", &other)),
    };
    let server_drops = if drops_follow {
        match framing::recv(ctrl, reply, "the server's flow drop count")? {
            ServerMessage::FlowReceiverDrops { dropped } => dropped,
            other => return Err(unexpected("FlowReceiverDrops", &other)),
        }
    } else {
        None
    };
    let receiver_drops = match spec.proto {
        FlowProto::Tcp => None,
        FlowProto::Udp if spec.reverse => client_drops,
        FlowProto::Udp => server_drops,
    };
    Ok(FlowResult {
        spec: spec.clone(),
        client: client_side,
        server,
        receiver_drops,
    })
}

fn tcp_side(
    spec: &FlowSpec,
    data: SocketAddr,
    local: std::net::IpAddr,
    token: u64,
    interval: Duration,
) -> FlowSide {
    let (snd, rcv) = if spec.reverse {
        receiver_buffers(spec)
    } else {
        sender_buffers(spec)
    };
    let mut streams = Vec::new();
    let mut error = None;
    for i in 0..spec.streams {
        match connect(data, local, snd, rcv, token, i) {
            Ok(s) => streams.push((i, s)),
            Err(e) => {
                error = Some(format!("stream {i}: {e}"));
                break;
            }
        }
    }
    let start = Instant::now();
    let meter = Meter::new(start, interval, spec.intervals());
    let gate = FlowGate::unlimited();
    let moved: Vec<Moved> = gate::run_streams(&gate, streams, |(i, st)| {
        let m = meter.clone();
        if spec.reverse {
            engine::tcp_recv(st, i, start + duration(spec) + GRACE, m, &gate)
        } else {
            engine::tcp_send(st, i, start + duration(spec), GRACE, m, &gate)
        }
    });
    flow_side(!spec.reverse, moved, error.or_else(|| gate.reason()))
}

fn connect(
    data: SocketAddr,
    local: std::net::IpAddr,
    snd: u32,
    rcv: u32,
    token: u64,
    stream: u16,
) -> std::io::Result<TcpStream> {
    let sock = Socket::new(Domain::for_address(data), Type::STREAM, None)?;
    engine::set_buffers(SockRef::from(&sock), snd, rcv);
    sock.bind(&SocketAddr::new(local, 0).into())?;
    sock.connect_timeout(&data.into(), Duration::from_secs(3))?;
    let mut st: TcpStream = sock.into();
    let _ = st.set_nodelay(false);
    let mut hello = [0u8; 10];
    hello[..8].copy_from_slice(&token.to_be_bytes());
    hello[8..].copy_from_slice(&stream.to_be_bytes());
    st.write_all(&hello)?;
    Ok(st)
}

fn udp_side(
    spec: &FlowSpec,
    data: SocketAddr,
    local: std::net::IpAddr,
    token: u64,
    interval: Duration,
) -> (FlowSide, Option<u64>) {
    let per_stream = BitRate::from_bps(spec.udp_rate_bps as f64 / f64::from(spec.streams));
    if spec.reverse {
        let sock = match udp::bind(SocketAddr::new(local, 0)) {
            Ok(s) => s,
            Err(e) => return (flow_side(false, Vec::new(), Some(e.to_string())), None),
        };
        let drops_at_bind = udp::socket_drops(&sock);
        // Say hello for every stream (three times: a hello may be lost).
        let mut buf = [0u8; 64];
        for _ in 0..3 {
            for i in 0..spec.streams {
                let _ = FlowDatagram {
                    token,
                    stream: i,
                    hello: true,
                    seq: 0,
                }
                .write(&mut buf);
                let _ = sock.send_to(&buf, data);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let now = Instant::now();
        let meter = Meter::new(now, interval, spec.intervals());
        let got = engine::udp_recv(
            &sock,
            token,
            data.ip(),
            spec.streams,
            engine::RecvWindow {
                deadline: now + super::server::CONNECT_WAIT + duration(spec) + GRACE,
                quiet: Duration::from_secs(1),
                span: duration(spec) + Duration::from_millis(300),
            },
            &meter,
            &FlowGate::unlimited(),
            drops_at_bind,
        );
        return (flow_side(false, got.moved, None), got.socket_drops);
    }
    let mut socks = Vec::new();
    for i in 0..spec.streams {
        match udp::bind(SocketAddr::new(local, 0)).and_then(|s| {
            s.connect(data)
                .map_err(|e| NetError::io("connecting a flow socket", e))?;
            Ok(s)
        }) {
            Ok(s) => socks.push((i, s)),
            Err(e) => return (flow_side(true, Vec::new(), Some(e.to_string())), None),
        }
    }
    let start = Instant::now();
    let meter = Meter::new(start, interval, spec.intervals());
    let gate = FlowGate::unlimited();
    let moved = engine::udp_send_all(&socks, token, per_stream, spec, start, &meter, &gate);
    (flow_side(true, moved, gate.reason()), None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pathsonde_wire::flow::StreamSide;

    fn result(intervals: Vec<u64>, elapsed_ns: u64) -> FlowResult {
        let spec = FlowSpec {
            proto: FlowProto::Tcp,
            streams: 1,
            duration_ms: 1000,
            interval_ms: 200,
            reverse: false,
            window: 0,
            full_duplex_buffers: false,
            udp_rate_bps: 0,
            udp_payload: 0,
            udp_burst_packets: 0,
        };
        let bytes = intervals.iter().sum();
        FlowResult {
            spec,
            client: FlowSide {
                sender: true,
                ..Default::default()
            },
            server: FlowSide {
                sender: false,
                streams: vec![StreamSide {
                    bytes,
                    intervals,
                    ..Default::default()
                }],
                elapsed_ns,
                ..Default::default()
            },
            receiver_drops: None,
        }
    }

    #[test]
    fn steady_throughput_drops_the_first_interval_and_the_drain() {
        // 100 bytes in slow start, 200 per interval after, 5000 drained
        // from queues after the sender stopped.
        let r = result(vec![100, 200, 200, 200, 200, 5000], 1_100_000_000);
        assert!((r.steady_throughput().bps() - 800.0 * 8.0 / 0.8).abs() < 1e-6);
        // The whole flow counts everything over first to last byte.
        assert!((r.throughput().bps() - 5900.0 * 8.0 / 1.1).abs() < 1e-6);
        // Intervals as reported fold the drain into the last one.
        let iv = r.interval_rates();
        assert_eq!(iv.len(), 5);
        assert!((iv[4].bps() - 5200.0 * 8.0 / 0.2).abs() < 1e-6);
    }

    /// The receiver's own drops as a fraction of what was sent, as
    /// `measure`'s UDP ramp records them beside the loss.
    #[test]
    fn the_receivers_drops_are_a_fraction_of_the_datagrams_sent() {
        let mut r = result(vec![1000], 1_000_000_000);
        r.spec.proto = FlowProto::Udp;
        r.client.streams = vec![StreamSide {
            packets: 1000,
            ..Default::default()
        }];
        r.server.streams[0].packets = 900;
        assert_eq!(r.udp_receiver_dropped(), 0.0, "not counted: none");
        r.receiver_drops = Some(80);
        assert!((r.udp_receiver_dropped() - 0.08).abs() < 1e-12);
        assert!((r.udp_loss().unwrap() - 0.1).abs() < 1e-12);
        // A count beyond what was sent (a peer's wrong figure) is capped.
        r.receiver_drops = Some(5000);
        assert_eq!(r.udp_receiver_dropped(), 1.0);
    }

    #[test]
    fn short_flows_have_no_separate_steady_figure() {
        let mut r = result(vec![100, 200], 400_000_000);
        r.spec.duration_ms = 400;
        assert_eq!(r.steady_throughput(), r.throughput());
    }
}
