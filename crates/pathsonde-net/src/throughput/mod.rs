//! Achievable throughput on a real path (issue 5; netest, Jin & Tierney
//! 2003): the maximum burst size ([`mbs`]), UDP and TCP flows with both
//! ends' reports ([`client`], [`server`], [`engine`]) and the kernel's
//! `TCP_INFO` ([`tcp_info`]).  The server charges every flow to the
//! session's limits ([`budget`]) and holds it to them while it runs
//! ([`gate`]).  The advice drawn from them is pure and lives in
//! `pathsonde_core::advice`.

pub mod budget;
pub mod client;
pub mod engine;
pub mod gate;
pub mod mbs;
pub mod measure;
pub(crate) mod server;
pub mod tcp_info;

pub use client::{run_flow, FlowResult};

/// How long a flow runs, as its spec asks.
pub(crate) fn duration(spec: &pathsonde_wire::flow::FlowSpec) -> std::time::Duration {
    std::time::Duration::from_millis(u64::from(spec.duration_ms))
}

/// A flow's reporting interval, as its spec asks.
pub(crate) fn interval(spec: &pathsonde_wire::flow::FlowSpec) -> std::time::Duration {
    std::time::Duration::from_millis(u64::from(spec.interval_ms))
}
pub use mbs::{measure_mbs, MbsMeasurement};

/// Extra time a receiver waits beyond the flow's duration for the last data
/// (both ends, and the session's byte budget, count it: kept here, above
/// them all).
pub const GRACE: std::time::Duration = std::time::Duration::from_secs(5);
