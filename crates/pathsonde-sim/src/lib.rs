//! pathsonde-sim: a fast, deterministic packet-level simulator of 1–100 Gb/s
//! paths, with coalescing NICs, cross traffic and TCP Reno, that runs any
//! pathsonde-core [`Method`](pathsonde_core::Method) beside exact ground
//! truth, and ICIM inside its TCP sender.
//!
//! No sockets, no clocks, no OS entropy: a run is a function of its
//! scenario and seed.  `docs/sim.md` describes the model and every number
//! the reports print.

pub mod bench;
pub mod driver;
mod engine;
pub mod icim;
pub mod scenario;
pub mod summary;
pub mod time;

pub use driver::{run_method, run_tcp, MethodRun, MethodSample, TcpRun};
pub use engine::{LinkStats, Sim, SimError, StreamStamp, TcpStats};
pub use icim::IcimResult;
pub use scenario::{Scenario, ScenarioError};
