//! `compare`: every chosen method on one lab path, one at a time, over a
//! sweep of cross-traffic kinds and loads, each estimate beside the truth
//! over its own window.
//!
//! The procedure is the comparison paper's (Shriram et al. 2005, 3.1): cross
//! traffic is started first and left to settle, then each tool runs alone
//! after a settling delay of its own.  One lab serves the whole sweep: the
//! namespaces, the bottleneck, the pathsonde server and the truth sampler
//! stay up, and only the cross-traffic source is replaced when the load
//! changes.  The statistics of the table live in [`table`]; the same sweep
//! on a chain of routers, where `hops` runs beside the end-to-end methods,
//! in [`chain`].

pub mod chain;
mod record;
pub mod table;

use crate::capacity::{self, CapacitySettings};
use crate::error::{LabError, Result};
use crate::hops_lab::{self, HopsLabPlan};
use crate::live::{LivePath, TruthCheck};
use crate::run::parse_cross;
use crate::topology::{ip_rate_of_l2, Lab, LabSpec, Role};
use crate::truth::{self, QdiscSample};
use pathsonde_core::accuracy::Scored;
use pathsonde_core::estimate::Coalescing;
use pathsonde_core::methods::registry::MethodSettings;
use pathsonde_core::units::{serde_secs, serde_std_secs};
use pathsonde_core::{BitRate, Bytes, DurationNs, Method, TimeNs};
use pathsonde_net::clock;
use serde::{Deserialize, Serialize};
use std::time::Duration;

use record::{capacity_record, measure_once, qdisc_truth, record, zero_loss_record};
pub use table::{rows, Row};

/// Builds a fresh method by registry name from the sweep's settings, or says
/// why it cannot.
pub type NamedFactory =
    dyn Fn(&str, &MethodSettings) -> std::result::Result<Box<dyn Method + Send>, String> + Sync;

/// What to compare, and how.
#[derive(Debug, Clone)]
pub struct CompareOptions {
    /// The lab path (its `cross_sources` is set to one: a sweep runs one
    /// cross-traffic source at a time).
    pub spec: LabSpec,
    /// Cross-traffic kinds with their options but without a rate, e.g.
    /// `poisson`, `mix:flows=4` (`docs/cross-traffic.md`).
    pub kinds: Vec<String>,
    /// Loads in percent of the tight link's capacity.
    pub loads: Vec<f64>,
    /// Registry names, in the order they run at each load; `capacity` is
    /// RFC 9097's maximum IP-layer capacity over UDPST ([`crate::capacity`]),
    /// judged against its own truth (the tight link's IP-layer rate minus
    /// the cross traffic), not against A.
    pub methods: Vec<String>,
    /// What each `capacity` test asks for.
    pub capacity: CapacitySettings,
    /// Runs of each method at each load.
    pub runs: u32,
    /// Cross traffic alone after each load starts, before the first tool.
    pub settle: Duration,
    /// Quiet pause before each tool starts (the paper's settling delay), and
    /// between that tool's runs, so a queue the last probe left can drain.
    pub tool_settle: Duration,
    /// What every method is told, exactly as `abw` would tell it: the probe
    /// size (also for the IP-layer truth), the highest rate (also sizes the
    /// delay line, if any) and the user's `--known-capacity`, if any —
    /// never the lab's own C.  Recorded in the report.
    pub settings: MethodSettings,
    pub seed: u64,
    /// Run on this chain of routers instead of `spec`'s two-host path
    /// ([`chain`]): its cross traffic is replaced by each kind and load of
    /// the sweep, its `runs` and `seed` are the sweep's.  `hops` is a
    /// method only here.
    pub chain: Option<HopsLabPlan>,
}

impl CompareOptions {
    /// The full cross-traffic spec of `kind` at `load` percent: the rate
    /// goes in as the first positional part (`mix:flows=4` → `mix:30%:flows=4`).
    pub fn cross_spec(kind: &str, load: f64) -> String {
        let rate = format!("{}%", trim_float(load));
        match kind.split_once(':') {
            Some((k, rest)) => format!("{k}:{rate}:{rest}"),
            None => format!("{kind}:{rate}"),
        }
    }

    pub fn validate(&self) -> Result<()> {
        if self.kinds.is_empty() || self.loads.is_empty() || self.methods.is_empty() {
            return Err(LabError::Spec(
                "compare needs at least one cross-traffic kind, load and method".into(),
            ));
        }
        if let Some(l) = self
            .loads
            .iter()
            .find(|l| !(l.is_finite() && (0.0..100.0).contains(*l)))
        {
            return Err(LabError::Spec(format!(
                "load {l} % must be in [0, 100) of the tight link"
            )));
        }
        if self.runs == 0 || self.runs > 1000 {
            return Err(LabError::Spec(format!(
                "runs {} must be 1..1000",
                self.runs
            )));
        }
        if let Some(plan) = &self.chain {
            return self.validate_chain(plan);
        }
        if self.methods.iter().any(|m| m == hops_lab::METHOD) {
            return Err(LabError::Spec(
                "--methods hops runs on a chain of routers: give --hops N and --tight-at K".into(),
            ));
        }
        if self.methods.iter().any(|m| m == capacity::METHOD) {
            self.capacity.validate()?;
        }
        let mut spec = self.spec.clone();
        spec.cross_sources = 1;
        spec.validate()?;
        for kind in &self.kinds {
            for &load in &self.loads {
                parse_cross(&spec, &[Self::cross_spec(kind, load)])?;
            }
        }
        Ok(())
    }

    /// A chain sweep: every phase's plan must hold (its load leaves the
    /// tight link below the narrow one), and RFC 9097's test, which runs
    /// against the two-host lab's UDPST server, is not among the methods.
    fn validate_chain(&self, plan: &HopsLabPlan) -> Result<()> {
        if self.methods.iter().any(|m| capacity::is_capacity_method(m)) {
            return Err(LabError::Spec(
                "--methods capacity runs on the two-host lab, not on a chain (--hops)".into(),
            ));
        }
        for kind in &self.kinds {
            for &load in &self.loads {
                chain::phase_plan(plan, kind, load, self.seed, 0)
                    .validate()
                    .map_err(LabError::Spec)?;
            }
        }
        Ok(())
    }

    /// How many measurements the sweep makes.
    pub fn total_runs(&self) -> u64 {
        self.kinds.len() as u64
            * self.loads.len() as u64
            * self.methods.len() as u64
            * u64::from(self.runs)
    }
}

fn trim_float(x: f64) -> String {
    if x.fract() == 0.0 {
        format!("{x:.0}")
    } else {
        format!("{x}")
    }
}

/// One measurement beside its truth.
///
/// `Deserialize` reads the stored sweeps back (`docs/compare/data/`); a test
/// checks that every stored run writes back exactly as it was read.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CompareRun {
    pub kind: String,
    /// Load in percent of C.
    pub load: f64,
    pub method: String,
    pub run: u32,
    /// When the measurement started and ended, from the sweep's start
    /// (seconds in JSON, as every `_s` field).
    #[serde(with = "serde_secs")]
    pub start_s: DurationNs,
    #[serde(with = "serde_secs")]
    pub end_s: DurationNs,
    pub estimate_bps: BitRate,
    pub estimate_low_bps: BitRate,
    pub estimate_high_bps: Option<BitRate>,
    /// A over the estimate's window (first probe sent to last), IP layer,
    /// from the generators' logs: what `lab run` calls the truth.
    pub truth_bps: BitRate,
    /// The same window from the bottleneck qdisc's counters: bytes it carried
    /// minus the probe bytes, between the 100 ms samples inside the window;
    /// `None` when the window holds fewer than two samples.
    pub truth_qdisc_bps: Option<BitRate>,
    /// Cross traffic offered over the window, IP layer.
    pub cross_bps: BitRate,
    /// (estimate − truth) / truth.
    pub error: f64,
    /// The sampling floor's run: (A over the probes' own stretches − truth)
    /// / truth, what a perfect reader of the same probes would have erred by
    /// ([`truth::ProbeWindows`]); absent in sweeps stored before it existed
    /// and for a method without probe trains (`capacity`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampling_error: Option<f64>,
    /// Whether the band `estimate_low_bps..estimate_high_bps` held the
    /// truth; `null` for a method without a band (`capacity`: its maximum
    /// is one number, written as low = high = the estimate).
    pub in_band: Option<bool>,
    /// Packets the bottleneck dropped because this run's probes were there,
    /// beyond what the cross traffic alone lost over the phase's settling
    /// stretch ([`truth::drops_caused`]); `None` when the counters do not
    /// cover the run.
    pub drops_caused: Option<f64>,
    /// Whole measurement: connecting, RTT, probing, answer.
    #[serde(with = "serde_secs")]
    pub duration_s: DurationNs,
    /// First probe sent to last probe sent.
    #[serde(with = "serde_secs")]
    pub window_s: DurationNs,
    /// The window's start and end, from the sweep's start.
    #[serde(with = "serde_secs")]
    pub window_start_s: DurationNs,
    #[serde(with = "serde_secs")]
    pub window_end_s: DurationNs,
    pub probe_bytes: u64,
    pub probe_packets: u64,
    /// Probe bytes over the whole measurement.
    pub probe_rate_bps: BitRate,
    /// probe rate / A.
    pub intrusiveness: f64,
    /// probe rate / cross-traffic rate (`None` without cross traffic).
    pub overhead: Option<f64>,
    pub converged: bool,
    pub host_limited: Option<String>,
    /// The host and resource that bound the answer by the run's own
    /// evidence (`"client pacing"`, `"server receiver"`); `None` when the
    /// evidence says the path was measured (docs/verdict.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_resource: Option<String>,
    pub coalescing: Option<Coalescing>,
    pub notes: Vec<String>,
    /// `hops` on a chain only ([`chain`]): whether the link it named
    /// tight is the true tight link (`hops_lab::names_link`), and, where
    /// the narrow link is another link, whether it named that one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hop_found: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub narrow_found: Option<bool>,
}

impl CompareRun {
    /// This run as core's accuracy summary reads it.
    pub fn scored(&self) -> Scored {
        match self.in_band {
            Some(b) => Scored::estimate(self.error, b, self.drops_caused),
            None => Scored::unbanded(self.error, self.drops_caused),
        }
    }
}

/// A measurement that produced no estimate.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CompareFailure {
    pub kind: String,
    pub load: f64,
    pub method: String,
    pub run: u32,
    #[serde(with = "serde_secs")]
    pub start_s: DurationNs,
    #[serde(with = "serde_secs")]
    pub end_s: DurationNs,
    pub error: String,
}

/// One point of the truth series.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct TruthPoint {
    /// From the sweep's start (the bin's start).
    #[serde(with = "serde_secs")]
    pub t_s: DurationNs,
    /// A over the bin, IP layer for the probes' size, from the generators' logs.
    pub available_bps: BitRate,
    /// Cross traffic offered over the bin, L2.
    pub cross_l2_bps: BitRate,
}

/// One cross-traffic kind at one load: when it ran and its truth.
#[derive(Debug, Clone, Serialize)]
pub struct Phase {
    pub kind: String,
    pub load: f64,
    /// The cross-traffic spec as run, and its description.
    pub cross: String,
    pub described: String,
    #[serde(with = "serde_secs")]
    pub start_s: DurationNs,
    #[serde(with = "serde_secs")]
    pub end_s: DurationNs,
    /// Generators against the qdisc over the settling stretch (no probes).
    pub truth_check: Option<TruthCheck>,
    /// The settling stretch (from the sweep's start): cross traffic
    /// alone, the baseline for the drops each run caused.
    #[serde(with = "serde_secs")]
    pub settle_start_s: DurationNs,
    #[serde(with = "serde_secs")]
    pub settle_end_s: DurationNs,
    /// A every 100 ms over the phase.
    pub truth_series: Vec<TruthPoint>,
    /// The machine's 1-minute load average when the phase ended: other work
    /// on the box competes with the lab for the two cores.
    pub load_average: Option<f64>,
    pub notes: Vec<String>,
}

/// Everything a sweep produced.
#[derive(Debug, Clone, Serialize)]
pub struct CompareReport {
    /// The two-host path; on a chain, its tight link (`capacity`, `queue`)
    /// and narrow link (`narrow`) as the same words say them, and the
    /// chain itself in `chain`.
    pub lab: LabSpec,
    /// The chain the sweep ran on, if it ran on one ([`chain`]); its
    /// `cross` is the first phase's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chain: Option<HopsLabPlan>,
    /// What every method was told (`known_capacity` is the user's
    /// `--known-capacity`, or null: blind).
    pub settings: MethodSettings,
    /// IP-layer capacity of the lab for the probes' size: for judging only,
    /// never told to a method.
    pub capacity_ip_bps: BitRate,
    pub probe_size_bytes: u64,
    pub kinds: Vec<String>,
    pub loads: Vec<f64>,
    pub methods: Vec<String>,
    /// What each `capacity` test asked for; `null` when the sweep ran none.
    pub capacity: Option<CapacitySettings>,
    pub runs_per_cell: u32,
    /// The settling times asked for (written as `std::time::Duration`
    /// writes seconds: they were written from one).
    #[serde(with = "serde_std_secs")]
    pub settle_s: DurationNs,
    #[serde(with = "serde_std_secs")]
    pub tool_settle_s: DurationNs,
    /// Wall time of the whole sweep, lab build to teardown.
    #[serde(with = "serde_secs")]
    pub elapsed_s: DurationNs,
    /// The machine's load averages (1, 5, 15 minutes) before and after the
    /// sweep, from /proc/loadavg: a lab on a busy machine times less well.
    pub load_average_before: Option<[f64; 3]>,
    pub load_average_after: Option<[f64; 3]>,
    pub rows: Vec<Row>,
    pub runs: Vec<CompareRun>,
    pub failures: Vec<CompareFailure>,
    pub phases: Vec<Phase>,
    /// The bottleneck qdisc's counters every 100 ms over the whole sweep.
    pub qdisc_series: Vec<QdiscSample>,
    pub notes: Vec<String>,
}

/// What a progress display hears about.
pub enum Progress<'a> {
    /// A load starts (cross traffic settling).
    Phase { kind: &'a str, load: f64 },
    /// A measurement starts.
    Start {
        kind: &'a str,
        load: f64,
        method: &'a str,
        run: u32,
    },
    /// A measurement ended, with an estimate or without.
    Done(std::result::Result<&'a CompareRun, &'a CompareFailure>),
}

/// Runs the sweep on a lab it builds and always tears down.
pub fn compare(
    opts: &CompareOptions,
    make: &NamedFactory,
    progress: &mut dyn FnMut(Progress<'_>),
) -> Result<CompareReport> {
    opts.validate()?;
    if opts.chain.is_some() {
        return Err(LabError::Spec(
            "a sweep on a chain runs through compare::chain::compare_chain".into(),
        ));
    }
    let before = load_average();
    let started = clock::monotonic();
    let mut spec = opts.spec.clone();
    spec.cross_sources = 1;
    let lab = Lab::build(spec)?;
    let result = sweep(&lab, opts, make, progress, started);
    drop(lab);
    result.map(|mut r| {
        r.elapsed_s = clock::monotonic().since(started);
        r.load_average_before = before;
        r.load_average_after = load_average();
        r
    })
}

fn sweep(
    lab: &Lab,
    opts: &CompareOptions,
    make: &NamedFactory,
    progress: &mut dyn FnMut(Progress<'_>),
    t0: TimeNs,
) -> Result<CompareReport> {
    let secs = |t: TimeNs| t.since(t0);
    let probe_size = opts.settings.packet_size;
    let mut live = LivePath::start(lab, &[], opts.seed, opts.settings.max_rate)?;
    let server = LivePath::server_addr();
    let mut runs = Vec::new();
    let mut failures = Vec::new();
    let mut phases = Vec::new();
    let mut notes = Vec::new();
    let mut phase_no = 0u64;
    for kind in &opts.kinds {
        for &load in &opts.loads {
            progress(Progress::Phase { kind, load });
            let cross = CompareOptions::cross_spec(kind, load);
            let models = parse_cross(&lab.spec, std::slice::from_ref(&cross))?;
            // A fresh seed per phase: no two loads replay the same draws.
            let seed = opts.seed.wrapping_add(1000 * phase_no);
            phase_no += 1;
            let mut phase_notes = live.replace_cross(lab, &models, seed)?;
            let phase_from = clock::monotonic();
            std::thread::sleep(opts.settle);
            let settle_from = phase_from + DurationNs::from_ms(200);
            let settle_to = clock::monotonic();
            let truth_check = live.check(settle_from, settle_to);
            if let Some(c) = &truth_check {
                if c.relative_difference.abs() > 0.02 {
                    phase_notes.push(format!(
                        "the bottleneck carried {:+.1} % against what the generator sent while no probe ran",
                        c.relative_difference * 100.0
                    ));
                }
            }
            for method in &opts.methods {
                for run in 0..opts.runs {
                    // The paper's settling delay before each tool, and the
                    // same quiet gap between its runs.
                    std::thread::sleep(opts.tool_settle);
                    progress(Progress::Start {
                        kind,
                        load,
                        method,
                        run,
                    });
                    let begin = clock::monotonic();
                    // A capacity test also gives the zero-loss fit's reading,
                    // scored as a method of its own.
                    let mut zero_loss = None;
                    let measured = if method == capacity::METHOD {
                        capacity::measure(lab, &opts.capacity).and_then(|m| {
                            let rec = capacity_record(&live, lab, kind, load, run, &m, t0)
                                .ok_or_else(|| "no sub-interval carried traffic".to_string())?;
                            zero_loss = Some(zero_loss_record(&rec, &m));
                            Ok(rec)
                        })
                    } else {
                        measure_once(&lab.ns(Role::Sender), make, method, &opts.settings, server)
                            .map(|m| record(&live, lab, opts, kind, load, run, m, begin, t0))
                    };
                    match measured {
                        Ok(rec) => {
                            progress(Progress::Done(Ok(&rec)));
                            runs.push(rec);
                            match zero_loss {
                                Some(Ok(z)) => runs.push(z),
                                Some(Err(why)) => failures.push(CompareFailure {
                                    kind: kind.clone(),
                                    load,
                                    method: capacity::ZERO_LOSS_METHOD.into(),
                                    run,
                                    start_s: secs(begin),
                                    end_s: secs(clock::monotonic()),
                                    error: why,
                                }),
                                None => {}
                            }
                        }
                        Err(e) => {
                            let f = CompareFailure {
                                kind: kind.clone(),
                                load,
                                method: method.clone(),
                                run,
                                start_s: secs(begin),
                                end_s: secs(clock::monotonic()),
                                error: e,
                            };
                            progress(Progress::Done(Err(&f)));
                            failures.push(f);
                        }
                    }
                }
            }
            let phase_to = clock::monotonic();
            let truth_series = live
                .cross_l2_series(phase_from, phase_to, DurationNs::from_ms(100))
                .into_iter()
                .map(|(t, x)| TruthPoint {
                    t_s: secs(t),
                    available_bps: truth::available_ip(lab.spec.capacity, x, probe_size)
                        .min(narrow_ip(&lab.spec, probe_size)),
                    cross_l2_bps: x,
                })
                .collect();
            phases.push(Phase {
                kind: kind.clone(),
                load,
                described: models
                    .iter()
                    .map(|m| m.describe())
                    .collect::<Vec<_>>()
                    .join("; "),
                cross,
                start_s: secs(phase_from),
                end_s: secs(phase_to),
                truth_check,
                settle_start_s: secs(settle_from),
                settle_end_s: secs(settle_to),
                truth_series,
                load_average: load_average().map(|l| l[0]),
                notes: phase_notes,
            });
        }
    }
    // Let the counters cover the last run's drop tail before they stop.
    std::thread::sleep((crate::truth::DROP_TAIL + DurationNs::from_ms(150)).to_std());
    let (qdisc_series, stop_notes) = live.stop();
    notes.extend(stop_notes);
    // The qdisc's view of each window, now that the whole series is in.
    let at = |s: DurationNs| t0 + s;
    for r in &mut runs {
        // The qdisc's view subtracts probe bytes of the probe size; a
        // capacity test's load is not that, so it has none.
        if !capacity::is_capacity_method(&r.method) {
            r.truth_qdisc_bps = qdisc_truth(&qdisc_series, lab, opts, r, t0);
        }
        let phase = phases
            .iter()
            .find(|p: &&Phase| p.kind == r.kind && p.load == r.load);
        r.drops_caused = phase.and_then(|p| {
            truth::drops_caused(
                &qdisc_series,
                at(r.window_start_s),
                at(r.window_end_s),
                (at(p.settle_start_s), at(p.settle_end_s)),
            )
        });
    }
    let capacity_ip =
        ip_rate_of_l2(lab.spec.capacity, probe_size).min(narrow_ip(&lab.spec, probe_size));
    Ok(CompareReport {
        lab: lab.spec.clone(),
        chain: None,
        settings: opts.settings,
        capacity_ip_bps: capacity_ip,
        probe_size_bytes: probe_size.get(),
        kinds: opts.kinds.clone(),
        loads: opts.loads.clone(),
        methods: opts.methods.clone(),
        capacity: opts
            .methods
            .iter()
            .any(|m| m == capacity::METHOD)
            .then_some(opts.capacity),
        runs_per_cell: opts.runs,
        settle_s: DurationNs::from_std(opts.settle),
        tool_settle_s: DurationNs::from_std(opts.tool_settle),
        elapsed_s: DurationNs::ZERO,
        load_average_before: None,
        load_average_after: None,
        rows: rows(&runs, &failures),
        runs,
        failures,
        phases,
        qdisc_series,
        notes,
    })
}

/// The 1-, 5- and 15-minute load averages, if /proc/loadavg can be read.
pub fn load_average() -> Option<[f64; 3]> {
    parse_loadavg(&std::fs::read_to_string("/proc/loadavg").ok()?)
}

fn parse_loadavg(text: &str) -> Option<[f64; 3]> {
    let mut it = text.split_whitespace().map(|x| x.parse::<f64>().ok());
    Some([it.next()??, it.next()??, it.next()??])
}

/// The narrow link at the IP layer, or no bound with one router.
pub(crate) fn narrow_ip(spec: &LabSpec, probe_size: Bytes) -> BitRate {
    spec.narrow.map_or(BitRate::from_bps(f64::INFINITY), |n| {
        ip_rate_of_l2(n, probe_size)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn load_averages_parse() {
        assert_eq!(
            parse_loadavg("7.62 8.49 6.05 3/412 29138\n"),
            Some([7.62, 8.49, 6.05])
        );
        assert_eq!(parse_loadavg("garbage"), None);
    }

    /// Every run, failure and table row of the stored sweeps reads into the
    /// typed structs and writes back to the same JSON values: rates and `_s`
    /// durations survive `BitRate` and `DurationNs` unchanged.
    #[test]
    fn stored_sweeps_round_trip_through_the_typed_runs() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/compare/data");
        let mut files = 0;
        let mut checked = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|e| e != "json") {
                continue;
            }
            // The capacity figures (`capacity-<commit>.json`) are `lab run
            // --method capacity` reports and reference-client runs,
            // `udpst-burst.json` is send-pattern captures and
            // `bytes-curve.json` is `lab run` cells (scripts/bytes_curve.py):
            // not sweeps.
            if path.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
                n.starts_with("capacity-")
                    || n.starts_with("udpst-")
                    || n.starts_with("bytes-curve")
            }) {
                continue;
            }
            files += 1;
            let text = std::fs::read_to_string(&path).unwrap();
            let stored: serde_json::Value = serde_json::from_str(&text).unwrap();
            for key in ["runs", "failures", "rows"] {
                for v in stored[key].as_array().unwrap() {
                    let back = match key {
                        "runs" => serde_json::to_value(
                            serde_json::from_value::<CompareRun>(v.clone()).unwrap(),
                        ),
                        "failures" => serde_json::to_value(
                            serde_json::from_value::<CompareFailure>(v.clone()).unwrap(),
                        ),
                        _ => {
                            serde_json::to_value(serde_json::from_value::<Row>(v.clone()).unwrap())
                        }
                    }
                    .unwrap();
                    assert_eq!(&back, v, "{}", path.display());
                    // Byte for byte too (each number printed from its f64).
                    assert_eq!(
                        serde_json::to_string(&back).unwrap(),
                        serde_json::to_string(v).unwrap()
                    );
                    checked += 1;
                }
            }
        }
        assert!(
            files >= 9 && checked > 1000,
            "{files} files, {checked} runs"
        );
    }

    #[test]
    fn the_load_goes_in_as_the_rate() {
        assert_eq!(CompareOptions::cross_spec("poisson", 30.0), "poisson:30%");
        assert_eq!(
            CompareOptions::cross_spec("mix:flows=4", 12.5),
            "mix:12.5%:flows=4"
        );
    }
}
