//! The agent (`pathsonde agent`, docs/monitoring.md and docs/fleet.md):
//! regular testing of peers, perfSONAR's idea.  Here are its parts that need
//! no command line: the config ([`config`]), the state its metrics show
//! ([`status`]), the mesh agent's loop ([`mesh_agent`]) and the single-host
//! agent's ([`single`]), and what they show of their work ([`Event`]).  The
//! CLI measures, archives and prints, through [`Hooks`].

pub mod config;
pub mod mesh_agent;
pub mod single;
pub mod status;

pub use config::{load, load_for_mesh, Config, ConfigError, LoadError, Peer};
pub use status::Status;

use crate::FlushReport;
use pathsonde_archive::Record;
use pathsonde_core::methods::registry::MethodSettings;
use pathsonde_net::MeasurementRun;
use serde_json::{json, Value};
use std::time::Duration;

/// Where the agent serves `/metrics` when neither the command line nor the
/// config says.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:9310";

/// A measurement that failed, as the caller reports it.
#[derive(Debug)]
pub struct Failed {
    /// The exit-code kind (docs/exit-codes.md), counted in the metrics.
    pub kind: &'static str,
    /// What went wrong, in words (recorded as the skip's reason).
    pub message: String,
}

/// Something the agent did that its user sees.
pub enum Event<'a> {
    /// A single-host agent's peer measured (and archived as `archive`'s id,
    /// when it was).
    PeerMeasured {
        peer: &'a Peer,
        archive: Option<&'a serde_json::Value>,
        summary: &'a str,
    },
    /// A single-host agent's measurement that failed.
    PeerFailed { peer: &'a Peer, failed: &'a Failed },
    /// A slot that did not run, kept with its reason.
    Skip {
        test: &'a str,
        reason: &'a str,
        /// Kept in the spool: the database is unreachable.
        spooled: bool,
    },
    /// A slot measured and its run kept.
    Measured {
        test: &'a str,
        run_uuid: &'a str,
        summary: &'a str,
        /// Kept in the spool: the database is unreachable.
        spooled: bool,
    },
    /// The spool was written back to the database.
    Flushed(&'a FlushReport),
    /// Something the agent works around (the database away, a lease not
    /// renewed), in words.
    Warning(String),
}

/// What the agent needs from its caller.
pub trait Hooks {
    /// Measures `peer`, waiting at most `timeout` for any answer.
    fn measure(&mut self, peer: &Peer, timeout: Duration) -> Result<MeasurementRun, Failed>;
    /// The run's result as the archive keeps it.
    fn result_json(&self, run: &MeasurementRun, settings: &MethodSettings) -> serde_json::Value;
    /// The run's one-line summary.
    fn summary(&self, run: &MeasurementRun) -> String;
    /// Archives a single-host agent's record; what the archive says of it
    /// (its `id`), when it was saved.
    fn save(&mut self, record: &Record) -> Option<serde_json::Value>;
    /// Shows what happened.
    fn event(&mut self, event: Event<'_>);
}

impl Event<'_> {
    /// The event's name and fields for `--json`'s event stream (none for a
    /// warning, which goes to stderr).
    pub fn json(&self) -> Option<(&'static str, Value)> {
        Some(match self {
            Event::PeerMeasured {
                peer,
                archive,
                summary,
            } => (
                "measurement",
                json!({ "peer": peer.name, "method": peer.method, "archive": archive, "summary": summary }),
            ),
            Event::PeerFailed { peer, failed } => (
                "measurement_error",
                json!({ "peer": peer.name, "method": peer.method, "kind": failed.kind, "message": failed.message }),
            ),
            Event::Skip {
                test,
                reason,
                spooled,
            } => (
                "skip",
                json!({ "test": test, "reason": reason, "spooled": spooled }),
            ),
            Event::Measured {
                test,
                run_uuid,
                summary,
                spooled,
            } => (
                "measurement",
                json!({ "test": test, "run_uuid": run_uuid, "summary": summary, "spooled": spooled }),
            ),
            Event::Flushed(r) => (
                "spool_flushed",
                json!({ "written": r.written, "already_there": r.already_there,
                        "damaged": r.damaged, "rejected": r.rejected.len() }),
            ),
            Event::Warning(_) => return None,
        })
    }

    /// The line text output prints for it, if any.
    pub fn line(&self) -> Option<String> {
        Some(match self {
            Event::PeerMeasured {
                peer,
                archive,
                summary,
            } => format!(
                "peer {} ({}): {summary}{}",
                peer.name,
                peer.method,
                archive
                    .and_then(|s| s["id"].as_i64())
                    .map_or(String::new(), |i| format!(" [run {i}]"))
            ),
            Event::PeerFailed { peer, failed } => format!(
                "peer {} ({}): failed ({}): {}",
                peer.name, peer.method, failed.kind, failed.message
            ),
            Event::Skip { test, reason, .. } => format!("test {test}: skipped: {reason}"),
            Event::Measured {
                test,
                summary,
                spooled,
                ..
            } => format!(
                "test {test}: {summary}{}",
                if *spooled {
                    " [spooled: database unreachable]"
                } else {
                    ""
                }
            ),
            Event::Flushed(_) | Event::Warning(_) => return None,
        })
    }
}
