//! Decoders for what the socket's error queue hands back after an ICMP
//! error: the control messages (`IP_RECVERR` / `IPV6_RECVERR` with the
//! offender's address, `SCM_TIMESTAMPNS` with the kernel's receive stamp)
//! and the quoted probe payload that says which packet was answered.
//!
//! Both read network-derived bytes, so they are plain bounds-checked byte
//! walks (no pointer casts) that never panic: `fuzz/err_cmsg` runs them on
//! any input.

use pathsonde_core::methods::hops::AnswerKind;
use pathsonde_core::TimeNs;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The magic that opens every hop probe's payload.
pub const MAGIC: [u8; 4] = *b"PSHP";
/// Bytes of payload that identify a probe: magic, train, seq.
pub const ID_LEN: usize = 12;

/// Writes a probe's identity at the start of `buf` (which must hold
/// [`ID_LEN`] bytes; shorter buffers are left as they are).
pub fn encode_payload(buf: &mut [u8], train: u32, seq: u32) {
    if buf.len() < ID_LEN {
        return;
    }
    buf[..4].copy_from_slice(&MAGIC);
    buf[4..8].copy_from_slice(&train.to_be_bytes());
    buf[8..12].copy_from_slice(&seq.to_be_bytes());
}

/// The (train, seq) a quoted payload names, if it is one of ours.  A router
/// that quotes fewer than [`ID_LEN`] bytes of payload gives `None`.
pub fn decode_payload(buf: &[u8]) -> Option<(u32, u32)> {
    if buf.len() < ID_LEN || buf[..4] != MAGIC {
        return None;
    }
    let word = |i: usize| u32::from_be_bytes([buf[i], buf[i + 1], buf[i + 2], buf[i + 3]]);
    Some((word(4), word(8)))
}

/// One ICMP error as the kernel reports it (`struct sock_extended_err`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExtErr {
    pub errno: u32,
    pub origin: u8,
    pub icmp_type: u8,
    pub icmp_code: u8,
}

impl ExtErr {
    /// What the answer says about the probe: its TTL ran out on the way, or
    /// it reached the far end (port unreachable).  Other errors (a router
    /// saying host unreachable, a filter) are `None`.
    pub fn kind(&self) -> Option<AnswerKind> {
        match (self.origin, self.icmp_type, self.icmp_code) {
            (o, 11, _) if o == libc::SO_EE_ORIGIN_ICMP => Some(AnswerKind::TimeExceeded),
            (o, 3, 3) if o == libc::SO_EE_ORIGIN_ICMP => Some(AnswerKind::Destination),
            (o, 3, _) if o == libc::SO_EE_ORIGIN_ICMP6 => Some(AnswerKind::TimeExceeded),
            (o, 1, 4) if o == libc::SO_EE_ORIGIN_ICMP6 => Some(AnswerKind::Destination),
            _ => None,
        }
    }
}

/// What one error-queue message's control buffer held.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ErrControl {
    pub err: Option<ExtErr>,
    /// `SO_EE_OFFENDER`: who sent the ICMP error.
    pub offender: Option<IpAddr>,
    /// The kernel's receive stamp of the ICMP error (CLOCK_REALTIME).
    pub stamp: Option<TimeNs>,
}

fn u16_ne(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(at..at + 2)?.try_into().ok()?))
}
fn u32_ne(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}
fn i64_ne(b: &[u8], at: usize) -> Option<i64> {
    Some(i64::from_ne_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// `struct sock_extended_err` is 16 bytes; the offender's sockaddr follows.
const EXT_ERR_LEN: usize = 16;

fn parse_ext_err(data: &[u8]) -> (Option<ExtErr>, Option<IpAddr>) {
    if data.len() < EXT_ERR_LEN {
        return (None, None);
    }
    let err = ExtErr {
        errno: u32_ne(data, 0).unwrap_or(0),
        origin: data[4],
        icmp_type: data[5],
        icmp_code: data[6],
    };
    let sa = &data[EXT_ERR_LEN..];
    let offender = match u16_ne(sa, 0).map(i32::from) {
        Some(f) if f == libc::AF_INET => sa
            .get(4..8)
            .map(|a| IpAddr::V4(Ipv4Addr::new(a[0], a[1], a[2], a[3]))),
        Some(f) if f == libc::AF_INET6 => sa.get(8..24).map(|a| {
            let mut o = [0u8; 16];
            o.copy_from_slice(a);
            IpAddr::V6(Ipv6Addr::from(o))
        }),
        _ => None,
    };
    (Some(err), offender)
}

/// Walks a control buffer (`struct cmsghdr` records, each padded to the
/// word size) and picks out the error and the receive stamp.  Anything
/// malformed ends the walk; nothing is read out of bounds.
pub fn parse_err_control(control: &[u8]) -> ErrControl {
    let mut out = ErrControl::default();
    let word = std::mem::size_of::<usize>();
    // struct cmsghdr { size_t len; int level; int type; } then the data.
    let hdr = word + 8;
    let mut off = 0usize;
    while let Some(h) = control.get(off..).filter(|r| r.len() >= hdr) {
        let len = if word == 8 {
            i64_ne(h, 0).map(|v| v as u64 as usize)
        } else {
            u32_ne(h, 0).map(|v| v as usize)
        };
        let (Some(len), Some(level), Some(ty)) = (len, u32_ne(h, word), u32_ne(h, word + 4)) else {
            break;
        };
        if len < hdr || len > h.len() {
            break;
        }
        let data = &h[hdr..len];
        let (level, ty) = (level as i32, ty as i32);
        if (level == libc::SOL_IP && ty == libc::IP_RECVERR)
            || (level == libc::SOL_IPV6 && ty == libc::IPV6_RECVERR)
        {
            let (e, o) = parse_ext_err(data);
            out.err = e;
            out.offender = o;
        } else if level == libc::SOL_SOCKET && ty == libc::SO_TIMESTAMPNS {
            if let (Some(s), Some(ns)) = (i64_ne(data, 0), i64_ne(data, 8)) {
                out.stamp = s
                    .checked_mul(1_000_000_000)
                    .and_then(|v| v.checked_add(ns))
                    .filter(|&v| v > 0)
                    .map(TimeNs::from_ns);
            }
        }
        let step = len.div_ceil(word).saturating_mul(word);
        match off.checked_add(step) {
            Some(n) if step > 0 => off = n,
            _ => break,
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmsg(level: i32, ty: i32, data: &[u8]) -> Vec<u8> {
        let word = std::mem::size_of::<usize>();
        let len = word + 8 + data.len();
        let mut v = Vec::new();
        v.extend_from_slice(&len.to_ne_bytes());
        v.extend_from_slice(&level.to_ne_bytes());
        v.extend_from_slice(&ty.to_ne_bytes());
        v.extend_from_slice(data);
        while v.len() % word != 0 {
            v.push(0);
        }
        v
    }

    fn ext_err_v4(origin: u8, t: u8, c: u8, addr: [u8; 4]) -> Vec<u8> {
        let mut d = Vec::new();
        d.extend_from_slice(&(libc::EHOSTUNREACH as u32).to_ne_bytes());
        d.extend_from_slice(&[origin, t, c, 0]);
        d.extend_from_slice(&[0u8; 8]);
        d.extend_from_slice(&(libc::AF_INET as u16).to_ne_bytes());
        d.extend_from_slice(&[0, 0]);
        d.extend_from_slice(&addr);
        d.extend_from_slice(&[0u8; 8]);
        d
    }

    #[test]
    fn reads_a_time_exceeded_with_offender_and_stamp() {
        let mut ts = Vec::new();
        ts.extend_from_slice(&5i64.to_ne_bytes());
        ts.extend_from_slice(&7i64.to_ne_bytes());
        let mut buf = cmsg(libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, &ts);
        buf.extend(cmsg(
            libc::SOL_IP,
            libc::IP_RECVERR,
            &ext_err_v4(libc::SO_EE_ORIGIN_ICMP, 11, 0, [10, 0, 2, 1]),
        ));
        let c = parse_err_control(&buf);
        assert_eq!(c.stamp, Some(TimeNs::from_ns(5_000_000_007)));
        assert_eq!(c.offender, Some("10.0.2.1".parse().unwrap()));
        assert_eq!(c.err.unwrap().kind(), Some(AnswerKind::TimeExceeded));
    }

    #[test]
    fn port_unreachable_is_the_far_end_and_others_are_nothing() {
        let e = |o, t, c| ExtErr {
            errno: 0,
            origin: o,
            icmp_type: t,
            icmp_code: c,
        };
        let (v4, v6) = (libc::SO_EE_ORIGIN_ICMP, libc::SO_EE_ORIGIN_ICMP6);
        assert_eq!(e(v4, 3, 3).kind(), Some(AnswerKind::Destination));
        assert_eq!(e(v4, 3, 1).kind(), None);
        assert_eq!(e(v6, 3, 0).kind(), Some(AnswerKind::TimeExceeded));
        assert_eq!(e(v6, 1, 4).kind(), Some(AnswerKind::Destination));
        assert_eq!(e(libc::SO_EE_ORIGIN_TIMESTAMPING, 0, 0).kind(), None);
    }

    #[test]
    fn payload_identity_round_trips_and_short_quotes_are_none() {
        let mut b = [0u8; 32];
        encode_payload(&mut b, 7, 99);
        assert_eq!(decode_payload(&b), Some((7, 99)));
        assert_eq!(decode_payload(&b[..8]), None);
        b[0] = b'X';
        assert_eq!(decode_payload(&b), None);
    }

    #[test]
    fn malformed_buffers_end_the_walk() {
        for n in 0..64 {
            let _ = parse_err_control(&vec![0xffu8; n]);
            let _ = parse_err_control(&vec![0u8; n]);
        }
        let mut huge = cmsg(libc::SOL_IP, libc::IP_RECVERR, &[1, 2, 3]);
        huge[..8].copy_from_slice(&u64::MAX.to_ne_bytes());
        assert_eq!(parse_err_control(&huge), ErrControl::default());
    }
}
