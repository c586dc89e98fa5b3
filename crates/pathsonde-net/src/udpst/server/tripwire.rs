//! Tripwire ports: why a blind spoofer cannot guess a test port.
//!
//! A Setup Response names the new test port, and a spoofer who sent the
//! setup with a victim's address never sees it.  To activate a test for
//! the victim it must send the Test Activation to every port the kernel
//! might have chosen (the ephemeral range, 28,232 ports by default) within
//! the 3 s watchdog.  The server therefore holds [`TRIPWIRES`] silent UDP
//! sockets on ports the kernel picks from the same range, indistinguishable
//! from test ports, and replaced one a second so a scan cannot map them.
//! No client has a reason to send to one: a datagram arriving on a tripwire
//! marks its source address as sweeping, and every connection from that
//! address, set up or testing, ends.  A sweep in any order reaches one of
//! the 32 tripwires before the one test port with probability 32/33 (97 %),
//! and a later tripwire ends even a test it did activate.  Nothing is ever
//! sent from a tripwire.

use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Tripwire sockets held at once.
pub const TRIPWIRES: usize = 32;
/// How often one tripwire is replaced by a fresh port.
const ROTATE_EVERY: Duration = Duration::from_secs(1);
/// How long a trip is remembered: longer than a test's setup-to-activation
/// window (3 s), so a sweep that trips after the setup still ends it.
const REMEMBER: Duration = Duration::from_secs(30);
/// Sources remembered at once (oldest forgotten first).
const MAX_TRIPPED: usize = 256;

/// Source addresses that sent to a tripwire, and when.
#[derive(Debug, Default)]
pub(crate) struct Tripped {
    recent: Mutex<Vec<(IpAddr, Instant)>>,
}

impl Tripped {
    /// Records that `ip` sent to a tripwire at `at`.
    pub(crate) fn trip(&self, ip: IpAddr, at: Instant) {
        let mut r = self.recent.lock().unwrap_or_else(|e| e.into_inner());
        r.retain(|(a, t)| *a != ip && at.saturating_duration_since(*t) < REMEMBER);
        if r.len() >= MAX_TRIPPED {
            r.remove(0);
        }
        r.push((ip, at));
    }

    /// True when `ip` sent to a tripwire at or after `since`.
    pub(crate) fn since(&self, ip: IpAddr, since: Instant) -> bool {
        let r = self.recent.lock().unwrap_or_else(|e| e.into_inner());
        r.iter().any(|(a, t)| *a == ip && *t >= since)
    }
}

/// The tripwire sockets, bound on `ip` (the UDPST listener's address).
pub(crate) struct Tripwires {
    ip: IpAddr,
    socks: Vec<UdpSocket>,
    next_rotation: Instant,
    oldest: usize,
}

impl Tripwires {
    /// Binds [`TRIPWIRES`] sockets; fewer if the system refuses some (each
    /// missing one only lowers the odds of catching a sweep).
    pub(crate) fn bind(ip: IpAddr) -> Tripwires {
        let socks = (0..TRIPWIRES).filter_map(|_| bind_one(ip)).collect();
        Tripwires {
            ip,
            socks,
            next_rotation: Instant::now() + ROTATE_EVERY,
            oldest: 0,
        }
    }

    /// The ports held now.
    #[cfg(test)]
    pub(crate) fn ports(&self) -> Vec<u16> {
        self.socks
            .iter()
            .filter_map(|s| s.local_addr().ok().map(|a| a.port()))
            .collect()
    }

    /// Watches the tripwires until `stop`, recording every source that
    /// sends to one in `tripped` and rotating one port a second.
    pub(crate) fn watch(mut self, tripped: &Tripped, stop: &AtomicBool, log: bool) {
        use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
        let mut buf = [0u8; 64];
        while !stop.load(Ordering::SeqCst) {
            let ready: Vec<usize> = {
                let mut fds: Vec<PollFd<'_>> = self
                    .socks
                    .iter()
                    .map(|s| PollFd::new(s.as_fd(), PollFlags::POLLIN))
                    .collect();
                match poll(&mut fds, PollTimeout::from(100u16)) {
                    Ok(0) | Err(_) => Vec::new(),
                    Ok(_) => fds
                        .iter()
                        .enumerate()
                        .filter(|(_, f)| f.any().unwrap_or(false))
                        .map(|(i, _)| i)
                        .collect(),
                }
            };
            for i in ready {
                while let Ok((_, from)) = self.socks[i].recv_from(&mut buf) {
                    tripped.trip(from.ip(), Instant::now());
                    if log {
                        eprintln!(
                            "pathsonde serve: UDPST {from}: sent to a port no test uses (a port sweep): its connections end"
                        );
                    }
                }
            }
            self.rotate();
        }
    }

    /// Replaces the oldest tripwire with a fresh port once a second.
    fn rotate(&mut self) {
        let now = Instant::now();
        if now < self.next_rotation || self.socks.is_empty() {
            return;
        }
        self.next_rotation = now + ROTATE_EVERY;
        let i = self.oldest % self.socks.len();
        if let Some(fresh) = bind_one(self.ip) {
            self.socks[i] = fresh;
        }
        self.oldest = self.oldest.wrapping_add(1);
    }
}

/// One nonblocking socket on a port the kernel picks (the same way it picks
/// test ports).
fn bind_one(ip: IpAddr) -> Option<UdpSocket> {
    let s = UdpSocket::bind(SocketAddr::new(ip, 0)).ok()?;
    s.set_nonblocking(true).ok()?;
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_datagram_to_a_tripwire_marks_its_source() {
        let wires = Tripwires::bind("127.0.0.1".parse().unwrap());
        let ports = wires.ports();
        assert_eq!(ports.len(), TRIPWIRES);
        let tripped = Tripped::default();
        let stop = AtomicBool::new(false);
        let before = Instant::now();
        std::thread::scope(|s| {
            s.spawn(|| wires.watch(&tripped, &stop, false));
            let c = UdpSocket::bind("127.0.0.2:0").unwrap();
            c.send_to(b"x", ("127.0.0.1", ports[7])).unwrap();
            let deadline = Instant::now() + Duration::from_secs(10);
            while !tripped.since("127.0.0.2".parse().unwrap(), before) {
                assert!(Instant::now() < deadline, "the trip was not seen");
                std::thread::sleep(Duration::from_millis(5));
            }
            stop.store(true, Ordering::SeqCst);
        });
        assert!(!tripped.since("127.0.0.3".parse().unwrap(), before));
        // A trip before a connection's setup does not end it.
        assert!(!tripped.since("127.0.0.2".parse().unwrap(), Instant::now()));
    }

    #[test]
    fn trips_are_bounded_and_forgotten() {
        let t = Tripped::default();
        let t0 = Instant::now();
        for i in 0..1000u32 {
            t.trip(IpAddr::from(i.to_be_bytes()), t0);
        }
        assert!(t.recent.lock().unwrap().len() <= MAX_TRIPPED);
        t.trip(
            "10.0.0.1".parse().unwrap(),
            t0 + REMEMBER + Duration::from_secs(1),
        );
        assert_eq!(t.recent.lock().unwrap().len(), 1, "old trips are dropped");
    }
}
