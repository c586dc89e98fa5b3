//! The client's Setup exchange (spec §3): the Setup Request to the
//! server's control port, signed in mode 1, and the Setup Response that
//! names the test port.  A Null Request from the test port, or any other
//! datagram, is ignored while waiting.

use super::{await_reply, per_connection_mbps, setup_auth_error, Ctx, SETUP_TIMER};
use crate::udpst::keys::{self, SessionKeys};
use crate::udpst::{setup_code_meaning, CapacityError, Direction};
use pathsonde_wire::udpst::setup::{
    MaxBandwidth, Packet as SetupPacket, Repr as SetupRepr, SetupCommand, SetupModifiers,
    SetupResult,
};
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::Ordering;
use std::time::Instant;

/// What an accepted setup gives the rest of the connection.
pub(super) struct SetUp {
    /// The server's test port for this connection.
    pub test_port: u16,
    /// Mode-1 session keys, when the test is authenticated.
    pub session: Option<SessionKeys>,
    /// The set-up timer's end: SETUP_TIMER after the request went out,
    /// for the whole exchange up to the TA Response.
    pub deadline: Instant,
}

/// Sends connection `idx`'s Setup Request, starts the set-up timer and
/// waits for its accepted Setup Response.
pub(super) fn set_up(ctx: &Ctx<'_>, idx: u8, sock: &UdpSocket) -> Result<SetUp, CapacityError> {
    let cfg = ctx.cfg;
    let server = cfg.server;
    let upstream = cfg.direction == Direction::Upstream;
    let mbps = per_connection_mbps(cfg).unwrap_or(0).min(32_767) as u16;
    let req = SetupRepr::request(
        idx,
        cfg.connections,
        ctx.mc_ident,
        MaxBandwidth { upstream, mbps },
        SetupModifiers::new(cfg.jumbo, cfg.traditional_mtu),
    );
    let mut buf = req.to_bytes();
    let session = cfg.key.as_ref().map(|k| {
        let t = keys::unix_now() as u32;
        let s = SessionKeys::derive(&k.secret, t, k.key_id);
        keys::sign_at(&mut buf, &s.client, k.key_id, t);
        s
    });
    let deadline = Instant::now() + SETUP_TIMER;
    sock.send_to(&buf, server)
        .map_err(|e| CapacityError::io(format!("sending the setup request to {server}"), e))?;
    ctx.bytes_sent
        .fetch_add(buf.len() as u64, Ordering::Relaxed);
    let test_port = await_reply(
        ctx,
        sock,
        deadline,
        "setup response",
        "receiving the setup response",
        |s, b| s.recv_from(b),
        |d, from| response(ctx, idx, session.as_ref(), d, from),
    )?;
    Ok(SetUp {
        test_port,
        session,
        deadline,
    })
}

/// This connection's Setup Response in `d` from `from`: `None` for
/// anything else (the Null Request from the test port, or noise).
fn response(
    ctx: &Ctx<'_>,
    idx: u8,
    session: Option<&SessionKeys>,
    d: &[u8],
    from: SocketAddr,
) -> Option<Result<u16, CapacityError>> {
    let server = ctx.cfg.server;
    if from != server {
        return None;
    }
    let p = SetupPacket::new_checked(d).ok()?;
    let resp = SetupRepr::parse(&p).ok()?;
    if resp.command != SetupCommand::Response
        || resp.mc_ident != ctx.mc_ident
        || resp.mc_index != idx
    {
        return None;
    }
    if let Some(s) = session {
        if let Err(f) = keys::verify(d, &s.server) {
            return Some(Err(setup_auth_error(server, f, false)));
        }
    }
    if resp.result != SetupResult::Ack {
        let code = resp.result.code();
        return Some(Err(CapacityError::SetupRejected {
            server,
            code,
            meaning: setup_code_meaning(code),
        }));
    }
    if resp.test_port == 0 {
        return Some(Err(CapacityError::Other(format!(
            "server {server} accepted the setup with test port 0"
        ))));
    }
    Some(Ok(resp.test_port))
}
