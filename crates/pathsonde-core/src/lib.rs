//! pathsonde-core: the sans-IO heart of pathsonde.
//!
//! Units, probe plans, observations, estimates, the [`Method`] trait, the
//! measurement methods themselves, the [`ProbePath`] they run over and the
//! one loop ([`runner::run`]) that carries their plans.  Nothing here opens a socket or reads a
//! clock, so every method runs unchanged on a real path, an emulated lab path
//! and a simulated path, and is tested with exact synthetic observations.

// Nothing here needs `unsafe`; forbidding it keeps it that way.
#![forbid(unsafe_code)]

pub mod accuracy;
pub mod advice;
pub mod capacity;
pub mod dispersion;
pub mod estimate;
pub mod hostmodel;
pub mod mbs;
pub mod method;
pub mod method_name;
pub mod methods;
pub mod observation;
pub mod path;
pub mod plan;
pub mod rng;
pub mod runner;
pub mod stats;
// Test paths only (the `testing` feature; this crate's own tests always).
#[cfg(any(test, feature = "testing"))]
pub mod synthetic;
pub mod traffic;
pub mod units;
pub mod verdict;

pub use estimate::{Coalescing, Estimate, ProbeCost, RateSpread, Stopped, TrainRecord};
pub use method::Method;
pub use observation::{ClockInfo, ClockSource, Observation, PacketRecord};
pub use path::ProbePath;
pub use plan::{CarSlot, ProbePlan, ScheduleSpec, TrainSpec};
pub use units::{BitRate, Bytes, DurationNs, TimeNs};
