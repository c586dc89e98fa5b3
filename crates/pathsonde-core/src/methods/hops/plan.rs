//! What the `hops` method asks a path to carry and what comes back: trains
//! whose packets each carry their own TTL, and the ICMP answers routers send
//! for the packets whose TTL ran out at them.
//!
//! These are separate from [`crate::ProbePlan`] / [`crate::Observation`]
//! because the end-to-end types have one receiver stamp per packet, while a
//! hop-by-hop probe is answered by many routers (one answer per router per
//! marker packet, or none when the router keeps quiet).

use crate::observation::ClockInfo;
use crate::units::{BitRate, Bytes, DurationNs, TimeNs};
use serde::{Deserialize, Serialize};
use std::net::IpAddr;

/// The part of a recursive packet train a packet belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// A leading marker: its TTL runs out at hop `ttl`.
    Head,
    /// The load in the middle of the train; its TTL lets it reach the far end.
    Load,
    /// A trailing marker: its TTL runs out at hop `ttl`.
    Tail,
}

/// One packet of a hop train, in sending order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct HopPacket {
    /// Position in the train, from 0.
    pub seq: u32,
    pub role: Role,
    /// The IP TTL (IPv6 hop limit) the packet leaves with.
    pub ttl: u8,
    /// IP datagram size (IP and UDP headers included).
    pub size: Bytes,
    /// When it should leave, after the train's start.
    pub offset: DurationNs,
}

/// A recursive packet train (pathneck's shape): `markers` head packets with
/// TTL 1, 2, …, `markers`, then `load_packets` load packets, then `markers`
/// tail packets with TTL `markers`, …, 2, 1.  Router `k` drops head `k` and
/// tail `k` and (rate limit permitting) answers each with ICMP time
/// exceeded; the time between the two answers is how long the train took to
/// pass the link into router `k`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct HopTrainSpec {
    /// Head (and tail) marker packets: the highest TTL measured.
    pub markers: u8,
    /// Size of each marker packet.
    pub marker_size: Bytes,
    pub load_packets: u32,
    pub load_size: Bytes,
    /// TTL of the load: high enough to reach the far end.
    pub load_ttl: u8,
    /// Rate at which the load leaves; `None` sends it back to back at the
    /// sender's line rate (pathneck's default).
    pub load_rate: Option<BitRate>,
    /// Keep the path idle this long before the train, so that routers'
    /// ICMP rate limits refill between trains.
    #[serde(default)]
    pub idle_before: DurationNs,
}

impl HopTrainSpec {
    /// Pathneck's default train: 30 markers of 60 bytes each side, 60 load
    /// packets of 500 bytes (33.6 KB in all), load back to back.
    pub fn pathneck_default() -> HopTrainSpec {
        HopTrainSpec {
            markers: 30,
            marker_size: Bytes(60),
            load_packets: 60,
            load_size: Bytes(500),
            load_ttl: 255,
            load_rate: None,
            idle_before: DurationNs::ZERO,
        }
    }

    pub fn total_packets(&self) -> u32 {
        2 * u32::from(self.markers) + self.load_packets
    }

    pub fn total_bytes(&self) -> Bytes {
        Bytes(
            2 * u64::from(self.markers) * self.marker_size.get()
                + u64::from(self.load_packets) * self.load_size.get(),
        )
    }

    /// The packets in sending order.  Markers are given offset zero (back to
    /// back) before the load and the load's end after it; paced load packets
    /// are `load_size / load_rate` apart.
    pub fn packets(&self) -> Vec<HopPacket> {
        let mut out = Vec::with_capacity(self.total_packets() as usize);
        let mut seq = 0u32;
        let mut push = |role, ttl, size, offset| {
            out.push(HopPacket {
                seq,
                role,
                ttl,
                size,
                offset,
            });
            seq += 1;
        };
        for ttl in 1..=self.markers {
            push(Role::Head, ttl, self.marker_size, DurationNs::ZERO);
        }
        let spacing = self
            .load_rate
            .and_then(|r| r.time_to_send(self.load_size))
            .unwrap_or(DurationNs::ZERO);
        let mut last = DurationNs::ZERO;
        for i in 0..self.load_packets {
            last = DurationNs::from_ns(spacing.ns().saturating_mul(i64::from(i)));
            push(Role::Load, self.load_ttl, self.load_size, last);
        }
        for ttl in (1..=self.markers).rev() {
            push(Role::Tail, ttl, self.marker_size, last);
        }
        out
    }

    /// Sequence number of the head (or tail) marker for hop `ttl`.
    pub fn marker_seq(&self, role: Role, ttl: u8) -> Option<u32> {
        if ttl == 0 || ttl > self.markers {
            return None;
        }
        match role {
            Role::Head => Some(u32::from(ttl) - 1),
            Role::Tail => {
                Some(u32::from(self.markers) + self.load_packets + u32::from(self.markers - ttl))
            }
            Role::Load => None,
        }
    }

    /// Bytes that pass the link into hop `ttl` from the head marker's end to
    /// the tail marker's end: the later heads, the load and the tails of TTL
    /// `ttl` and up (everything in between still alive at that link).
    pub fn bytes_between(&self, ttl: u8) -> Bytes {
        let m = u64::from(self.markers.saturating_sub(ttl));
        Bytes(
            m * self.marker_size.get()
                + u64::from(self.load_packets) * self.load_size.get()
                + (m + 1) * self.marker_size.get(),
        )
    }

    /// Why a runner should refuse this train, if it should.
    pub fn check(&self) -> Result<(), String> {
        if self.markers == 0 {
            return Err("a hop train needs at least one marker".into());
        }
        if self.load_packets == 0 {
            return Err("a hop train needs load packets".into());
        }
        if self.marker_size.get() < 28 || self.load_size.get() < 28 {
            return Err("packets must hold at least the IP and UDP headers (28 bytes)".into());
        }
        if self.load_size.get() > 65_507 || self.marker_size.get() > 65_507 {
            return Err("packets larger than a UDP datagram".into());
        }
        if self.load_ttl <= self.markers {
            return Err("the load's TTL must exceed the markers'".into());
        }
        Ok(())
    }
}

/// What the `hops` method asks for next.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum HopsPlan {
    Train(HopTrainSpec),
    Done,
}

/// Which ICMP message answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AnswerKind {
    /// A router on the way: the TTL ran out there.
    TimeExceeded,
    /// The far end itself (port unreachable, or any destination-unreachable
    /// error from the target address).
    Destination,
}

/// One ICMP answer, matched to the probe packet it quotes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct HopAnswer {
    /// The probe packet answered (its [`HopPacket::seq`]).
    pub seq: u32,
    /// The router (or far end) that answered.
    pub from: IpAddr,
    pub kind: AnswerKind,
    /// When the answer arrived, on the sender's receive clock.
    pub received: TimeNs,
}

/// Everything known about one executed hop train.  Answers that did not
/// come are simply absent: a missing answer is never a time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HopsObservation {
    pub train: u32,
    pub spec: HopTrainSpec,
    /// Send stamp of each packet, by `seq`; `None` when the send failed.
    pub sent: Vec<Option<TimeNs>>,
    pub answers: Vec<HopAnswer>,
    /// The clock that stamped `answers` (the send stamps are the same
    /// host's; on a real path they come from the same wall clock).
    pub clock: ClockInfo,
}

impl HopsObservation {
    /// Packets this host's own queue refused (`sent` is `None`): lost on
    /// the first link before they left, where the sender's qdisc is short.
    pub fn refused(&self) -> usize {
        self.sent.iter().filter(|s| s.is_none()).count()
    }
}

/// Refused and offered packets over a measurement, said in one note when
/// any were refused.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Refusals {
    pub refused: u64,
    pub offered: u64,
}

impl Refusals {
    pub fn add(&mut self, obs: &HopsObservation) {
        self.refused += obs.refused() as u64;
        self.offered += obs.sent.len() as u64;
    }

    pub fn note(&self) -> Option<String> {
        (self.refused > 0).then(|| {
            format!(
                "this host's own queue refused {} of {} packets (ENOBUFS): they were lost on the first link, before they left the sender",
                self.refused, self.offered
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_train_is_pathnecks_33_6_kb() {
        let s = HopTrainSpec::pathneck_default();
        assert_eq!(s.total_bytes(), Bytes(33_600));
        let p = s.packets();
        assert_eq!(p.len(), 120);
        assert_eq!((p[0].role, p[0].ttl), (Role::Head, 1));
        assert_eq!((p[29].role, p[29].ttl), (Role::Head, 30));
        assert_eq!((p[90].role, p[90].ttl), (Role::Tail, 30));
        assert_eq!((p[119].role, p[119].ttl), (Role::Tail, 1));
        for ttl in 1..=30 {
            let h = s.marker_seq(Role::Head, ttl).unwrap() as usize;
            let t = s.marker_seq(Role::Tail, ttl).unwrap() as usize;
            assert_eq!((p[h].role, p[h].ttl), (Role::Head, ttl));
            assert_eq!((p[t].role, p[t].ttl), (Role::Tail, ttl));
        }
        assert_eq!(s.marker_seq(Role::Head, 31), None);
        assert!(s.check().is_ok());
    }

    #[test]
    fn bytes_between_counts_what_is_still_alive() {
        let s = HopTrainSpec {
            markers: 3,
            marker_size: Bytes(60),
            load_packets: 10,
            load_size: Bytes(1000),
            load_ttl: 64,
            load_rate: Some(BitRate::from_mbps(80.0)),
            idle_before: DurationNs::ZERO,
        };
        // Hop 1: heads 2,3, the load, tails 3,2,1.
        assert_eq!(s.bytes_between(1), Bytes(2 * 60 + 10_000 + 3 * 60));
        // Hop 3: the load and tail 3.
        assert_eq!(s.bytes_between(3), Bytes(10_000 + 60));
        let p = s.packets();
        assert_eq!(p[3 + 9].offset, DurationNs::from_us(900));
        assert_eq!(p[3 + 10].offset, DurationNs::from_us(900));
    }

    #[test]
    fn packets_the_senders_queue_refused_are_counted_and_said() {
        let spec = HopTrainSpec::pathneck_default();
        let obs = |sent: Vec<Option<TimeNs>>| HopsObservation {
            train: 0,
            spec,
            sent,
            answers: Vec::new(),
            clock: ClockInfo {
                source: crate::observation::ClockSource::KernelSoftware,
                resolution: DurationNs::from_ns(1),
            },
        };
        let mut r = Refusals::default();
        r.add(&obs(vec![Some(TimeNs::from_ns(1)); 4]));
        assert_eq!(r.note(), None);
        r.add(&obs(vec![Some(TimeNs::from_ns(1)), None, None]));
        assert_eq!((r.refused, r.offered), (2, 7));
        let note = r.note().expect("a note");
        assert!(note.contains("refused 2 of 7 packets"), "{note}");
    }
}
