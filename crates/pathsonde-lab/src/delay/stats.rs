//! What a delay line reports about itself: the scheduling class its threads
//! got and its counters ([`DelayStats`]), so the lab can tell a faithful
//! line from one that dropped, refused or ran late.

use super::histogram::HoldError;
use pathsonde_core::{Bytes, DurationNs};

/// Which scheduling class a relay thread got.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scheduling {
    /// Not known yet (the thread has not started).
    Pending,
    /// SCHED_FIFO at this priority, as asked.
    RealTime { priority: i32 },
    /// The kernel refused SCHED_FIFO; the thread runs at normal priority and
    /// delays can be late by milliseconds under load.
    Normal { reason: String },
}

/// Counters of one delay line.
#[derive(Debug, Clone, PartialEq)]
pub struct DelayStats {
    /// Packets and bytes written back into the TUN after their hold.
    pub packets: u64,
    pub bytes: Bytes,
    /// Packets dropped because the queue's byte budget was full.
    pub dropped_queue_full: u64,
    /// Packets the kernel refused on write-back (counted, then discarded).
    pub write_errors: u64,
    /// Packets in the queue now.
    pub queued: u64,
    /// Most bytes the queue held at once, and its budget.
    pub peak_queue_bytes: Bytes,
    pub queue_limit: Bytes,
    /// How late the releaser was, if any packet has been released.
    pub hold_error: Option<HoldError>,
    pub reader: Scheduling,
    pub releaser: Scheduling,
    /// The longest single write-back into the TUN: the kernel forwards the
    /// packet inside the write, so a long one means the forwarding path (not
    /// the relay's scheduling) held the releaser up.
    pub max_write: DurationNs,
    /// How early the releaser currently wakes to make up for its measured
    /// wake-up lateness (0 when `adaptive_lead` is off).
    pub release_lead: DurationNs,
    /// Packets the kernel dropped because the TUN's queue to the reader was
    /// full (the TUN's tx_dropped).  Filled by [`super::DelayLine::stop`] and
    /// [`super::DelayLine::stats_with_kernel`]; `None` from the cheap
    /// [`super::DelayLine::stats`].
    pub tun_dropped: Option<u64>,
    /// CPU time used by the two relay threads so far (sampled every 1024
    /// packets and whenever a thread goes idle).
    pub cpu: DurationNs,
    /// The first error that stopped a relay thread, if any.
    pub failure: Option<String>,
}

impl DelayStats {
    /// CPU time per relayed packet, if any were relayed.
    pub fn cpu_per_packet(&self) -> Option<DurationNs> {
        (self.packets > 0).then(|| DurationNs::from_ns(self.cpu.ns() / self.packets as i64))
    }

    /// True when the line has been faithful so far: nothing dropped, nothing
    /// refused, both threads real-time, no thread failure.
    pub fn is_clean(&self) -> bool {
        self.dropped_queue_full == 0
            && self.write_errors == 0
            && self.tun_dropped.unwrap_or(0) == 0
            && self.failure.is_none()
            && matches!(self.reader, Scheduling::RealTime { .. })
            && matches!(self.releaser, Scheduling::RealTime { .. })
    }
}
