//! The capacity guard: what the relay carried loss-free when measured on
//! this class of machine, and the check that refuses a request for more
//! (an overloaded line drops or bunches packets, which would corrupt the
//! lab's ground truth silently).

use super::DelayConfig;
use crate::error::{LabError, Result};

/// What the relay carries without loss on this class of machine (2 vCPU,
/// kernel 6.18, Firecracker guest), in 1500-byte packets.
///
/// Measured with
/// `cargo run --release -p pathsonde-lab --example delay_bench` (table in
/// `docs/lab-delay.md`).  The cost is per packet, so the guard compares
/// packet rates: smaller packets at the same bit rate are refused sooner.
pub struct Sustained;

impl Sustained {
    /// Bit rate of 1500-byte IP packets carried with no loss at every delay
    /// from 1 to 100 ms, with the sender and the relay sharing the 2 cores.
    pub const MBPS_1500: f64 = 500.0;
    /// The same figure as packets per second: the quantity the guard checks.
    pub const PACKETS_PER_SEC: f64 = Self::MBPS_1500 * 1e6 / (1500.0 * 8.0);
}

impl DelayConfig {
    /// Refuses a packet rate above [`Sustained::PACKETS_PER_SEC`].
    pub fn check_capacity(&self) -> Result<()> {
        let pps = self.rate.bps() / (self.packet_size.get() as f64 * 8.0);
        if pps > Sustained::PACKETS_PER_SEC * 1.0001 {
            let equiv = Sustained::PACKETS_PER_SEC * self.packet_size.get() as f64 * 8.0 / 1e6;
            return Err(LabError::Capability(format!(
                "delay line sustains about {:.0} Mb/s of 1500-byte packets loss-free here \
                 ({:.0} packets/s{}); asked for {:.0} Mb/s of {}-byte packets ({:.0} packets/s)",
                Sustained::MBPS_1500,
                Sustained::PACKETS_PER_SEC,
                if self.packet_size.get() == 1500 {
                    String::new()
                } else {
                    format!(
                        ", i.e. {equiv:.0} Mb/s of {}-byte packets",
                        self.packet_size.get()
                    )
                },
                self.rate.mbps(),
                self.packet_size.get(),
                pps
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pathsonde_core::{BitRate, Bytes, DurationNs};

    fn cfg(ms: i64, mbps: f64) -> DelayConfig {
        DelayConfig::new("to-snd", DurationNs::from_ms(ms), BitRate::from_mbps(mbps))
    }

    #[test]
    fn rate_above_sustained_is_refused_clearly() {
        let e = cfg(10, Sustained::MBPS_1500 * 2.0).validate().unwrap_err();
        let msg = e.to_string();
        assert!(matches!(e, LabError::Capability(_)), "{msg}");
        assert!(msg.contains("sustains about"), "{msg}");
        assert!(msg.contains("asked for"), "{msg}");
        cfg(10, Sustained::MBPS_1500).validate().unwrap();
        // Small packets cost as much each: the same bit rate is refused.
        let mut small = cfg(10, Sustained::MBPS_1500 / 2.0);
        small.packet_size = Bytes::new(200);
        let e = small.validate().unwrap_err();
        assert!(matches!(e, LabError::Capability(_)), "{e}");
    }
}
