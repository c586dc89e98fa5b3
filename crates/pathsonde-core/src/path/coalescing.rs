//! A receiver that coalesces interrupts: arrivals are stamped when the
//! interrupt fires, not when the packet arrived.

use super::ProbePath;
use crate::observation::Observation;
use crate::plan::ProbePlan;
use crate::units::{DurationNs, TimeNs};

/// Wraps a path whose receiver stamps each arrival at the next multiple of
/// `period` on its own clock (an arrival exactly on a multiple keeps its
/// stamp), as a NIC that raises one interrupt per `period` does.  Methods
/// must detect this from the stamps alone; nothing tells them.
#[derive(Debug, Clone)]
pub struct Coalescing<P> {
    inner: P,
    period: DurationNs,
}

impl<P> Coalescing<P> {
    /// A zero or negative `period` stamps every packet as it arrives.
    pub fn new(inner: P, period: DurationNs) -> Self {
        Coalescing { inner, period }
    }

    /// `t` released at the next interrupt instant.
    fn release(&self, t: TimeNs) -> TimeNs {
        let q = self.period.ns();
        if q <= 0 {
            return t;
        }
        let ns = t.ns();
        let late = i64::from(ns.rem_euclid(q) != 0);
        TimeNs::from_ns(ns.div_euclid(q).saturating_add(late).saturating_mul(q))
    }
}

impl<P: ProbePath> ProbePath for Coalescing<P> {
    type Error = P::Error;

    fn carry(&mut self, plan: &ProbePlan, index: u32) -> Result<Observation, P::Error> {
        let mut obs = self.inner.carry(plan, index)?;
        for p in &mut obs.packets {
            p.received = p.received.map(|t| self.release(t));
        }
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
    use crate::units::{BitRate, Bytes};
    use crate::TrainSpec;

    #[test]
    fn arrivals_land_on_interrupt_instants_and_bunch() {
        let cfg = FluidPathConfig::new(BitRate::from_mbps(300.0), BitRate::ZERO);
        let mut p = Coalescing::new(FluidPath::new(cfg), DurationNs::from_us(125));
        let spec = TrainSpec {
            packet_size: Bytes(1500),
            packets_per_car: 1,
            cars: 100,
            rate: BitRate::from_mbps(200.0),
            idle_before: DurationNs::ZERO,
        };
        let obs = p.carry(&ProbePlan::Train(spec), 0).unwrap();
        let stamps: Vec<i64> = obs
            .packets
            .iter()
            .filter_map(|r| r.received.map(|t| t.ns()))
            .collect();
        assert!(stamps.iter().all(|t| t.rem_euclid(125_000) == 0));
        let distinct = stamps.windows(2).filter(|w| w[0] != w[1]).count();
        // 60 µs between packets at 200 Mb/s: about two packets per interrupt.
        assert!(
            distinct < stamps.len() * 2 / 3,
            "{distinct} of {}",
            stamps.len()
        );
        assert!(distinct > 0);
    }

    #[test]
    fn a_stamp_on_the_instant_stays_and_no_period_changes_nothing() {
        let c = Coalescing::new((), DurationNs::from_us(100));
        assert_eq!(c.release(TimeNs::from_ns(200_000)).ns(), 200_000);
        assert_eq!(c.release(TimeNs::from_ns(200_001)).ns(), 300_000);
        assert_eq!(c.release(TimeNs::from_ns(-1)).ns(), 0);
        let off = Coalescing::new((), DurationNs::ZERO);
        assert_eq!(off.release(TimeNs::from_ns(7)).ns(), 7);
    }
}
