//! pathsonde's fleet: many agents measuring each other, one PostgreSQL
//! archive (docs/fleet.md, issue 30).
//!
//! The parts, each usable and tested on its own, so the CLI stays glue:
//! - [`mesh`]: the mesh file (TOML) naming hosts and tests, and which agent
//!   originates which test; parsed with typed errors, validated with one
//!   line per problem.
//! - [`schedule`]: a deterministic, sans-IO scheduler: given `now`, which
//!   slots are due and which were missed (never silently dropped).
//! - [`lease`]: leases on servers and shared paths, rows with an expiry in
//!   the archive's `leases` table, so no two tests overlap on a server and
//!   a killed agent's leases lapse; skips recorded with their reason.
//! - [`spool`]: results and skips the database could not take, kept on
//!   local disk (one file each, written atomically) and written exactly
//!   once when it returns.
//! - [`agent`]: the agent's config, the state its metrics show and the
//!   single-host agent's rotation through its peers.
//!
//! Time is passed in ([`UnixMs`]) wherever a decision depends on it, so the
//! scheduler and the lease expiry are tested without sleeping.

// Nothing here needs `unsafe`; forbidding it keeps it that way.
#![forbid(unsafe_code)]

pub mod agent;
pub mod lease;
pub mod mesh;
pub mod schedule;
pub mod spool;

pub use lease::{FleetDb, Lease, LeaseRequest, LeaseRow, Renewer, Skip, Taken};
pub use mesh::{Host, Mesh, MeshError, MeshTest, Problem, TestOptions};
pub use schedule::{Action, Scheduler, Slot};
pub use spool::{FlushReport, Spool, SpoolEntry, Written};

use serde::{Deserialize, Serialize};
use std::time::{SystemTime, UNIX_EPOCH};

/// A wall-clock instant, milliseconds since the Unix epoch: what the
/// archive stores (`started_unix_ms`) and what every agent's clock agrees
/// on to within NTP's error, which leases rely on (docs/fleet.md).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct UnixMs(pub i64);

impl UnixMs {
    /// The system clock now.
    pub fn now() -> UnixMs {
        UnixMs(match SystemTime::now().duration_since(UNIX_EPOCH) {
            Ok(d) => d.as_millis().min(i64::MAX as u128) as i64,
            Err(_) => 0,
        })
    }

    /// This instant plus `d` (rounded down to the millisecond).
    pub fn plus(self, d: pathsonde_core::DurationNs) -> UnixMs {
        UnixMs(self.0.saturating_add(d.ns() / 1_000_000))
    }

    /// How long from `earlier` to this instant (negative when before).
    pub fn since(self, earlier: UnixMs) -> pathsonde_core::DurationNs {
        pathsonde_core::DurationNs::from_ms(self.0.saturating_sub(earlier.0))
    }
}

/// What can go wrong in the fleet's I/O (the mesh file has [`MeshError`]).
#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    /// The archive (connecting, a query, a write), with its own context.
    #[error(transparent)]
    Archive(#[from] pathsonde_archive::ArchiveError),
    /// The fleet needs PostgreSQL: leases are rows many hosts share.
    #[error("the fleet needs a PostgreSQL archive (postgresql://…), not {0}: leases and skips are shared by every agent (docs/fleet.md)")]
    NotPostgres(String),
    /// A lease or skip query failed; the location shown has no password.
    #[error("archive {location}: {what}: {message}")]
    Database {
        location: String,
        what: &'static str,
        message: String,
        /// The server's SQLSTATE, when the server answered with an error
        /// (none when the connection failed).
        sqlstate: Option<String>,
    },
    /// The spool directory or one of its files.
    #[error("spool {path}: {message}")]
    Spool { path: String, message: String },
}

pub type Result<T> = std::result::Result<T, FleetError>;

impl FleetError {
    /// Whether the server refused the data itself (SQLSTATE class 22, a
    /// data exception, or 23, an integrity constraint violation): writing
    /// the same entry again can never succeed.  A lost connection, a
    /// server starting up or a missing privilege (which an administrator
    /// can grant) is not.
    pub fn refused_for_good(&self) -> bool {
        let code = match self {
            FleetError::Database { sqlstate, .. } => sqlstate.clone(),
            FleetError::Archive(pathsonde_archive::ArchiveError::Postgres { source, .. }) => {
                source.as_db_error().map(|d| d.code().code().to_string())
            }
            _ => None,
        };
        code.is_some_and(|c| c.starts_with("22") || c.starts_with("23"))
    }
}

/// A new random run UUID (version 4, RFC 9562), from the operating
/// system's generator: names one scheduled run (or its skip) wherever it
/// is kept, spool file or database row, so writing it twice stores it once.
pub fn new_run_uuid() -> String {
    let mut b = [0u8; 16];
    if getrandom::fill(&mut b).is_err() {
        // No OS randomness (should not happen on Linux): the clock and the
        // process id still make a collision across a fleet unlikely.
        let t = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        b[..16].copy_from_slice(&(t ^ (u128::from(std::process::id()) << 96)).to_le_bytes());
    }
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_uuids_are_v4_and_differ() {
        let a = new_run_uuid();
        let b = new_run_uuid();
        assert_ne!(a, b);
        assert_eq!(a.len(), 36);
        assert_eq!(&a[14..15], "4");
        assert!(matches!(&a[19..20], "8" | "9" | "a" | "b"));
    }

    #[test]
    fn instants_add_durations() {
        let t = UnixMs(1_000);
        assert_eq!(
            t.plus(pathsonde_core::DurationNs::from_secs(2)),
            UnixMs(3_000)
        );
        assert_eq!(UnixMs(3_500).since(t).ns(), 2_500_000_000);
    }
}
