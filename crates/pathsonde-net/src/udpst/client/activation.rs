//! The client's Test Activation exchange (spec §4): the request carrying
//! the test's parameters to the test port (signed in mode 1), and the
//! server's response with the values it policed.  A Null Request or early
//! load is ignored while waiting.

use super::{await_reply, setup_auth_error, Ctx};
use crate::udpst::keys::{self, SessionKeys};
use crate::udpst::CapacityError;
use pathsonde_core::capacity::adjust::Algorithm;
use pathsonde_core::DurationNs;
use pathsonde_wire::udpst::activation::{
    ActivationModifiers, ActivationResult, Packet as ActivationPacket, RateAdjAlgo,
    Repr as ActivationRepr,
};
use pathsonde_wire::udpst::PduKind;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::Ordering;
use std::time::Instant;

/// The Test Activation Request for this client's configuration.
fn request(ctx: &Ctx<'_>) -> ActivationRepr {
    let cfg = ctx.cfg;
    let mut ta = ActivationRepr::request(cfg.direction);
    let ms16 = |d: DurationNs| u16::try_from(d.ns() / 1_000_000).unwrap_or(u16::MAX);
    ta.low_thresh_ms = ms16(cfg.low_thresh);
    ta.upper_thresh_ms = ms16(cfg.upper_thresh);
    ta.trial_interval_ms = ms16(cfg.trial_interval);
    ta.test_duration_s = u16::try_from(cfg.duration.ns() / 1_000_000_000).unwrap_or(u16::MAX);
    ta.sub_interval_ms = ms16(cfg.sub_interval);
    ta.dscp_ecn = cfg.dscp_ecn;
    ta.sr_index = cfg.fixed_row.or(cfg.start_row);
    let mut m = 0u8;
    if cfg.start_row.is_some() {
        m |= ActivationModifiers::START_INDEX;
    }
    if cfg.random_payload {
        m |= ActivationModifiers::RANDOM_PAYLOAD;
    }
    ta.modifiers = ActivationModifiers(m);
    ta.use_owd = cfg.use_owd;
    ta.high_speed_delta = cfg.high_speed_delta;
    ta.slow_adj_thresh = cfg.slow_adj_thresh;
    ta.seq_err_thresh = cfg.seq_err_thresh;
    ta.ignore_reorder_dup = cfg.ignore_reorder_dup;
    ta.rate_adj_algo = match cfg.algorithm {
        Algorithm::B => RateAdjAlgo::TypeB,
        Algorithm::C => RateAdjAlgo::TypeC,
    };
    ta.ecn_ce_thresh = cfg.ecn_ce_thresh;
    ta.suppress_subints = cfg.suppress_subints;
    ta
}

/// Sends the Test Activation Request on `sock` (connected to `test_addr`)
/// and waits until `deadline` for the server's acceptance.
pub(super) fn activate(
    ctx: &Ctx<'_>,
    sock: &UdpSocket,
    session: Option<&SessionKeys>,
    test_addr: SocketAddr,
    deadline: Instant,
) -> Result<ActivationRepr, CapacityError> {
    let cfg = ctx.cfg;
    let mut buf = request(ctx).to_bytes();
    if let (Some(s), Some(k)) = (session, &cfg.key) {
        keys::sign(&mut buf, &s.client, k.key_id);
    }
    sock.send(&buf)
        .map_err(|e| CapacityError::io(format!("sending the test activation to {test_addr}"), e))?;
    ctx.bytes_sent
        .fetch_add(buf.len() as u64, Ordering::Relaxed);
    let server = cfg.server;
    await_reply(
        ctx,
        sock,
        deadline,
        "test activation response",
        "receiving the activation response",
        |s, b| s.recv(b).map(|n| (n, server)),
        |d, _| response(server, session, d),
    )
}

/// The server's answer in `d`: `None` for anything else (a Null Request,
/// early data, or a request echoed back).
fn response(
    server: SocketAddr,
    session: Option<&SessionKeys>,
    d: &[u8],
) -> Option<Result<ActivationRepr, CapacityError>> {
    if PduKind::of(d) != Some(PduKind::Activation) {
        return None;
    }
    let p = ActivationPacket::new_checked(d).ok()?;
    let r = ActivationRepr::parse(&p).ok()?;
    if r.result == ActivationResult::None {
        return None;
    }
    if let Some(s) = session {
        if let Err(f) = keys::verify(d, &s.server) {
            return Some(Err(setup_auth_error(server, f, true)));
        }
    }
    Some(match r.result {
        ActivationResult::Ack => Ok(r),
        other => Err(CapacityError::ActivationRejected {
            server,
            code: other.code(),
        }),
    })
}
