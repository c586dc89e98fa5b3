//! UDP GSO cars for the pacer: a car of n equal-size packets leaves as one
//! `sendmsg` carrying a `UDP_SEGMENT` control message (segment size = the
//! probe payload), and the kernel — or a NIC that offloads it — cuts the
//! buffer back into n ordinary datagrams exactly at the segment boundaries.
//! Each payload already holds its own probe header (seq, car, …), so the
//! receiver sees the same datagrams as from a `sendmmsg` batch, for one
//! trip through the socket layer instead of n.
//!
//! Limits: at most [`MAX_SEGMENTS`] segments and [`MAX_SEND_BYTES`] of
//! payload per send (the kernel refuses more), so a larger car leaves as
//! several GSO sends back to back; a send of a single packet is a plain
//! `send`.
//!
//! Transmit stamps: with `SO_TIMESTAMPING` and OPT_ID the kernel counts a
//! GSO send as one datagram (one counter) and stamps one segment of it (the
//! first), so each send — GSO or plain — gets one counter and one stamp;
//! [`send_car`] records how many packets each send carried so the pacer can
//! map a send's stamp onto all its packets.

use nix::errno::Errno;
use nix::sys::socket::{sendmsg, setsockopt, sockopt, ControlMessage, MsgFlags, SockaddrStorage};
use std::io::{self, IoSlice};
use std::net::UdpSocket;
use std::os::fd::AsRawFd;

/// Most segments the kernel takes in one GSO send (`UDP_MAX_SEGMENTS`).
pub const MAX_SEGMENTS: usize = 64;
/// Most UDP payload bytes in one send: an IPv4 datagram's 65 535 bytes less
/// its 20-byte IP and 8-byte UDP headers (IPv6 allows 20 more; this bound
/// suits both).
pub const MAX_SEND_BYTES: usize = 65_507;

/// Whether the kernel knows `UDP_SEGMENT` on `sock` (Linux ≥ 4.18): sets
/// the socket's default segment size to 0 (= no GSO unless a send asks),
/// which a kernel without GSO refuses.  A route that cannot take GSO (an
/// MTU below the segment size, IPsec) still refuses at send time; the
/// pacer then falls back to batches.
pub fn probe(sock: &UdpSocket) -> Result<(), String> {
    setsockopt(sock, sockopt::UdpGsoSegment, &0)
        .map_err(|e| format!("setsockopt(SOL_UDP, UDP_SEGMENT): {e}"))
}

/// Packets of `payload_len` bytes one GSO send may carry.
pub fn segments_per_send(payload_len: usize) -> usize {
    (MAX_SEND_BYTES / payload_len.max(1)).clamp(1, MAX_SEGMENTS)
}

/// What [`send_car`] did.
#[derive(Debug)]
pub struct CarSent {
    /// Packets the kernel accepted, from the first on.
    pub packets: usize,
    /// Set when a GSO send was refused as GSO (EINVAL, EIO, EOPNOTSUPP…):
    /// `bufs[packets..]` were not sent and GSO should be turned off.  The
    /// refused call may have used up a transmit-stamp counter.
    pub refused: Option<String>,
}

/// Sends one car, `bufs` all `bufs[0].len()` bytes, as GSO sends of at most
/// [`segments_per_send`] packets (a last send of one packet is a plain
/// `send`); pushes each send's packet count onto `sends`.
pub fn send_car(sock: &UdpSocket, bufs: &[Vec<u8>], sends: &mut Vec<u32>) -> io::Result<CarSent> {
    let Some(first) = bufs.first() else {
        return Ok(CarSent {
            packets: 0,
            refused: None,
        });
    };
    let seg_len = first.len();
    debug_assert!(bufs.iter().all(|b| b.len() == seg_len));
    let seg = u16::try_from(seg_len).unwrap_or(u16::MAX);
    let per_send = segments_per_send(seg_len);
    let mut sent = 0;
    let mut refused_in_a_row = 0;
    // On the stack: this runs once per car inside the pacing loop.
    let mut iov = [IoSlice::new(&[]); MAX_SEGMENTS];
    while sent < bufs.len() {
        let chunk = &bufs[sent..bufs.len().min(sent + per_send)];
        let res = if chunk.len() == 1 {
            sock.send(&chunk[0])
                .map_err(|e| e.raw_os_error().map_or(Errno::EIO, Errno::from_raw))
        } else {
            for (slot, b) in iov.iter_mut().zip(chunk) {
                *slot = IoSlice::new(b);
            }
            sendmsg::<SockaddrStorage>(
                sock.as_raw_fd(),
                &iov[..chunk.len()],
                &[ControlMessage::UdpGsoSegments(&seg)],
                MsgFlags::empty(),
                None,
            )
        };
        match res {
            Ok(_) => {
                sent += chunk.len();
                sends.push(chunk.len() as u32);
                refused_in_a_row = 0;
            }
            Err(Errno::EINTR) => {}
            // As in `BatchSender::send`: an earlier datagram bounced and the
            // kernel reports it once on this call, which sent nothing.
            Err(Errno::ECONNREFUSED) if refused_in_a_row < 3 => refused_in_a_row += 1,
            Err(e @ (Errno::EINVAL | Errno::EIO | Errno::EOPNOTSUPP | Errno::ENOPROTOOPT))
                if chunk.len() > 1 =>
            {
                return Ok(CarSent {
                    packets: sent,
                    refused: Some(format!(
                        "a GSO send of {} segments of {seg_len} bytes: {e}",
                        chunk.len()
                    )),
                });
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(CarSent {
        packets: sent,
        refused: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_send_stays_within_the_kernels_limits() {
        assert_eq!(segments_per_send(1472), 44);
        assert_eq!(segments_per_send(8972), 7);
        assert_eq!(segments_per_send(100), MAX_SEGMENTS);
        assert_eq!(segments_per_send(65_000), 1);
        for len in [28, 500, 1472, 4000, 8972, 40_000] {
            let n = segments_per_send(len);
            assert!(n <= MAX_SEGMENTS && n * len <= MAX_SEND_BYTES, "{len}");
        }
    }
}
