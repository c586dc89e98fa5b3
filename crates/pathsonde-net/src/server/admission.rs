//! Who gets a session (docs/security.md): the `--allow` list and the
//! connection cap at accept, then the handshake, the session request and
//! authentication, all within the half-open deadline, and last the one
//! measurement slot.  A connection holds nothing a measurement needs until
//! it has passed all of this, so hostile or slow connections cannot keep a
//! real client out.

use super::ServerConfig;
use crate::error::{NetError, Result};
use crate::framing;
use crate::session_auth;
use pathsonde_wire::control::ClientMessage;
use pathsonde_wire::handshake::{ClientHello, HelloStatus, ServerHello, HELLO_LEN};
use pathsonde_wire::PROTOCOL_VERSION;
use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The server's connection and measurement slots.
#[derive(Debug)]
pub(super) struct Slots {
    connections: AtomicUsize,
    measuring: AtomicBool,
    max_connections: usize,
}

/// One held connection slot, released on drop.
pub(super) struct ConnectionSlot(Arc<Slots>);
/// The measurement slot, released on drop.
pub(super) struct MeasuringSlot(Arc<Slots>);

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        self.0.connections.fetch_sub(1, Ordering::SeqCst);
    }
}
impl Drop for MeasuringSlot {
    fn drop(&mut self) {
        self.0.measuring.store(false, Ordering::SeqCst);
    }
}

impl Slots {
    pub(super) fn new(max_connections: usize) -> Arc<Slots> {
        Arc::new(Slots {
            connections: AtomicUsize::new(0),
            measuring: AtomicBool::new(false),
            max_connections: max_connections.max(1),
        })
    }

    /// Decides at accept, before reading a byte: refused (not allowed),
    /// busy (measuring, or every connection slot taken), or a slot.
    pub(super) fn admit(
        self: &Arc<Self>,
        cfg: &ServerConfig,
        peer: SocketAddr,
    ) -> std::result::Result<ConnectionSlot, HelloStatus> {
        if !cfg.allow.allows(peer.ip()) {
            return Err(HelloStatus::Refused);
        }
        if self.measuring.load(Ordering::SeqCst) {
            return Err(HelloStatus::Busy);
        }
        let held = self.connections.fetch_add(1, Ordering::SeqCst);
        if held >= self.max_connections {
            self.connections.fetch_sub(1, Ordering::SeqCst);
            return Err(HelloStatus::Busy);
        }
        Ok(ConnectionSlot(self.clone()))
    }

    /// Takes the measurement slot if it is free.
    pub(super) fn measure(self: &Arc<Self>) -> Option<MeasuringSlot> {
        self.measuring
            .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
            .ok()
            .map(|_| MeasuringSlot(self.clone()))
    }
}

/// Answers a connection that will not be served with the handshake's
/// status and closes it, without reading its hello.
pub(super) fn reply_and_close(mut stream: TcpStream, status: HelloStatus) {
    let reply = ServerHello {
        version: PROTOCOL_VERSION,
        status,
    };
    let _ = stream.set_write_timeout(Some(Duration::from_millis(200)));
    let _ = stream.write_all(&reply.encode());
    let _ = stream.shutdown(std::net::Shutdown::Both);
}

/// A client that passed the handshake.
pub(super) struct Admitted {
    /// The key it authenticated with, if the server requires one.
    pub key_id: Option<String>,
}

/// The hello, the session request and authentication, all by `deadline`
/// however slowly the bytes come.  `Ok(None)`: the conversation ended
/// properly (a version mismatch, told to the client).
pub(super) fn handshake(
    stream: &mut TcpStream,
    cfg: &ServerConfig,
    deadline: Instant,
) -> Result<Option<Admitted>> {
    let _ = stream.set_write_timeout(Some(cfg.handshake_timeout));
    let mut hello = [0u8; HELLO_LEN];
    framing::read_exact_by(stream, &mut hello, deadline, "the client hello")?;
    let hello = ClientHello::decode(&hello)?;
    let status = if hello.version == PROTOCOL_VERSION {
        HelloStatus::Ok
    } else {
        HelloStatus::VersionMismatch
    };
    stream
        .write_all(
            &ServerHello {
                version: PROTOCOL_VERSION,
                status,
            }
            .encode(),
        )
        .map_err(|e| NetError::io("writing the server hello", e))?;
    if status != HelloStatus::Ok {
        crate::server_stats::ServerStats::add(&cfg.stats.version_mismatches, 1);
        return Ok(None);
    }
    let max = cfg.limits.max_control_message;
    match framing::recv_within(stream, deadline, max, "the session request")? {
        ClientMessage::OpenSession { .. } => {}
        other => {
            return Err(NetError::protocol(format!(
                "expected OpenSession first, got {}",
                message_name(&other)
            )))
        }
    }
    let key_id = match &cfg.keys {
        Some(keys) => Some(session_auth::challenge(stream, keys, deadline, max)?),
        None => None,
    };
    Ok(Some(Admitted { key_id }))
}

/// A message's name for errors and logs (never its contents).
pub(super) fn message_name(m: &ClientMessage) -> &'static str {
    match m {
        ClientMessage::OpenSession { .. } => "OpenSession",
        ClientMessage::Ping { .. } => "Ping",
        ClientMessage::AnnounceTrain(_) => "AnnounceTrain",
        ClientMessage::TrainSent { .. } => "TrainSent",
        ClientMessage::Close => "Close",
        ClientMessage::HostReportRequest => "HostReportRequest",
        ClientMessage::Authenticate { .. } => "Authenticate",
        ClientMessage::Flow(_) => "Flow",
        ClientMessage::ReceiverDropsWanted => "ReceiverDropsWanted",
        ClientMessage::FlowReceiverDropsWanted => "FlowReceiverDropsWanted",
    }
}

/// A session's failure as the server's log says it (the error texts are
/// written for the client, which sees the server's side of things).
pub(super) fn log_line(e: &NetError) -> String {
    match e {
        NetError::Closed { waiting_for } => {
            format!("the client closed the connection while the server waited for {waiting_for}")
        }
        NetError::Timeout {
            waiting_for,
            timeout_ms,
        } => format!("waited {timeout_ms} ms for {waiting_for} and got none; connection closed"),
        other => other.to_string(),
    }
}
