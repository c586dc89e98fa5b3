//! What the lab asks of one delay line ([`DelayConfig`]), its limits and
//! defaults, the shape checks and the queue's byte budget.  The capacity
//! guard (what the relay can carry) is apart, in [`super::capacity`],
//! because its figures come from a measurement, not from the request.

use crate::error::{LabError, Result};
use pathsonde_core::{BitRate, Bytes, DurationNs};

/// The shortest delay the line adds.  Below about 1 ms the wake-up and
/// forwarding cost (tens of µs) is no longer small beside the delay.
pub const MIN_DELAY: DurationNs = DurationNs::from_ms(1);
/// The longest delay the line adds; the queue holds rate × delay bytes, so
/// this also bounds its memory (see [`DelayConfig::queue_limit_bytes`]).
pub const MAX_DELAY: DurationNs = DurationNs::from_ms(100);

/// Subtracted from the hold for the part of the added delay that the relay's
/// own clock cannot see: the time from the packet entering the TUN to the
/// reader's stamp (its wake-up), plus the write-back's forwarding.  Measured
/// as median(end-to-end delay − D) − median(relay's own hold error) with
/// this at zero (`delay_bench --fixed-us 0`); see `docs/lab-delay.md`.
///
/// The releaser's own wake-up lateness (20–35 µs here, even under
/// SCHED_FIFO) is not in this constant: the releaser measures it on every
/// packet and wakes that much earlier (see [`super::DelayStats::release_lead`]).
pub const DEFAULT_FIXED_CORRECTION: DurationNs = DurationNs::from_us(6);
/// Bound on the releaser's lead, so a stall (a late wake of milliseconds)
/// cannot drag every later packet early.
pub const MAX_RELEASE_LEAD: DurationNs = DurationNs::from_us(100);

/// Default TUN name, routing table and SCHED_FIFO priority.
pub const DEFAULT_TUN: &str = "dly0";
pub const DEFAULT_TABLE: u32 = 100;
pub const DEFAULT_RT_PRIORITY: i32 = 50;

/// Per-packet bookkeeping charged against the queue's byte budget, so that a
/// flood of tiny packets is bounded too.
pub(super) const ENTRY_OVERHEAD: usize = 64;

/// What the lab asks of one delay line.
#[derive(Debug, Clone, PartialEq)]
pub struct DelayConfig {
    /// Packets arriving on this interface (in the line's namespace) are
    /// delayed, e.g. `"to-snd"`.  Packets addressed to the router itself are
    /// not (the `local` table is consulted before the rule).
    pub from_iface: String,
    /// One-way delay to add, 1–100 ms.
    pub delay: DurationNs,
    /// The most the lab will push through the line; checked against
    /// [`super::Sustained`] and used to size the queue.
    pub rate: BitRate,
    /// Typical IP packet size of that traffic (1500 for full-size frames);
    /// the relay's cost is per packet.
    pub packet_size: Bytes,
    /// Name of the TUN device to create; unique within the namespace.
    pub tun_name: String,
    /// Policy-routing table for the rule; unique within the namespace.
    pub table: u32,
    /// MTU of the TUN: must be at least the links' MTU, or large packets are
    /// fragmented or refused with ICMP "fragmentation needed".
    pub mtu: u32,
    /// SCHED_FIFO priority for the relay threads (1–99).
    pub rt_priority: i32,
    /// Subtracted from the hold so that the end-to-end delay is centred on
    /// `delay` (see [`DEFAULT_FIXED_CORRECTION`]).
    pub fixed_correction: DurationNs,
    /// Wake the releaser early by its measured wake-up lateness (on by
    /// default; off only to measure the raw lateness).
    pub adaptive_lead: bool,
}

impl DelayConfig {
    /// A line delaying packets that arrive on `from_iface` by `delay`, for
    /// traffic of up to `rate` in 1500-byte packets; other fields default.
    pub fn new(from_iface: &str, delay: DurationNs, rate: BitRate) -> Self {
        DelayConfig {
            from_iface: from_iface.to_string(),
            delay,
            rate,
            packet_size: Bytes::new(1500),
            tun_name: DEFAULT_TUN.to_string(),
            table: DEFAULT_TABLE,
            mtu: 1500,
            rt_priority: DEFAULT_RT_PRIORITY,
            fixed_correction: DEFAULT_FIXED_CORRECTION,
            adaptive_lead: true,
        }
    }

    /// Checks the request against what the relay can do: delay in range,
    /// rate within the measured sustained packet rate, names valid.
    pub fn validate(&self) -> Result<()> {
        self.validate_shape()?;
        self.check_capacity()
    }

    /// Everything [`Self::validate`] checks except the capacity guard.
    pub(super) fn validate_shape(&self) -> Result<()> {
        if self.delay < MIN_DELAY || self.delay > MAX_DELAY {
            return Err(LabError::Spec(format!(
                "delay line: a one-way delay of {} is outside {}–{} ms (omit the delay line for no delay)",
                self.delay,
                MIN_DELAY.ns() / 1_000_000,
                MAX_DELAY.ns() / 1_000_000
            )));
        }
        if self.rate.bps().is_nan() || self.rate.bps() <= 0.0 || !self.rate.bps().is_finite() {
            return Err(LabError::Spec(format!(
                "delay line: the rate to carry must be positive, not {}",
                self.rate
            )));
        }
        if self.packet_size.get() < 28 || self.packet_size.get() > u64::from(self.mtu) {
            return Err(LabError::Spec(format!(
                "delay line: packet size {} must be 28 bytes to the MTU ({})",
                self.packet_size, self.mtu
            )));
        }
        if self.tun_name.is_empty()
            || self.tun_name.len() >= libc::IFNAMSIZ
            || !self
                .tun_name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
        {
            return Err(LabError::Spec(format!(
                "delay line: bad TUN name {:?} (1–15 characters, letters, digits, - _ .)",
                self.tun_name
            )));
        }
        if self.from_iface.is_empty() || self.from_iface == self.tun_name {
            return Err(LabError::Spec(format!(
                "delay line: bad input interface {:?}",
                self.from_iface
            )));
        }
        if self.table == 0 || self.table >= 252 && self.table <= 255 {
            return Err(LabError::Spec(format!(
                "delay line: table {} is reserved",
                self.table
            )));
        }
        if !(1..=99).contains(&self.rt_priority) {
            return Err(LabError::Spec(format!(
                "delay line: SCHED_FIFO priority {} outside 1–99",
                self.rt_priority
            )));
        }
        if self.fixed_correction.ns() < 0 || self.fixed_correction.ns() * 2 >= self.delay.ns() {
            return Err(LabError::Spec(format!(
                "delay line: fixed correction {} must be ≥ 0 and below half the delay",
                self.fixed_correction
            )));
        }
        Ok(())
    }

    /// The hold the relay aims for on its own clock: the delay less the part
    /// it cannot see.
    pub fn target_hold(&self) -> DurationNs {
        self.delay - self.fixed_correction
    }

    /// Byte budget of the queue: rate × (delay × 1.5 + 250 ms), plus room for
    /// 256 full packets.  The 250 ms absorbs the catch-up burst of a paced
    /// sender after the whole VM stalls (100–140 ms stalls were seen here,
    /// see `docs/lab-delay.md`); a sustained overload is dropped and
    /// counted, never stored without bound (800 Mb/s × 100 ms: 42 MB).
    pub fn queue_limit_bytes(&self) -> usize {
        let span = self.delay.secs_f64() * 1.5 + 0.250;
        let per_pkt = self.packet_size.get() as f64 + ENTRY_OVERHEAD as f64;
        let pkts = self.rate.bps() / (self.packet_size.get() as f64 * 8.0) * span;
        (pkts * per_pkt) as usize + 256 * (self.mtu as usize + ENTRY_OVERHEAD)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(ms: i64, mbps: f64) -> DelayConfig {
        DelayConfig::new("to-snd", DurationNs::from_ms(ms), BitRate::from_mbps(mbps))
    }

    #[test]
    fn delay_outside_range_is_refused() {
        for ms in [0, 101, -1] {
            let e = cfg(ms, 100.0).validate().unwrap_err();
            assert!(matches!(e, LabError::Spec(_)), "{e}");
            assert!(e.to_string().contains("outside"), "{e}");
        }
        for ms in [1, 10, 100] {
            cfg(ms, 100.0).validate().unwrap();
        }
    }

    #[test]
    fn queue_budget_covers_rate_times_delay() {
        let c = cfg(100, 500.0);
        let need = 500e6 / 8.0 * (0.1 + 0.15);
        assert!(c.queue_limit_bytes() as f64 > need * 1.4);
        assert!((c.queue_limit_bytes() as f64) < need * 2.5);
    }
}
