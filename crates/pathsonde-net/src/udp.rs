//! UDP probe sockets: big buffers, kernel receive timestamps, batched sends.

use crate::clock;
use crate::error::{NetError, Result};
use nix::sys::socket::{
    recvmsg, sendmmsg, setsockopt, sockopt, ControlMessageOwned, MsgFlags, MultiHeaders,
    SockaddrStorage, TimestampingFlag,
};
use pathsonde_core::{ClockInfo, ClockSource, DurationNs, TimeNs};
use socket2::{Domain, Protocol, Socket, Type};
use std::io::{IoSlice, IoSliceMut};
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;

/// Receive and send buffer we ask for: trains arrive faster than a busy
/// receiver drains them (the lab notes saw 45 % loss at the socket with the
/// default buffer at 2 Gb/s).
pub const SOCKET_BUFFER_BYTES: usize = 4 << 20;

/// IPv4 + UDP header bytes on top of a probe payload.
pub const IPV4_UDP_OVERHEAD: u64 = 28;
/// IPv6 + UDP header bytes on top of a probe payload.
pub const IPV6_UDP_OVERHEAD: u64 = 48;

pub fn ip_udp_overhead(addr: &SocketAddr) -> u64 {
    if addr.is_ipv4() {
        IPV4_UDP_OVERHEAD
    } else {
        IPV6_UDP_OVERHEAD
    }
}

/// Creates a UDP socket bound to `bind` with large buffers.  As root the
/// buffers may exceed `rmem_max` (SO_RCVBUFFORCE); otherwise the kernel caps them.
pub fn bind(bind: SocketAddr) -> Result<UdpSocket> {
    let sock = Socket::new(Domain::for_address(bind), Type::DGRAM, Some(Protocol::UDP))
        .map_err(|e| NetError::io("creating a UDP socket", e))?;
    grow_buffers(&sock);
    sock.bind(&bind.into())
        .map_err(|e| NetError::io(format!("binding UDP {bind}"), e))?;
    Ok(sock.into())
}

fn grow_buffers(sock: &Socket) {
    let fd = sock.as_raw_fd();
    let size = SOCKET_BUFFER_BYTES as libc::c_int;
    for (opt, fallback) in [
        (libc::SO_RCVBUFFORCE, libc::SO_RCVBUF),
        (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF),
    ] {
        // SAFETY: `size` outlives the call and its length is passed exactly.
        let forced = unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                opt,
                (&size as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if forced != 0 {
            // Not root: ask politely; the kernel caps at rmem_max / wmem_max.
            // SAFETY: as above.
            unsafe {
                libc::setsockopt(
                    fd,
                    libc::SOL_SOCKET,
                    fallback,
                    (&size as *const libc::c_int).cast(),
                    std::mem::size_of::<libc::c_int>() as libc::socklen_t,
                );
            }
        }
    }
}

/// Receives datagrams with the best timestamps the host offers.
pub struct TimestampingReceiver {
    sock: UdpSocket,
    clock: ClockInfo,
    cmsg: Vec<u8>,
}

/// One received datagram.
pub struct Received {
    pub len: usize,
    pub from: Option<SocketAddr>,
    pub at: TimeNs,
}

impl TimestampingReceiver {
    /// Turns on kernel software receive stamps (`SO_TIMESTAMPING` with
    /// RX_SOFTWARE); when the kernel refuses, falls back to reading
    /// CLOCK_REALTIME after each receive, and says so in [`Self::clock`].
    pub fn new(sock: UdpSocket) -> Self {
        let flags = TimestampingFlag::SOF_TIMESTAMPING_RX_SOFTWARE
            | TimestampingFlag::SOF_TIMESTAMPING_SOFTWARE;
        let kernel = setsockopt(&sock, sockopt::Timestamping, &flags).is_ok();
        let clock = if kernel {
            ClockInfo {
                source: ClockSource::KernelSoftware,
                resolution: DurationNs::from_ns(1),
            }
        } else {
            ClockInfo {
                source: ClockSource::UserSpace,
                resolution: clock::monotonic_resolution(),
            }
        };
        TimestampingReceiver {
            sock,
            clock,
            cmsg: nix::cmsg_space!(nix::sys::socket::Timestamps),
        }
    }

    pub fn clock(&self) -> ClockInfo {
        self.clock
    }

    pub fn socket(&self) -> &UdpSocket {
        &self.sock
    }

    /// Receives one datagram into `buf` (blocking, subject to the socket's
    /// read timeout).  A datagram whose kernel stamp is missing is stamped in
    /// user space rather than dropped.
    pub fn recv(&mut self, buf: &mut [u8]) -> std::io::Result<Received> {
        let mut iov = [IoSliceMut::new(buf)];
        let msg = recvmsg::<SockaddrStorage>(
            self.sock.as_raw_fd(),
            &mut iov,
            Some(&mut self.cmsg),
            MsgFlags::empty(),
        )
        .map_err(std::io::Error::from)?;
        let mut at = None;
        if let Ok(cmsgs) = msg.cmsgs() {
            for c in cmsgs {
                if let ControlMessageOwned::ScmTimestampsns(ts) = c {
                    let ns = ts.system.tv_sec() * 1_000_000_000 + ts.system.tv_nsec();
                    if ns != 0 {
                        at = Some(TimeNs::from_ns(ns));
                    }
                }
            }
        }
        let from = msg.address.and_then(|a| storage_to_std(&a));
        Ok(Received {
            len: msg.bytes,
            from,
            at: at.unwrap_or_else(clock::realtime),
        })
    }
}

fn storage_to_std(a: &SockaddrStorage) -> Option<SocketAddr> {
    if let Some(v4) = a.as_sockaddr_in() {
        return Some(SocketAddr::from((v4.ip(), v4.port())));
    }
    a.as_sockaddr_in6()
        .map(|v6| SocketAddr::from((v6.ip(), v6.port())))
}

/// Sends each buffer as one datagram on a connected socket with as few
/// system calls as the kernel allows (`sendmmsg`).  Returns how many went out;
/// fewer than asked means the kernel refused the rest (e.g. a full buffer).
pub struct BatchSender {
    headers: MultiHeaders<SockaddrStorage>,
    capacity: usize,
}

impl BatchSender {
    pub fn new(capacity: usize) -> Self {
        BatchSender {
            headers: MultiHeaders::preallocate(capacity.max(1), None),
            capacity: capacity.max(1),
        }
    }

    pub fn send(&mut self, sock: &UdpSocket, bufs: &[Vec<u8>]) -> std::io::Result<usize> {
        let mut sent = 0;
        let mut refused_in_a_row = 0;
        while sent < bufs.len() {
            let chunk = &bufs[sent..bufs.len().min(sent + self.capacity)];
            let slices: Vec<[IoSlice<'_>; 1]> = chunk.iter().map(|b| [IoSlice::new(b)]).collect();
            let addrs = vec![None; slices.len()];
            let res = sendmmsg(
                sock.as_raw_fd(),
                &mut self.headers,
                &slices,
                &addrs,
                [],
                MsgFlags::empty(),
            );
            match res {
                Ok(r) => {
                    let n = r.count();
                    if n == 0 {
                        break;
                    }
                    sent += n;
                    refused_in_a_row = 0;
                }
                Err(nix::errno::Errno::EINTR) => continue,
                // An earlier datagram bounced (ICMP port unreachable): the
                // kernel reports that once on the next call, which sent
                // nothing, and clears it.  Lost probes are the method's to
                // judge, so retry; only a refusal that repeats without any
                // progress in between is a real error.
                Err(nix::errno::Errno::ECONNREFUSED) if refused_in_a_row < 3 => {
                    refused_in_a_row += 1;
                }
                Err(e) => return Err(e.into()),
            }
        }
        Ok(sent)
    }
}

/// Kernel software *transmit* timestamps on a sending socket
/// (`SO_TIMESTAMPING` with TX_SOFTWARE | SOFTWARE | OPT_ID | OPT_TSONLY).
///
/// The kernel stamps each datagram as the driver hands it to the device
/// (CLOCK_REALTIME, like the receive stamps) and queues the stamp on the
/// socket's error queue with the datagram's OPT_ID counter: 0 for the first
/// datagram sent after the option was turned on, counting every datagram the
/// kernel accepted on this socket since.  The error queue is charged to the
/// receive buffer, so long trains are drained as they go.
pub struct TxStamps {
    /// Stamps read but not yet claimed, by OPT_ID counter.
    pending: std::collections::BTreeMap<u32, TimeNs>,
    cmsg: Vec<u8>,
}

impl TxStamps {
    /// Turns the stamps on for `sock`; `None` when the kernel refuses.
    /// Every datagram sent on `sock` afterwards counts toward OPT_ID.
    pub fn enable(sock: &UdpSocket) -> Option<TxStamps> {
        let flags: libc::c_uint = libc::SOF_TIMESTAMPING_TX_SOFTWARE
            | libc::SOF_TIMESTAMPING_SOFTWARE
            | libc::SOF_TIMESTAMPING_OPT_ID
            | libc::SOF_TIMESTAMPING_OPT_TSONLY;
        // SAFETY: `flags` outlives the call and its length is passed exactly.
        let rc = unsafe {
            libc::setsockopt(
                sock.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_TIMESTAMPING,
                (&flags as *const libc::c_uint).cast(),
                std::mem::size_of::<libc::c_uint>() as libc::socklen_t,
            )
        };
        (rc == 0).then(|| TxStamps {
            pending: std::collections::BTreeMap::new(),
            cmsg: vec![0u8; 512],
        })
    }

    /// Reads every stamp waiting on `sock`'s error queue without blocking.
    /// Returns how many were read.
    pub fn drain(&mut self, sock: &UdpSocket) -> usize {
        let mut read = 0;
        loop {
            let mut data = [0u8; 64];
            let mut iov = libc::iovec {
                iov_base: data.as_mut_ptr().cast(),
                iov_len: data.len(),
            };
            // SAFETY: an all-zero msghdr is valid; the pointers set below
            // point at live buffers of the stated lengths.
            let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
            msg.msg_iov = &mut iov;
            msg.msg_iovlen = 1;
            msg.msg_control = self.cmsg.as_mut_ptr().cast();
            msg.msg_controllen = self.cmsg.len() as _;
            // SAFETY: `msg` describes valid buffers (above).
            let n = unsafe {
                libc::recvmsg(
                    sock.as_raw_fd(),
                    &mut msg,
                    libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT,
                )
            };
            if n < 0 {
                if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return read;
            }
            let mut stamp = None;
            let mut id = None;
            // SAFETY: the CMSG_* macros walk the control buffer the kernel
            // filled, within `msg_controllen`; reads are unaligned-safe.
            unsafe {
                let mut c = libc::CMSG_FIRSTHDR(&msg);
                while !c.is_null() {
                    let (level, ty) = ((*c).cmsg_level, (*c).cmsg_type);
                    let data = libc::CMSG_DATA(c);
                    if level == libc::SOL_SOCKET && ty == libc::SO_TIMESTAMPING {
                        // struct scm_timestamping { struct timespec ts[3]; }:
                        // ts[0] is the software stamp.
                        let ts: libc::timespec = std::ptr::read_unaligned(data.cast());
                        let ns = ts.tv_sec * 1_000_000_000 + ts.tv_nsec;
                        if ns != 0 {
                            stamp = Some(TimeNs::from_ns(ns));
                        }
                    } else if (level == libc::SOL_IP && ty == libc::IP_RECVERR)
                        || (level == libc::SOL_IPV6 && ty == libc::IPV6_RECVERR)
                    {
                        let e: libc::sock_extended_err = std::ptr::read_unaligned(data.cast());
                        if e.ee_errno == libc::ENOMSG as u32
                            && e.ee_origin == libc::SO_EE_ORIGIN_TIMESTAMPING
                        {
                            id = Some(e.ee_data);
                        }
                    }
                    c = libc::CMSG_NXTHDR(&msg, c);
                }
            }
            read += 1;
            if let (Some(at), Some(id)) = (stamp, id) {
                self.pending.insert(id, at);
            }
        }
    }

    /// Takes the stamps of counters `first .. first + n` (in order, `None`
    /// where the kernel gave none) and forgets every older one.
    pub fn take(&mut self, first: u32, n: u32) -> Vec<Option<TimeNs>> {
        let out = (0..n)
            .map(|i| self.pending.remove(&first.wrapping_add(i)))
            .collect();
        let end = first.wrapping_add(n);
        self.pending.retain(|&k, _| k >= end);
        out
    }

    /// How many of counters `first .. first + n` have a stamp.
    pub fn have(&self, first: u32, n: u32) -> u32 {
        self.pending.range(first..first.saturating_add(n)).count() as u32
    }
}
