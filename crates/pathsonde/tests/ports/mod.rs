//! Loopback ports for the servers the CLI tests start.  Each port is free
//! for both TCP and UDP when handed out, and no port is handed out twice in
//! one test binary: asked one at a time, the kernel may give back a port it
//! has just released, and a `--metrics` port that was also the server's
//! control port once failed CI (the server exited, the client timed out).
#![allow(dead_code)]

use std::collections::HashSet;
use std::net::{TcpListener, UdpSocket};
use std::sync::Mutex;

/// Every port this test binary has handed out; tests run on parallel
/// threads, so one test's server port is never another's.
static GIVEN: Mutex<Option<HashSet<u16>>> = Mutex::new(None);

/// `N` distinct loopback ports, each free for TCP and UDP.  The sockets
/// that proved them free are all held until the last is found, so the
/// kernel cannot repeat one within the call.
pub fn free_ports<const N: usize>() -> [u16; N] {
    let mut given = GIVEN.lock().unwrap_or_else(|p| p.into_inner());
    let given = given.get_or_insert_with(HashSet::new);
    let mut held = Vec::with_capacity(N);
    let mut ports = [0u16; N];
    let mut found = 0;
    while found < N {
        let tcp = TcpListener::bind("127.0.0.1:0").expect("binding a loopback TCP port");
        let port = tcp.local_addr().expect("a bound port").port();
        let udp = UdpSocket::bind(("127.0.0.1", port));
        if let Ok(udp) = udp {
            if given.insert(port) {
                ports[found] = port;
                found += 1;
            }
            held.push((tcp, Some(udp)));
        } else {
            held.push((tcp, None));
        }
    }
    ports
}

/// One loopback port, free for TCP and UDP, not handed out before.
pub fn free_port() -> u16 {
    free_ports::<1>()[0]
}
