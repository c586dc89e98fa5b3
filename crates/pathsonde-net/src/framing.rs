//! Blocking send and receive of control frames over a TCP stream, with the
//! stream's read timeout turned into a named [`NetError::Timeout`].

use crate::error::{NetError, Result};
use pathsonde_wire::control::{decode_body, encode_frame, frame_body_len, FRAME_HEADER_LEN};
use serde::{de::DeserializeOwned, Serialize};
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

pub fn send<T: Serialize>(stream: &mut TcpStream, msg: &T) -> Result<()> {
    let frame = encode_frame(msg)?;
    stream.write_all(&frame).map_err(|e| match e.kind() {
        // The peer is gone (killed, or closed on an error): the same
        // failure as finding it gone while reading.
        io::ErrorKind::BrokenPipe
        | io::ErrorKind::ConnectionReset
        | io::ErrorKind::ConnectionAborted => NetError::Closed {
            waiting_for: "the peer to take a control message",
        },
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => NetError::Timeout {
            waiting_for: "the peer to take a control message",
            timeout_ms: stream
                .write_timeout()
                .ok()
                .flatten()
                .map_or(0, |t| t.as_millis() as u64),
        },
        _ => NetError::io("writing to the control connection", e),
    })
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

/// Receives one message that must arrive whole by `deadline` and be at most
/// `max_len` bytes: a peer that trickles bytes (one a second) or announces a
/// huge frame cannot hold the reader longer or make it allocate more.
pub fn recv_within<T: DeserializeOwned>(
    stream: &mut TcpStream,
    deadline: Instant,
    max_len: usize,
    waiting_for: &'static str,
) -> Result<T> {
    let mut header = [0u8; FRAME_HEADER_LEN];
    read_exact_by(stream, &mut header, deadline, waiting_for)?;
    let len = frame_body_len(header)?;
    if len > max_len {
        return Err(NetError::protocol(format!(
            "control message of {len} bytes exceeds the limit of {max_len}"
        )));
    }
    let mut body = vec![0u8; len];
    read_exact_by(stream, &mut body, deadline, waiting_for)?;
    Ok(decode_body(&body)?)
}

/// `read_exact` against a deadline for the whole buffer (a read timeout
/// alone restarts with every byte).
pub fn read_exact_by(
    stream: &mut TcpStream,
    buf: &mut [u8],
    deadline: Instant,
    waiting_for: &'static str,
) -> Result<()> {
    let started = Instant::now();
    let timeout = || NetError::Timeout {
        waiting_for,
        timeout_ms: deadline.saturating_duration_since(started).as_millis() as u64,
    };
    let mut done = 0;
    while done < buf.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(timeout());
        }
        stream
            .set_read_timeout(Some(left))
            .map_err(|e| NetError::io("setting the control read timeout", e))?;
        match stream.read(&mut buf[done..]) {
            Ok(0) => return Err(NetError::Closed { waiting_for }),
            Ok(n) => done += n,
            Err(e) => match e.kind() {
                io::ErrorKind::Interrupted => {}
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => return Err(timeout()),
                io::ErrorKind::UnexpectedEof
                | io::ErrorKind::ConnectionReset
                | io::ErrorKind::ConnectionAborted
                | io::ErrorKind::BrokenPipe => return Err(NetError::Closed { waiting_for }),
                _ => return Err(NetError::io(format!("reading {waiting_for}"), e)),
            },
        }
    }
    Ok(())
}
