//! Control messages, exchanged over TCP after the [`crate::handshake`].
//!
//! Each message travels as a frame: a 4-byte big-endian body length, then the
//! body, a postcard encoding of [`ClientMessage`] or [`ServerMessage`].  A frame
//! longer than [`MAX_FRAME`] is refused before any allocation, and a body must
//! decode exactly (trailing bytes are an error), so a peer cannot make the
//! other side allocate or misread.
//!
//! Compatibility rule: postcard numbers enum variants by position, so new
//! variants and new messages are only ever appended; any other change bumps
//! [`crate::PROTOCOL_VERSION`].

use crate::error::WireError;
use serde::{de::DeserializeOwned, Deserialize, Serialize};

/// Largest control frame body either side accepts (a train report of 100 000
/// arrivals needs well under 2 MiB).
pub const MAX_FRAME: usize = 4 << 20;
/// Most packets the server accepts in one announced train.
pub const MAX_TRAIN_PACKETS: u32 = 100_000;
/// Largest host report either side sends or accepts, bytes of JSON (a
/// `pathsonde host --json` report is about 5 KB).
pub const MAX_HOST_REPORT: usize = 64 << 10;

/// Which clock stamped a set of times, as carried on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum WireClockSource {
    Hardware,
    KernelSoftware,
    UserSpace,
    Simulated,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireClock {
    pub source: WireClockSource,
    pub resolution_ns: u64,
}

/// The client announces a train before sending it, so the server can size its
/// bookkeeping and knows when the train is complete.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrainAnnounce {
    pub train: u32,
    pub packets: u32,
    /// UDP payload bytes of every packet.
    pub payload_len: u32,
}

/// One probe packet's arrival at the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Arrival {
    pub seq: u32,
    /// Receive stamp, ns on the server's clock.
    pub recv_ns: i64,
}

/// What the server saw of one train.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrainReport {
    pub train: u32,
    /// First arrival of each sequence number, in arrival order.
    pub arrivals: Vec<Arrival>,
    /// Packets whose sequence number had already arrived.
    pub duplicates: u32,
    /// Packets of this session that were malformed, of another train, or of the wrong size.
    pub rejected: u32,
    pub clock: WireClock,
}

/// Why the server ended or refused something.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ErrorCode {
    /// The client sent something out of order or out of range.
    Protocol,
    /// A limit (train size, session length) was exceeded.
    Limit,
    /// The server failed internally (socket error).
    Internal,
    /// Authentication failed: unknown key id or wrong key (docs/security.md).
    Auth,
    /// Every session slot is taken; try again later.
    Busy,
}

/// Bytes of an authentication nonce and of an HMAC-SHA256 proof.
pub const AUTH_NONCE_LEN: usize = 32;
pub const AUTH_MAC_LEN: usize = 32;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ClientMessage {
    /// Opens a measurement session; the server answers `SessionOpened`.
    OpenSession { software: String },
    /// A control-channel RTT sample; the server answers `Pong` at once.
    Ping { seq: u32, client_ns: i64 },
    /// The next train; the server answers `TrainReady` once it is listening.
    AnnounceTrain(TrainAnnounce),
    /// The client has sent the whole train; the server answers `TrainReport`
    /// after waiting `linger_ms` for stragglers (capped by the server).
    TrainSent {
        train: u32,
        packets_sent: u32,
        linger_ms: u32,
    },
    /// The client is done; the server closes the session.
    Close,
    /// Asks for the server's host report (protocol 2); the server answers
    /// `HostReport`.
    HostReportRequest,
    /// A throughput flow (issue 5, [`crate::flow`]); the server answers
    /// `FlowReady`, runs its side, then answers `FlowReport`.
    Flow(crate::flow::FlowSpec),
    /// The answer to `AuthChallenge`: which key, the client's own nonce, and
    /// HMAC-SHA256 over both nonces (docs/security.md).
    Authenticate {
        key_id: String,
        client_nonce: [u8; AUTH_NONCE_LEN],
        mac: [u8; AUTH_MAC_LEN],
    },
    /// Asks the server to follow every `TrainReport` with `ReceiverDrops`
    /// (no answer of its own).  Sent only to a server whose `software`
    /// string carries [`RECEIVER_DROPS_FEATURE`]: an older server would end
    /// the session on a message it does not know.
    ReceiverDropsWanted,
    /// Asks the server to follow every `FlowReport` with
    /// `FlowReceiverDrops` (no answer of its own).  Sent only to a server
    /// whose `software` string carries [`FLOW_DROPS_FEATURE`].
    FlowReceiverDropsWanted,
}

/// The token in a server's `software` string that says it can report the
/// probe packets its host dropped (`ReceiverDropsWanted`).
pub const RECEIVER_DROPS_FEATURE: &str = "receiver-drops";
/// The token in a server's `software` string that says it can report the
/// UDP flow datagrams its receiving socket dropped
/// (`FlowReceiverDropsWanted`).
pub const FLOW_DROPS_FEATURE: &str = "flow-drops";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ServerMessage {
    SessionOpened {
        session: u64,
        /// UDP port on the server that receives probes and answers echoes.
        probe_port: u16,
        clock: WireClock,
        max_train_packets: u32,
        software: String,
    },
    Pong {
        seq: u32,
        client_ns: i64,
        server_ns: i64,
    },
    TrainReady {
        train: u32,
    },
    TrainReport(TrainReport),
    Error {
        code: ErrorCode,
        message: String,
    },
    /// The server's host report (protocol 2): the JSON of `pathsonde host
    /// --json`, at most [`MAX_HOST_REPORT`] bytes (see [`host_report`]).
    /// JSON because the report's "value or why unknown" fields are untagged,
    /// which postcard cannot carry; the receiver parses it as untrusted input.
    HostReport {
        json: String,
    },
    /// The flow's data port (TCP or UDP, on the control connection's
    /// address) and the token every data connection or datagram carries.
    FlowReady {
        port: u16,
        token: u64,
    },
    /// The server's side of a finished flow.
    FlowReport(crate::flow::FlowSide),
    /// Sent instead of `SessionOpened` by a server that requires
    /// authentication; the client answers `Authenticate`.
    AuthChallenge {
        server_nonce: [u8; AUTH_NONCE_LEN],
    },
    /// The client's proof was good; this is the server's own proof that it
    /// holds the same key.  `SessionOpened` follows.
    Authenticated {
        mac: [u8; AUTH_MAC_LEN],
    },
    /// After a `TrainReport`, to a client that sent `ReceiverDropsWanted`:
    /// datagrams the server's probe socket dropped itself (its receive
    /// buffer was full: `SO_RXQ_OVFL`) while the train was collected;
    /// `None` when the kernel does not count them.  These losses are the
    /// receiving host's, not the path's.
    ReceiverDrops {
        train: u32,
        dropped: Option<u32>,
    },
    /// After a `FlowReport`, to a client that sent
    /// `FlowReceiverDropsWanted`: the UDP flow datagrams the server's
    /// receiving socket dropped itself (its buffer was full); `None` when
    /// the server did not receive (TCP, a reversed flow) or the kernel does
    /// not count them.
    FlowReceiverDrops {
        dropped: Option<u64>,
    },
}

/// Builds a `HostReport` message, refusing a report over [`MAX_HOST_REPORT`].
pub fn host_report(json: String) -> Result<ServerMessage, WireError> {
    check_host_report(&json)?;
    Ok(ServerMessage::HostReport { json })
}

/// Checks a received host report's size (the frame cap alone allows 4 MiB).
pub fn check_host_report(json: &str) -> Result<(), WireError> {
    if json.len() > MAX_HOST_REPORT {
        return Err(WireError::Malformed(format!(
            "host report of {} bytes (at most {MAX_HOST_REPORT})",
            json.len()
        )));
    }
    Ok(())
}

/// Length of the frame header.
pub const FRAME_HEADER_LEN: usize = 4;

/// Encodes `msg` as a complete frame (header and body).
pub fn encode_frame<T: Serialize>(msg: &T) -> Result<Vec<u8>, WireError> {
    let mut out = postcard::to_extend(msg, vec![0u8; FRAME_HEADER_LEN])
        .map_err(|e| WireError::Malformed(e.to_string()))?;
    let body_len = out.len() - FRAME_HEADER_LEN;
    if body_len > MAX_FRAME {
        return Err(WireError::FrameTooLarge {
            len: body_len,
            max: MAX_FRAME,
        });
    }
    out[..FRAME_HEADER_LEN].copy_from_slice(&(body_len as u32).to_be_bytes());
    Ok(out)
}

/// Reads a frame header and returns the body length, refusing oversized frames.
pub fn frame_body_len(header: [u8; FRAME_HEADER_LEN]) -> Result<usize, WireError> {
    let len = u32::from_be_bytes(header) as usize;
    if len > MAX_FRAME {
        return Err(WireError::FrameTooLarge {
            len,
            max: MAX_FRAME,
        });
    }
    Ok(len)
}

/// Decodes a frame body; trailing bytes are an error.
pub fn decode_body<T: DeserializeOwned>(body: &[u8]) -> Result<T, WireError> {
    let (msg, rest) =
        postcard::take_from_bytes(body).map_err(|e| WireError::Malformed(e.to_string()))?;
    if !rest.is_empty() {
        return Err(WireError::Malformed(format!(
            "{} trailing bytes after message",
            rest.len()
        )));
    }
    Ok(msg)
}

/// Decodes one complete frame from the front of `buf`, returning the message
/// and the number of bytes consumed, or `Ok(None)` when more bytes are needed.
pub fn decode_frame<T: DeserializeOwned>(buf: &[u8]) -> Result<Option<(T, usize)>, WireError> {
    let Some(header) = buf.get(..FRAME_HEADER_LEN) else {
        return Ok(None);
    };
    let len = frame_body_len([header[0], header[1], header[2], header[3]])?;
    let Some(body) = buf.get(FRAME_HEADER_LEN..FRAME_HEADER_LEN + len) else {
        return Ok(None);
    };
    Ok(Some((decode_body(body)?, FRAME_HEADER_LEN + len)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn report(n: u32) -> ServerMessage {
        ServerMessage::TrainReport(TrainReport {
            train: 4,
            arrivals: (0..n)
                .map(|i| Arrival {
                    seq: i,
                    recv_ns: 1_700_000_000_000_000_000 + i64::from(i) * 12_000,
                })
                .collect(),
            duplicates: 1,
            rejected: 2,
            clock: WireClock {
                source: WireClockSource::KernelSoftware,
                resolution_ns: 1,
            },
        })
    }

    #[test]
    fn every_message_round_trips() {
        let client = [
            ClientMessage::OpenSession {
                software: "pathsonde 0.1".into(),
            },
            ClientMessage::Ping {
                seq: 1,
                client_ns: -3,
            },
            ClientMessage::AnnounceTrain(TrainAnnounce {
                train: 2,
                packets: 100,
                payload_len: 1472,
            }),
            ClientMessage::TrainSent {
                train: 2,
                packets_sent: 100,
                linger_ms: 50,
            },
            ClientMessage::Close,
            ClientMessage::HostReportRequest,
            ClientMessage::Flow(crate::flow::FlowSpec {
                proto: crate::flow::FlowProto::Tcp,
                streams: 2,
                duration_ms: 1000,
                interval_ms: 100,
                reverse: true,
                window: 65536,
                full_duplex_buffers: false,
                udp_rate_bps: 0,
                udp_payload: 0,
                udp_burst_packets: 0,
            }),
            ClientMessage::Authenticate {
                key_id: "alice".into(),
                client_nonce: [7; AUTH_NONCE_LEN],
                mac: [9; AUTH_MAC_LEN],
            },
            ClientMessage::ReceiverDropsWanted,
            ClientMessage::FlowReceiverDropsWanted,
        ];
        for m in client {
            let f = encode_frame(&m).unwrap();
            let (back, used): (ClientMessage, usize) = decode_frame(&f).unwrap().unwrap();
            assert_eq!((back, used), (m, f.len()));
        }
        let server = [
            report(1000),
            ServerMessage::Error {
                code: ErrorCode::Limit,
                message: "too long".into(),
            },
            ServerMessage::Pong {
                seq: 1,
                client_ns: 2,
                server_ns: 3,
            },
            host_report(r#"{"kernel":{"release":"6.1"},"pacing":{}}"#.into()).unwrap(),
            ServerMessage::FlowReady { port: 5, token: 9 },
            ServerMessage::ReceiverDrops {
                train: 3,
                dropped: Some(17),
            },
            ServerMessage::ReceiverDrops {
                train: 4,
                dropped: None,
            },
            ServerMessage::FlowReceiverDrops { dropped: Some(5) },
            ServerMessage::FlowReceiverDrops { dropped: None },
            ServerMessage::FlowReport(crate::flow::FlowSide {
                sender: true,
                streams: vec![crate::flow::StreamSide {
                    bytes: 10,
                    intervals: vec![1, 2],
                    tcp: Some(crate::flow::TcpInfo::default()),
                    ..Default::default()
                }],
                elapsed_ns: 3,
                error: None,
                limits: crate::flow::BufferLimits {
                    tcp_rmem_max: Some(1),
                    ..Default::default()
                },
            }),
            ServerMessage::AuthChallenge {
                server_nonce: [1; AUTH_NONCE_LEN],
            },
            ServerMessage::Authenticated {
                mac: [2; AUTH_MAC_LEN],
            },
            ServerMessage::Error {
                code: ErrorCode::Auth,
                message: "wrong key".into(),
            },
        ];
        for m in server {
            let f = encode_frame(&m).unwrap();
            let (back, _): (ServerMessage, usize) = decode_frame(&f).unwrap().unwrap();
            assert_eq!(back, m);
        }
    }

    #[test]
    fn a_full_train_report_fits_in_a_frame() {
        let f = encode_frame(&report(MAX_TRAIN_PACKETS)).unwrap();
        assert!(f.len() < MAX_FRAME);
    }

    #[test]
    fn partial_frames_ask_for_more() {
        let f = encode_frame(&ClientMessage::Close).unwrap();
        assert_eq!(decode_frame::<ClientMessage>(&f[..2]).unwrap(), None);
        let f = encode_frame(&report(3)).unwrap();
        assert_eq!(
            decode_frame::<ServerMessage>(&f[..f.len() - 1]).unwrap(),
            None
        );
    }

    #[test]
    fn oversized_and_trailing_are_refused() {
        assert!(matches!(
            frame_body_len((MAX_FRAME as u32 + 1).to_be_bytes()),
            Err(WireError::FrameTooLarge { .. })
        ));
        let mut f = encode_frame(&ClientMessage::Close).unwrap();
        f.push(0);
        f[3] += 1;
        assert!(matches!(
            decode_frame::<ClientMessage>(&f),
            Err(WireError::Malformed(_))
        ));
    }

    #[test]
    fn host_reports_are_bounded() {
        let big = "x".repeat(MAX_HOST_REPORT + 1);
        assert!(host_report(big.clone()).is_err());
        assert!(check_host_report(&big).is_err());
        let full = host_report("y".repeat(MAX_HOST_REPORT)).unwrap();
        assert!(encode_frame(&full).unwrap().len() < MAX_FRAME);
    }

    proptest! {
        #[test]
        fn host_report_round_trips_and_survives_corruption(
            json in ".{0,400}", idx in 0usize..500, byte: u8
        ) {
            let m = host_report(json).unwrap();
            let mut f = encode_frame(&m).unwrap();
            let (back, used): (ServerMessage, usize) = decode_frame(&f).unwrap().unwrap();
            prop_assert_eq!((back, used), (m, f.len()));
            let i = idx % f.len();
            f[i] = byte;
            let _ = decode_frame::<ServerMessage>(&f);
            let _ = decode_frame::<ClientMessage>(&f);
        }

        #[test]
        fn arbitrary_bytes_never_panic(b in prop::collection::vec(any::<u8>(), 0..300)) {
            let _ = decode_frame::<ClientMessage>(&b);
            let _ = decode_frame::<ServerMessage>(&b);
            let _ = decode_body::<ClientMessage>(&b);
            let _ = decode_body::<ServerMessage>(&b);
        }

        #[test]
        fn corrupted_frames_never_panic(idx in 0usize..200, byte: u8) {
            let mut f = encode_frame(&report(20)).unwrap();
            let i = idx % f.len();
            f[i] = byte;
            let _ = decode_frame::<ServerMessage>(&f);
        }
    }
}
