//! Blocking send and receive of control frames over a TCP stream, with the
//! stream's read timeout turned into a named [`NetError::Timeout`].

use crate::error::{NetError, Result};
use pathsonde_wire::control::{decode_body, encode_frame, frame_body_len, FRAME_HEADER_LEN};
use serde::{de::DeserializeOwned, Serialize};
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

pub fn send<T: Serialize>(stream: &mut TcpStream, msg: &T) -> Result<()> {
    let frame = encode_frame(msg)?;
    stream
        .write_all(&frame)
        .map_err(|e| NetError::io("writing to the control connection", e))
}

/// Receives one message, waiting at most `timeout`.
pub fn recv<T: DeserializeOwned>(
    stream: &mut TcpStream,
    timeout: Duration,
    waiting_for: &'static str,
) -> Result<T> {
    stream
        .set_read_timeout(Some(timeout))
        .map_err(|e| NetError::io("setting the control read timeout", e))?;
    let map = |e: io::Error| match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => NetError::Timeout {
            waiting_for,
            timeout_ms: timeout.as_millis() as u64,
        },
        io::ErrorKind::UnexpectedEof
        | io::ErrorKind::ConnectionReset
        | io::ErrorKind::ConnectionAborted
        | io::ErrorKind::BrokenPipe => NetError::Closed { waiting_for },
        _ => NetError::io(format!("reading {waiting_for}"), e),
    };
    let mut header = [0u8; FRAME_HEADER_LEN];
    stream.read_exact(&mut header).map_err(map)?;
    let len = frame_body_len(header)?;
    let mut body = vec![0u8; len];
    stream.read_exact(&mut body).map_err(map)?;
    Ok(decode_body(&body)?)
}
