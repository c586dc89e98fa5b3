//! The maximum burst size on a real path: [`pathsonde_core::mbs::MbsSearch`]
//! run with bursts that leave as one back-to-back car (`sendmmsg`, as fast
//! as the sender can), each reported by the server packet by packet.
//!
//! The bursts are sent as `sendmmsg` batches even where the pacer would use
//! GSO cars: the burst's send and arrival rates are read packet by packet,
//! and a GSO send gives one transmit stamp for all its packets (and, on
//! loopback, one arrival stamp), which would make those rates meaningless.

use crate::client::Client;
use crate::error::Result;
use crate::pacer::PacerMode;
use pathsonde_core::mbs::{
    self, BurstLog, BurstSeen, BurstTake, MbsConfig, MbsSample, MbsSearch, MbsSummary,
};
use pathsonde_core::verdict::{HostLimit, HostRole};
use pathsonde_core::{BitRate, Bytes, DurationNs, Observation, ProbePlan, TrainSpec};
use serde::Serialize;
use std::time::{Duration, Instant};

/// What the MBS searches found.
#[derive(Debug, Clone, Serialize)]
pub struct MbsMeasurement {
    pub summary: MbsSummary,
    pub searches: Vec<MbsSample>,
    /// IP bytes per packet of the bursts.
    pub packet: Bytes,
    /// The rate the bursts left the sender (median over bursts of ≥ 8
    /// packets, from the kernel's transmit stamps where it gave them).
    pub sender_line_rate: Option<BitRate>,
    /// The rate lossless bursts arrived at the receiver (median): the
    /// narrow link's drain rate, netest's "line speed" of the bottleneck.
    pub path_line_rate: Option<BitRate>,
    /// Packets the server's socket dropped itself over all bursts (they
    /// crossed the path; the search did not count them as its loss);
    /// `None` when the server cannot say.
    pub receiver_drops: Option<u64>,
    /// What the bursts showed of the hosts
    /// ([`pathsonde_core::mbs::host_limits`]): a binding one makes the line
    /// speed (and an unbounded MBS) the sender's, a lower bound of the path's.
    pub host_limits: Vec<HostLimit>,
    /// Lossless bursts sent again because the sender stalled in them
    /// (`pathsonde_core::mbs::stalled`), and those taken as they came after
    /// the retries; both are in `host_limits` when not zero.
    pub stalls_resent: u32,
    pub stalls_taken: u32,
    /// Bursts sent, the re-sent ones included.
    pub bursts: u32,
    pub bytes_sent: Bytes,
    pub duration: DurationNs,
}

/// Packets' span rate: (n − 1) packets over first-to-last stamp.
fn span_rate(mut stamps: Vec<i64>, packet: Bytes) -> Option<BitRate> {
    if stamps.len() < 8 {
        return None;
    }
    stamps.sort_unstable();
    let span = DurationNs::from_ns(stamps[stamps.len() - 1] - stamps[0]);
    BitRate::from_bytes_per(Bytes(packet.get() * (stamps.len() as u64 - 1)), span)
}

/// Runs `searches` MBS searches with `packet`-byte packets and bursts up to
/// `max_burst` bytes; `progress` sees each search's result.
pub fn measure_mbs(
    client: &mut Client,
    packet: Bytes,
    max_burst: Bytes,
    searches: u32,
    linger: Duration,
    progress: &mut dyn FnMut(&MbsSample),
) -> Result<MbsMeasurement> {
    let asked = client.set_pacer_mode(PacerMode::Batch);
    let result = bursts(client, packet, max_burst, searches, linger, progress);
    client.set_pacer_mode(asked);
    result
}

fn bursts(
    client: &mut Client,
    packet: Bytes,
    max_burst: Bytes,
    searches: u32,
    linger: Duration,
    progress: &mut dyn FnMut(&MbsSample),
) -> Result<MbsMeasurement> {
    let started = Instant::now();
    let mut samples = Vec::new();
    let mut log = BurstLog::default();
    let mut bursts = 0u32;
    let mut bytes_sent = Bytes(0);
    for _ in 0..searches.max(1) {
        let mut search = MbsSearch::new(MbsConfig::new(packet, max_burst));
        while let Some(n) = search.next_burst() {
            let spec = TrainSpec {
                packet_size: packet,
                packets_per_car: n,
                cars: 1,
                rate: BitRate::from_gbps(1.0),
                // The previous burst's report came back only after its last
                // packet arrived (or the linger ran out), so the queue has
                // drained; a short pause keeps bursts apart.
                idle_before: DurationNs::from_ms(2),
            };
            let mut tries = 0;
            let lost = loop {
                let obs: Observation = client.run_plan(&ProbePlan::Train(spec), linger)?;
                bursts += 1;
                bytes_sent += obs.sent_bytes();
                let seen = BurstSeen {
                    lost: (obs.lost_packets() as u32)
                        .saturating_add(n.saturating_sub(obs.sent_packets() as u32)),
                    receiver_drops: obs
                        .receiver_drops
                        .map(|d| d.min(u64::from(u32::MAX)) as u32),
                    sent_rate: span_rate(obs.packets.iter().map(|p| p.sent.ns()).collect(), packet),
                    arrival_rate: span_rate(
                        obs.packets
                            .iter()
                            .filter_map(|p| p.received.map(|t| t.ns()))
                            .collect(),
                        packet,
                    ),
                };
                // A lossless burst the sender stalled in reached the queue
                // in pieces: it is sent again (pathsonde_core::mbs::stalled).
                match log.judge(tries, &seen) {
                    BurstTake::Resend => tries += 1,
                    BurstTake::Lost(l) => break l,
                }
            };
            search.observe(n, lost);
        }
        let s = search.sample();
        progress(&s);
        samples.push(s);
    }
    let summary = mbs::summarize(&samples).expect("at least one search");
    let host_limits = mbs::host_limits(&log.evidence(HostRole::Client, summary.at_least));
    let (stalls_resent, stalls_taken) = log.stalls();
    Ok(MbsMeasurement {
        summary,
        searches: samples,
        packet,
        sender_line_rate: log.sender_line_rate(),
        path_line_rate: log.path_line_rate(),
        receiver_drops: log.receiver_drops(),
        host_limits,
        stalls_resent,
        stalls_taken,
        bursts,
        bytes_sent,
        duration: DurationNs::from_std(started.elapsed()),
    })
}
