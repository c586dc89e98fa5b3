//! Everything that can go wrong talking to a peer, sorted so that the binary
//! can give each kind its own exit code (see `docs/exit-codes.md`).
//!
//! An error that comes from another one carries it as its `#[source]` (a
//! wire decoding error, a session limit, an I/O error); the messages keep
//! the source's words too, since the CLI prints one line.  A peer's error
//! report keeps its code ([`ServerError`]).

use crate::limits::LimitExceeded;
use pathsonde_wire::control::ErrorCode;
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
    #[error("cannot resolve {host}: {source}")]
    Resolve {
        host: String,
        #[source]
        source: io::Error,
    },
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
    /// The method's own words for why it has no answer (core's runner
    /// gives them as text).
    #[error("the method ended without an estimate: {0}")]
    NoEstimate(String),
    #[error("protocol error: {0}")]
    Protocol(#[source] ProtocolError),
    /// The peer ended the session with an error report.
    #[error("server reported an error: {0}")]
    Server(#[source] ServerError),
    #[error("bad input: {0}")]
    Input(#[source] InputError),
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
    Limit(#[source] LimitExceeded),
}

/// What about the peer's messages was wrong.
#[derive(Debug, Error)]
pub enum ProtocolError {
    /// Bytes that do not decode.
    #[error("{0}")]
    Wire(#[source] WireError),
    /// A hello that does not decode: something else listens there.
    #[error("{addr} is not a pathsonde server ({source})")]
    NotPathsonde {
        addr: SocketAddr,
        #[source]
        source: WireError,
    },
    /// A message that decodes but breaks the protocol (out of order, or
    /// not what was asked for), in words.
    #[error("{0}")]
    Violation(String),
}

/// A peer's error report: its code and its words, as the wire carries them.
#[derive(Debug, Clone, Error)]
#[error("{message}")]
pub struct ServerError {
    pub code: ErrorCode,
    pub message: String,
}

/// What was wrong with what this side was asked to do.
#[derive(Debug, Error)]
pub enum InputError {
    /// A throughput flow's parameters out of range; `refused`: the
    /// server's check (the client's own check says nothing more).
    #[error("{}{source}", if *.refused { "flow refused: " } else { "" })]
    Flow {
        refused: bool,
        #[source]
        source: WireError,
    },
    /// Anything else, in words.
    #[error("{0}")]
    Invalid(String),
}

impl NetError {
    pub fn io(context: impl Into<String>, source: io::Error) -> Self {
        NetError::Io {
            context: context.into(),
            source,
        }
    }

    /// A protocol violation described in words.
    pub fn protocol(what: impl Into<String>) -> Self {
        NetError::Protocol(ProtocolError::Violation(what.into()))
    }

    /// Bad input described in words.
    pub fn input(what: impl Into<String>) -> Self {
        NetError::Input(InputError::Invalid(what.into()))
    }
}

impl From<WireError> for NetError {
    fn from(e: WireError) -> Self {
        NetError::Protocol(ProtocolError::Wire(e))
    }
}

impl From<LimitExceeded> for NetError {
    fn from(e: LimitExceeded) -> Self {
        NetError::Limit(e)
    }
}

pub type Result<T, E = NetError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    /// The messages the CLI prints are the words they were before the
    /// variants were typed, and the source is still there to walk.
    #[test]
    fn messages_keep_their_words_and_sources_chain() {
        let wire = || WireError::Truncated { need: 8, have: 2 };
        let e = NetError::from(wire());
        assert_eq!(e.to_string(), format!("protocol error: {}", wire()));
        let inner = e.source().and_then(|s| s.source()).expect("the wire error");
        assert_eq!(inner.to_string(), wire().to_string());
        let refused = NetError::Input(InputError::Flow {
            refused: true,
            source: wire(),
        });
        assert_eq!(
            refused.to_string(),
            format!("bad input: flow refused: {}", wire())
        );
        let server = NetError::Server(ServerError {
            code: ErrorCode::Limit,
            message: "too long".into(),
        });
        assert_eq!(server.to_string(), "server reported an error: too long");
        assert!(matches!(
            server,
            NetError::Server(ServerError {
                code: ErrorCode::Limit,
                ..
            })
        ));
    }
}
