//! pathsonde-net: pathsonde on a real path.
//!
//! The server ([`server`]) accepts one measurement at a time, stamps every
//! probe with the kernel's receive timestamp and returns the observations over
//! the control channel.  The client ([`client`]) opens a session, measures RTT,
//! and is the [`pathsonde_core::ProbePath`] over which core's one runner
//! carries any [`pathsonde_core::Method`]'s plans, pacing the trains
//! ([`pacer`]).  No method logic and no loop over plans live here.

// Every `unsafe` block says why it is sound (`// SAFETY: ...`); CI denies warnings.
#![warn(clippy::undocumented_unsafe_blocks)]

pub mod allow;
pub mod auth;
pub mod capture;
pub mod client;
pub mod clock;
pub mod error;
pub mod framing;
pub mod hops;
pub mod host;
pub mod limits;
pub mod metrics;
pub mod pacer;
mod random;
pub mod rtt;
pub mod server;
pub mod server_stats;
pub mod session_auth;
pub mod target;
pub mod throughput;
pub mod udp;
pub mod udpst;
pub mod verdict;

pub use client::{Client, ClientConfig, MeasurementRun};
pub use error::{InputError, NetError, ProtocolError, Result, ServerError};
pub use rtt::RttSummary;
pub use server::{Server, ServerConfig, ServerHandle};
pub use server_stats::{ServerStats, StatsSnapshot};

/// This build's name and version (what client and server tell each other), and the optional protocol features it
/// speaks (appended messages an older peer would not know).
pub fn software() -> String {
    format!(
        "pathsonde {} (+{} +{})",
        env!("CARGO_PKG_VERSION"),
        pathsonde_wire::control::RECEIVER_DROPS_FEATURE,
        pathsonde_wire::control::FLOW_DROPS_FEATURE
    )
}
