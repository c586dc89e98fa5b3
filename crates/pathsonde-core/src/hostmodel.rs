//! The host model of Jin & Tierney, "System Capability Effects on Algorithms
//! for Network Bandwidth Measurement" (IMC 2003), as functions with units.
//!
//! * [`interrupt_interval`] — the interrupt interval I_time (section 3.1):
//!   `I_time = N · average_packet_size / line_speed`, the longest an
//!   interrupt may be delayed before `N` receive descriptors fill at line
//!   speed; also the spread of arrival stamps a coalescing receiver shows
//!   for a bunch of `N` packets.
//! * [`io_throughput`] — equation (2) (section 5): the I/O throughput a host
//!   can sustain from user memory to the NIC,
//!   `MemoryBandwidth / (MemoryClock / IOBusClock + 2)`.
//! * [`zero_copy_gain`] — the most a zero-copy stack can add (section 5):
//!   `2 · IOBus / (Memory + 2 · IOBus)`.
//! * [`coalescing_bunch`] — what the interrupt-coalescing settings
//!   (`ethtool -c`: rx-usecs, rx-frames) make a receiver see at a given
//!   packet size and line speed, via I_time.

use crate::units::{BitRate, Bytes, DurationNs};
use serde::{Deserialize, Serialize};
use std::fmt;

/// A clock frequency in hertz (memory bus, I/O bus, CPU).
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Hz(f64);

impl Hz {
    pub const fn from_hz(hz: f64) -> Self {
        Hz(hz)
    }
    pub fn from_mhz(mhz: f64) -> Self {
        Hz(mhz * 1e6)
    }
    pub const fn hz(self) -> f64 {
        self.0
    }
    pub fn mhz(self) -> f64 {
        self.0 / 1e6
    }
}

impl fmt::Display for Hz {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 >= 1e9 {
            write!(f, "{:.3} GHz", self.0 / 1e9)
        } else {
            write!(f, "{:.2} MHz", self.0 / 1e6)
        }
    }
}

/// I_time = N · average_packet_size / line_speed: how long `descriptors`
/// packets of `avg_packet` bytes take to arrive back to back at
/// `line_speed`.  With N = 1 it is the per-packet interrupt interval
/// (1500 bytes at 1 Gb/s: 12 µs, the paper's example).  `None` for a line
/// speed that is not positive.
pub(crate) fn interrupt_interval(
    descriptors: u32,
    avg_packet: Bytes,
    line_speed: BitRate,
) -> Option<DurationNs> {
    if !line_speed.is_positive() {
        return None;
    }
    let bits = descriptors as f64 * avg_packet.bits() as f64;
    Some(DurationNs::from_secs_f64(bits / line_speed.bps()))
}

/// Equation (2): I/O throughput = MemoryBandwidth / (MemoryClock / IOBusClock + 2).
///
/// Sending from a user buffer to the NIC costs two memory cycles for the
/// copy plus `MemoryClock / IOBusClock` memory cycles per I/O bus cycle of
/// the DMA.  `memory_bandwidth` is the raw memory bandwidth (twice the
/// memory *copy* bandwidth, as the paper counts it).  `None` if a clock is
/// not positive.
///
/// The paper's two examples (both on 32-bit/33 MHz PCI) are reproduced in
/// the tests: VIA 868 (288 MB/s, 133 MHz memory) → 384 Mb/s, which is the
/// paper's figure when the clock ratio is the whole number 4 (PC133 memory
/// runs at 133⅓ MHz = 4 × 33⅓ MHz PCI); VT400 (2 × 326 MB/s, 400 MHz) →
/// 369 Mb/s, which is 400 / 33 taken literally.
pub fn io_throughput(
    memory_bandwidth: BitRate,
    memory_clock: Hz,
    io_bus_clock: Hz,
) -> Option<BitRate> {
    if !(memory_clock.hz() > 0.0 && io_bus_clock.hz() > 0.0) {
        return None;
    }
    let cycles = memory_clock.hz() / io_bus_clock.hz() + 2.0;
    Some(BitRate::from_bps(memory_bandwidth.bps() / cycles))
}

/// The most a zero-copy stack can raise I/O throughput, as a fraction:
/// 2 · IOBus / (Memory + 2 · IOBus).  Zero copy saves the two memory cycles
/// of the user–kernel copy but never the DMA across the I/O bus, so it helps
/// less as the memory clock outgrows the I/O bus (66 MHz bus: 49.8 % at
/// 133 MHz memory, 24.8 % at 400 MHz).  `None` if a clock is not positive.
pub fn zero_copy_gain(memory_clock: Hz, io_bus_clock: Hz) -> Option<f64> {
    if !(memory_clock.hz() > 0.0 && io_bus_clock.hz() > 0.0) {
        return None;
    }
    let io2 = 2.0 * io_bus_clock.hz();
    Some(io2 / (memory_clock.hz() + io2))
}

/// What interrupt coalescing makes a receiver see for back-to-back packets
/// of one size at line speed.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CoalescingBunch {
    /// Time between interrupts (the bunch period): the earlier of rx-usecs
    /// and I_time(rx-frames), or the per-packet interval if neither delays.
    pub interval: DurationNs,
    /// Packets delivered per interrupt, which then carry nearly the same
    /// receive timestamp (at least 1).
    pub packets: u32,
}

/// Bunching a receiver shows under the coalescing settings `rx_usecs` and
/// `rx_frames` (`ethtool -c`; 0 or `None` means "not used") for
/// back-to-back `packet`-byte packets at `line_speed`.  The interrupt fires
/// when either limit is reached: after `rx_frames` packets, i.e. after
/// I_time(rx_frames), or `rx_usecs` after the first packet.  `None` when
/// the line speed is unknown.
pub fn coalescing_bunch(
    rx_usecs: Option<u32>,
    rx_frames: Option<u32>,
    packet: Bytes,
    line_speed: BitRate,
) -> Option<CoalescingBunch> {
    let per_packet = interrupt_interval(1, packet, line_speed)?;
    let by_frames = rx_frames
        .filter(|&f| f > 1)
        .and_then(|f| interrupt_interval(f, packet, line_speed));
    let by_usecs = rx_usecs
        .filter(|&u| u > 0)
        .map(|u| DurationNs::from_us(u as i64));
    let interval = match (by_frames, by_usecs) {
        (Some(a), Some(b)) => a.min(b),
        (Some(a), None) | (None, Some(a)) => a,
        (None, None) => per_packet,
    };
    let packets = if per_packet.ns() > 0 {
        (interval.ns() / per_packet.ns()).max(1) as u32
    } else {
        1
    };
    let packets = match rx_frames.filter(|&f| f > 0) {
        Some(f) => packets.min(f),
        None => packets,
    };
    Some(CoalescingBunch { interval, packets })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mbytes_per_s(mb: f64) -> BitRate {
        BitRate::from_bps(mb * 1e6 * 8.0)
    }

    #[test]
    fn interrupt_interval_is_12_us_per_1500_byte_packet_at_1_gbps() {
        // Section 3.1: "if every packet arriving on an 1 Gb/s NIC generates
        // an I/O interrupt, then the system will get interrupted every 12 µs".
        let t = interrupt_interval(1, Bytes(1500), BitRate::from_gbps(1.0)).unwrap();
        assert_eq!(t, DurationNs::from_us(12));
        // N descriptors fill N times later.
        let t = interrupt_interval(64, Bytes(1500), BitRate::from_gbps(1.0)).unwrap();
        assert_eq!(t, DurationNs::from_us(768));
        // A 1514-byte frame at 10 Gb/s: about 1.21 µs (section 6).
        let t = interrupt_interval(1, Bytes(1514), BitRate::from_gbps(10.0)).unwrap();
        assert_eq!(t.ns(), 1211);
        assert_eq!(interrupt_interval(1, Bytes(1500), BitRate::ZERO), None);
    }

    #[test]
    fn io_throughput_reproduces_via_868_and_vt400() {
        // VIA 868: 288 MB/s memory bandwidth, 133 MHz memory bus, 33 MHz PCI:
        // "a maximum 384 Mb/s (48 MB/s)".  PC133 is 133⅓ MHz = 4 × 33⅓ MHz.
        let via868 = io_throughput(
            mbytes_per_s(288.0),
            Hz::from_mhz(400.0 / 3.0),
            Hz::from_mhz(100.0 / 3.0),
        )
        .unwrap();
        assert!((via868.mbps() - 384.0).abs() < 0.5, "{}", via868.mbps());
        // VT400: 326 MB/s copy bandwidth = 652 MB/s memory bandwidth,
        // 400 MHz memory bus, 33 MHz PCI: "only 369 Mb/s".
        let vt400 = io_throughput(
            mbytes_per_s(2.0 * 326.0),
            Hz::from_mhz(400.0),
            Hz::from_mhz(33.0),
        )
        .unwrap();
        assert_eq!(vt400.mbps().round(), 369.0, "{}", vt400.mbps());
        // Section 5's worked cycles: 266 MHz memory on 66 MHz PCI → 6 cycles.
        let t = io_throughput(
            BitRate::from_mbps(600.0),
            Hz::from_mhz(264.0),
            Hz::from_mhz(66.0),
        )
        .unwrap();
        assert!((t.mbps() - 100.0).abs() < 1e-9);
        assert_eq!(
            io_throughput(
                BitRate::from_mbps(1.0),
                Hz::from_hz(0.0),
                Hz::from_mhz(33.0)
            ),
            None
        );
    }

    #[test]
    fn zero_copy_gain_is_49_8_and_24_8_percent() {
        let g = zero_copy_gain(Hz::from_mhz(133.0), Hz::from_mhz(66.0)).unwrap();
        assert_eq!((g * 1000.0).round() / 10.0, 49.8);
        let g = zero_copy_gain(Hz::from_mhz(400.0), Hz::from_mhz(66.0)).unwrap();
        assert_eq!((g * 1000.0).round() / 10.0, 24.8);
        assert_eq!(zero_copy_gain(Hz::from_mhz(400.0), Hz::from_hz(0.0)), None);
    }

    #[test]
    fn coalescing_bunch_from_rx_usecs_and_rx_frames() {
        let gig = BitRate::from_gbps(1.0);
        // No coalescing (rx-usecs 0, rx-frames 1): one packet per interrupt.
        let b = coalescing_bunch(Some(0), Some(1), Bytes(1500), gig).unwrap();
        assert_eq!(
            b,
            CoalescingBunch {
                interval: DurationNs::from_us(12),
                packets: 1
            }
        );
        // 125 µs timer: about 10 packets per bunch at 1 Gb/s.
        let b = coalescing_bunch(Some(125), None, Bytes(1500), gig).unwrap();
        assert_eq!(b.interval, DurationNs::from_us(125));
        assert_eq!(b.packets, 10);
        // rx-frames 8 fills first (96 µs < 125 µs).
        let b = coalescing_bunch(Some(125), Some(8), Bytes(1500), gig).unwrap();
        assert_eq!(
            b,
            CoalescingBunch {
                interval: DurationNs::from_us(96),
                packets: 8
            }
        );
        assert_eq!(
            coalescing_bunch(Some(125), None, Bytes(1500), BitRate::ZERO),
            None
        );
    }
}
