//! Counters a running server keeps about itself, for monitoring
//! (`pathsonde serve --metrics ADDR` exposes them to Prometheus).  Plain
//! relaxed atomics: incrementing one costs a few nanoseconds and never blocks
//! the receive path.

use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering};

/// Live counters; share one through [`crate::ServerConfig::stats`].
#[derive(Debug, Default)]
pub struct ServerStats {
    /// TCP connections accepted on the control port.
    pub connections: AtomicU64,
    /// Connections told "busy" because a session was running.
    pub busy_refusals: AtomicU64,
    /// Connections whose hello named another protocol version.
    pub version_mismatches: AtomicU64,
    /// Sessions that passed the handshake.
    pub sessions: AtomicU64,
    /// Sessions running now (0 or 1).
    pub sessions_active: AtomicU64,
    /// Sessions (or handshakes) that ended in an error.
    pub session_errors: AtomicU64,
    /// Trains whose arrivals were reported.
    pub trains: AtomicU64,
    /// Probe packets accepted into a train.
    pub probe_packets: AtomicU64,
    /// UDP payload bytes of those probes.
    pub probe_payload_bytes: AtomicU64,
    /// Probes dropped as not belonging to the announced train.
    pub probes_rejected: AtomicU64,
    /// Probes that arrived twice.
    pub probes_duplicate: AtomicU64,
    /// Echo requests answered (RTT over the probe path).
    pub echo_replies: AtomicU64,
}

/// A copy of the counters at one instant.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
pub struct StatsSnapshot {
    pub connections: u64,
    pub busy_refusals: u64,
    pub version_mismatches: u64,
    pub sessions: u64,
    pub sessions_active: u64,
    pub session_errors: u64,
    pub trains: u64,
    pub probe_packets: u64,
    pub probe_payload_bytes: u64,
    pub probes_rejected: u64,
    pub probes_duplicate: u64,
    pub echo_replies: u64,
}

impl ServerStats {
    pub(crate) fn add(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Ordering::Relaxed);
    }

    pub(crate) fn sub(c: &AtomicU64, n: u64) {
        let _ = c.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
            Some(v.saturating_sub(n))
        });
    }

    pub fn snapshot(&self) -> StatsSnapshot {
        let g = |c: &AtomicU64| c.load(Ordering::Relaxed);
        StatsSnapshot {
            connections: g(&self.connections),
            busy_refusals: g(&self.busy_refusals),
            version_mismatches: g(&self.version_mismatches),
            sessions: g(&self.sessions),
            sessions_active: g(&self.sessions_active),
            session_errors: g(&self.session_errors),
            trains: g(&self.trains),
            probe_packets: g(&self.probe_packets),
            probe_payload_bytes: g(&self.probe_payload_bytes),
            probes_rejected: g(&self.probes_rejected),
            probes_duplicate: g(&self.probes_duplicate),
            echo_replies: g(&self.echo_replies),
        }
    }
}
