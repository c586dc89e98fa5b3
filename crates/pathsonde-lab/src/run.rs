//! `lab run`: build a path, start cross traffic, measure it with pathsonde's
//! real client and server inside the namespaces, set each estimate beside the
//! truth over its own window, tear everything down.

use crate::error::{LabError, Result};
use crate::live::{LivePath, TruthCheck};
use crate::netns;
use crate::topology::{ip_rate_of_l2, Lab, LabSpec, Role};
use crate::truth::QdiscSample;
use pathsonde_core::accuracy::{self, Accuracy, Scored};
use pathsonde_core::estimate::Coalescing;
use pathsonde_core::methods::registry::MethodSettings;
use pathsonde_core::traffic::CrossModel;
use pathsonde_core::units::serde_secs;
use pathsonde_core::verdict::evidence::{self, Honesty, HostEvidence};
use pathsonde_core::verdict::HostLimit;
use pathsonde_core::{stats, BitRate, Bytes, DurationNs, Method, TimeNs, TrainRecord};
use pathsonde_net::client::{measure, ClientConfig};
use pathsonde_net::{clock, MeasurementRun};
use serde::Serialize;
use std::time::Duration;

/// Makes a fresh method for each run.
pub type MethodFactory = dyn Fn() -> Box<dyn Method + Send> + Sync;

#[derive(Debug, Clone)]
pub struct RunOptions {
    pub spec: LabSpec,
    /// Cross-traffic specs (`poisson:30%`, …), one source namespace each.
    pub cross: Vec<String>,
    pub runs: u32,
    /// What the method is told, exactly as `abw` would tell it: the probe
    /// size (also for converting the truth to IP terms), the highest rate
    /// (also sizes the delay line) and the user's `--known-capacity`, if
    /// any — never the lab's own C.  Recorded in the report.
    pub settings: MethodSettings,
    /// How long cross traffic runs before the first measurement.
    pub settle: Duration,
    /// Pause between runs, so the queue drains.
    pub gap: Duration,
    pub seed: u64,
}

/// One measurement beside its truth.
#[derive(Debug, Clone, Serialize)]
pub struct RunRecord {
    pub run: u32,
    pub method: String,
    pub estimate_bps: BitRate,
    pub estimate_low_bps: BitRate,
    pub estimate_high_bps: Option<BitRate>,
    pub capacity_estimate_bps: Option<BitRate>,
    pub cross_traffic_estimate_bps: Option<BitRate>,
    /// A over the estimate's own window, IP layer, for probes of the method's size.
    pub truth_bps: BitRate,
    /// Cross traffic offered over the same window (IP layer).
    pub truth_cross_traffic_bps: BitRate,
    /// (estimate − truth) / truth.
    pub error: f64,
    /// What a perfect reader of the same probes would have erred by: (A
    /// over the probes' own stretches − truth) / truth
    /// ([`crate::truth::ProbeWindows`]); `None` without cross traffic.
    pub sampling_error: Option<f64>,
    /// Whether the estimate's band (`estimate_low_bps..estimate_high_bps`)
    /// held the truth.
    pub in_band: bool,
    /// Packets the bottleneck dropped because this run's probes were there
    /// (beyond what the cross traffic alone loses; [`truth::drops_caused`]);
    /// `None` when the counters do not cover the run.
    ///
    /// [`truth::drops_caused`]: crate::truth::drops_caused
    pub drops_caused: Option<f64>,
    /// The whole measurement (seconds in JSON, as every `_s` field).
    #[serde(with = "serde_secs")]
    pub duration_s: DurationNs,
    /// First probe sent to last probe sent: the window the truth covers.
    #[serde(with = "serde_secs")]
    pub window_s: DurationNs,
    pub probe_bytes: u64,
    pub probe_packets: u64,
    pub trains: u32,
    /// Probe rate over the measurement / A.
    pub intrusiveness: f64,
    /// Probe rate over the measurement / cross-traffic rate (`null` without cross traffic).
    pub overhead: Option<f64>,
    pub converged: bool,
    pub host_limited: Option<String>,
    /// The host-limited verdict's binding limits (`docs/verdict.md`), from
    /// both hosts' capability reports and the trains (the sender's measured
    /// pacing limit): `pathsonde_net::verdict::judge`, as `abw` judges.
    pub host_limits: Vec<HostLimit>,
    /// A binding host limit, or the method's own `host_limited`: the estimate
    /// is the host's, a lower bound on the path's available bandwidth.
    pub available_is_host_limit: bool,
    /// Whether the receiver bunched arrivals (interrupt coalescing, or
    /// threaded NAPI in the lab), as the method detected it.
    pub coalescing: Option<Coalescing>,
    /// The method's own notes on this run.
    pub notes: Vec<String>,
    /// How far the lab's own cross-traffic generators fell behind their
    /// schedules while this run's probes were out (`null` without cross
    /// traffic): late packets leave in clumps, so the cross traffic was
    /// burstier than its model.  A report note names such a run.
    pub cross_generator_lag: Option<crate::truth::GeneratorLag>,
    /// The convergence trace: each train's target, achieved sending and
    /// receiving rates, per-car spread and loss.
    pub trace: Vec<TrainRecord>,
    /// What the run's own trains said of the hosts (sender reach, receiver
    /// drops, timing noise) and the outcome it gave (docs/verdict.md).
    pub host_evidence: Option<HostEvidence>,
    /// The answer against the truth: a measurement whose band holds it, an
    /// honest lower bound, or dishonest (`honesty_why` says how).
    pub honesty: Honesty,
    pub honesty_why: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct RunSummary {
    pub runs: usize,
    pub median_abs_error: f64,
    pub p90_abs_error: f64,
    pub max_abs_error: f64,
    /// Seconds; a median (of two, with an even count), so not always a
    /// whole number of nanoseconds: kept as f64.
    pub median_duration_s: f64,
    /// Share of runs whose band held the truth.
    pub band_coverage: f64,
    /// Median packets dropped because of the probes, over the runs whose
    /// drops are known.
    pub median_drops_caused: Option<f64>,
    /// Runs whose evidence says the path was measured, those that gave a
    /// host-limited bound, and those with no estimate (exit 9 in `abw`).
    pub measured: usize,
    pub host_limited: usize,
    pub no_estimate: usize,
    /// Runs that were dishonest ([`Honesty::Dishonest`]).
    pub dishonest: usize,
    /// Median |error| over the measured runs only.
    pub measured_median_abs_error: Option<f64>,
    /// Mean (estimate − truth) / truth: a lean up or down.
    pub mean_signed_error: Option<f64>,
    /// The sampling floor: median |error| of a perfect reader of the same
    /// probes ([`RunRecord::sampling_error`]); `None` without cross traffic.
    pub sampling_floor: Option<f64>,
    /// Median |error| / sampling floor: 1 is as good as the probes allow.
    pub error_to_floor: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct LabRunReport {
    pub lab: LabSpec,
    /// What every run's method was told (`known_capacity` is the user's, or null).
    pub settings: MethodSettings,
    /// IP-layer capacity for the probes' size.
    pub capacity_ip_bps: BitRate,
    pub cross: Vec<String>,
    pub runs: Vec<RunRecord>,
    pub summary: Option<RunSummary>,
    pub truth_check: Option<TruthCheck>,
    /// The bottleneck qdisc's counters every 100 ms for the whole lab run.
    pub qdisc_series: Vec<QdiscSample>,
    pub notes: Vec<String>,
    /// Each run's full measurement (RTT, convergence trace), for reports.
    #[serde(skip)]
    pub measurements: Vec<MeasurementRun>,
    /// Each run's raw observations (every probe's send and arrival stamps),
    /// parallel to `measurements`, for the archive; kept for the first
    /// [`KEEP_OBSERVATIONS_RUNS`] runs and up to [`KEEP_OBSERVATIONS_PACKETS`]
    /// packets per run, so memory stays bounded on long experiments.
    #[serde(skip)]
    pub observations: Vec<Vec<pathsonde_core::Observation>>,
}

/// Runs whose raw observations a lab run keeps (see [`LabRunReport::observations`]).
pub const KEEP_OBSERVATIONS_RUNS: u32 = 100;
/// Packets per run whose raw observations a lab run keeps.
pub const KEEP_OBSERVATIONS_PACKETS: usize = 200_000;

/// Parses the cross specs against the lab's capacity (for `%`) and MTU.
pub fn parse_cross(spec: &LabSpec, cross: &[String]) -> Result<Vec<CrossModel>> {
    cross
        .iter()
        .map(|c| {
            CrossModel::parse(c, spec.capacity, Bytes(u64::from(spec.mtu)))
                .map_err(|e| LabError::Spec(format!("--cross {c}: {e}")))
        })
        .collect()
}

/// Runs the whole experiment.  `progress` sees each run as it finishes.
pub fn run(
    opts: &RunOptions,
    make_method: &MethodFactory,
    progress: &mut dyn FnMut(&RunRecord),
) -> Result<LabRunReport> {
    let models = parse_cross(&opts.spec, &opts.cross)?;
    let mut spec = opts.spec.clone();
    spec.cross_sources = models.len() as u32;
    let lab = Lab::build(spec)?;
    let result = run_on(&lab, opts, &models, make_method, progress);
    drop(lab);
    result
}

fn run_on(
    lab: &Lab,
    opts: &RunOptions,
    models: &[CrossModel],
    make_method: &MethodFactory,
    progress: &mut dyn FnMut(&RunRecord),
) -> Result<LabRunReport> {
    let spec = &lab.spec;
    let probe_size = opts.settings.packet_size;
    let live = LivePath::start(lab, models, opts.seed, opts.settings.max_rate)?;
    let server_addr = LivePath::server_addr();

    // Let the cross traffic settle, then check the generators against the qdisc.
    let settle_from = clock::monotonic();
    std::thread::sleep(opts.settle);
    let settle_to = clock::monotonic();
    let truth_check = live.check(settle_from + DurationNs::from_ms(200), settle_to);

    let capacity_ip = ip_rate_of_l2(spec.capacity, probe_size);
    let narrow_ip = spec.narrow.map(|n| ip_rate_of_l2(n, probe_size));
    // Each run's probe span, to count the drops it caused once the qdisc
    // series is in.
    let mut spans = Vec::new();
    let mut records = Vec::new();
    let mut measurements = Vec::new();
    let mut observations = Vec::new();
    let mut notes = Vec::new();
    let mut no_estimate = 0usize;
    for run in 0..opts.runs {
        if run > 0 {
            std::thread::sleep(opts.gap);
        }
        let mut method = make_method();
        let snd = lab.ns(Role::Sender);
        let keep = run < KEEP_OBSERVATIONS_RUNS;
        let measured = netns::run_in(&snd, move || {
            let mut first: Option<TimeNs> = None;
            let mut last: Option<TimeNs> = None;
            let mut kept: Vec<pathsonde_core::Observation> = Vec::new();
            let mut kept_packets = 0usize;
            let mut windows = crate::truth::ProbeWindows::default();
            let mut track = |o: &pathsonde_core::Observation| {
                windows.observe(o);
                for p in &o.packets {
                    first = Some(first.map_or(p.sent, |f| f.min(p.sent)));
                    last = Some(last.map_or(p.sent, |l| l.max(p.sent)));
                }
                if keep && kept_packets + o.packets.len() <= KEEP_OBSERVATIONS_PACKETS {
                    kept_packets += o.packets.len();
                    kept.push(o.clone());
                }
            };
            let r = measure(ClientConfig::new(server_addr), method.as_mut(), &mut track)?;
            Ok((r, first, last, kept, windows))
        });
        let (m, first, last, kept, windows) = match measured {
            Ok(x) => x,
            Err(e) => {
                if matches!(e, LabError::Net(pathsonde_net::NetError::NoEstimate(_))) {
                    no_estimate += 1;
                }
                notes.push(format!("run {run}: {e}"));
                continue;
            }
        };
        let (Some(from), Some(to)) = (first, last) else {
            notes.push(format!("run {run}: no probe was sent"));
            continue;
        };
        let truth = live.truth(lab, from, to, probe_size);
        let (truth_a, cross_ip) = (truth.available, truth.cross_ip);
        let lag = live.generator_lag(from, to);
        if let Some(n) = lag.and_then(|l| l.note()) {
            notes.push(format!("run {run}: {n}"));
        }
        let sampled = live.sampled_available(lab, &windows, probe_size);
        let e = &m.estimate;
        // Judged once, with both hosts' reports as well as the trains; the
        // CLI renders this and no longer judges again.
        let v = pathsonde_net::verdict::judge(&m);
        let host_limits: Vec<HostLimit> = v.binding().cloned().collect();
        let probe_rate = e.cost.bytes.bits() as f64 / m.duration.secs_f64().max(1e-9);
        let (honesty, honesty_why) = evidence::honesty(
            e,
            truth_a,
            Some(narrow_ip.map_or(capacity_ip, |n| n.min(capacity_ip))),
        );
        let rec = RunRecord {
            run,
            method: e.method.to_string(),
            estimate_bps: e.available,
            estimate_low_bps: e.low,
            estimate_high_bps: e.high,
            capacity_estimate_bps: e.capacity,
            cross_traffic_estimate_bps: e.cross_traffic,
            truth_bps: truth_a,
            truth_cross_traffic_bps: cross_ip,
            error: accuracy::relative_error(e.available, truth_a),
            sampling_error: sampled.map(|s| accuracy::relative_error(s, truth_a)),
            in_band: e.band_covers(truth_a),
            drops_caused: None,
            duration_s: m.duration,
            window_s: to.since(from),
            probe_bytes: e.cost.bytes.get(),
            probe_packets: e.cost.packets,
            trains: e.cost.trains,
            intrusiveness: probe_rate / truth_a.bps().max(1.0),
            overhead: (cross_ip.bps() > 0.0).then(|| probe_rate / cross_ip.bps()),
            converged: e.converged,
            host_limited: e.host_limited.clone(),
            available_is_host_limit: !host_limits.is_empty() || e.host_limited.is_some(),
            host_limits,
            coalescing: e.coalescing,
            notes: e.notes.clone(),
            cross_generator_lag: lag,
            trace: e.trains.clone(),
            host_evidence: e.host_evidence.clone(),
            honesty,
            honesty_why,
        };
        spans.push((from, to));
        progress(&rec);
        records.push(rec);
        measurements.push(m);
        observations.push(kept);
    }

    // Let the counters cover the last run's drop tail before they stop.
    std::thread::sleep((crate::truth::DROP_TAIL + DurationNs::from_ms(150)).to_std());
    let (qdisc_series, stop_notes) = live.stop();
    notes.extend(stop_notes);
    for (rec, (from, to)) in records.iter_mut().zip(spans) {
        rec.drops_caused =
            crate::truth::drops_caused(&qdisc_series, from, to, (settle_from, settle_to));
    }
    if let Some(c) = &truth_check {
        if c.relative_difference.abs() > 0.02 {
            notes.push(format!(
                "the bottleneck carried {:.1} % {} cross traffic than the generators sent while no probe ran: the truth is less certain than usual",
                c.relative_difference.abs() * 100.0,
                if c.relative_difference < 0.0 { "less" } else { "more" }
            ));
        }
    }
    Ok(LabRunReport {
        lab: lab.spec.clone(),
        settings: opts.settings,
        capacity_ip_bps: narrow_ip.map_or(capacity_ip, |n| n.min(capacity_ip)),
        cross: models.iter().map(CrossModel::describe).collect(),
        summary: summarize(&records, no_estimate),
        runs: records,
        truth_check,
        qdisc_series,
        notes,
        measurements,
        observations,
    })
}

/// The runs' accuracy (core's one definition, [`Accuracy`]) and median
/// time; `None` without runs.
pub fn summarize(records: &[RunRecord], no_estimate: usize) -> Option<RunSummary> {
    let acc = Accuracy::of(records.iter().map(RunRecord::scored));
    let durations: Vec<f64> = records.iter().map(|r| r.duration_s.secs_f64()).collect();
    let host_limited = |r: &&RunRecord| r.host_evidence.as_ref().is_some_and(|h| h.host_limited());
    let measured_errors: Vec<f64> = records
        .iter()
        .filter(|r| !host_limited(r))
        .map(|r| r.error.abs())
        .collect();
    let signed: Vec<f64> = records.iter().map(|r| r.error).collect();
    let floor_errors: Vec<f64> = records
        .iter()
        .filter_map(|r| r.sampling_error.map(f64::abs))
        .collect();
    let sampling_floor = stats::median(&floor_errors);
    Some(RunSummary {
        mean_signed_error: stats::mean(&signed),
        sampling_floor,
        error_to_floor: match (acc.median_abs_error, sampling_floor) {
            (Some(e), Some(f)) if f > 0.0 => Some(e / f),
            _ => None,
        },
        measured: measured_errors.len(),
        host_limited: records.iter().filter(host_limited).count(),
        no_estimate,
        dishonest: records
            .iter()
            .filter(|r| r.honesty == Honesty::Dishonest)
            .count(),
        measured_median_abs_error: stats::median(&measured_errors),
        runs: records.len(),
        median_abs_error: acc.median_abs_error?,
        p90_abs_error: acc.p90_abs_error?,
        max_abs_error: acc.max_abs_error?,
        median_duration_s: stats::median(&durations)?,
        band_coverage: acc.band_coverage?,
        median_drops_caused: acc.drops_caused_median,
    })
}

impl RunRecord {
    /// This run as core's accuracy summary reads it.
    pub fn scored(&self) -> Scored {
        Scored::estimate(self.error, self.in_band, self.drops_caused)
    }
}
