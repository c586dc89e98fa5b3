//! `TCP_INFO` from the kernel: why a stream ran as fast as it did (its
//! congestion window, RTT, retransmissions, pacing and delivery rate, and
//! how long the receive window or send buffer held it back).

use pathsonde_wire::flow::TcpInfo;
use std::os::fd::AsRawFd;

/// `struct tcp_info` of linux/tcp.h up to `tcpi_snd_wnd` (kernel 5.4).  An
/// older kernel fills a prefix; the rest stays zero.
#[repr(C)]
#[derive(Default)]
struct RawTcpInfo {
    state: u8,
    ca_state: u8,
    retransmits: u8,
    probes: u8,
    backoff: u8,
    options: u8,
    wscale: u8,
    flags: u8,
    rto: u32,
    ato: u32,
    snd_mss: u32,
    rcv_mss: u32,
    unacked: u32,
    sacked: u32,
    lost: u32,
    retrans: u32,
    fackets: u32,
    last_data_sent: u32,
    last_ack_sent: u32,
    last_data_recv: u32,
    last_ack_recv: u32,
    pmtu: u32,
    rcv_ssthresh: u32,
    rtt: u32,
    rttvar: u32,
    snd_ssthresh: u32,
    snd_cwnd: u32,
    advmss: u32,
    reordering: u32,
    rcv_rtt: u32,
    rcv_space: u32,
    total_retrans: u32,
    pacing_rate: u64,
    max_pacing_rate: u64,
    bytes_acked: u64,
    bytes_received: u64,
    segs_out: u32,
    segs_in: u32,
    notsent_bytes: u32,
    min_rtt: u32,
    data_segs_in: u32,
    data_segs_out: u32,
    delivery_rate: u64,
    busy_time: u64,
    rwnd_limited: u64,
    sndbuf_limited: u64,
    delivered: u32,
    delivered_ce: u32,
    bytes_sent: u64,
    bytes_retrans: u64,
    dsack_dups: u32,
    reord_seen: u32,
    rcv_ooopack: u32,
    snd_wnd: u32,
}

/// Reads `TCP_INFO` of a connected TCP socket; `None` if the kernel refuses.
pub fn read(sock: &impl AsRawFd) -> Option<TcpInfo> {
    let mut raw = RawTcpInfo::default();
    let mut len = std::mem::size_of::<RawTcpInfo>() as libc::socklen_t;
    // SAFETY: `raw` is a plain-old-data struct of `len` bytes; the kernel
    // writes at most `len` bytes and sets `len` to what it wrote.
    let rc = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut raw as *mut RawTcpInfo).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return None;
    }
    Some(TcpInfo {
        rtt_us: raw.rtt,
        rttvar_us: raw.rttvar,
        min_rtt_us: raw.min_rtt,
        snd_cwnd: raw.snd_cwnd,
        snd_ssthresh: raw.snd_ssthresh,
        snd_mss: raw.snd_mss,
        total_retrans: raw.total_retrans,
        segs_out: raw.segs_out,
        segs_in: raw.segs_in,
        pacing_rate: raw.pacing_rate,
        delivery_rate: raw.delivery_rate,
        bytes_acked: raw.bytes_acked,
        bytes_received: raw.bytes_received,
        rcv_space: raw.rcv_space,
        rcv_ssthresh: raw.rcv_ssthresh,
        snd_wnd: raw.snd_wnd,
        rwnd_limited_us: raw.rwnd_limited,
        sndbuf_limited_us: raw.sndbuf_limited,
        busy_us: raw.busy_time,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    #[test]
    fn the_layout_matches_the_kernel() {
        // Offsets from linux/tcp.h: pacing_rate at 104, delivery_rate at 160,
        // snd_wnd at 228.
        assert_eq!(std::mem::offset_of!(RawTcpInfo, pacing_rate), 104);
        assert_eq!(std::mem::offset_of!(RawTcpInfo, delivery_rate), 160);
        assert_eq!(std::mem::offset_of!(RawTcpInfo, snd_wnd), 228);
    }

    #[test]
    fn a_loopback_connection_has_tcp_info() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut s, _) = l.accept().unwrap();
        c.write_all(&[7u8; 100_000]).unwrap();
        let mut got = vec![0u8; 100_000];
        s.read_exact(&mut got).unwrap();
        let ci = read(&c).unwrap();
        let si = read(&s).unwrap();
        assert!(ci.snd_mss > 0 && ci.snd_cwnd > 0);
        assert!(ci.bytes_acked >= 100_000, "{ci:?}");
        assert!(si.bytes_received >= 100_000, "{si:?}");
    }
}
