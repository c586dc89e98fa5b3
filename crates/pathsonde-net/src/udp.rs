//! UDP probe sockets: big buffers, kernel receive timestamps, batched sends.

mod drops;
pub mod hw_stamps;

pub use drops::{drops_in, socket_drops};
pub use hw_stamps::{HwStampGuard, HwStampIoctl};

use crate::clock;
use crate::error::{NetError, Result};
use nix::sys::socket::{
    sendmmsg, setsockopt, sockopt, MsgFlags, MultiHeaders, SockaddrLike, SockaddrStorage,
    TimestampingFlag,
};
use pathsonde_core::{ClockInfo, ClockSource, DurationNs, TimeNs};
use socket2::{Domain, Protocol, Socket, Type};
use std::io::IoSlice;
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
///
/// UDP_GRO stays off (the kernel's default; nothing here turns it on): the
/// server's probe socket is one of these, and with GRO the kernel could
/// hand it several probes — e.g. a sender's GSO car — merged into one
/// datagram with one arrival stamp.  Off, each probe is its own datagram
/// (a GSO super-datagram reaching it is split back at its segments).
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
    /// The NIC's hardware stamps, held for this receiver's life; dropping
    /// it puts the NIC's configuration back as it was found.
    hardware: Option<HwStampGuard>,
    /// Why the NIC's hardware receive stamps are off (`None` = on).
    hardware_off: Option<String>,
    /// Control-message buffer, u64-backed so `cmsghdr` reads are aligned.
    cmsg: Vec<u64>,
}

/// One received datagram.
pub struct Received {
    pub len: usize,
    pub from: Option<SocketAddr>,
    /// The kernel's software stamp (CLOCK_REALTIME), else a user-space read.
    pub at: TimeNs,
    /// The NIC's raw hardware stamp (its PHC), when it gave one.
    pub hardware: Option<TimeNs>,
}

/// The stamps of one `SCM_TIMESTAMPING` control message.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RxStamp {
    /// `ts[0]`: the kernel's software stamp.
    pub software: Option<TimeNs>,
    /// `ts[2]`: the NIC's raw hardware stamp.
    pub hardware: Option<TimeNs>,
}

fn timespec_ns(ts: &libc::timespec) -> Option<TimeNs> {
    // Checked: a stamp past year 2262 is not a stamp (found by fuzz/rx_cmsg).
    let ns = ts
        .tv_sec
        .checked_mul(1_000_000_000)?
        .checked_add(ts.tv_nsec)?;
    (ns != 0).then(|| TimeNs::from_ns(ns))
}

/// Reads `SCM_TIMESTAMPING` (struct scm_timestamping { timespec ts[3] }:
/// ts[0] software, ts[1] legacy, ts[2] raw hardware) out of a received
/// control-message buffer; a zero timespec means "not stamped".
pub fn parse_rx_control(control: &[u8]) -> RxStamp {
    // Walks the buffer by offsets with checked arithmetic rather than with
    // libc's CMSG_NXTHDR, which overflows (and, where overflow wraps, loops
    // forever) on a header claiming a length near usize::MAX; fuzz/rx_cmsg
    // found that and a read past the end of a short buffer.
    let mut out = RxStamp::default();
    let hdr = std::mem::size_of::<libc::cmsghdr>();
    let word = std::mem::size_of::<usize>();
    let align = |n: usize| n.checked_add(word - 1).map(|v| v & !(word - 1));
    // SAFETY: CMSG_LEN is pure arithmetic on a constant.
    let data_at = unsafe { libc::CMSG_LEN(0) } as usize;
    // SAFETY: as above.
    let want = unsafe { libc::CMSG_LEN(3 * std::mem::size_of::<libc::timespec>() as u32) } as usize;
    let mut off = 0usize;
    while off.checked_add(hdr).is_some_and(|end| end <= control.len()) {
        // SAFETY: `off + hdr <= control.len()`; the read is unaligned-safe.
        let h: libc::cmsghdr =
            unsafe { std::ptr::read_unaligned(control.as_ptr().add(off).cast()) };
        let len = h.cmsg_len as usize;
        if len < hdr || len > control.len() - off {
            break;
        }
        if h.cmsg_level == libc::SOL_SOCKET && h.cmsg_type == libc::SO_TIMESTAMPING && len >= want {
            // SAFETY: `off + data_at + 3 timespecs == off + want <= off + len
            // <= control.len()`; the read is unaligned-safe.
            let ts: [libc::timespec; 3] =
                unsafe { std::ptr::read_unaligned(control.as_ptr().add(off + data_at).cast()) };
            out.software = timespec_ns(&ts[0]);
            out.hardware = timespec_ns(&ts[2]);
        }
        match align(len).and_then(|a| off.checked_add(a)) {
            Some(next) => off = next,
            None => break,
        }
    }
    out
}

/// Why hardware stamps are off when nobody asked for them.
pub const HW_NOT_REQUESTED: &str =
    "hardware receive stamps not requested (pathsonde serve --hw-stamps); kernel software stamps used";

/// The NIC's hardware stamps for the interface `sock` is bound to, or why not.
fn raise_hardware(
    sock: &UdpSocket,
    ioctl: impl FnOnce(&UdpSocket) -> std::io::Result<Box<dyn HwStampIoctl>>,
) -> std::result::Result<HwStampGuard, String> {
    let local = sock
        .local_addr()
        .map_err(|e| format!("reading the probe socket's address: {e}"))?;
    let name = hw_stamps::interface_of(local.ip()).ok_or_else(|| {
        format!(
            "the probe socket is bound to {}, not to one interface's address",
            local.ip()
        )
    })?;
    let ioctl = ioctl(sock).map_err(|e| format!("{name}: duplicating the probe socket: {e}"))?;
    HwStampGuard::raise(ioctl, &name)
}

impl TimestampingReceiver {
    /// Kernel software receive stamps only (`SO_TIMESTAMPING` with
    /// RX_SOFTWARE | SOFTWARE); the NIC's configuration is neither read nor
    /// written, since it is the host's and may be a PTP daemon's.  When the
    /// kernel refuses the option, falls back to reading CLOCK_REALTIME after
    /// each receive, and says so in [`Self::clock`].
    pub fn new(sock: UdpSocket) -> Self {
        Self::open(sock, false, |_| {
            Err(std::io::Error::other("hardware stamps not requested"))
        })
    }

    /// As [`Self::new`], and the NIC's hardware stamps too where the socket
    /// is bound to one interface's address and its NIC can stamp every
    /// packet: its receive filter is raised to ALL for as long as this
    /// receiver lives and then put back ([`hw_stamps`]; [`Self::hardware_off`]
    /// says why not).  For `pathsonde serve --hw-stamps` only.
    pub fn with_hardware(sock: UdpSocket) -> Self {
        Self::open(sock, true, |s| {
            Ok(Box::new(hw_stamps::LibcHwStampIoctl::new(s)?) as Box<dyn HwStampIoctl>)
        })
    }

    /// The receiver, with hardware stamps through the ioctls `ioctl` makes
    /// if `hardware` (and `ioctl` not called at all otherwise).  The clock
    /// here is the software one: whether a train's stamps are the NIC's is
    /// decided per train (every packet must have one).
    pub(crate) fn open(
        sock: UdpSocket,
        hardware: bool,
        ioctl: impl FnOnce(&UdpSocket) -> std::io::Result<Box<dyn HwStampIoctl>>,
    ) -> Self {
        let mut hw_guard = if hardware {
            raise_hardware(&sock, ioctl)
        } else {
            Err(HW_NOT_REQUESTED.to_string())
        };
        let flags = TimestampingFlag::SOF_TIMESTAMPING_RX_SOFTWARE
            | TimestampingFlag::SOF_TIMESTAMPING_SOFTWARE;
        let hw = flags
            | TimestampingFlag::SOF_TIMESTAMPING_RX_HARDWARE
            | TimestampingFlag::SOF_TIMESTAMPING_RAW_HARDWARE;
        // Hardware stamps are asked of the socket only when the NIC was set
        // up for them here: without the opt-in, a NIC some other program set
        // to stamp must not slip its clock into our reports either.
        let kernel = match hw_guard {
            Ok(_) if setsockopt(&sock, sockopt::Timestamping, &hw).is_ok() => true,
            _ => {
                if hw_guard.is_ok() {
                    // Replacing the guard drops it: the NIC is put back.
                    hw_guard = Err(
                        "the kernel refused SO_TIMESTAMPING with hardware flags on the probe socket"
                            .into(),
                    );
                }
                setsockopt(&sock, sockopt::Timestamping, &flags).is_ok()
            }
        };
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
        // SAFETY: CMSG_SPACE is a pure size computation.
        let bytes = unsafe { libc::CMSG_SPACE(3 * std::mem::size_of::<libc::timespec>() as u32) }
            as usize
            + 64;
        let (hardware, hardware_off) = match hw_guard {
            Ok(g) => (Some(g), None),
            Err(why) => (None, Some(why)),
        };
        TimestampingReceiver {
            sock,
            clock,
            hardware,
            hardware_off,
            cmsg: vec![0u64; bytes.div_ceil(8)],
        }
    }

    pub fn clock(&self) -> ClockInfo {
        self.clock
    }

    /// Why hardware receive stamps are off; `None` when the NIC stamps
    /// every packet for this receiver.
    pub fn hardware_off(&self) -> Option<&str> {
        self.hardware_off.as_deref()
    }

    /// The NIC whose hardware stamps this receiver holds, when it does.
    pub fn hardware(&self) -> Option<&HwStampGuard> {
        self.hardware.as_ref()
    }

    pub fn socket(&self) -> &UdpSocket {
        &self.sock
    }

    /// Receives one datagram into `buf` (blocking, subject to the socket's
    /// read timeout).  A datagram whose kernel stamp is missing is stamped in
    /// user space rather than dropped.
    pub fn recv(&mut self, buf: &mut [u8]) -> std::io::Result<Received> {
        // SAFETY: zeroed sockaddr_storage / msghdr are valid; every pointer
        // in `msg` refers to a live buffer of the stated length.
        let (n, addr, namelen, controllen) = unsafe {
            let mut addr: libc::sockaddr_storage = std::mem::zeroed();
            let mut iov = libc::iovec {
                iov_base: buf.as_mut_ptr().cast(),
                iov_len: buf.len(),
            };
            let mut msg: libc::msghdr = std::mem::zeroed();
            msg.msg_name = (&mut addr as *mut libc::sockaddr_storage).cast();
            msg.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as _;
            msg.msg_iov = &mut iov;
            msg.msg_iovlen = 1;
            msg.msg_control = self.cmsg.as_mut_ptr().cast();
            msg.msg_controllen = (self.cmsg.len() * 8) as _;
            let n = libc::recvmsg(self.sock.as_raw_fd(), &mut msg, 0);
            (n, addr, msg.msg_namelen, msg.msg_controllen as usize)
        };
        if n < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: u64 → u8 view of the same initialized buffer.
        let control = unsafe {
            std::slice::from_raw_parts(self.cmsg.as_ptr().cast::<u8>(), self.cmsg.len() * 8)
        };
        let stamp = parse_rx_control(&control[..controllen.min(control.len())]);
        // SAFETY: the kernel filled `addr` with `namelen` bytes.
        let from = unsafe {
            SockaddrStorage::from_raw(
                (&addr as *const libc::sockaddr_storage).cast(),
                Some(namelen),
            )
        }
        .and_then(|a| storage_to_std(&a));
        Ok(Received {
            len: n as usize,
            from,
            at: stamp.software.unwrap_or_else(clock::realtime),
            hardware: stamp.hardware,
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
    refusals: u64,
}

impl BatchSender {
    pub fn new(capacity: usize) -> Self {
        BatchSender {
            headers: MultiHeaders::preallocate(capacity.max(1), None),
            capacity: capacity.max(1),
            refusals: 0,
        }
    }

    /// How many times the kernel reported an ICMP error (port unreachable)
    /// for an earlier datagram: a peer that is not there.  A load sender
    /// stops on it; a probe sender lets the method judge the losses.
    pub fn refusals(&self) -> u64 {
        self.refusals
    }

    pub fn send(&mut self, sock: &UdpSocket, bufs: &[Vec<u8>]) -> std::io::Result<usize> {
        self.send_iovecs(sock, bufs.len(), |i| [IoSlice::new(&bufs[i])])
    }

    /// Sends one datagram per header in `heads`, each that header followed
    /// by the shared `body`.  A burst of n datagrams then needs n small
    /// headers and one body, not n copies of the payload: what a throughput
    /// flow's sender holds stays the same however long a burst the peer asks for.
    pub fn send_headed<H: AsRef<[u8]>>(
        &mut self,
        sock: &UdpSocket,
        heads: &[H],
        body: &[u8],
    ) -> std::io::Result<usize> {
        self.send_iovecs(sock, heads.len(), |i| {
            [IoSlice::new(heads[i].as_ref()), IoSlice::new(body)]
        })
    }

    /// Sends `count` datagrams, the i-th gathered from `iov(i)`, in
    /// `sendmmsg` calls of at most `capacity`.
    fn send_iovecs<'a, const K: usize>(
        &mut self,
        sock: &UdpSocket,
        count: usize,
        iov: impl Fn(usize) -> [IoSlice<'a>; K],
    ) -> std::io::Result<usize> {
        let mut sent = 0;
        let mut refused_in_a_row = 0;
        while sent < count {
            let end = count.min(sent + self.capacity);
            let slices: Vec<[IoSlice<'a>; K]> = (sent..end).map(&iov).collect();
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
                    self.refusals += 1;
                }
                Err(e) => {
                    if e == nix::errno::Errno::ECONNREFUSED {
                        self.refusals += 1;
                    }
                    return Err(e.into());
                }
            }
        }
        Ok(sent)
    }
}

/// Kernel software *transmit* timestamps on a sending socket
/// (`SO_TIMESTAMPING` with TX_SOFTWARE | TX_SCHED | SOFTWARE | OPT_ID |
/// OPT_TSONLY).
///
/// The kernel stamps each datagram twice (CLOCK_REALTIME, like the receive
/// stamps): as it enters the device's queueing discipline (`SCHED`) and as
/// the driver hands it to the device (`SND`), and queues each stamp on the
/// socket's error queue with the datagram's OPT_ID counter: 0 for the first
/// datagram sent after the option was turned on, counting every datagram the
/// kernel accepted on this socket since.  The time between the two is what
/// the host's own egress queue held the datagram: a shaper or a slow link
/// on the sender's own interface, which is part of the path.  The error
/// queue is charged to the receive buffer, so long trains are drained as
/// they go.
pub struct TxStamps {
    /// `SND` stamps read but not yet claimed, by OPT_ID counter.
    pending: std::collections::BTreeMap<u32, TimeNs>,
    /// `SCHED` stamps (entry to the egress queue), likewise.
    queued: std::collections::BTreeMap<u32, TimeNs>,
    cmsg: Vec<u8>,
}

/// Takes the stamps of counters `first .. first + n` from `book` (in order,
/// `None` where the kernel gave none) and forgets every older one.
fn take_from(
    book: &mut std::collections::BTreeMap<u32, TimeNs>,
    first: u32,
    n: u32,
) -> Vec<Option<TimeNs>> {
    let out = (0..n)
        .map(|i| book.remove(&first.wrapping_add(i)))
        .collect();
    let end = first.wrapping_add(n);
    book.retain(|&k, _| k >= end);
    out
}

/// `linux/errqueue.h`: which moment a transmit stamp is of (`ee_info`).
const SCM_TSTAMP_SND: u32 = 0;
const SCM_TSTAMP_SCHED: u32 = 1;

/// Sets `SO_TIMESTAMPING` on `sock` to `flags`; whether the kernel took it.
fn set_timestamping(sock: &UdpSocket, flags: libc::c_uint) -> bool {
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
    rc == 0
}

impl TxStamps {
    /// Turns the stamps on for `sock`; `None` when the kernel refuses.
    /// Every datagram sent on `sock` afterwards counts toward OPT_ID.
    pub fn enable(sock: &UdpSocket) -> Option<TxStamps> {
        let flags: libc::c_uint = libc::SOF_TIMESTAMPING_TX_SOFTWARE
            | libc::SOF_TIMESTAMPING_TX_SCHED
            | libc::SOF_TIMESTAMPING_SOFTWARE
            | libc::SOF_TIMESTAMPING_OPT_ID
            | libc::SOF_TIMESTAMPING_OPT_TSONLY;
        set_timestamping(sock, flags).then(|| TxStamps {
            pending: std::collections::BTreeMap::new(),
            queued: std::collections::BTreeMap::new(),
            cmsg: vec![0u8; 512],
        })
    }

    /// Turns the stamps off on `sock` (after reading what is queued), so that
    /// the next [`TxStamps::enable`] restarts the OPT_ID counter at 0: the
    /// kernel resets it only when OPT_ID goes from off to on.  Used when a
    /// failed send may have used up a counter without sending anything.
    pub fn disable(mut self, sock: &UdpSocket) {
        self.drain(sock);
        set_timestamping(sock, 0);
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
            let mut moment = None;
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
                            moment = Some(e.ee_info);
                        }
                    }
                    c = libc::CMSG_NXTHDR(&msg, c);
                }
            }
            read += 1;
            let book = match moment {
                Some(SCM_TSTAMP_SND) => Some(&mut self.pending),
                Some(SCM_TSTAMP_SCHED) => Some(&mut self.queued),
                _ => None,
            };
            if let (Some(at), Some(id), Some(book)) = (stamp, id, book) {
                // One stamp per counter; should a kernel ever stamp more than
                // one segment of a GSO send under the same counter, the
                // first (earliest) one stands for the send.
                book.entry(id).or_insert(at);
            }
        }
    }

    /// Takes the stamps of counters `first .. first + n` (in order, `None`
    /// where the kernel gave none) and forgets every older one.
    pub fn take(&mut self, first: u32, n: u32) -> Vec<Option<TimeNs>> {
        take_from(&mut self.pending, first, n)
    }

    /// The same for the egress-queue entry (`SCHED`) stamps, kept apart.
    pub fn take_queued(&mut self, first: u32, n: u32) -> Vec<Option<TimeNs>> {
        take_from(&mut self.queued, first, n)
    }

    /// How many of counters `first .. first + n` have a stamp.
    pub fn have(&self, first: u32, n: u32) -> u32 {
        self.pending.range(first..first.saturating_add(n)).count() as u32
    }
}

#[cfg(test)]
mod rx_tests {
    use super::*;

    /// A control buffer holding one SCM_TIMESTAMPING message.
    fn control(ts: [(i64, i64); 3]) -> Vec<u8> {
        let data = 3 * std::mem::size_of::<libc::timespec>();
        // SAFETY: pure size computations.
        let (space, len) = unsafe {
            (
                libc::CMSG_SPACE(data as u32) as usize,
                libc::CMSG_LEN(data as u32) as usize,
            )
        };
        let mut buf = vec![0u64; space.div_ceil(8)];
        // SAFETY: `buf` is aligned and `space` bytes long; one cmsghdr and
        // its data fit by construction.
        unsafe {
            let mut msg: libc::msghdr = std::mem::zeroed();
            msg.msg_control = buf.as_mut_ptr().cast();
            msg.msg_controllen = space as _;
            let c = libc::CMSG_FIRSTHDR(&msg);
            (*c).cmsg_level = libc::SOL_SOCKET;
            (*c).cmsg_type = libc::SO_TIMESTAMPING;
            (*c).cmsg_len = len as _;
            let t: [libc::timespec; 3] = std::array::from_fn(|i| libc::timespec {
                tv_sec: ts[i].0,
                tv_nsec: ts[i].1,
            });
            std::ptr::write_unaligned(libc::CMSG_DATA(c).cast(), t);
            std::slice::from_raw_parts(buf.as_ptr().cast::<u8>(), space).to_vec()
        }
    }

    #[test]
    fn the_raw_hardware_stamp_is_ts2_and_the_software_one_ts0() {
        let s = parse_rx_control(&control([(5, 1), (0, 0), (7, 2)]));
        assert_eq!(s.software, Some(TimeNs::from_ns(5_000_000_001)));
        assert_eq!(s.hardware, Some(TimeNs::from_ns(7_000_000_002)));
        // No NIC stamp (veth, virtio): ts[2] is zero.
        let s = parse_rx_control(&control([(5, 1), (0, 0), (0, 0)]));
        assert_eq!(s.hardware, None);
        assert!(s.software.is_some());
        assert_eq!(parse_rx_control(&[]), RxStamp::default());
    }

    #[test]
    fn the_stamp_is_found_behind_another_control_message() {
        // An 4-byte message first (as IP_TOS would be), then the stamps:
        // laid out with the kernel's own CMSG macros.
        let stamps = control([(5, 1), (0, 0), (7, 2)]);
        // SAFETY: constants only.
        let first = unsafe { libc::CMSG_SPACE(4) } as usize;
        let mut buf = vec![0u64; (first + stamps.len()).div_ceil(8)];
        // SAFETY: `buf` is aligned and at least `first + stamps.len()` bytes.
        let bytes = unsafe {
            std::slice::from_raw_parts_mut(buf.as_mut_ptr().cast::<u8>(), first + stamps.len())
        };
        // SAFETY: CMSG_LEN is pure arithmetic on a constant.
        let len = unsafe { libc::CMSG_LEN(4) };
        let h = libc::cmsghdr {
            cmsg_len: len as _,
            cmsg_level: libc::SOL_IP,
            cmsg_type: libc::IP_TOS,
        };
        // SAFETY: `bytes` holds a cmsghdr at offset 0.
        unsafe { std::ptr::write_unaligned(bytes.as_mut_ptr().cast(), h) };
        bytes[first..].copy_from_slice(&stamps);
        let s = parse_rx_control(bytes);
        assert_eq!(s.software, Some(TimeNs::from_ns(5_000_000_001)));
        assert_eq!(s.hardware, Some(TimeNs::from_ns(7_000_000_002)));
    }

    #[test]
    fn a_short_or_absurd_control_buffer_is_read_within_bounds() {
        // The header claims three timespecs but the buffer ends early
        // (fuzz/rx_cmsg): nothing is read past the end.
        let full = control([(5, 1), (0, 0), (7, 2)]);
        for cut in 0..full.len() {
            let mut aligned = vec![0u64; cut.div_ceil(8)];
            // SAFETY: `aligned` holds at least `cut` bytes.
            let b =
                unsafe { std::slice::from_raw_parts_mut(aligned.as_mut_ptr().cast::<u8>(), cut) };
            b.copy_from_slice(&full[..cut]);
            let s = parse_rx_control(b);
            assert_eq!(s.software, None, "cut at {cut}");
        }
        // A header that claims (nearly) usize::MAX bytes ends the walk
        // instead of overflowing or looping (fuzz/rx_cmsg).
        let mut huge = vec![0xffu8; 47];
        huge.extend_from_slice(&[0; 5]);
        assert_eq!(parse_rx_control(&huge), RxStamp::default());
        let mut claims_max = control([(5, 1), (0, 0), (7, 2)]);
        claims_max[..8].copy_from_slice(&usize::MAX.to_ne_bytes());
        assert_eq!(parse_rx_control(&claims_max), RxStamp::default());
        // A stamp whose seconds overflow nanoseconds is no stamp.
        let s = parse_rx_control(&control([(i64::MAX, 0), (0, 0), (0, 0)]));
        assert_eq!(s.software, None);
    }

    #[test]
    fn probe_sockets_never_merge_datagrams() {
        // The server's probe socket comes from `bind`: UDP_GRO must be off.
        let s = bind("127.0.0.1:0".parse().unwrap()).unwrap();
        assert!(!nix::sys::socket::getsockopt(&s, sockopt::UdpGroSegment).unwrap());
    }

    #[test]
    fn without_a_nic_that_stamps_the_receiver_falls_back_to_software() {
        let rx = TimestampingReceiver::new(bind("127.0.0.1:0".parse().unwrap()).unwrap());
        assert!(rx.hardware_off().is_some(), "lo has no hardware stamps");
        let mut rx = rx;
        let to = rx.socket().local_addr().unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.send_to(b"probe", to).unwrap();
        rx.socket()
            .set_read_timeout(Some(std::time::Duration::from_secs(2)))
            .unwrap();
        let mut buf = [0u8; 64];
        let got = rx.recv(&mut buf).unwrap();
        assert_eq!(got.len, 5);
        assert_eq!(got.from, Some(tx.local_addr().unwrap()));
        assert_eq!(got.hardware, None);
        assert!(got.at.ns() > 0);
        assert_eq!(rx.clock().source, ClockSource::KernelSoftware);
    }
}
