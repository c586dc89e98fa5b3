//! The interface every measurement method implements.

use crate::estimate::Estimate;
use crate::observation::Observation;
use crate::plan::ProbePlan;

/// A measurement method as pure logic: it decides what to send and reads what
/// came back, and never touches a socket or a clock.  The same value runs on a
/// real path, a lab path and a simulated path.
///
/// A runner loops: `next_plan`, carry the plan, `observe` the result, until
/// the plan is [`ProbePlan::Done`]; then it reads `estimate`.  A runner that
/// must stop early (a limit, an error) may read `estimate` at any time: a
/// method answers with the best it has, or `None`.
pub trait Method {
    /// Short name used in reports and JSON (`fac2`, `slops`, ...).
    fn name(&self) -> &'static str;
    /// What to send next.
    fn next_plan(&mut self) -> ProbePlan;
    /// What came back from the last plan.
    fn observe(&mut self, obs: &Observation);
    /// The current answer.
    fn estimate(&self) -> Option<Estimate>;
    /// What the method noticed so far.  An estimate carries these too; this
    /// is how a runner says *why* when [`Method::estimate`] is `None`.
    fn notes(&self) -> Vec<String> {
        Vec::new()
    }
    /// How far the method is toward stopping, in [0, 1], if it can tell
    /// (a progress bar's ETA reads it); `None` when it cannot, so a runner
    /// shows activity rather than a made-up fraction.  Roughly linear in the
    /// probes still to send, never 1 before the method is done.
    fn progress(&self) -> Option<f64> {
        None
    }
}
