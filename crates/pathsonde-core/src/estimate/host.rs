//! What the host-limit verdict concluded about an estimate, as data: which
//! end and which resource bound it, the outcome (the path's number, a lower
//! bound, or none) and the figures it rests on.  These types live with the
//! estimate they annotate; the rules that produce them are in
//! [`crate::verdict`], which depends on this module and not the other way
//! round.

use crate::units::{BitRate, DurationNs};
use serde::{Deserialize, Serialize};
use std::fmt;

/// Which end of the measurement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HostRole {
    Client,
    Server,
}

impl HostRole {
    /// The other end: the receiver of what this end sent.
    pub fn peer(self) -> HostRole {
        match self {
            HostRole::Client => HostRole::Server,
            HostRole::Server => HostRole::Client,
        }
    }
}

impl fmt::Display for HostRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            HostRole::Client => "client",
            HostRole::Server => "server",
        })
    }
}

/// The host resource that bounds a rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Resource {
    /// The highest rate the sender could pace packets of the probe size.
    Pacing,
    /// Per-packet send cost (one `sendto`), as a rate of probe-size packets.
    Cpu,
    /// A socket buffer limit, as a TCP window over the RTT.
    SocketBuffer,
    /// The interface's link speed.
    NicSpeed,
    /// The receiving host itself: packets it dropped (socket overflow).
    Receiver,
    /// The hosts' timing: arrival spacing moved by scheduling, a delay line
    /// or the receive path, not by the path's queues.
    Timing,
}

impl fmt::Display for Resource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Resource::Pacing => "pacing",
            Resource::Cpu => "CPU",
            Resource::SocketBuffer => "socket buffer",
            Resource::NicSpeed => "NIC speed",
            Resource::Receiver => "receiver",
            Resource::Timing => "timing",
        })
    }
}

/// A limit that bound the result, or (for TCP advisories) would bind a TCP flow.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostLimit {
    pub host: HostRole,
    pub resource: Resource,
    pub limit_bps: BitRate,
    /// True when the measured result is within the margin of this limit:
    /// the number is the host's, not the path's.
    pub binds_result: bool,
    /// Why, in plain words.
    pub why: String,
    /// The fix, when one exists (a command or setting).
    pub fix: Option<String>,
}

/// What the evidence says of an estimate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Outcome {
    /// The number is the path's.
    Path,
    /// A host limited the run: the path carries at least `bound`.
    LowerBound { bound_bps: BitRate },
    /// A host limited the run and no train shows what the path carries.
    NoEstimate,
}

/// The figures the verdict rests on, for the report.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Figures {
    /// Trains read.
    pub trains: usize,
    /// The fastest train the sender paced: its target and what it reached.
    pub fastest_target_bps: Option<BitRate>,
    pub fastest_sent_bps: Option<BitRate>,
    /// Whether any constant-rate train fell more than 5 % short of its target.
    pub sender_fell_short: bool,
    /// The fastest rate sent over the top of the answer's band (the answer
    /// when the band has no top): how far above it the sender could probe.
    pub headroom: Option<f64>,
    /// The median, over trains near the answer, of each train's p90
    /// car-spacing stray.
    pub send_stray_p90: Option<f64>,
    /// Packets lost, and of them those the receiving host dropped itself.
    pub packets_lost: u64,
    pub receiver_drops: Option<u64>,
    /// Median p90 arrival-spacing noise of untouched trains near the answer,
    /// and the median span of those trains (first send to last) it is
    /// judged against ([`Figures::timing_noise_ratio`]).
    pub timing_noise_p90: Option<DurationNs>,
    pub train_span: Option<DurationNs>,
    /// The median receive/send ratio of the trains sent at the sender's
    /// ceiling (within 10 % of its fastest), when it fell short anywhere.
    pub ceiling_stretch: Option<f64>,
    /// Trains at least 1 ms long, sent faster than the answer, that arrived
    /// at under 1/(1 + 25 %) of the rate they left at: by the fluid model of
    /// a FIFO link each was sent more than 25 % above A, so the sender could
    /// probe clearly above it.
    #[serde(default)]
    pub held_back_trains: usize,
    /// The median rate of the trains that crossed the path untouched.
    pub carried_median_bps: Option<BitRate>,
    /// The slowest train long enough to judge that the path did not carry
    /// untouched: a lower bound stays below it as well.
    #[serde(default)]
    pub stretched_at_bps: Option<BitRate>,
}

impl Figures {
    /// The timing noise's share of the untouched trains' span.  Rates are
    /// slopes over whole trains, so noise matters against a train's span: a
    /// cross packet moving a car head by its service time is the path's own
    /// variation and small against it; a delay line's hold error of hundreds
    /// of microseconds is not.
    pub(crate) fn timing_noise_ratio(&self) -> Option<f64> {
        let (n, t) = (self.timing_noise_p90?, self.train_span?);
        (t.ns() > 0).then(|| n.ns() as f64 / t.ns() as f64)
    }
}

/// The verdict of a run's own evidence on its estimate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostEvidence {
    pub outcome: Outcome,
    /// The limits the evidence found (the binding ones set the outcome;
    /// timing noise is a doubt, never a bound).
    pub limits: Vec<HostLimit>,
    pub figures: Figures,
}

impl HostEvidence {
    /// Whether a host, by the run's own evidence, set the number.
    pub fn host_limited(&self) -> bool {
        self.outcome != Outcome::Path
    }
}
