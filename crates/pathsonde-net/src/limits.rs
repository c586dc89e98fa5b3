//! What one client may ask of a server (docs/security.md, "Limits").
//!
//! [`Limits`] is the server's configuration; [`SessionBudget`] charges one
//! session against it.  Both are generic in what they count — bytes,
//! seconds, bits per second — so every kind of session (probe trains here,
//! TCP/UDP throughput streams elsewhere) is bounded by the same numbers:
//! charge bytes before sending or accepting them, check the rate of what
//! was moved, and end the session when [`SessionBudget::check_time`] says so.

use pathsonde_core::BitRate;
use std::time::{Duration, Instant};
use thiserror::Error;

/// The server's limits.  Defaults are safe for a server left running on a
/// public address: a probe measurement takes seconds and tens of megabytes,
/// a throughput flow or UDPST test ten seconds at the path's rate, so a
/// minute, 10 GB (8 s at 10 Gb/s, 80 s at 1 Gb/s) and 10 Gb/s leave every
/// service room and bound any abuse.
#[derive(Debug, Clone, PartialEq)]
pub struct Limits {
    /// Longest a session may last from its first byte.
    pub max_duration: Duration,
    /// Fastest average rate a train (or stream) may move, IP bytes.
    pub max_rate: BitRate,
    /// Most IP bytes of probe (or stream) traffic per session.
    pub max_bytes: u64,
    /// Connections the server holds at once, measuring or still in the
    /// handshake; more are told "busy" at once.  (The half-open and idle
    /// timeouts are `ServerConfig::handshake_timeout` and `idle_timeout`.)
    pub max_connections: usize,
    /// Largest control frame body a client may send, bytes.
    pub max_control_message: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_duration: Duration::from_secs(60),
            max_rate: BitRate::from_bps(10e9),
            max_bytes: 10_000_000_000,
            max_connections: 256,
            max_control_message: 64 << 10,
        }
    }
}

/// A limit a session ran into; the text is sent to the client as is.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum LimitExceeded {
    #[error(
        "session limit: {wanted} more bytes would exceed the session's {max} bytes ({used} used)"
    )]
    Bytes { used: u64, wanted: u64, max: u64 },
    #[error("session limit: the session lasted its maximum of {max_s} s")]
    Duration { max_s: u64 },
    #[error(
        "session limit: {what} moved at {rate_mbps:.0} Mb/s, above the server's {max_mbps:.0} Mb/s"
    )]
    Rate {
        what: &'static str,
        rate_mbps: f64,
        max_mbps: f64,
    },
    /// A throughput flow asked to move data faster than the server allows
    /// (refused before any data moves).
    #[error(
        "session limit: flow asks {asked_mbps:.0} Mb/s, above the server's {max_mbps:.0} Mb/s"
    )]
    FlowRate { asked_mbps: f64, max_mbps: f64 },
    /// A throughput flow would run past the session's end.
    #[error(
        "session limit: a flow of {flow_ms} ms would outlast the session ({left_ms} ms left of its {max_s} s)"
    )]
    FlowDuration {
        flow_ms: u64,
        left_ms: u64,
        max_s: u64,
    },
}

/// One session's use of the limits.
#[derive(Debug, Clone)]
pub struct SessionBudget {
    limits: Limits,
    started: Instant,
    bytes: u64,
}

impl SessionBudget {
    pub fn new(limits: &Limits, started: Instant) -> SessionBudget {
        SessionBudget {
            limits: limits.clone(),
            started,
            bytes: 0,
        }
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Bytes charged so far.
    pub fn used(&self) -> u64 {
        self.bytes
    }

    /// Charges `bytes` (IP bytes about to be carried), or refuses without
    /// charging if they would pass the session's total.
    pub fn charge(&mut self, bytes: u64) -> Result<(), LimitExceeded> {
        let total = self.bytes.saturating_add(bytes);
        if total > self.limits.max_bytes {
            return Err(LimitExceeded::Bytes {
                used: self.bytes,
                wanted: bytes,
                max: self.limits.max_bytes,
            });
        }
        self.bytes = total;
        Ok(())
    }

    /// Bytes the session may still charge.
    pub fn remaining(&self) -> u64 {
        self.limits.max_bytes.saturating_sub(self.bytes)
    }

    /// Gives back bytes charged up front but never moved (a flow reserves
    /// its whole allowance before it starts and returns what it left), so
    /// the session's total counts what was carried.
    pub fn refund(&mut self, bytes: u64) {
        self.bytes = self.bytes.saturating_sub(bytes);
    }

    /// When the session must end.
    pub fn deadline(&self) -> Instant {
        self.started + self.limits.max_duration
    }

    /// Time left, or the limit if none is.
    pub fn check_time(&self, now: Instant) -> Result<Duration, LimitExceeded> {
        self.deadline()
            .checked_duration_since(now)
            .filter(|d| !d.is_zero())
            .ok_or(LimitExceeded::Duration {
                max_s: self.limits.max_duration.as_secs(),
            })
    }

    /// Checks the average rate of `bytes` moved over `span` (a train's
    /// arrivals, a stream's sending); spans too short to say are let pass.
    pub fn check_rate(
        &self,
        what: &'static str,
        bytes: u64,
        span: Duration,
    ) -> Result<(), LimitExceeded> {
        if span < Duration::from_micros(100) {
            return Ok(());
        }
        let rate = bytes as f64 * 8.0 / span.as_secs_f64();
        let max = self.limits.max_rate.bps();
        if rate > max {
            return Err(LimitExceeded::Rate {
                what,
                rate_mbps: rate / 1e6,
                max_mbps: max / 1e6,
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> Limits {
        Limits {
            max_bytes: 1000,
            max_duration: Duration::from_secs(2),
            max_rate: BitRate::from_mbps(100.0),
            ..Limits::default()
        }
    }

    #[test]
    fn bytes_are_charged_up_to_the_total_and_no_further() {
        let mut b = SessionBudget::new(&small(), Instant::now());
        b.charge(600).unwrap();
        let e = b.charge(401).unwrap_err();
        assert_eq!(
            e,
            LimitExceeded::Bytes {
                used: 600,
                wanted: 401,
                max: 1000
            }
        );
        assert_eq!(b.used(), 600, "a refused charge is not charged");
        b.charge(400).unwrap();
        assert!(b.charge(1).is_err());
        assert!(b.charge(u64::MAX).is_err());
        assert_eq!(b.remaining(), 0);
        b.refund(300);
        assert_eq!((b.used(), b.remaining()), (700, 300));
        b.refund(u64::MAX);
        assert_eq!(b.used(), 0, "a refund never goes below nothing");
    }

    #[test]
    fn time_runs_out_at_the_deadline() {
        let t0 = Instant::now();
        let b = SessionBudget::new(&small(), t0);
        assert_eq!(b.check_time(t0).unwrap(), Duration::from_secs(2));
        assert!(b.check_time(t0 + Duration::from_secs(2)).is_err());
        assert!(b.check_time(t0 + Duration::from_secs(3)).is_err());
    }

    #[test]
    fn rates_above_the_limit_are_named() {
        let b = SessionBudget::new(&small(), Instant::now());
        // 1 MB in 0.1 s = 80 Mb/s: allowed; in 0.05 s = 160 Mb/s: not.
        b.check_rate("train", 1_000_000, Duration::from_millis(100))
            .unwrap();
        let e = b
            .check_rate("train", 1_000_000, Duration::from_millis(50))
            .unwrap_err();
        assert!(e.to_string().contains("160 Mb/s"), "{e}");
        // Too short a span to judge.
        b.check_rate("train", 1_000_000, Duration::from_micros(10))
            .unwrap();
    }
}
