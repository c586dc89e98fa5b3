//! The server's side of a throughput flow: checks the request against the
//! limits and charges it to the session's budget ([`super::budget`]), opens
//! a data port on the control connection's address, lets in only the
//! control peer's connections or datagrams carrying the flow's token, moves
//! data for at most the requested (bounded) time and no faster than the
//! session's rate limit ([`FlowGate`]), and reports.

use super::budget::{self, server_window, MAX_FLOW_WINDOWS};
use super::engine::{self, flow_side, Meter, Moved, TCP_UNIT_IP_BYTES};
use super::gate::{self, FlowGate};
use super::{duration, interval};
use crate::error::{InputError, NetError, Result};
use crate::framing;
use crate::limits::SessionBudget;
use crate::udp;
use pathsonde_core::BitRate;
use pathsonde_wire::control::ServerMessage;
use pathsonde_wire::flow::{FlowProto, FlowSide, FlowSpec};
use socket2::{Domain, SockRef, Socket, Type};
use std::io::Read;
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

/// How long the client has to open every data connection (or say hello).
pub const CONNECT_WAIT: Duration = Duration::from_secs(5);

/// Serves one `Flow` request on the control connection `ctrl`, charged to
/// the session's `budget`: a request beyond the limits is refused with the
/// limit named (a `Limit` error that ends the session, as for trains), and
/// the bytes the flow did not move are given back when it ends.
pub(crate) fn serve_flow(
    ctrl: &mut TcpStream,
    spec: &FlowSpec,
    budget: &mut SessionBudget,
    drops_wanted: bool,
) -> Result<()> {
    spec.check().map_err(|source| {
        NetError::Input(InputError::Flow {
            refused: true,
            source,
        })
    })?;
    let local = ctrl
        .local_addr()
        .map_err(|e| NetError::io("reading the control address", e))?
        .ip();
    let peer_addr = ctrl
        .peer_addr()
        .map_err(|e| NetError::io("reading the control peer", e))?;
    let peer = peer_addr.ip();
    let overhead = udp::ip_udp_overhead(&peer_addr);
    let limits = budget::admit(spec, budget, overhead, Instant::now()).map_err(NetError::Limit)?;
    let largest_unit = match spec.proto {
        FlowProto::Tcp => TCP_UNIT_IP_BYTES,
        FlowProto::Udp => u64::from(spec.udp_payload) + overhead,
    };
    let gate = FlowGate::limited(limits, largest_unit);
    // A token a stranger cannot guess: the OS random source, or a panic.
    let token = crate::random::u64();
    let side = match spec.proto {
        FlowProto::Tcp => tcp_flow(ctrl, spec, local, peer, token, &gate).map(|s| (s, None)),
        FlowProto::Udp => udp_flow(ctrl, spec, local, peer, token, &gate),
    };
    budget.refund(limits.allowance.saturating_sub(gate.used()));
    let (side, dropped) = side?;
    framing::send(ctrl, &ServerMessage::FlowReport(side))?;
    if drops_wanted {
        framing::send(ctrl, &ServerMessage::FlowReceiverDrops { dropped })?;
    }
    Ok(())
}

/// Buffers of the end that sends and the end that receives.
pub(crate) fn sender_buffers(spec: &FlowSpec) -> (u32, u32) {
    let rcv = if spec.full_duplex_buffers {
        spec.window
    } else {
        0
    };
    (spec.window, rcv)
}

pub(crate) fn receiver_buffers(spec: &FlowSpec) -> (u32, u32) {
    (0, spec.window)
}

fn tcp_flow(
    ctrl: &mut TcpStream,
    spec: &FlowSpec,
    local: IpAddr,
    peer: IpAddr,
    token: u64,
    gate: &FlowGate,
) -> Result<FlowSide> {
    let sock = Socket::new(
        Domain::for_address(SocketAddr::new(local, 0)),
        Type::STREAM,
        None,
    )
    .map_err(|e| NetError::io("creating the flow listener", e))?;
    // Buffers set on the listener are inherited by accepted connections,
    // before the handshake fixes the window scale.  The client's window
    // is capped: streams × window is memory the server would hold.
    let capped = FlowSpec {
        window: server_window(spec),
        ..spec.clone()
    };
    let (snd, rcv) = if spec.reverse {
        sender_buffers(&capped)
    } else {
        receiver_buffers(&capped)
    };
    engine::set_buffers(SockRef::from(&sock), snd, rcv);
    sock.bind(&SocketAddr::new(local, 0).into())
        .map_err(|e| NetError::io("binding the flow listener", e))?;
    sock.listen(i32::from(spec.streams))
        .map_err(|e| NetError::io("listening for flow streams", e))?;
    let listener: TcpListener = sock.into();
    let port = listener
        .local_addr()
        .map_err(|e| NetError::io("reading the flow port", e))?
        .port();
    framing::send(ctrl, &ServerMessage::FlowReady { port, token })?;
    let (streams, missing) = accept_streams(&listener, spec.streams, peer, token);
    drop(listener);
    let start = Instant::now();
    let meter = Meter::new(start, interval(spec), spec.intervals());
    let moved: Vec<Moved> = gate::run_streams(gate, streams, |(i, st)| {
        let m = meter.clone();
        if spec.reverse {
            engine::tcp_send(st, i, start + duration(spec), super::GRACE, m, gate)
        } else {
            engine::tcp_recv(st, i, start + duration(spec) + super::GRACE, m, gate)
        }
    });
    Ok(flow_side(
        spec.reverse,
        moved,
        missing.or_else(|| gate.reason()),
    ))
}

/// Accepts up to `n` connections from `peer` that open with the token and
/// a stream number; anything else is closed.  Returns the streams and, if
/// some never came, why.
fn accept_streams(
    listener: &TcpListener,
    n: u16,
    peer: IpAddr,
    token: u64,
) -> (Vec<(u16, TcpStream)>, Option<String>) {
    let _ = listener.set_nonblocking(true);
    let deadline = Instant::now() + CONNECT_WAIT;
    let mut got: Vec<(u16, TcpStream)> = Vec::new();
    while got.len() < usize::from(n) && Instant::now() < deadline {
        let (mut st, from) = match listener.accept() {
            Ok(x) => x,
            Err(_) => {
                std::thread::sleep(Duration::from_millis(2));
                continue;
            }
        };
        if from.ip() != peer {
            continue;
        }
        let _ = st.set_nonblocking(false);
        let _ = st.set_read_timeout(Some(Duration::from_secs(2)));
        let mut hello = [0u8; 10];
        if st.read_exact(&mut hello).is_err() {
            continue;
        }
        let t = u64::from_be_bytes(hello[..8].try_into().expect("8 bytes"));
        let i = u16::from_be_bytes([hello[8], hello[9]]);
        if t != token || i >= n || got.iter().any(|(j, _)| *j == i) {
            continue;
        }
        let _ = st.set_read_timeout(None);
        got.push((i, st));
    }
    let missing = (got.len() < usize::from(n)).then(|| {
        format!(
            "only {} of {n} streams connected within {} s",
            got.len(),
            CONNECT_WAIT.as_secs()
        )
    });
    (got, missing)
}

fn udp_flow(
    ctrl: &mut TcpStream,
    spec: &FlowSpec,
    local: IpAddr,
    peer: IpAddr,
    token: u64,
    gate: &FlowGate,
) -> Result<(FlowSide, Option<u64>)> {
    let sock = udp::bind(SocketAddr::new(local, 0))?;
    let drops_at_bind = udp::socket_drops(&sock);
    let port = sock
        .local_addr()
        .map_err(|e| NetError::io("reading the flow port", e))?
        .port();
    framing::send(ctrl, &ServerMessage::FlowReady { port, token })?;
    let now = Instant::now();
    let meter = Meter::new(now, interval(spec), spec.intervals());
    if !spec.reverse {
        let got = engine::udp_recv(
            &sock,
            token,
            peer,
            spec.streams,
            engine::RecvWindow {
                deadline: now + CONNECT_WAIT + duration(spec) + super::GRACE,
                quiet: Duration::from_secs(1),
                span: duration(spec) + Duration::from_millis(300),
            },
            &meter,
            gate,
            drops_at_bind,
        );
        return Ok((flow_side(false, got.moved, gate.reason()), got.socket_drops));
    }
    // Reverse: the client's hellos say where each stream goes.
    let mut to: Vec<Option<SocketAddr>> = vec![None; usize::from(spec.streams)];
    let deadline = now + CONNECT_WAIT;
    let _ = sock.set_read_timeout(Some(Duration::from_millis(20)));
    let mut buf = [0u8; 2048];
    while to.iter().any(Option::is_none) && Instant::now() < deadline {
        let Ok((len, from)) = sock.recv_from(&mut buf) else {
            continue;
        };
        if from.ip() != peer {
            continue;
        }
        if let Ok(d) = pathsonde_wire::flow::FlowDatagram::decode(&buf[..len]) {
            if d.token == token && d.hello && d.stream < spec.streams {
                to[usize::from(d.stream)] = Some(from);
            }
        }
    }
    let missing = to.iter().any(Option::is_none).then(|| {
        format!(
            "only {} of {} streams said hello within {} s",
            to.iter().flatten().count(),
            spec.streams,
            CONNECT_WAIT.as_secs()
        )
    });
    let senders: Vec<(u16, UdpSocket)> = to
        .iter()
        .enumerate()
        .filter_map(|(i, a)| {
            let a = (*a)?;
            let s = udp::bind(SocketAddr::new(local, 0)).ok()?;
            // The flow's share of send buffer, not udp::bind's 4 MiB each.
            let share =
                (MAX_FLOW_WINDOWS / u32::from(spec.streams)).min(udp::SOCKET_BUFFER_BYTES as u32);
            engine::set_buffers(SockRef::from(&s), share, 0);
            s.connect(a).ok()?;
            Some((i as u16, s))
        })
        .collect();
    let start = Instant::now();
    let meter = Meter::new(start, interval(spec), spec.intervals());
    let per_stream = BitRate::from_bps(spec.udp_rate_bps as f64 / f64::from(spec.streams));
    let moved = engine::udp_send_all(&senders, token, per_stream, spec, start, &meter, gate);
    Ok((
        flow_side(true, moved, missing.or_else(|| gate.reason())),
        None,
    ))
}
