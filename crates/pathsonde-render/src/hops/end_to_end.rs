//! What `pathsonde hops` says of the path measured end to end against a
//! pathsonde server on the far end: the default method's A beside the tight
//! link found from ICMP, and whether they agree
//! (`pathsonde_core::methods::hops::end_to_end`).  A line of text and the
//! `end_to_end` object of `--json` (docs/hops.md).

use pathsonde_core::methods::hops::end_to_end::Comparison;
use pathsonde_core::{BitRate, Estimate};
use serde_json::{json, Value};
use std::net::SocketAddr;

/// The end-to-end part of a `hops` run.
pub enum EndToEnd<'a> {
    /// The server answered and the method gave an estimate.
    Measured {
        /// The server's address (HOST at `--server-port`).
        server: SocketAddr,
        /// The default method's end-to-end estimate.
        estimate: &'a Estimate,
        /// How it relates to the tight link found.
        comparison: &'a Comparison,
    },
    /// No server answered, or the measurement ended without an estimate:
    /// why, in one line.  `hops` goes on from ICMP alone.
    NotMeasured {
        /// Where a server was looked for.
        server: SocketAddr,
        /// The client's error, in its words.
        why: String,
    },
}

fn bps(r: Option<BitRate>) -> Value {
    r.map_or(Value::Null, |r| json!(r.bps()))
}

/// `--json`'s `end_to_end` object.
pub fn json(e: &EndToEnd) -> Value {
    match e {
        EndToEnd::Measured {
            server,
            estimate,
            comparison,
        } => json!({
            "server": server.to_string(),
            "method": estimate.method.to_string(),
            "available_bps": estimate.available.bps(),
            "low_bps": estimate.low.bps(),
            "high_bps": bps(estimate.high),
            "converged": estimate.converged,
            "host_limited": estimate.host_limited,
            "agreement": comparison.agreement,
            "tight_bracket_low_bps": bps(comparison.bracket_low),
            "tight_bracket_high_bps": bps(comparison.bracket_high),
            "why": comparison.why,
        }),
        EndToEnd::NotMeasured { server, why } => json!({
            "server": server.to_string(),
            "error": why,
        }),
    }
}

/// The report's line.
pub fn text(e: &EndToEnd) -> String {
    match e {
        EndToEnd::Measured {
            server,
            estimate,
            comparison,
        } => format!(
            "end to end ({} against the pathsonde server at {server}): {}\n",
            estimate.method, comparison.why
        ),
        EndToEnd::NotMeasured { server, why } => {
            format!("end to end (pathsonde server at {server}): not measured: {why}; the above is from ICMP alone\n")
        }
    }
}
