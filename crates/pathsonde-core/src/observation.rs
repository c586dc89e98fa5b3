//! What the path reports back about a probe.

use crate::plan::{ScheduleSpec, TrainSpec};
use crate::units::{Bytes, DurationNs, TimeNs};
use serde::{Deserialize, Serialize};

/// Which clock took a set of timestamps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClockSource {
    /// The NIC's hardware clock (`SO_TIMESTAMPING` raw hardware stamps).
    Hardware,
    /// The kernel's software stamp, taken as the packet entered or left the stack.
    KernelSoftware,
    /// The program read the clock itself just before sending or after receiving.
    UserSpace,
    /// Exact times from a model (simulator or synthetic test path).
    Simulated,
}

impl ClockSource {
    pub fn describe(self) -> &'static str {
        match self {
            ClockSource::Hardware => "NIC hardware clock",
            ClockSource::KernelSoftware => "kernel software timestamp",
            ClockSource::UserSpace => "user-space clock read",
            ClockSource::Simulated => "simulated clock",
        }
    }
}

/// A clock and the finest step it can show.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClockInfo {
    pub source: ClockSource,
    /// Smallest step between two distinct readings (not the cost of a reading).
    pub resolution: DurationNs,
}

/// One probe packet's fate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PacketRecord {
    /// Position in the train, from 0.
    pub seq: u32,
    /// Which car of the train it rode in, from 0.
    pub car: u32,
    /// IP datagram size.
    pub size: Bytes,
    /// When it left, on the sender's clock.
    pub sent: TimeNs,
    /// When it arrived, on the receiver's clock; `None` if lost.
    pub received: Option<TimeNs>,
}

/// Everything known about one executed train.
///
/// Send and receive stamps come from different clocks (possibly different
/// hosts): differences within one side are meaningful, differences across sides
/// carry an unknown offset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Observation {
    /// The runner's number for this train, from 0.
    pub train: u32,
    /// The plan the runner was asked to carry (for a schedule, its
    /// constant-rate summary).
    pub spec: TrainSpec,
    /// For a [`crate::ProbePlan::Schedule`], the schedule itself (`spec` is
    /// then its [`ScheduleSpec::summary`]); `None` for a constant-rate train.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<ScheduleSpec>,
    /// One record per packet sent, in sequence order.
    pub packets: Vec<PacketRecord>,
    pub send_clock: ClockInfo,
    pub recv_clock: ClockInfo,
    /// Packets of this train the receiving *host* dropped itself (its socket
    /// overflowed, its stack ran out of room), as the receiver counted them;
    /// `None` when the receiver cannot tell.  These losses are the host's,
    /// not the path's: the host verdict ([`crate::verdict::evidence`]) keeps
    /// them apart from the path's own loss.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receiver_drops: Option<u64>,
}

impl Observation {
    pub fn sent_packets(&self) -> u64 {
        self.packets.len() as u64
    }
    pub fn received_packets(&self) -> u64 {
        self.packets.iter().filter(|p| p.received.is_some()).count() as u64
    }
    pub fn lost_packets(&self) -> u64 {
        self.sent_packets() - self.received_packets()
    }
    pub fn sent_bytes(&self) -> Bytes {
        self.packets.iter().map(|p| p.size).sum()
    }
    /// Fraction of sent packets that did not arrive (0 when nothing was sent).
    pub fn loss_fraction(&self) -> f64 {
        if self.packets.is_empty() {
            0.0
        } else {
            self.lost_packets() as f64 / self.sent_packets() as f64
        }
    }
    /// First send to last send, on the sender's clock.
    pub fn send_span(&self) -> DurationNs {
        let first = self.packets.iter().map(|p| p.sent).min();
        let last = self.packets.iter().map(|p| p.sent).max();
        match (first, last) {
            (Some(a), Some(b)) => b.since(a),
            _ => DurationNs::ZERO,
        }
    }
}
