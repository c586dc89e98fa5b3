//! The comparison table: one row per cross-traffic kind, load and method,
//! with the statistics the comparison paper reports (Shriram et al. 2005,
//! 3.1 and 3.2) — accuracy, measurement time, intrusiveness, overhead — and
//! the spread behind each mean.

use super::{CompareFailure, CompareRun};
use pathsonde_core::accuracy::Accuracy;
use pathsonde_core::{stats, BitRate};
use serde::{Deserialize, Serialize};

/// One method at one load of one kind of cross traffic.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    pub kind: String,
    pub load: f64,
    pub method: String,
    /// Runs that gave an estimate.
    pub runs: u32,
    /// Runs that gave none.
    pub failed: u32,
    /// Mean truth A over the runs' windows.
    pub truth_mean_bps: Option<BitRate>,
    pub estimate_mean_bps: Option<BitRate>,
    /// Sample standard deviation of the estimates (n − 1); `None` below 2 runs.
    pub estimate_std_bps: Option<BitRate>,
    /// |estimate − truth| / truth, each run against its own window's truth.
    pub mean_abs_error: Option<f64>,
    pub median_abs_error: Option<f64>,
    pub max_abs_error: Option<f64>,
    /// 90th percentile of |error|.
    pub p90_abs_error: Option<f64>,
    /// The sampling floor: median |error| a perfect reader of the same
    /// probes would have had ([`CompareRun::sampling_error`]), and median
    /// |error| over it; `None` in sweeps stored before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampling_floor: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_to_floor: Option<f64>,
    /// Share of the runs with a banded estimate whose band held the truth
    /// (`None` for a method without a band, such as `capacity`).
    pub band_coverage: Option<f64>,
    /// Median packets the bottleneck dropped because the probes were there
    /// (over the runs whose drops are known), and the most in one run.
    pub drops_caused_median: Option<f64>,
    pub drops_caused_max: Option<f64>,
    /// Mean whole-measurement time (connect, RTT, probing, answer), seconds.
    /// A mean, so not a whole number of nanoseconds: kept as f64 so that the
    /// stored sweeps' tables read back unchanged.
    pub time_mean_s: Option<f64>,
    pub probe_bytes_mean: Option<f64>,
    pub probe_packets_mean: Option<f64>,
    /// Mean probe rate: probe bytes over each measurement's time.
    pub probe_rate_mean_bps: Option<BitRate>,
    /// Mean cross traffic over the runs' windows (IP layer).
    pub cross_mean_bps: Option<BitRate>,
    /// Mean probe rate / mean A: the paper's intrusiveness (3.2), a ratio of
    /// averages, so that a run whose short window happened to hold no
    /// available bandwidth does not swamp the cell.
    pub intrusiveness: Option<f64>,
    /// Mean probe rate / mean cross-traffic rate: the paper's overhead
    /// (`None` without cross traffic).
    pub overhead: Option<f64>,
    pub converged: u32,
    /// Runs whose receiver bunched arrivals (coalescing detected).
    pub coalescing_detected: u32,
    /// Runs the method itself called host-limited.
    pub host_limited: u32,
    /// `hops` on a chain only: runs that named the true tight link's hop,
    /// out of `runs + failed` (a run that named no tight link is a
    /// failure: it found none); and, over the runs whose narrow link is
    /// another link (`narrow_differs`), those that named it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hop_found: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub narrow_found: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub narrow_differs: Option<u32>,
}

/// The rows for `runs` and `failures`, in the order cells first appear
/// (kind, then load, then method, as the sweep ran them).
pub fn rows(runs: &[CompareRun], failures: &[CompareFailure]) -> Vec<Row> {
    let mut keys: Vec<(String, f64, String)> = Vec::new();
    let seen = |keys: &Vec<(String, f64, String)>, k: &str, l: f64, m: &str| {
        keys.iter().any(|(a, b, c)| a == k && *b == l && c == m)
    };
    let events = runs
        .iter()
        .map(|r| (r.start_s, &r.kind, r.load, &r.method))
        .chain(
            failures
                .iter()
                .map(|f| (f.start_s, &f.kind, f.load, &f.method)),
        );
    let mut ordered: Vec<_> = events.collect();
    ordered.sort_by_key(|e| e.0);
    for (_, k, l, m) in ordered {
        if !seen(&keys, k, l, m) {
            keys.push((k.clone(), l, m.clone()));
        }
    }
    keys.into_iter()
        .map(|(kind, load, method)| {
            let mine: Vec<&CompareRun> = runs
                .iter()
                .filter(|r| r.kind == kind && r.load == load && r.method == method)
                .collect();
            let failed = failures
                .iter()
                .filter(|f| f.kind == kind && f.load == load && f.method == method)
                .count() as u32;
            row(kind, load, method, &mine, failed)
        })
        .collect()
}

fn row(kind: String, load: f64, method: String, runs: &[&CompareRun], failed: u32) -> Row {
    let col = |f: &dyn Fn(&CompareRun) -> f64| -> Vec<f64> { runs.iter().map(|r| f(r)).collect() };
    let count = |f: &dyn Fn(&CompareRun) -> bool| runs.iter().filter(|r| f(r)).count() as u32;
    let rates = |f: &dyn Fn(&CompareRun) -> BitRate| -> Vec<f64> {
        runs.iter().map(|r| f(r).bps()).collect()
    };
    let rate = stats::mean(&rates(&|r| r.probe_rate_bps));
    let truth = stats::mean(&rates(&|r| r.truth_bps));
    let cross = stats::mean(&rates(&|r| r.cross_bps));
    let acc = Accuracy::of(runs.iter().map(|r| r.scored()));
    let floors: Vec<f64> = runs
        .iter()
        .filter_map(|r| r.sampling_error.map(f64::abs))
        .collect();
    let sampling_floor = stats::median(&floors);
    let hops = method == crate::hops_lab::METHOD;
    let differs = count(&|r| r.narrow_found.is_some());
    Row {
        hop_found: hops.then(|| count(&|r| r.hop_found == Some(true))),
        narrow_found: (hops && differs > 0).then(|| count(&|r| r.narrow_found == Some(true))),
        narrow_differs: (hops && differs > 0).then_some(differs),
        sampling_floor,
        error_to_floor: ratio(acc.median_abs_error, sampling_floor),
        kind,
        load,
        method,
        runs: runs.len() as u32,
        failed,
        truth_mean_bps: truth.map(BitRate::from_bps),
        estimate_mean_bps: stats::mean(&rates(&|r| r.estimate_bps)).map(BitRate::from_bps),
        estimate_std_bps: stats::std_dev(&rates(&|r| r.estimate_bps)).map(BitRate::from_bps),
        mean_abs_error: acc.mean_abs_error,
        median_abs_error: acc.median_abs_error,
        max_abs_error: acc.max_abs_error,
        p90_abs_error: acc.p90_abs_error,
        band_coverage: acc.band_coverage,
        drops_caused_median: acc.drops_caused_median,
        drops_caused_max: acc.drops_caused_max,
        time_mean_s: stats::mean(&col(&|r| r.duration_s.secs_f64())),
        probe_bytes_mean: stats::mean(&col(&|r| r.probe_bytes as f64)),
        probe_packets_mean: stats::mean(&col(&|r| r.probe_packets as f64)),
        probe_rate_mean_bps: rate.map(BitRate::from_bps),
        cross_mean_bps: cross.map(BitRate::from_bps),
        intrusiveness: ratio(rate, truth),
        overhead: ratio(rate, cross),
        converged: count(&|r| r.converged),
        coalescing_detected: count(&|r| r.coalescing.is_some_and(|c| c.detected)),
        host_limited: count(&|r| r.host_limited.is_some()),
    }
}

/// `a / b` when both are known and `b` is positive.
fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pathsonde_core::DurationNs;

    fn secs(s: f64) -> DurationNs {
        DurationNs::from_secs_f64(s)
    }
    fn bps(b: f64) -> BitRate {
        BitRate::from_bps(b)
    }

    fn run(method: &str, load: f64, start: f64, estimate: f64, truth: f64) -> CompareRun {
        CompareRun {
            kind: "poisson".into(),
            load,
            method: method.into(),
            run: 0,
            start_s: secs(start),
            end_s: secs(start + 2.0),
            estimate_bps: bps(estimate),
            estimate_low_bps: bps(estimate),
            estimate_high_bps: None,
            truth_bps: bps(truth),
            truth_qdisc_bps: None,
            cross_bps: bps(300e6 - truth),
            error: (estimate - truth) / truth,
            sampling_error: None,
            in_band: Some((estimate - truth).abs() < 0.1 * truth),
            drops_caused: Some(start),
            duration_s: secs(2.0),
            window_s: secs(1.5),
            window_start_s: secs(start + 0.2),
            window_end_s: secs(start + 1.7),
            probe_bytes: 1_000_000,
            probe_packets: 1000,
            probe_rate_bps: bps(4e6),
            intrusiveness: 4e6 / truth,
            overhead: Some(4e6 / (300e6 - truth)),
            converged: true,
            host_limited: None,
            coalescing: None,
            notes: vec![],
            host_resource: None,
            hop_found: None,
            narrow_found: None,
        }
    }

    #[test]
    fn statistics_of_one_cell() {
        let runs = vec![
            run("fac2", 30.0, 0.0, 190e6, 200e6),
            run("fac2", 30.0, 3.0, 210e6, 200e6),
            run("fac2", 30.0, 6.0, 230e6, 200e6),
        ];
        let rows = rows(&runs, &[]);
        assert_eq!(rows.len(), 1);
        let r = &rows[0];
        assert_eq!((r.runs, r.failed, r.converged), (3, 0, 3));
        assert!((r.estimate_mean_bps.unwrap().bps() - 210e6).abs() < 1e-3);
        // Sample standard deviation of 190, 210, 230: 20.
        assert!((r.estimate_std_bps.unwrap().bps() - 20e6).abs() < 1e-3);
        // |errors| 0.05, 0.05, 0.15.
        assert!((r.mean_abs_error.unwrap() - 0.25 / 3.0).abs() < 1e-12);
        assert!((r.median_abs_error.unwrap() - 0.05).abs() < 1e-12);
        assert!((r.max_abs_error.unwrap() - 0.15).abs() < 1e-12);
        assert!((r.time_mean_s.unwrap() - 2.0).abs() < 1e-12);
        // 4 Mb/s of probes against A = 200 Mb/s and 100 Mb/s of cross traffic.
        assert!((r.intrusiveness.unwrap() - 0.02).abs() < 1e-12);
        assert!((r.overhead.unwrap() - 0.04).abs() < 1e-12);
        assert_eq!(r.probe_packets_mean, Some(1000.0));
        // Bands of ±10 %: the 230 run's misses the truth.
        assert!((r.band_coverage.unwrap() - 2.0 / 3.0).abs() < 1e-12);
        assert_eq!(
            (r.drops_caused_median, r.drops_caused_max),
            (Some(3.0), Some(6.0))
        );
    }

    #[test]
    fn cells_keep_the_sweep_order_and_count_failures() {
        let runs = vec![
            run("slops", 10.0, 5.0, 1.0, 1.0),
            run("fac2", 10.0, 1.0, 1.0, 1.0),
            run("fac2", 50.0, 9.0, 1.0, 1.0),
        ];
        let failures = vec![CompareFailure {
            kind: "poisson".into(),
            load: 50.0,
            method: "chirp".into(),
            run: 0,
            start_s: secs(12.0),
            end_s: secs(13.0),
            error: "no usable chirp".into(),
        }];
        let rows = rows(&runs, &failures);
        let order: Vec<(f64, &str)> = rows.iter().map(|r| (r.load, r.method.as_str())).collect();
        assert_eq!(
            order,
            vec![
                (10.0, "fac2"),
                (10.0, "slops"),
                (50.0, "fac2"),
                (50.0, "chirp")
            ]
        );
        let chirp = &rows[3];
        assert_eq!((chirp.runs, chirp.failed), (0, 1));
        assert_eq!(chirp.estimate_mean_bps, None);
        // One run: a mean but no standard deviation.
        assert_eq!(rows[0].estimate_std_bps, None);
        assert_eq!(rows[0].estimate_mean_bps, Some(bps(1.0)));
    }

    #[test]
    fn hops_rows_count_the_hop_found_over_every_run_and_the_others_have_no_such_column() {
        let mut runs = vec![
            run("hops", 60.0, 0.0, 40e6, 38e6),
            run("hops", 60.0, 3.0, 41e6, 38e6),
            run("hops", 60.0, 6.0, 30e6, 38e6),
            run("fac2", 60.0, 9.0, 39e6, 38e6),
        ];
        runs[0].hop_found = Some(true);
        runs[1].hop_found = Some(true);
        runs[2].hop_found = Some(false);
        runs[0].narrow_found = Some(true);
        runs[2].narrow_found = Some(false);
        let failures = vec![CompareFailure {
            kind: "poisson".into(),
            load: 60.0,
            method: "hops".into(),
            run: 3,
            start_s: secs(8.0),
            end_s: secs(9.0),
            error: "hops named no tight link".into(),
        }];
        let rows = rows(&runs, &failures);
        let hops = rows.iter().find(|r| r.method == "hops").unwrap();
        // 2 of 4 tries found the hop: the failure counts against it.
        assert_eq!((hops.hop_found, hops.runs + hops.failed), (Some(2), 4));
        assert_eq!((hops.narrow_found, hops.narrow_differs), (Some(1), Some(2)));
        let fac2 = rows.iter().find(|r| r.method == "fac2").unwrap();
        assert_eq!(
            (fac2.hop_found, fac2.narrow_found, fac2.narrow_differs),
            (None, None, None)
        );
        // A cell of hops runs that all failed still has the column: 0 found.
        let none = super::rows(&[], &failures);
        assert_eq!(none[0].hop_found, Some(0));
    }
}
