//! pathsonde-sim: a fast, deterministic packet-level simulator of 1–100 Gb/s
//! paths, with coalescing NICs, cross traffic and TCP Reno, that runs any
//! pathsonde-core [`Method`](pathsonde_core::Method) beside exact ground
//! truth, and ICIM inside its TCP sender.
//!
//! The simulator is a [`pathsonde_core::ProbePath`] to core's one runner
//! (`driver`), and scores estimates with core's `accuracy` (`summary`).
//! It must not open a socket, read a clock or draw OS entropy: a run is a
//! function of its scenario and seed.  `docs/sim.md` describes the model and every number
//! the reports print.

// Nothing here needs `unsafe`; forbidding it keeps it that way.
#![forbid(unsafe_code)]

pub mod bench;
pub mod driver;
mod engine;
pub mod icim;
pub mod plan;
pub mod scenario;
pub mod summary;
pub mod time;

pub use driver::{run_method, run_tcp, MethodRun, MethodSample, TcpRun};
pub use engine::{LinkStats, Sim, SimError, StreamStamp, TcpStats};
pub use icim::IcimResult;
pub use scenario::{Scenario, ScenarioError};
