//! A recorder of raw stamps: every observation a path reported, kept as it
//! came, for the archive's raw data and for tests that look inside a run.

use super::ProbePath;
use crate::observation::Observation;
use crate::plan::ProbePlan;

/// Wraps a path and keeps a copy of every observation it carried, in order.
#[derive(Debug, Clone)]
pub struct Recorder<P> {
    inner: P,
    observations: Vec<Observation>,
}

impl<P> Recorder<P> {
    pub fn new(inner: P) -> Self {
        Recorder {
            inner,
            observations: Vec::new(),
        }
    }

    /// What was carried so far, oldest first.
    pub fn observations(&self) -> &[Observation] {
        &self.observations
    }

    /// The wrapped path and everything recorded.
    pub fn into_parts(self) -> (P, Vec<Observation>) {
        (self.inner, self.observations)
    }

    pub fn inner(&self) -> &P {
        &self.inner
    }

    pub fn inner_mut(&mut self) -> &mut P {
        &mut self.inner
    }
}

impl<P: ProbePath> ProbePath for Recorder<P> {
    type Error = P::Error;

    fn carry(&mut self, plan: &ProbePlan, index: u32) -> Result<Observation, P::Error> {
        let obs = self.inner.carry(plan, index)?;
        self.observations.push(obs.clone());
        Ok(obs)
    }

    fn exhausted(&self) -> bool {
        self.inner.exhausted()
    }
}
