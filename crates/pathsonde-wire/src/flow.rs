//! Throughput flows (issue 5): the control messages' payloads and the UDP
//! flow datagram.
//!
//! A flow is one achievable-throughput test: `streams` TCP connections or
//! UDP streams carrying data one way for a time.  The client asks with
//! `ClientMessage::Flow(FlowSpec)`; the server checks the spec against its
//! limits ([`FlowSpec::check`]), opens a data port and answers
//! `ServerMessage::FlowReady`; both ends move data; the server answers
//! `ServerMessage::FlowReport` with its side.  Data connections and
//! datagrams carry the flow's random token, so a stranger cannot join.
//!
//! UDP flow datagram (all integers big-endian, padded to the payload size):
//! ```text
//! offset size field
//! 0      4    magic "PSFL"
//! 4      8    flow token (u64)
//! 12     2    stream number (u16)
//! 14     2    kind: 0 data, 1 hello (the receiver asks a reverse flow to start)
//! 16     8    sequence within the stream (u64)
//! 24     ..   padding
//! ```

use crate::error::WireError;
use serde::{Deserialize, Serialize};

/// Most streams one flow may open.
pub const MAX_FLOW_STREAMS: u16 = 16;
/// Longest flow, ms.
pub const MAX_FLOW_DURATION_MS: u32 = 60_000;
/// Shortest reporting interval, ms (bounds the report's size with the duration).
pub const MIN_FLOW_INTERVAL_MS: u32 = 100;
/// Largest socket buffer a client may ask the server to set, bytes.
pub const MAX_FLOW_BUFFER: u32 = 64 << 20;
/// Fastest UDP flow a client may ask the server to send, bits/s.
pub const MAX_FLOW_UDP_RATE_BPS: u64 = 40_000_000_000;
/// Largest UDP burst, packets.
pub const MAX_FLOW_BURST_PACKETS: u32 = 8192;
/// Flow datagram header length; the smallest UDP flow payload.
pub const FLOW_HEADER_LEN: usize = 24;
/// Largest UDP flow payload.
pub const MAX_FLOW_PAYLOAD: u16 = 65_000;
pub const FLOW_MAGIC: &[u8; 4] = b"PSFL";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum FlowProto {
    Tcp,
    Udp,
}

/// What the client asks for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlowSpec {
    pub proto: FlowProto,
    pub streams: u16,
    pub duration_ms: u32,
    /// Per-interval byte counts every this many ms.
    pub interval_ms: u32,
    /// The server sends and the client receives.
    pub reverse: bool,
    /// SO_SNDBUF on the sending end and SO_RCVBUF on the receiving end,
    /// bytes; 0 leaves the system's buffers (TCP autotuning).
    pub window: u32,
    /// netest's -FullD: the sender's receive buffer as large as its send buffer.
    pub full_duplex_buffers: bool,
    /// UDP: total rate over all streams, bits/s.
    pub udp_rate_bps: u64,
    /// UDP payload bytes per datagram.
    pub udp_payload: u16,
    /// UDP: datagrams sent back to back per burst (the pacing period is
    /// burst × payload / per-stream rate).
    pub udp_burst_packets: u32,
}

impl FlowSpec {
    /// Checks the spec against the limits above; the server refuses anything else.
    pub fn check(&self) -> Result<(), WireError> {
        let range = |what: &'static str, value: u64, ok: bool| {
            if ok {
                Ok(())
            } else {
                Err(WireError::OutOfRange { what, value })
            }
        };
        range(
            "flow streams",
            u64::from(self.streams),
            (1..=MAX_FLOW_STREAMS).contains(&self.streams),
        )?;
        range(
            "flow duration ms",
            u64::from(self.duration_ms),
            (1..=MAX_FLOW_DURATION_MS).contains(&self.duration_ms),
        )?;
        range(
            "flow interval ms",
            u64::from(self.interval_ms),
            self.interval_ms >= MIN_FLOW_INTERVAL_MS,
        )?;
        range(
            "flow window bytes",
            u64::from(self.window),
            self.window <= MAX_FLOW_BUFFER,
        )?;
        if self.proto == FlowProto::Udp {
            range(
                "UDP flow rate",
                self.udp_rate_bps,
                (1..=MAX_FLOW_UDP_RATE_BPS).contains(&self.udp_rate_bps),
            )?;
            range(
                "UDP flow payload",
                u64::from(self.udp_payload),
                (FLOW_HEADER_LEN as u16..=MAX_FLOW_PAYLOAD).contains(&self.udp_payload),
            )?;
            range(
                "UDP burst packets",
                u64::from(self.udp_burst_packets),
                (1..=MAX_FLOW_BURST_PACKETS).contains(&self.udp_burst_packets),
            )?;
        }
        Ok(())
    }

    /// Number of reporting intervals the flow spans (bounded by the limits).
    pub fn intervals(&self) -> usize {
        (self.duration_ms.div_ceil(self.interval_ms.max(1)) as usize + 1).min(1 + 600)
    }
}

/// TCP_INFO as read from the kernel (`struct tcp_info`, linux/tcp.h): the
/// fields that say why a stream ran as fast as it did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TcpInfo {
    /// Smoothed RTT and its variation, µs.
    pub rtt_us: u32,
    pub rttvar_us: u32,
    pub min_rtt_us: u32,
    /// Congestion window, segments; slow-start threshold.
    pub snd_cwnd: u32,
    pub snd_ssthresh: u32,
    pub snd_mss: u32,
    /// Segments retransmitted over the connection's life.
    pub total_retrans: u32,
    pub segs_out: u32,
    pub segs_in: u32,
    /// Bytes/s as the kernel keeps them.
    pub pacing_rate: u64,
    pub delivery_rate: u64,
    pub bytes_acked: u64,
    pub bytes_received: u64,
    /// Receiver's autotuned space and window threshold, bytes.
    pub rcv_space: u32,
    pub rcv_ssthresh: u32,
    /// The peer's advertised window, bytes (kernel ≥ 5.4; 0 otherwise).
    pub snd_wnd: u32,
    /// µs the stream was limited by the receive window / send buffer.
    pub rwnd_limited_us: u64,
    pub sndbuf_limited_us: u64,
    pub busy_us: u64,
}

/// One stream as one end saw it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamSide {
    pub stream: u16,
    /// Bytes sent (sender) or received (receiver).
    pub bytes: u64,
    /// UDP: datagrams sent or received.
    pub packets: u64,
    /// UDP receiver: highest sequence seen + 1 (what the sender had sent by
    /// the last arrival).
    pub highest_seq: u64,
    /// Bytes per interval.
    pub intervals: Vec<u64>,
    /// First to last byte, ns.
    pub elapsed_ns: u64,
    pub tcp: Option<TcpInfo>,
    /// The socket's buffers as the kernel set them (getsockopt), bytes.
    pub sndbuf: u32,
    pub rcvbuf: u32,
}

/// One end's report of a flow.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlowSide {
    /// Whether this end sent.
    pub sender: bool,
    pub streams: Vec<StreamSide>,
    /// Start of data to the end, ns.
    pub elapsed_ns: u64,
    /// Why the flow ended early, if it did.
    pub error: Option<String>,
    /// This end's socket-buffer limits when the flow ran (its network
    /// namespace's sysctls), bytes: net.ipv4.tcp_rmem and tcp_wmem maxima
    /// (autotuning), net.core.rmem_max and wmem_max (SO_RCVBUF/SO_SNDBUF).
    pub limits: BufferLimits,
}

/// Socket-buffer limits of one end, bytes; `None` where unreadable.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BufferLimits {
    pub tcp_rmem_max: Option<u64>,
    pub tcp_wmem_max: Option<u64>,
    pub rmem_max: Option<u64>,
    pub wmem_max: Option<u64>,
}

/// A parsed UDP flow datagram header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowDatagram {
    pub token: u64,
    pub stream: u16,
    pub hello: bool,
    pub seq: u64,
}

impl FlowDatagram {
    /// Writes the header into the front of `buf` (at least [`FLOW_HEADER_LEN`]).
    pub fn write(&self, buf: &mut [u8]) -> Result<(), WireError> {
        let Some(h) = buf.get_mut(..FLOW_HEADER_LEN) else {
            return Err(WireError::Truncated {
                need: FLOW_HEADER_LEN,
                have: buf.len(),
            });
        };
        h[0..4].copy_from_slice(FLOW_MAGIC);
        h[4..12].copy_from_slice(&self.token.to_be_bytes());
        h[12..14].copy_from_slice(&self.stream.to_be_bytes());
        h[14..16].copy_from_slice(&u16::from(self.hello).to_be_bytes());
        h[16..24].copy_from_slice(&self.seq.to_be_bytes());
        Ok(())
    }

    pub fn decode(buf: &[u8]) -> Result<FlowDatagram, WireError> {
        let Some(h) = buf.get(..FLOW_HEADER_LEN) else {
            return Err(WireError::Truncated {
                need: FLOW_HEADER_LEN,
                have: buf.len(),
            });
        };
        if &h[0..4] != FLOW_MAGIC {
            return Err(WireError::BadMagic {
                what: "flow datagram",
            });
        }
        let u64_at = |i: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&h[i..i + 8]);
            u64::from_be_bytes(b)
        };
        let kind = u16::from_be_bytes([h[14], h[15]]);
        if kind > 1 {
            return Err(WireError::UnknownCode {
                what: "flow datagram kind",
                code: kind.min(255) as u8,
            });
        }
        Ok(FlowDatagram {
            token: u64_at(4),
            stream: u16::from_be_bytes([h[12], h[13]]),
            hello: kind == 1,
            seq: u64_at(16),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn spec() -> FlowSpec {
        FlowSpec {
            proto: FlowProto::Udp,
            streams: 2,
            duration_ms: 1000,
            interval_ms: 250,
            reverse: false,
            window: 0,
            full_duplex_buffers: false,
            udp_rate_bps: 100_000_000,
            udp_payload: 1472,
            udp_burst_packets: 4,
        }
    }

    #[test]
    fn limits_are_checked() {
        assert!(spec().check().is_ok());
        assert_eq!(spec().intervals(), 5);
        for bad in [
            FlowSpec {
                streams: 0,
                ..spec()
            },
            FlowSpec {
                streams: MAX_FLOW_STREAMS + 1,
                ..spec()
            },
            FlowSpec {
                duration_ms: MAX_FLOW_DURATION_MS + 1,
                ..spec()
            },
            FlowSpec {
                interval_ms: 10,
                ..spec()
            },
            FlowSpec {
                window: MAX_FLOW_BUFFER + 1,
                ..spec()
            },
            FlowSpec {
                udp_rate_bps: 0,
                ..spec()
            },
            FlowSpec {
                udp_payload: 10,
                ..spec()
            },
            FlowSpec {
                udp_burst_packets: 0,
                ..spec()
            },
        ] {
            assert!(bad.check().is_err(), "{bad:?}");
        }
        // TCP ignores the UDP fields.
        let tcp = FlowSpec {
            proto: FlowProto::Tcp,
            udp_rate_bps: 0,
            ..spec()
        };
        assert!(tcp.check().is_ok());
    }

    #[test]
    fn datagrams_round_trip() {
        let d = FlowDatagram {
            token: 7,
            stream: 3,
            hello: true,
            seq: 1 << 40,
        };
        let mut b = [0u8; 64];
        d.write(&mut b).unwrap();
        assert_eq!(FlowDatagram::decode(&b).unwrap(), d);
        assert!(d.write(&mut [0u8; 10]).is_err());
        assert!(FlowDatagram::decode(&b[..10]).is_err());
        b[0] = b'X';
        assert!(FlowDatagram::decode(&b).is_err());
    }

    proptest! {
        #[test]
        fn arbitrary_datagrams_never_panic(b in prop::collection::vec(any::<u8>(), 0..64)) {
            let _ = FlowDatagram::decode(&b);
        }
    }
}
