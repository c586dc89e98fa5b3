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
mod nic;
mod queue;
pub mod scenario;
mod stream;
pub mod summary;
mod tcp;
pub mod time;

pub use driver::{run_method, run_tcp, MethodRun, MethodSample, TcpRun};
pub use engine::{LinkStats, Sim, SimError};
pub use icim::IcimResult;
pub use scenario::{Scenario, ScenarioError};
pub use stream::StreamStamp;
pub use tcp::TcpStats;
