//! The authentication exchange on a control connection, both ends
//! (docs/protocol.md §2, docs/security.md).  Runs after the client's
//! `OpenSession` and before the server's `SessionOpened`:
//!
//! ```text
//! client                                server (with --key-file)
//! OpenSession            ───────────▶
//!                        ◀───────────   AuthChallenge { server_nonce }
//! Authenticate { key_id, client_nonce, mac }  ───▶   (constant-time check)
//!                        ◀───────────   Authenticated { mac }  (or Error Auth)
//!                        ◀───────────   SessionOpened
//! ```
//! A server without keys answers `OpenSession` with `SessionOpened` at once,
//! as protocol 2 always did.

use crate::auth::{self, Key, KeyRing};
use crate::error::{NetError, Result};
use crate::framing;
use pathsonde_wire::control::{ClientMessage, ErrorCode, ServerMessage};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// Server side: challenges the client and checks its answer by `deadline`.
/// On success returns the key id; on failure the client has been told why
/// and the error says it for the server's log.
pub fn challenge(
    stream: &mut TcpStream,
    keys: &KeyRing,
    deadline: Instant,
    max_message: usize,
) -> Result<String> {
    let server_nonce = auth::nonce();
    framing::send(stream, &ServerMessage::AuthChallenge { server_nonce })?;
    let answer: ClientMessage =
        framing::recv_within(stream, deadline, max_message, "the client's authentication")?;
    let ClientMessage::Authenticate {
        key_id,
        client_nonce,
        mac,
    } = answer
    else {
        return refuse(
            stream,
            "the client did not answer the authentication challenge".into(),
        );
    };
    let Some(key) = keys.get(&key_id) else {
        return refuse(
            stream,
            format!("unknown key id '{}'", key_id.escape_default()),
        );
    };
    if !auth::verify_client(key, &server_nonce, &client_nonce, &mac) {
        return refuse(stream, format!("wrong key for key id '{key_id}'"));
    }
    let mac = auth::server_proof(key, &server_nonce, &client_nonce);
    framing::send(stream, &ServerMessage::Authenticated { mac })?;
    Ok(key_id)
}

fn refuse(stream: &mut TcpStream, why: String) -> Result<String> {
    let _ = framing::send(
        stream,
        &ServerMessage::Error {
            code: ErrorCode::Auth,
            message: format!("authentication failed: {why}"),
        },
    );
    Err(NetError::Auth(why))
}

/// Client side: reads the answer to `OpenSession`, authenticating with `key`
/// if the server asks, and returns the server's `SessionOpened` (or the
/// message that came instead, for the caller to name).
pub fn answer(
    stream: &mut TcpStream,
    key: Option<&Key>,
    timeout: Duration,
) -> Result<ServerMessage> {
    let first: ServerMessage = framing::recv(stream, timeout, "the session to open")?;
    let server_nonce = match first {
        ServerMessage::AuthChallenge { server_nonce } => server_nonce,
        other => return Ok(other),
    };
    let Some(key) = key else {
        return Err(NetError::Auth(
            "the server requires a key; give one with --key-file".into(),
        ));
    };
    let client_nonce = auth::nonce();
    framing::send(
        stream,
        &ClientMessage::Authenticate {
            key_id: key.id.clone(),
            client_nonce,
            mac: auth::client_proof(key, &server_nonce, &client_nonce),
        },
    )?;
    match framing::recv(stream, timeout, "the server's authentication")? {
        ServerMessage::Authenticated { mac } => {
            if !auth::verify_server(key, &server_nonce, &client_nonce, &mac) {
                return Err(NetError::Auth(format!(
                    "the server's proof is wrong: it does not hold key '{}'",
                    key.id
                )));
            }
        }
        ServerMessage::Error {
            code: ErrorCode::Auth,
            message,
        } => {
            return Err(NetError::Auth(
                message
                    .strip_prefix("authentication failed: ")
                    .unwrap_or(&message)
                    .to_string(),
            ))
        }
        other => return Ok(other),
    }
    framing::recv(stream, timeout, "the session to open")
}
