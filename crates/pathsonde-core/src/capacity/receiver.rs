//! The load receiver's accounting (spec §7): what fills every status
//! feedback and every sub-interval's statistics, with times passed in.
//!
//! The net layer calls [`LoadReceiver::on_load`] for every valid Load PDU
//! whose test_action is 0, and [`LoadReceiver::on_status_due`] each time
//! the trial-interval timer fires; the latter returns what the Status PDU
//! carries (or nothing while no load has arrived) and then starts the next
//! trial interval, closing the sub-interval when its time is up.  The same
//! accounting serves the server in an upstream test (its status feedback
//! also feeds [`crate::capacity::adjust`], see [`TrialStats::feedback`])
//! and the client in a downstream one (its completed sub-intervals are its
//! results).
//!
//! Memory is fixed whatever arrives: a 32-entry sequence history and a few
//! counters; a sequence number that jumps by billions is counted as that
//! much loss, not stored.

use super::adjust::Feedback;
use super::rate_table::IpFamily;
use super::{round_ms, DEFAULT_SUB_INTERVAL, DEFAULT_TRIAL_INTERVAL, TRAFFIC_STOPPED_AFTER};
use crate::units::{BitRate, Bytes, DurationNs, TimeNs};
use serde::{Deserialize, Serialize};

/// How many recent sequence numbers the receiver remembers to tell a
/// duplicate from a late datagram (spec §7, step 3).
pub(crate) const SEQ_HISTORY: usize = 32;

/// The ECN codepoint a load datagram arrived with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Ecn {
    #[default]
    NotEct,
    Ect1,
    Ect0,
    Ce,
}

impl Ecn {
    /// From the low two bits of the TOS / traffic-class byte.
    pub const fn from_bits(tos: u8) -> Ecn {
        match tos & 3 {
            0 => Ecn::NotEct,
            1 => Ecn::Ect1,
            2 => Ecn::Ect0,
            _ => Ecn::Ce,
        }
    }
}

/// One valid Load PDU as the receiver saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoadArrival {
    /// The load sequence number (starts at 1).
    pub seq: u32,
    /// The PDU's payload_len field: bytes are counted from it, not from the
    /// length read.
    pub payload_len: Bytes,
    /// send_sec/send_nsec, on the sender's clock.
    pub sent_at: TimeNs,
    /// When it arrived, on this receiver's clock.
    pub received_at: TimeNs,
    /// echo_sec/echo_nsec: the send time of the last Status PDU the sender
    /// received, which this receiver stamped on its own clock; `None` when
    /// the fields are zero (no Status PDU reached the sender yet).
    pub echo: Option<TimeNs>,
    /// resp_delay: from the sender's receipt of that Status PDU to this
    /// datagram (whole ms on the wire).
    pub resp_delay: DurationNs,
    /// The ECN codepoint it arrived with (read only when ECN is on).
    pub ecn: Ecn,
}

/// Minimum, maximum, sum and count of delay-variation samples (whole ms).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Variation {
    /// `None` when there was no sample (the wire's 0xFFFFFFFF).
    pub min: Option<DurationNs>,
    pub max: DurationNs,
    pub sum: DurationNs,
    pub count: u64,
}

impl Variation {
    fn add(&mut self, v: DurationNs) {
        self.min = Some(self.min.map_or(v, |m| m.min(v)));
        self.max = self.max.max(v);
        self.sum += v;
        self.count = self.count.saturating_add(1);
    }
    /// The largest sample; `None` when there was none.
    pub fn max(&self) -> Option<DurationNs> {
        (self.count > 0).then_some(self.max)
    }
    /// The mean, rounded to whole ms (half up); `None` without samples.
    pub(crate) fn mean_ms(&self) -> Option<DurationNs> {
        let n = i64::try_from(self.count).ok().filter(|&n| n > 0)?;
        Some(DurationNs::from_ms(round_ms(DurationNs::from_ns(
            self.sum.ns() / n,
        ))))
    }
    /// The mean, not rounded; `None` without samples.
    pub fn mean(&self) -> Option<DurationNs> {
        let n = i64::try_from(self.count).ok().filter(|&n| n > 0)?;
        Some(DurationNs::from_ns(self.sum.ns() / n))
    }
    /// Both sets merged (several connections).
    pub(crate) fn merge(&self, other: &Variation) -> Variation {
        let min = match (self.min, other.min) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        Variation {
            min,
            max: self.max.max(other.max),
            sum: self.sum + other.sum,
            count: self.count.saturating_add(other.count),
        }
    }
}

/// What one Status PDU reports about its trial interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct TrialStats {
    /// ti_rx_datagrams.
    pub rx_datagrams: u64,
    /// ti_rx_bytes: the sum of payload_len.
    pub rx_bytes: Bytes,
    /// ti_loss, ti_reorder, ti_dup.
    pub loss: u64,
    pub reorder: u64,
    pub dup: u64,
    /// owdv_min/max/sum/count: one-way delay above the test's minimum.
    pub owdv: Variation,
    /// clock_delta_min: the smallest (receive − send) time of the test, in
    /// whole ms; includes the clock offset, may be negative.  `None`
    /// before any in-order load.
    pub clock_delta_min: Option<DurationNs>,
    /// rtt_min: the smallest RTT of the test; `None` before any sample.
    pub rtt_min: Option<DurationNs>,
    /// rtt_var_sample: the latest RTT minus `rtt_min`; `None` when no new
    /// sample came in this trial interval.
    pub rtt_var_sample: Option<DurationNs>,
    /// min_updated: `clock_delta_min` or `rtt_min` fell in this trial interval.
    pub min_updated: bool,
    /// ti_elapsed: the length of this trial interval.
    pub elapsed: DurationNs,
    /// (extension) ti_ce_count.
    pub ce_count: u64,
    /// (extension) ECN bleaching seen (ECT-marked traffic arrived Not-ECT) at any time in the test.
    pub ecn_bleaching: bool,
}

impl TrialStats {
    /// The adjustment's input from these counters (upstream: the server's
    /// own; downstream the net layer builds [`Feedback`] from the PDU).
    pub fn feedback(&self, subint_seq: u32) -> Feedback {
        Feedback {
            loss: self.loss,
            reorder: self.reorder,
            dup: self.dup,
            owdv_sum: self.owdv.sum,
            owdv_count: self.owdv.count,
            rtt_var_sample: self.rtt_var_sample,
            rx_datagrams: self.rx_datagrams,
            ce_count: self.ce_count,
            subint_seq,
        }
    }
}

/// One sub-interval's statistics: the 56-byte block of the Status PDU, plus
/// what the client needs beside it to report the sub-interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct SubIntervalStats {
    pub rx_datagrams: u64,
    /// The sum of payload_len (UDP payload bytes).
    pub rx_bytes: Bytes,
    /// The measured length of the sub-interval.
    pub elapsed: DurationNs,
    pub loss: u64,
    pub reorder: u64,
    pub dup: u64,
    /// One-way delay variation (owdv_min/max/sum/count).
    pub owdv: Variation,
    /// RTT variation: `min` and `max` are the block's rttv_min and
    /// rttv_max; `sum` and `count` are not on the wire (the client keeps
    /// them from the samples it saw, for the average).
    pub rttv: Variation,
    /// accum_ms: time from the first Status PDU to the end of this sub-interval.
    pub accum: DurationNs,
    /// (extension) subint_ce_count.
    pub ce_count: u64,
    /// Not in the block: clock_delta_min when the sub-interval closed.
    pub clock_delta_min: Option<DurationNs>,
    /// Not in the block: rtt_min when the sub-interval closed.
    pub rtt_min: Option<DurationNs>,
}

impl SubIntervalStats {
    /// Datagrams sent into the sub-interval: received plus lost.
    pub fn sent(&self) -> u64 {
        self.rx_datagrams.saturating_add(self.loss)
    }
    /// Bytes at the IP layer: payload plus UDP and IP headers per datagram.
    pub fn ip_bytes(&self, family: IpFamily) -> Bytes {
        self.rx_bytes + Bytes(self.rx_datagrams.saturating_mul(family.overhead().get()))
    }
    /// The received IP-layer rate; `None` for an empty or zero-length sub-interval.
    pub fn ip_rate(&self, family: IpFamily) -> Option<BitRate> {
        BitRate::from_bytes_per(self.ip_bytes(family), self.elapsed)
    }
}

/// The receiver's parameters (after the server's policing).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReceiverConfig {
    /// The status-feedback period (default 50 ms).
    pub trial_interval: DurationNs,
    /// The sub-interval period (default 1 s).
    pub sub_interval: DurationNs,
    /// (extension) ECN on: count CE marks and watch for bleaching.
    pub ecn: bool,
}

impl Default for ReceiverConfig {
    fn default() -> Self {
        ReceiverConfig {
            trial_interval: DEFAULT_TRIAL_INTERVAL,
            sub_interval: DEFAULT_SUB_INTERVAL,
            ecn: false,
        }
    }
}

/// What the receiver puts in one Status PDU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusReport {
    pub trial: TrialStats,
    /// The last completed sub-interval (0 = none yet).
    pub subint_seq: u32,
    /// Its statistics (`None` while `subint_seq` is 0).
    pub subint: Option<SubIntervalStats>,
}

/// The counters of one set (trial or sub-interval).
#[derive(Debug, Clone, Copy, Default)]
struct Counters {
    rx_datagrams: u64,
    rx_bytes: Bytes,
    loss: u64,
    reorder: u64,
    dup: u64,
    owdv: Variation,
    rttv: Variation,
    ce_count: u64,
}

impl Counters {
    fn count(&mut self, bytes: Bytes) {
        self.rx_datagrams = self.rx_datagrams.saturating_add(1);
        self.rx_bytes += bytes;
    }
    fn unlose(&mut self) {
        self.loss = self.loss.saturating_sub(1);
    }
}

/// The load receiver's state for one connection.
#[derive(Debug, Clone)]
pub struct LoadReceiver {
    cfg: ReceiverConfig,
    /// The highest sequence number accepted so far (0 = none).
    highest: u32,
    history: [u32; SEQ_HISTORY],
    history_len: usize,
    history_next: usize,
    trial: Counters,
    sub: Counters,
    /// When the current trial interval began (activation, then each Status PDU).
    trial_start: TimeNs,
    /// When the current sub-interval began; `None` before the first Status PDU.
    sub_start: Option<TimeNs>,
    subint_seq: u32,
    accum: DurationNs,
    completed: Option<SubIntervalStats>,
    clock_delta_min_ms: Option<i64>,
    rtt_min_ms: Option<i64>,
    rtt_var_sample_ms: Option<i64>,
    min_updated: bool,
    last_echo: Option<TimeNs>,
    last_load: Option<TimeNs>,
    activated_at: TimeNs,
    bleaching: bool,
}

impl LoadReceiver {
    /// A receiver for a connection activated at `activated_at` (this side's clock).
    pub fn new(cfg: ReceiverConfig, activated_at: TimeNs) -> Self {
        LoadReceiver {
            cfg,
            highest: 0,
            history: [0; SEQ_HISTORY],
            history_len: 0,
            history_next: 0,
            trial: Counters::default(),
            sub: Counters::default(),
            trial_start: activated_at,
            sub_start: None,
            subint_seq: 0,
            accum: DurationNs::ZERO,
            completed: None,
            clock_delta_min_ms: None,
            rtt_min_ms: None,
            rtt_var_sample_ms: None,
            min_updated: false,
            last_echo: None,
            last_load: None,
            activated_at,
            bleaching: false,
        }
    }

    fn in_history(&self, seq: u32) -> bool {
        self.history[..self.history_len].contains(&seq)
    }

    fn remember(&mut self, seq: u32) {
        self.history[self.history_next] = seq;
        self.history_next = (self.history_next + 1) % SEQ_HISTORY;
        self.history_len = (self.history_len + 1).min(SEQ_HISTORY);
    }

    /// One valid Load PDU with test_action 0 (spec §7, steps 1–5).
    pub fn on_load(&mut self, a: &LoadArrival) {
        self.last_load = Some(a.received_at);
        // 2. Counts, in both sets.
        self.trial.count(a.payload_len);
        self.sub.count(a.payload_len);
        if self.cfg.ecn {
            match a.ecn {
                Ecn::Ce => {
                    self.trial.ce_count = self.trial.ce_count.saturating_add(1);
                    self.sub.ce_count = self.sub.ce_count.saturating_add(1);
                }
                Ecn::NotEct => self.bleaching = true,
                Ecn::Ect0 | Ecn::Ect1 => {}
            }
        }
        // 3. Sequence accounting.
        let next = self.highest as u64 + 1;
        let seq = a.seq as u64;
        if seq >= next {
            let lost = seq - next;
            self.trial.loss = self.trial.loss.saturating_add(lost);
            self.sub.loss = self.sub.loss.saturating_add(lost);
            self.highest = a.seq;
            self.remember(a.seq);
        } else if self.in_history(a.seq) {
            self.trial.dup = self.trial.dup.saturating_add(1);
            self.sub.dup = self.sub.dup.saturating_add(1);
            return;
        } else {
            self.trial.reorder = self.trial.reorder.saturating_add(1);
            self.sub.reorder = self.sub.reorder.saturating_add(1);
            self.trial.unlose();
            self.sub.unlose();
            self.remember(a.seq);
            return;
        }
        // 4. One-way delay variation, in-order datagrams only.
        let d = round_ms(a.received_at.since(a.sent_at));
        match self.clock_delta_min_ms {
            None => self.clock_delta_min_ms = Some(d),
            Some(min) => {
                let min = if d < min {
                    self.min_updated = true;
                    self.clock_delta_min_ms = Some(d);
                    d
                } else {
                    min
                };
                let v = DurationNs::from_ms(d.saturating_sub(min));
                self.trial.owdv.add(v);
                self.sub.owdv.add(v);
            }
        }
        // 5. RTT, on a new echo only.
        if let Some(echo) = a.echo.filter(|&e| Some(e) != self.last_echo) {
            self.last_echo = Some(echo);
            let raw = round_ms(a.received_at.since(echo));
            let r = raw.saturating_sub(round_ms(a.resp_delay));
            let r = match r {
                r if r >= 0 => Some(r),
                -1 => Some(0),
                _ => None, // a response delay longer than the round trip: no sample
            };
            if let Some(r) = r {
                let min = match self.rtt_min_ms {
                    Some(m) if m <= r => m,
                    _ => {
                        self.min_updated = true;
                        self.rtt_min_ms = Some(r);
                        r
                    }
                };
                let var = r - min;
                self.rtt_var_sample_ms = Some(var);
                self.sub.rttv.add(DurationNs::from_ms(var));
            }
        }
    }

    /// The trial-interval timer fired at `now`: what this Status PDU carries,
    /// or `None` (send nothing) while no load has arrived.  Either way the
    /// timer keeps running; after a report the trial counters restart and
    /// the sub-interval closes if its time is up (its block goes out from
    /// the next report on).
    pub fn on_status_due(&mut self, now: TimeNs) -> Option<StatusReport> {
        self.last_load?;
        let report = StatusReport {
            trial: TrialStats {
                rx_datagrams: self.trial.rx_datagrams,
                rx_bytes: self.trial.rx_bytes,
                loss: self.trial.loss,
                reorder: self.trial.reorder,
                dup: self.trial.dup,
                owdv: self.trial.owdv,
                clock_delta_min: self.clock_delta_min_ms.map(DurationNs::from_ms),
                rtt_min: self.rtt_min_ms.map(DurationNs::from_ms),
                rtt_var_sample: self.rtt_var_sample_ms.map(DurationNs::from_ms),
                min_updated: self.min_updated,
                elapsed: now.since(self.trial_start),
                ce_count: self.trial.ce_count,
                ecn_bleaching: self.bleaching,
            },
            subint_seq: self.subint_seq,
            subint: self.completed,
        };
        self.trial = Counters::default();
        self.rtt_var_sample_ms = None;
        self.min_updated = false;
        self.trial_start = now;
        match self.sub_start {
            None => self.sub_start = Some(now),
            Some(start) => {
                let elapsed = now.since(start);
                let due =
                    self.cfg.sub_interval - DurationNs::from_ns(self.cfg.trial_interval.ns() / 2);
                if elapsed > due {
                    self.subint_seq = self.subint_seq.saturating_add(1);
                    self.accum += DurationNs::from_ms(round_ms(elapsed));
                    self.completed = Some(SubIntervalStats {
                        rx_datagrams: self.sub.rx_datagrams,
                        rx_bytes: self.sub.rx_bytes,
                        elapsed: DurationNs::from_us(elapsed.ns() / 1_000),
                        loss: self.sub.loss,
                        reorder: self.sub.reorder,
                        dup: self.sub.dup,
                        owdv: self.sub.owdv,
                        rttv: self.sub.rttv,
                        accum: self.accum,
                        ce_count: self.sub.ce_count,
                        clock_delta_min: self.clock_delta_min_ms.map(DurationNs::from_ms),
                        rtt_min: self.rtt_min_ms.map(DurationNs::from_ms),
                    });
                    self.sub = Counters::default();
                    self.sub_start = Some(now);
                }
            }
        }
        Some(report)
    }

    /// The last completed sub-interval and its number: a downstream client
    /// records a result whenever the number changes.
    pub fn completed(&self) -> Option<(u32, &SubIntervalStats)> {
        self.completed.as_ref().map(|s| (self.subint_seq, s))
    }

    /// rx_stopped for outgoing PDUs: no load for [`TRAFFIC_STOPPED_AFTER`]
    /// (counted from activation before the first).
    pub fn rx_stopped(&self, now: TimeNs) -> bool {
        let since = self.last_load.unwrap_or(self.activated_at);
        now.since(since) >= TRAFFIC_STOPPED_AFTER
    }

    /// The highest sequence number accepted so far (0 = none).
    pub fn highest_seq(&self) -> u32 {
        self.highest
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MS: i64 = 1_000_000;

    fn t(ns: i64) -> TimeNs {
        TimeNs::from_ns(ns)
    }
    /// Load `seq` sent at `sent_ns` (sender clock) and received at `rx_ns`.
    fn load(seq: u32, sent_ns: i64, rx_ns: i64) -> LoadArrival {
        LoadArrival {
            seq,
            payload_len: Bytes(1222),
            sent_at: t(sent_ns),
            received_at: t(rx_ns),
            echo: None,
            resp_delay: DurationNs::ZERO,
            ecn: Ecn::NotEct,
        }
    }
    fn rx() -> LoadReceiver {
        LoadReceiver::new(ReceiverConfig::default(), t(0))
    }
    fn feed(r: &mut LoadReceiver, seqs: &[u32]) {
        for (i, &s) in seqs.iter().enumerate() {
            let at = (i as i64 + 1) * MS;
            r.on_load(&load(s, at, at + 5 * MS));
        }
    }

    #[test]
    fn nothing_is_reported_before_the_first_load() {
        let mut r = rx();
        assert_eq!(r.on_status_due(t(50 * MS)), None);
        assert!(!r.rx_stopped(t(999 * MS)));
        assert!(r.rx_stopped(t(1000 * MS)));
        r.on_load(&load(1, 0, 1000 * MS));
        assert!(!r.rx_stopped(t(1500 * MS)));
        let rep = r.on_status_due(t(1050 * MS)).unwrap();
        assert_eq!(
            (rep.trial.rx_datagrams, rep.subint_seq, rep.subint),
            (1, 0, None)
        );
        assert_eq!(rep.trial.elapsed, DurationNs::from_ms(1050));
        // The first load only sets the minimum: no delay sample yet.
        assert_eq!(rep.trial.owdv.count, 0);
        assert_eq!(rep.trial.clock_delta_min, Some(DurationNs::from_ms(1000)));
    }

    #[test]
    fn an_in_order_stream_at_100_mbps() {
        // 1222-byte payloads every 100 µs (1250 B at the IP layer: 100 Mb/s), constant 2 ms delay.
        let mut r = rx();
        let mut seq = 0;
        let mut reports = Vec::new();
        let mut now = 0;
        for tick in 1..=60 {
            let end = tick * 50 * MS;
            while now + 100_000 <= end {
                now += 100_000;
                seq += 1;
                r.on_load(&load(seq, now, now + 2 * MS));
            }
            reports.push(r.on_status_due(t(end)).unwrap());
        }
        let first = reports[0].trial;
        assert_eq!(
            (first.rx_datagrams, first.rx_bytes),
            (500, Bytes(500 * 1222))
        );
        assert_eq!((first.loss, first.reorder, first.dup), (0, 0, 0));
        assert_eq!(first.owdv.count, 499);
        assert_eq!(
            (first.owdv.min, first.owdv.max),
            (Some(DurationNs::ZERO), DurationNs::ZERO)
        );
        // The sub-interval clock started at the first report (50 ms); the
        // first sub-interval closes after the report at 1050 ms (1000 ms >
        // 975 ms) and goes out from the next report on.
        assert_eq!(reports[20].subint_seq, 0);
        assert_eq!(reports[21].subint_seq, 1);
        let s = reports[21].subint.unwrap();
        assert_eq!(s.elapsed, DurationNs::from_ms(1000));
        assert_eq!(s.accum, DurationNs::from_ms(1000));
        // Counted from the first load: 1050 ms of datagrams in a 1000 ms sub-interval.
        assert_eq!(s.rx_datagrams, 10_500);
        let rate = s.ip_rate(IpFamily::V4).unwrap();
        assert!((rate.mbps() - 105.0).abs() < 1e-9, "{rate}");
        // The second sub-interval has exactly its own 1000 ms.
        assert_eq!(reports[41].subint_seq, 2);
        let s2 = reports[41].subint.unwrap();
        assert_eq!(s2.rx_datagrams, 10_000);
        assert!((s2.ip_rate(IpFamily::V4).unwrap().mbps() - 100.0).abs() < 1e-9);
        assert_eq!(s2.accum, DurationNs::from_ms(2000));
        assert_eq!(r.completed().map(|(n, _)| n), Some(2));
        // Over IPv6 the same datagrams count 20 bytes more each.
        assert!(s2.ip_rate(IpFamily::V6).unwrap().mbps() > 101.5);
    }

    #[test]
    fn loss_is_the_gap_in_sequence_numbers() {
        let mut r = rx();
        feed(&mut r, &[1, 2, 3, 9, 10]);
        let rep = r.on_status_due(t(50 * MS)).unwrap();
        assert_eq!(
            (rep.trial.loss, rep.trial.reorder, rep.trial.dup),
            (5, 0, 0)
        );
        assert_eq!(rep.trial.rx_datagrams, 5);
        // The trial counters restart; a gap at the very start is loss too.
        let mut r = rx();
        feed(&mut r, &[4]);
        assert_eq!(r.on_status_due(t(50 * MS)).unwrap().trial.loss, 3);
    }

    #[test]
    fn a_late_datagram_is_reordering_not_loss() {
        let mut r = rx();
        feed(&mut r, &[1, 2, 4, 5, 3]);
        let rep = r.on_status_due(t(50 * MS)).unwrap();
        assert_eq!(
            (rep.trial.loss, rep.trial.reorder, rep.trial.dup),
            (0, 1, 0)
        );
        // Late by more than a trial interval: the trial that saw the loss
        // keeps it, the late trial counts the reordering and no negative loss.
        let mut r = rx();
        feed(&mut r, &[1, 3]);
        assert_eq!(r.on_status_due(t(50 * MS)).unwrap().trial.loss, 1);
        feed(&mut r, &[2]);
        let rep = r.on_status_due(t(100 * MS)).unwrap();
        assert_eq!((rep.trial.loss, rep.trial.reorder), (0, 1));
    }

    #[test]
    fn duplicates_within_the_history_and_beyond_it() {
        let mut r = rx();
        feed(&mut r, &[1, 2, 2, 3, 1, 3]);
        let rep = r.on_status_due(t(50 * MS)).unwrap();
        assert_eq!(
            (rep.trial.loss, rep.trial.reorder, rep.trial.dup),
            (0, 0, 3)
        );
        assert_eq!(rep.trial.rx_datagrams, 6);
        // 40 datagrams later, seq 1 is out of the 32-entry history: it reads
        // as a late datagram (the spec's rule), with no loss to take back.
        let mut r = rx();
        let seqs: Vec<u32> = (1..=40).chain([1, 20]).collect();
        feed(&mut r, &seqs);
        let rep = r.on_status_due(t(50 * MS)).unwrap();
        assert_eq!(
            (rep.trial.loss, rep.trial.reorder, rep.trial.dup),
            (0, 1, 1)
        );
    }

    #[test]
    fn huge_jumps_and_wraps_are_counted_not_stored() {
        let mut r = rx();
        feed(&mut r, &[1, u32::MAX, 2, 0, u32::MAX, 5]);
        let rep = r.on_status_due(t(50 * MS)).unwrap();
        // 1 → u32::MAX: u32::MAX − 2 lost; 2 and 0 come back late (−2); the
        // second u32::MAX is a duplicate; 5 is late too (−1).
        assert_eq!(rep.trial.loss, u32::MAX as u64 - 2 - 3);
        assert_eq!((rep.trial.reorder, rep.trial.dup), (3, 1));
        assert_eq!(r.highest_seq(), u32::MAX);
        // The state is a fixed size whatever arrives.
        assert!(std::mem::size_of::<LoadReceiver>() < 1024);
    }

    #[test]
    fn delay_variation_is_relative_so_a_clock_offset_changes_nothing() {
        // Queueing delays of 3, 3, 4, 10, 25, 7 ms (in-order), one late datagram.
        let delays = [3, 3, 4, 10, 25, 7];
        let run = |offset_ns: i64| {
            let mut r = rx();
            for (i, d) in delays.iter().enumerate() {
                let sent = (i as i64 + 1) * 10 * MS;
                let mut a = load(i as u32 + 1, sent + offset_ns, sent + d * MS);
                a.echo = Some(t(2 * MS));
                a.resp_delay = DurationNs::from_ms(i as i64);
                r.on_load(&a);
            }
            r.on_status_due(t(50 * MS)).unwrap().trial
        };
        let base = run(0);
        assert_eq!(base.owdv.count, 5);
        assert_eq!(base.owdv.min, Some(DurationNs::ZERO));
        assert_eq!(base.owdv.max, DurationNs::from_ms(22));
        assert_eq!(base.owdv.sum, DurationNs::from_ms(1 + 7 + 22 + 4));
        assert_eq!(base.owdv.mean_ms(), Some(DurationNs::from_ms(7))); // 34/5 = 6.8
        assert_eq!(base.clock_delta_min, Some(DurationNs::from_ms(3)));
        for offset in [5_000 * MS, -3_000 * MS, 1_234_567, -987_654_321_000] {
            let shifted = run(offset);
            assert_eq!(shifted.owdv, base.owdv, "offset {offset}");
            assert_eq!(shifted.rtt_min, base.rtt_min);
            assert_eq!(shifted.rtt_var_sample, base.rtt_var_sample);
            let want = base.clock_delta_min.unwrap().ns() - offset;
            let got = shifted.clock_delta_min.unwrap().ns();
            assert!(
                (got - want).abs() <= MS / 2,
                "offset {offset}: {got} vs {want}"
            );
        }
    }

    #[test]
    fn rtt_from_echoes_less_the_response_delay() {
        let mut r = rx();
        let with_echo = |seq: u32, rx_ms: i64, echo_ms: Option<i64>, resp_ms: i64| LoadArrival {
            echo: echo_ms.map(|e| t(e * MS)),
            resp_delay: DurationNs::from_ms(resp_ms),
            ..load(seq, rx_ms * MS, rx_ms * MS)
        };
        r.on_load(&with_echo(1, 10, None, 10)); // no status seen yet: no sample
        r.on_load(&with_echo(2, 80, Some(50), 5)); // 30 − 5 = 25
        r.on_load(&with_echo(3, 90, Some(50), 15)); // same echo: ignored
        let rep = r.on_status_due(t(100 * MS)).unwrap().trial;
        assert_eq!(rep.rtt_min, Some(DurationNs::from_ms(25)));
        assert_eq!(rep.rtt_var_sample, Some(DurationNs::ZERO));
        assert!(rep.min_updated);
        r.on_load(&with_echo(4, 160, Some(100), 20)); // 60 − 20 = 40: +15
        let rep = r.on_status_due(t(150 * MS)).unwrap().trial;
        assert_eq!(rep.rtt_var_sample, Some(DurationNs::from_ms(15)));
        assert!(!rep.min_updated);
        // No new echo in a trial interval: the sentinel.
        r.on_load(&with_echo(5, 170, Some(100), 30));
        let rep = r.on_status_due(t(200 * MS)).unwrap().trial;
        assert_eq!(rep.rtt_var_sample, None);
        assert_eq!(rep.rtt_min, Some(DurationNs::from_ms(25)));
        // A response delay one ms over the round trip reads as 0; more, as no sample.
        r.on_load(&with_echo(6, 210, Some(200), 11));
        assert_eq!(
            r.on_status_due(t(250 * MS)).unwrap().trial.rtt_var_sample,
            Some(DurationNs::ZERO)
        );
        r.on_load(&with_echo(7, 260, Some(250), 30));
        assert_eq!(
            r.on_status_due(t(300 * MS)).unwrap().trial.rtt_var_sample,
            None
        );
        // Late datagrams carry no RTT sample.
        r.on_load(&with_echo(3, 320, Some(300), 0));
        assert_eq!(
            r.on_status_due(t(350 * MS)).unwrap().trial.rtt_var_sample,
            None
        );
    }

    #[test]
    fn sub_intervals_carry_rtt_variation_and_the_minimums() {
        let mut r = rx();
        let mut seq = 0;
        for tick in 1..=42i64 {
            seq += 1;
            let at = tick * 50 * MS - MS;
            let rtt = if tick % 2 == 0 { 20 } else { 28 };
            let a = LoadArrival {
                echo: Some(t(at - rtt * MS)),
                ..load(seq, at - 4 * MS, at)
            };
            r.on_load(&a);
            r.on_status_due(t(tick * 50 * MS)).unwrap();
        }
        let (n, s) = r.completed().unwrap();
        assert_eq!(n, 2);
        assert_eq!(s.rttv.min, Some(DurationNs::ZERO));
        assert_eq!(s.rttv.max(), Some(DurationNs::from_ms(8)));
        assert_eq!(s.rttv.count, 20);
        assert_eq!(s.rtt_min, Some(DurationNs::from_ms(20)));
        assert_eq!(s.clock_delta_min, Some(DurationNs::from_ms(4)));
        assert_eq!(s.accum, DurationNs::from_ms(2000));
    }

    #[test]
    fn ce_marks_and_bleaching_when_ecn_is_on() {
        let cfg = ReceiverConfig {
            ecn: true,
            ..ReceiverConfig::default()
        };
        let mut r = LoadReceiver::new(cfg, t(0));
        for (seq, ecn) in [(1, Ecn::Ect0), (2, Ecn::Ce), (3, Ecn::Ce), (4, Ecn::Ect0)] {
            r.on_load(&LoadArrival {
                ecn,
                ..load(seq, 0, MS)
            });
        }
        let rep = r.on_status_due(t(50 * MS)).unwrap().trial;
        assert_eq!((rep.ce_count, rep.ecn_bleaching), (2, false));
        assert_eq!(rep.feedback(0).ce_count, 2);
        r.on_load(&LoadArrival {
            ecn: Ecn::NotEct,
            ..load(5, 0, MS)
        });
        let rep = r.on_status_due(t(100 * MS)).unwrap().trial;
        assert_eq!((rep.ce_count, rep.ecn_bleaching), (0, true));
        // Off: nothing counted.
        let mut r = rx();
        r.on_load(&LoadArrival {
            ecn: Ecn::Ce,
            ..load(1, 0, MS)
        });
        assert_eq!(r.on_status_due(t(50 * MS)).unwrap().trial.ce_count, 0);
        assert_eq!(Ecn::from_bits(0xb8 | 3), Ecn::Ce);
    }

    fn arb_arrival() -> impl Strategy<Value = LoadArrival> {
        (
            (any::<u32>(), 0u32..64, any::<bool>()),
            (
                any::<i64>(),
                any::<i64>(),
                proptest::option::of(any::<i64>()),
                any::<i64>(),
            ),
            (any::<u64>(), 0u8..4),
        )
            .prop_map(
                |((big, small, use_big), (sent, rx, echo, resp), (len, ecn))| LoadArrival {
                    seq: if use_big { big } else { small },
                    payload_len: Bytes(len),
                    sent_at: t(sent),
                    received_at: t(rx),
                    echo: echo.map(t),
                    resp_delay: DurationNs::from_ns(resp),
                    ecn: Ecn::from_bits(ecn),
                },
            )
    }

    proptest! {
        #[test]
        fn any_arrivals_never_panic(
            ecn in any::<bool>(),
            steps in proptest::collection::vec((arb_arrival(), any::<bool>(), any::<i64>()), 0..300),
        ) {
            let cfg = ReceiverConfig { ecn, ..ReceiverConfig::default() };
            let mut r = LoadReceiver::new(cfg, t(0));
            let mut arrivals = 0u64;
            let mut reported = 0u64;
            for (a, status, now) in &steps {
                r.on_load(a);
                arrivals += 1;
                if *status {
                    let rep = r.on_status_due(t(*now)).unwrap();
                    // Every arrival is exactly one of in-order, late or duplicate.
                    prop_assert!(rep.trial.reorder + rep.trial.dup <= rep.trial.rx_datagrams);
                    reported += rep.trial.rx_datagrams;
                    if let Some(s) = rep.subint {
                        let _ = s.ip_rate(IpFamily::V6);
                        prop_assert!(rep.subint_seq > 0);
                    }
                    let _ = rep.trial.feedback(rep.subint_seq);
                    let _ = rep.trial.owdv.mean_ms();
                }
                let _ = r.rx_stopped(t(*now));
            }
            if let Some(rep) = r.on_status_due(t(i64::MAX)) {
                reported += rep.trial.rx_datagrams;
            }
            prop_assert_eq!(reported, arrivals);
        }
    }
}
