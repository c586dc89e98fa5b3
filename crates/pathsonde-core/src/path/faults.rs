//! A careless network or runner: records lost, duplicated and shuffled.

use super::ProbePath;
use crate::observation::Observation;
use crate::plan::ProbePlan;
use crate::rng::SplitMix64;

/// What a [`FaultInjector`] does to every observation, seeded so a test
/// sees the same faults every run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Faults {
    /// Share of received packets turned into losses (0 to 1).
    pub loss: f64,
    /// Records duplicated per observation: this share of its packets, at
    /// least one when non-zero.
    pub duplicate: f64,
    /// Shuffle the order of the records.
    pub shuffle: bool,
    pub seed: u64,
}

impl Faults {
    /// Records shuffled and about 2 % of them duplicated (at least one), as a
    /// careless runner might report them; nothing lost.
    pub fn scrambled(seed: u64) -> Self {
        Faults {
            loss: 0.0,
            duplicate: 0.02,
            shuffle: true,
            seed,
        }
    }
}

/// Wraps a path and damages what it reports: methods must survive records
/// in any order, repeated, or missing.
#[derive(Debug, Clone)]
pub struct FaultInjector<P> {
    inner: P,
    faults: Faults,
}

impl<P> FaultInjector<P> {
    pub fn new(inner: P, faults: Faults) -> Self {
        FaultInjector { inner, faults }
    }

    fn damage(&self, obs: &mut Observation, index: u32) {
        let f = &self.faults;
        let packets = &mut obs.packets;
        if packets.is_empty() {
            return;
        }
        let mut rng = SplitMix64::new(f.seed ^ u64::from(index).wrapping_mul(0xA5A5));
        if f.loss > 0.0 {
            for p in packets.iter_mut() {
                if rng.next_f64() < f.loss {
                    p.received = None;
                }
            }
        }
        if f.shuffle {
            for i in (1..packets.len()).rev() {
                let j = (rng.next_u64() % (i as u64 + 1)) as usize;
                packets.swap(i, j);
            }
        }
        if f.duplicate > 0.0 {
            // The small epsilon keeps 2 % of 150 at 3, not 2.999….
            let dups = ((packets.len() as f64 * f.duplicate + 1e-9) as usize).max(1);
            for _ in 0..dups {
                let j = (rng.next_u64() % packets.len() as u64) as usize;
                packets.push(packets[j]);
            }
        }
    }
}

impl<P: ProbePath> ProbePath for FaultInjector<P> {
    type Error = P::Error;

    fn carry(&mut self, plan: &ProbePlan, index: u32) -> Result<Observation, P::Error> {
        let mut obs = self.inner.carry(plan, index)?;
        self.damage(&mut obs, index);
        Ok(obs)
    }

    fn exhausted(&self) -> bool {
        self.inner.exhausted()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synthetic::{FluidPath, FluidPathConfig};
    use crate::units::{BitRate, Bytes, DurationNs};
    use crate::TrainSpec;

    fn plan() -> ProbePlan {
        ProbePlan::Train(TrainSpec {
            packet_size: Bytes(1500),
            packets_per_car: 1,
            cars: 200,
            rate: BitRate::from_mbps(100.0),
            idle_before: DurationNs::ZERO,
        })
    }

    fn path(faults: Faults) -> FaultInjector<FluidPath> {
        let cfg = FluidPathConfig::new(BitRate::from_mbps(300.0), BitRate::ZERO);
        FaultInjector::new(FluidPath::new(cfg), faults)
    }

    #[test]
    fn scrambling_shuffles_and_duplicates_but_loses_nothing() {
        let obs = path(Faults::scrambled(7)).carry(&plan(), 0).unwrap();
        assert_eq!(obs.packets.len(), 204);
        assert!(obs.packets.iter().all(|p| p.received.is_some()));
        assert!(obs.packets.windows(2).any(|w| w[0].seq > w[1].seq));
        let mut seqs: Vec<u32> = obs.packets.iter().map(|p| p.seq).collect();
        seqs.sort_unstable();
        seqs.dedup();
        assert_eq!(seqs.len(), 200);
    }

    #[test]
    fn loss_takes_about_its_share_and_keeps_the_order() {
        let faults = Faults {
            loss: 0.25,
            duplicate: 0.0,
            shuffle: false,
            seed: 3,
        };
        let obs = path(faults).carry(&plan(), 0).unwrap();
        let lost = obs.packets.iter().filter(|p| p.received.is_none()).count();
        assert!((30..=70).contains(&lost), "{lost} of 200 lost");
        assert!(obs.packets.windows(2).all(|w| w[0].seq < w[1].seq));
    }
}
