//! The limits' hooks in a measurement session (docs/security.md): what a
//! train costs, whether it moved too fast, and which UDP packets may be
//! answered.  Kept apart from the session loop so other kinds of session
//! charge the same [`SessionBudget`].

use crate::error::{NetError, Result};
use crate::limits::SessionBudget;
use crate::udp::ip_udp_overhead;
use pathsonde_wire::control::{TrainAnnounce, TrainReport};
use std::net::SocketAddr;
use std::time::Duration;

/// Largest echo request answered, UDP payload bytes: an RTT sample needs a
/// header, not a jumbo frame, and a reply never exceeds its request.
pub const MAX_ECHO_PAYLOAD: usize = 256;
/// Most echo requests answered per session (the client sends ten).
pub const MAX_ECHOES: u32 = 1000;

/// IP bytes of an announced train.
pub fn train_bytes(a: &TrainAnnounce, peer: SocketAddr) -> u64 {
    u64::from(a.packets) * (u64::from(a.payload_len) + ip_udp_overhead(&peer))
}

/// Charges an announced train to the session, before the server listens.
pub fn charge_train(budget: &mut SessionBudget, a: &TrainAnnounce, peer: SocketAddr) -> Result<()> {
    budget.charge(train_bytes(a, peer)).map_err(NetError::Limit)
}

/// Checks the average arrival rate of a collected train against the limit.
pub fn check_train_rate(
    budget: &SessionBudget,
    report: &TrainReport,
    payload_len: u32,
    peer: SocketAddr,
) -> Result<()> {
    let (Some(first), Some(last)) = (
        report.arrivals.iter().map(|a| a.recv_ns).min(),
        report.arrivals.iter().map(|a| a.recv_ns).max(),
    ) else {
        return Ok(());
    };
    // n packets span n - 1 gaps; more generally, the packets that arrived
    // before the last stamp are what moved over the span.  Packets can share
    // a stamp: a GSO car reaching a loopback socket is split on arrival and
    // its segments keep the one stamp; receive coalescing bunches too.  The
    // last bunch's packets arrived "at" the span's end, so they do not count.
    let n = report.arrivals.iter().filter(|a| a.recv_ns < last).count() as u64;
    let bytes = n * (u64::from(payload_len) + ip_udp_overhead(&peer));
    let span = Duration::from_nanos(last.saturating_sub(first).max(0) as u64);
    budget
        .check_rate("the train", bytes, span)
        .map_err(NetError::Limit)
}

/// The session's probe source: the control peer's address, and once the
/// first valid packet has come, exactly that address and port.
#[derive(Debug, Clone, Copy)]
pub struct ProbeSource {
    peer: SocketAddr,
    locked: Option<SocketAddr>,
}

impl ProbeSource {
    pub fn new(peer: SocketAddr) -> Self {
        ProbeSource { peer, locked: None }
    }
    /// Whether a packet from `from` may belong to the session at all
    /// (before its session id is checked).
    pub fn may_be_ours(&self, from: SocketAddr) -> bool {
        match self.locked {
            Some(l) => l == from,
            None => from.ip().to_canonical() == self.peer.ip().to_canonical(),
        }
    }
    /// A packet from `from` carried the session id: fix the source.
    pub fn confirm(&mut self, from: SocketAddr) {
        self.locked.get_or_insert(from);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::Limits;
    use pathsonde_core::BitRate;
    use pathsonde_wire::control::{Arrival, WireClock, WireClockSource};
    use std::time::Instant;

    fn peer() -> SocketAddr {
        "10.0.0.2:4000".parse().unwrap()
    }

    #[test]
    fn trains_are_charged_in_ip_bytes_until_the_budget_is_spent() {
        let limits = Limits {
            max_bytes: 3_000_000,
            ..Limits::default()
        };
        let mut b = SessionBudget::new(&limits, Instant::now());
        let a = TrainAnnounce {
            train: 0,
            packets: 1000,
            payload_len: 1472,
        };
        assert_eq!(train_bytes(&a, peer()), 1_500_000);
        charge_train(&mut b, &a, peer()).unwrap();
        charge_train(&mut b, &a, peer()).unwrap();
        let e = charge_train(&mut b, &a, peer()).unwrap_err();
        assert!(
            matches!(e, NetError::Limit(ref m) if m.to_string().contains("3000000")),
            "{e}"
        );
    }

    #[test]
    fn a_train_that_arrived_faster_than_the_limit_is_refused() {
        let limits = Limits {
            max_rate: BitRate::from_mbps(100.0),
            ..Limits::default()
        };
        let b = SessionBudget::new(&limits, Instant::now());
        let report = |gap_ns: i64| TrainReport {
            train: 0,
            arrivals: (0..101)
                .map(|i| Arrival {
                    seq: i,
                    recv_ns: 1_000_000 + i64::from(i) * gap_ns,
                })
                .collect(),
            duplicates: 0,
            rejected: 0,
            clock: WireClock {
                source: WireClockSource::KernelSoftware,
                resolution_ns: 1,
            },
        };
        // 1500 B every 120 us = 100 Mb/s: allowed; every 60 us = 200 Mb/s: not.
        check_train_rate(&b, &report(120_000), 1472, peer()).unwrap();
        assert!(check_train_rate(&b, &report(60_000), 1472, peer()).is_err());
        // Arrivals in bunches that share a stamp (GSO cars split at the
        // receiver): 5 bunches of 20, 2.5 ms apart = 96 Mb/s on average;
        // the last bunch arrived at the span's end and does not count.
        let mut bunched = report(0);
        for (i, a) in bunched.arrivals.iter_mut().enumerate().take(100) {
            a.recv_ns = 1_000_000 + (i as i64 / 20) * 2_500_000;
        }
        bunched.arrivals.truncate(100);
        check_train_rate(&b, &bunched, 1472, peer()).unwrap();
        for a in &mut bunched.arrivals {
            a.recv_ns = 1_000_000 + (a.recv_ns - 1_000_000) / 2;
        }
        assert!(check_train_rate(&b, &bunched, 1472, peer()).is_err());
    }

    #[test]
    fn the_probe_source_locks_to_the_first_confirmed_port() {
        let mut s = ProbeSource::new(peer());
        let a: SocketAddr = "10.0.0.2:5000".parse().unwrap();
        let b: SocketAddr = "10.0.0.2:5001".parse().unwrap();
        let stranger: SocketAddr = "10.0.0.3:5000".parse().unwrap();
        assert!(s.may_be_ours(a) && s.may_be_ours(b));
        assert!(!s.may_be_ours(stranger));
        s.confirm(a);
        assert!(s.may_be_ours(a));
        assert!(!s.may_be_ours(b), "another port of the same host");
        s.confirm(b);
        assert!(!s.may_be_ours(b), "the first confirmed port stays");
    }
}
