//! `lab run --method capacity`: RFC 9097's Maximum IP-Layer Capacity over
//! the UDP Speed Test Protocol, measured across a lab path and set beside
//! its truth.
//!
//! Each run is one UDPST test (`pathsonde_net::udpst::run`, the client
//! behind `pathsonde capacity`) from the sender namespace to the UDPST
//! server the receiver namespace runs on port 24601 ([`LivePath`]),
//! upstream: the load crosses the tight link (the lab shapes `rtr → rcv`
//! only, so a downstream load would never meet the bottleneck).
//!
//! **The truth** is the tight link's rate at the IP layer minus the
//! unresponsive cross traffic offered to it over the test's window:
//!
//! ```text
//! truth = (C − X_L2) · r        r = IP rate / Ethernet-without-FCS rate of the test's own datagrams
//! ```
//!
//! tbf counts each packet with its 14-byte Ethernet header, so how much of
//! C the IP layer gets depends on the packet size: 1250/1264 = 98.89 % for
//! UDPST's default 1250-byte datagrams, 1500/1514 = 99.08 % for the
//! 1500-byte packets the available-bandwidth methods use.  The sending-rate
//! table mixes full datagrams with smaller add-on ones, so `r` is taken from
//! the test's own sub-interval rows (their IP and Ethernet rates differ by
//! exactly 14 bytes per datagram), not from a nominal size.  The cross
//! traffic X_L2 comes from the generators' logs (`crate::truth`), over
//! `[start of the first sub-interval, end of the last]`, the times the
//! client heard of each sub-interval less one sub-interval for the first
//! (accurate to about one status-feedback interval, 50 ms).
//!
//! The estimate is the maximum over sub-intervals; it has **no band**, so
//! band coverage does not apply (`accuracy::Scored::unbanded`).  The mean
//! and the median sub-interval rate are kept beside it, with the truth over
//! the maximum's own sub-interval (`truth_at_max_bps`): with Poisson cross
//! traffic the quietest second is the one a maximum picks.

use crate::error::{LabError, Result};
use crate::live::{LivePath, TruthCheck};
use crate::netns;
use crate::run::parse_cross;
use crate::topology::{ip_rate_of_l2, Lab, LabSpec, Role};
use crate::truth::QdiscSample;
use pathsonde_core::accuracy::{self, Accuracy, Scored};
use pathsonde_core::capacity::summary::SubIntervalRow;
use pathsonde_core::capacity::zero_loss::ZeroLoss;
use pathsonde_core::traffic::CrossModel;
use pathsonde_core::units::serde_secs;
use pathsonde_core::{stats, BitRate, DurationNs, TimeNs};
use pathsonde_net::clock;
use pathsonde_net::udpst::{self, Algorithm, CapacityConfig, CapacityRun, Direction};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The method name `lab run --method` and `compare --methods` take.
pub const METHOD: &str = "capacity";
/// `compare`'s name for the zero-loss fit of the same tests, scored as a
/// method of its own (it has a band; the maximum has none).
pub const ZERO_LOSS_METHOD: &str = "capacity-zero-loss";

/// Whether `method` names a row made from UDPST tests.
pub fn is_capacity_method(method: &str) -> bool {
    method == METHOD || method == ZERO_LOSS_METHOD
}

/// What each UDPST test is asked for.  Everything else is the protocol's
/// default (`CapacityConfig::default()`: one connection, 1 s sub-intervals,
/// 50 ms status feedback, jumbo sizes allowed above 1 Gb/s, search from row 0).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CapacitySettings {
    /// Test duration, whole seconds, 5 ..= 3600 (the protocol counts seconds).
    #[serde(with = "serde_secs")]
    pub duration_s: DurationNs,
    pub algorithm: Algorithm,
}

impl Default for CapacitySettings {
    fn default() -> Self {
        CapacitySettings {
            duration_s: DurationNs::from_secs(10),
            algorithm: Algorithm::B,
        }
    }
}

impl CapacitySettings {
    pub fn validate(&self) -> Result<()> {
        let d = self.duration_s;
        if !(5..=3600).contains(&(d.ns() / 1_000_000_000)) || d.ns() % 1_000_000_000 != 0 {
            return Err(LabError::Spec(format!(
                "capacity test duration {d} must be whole seconds from 5 s to 3600 s"
            )));
        }
        Ok(())
    }

    fn config(&self) -> CapacityConfig {
        CapacityConfig {
            server: LivePath::udpst_addr(),
            direction: Direction::Upstream,
            duration: self.duration_s,
            algorithm: self.algorithm,
            ..CapacityConfig::default()
        }
    }
}

/// One UDPST test as the lab saw it: the run, and when the client heard of
/// each sub-interval (CLOCK_MONOTONIC, the clock the truth is kept on).
pub struct Measured {
    pub run: CapacityRun,
    pub row_at: Vec<TimeNs>,
    pub begin: TimeNs,
    pub end: TimeNs,
}

impl Measured {
    /// The rows kept in the report (the client drops rows past the planned count).
    pub fn rows(&self) -> &[SubIntervalRow] {
        &self.run.report.sub_intervals
    }

    /// The sub-interval length the server granted.
    pub fn sub_interval(&self) -> DurationNs {
        DurationNs::from_ms(i64::from(self.run.negotiated.sub_interval_ms).max(1))
    }

    /// `[start, end]` of sub-interval `i` (0-based), as the client heard of it.
    pub fn interval_window(&self, i: usize) -> Option<(TimeNs, TimeNs)> {
        let end = *self.row_at.get(i)?;
        Some((end - self.sub_interval(), end))
    }

    /// The load's window: the first sub-interval's start to the last's end.
    pub fn window(&self) -> Option<(TimeNs, TimeNs)> {
        let n = self.rows().len().min(self.row_at.len());
        let first = self.interval_window(0)?.0;
        let last = *self.row_at.get(n.checked_sub(1)?)?;
        Some((first, last))
    }
}

/// Times a setup refused with code 13 (no connection free) is tried again, 0.5 s apart.
const BUSY_RETRIES: u32 = 10;

/// Runs one UDPST test from the sender namespace to the receiver's server.
pub fn measure(lab: &Lab, settings: &CapacitySettings) -> std::result::Result<Measured, String> {
    let cfg = settings.config();
    let snd = lab.ns(Role::Sender);
    let measured = netns::run_in(&snd, move || {
        // The server holds a finished test's connection a little while
        // (its stop grace, and the watchdog if the last PDUs were lost) and
        // serves one test at a time: a setup refused for want of a
        // connection (code 13) right after the previous test is tried again.
        let mut tries = 0;
        let (run, row_at, begin, end) = loop {
            let mut row_at = Vec::new();
            let begin = clock::monotonic();
            let mut on_row = |_: &SubIntervalRow| row_at.push(clock::monotonic());
            match udpst::run(&cfg, &mut on_row) {
                Err(udpst::CapacityError::SetupRejected { code: 13, .. })
                    if tries < BUSY_RETRIES =>
                {
                    tries += 1;
                    std::thread::sleep(Duration::from_millis(500));
                }
                Err(e) => return Err(LabError::Capability(format!("UDPST test: {e}"))),
                Ok(run) => break (run, row_at, begin, clock::monotonic()),
            }
        };
        Ok(Measured {
            run,
            row_at,
            begin,
            end,
        })
    });
    match measured {
        Ok(m) if m.rows().is_empty() => Err("the test reported no sub-interval".into()),
        Ok(m) if m.window().is_none() => Err("no sub-interval time was recorded".into()),
        Ok(m) => Ok(m),
        Err(e) => Err(e.to_string()),
    }
}

/// Share of an L2 (tbf) rate the IP layer gets for `rows`' datagrams:
/// their IP rate over their Ethernet rate without FCS (14 bytes more per
/// datagram, what tbf counts on a veth).  `None` without traffic.
pub fn ip_share(rows: &[SubIntervalRow]) -> Option<f64> {
    let ip: f64 = rows.iter().map(|r| r.ip_layer_capacity_bps.bps()).sum();
    let eth: f64 = rows.iter().map(|r| r.eth_no_fcs().bps()).sum();
    (ip > 0.0 && eth > 0.0).then(|| ip / eth)
}

/// The truth over `[from, to]` for datagrams whose IP share of L2 is `share`.
fn truth_over(
    live: &LivePath,
    lab: &Lab,
    from: TimeNs,
    to: TimeNs,
    share: f64,
) -> (BitRate, BitRate) {
    let cross_l2 = live.cross_l2(from, to);
    let tight = (lab.spec.capacity - cross_l2)
        .max(BitRate::ZERO)
        .scale(share);
    let truth = lab.spec.narrow.map_or(tight, |n| n.scale(share).min(tight));
    (truth, cross_l2)
}

/// What one test measured and its truth; the parts `lab run` and `compare` share.
#[derive(Debug, Clone)]
pub struct Judged {
    pub max: BitRate,
    pub mean: BitRate,
    pub median: BitRate,
    pub truth: BitRate,
    pub truth_at_max: BitRate,
    /// The load offered in the maximum's sub-interval (delivered / delivered share).
    pub offered_at_max: BitRate,
    pub cross_l2: BitRate,
    pub share: f64,
    pub from: TimeNs,
    pub to: TimeNs,
}

/// Sets a test beside its truth.
pub fn judge(live: &LivePath, lab: &Lab, m: &Measured) -> Option<Judged> {
    let rows = m.rows();
    let summary = m.run.report.summary.as_ref()?;
    let share = ip_share(rows)?;
    let (from, to) = m.window()?;
    let (truth, cross_l2) = truth_over(live, lab, from, to, share);
    let at = rows
        .iter()
        .position(|r| r.interval == summary.max_interval)
        .unwrap_or(0);
    let max_share = ip_share(std::slice::from_ref(&rows[at])).unwrap_or(share);
    let truth_at_max = m
        .interval_window(at)
        .map_or(truth, |(a, b)| truth_over(live, lab, a, b, max_share).0);
    let delivered = rows[at].delivered_percent / 100.0;
    let offered_at_max = if delivered > 0.0 {
        rows[at].ip_layer_capacity_bps.scale(1.0 / delivered)
    } else {
        rows[at].ip_layer_capacity_bps
    };
    let rates: Vec<f64> = rows.iter().map(|r| r.ip_layer_capacity_bps.bps()).collect();
    Some(Judged {
        max: summary.max_ip_layer_capacity_bps,
        mean: summary.ip_layer_capacity_bps,
        median: BitRate::from_bps(stats::median(&rates)?),
        truth,
        truth_at_max,
        offered_at_max,
        cross_l2,
        share,
        from,
        to,
    })
}

/// Notes on one test: its warnings, a status that was not 0.
pub fn notes_of(run: &CapacityRun) -> Vec<String> {
    let mut notes: Vec<String> = run
        .warnings
        .iter()
        .map(|w| format!("warning {}: {}", w.code, w.message))
        .collect();
    if run.error_status != 0 {
        notes.push(format!("ErrorStatus {}", run.error_status));
    }
    if run.datagrams_clamped > 0 {
        notes.push(format!(
            "{} load datagrams sent at the path MTU's largest payload instead of their jumbo row's",
            run.datagrams_clamped
        ));
    }
    notes
}

/// Datagrams of load the test sent within its sub-intervals (delivered + lost).
pub fn load_datagrams(rows: &[SubIntervalRow]) -> u64 {
    rows.iter().map(|r| r.rx_datagrams + r.loss_count).sum()
}

#[derive(Debug, Clone)]
pub struct CapacityRunOptions {
    pub spec: LabSpec,
    /// Cross-traffic specs (`poisson:30%`, …), one source namespace each.
    pub cross: Vec<String>,
    pub runs: u32,
    pub test: CapacitySettings,
    /// How long cross traffic runs before the first test.
    pub settle: Duration,
    /// Pause between tests, so the queue drains.
    pub gap: Duration,
    pub seed: u64,
}

/// One UDPST test beside its truth.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CapacityRecord {
    pub run: u32,
    pub method: String,
    pub algorithm: Algorithm,
    /// The estimate: RFC 9097's Maximum IP-Layer Capacity, the highest
    /// sub-interval rate.  One number, no band.
    pub max_ip_layer_capacity_bps: BitRate,
    /// The same, under the key every lab run record has (plots read it).
    pub estimate_bps: BitRate,
    /// Which sub-interval (1, 2, …) reached it, and when it ended (from the
    /// first status feedback; the protocol's `max_time_s`).
    pub max_interval: u32,
    #[serde(with = "serde_secs")]
    pub max_time_s: DurationNs,
    /// The mean and the median of the sub-interval rates.
    pub mean_ip_layer_capacity_bps: BitRate,
    pub median_ip_layer_capacity_bps: BitRate,
    /// Every sub-interval's IP-layer rate, in order.
    pub sub_interval_bps: Vec<BitRate>,
    /// The tight link's IP-layer rate minus the cross traffic offered over
    /// the test's window (module docs).
    pub truth_bps: BitRate,
    /// The same over the maximum's own sub-interval.
    pub truth_at_max_bps: BitRate,
    /// Cross traffic offered to the tight link over the test's window, L2.
    pub truth_cross_traffic_l2_bps: BitRate,
    /// Cross traffic the tight link actually carried over the window, L2:
    /// what the qdisc sent between its samples inside the window less the
    /// test's own delivered load over the same span (both without the
    /// first, ramping sub-interval).  Below the offered
    /// rate when the test's load made the queue drop cross traffic: then
    /// the test took more than the truth leaves it.  `None` when fewer than
    /// two samples fall inside the window.
    pub cross_delivered_l2_bps: Option<BitRate>,
    /// The test's load offered in the maximum's sub-interval (delivered over
    /// the share delivered): under tail drop each flow keeps about its share
    /// of what is offered, so a load held above the link takes cross
    /// traffic's room.
    pub offered_at_max_bps: BitRate,
    /// IP rate / L2 rate for this test's datagrams (1250/1264 ≈ 0.9889 for
    /// full-size UDPST datagrams).
    pub ip_share: f64,
    /// (max − truth) / truth: the score.
    pub error: f64,
    /// (max − truth at max) / truth at max.
    pub error_at_max: f64,
    /// (mean − truth) / truth and (median − truth) / truth.
    pub mean_error: f64,
    pub median_error: f64,
    /// Packets the bottleneck dropped because the test ran (the qdisc's
    /// drops over its window and tail, less the cross traffic's own loss
    /// rate): a capacity test fills the queue by design, so this is its
    /// harm.  `None` when the counters do not cover the test.
    pub drops_caused: Option<f64>,
    /// Load datagrams the server counted lost, and the share delivered.
    pub loss_count: u64,
    pub delivered_percent: f64,
    /// UDP payload bytes the client sent (load and control) and received
    /// (status feedback and control), and load datagrams sent within the
    /// sub-intervals.
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub load_datagrams: u64,
    /// The whole test, setup to the last answer.
    #[serde(with = "serde_secs")]
    pub duration_s: DurationNs,
    /// The load's window the truth covers, and its ends on CLOCK_MONOTONIC
    /// (the clock of `qdisc_series`' `at_ns`).
    #[serde(with = "serde_secs")]
    pub window_s: DurationNs,
    pub window_start_ns: i64,
    pub window_end_ns: i64,
    /// The protocol's ErrorStatus (0: clean).
    pub error_status: u16,
    /// pathsonde's zero-loss fit beside the maximum (core's
    /// `capacity::zero_loss`): the rate at zero loss with its band, or why
    /// it could not tell.
    pub zero_loss: ZeroLoss,
    /// (rate at zero loss − truth) / truth, and whether its band held the
    /// truth; `None` when the fit could not tell.
    pub zero_loss_error: Option<f64>,
    pub zero_loss_in_band: Option<bool>,
    /// The sending host, not the path, held the maximum, in words (as
    /// `pathsonde capacity` says it: `CapacityRun::sender_held_maximum`);
    /// the maximum is then a lower bound.  Absent from tests stored before
    /// the lab reported it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_limited: Option<String>,
    pub notes: Vec<String>,
}

impl CapacityRecord {
    /// This run as core's accuracy summary reads it: scored, without a band.
    pub fn scored(&self) -> Scored {
        Scored::unbanded(self.error, self.drops_caused)
    }

    /// The zero-loss fit's reading scored with its band; a fit that could
    /// not tell is a run without an estimate.
    pub fn zero_loss_scored(&self) -> Scored {
        match (self.zero_loss_error, self.zero_loss_in_band) {
            (Some(e), Some(held)) => Scored::estimate(e, held, self.drops_caused),
            _ => Scored {
                score: None,
                drops_caused: self.drops_caused,
            },
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CapacitySummaryLab {
    pub runs: usize,
    /// |max − truth| / truth over the runs (core's `Accuracy`).
    pub median_abs_error: f64,
    pub p90_abs_error: f64,
    pub max_abs_error: f64,
    pub mean_signed_error: f64,
    /// The same for the mean and the median sub-interval rate.
    pub median_abs_error_of_mean: Option<f64>,
    pub median_abs_error_of_median: Option<f64>,
    /// Always `null`: the maximum has no band (kept so that readers of
    /// `lab run` summaries find the key).
    pub band_coverage: Option<f64>,
    pub median_duration_s: f64,
    pub median_drops_caused: Option<f64>,
    /// The zero-loss fit over the same runs: how many gave a reading, its
    /// errors and how often its band held the truth.
    pub zero_loss: Accuracy,
    /// Tests whose maximum the sending host held (a lower bound, not the
    /// path's capacity: [`CapacityRecord::host_limited`]).
    #[serde(default)]
    pub host_limited: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct LabCapacityReport {
    pub lab: LabSpec,
    pub method: String,
    /// What each test asked for.
    pub test: CapacitySettings,
    pub direction: String,
    pub udpst_server: String,
    /// The tight link at the IP layer for full-size (1250-byte) UDPST datagrams.
    pub capacity_ip_bps: BitRate,
    pub cross: Vec<String>,
    pub runs: Vec<CapacityRecord>,
    pub summary: Option<CapacitySummaryLab>,
    pub truth_check: Option<TruthCheck>,
    /// The bottleneck qdisc's counters every 100 ms for the whole lab run.
    pub qdisc_series: Vec<QdiscSample>,
    pub notes: Vec<String>,
}

/// The summary of `records`; `None` without runs.
pub fn summarize(records: &[CapacityRecord]) -> Option<CapacitySummaryLab> {
    let acc = Accuracy::of(records.iter().map(CapacityRecord::scored));
    let of = |f: fn(&CapacityRecord) -> f64| {
        Accuracy::of(records.iter().map(|r| Scored::unbanded(f(r), None))).median_abs_error
    };
    let durations: Vec<f64> = records.iter().map(|r| r.duration_s.secs_f64()).collect();
    Some(CapacitySummaryLab {
        runs: records.len(),
        median_abs_error: acc.median_abs_error?,
        p90_abs_error: acc.p90_abs_error?,
        max_abs_error: acc.max_abs_error?,
        mean_signed_error: acc.mean_signed_error?,
        median_abs_error_of_mean: of(|r| r.mean_error),
        median_abs_error_of_median: of(|r| r.median_error),
        band_coverage: acc.band_coverage,
        median_duration_s: stats::median(&durations)?,
        median_drops_caused: acc.drops_caused_median,
        zero_loss: Accuracy::of(records.iter().map(CapacityRecord::zero_loss_scored)),
        host_limited: records.iter().filter(|r| r.host_limited.is_some()).count(),
    })
}

/// A record from a test and its judgement (drops are filled in later).
pub fn record(run: u32, m: &Measured, j: &Judged) -> CapacityRecord {
    let summary = m.run.report.summary.as_ref();
    let err = |x: BitRate| accuracy::relative_error(x, j.truth);
    let zero_loss = &m.run.report.zero_loss;
    CapacityRecord {
        host_limited: m.run.sender_held_maximum(),
        run,
        method: METHOD.into(),
        algorithm: m.run.config.algorithm,
        max_ip_layer_capacity_bps: j.max,
        estimate_bps: j.max,
        max_interval: summary.map_or(0, |s| s.max_interval),
        max_time_s: summary.map_or(DurationNs::ZERO, |s| s.max_time_s),
        mean_ip_layer_capacity_bps: j.mean,
        median_ip_layer_capacity_bps: j.median,
        sub_interval_bps: m.rows().iter().map(|r| r.ip_layer_capacity_bps).collect(),
        truth_bps: j.truth,
        truth_at_max_bps: j.truth_at_max,
        truth_cross_traffic_l2_bps: j.cross_l2,
        cross_delivered_l2_bps: None,
        offered_at_max_bps: j.offered_at_max,
        ip_share: j.share,
        error: err(j.max),
        error_at_max: accuracy::relative_error(j.max, j.truth_at_max),
        mean_error: err(j.mean),
        median_error: err(j.median),
        drops_caused: None,
        loss_count: summary.map_or(0, |s| s.loss_count),
        delivered_percent: summary.map_or(0.0, |s| s.delivered_percent),
        bytes_sent: m.run.bytes_sent.get(),
        bytes_received: m.run.bytes_received.get(),
        load_datagrams: load_datagrams(m.rows()),
        duration_s: m.end.since(m.begin),
        window_s: j.to.since(j.from),
        window_start_ns: j.from.ns(),
        window_end_ns: j.to.ns(),
        error_status: m.run.error_status,
        zero_loss: zero_loss.clone(),
        zero_loss_error: zero_loss.fitted().map(|(a, _, _)| err(a)),
        zero_loss_in_band: zero_loss.holds(j.truth),
        notes: notes_of(&m.run),
    }
}

/// Cross traffic the tight link carried over a test (L2): the qdisc's rate
/// between its samples inside the test's sub-intervals after the first,
/// less the test's mean delivered rate over those same sub-intervals at L2.
/// The first sub-interval (the search ramping up) is left out of both, so
/// that a span the qdisc samples only partly does not weigh it differently
/// in the two; with a single sub-interval the whole window is used.
fn cross_delivered(
    series: &[QdiscSample],
    rec: &CapacityRecord,
    from: TimeNs,
    to: TimeNs,
) -> Option<BitRate> {
    let n = rec.sub_interval_bps.len();
    let (start, rates) = if n >= 2 {
        let dt = DurationNs::from_ns(to.since(from).ns() / n as i64);
        (from + dt, &rec.sub_interval_bps[1..])
    } else {
        (from, &rec.sub_interval_bps[..])
    };
    let q = crate::truth::qdisc_rate(series, start, to)?;
    let mean = rates.iter().map(|r| r.bps()).sum::<f64>() / rates.len().max(1) as f64;
    Some((q - BitRate::from_bps(mean / rec.ip_share.max(1e-9))).max(BitRate::ZERO))
}

/// Runs the whole experiment on a lab it builds and always tears down.
/// `progress` sees each test as it finishes.
pub fn run(
    opts: &CapacityRunOptions,
    progress: &mut dyn FnMut(&CapacityRecord),
) -> Result<LabCapacityReport> {
    opts.test.validate()?;
    let models = parse_cross(&opts.spec, &opts.cross)?;
    let mut spec = opts.spec.clone();
    spec.cross_sources = models.len() as u32;
    let lab = Lab::build(spec)?;
    let result = run_on(&lab, opts, &models, progress);
    drop(lab);
    result
}

fn run_on(
    lab: &Lab,
    opts: &CapacityRunOptions,
    models: &[CrossModel],
    progress: &mut dyn FnMut(&CapacityRecord),
) -> Result<LabCapacityReport> {
    // The delay line (if any) must carry the load: a search may overshoot
    // the tight link before it backs off.
    let live = LivePath::start(lab, models, opts.seed, lab.spec.capacity.scale(2.0))?;
    let settle_from = clock::monotonic();
    std::thread::sleep(opts.settle);
    let settle_to = clock::monotonic();
    let truth_check = live.check(settle_from + DurationNs::from_ms(200), settle_to);
    let mut records = Vec::new();
    let mut spans = Vec::new();
    let mut notes = Vec::new();
    for run in 0..opts.runs {
        if run > 0 {
            std::thread::sleep(opts.gap);
        }
        let m = match measure(lab, &opts.test) {
            Ok(m) => m,
            Err(e) => {
                notes.push(format!("run {run}: {e}"));
                continue;
            }
        };
        let Some(j) = judge(&live, lab, &m) else {
            notes.push(format!("run {run}: no sub-interval carried traffic"));
            continue;
        };
        let rec = record(run, &m, &j);
        spans.push((j.from, j.to));
        progress(&rec);
        records.push(rec);
    }
    std::thread::sleep((crate::truth::DROP_TAIL + DurationNs::from_ms(150)).to_std());
    let (qdisc_series, stop_notes) = live.stop();
    notes.extend(stop_notes);
    for (rec, (from, to)) in records.iter_mut().zip(spans) {
        rec.drops_caused =
            crate::truth::drops_caused(&qdisc_series, from, to, (settle_from, settle_to));
        rec.cross_delivered_l2_bps = cross_delivered(&qdisc_series, rec, from, to);
    }
    if let Some(c) = &truth_check {
        if c.relative_difference.abs() > 0.02 {
            notes.push(format!(
                "the bottleneck carried {:.1} % {} cross traffic than the generators sent while no test ran: the truth is less certain than usual",
                c.relative_difference.abs() * 100.0,
                if c.relative_difference < 0.0 { "less" } else { "more" }
            ));
        }
    }
    let full = pathsonde_core::Bytes(1250);
    Ok(LabCapacityReport {
        lab: lab.spec.clone(),
        method: METHOD.into(),
        test: opts.test,
        direction: "upstream".into(),
        udpst_server: LivePath::udpst_addr().to_string(),
        capacity_ip_bps: lab
            .spec
            .narrow
            .map_or(ip_rate_of_l2(lab.spec.capacity, full), |n| {
                ip_rate_of_l2(n.min(lab.spec.capacity), full)
            }),
        cross: models.iter().map(CrossModel::describe).collect(),
        summary: summarize(&records),
        runs: records,
        truth_check,
        qdisc_series,
        notes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(mbps: f64, dps: f64) -> SubIntervalRow {
        let mut r: SubIntervalRow = serde_json::from_value(serde_json::json!({
            "interval": 1, "time_s": 1.0, "active_connections": 1, "rx_datagrams": 0,
            "rx_bytes": 0, "delivered_percent": 100.0, "loss_count": 0,
            "reordered_count": 0, "replicated_count": 0, "loss_ratio": 0.0,
            "reordered_ratio": 0.0, "replicated_ratio": 0.0, "ce_count": 0,
            "ce_percent_of_delivered": 0.0, "pdv_min_s": null, "pdv_avg_s": null,
            "pdv_max_s": null, "pdv_range_s": null, "rtt_var_min_s": null,
            "rtt_var_avg_s": null, "rtt_var_max_s": null, "rtt_var_range_s": null,
            "ip_layer_capacity_bps": 0.0, "datagrams_per_sec": 0.0,
            "min_one_way_delay_s": null, "clock_delta_min_s": null, "rtt_min_s": null
        }))
        .expect("a row");
        r.ip_layer_capacity_bps = BitRate::from_mbps(mbps);
        r.datagrams_per_sec = dps;
        r
    }

    #[test]
    fn the_ip_share_follows_the_datagram_size() {
        // 98.9 Mb/s of 1250-byte datagrams: 9890 datagrams/s.
        let full = row(98.9, 98.9e6 / 8.0 / 1250.0);
        let s = ip_share(std::slice::from_ref(&full)).unwrap();
        assert!((s - 1250.0 / 1264.0).abs() < 1e-12, "{s}");
        // Smaller add-on datagrams in the mix lower it.
        let small = row(1.0, 1e6 / 8.0 / 200.0);
        let mixed = ip_share(&[full, small]).unwrap();
        assert!(mixed < s);
        assert!(ip_share(&[row(0.0, 0.0)]).is_none());
    }

    #[test]
    fn durations_must_be_whole_seconds_from_five() {
        let ok = CapacitySettings {
            duration_s: DurationNs::from_secs(5),
            algorithm: Algorithm::C,
        };
        assert!(ok.validate().is_ok());
        for bad in [DurationNs::from_secs(4), DurationNs::from_ms(5500)] {
            let s = CapacitySettings {
                duration_s: bad,
                ..ok
            };
            assert!(s.validate().is_err(), "{bad}");
        }
    }
}
