//! How many datagrams a UDP socket dropped itself: its receive buffer was
//! full when they came (the kernel's per-socket `drops`, the count
//! `SO_RXQ_OVFL` reports).  These losses are the receiving host's, not the
//! path's; the server samples the count before and after each train so the
//! host verdict can keep them apart (docs/verdict.md).
//!
//! Read from `/proc/thread-self/net/udp{,6}` by the socket's inode:
//! sampling at any moment needs no datagram to carry the count, unlike the
//! `SO_RXQ_OVFL` control message, which arrives only with the next datagram
//! and only once the count is above zero.

use std::net::UdpSocket;

/// The socket's running drop count, or `None` where the kernel's tables
/// cannot be read (no procfs, another OS).
pub fn socket_drops(sock: &UdpSocket) -> Option<u64> {
    let inode = nix::sys::stat::fstat(sock).ok()?.st_ino;
    // The calling thread's network namespace first: the lab runs a server
    // on a thread moved into another namespace, and `/proc/net` is the
    // process's (its main thread's) view.
    [
        "/proc/thread-self/net/udp",
        "/proc/thread-self/net/udp6",
        "/proc/net/udp",
        "/proc/net/udp6",
    ]
    .iter()
    .filter_map(|t| std::fs::read_to_string(t).ok())
    .find_map(|table| drops_in(&table, inode))
}

/// The `drops` column of the row of `table` (the text of `/proc/net/udp`)
/// whose inode is `inode`.  Never panics on any text.
pub fn drops_in(table: &str, inode: u64) -> Option<u64> {
    table.lines().skip(1).find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        // sl local rem st tx:rx tr:when retrnsmt uid timeout inode ref pointer drops
        let ino: u64 = fields.get(9)?.parse().ok()?;
        if ino != inode {
            return None;
        }
        fields.get(12)?.parse().ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: &str = "   sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops
  113: 00000000:14BE 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 40211 2 0000000000000000 0
  371: 0100007F:C3F7 0100007F:14BE 01 00000000:00000000 00:00000000 00000000     0        0 40977 2 0000000000000000 1337
";

    #[test]
    fn the_row_of_the_inode_gives_its_drops() {
        assert_eq!(drops_in(TABLE, 40977), Some(1337));
        assert_eq!(drops_in(TABLE, 40211), Some(0));
        assert_eq!(drops_in(TABLE, 1), None);
        assert_eq!(drops_in("", 40977), None);
        assert_eq!(drops_in("header\n1 2 3", 3), None);
    }

    #[test]
    fn a_real_socket_counts_what_its_full_buffer_dropped() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let before = socket_drops(&rx).expect("procfs on Linux");
        // A tiny receive buffer, never read: most of a burst is dropped.
        let sock = socket2::SockRef::from(&rx);
        sock.set_recv_buffer_size(4096).unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        for _ in 0..200 {
            let _ = tx.send_to(&[0u8; 1200], rx.local_addr().unwrap());
        }
        let after = socket_drops(&rx).unwrap();
        assert!(after >= before + 100, "before {before}, after {after}");
    }
}
