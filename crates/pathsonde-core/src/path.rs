//! The one abstraction every method runs over: a path that carries a probe
//! plan and reports what came back.
//!
//! A [`ProbePath`] is implemented by the real client (pathsonde-net), the
//! packet simulator (pathsonde-sim), the synthetic fluid path
//! ([`crate::synthetic::FluidPath`]) and the method tests' paths; the lab
//! reaches it through the real client.  [`crate::runner::run`] is the only
//! loop that feeds a method's plans to a path.
//!
//! What is special about a receiver or a careless network is not a flag of
//! each path but a wrapper around any path, in the spirit of smoltcp's
//! `phy` middleware:
//! - [`Coalescing`]: the receiver stamps arrivals at interrupt instants;
//! - [`FaultInjector`]: records lost, duplicated and shuffled;
//! - [`Recorder`]: keeps every observation's raw stamps;
//! - [`HostModel`]: hosts that cannot keep up (a sender's packet-rate
//!   ceiling and late wake-ups, a receiver that drops, noisy stamps).

mod coalescing;
mod faults;
mod host_model;
mod recorder;

pub use coalescing::Coalescing;
pub use faults::{FaultInjector, Faults};
pub use host_model::{HostLimits, HostModel};
pub use recorder::Recorder;

use crate::observation::Observation;
use crate::plan::ProbePlan;

/// Something that sends a probe plan and observes it: a socket pair, a
/// simulator, a model.
///
/// The runner never hands a path [`ProbePlan::Done`], and checks every
/// schedule ([`crate::ScheduleSpec::check`]) before it is carried; a path
/// may still refuse a plan it cannot carry (a server's limit), with its own
/// error.
pub trait ProbePath {
    /// Why a plan could not be carried (a socket error, a refused plan).
    type Error;

    /// Carries one plan; `index` is the runner's number for it within this
    /// run, from 0 (a path may number its probes its own way).
    fn carry(&mut self, plan: &ProbePlan, index: u32) -> Result<Observation, Self::Error>;

    /// Whether the path can carry nothing more (a simulation past its end).
    /// The runner asks after every observation and stops with the method's
    /// answer so far.
    fn exhausted(&self) -> bool {
        false
    }
}

impl<P: ProbePath + ?Sized> ProbePath for &mut P {
    type Error = P::Error;

    fn carry(&mut self, plan: &ProbePlan, index: u32) -> Result<Observation, Self::Error> {
        (**self).carry(plan, index)
    }

    fn exhausted(&self) -> bool {
        (**self).exhausted()
    }
}
