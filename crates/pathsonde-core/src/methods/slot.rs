//! The plan a method has handed out and not yet seen observed.
//!
//! Every method answers `next_plan` with the same plan until it is
//! observed (a runner may ask twice), ignores an observation it did not ask
//! for or one after it finished, and answers `Done` once finished.  This is
//! that bookkeeping, once, with the tag each method keeps beside a plan to
//! know what its observation answers (a stage, a target rate).

use crate::plan::ProbePlan;

#[derive(Debug, Clone)]
pub(crate) struct PlanSlot<T> {
    pending: Option<(ProbePlan, T)>,
    done: bool,
}

impl<T> Default for PlanSlot<T> {
    fn default() -> Self {
        PlanSlot {
            pending: None,
            done: false,
        }
    }
}

impl<T> PlanSlot<T> {
    /// `Done` once finished, else the plan still waiting for its
    /// observation; `None` when the method should make a new plan.
    pub fn again(&self) -> Option<ProbePlan> {
        if self.done {
            return Some(ProbePlan::Done);
        }
        self.pending.as_ref().map(|(p, _)| p.clone())
    }

    /// Remembers `plan` (with `tag`) as handed out, and returns it.
    pub(crate) fn hand_out(&mut self, plan: ProbePlan, tag: T) -> ProbePlan {
        self.pending = Some((plan.clone(), tag));
        plan
    }

    /// The tag of the plan an observation answers; `None` when the method
    /// has finished or asked for nothing (the observation is then ignored).
    pub fn take(&mut self) -> Option<T> {
        if self.done {
            return None;
        }
        self.pending.take().map(|(_, tag)| tag)
    }

    /// No more plans: `Done` from now on.
    pub fn finish(&mut self) {
        self.done = true;
    }

    pub(crate) fn is_done(&self) -> bool {
        self.done
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_is_repeated_until_observed_and_done_is_final() {
        let mut s = PlanSlot::<u8>::default();
        assert_eq!(s.again(), None);
        assert_eq!(s.take(), None, "an unsolicited observation is ignored");
        let p = s.hand_out(ProbePlan::Done, 7);
        assert_eq!(s.again(), Some(p));
        assert_eq!(s.take(), Some(7));
        assert_eq!(s.take(), None);
        s.hand_out(ProbePlan::Done, 8);
        s.finish();
        assert_eq!(s.again(), Some(ProbePlan::Done));
        assert_eq!(s.take(), None, "nothing is read after the end");
        assert!(s.is_done());
    }
}
