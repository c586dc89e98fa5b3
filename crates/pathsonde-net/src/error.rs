//! Everything that can go wrong talking to a peer, sorted so that the binary
//! can give each kind its own exit code (see `docs/exit-codes.md`).

use pathsonde_wire::WireError;
use std::io;
use std::net::SocketAddr;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum NetError {
    #[error("cannot connect to {addr}: {source}")]
    Connect {
        addr: SocketAddr,
        #[source]
        source: io::Error,
    },
    #[error("cannot resolve {host}: {reason}")]
    Resolve { host: String, reason: String },
    #[error("version mismatch: this client speaks protocol {ours}, the server at {addr} speaks {theirs}")]
    VersionMismatch {
        addr: SocketAddr,
        ours: u16,
        theirs: u16,
    },
    #[error("server at {addr} is busy with another measurement; try again later")]
    Busy { addr: SocketAddr },
    #[error(
        "server at {addr} refused this client: its address is not in the server's --allow list"
    )]
    Refused { addr: SocketAddr },
    #[error(
        "server stopped answering: nothing for {timeout_ms} ms while waiting for {waiting_for}"
    )]
    Timeout {
        waiting_for: &'static str,
        timeout_ms: u64,
    },
    #[error("server closed the control connection while the client waited for {waiting_for}")]
    Closed { waiting_for: &'static str },
    #[error(
        "probe traffic is not getting through: {trains} trains in a row arrived with no packet"
    )]
    ProbesLost { trains: u32 },
    #[error("the method ended without an estimate: {0}")]
    NoEstimate(String),
    #[error("protocol error: {0}")]
    Protocol(String),
    #[error("server reported an error: {0}")]
    Server(String),
    #[error("bad input: {0}")]
    Input(String),
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: io::Error,
    },
    /// Authentication failed or is required (docs/security.md).
    #[error("authentication failed: {0}")]
    Auth(String),
    /// A session limit was reached (docs/security.md, "Limits").
    #[error("{0}")]
    Limit(String),
}

impl NetError {
    pub fn io(context: impl Into<String>, source: io::Error) -> Self {
        NetError::Io {
            context: context.into(),
            source,
        }
    }
}

impl From<WireError> for NetError {
    fn from(e: WireError) -> Self {
        NetError::Protocol(e.to_string())
    }
}

pub type Result<T, E = NetError> = std::result::Result<T, E>;
