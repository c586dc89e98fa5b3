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

    /// The wrapped path and everything recorded.
    pub fn into_parts(self) -> (P, Vec<Observation>) {
        (self.inner, self.observations)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::methods::registry::{self, MethodSettings};
    use crate::runner::{self, Limits};
    use crate::synthetic::{FluidPath, FluidPathConfig};
    use crate::units::BitRate;

    #[test]
    fn keeps_every_observation_the_method_saw_in_order() {
        let cfg = FluidPathConfig::new(BitRate::from_mbps(300.0), BitRate::from_mbps(100.0));
        let mut path = Recorder::new(FluidPath::new(cfg));
        let settings = MethodSettings {
            max_rate: BitRate::from_mbps(1000.0),
            ..MethodSettings::default()
        };
        let mut m = registry::build(crate::method_name::MethodName::Fac2, &settings);
        let mut heard = Vec::new();
        let run = runner::run(m.as_mut(), &mut path, Limits::plans(50), &mut |o| {
            heard.push(o.clone())
        })
        .unwrap();
        let (_, kept) = path.into_parts();
        assert_eq!(kept.len() as u32, run.cost.trains);
        assert_eq!(kept, heard);
        assert!(kept.windows(2).all(|w| w[0].train < w[1].train));
    }
}
