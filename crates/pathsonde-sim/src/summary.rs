//! Summaries of simulator runs over seeds: a method's accuracy (core's
//! [`pathsonde_core::accuracy`]) and ICIM's results grouped by the truth.
//! The CLI prints these; it computes none of them.

use crate::driver::{accuracy_of, MethodRun, TcpRun};
use pathsonde_core::{stats, BitRate};

#[derive(Debug, Clone, serde::Serialize)]
pub struct Summary {
    pub estimates: usize,
    /// Median over seeds of each seed's median |relative error|.
    pub median_abs_error: Option<f64>,
    pub worst_seed_abs_error: Option<f64>,
    pub best_seed_abs_error: Option<f64>,
    /// Share of all estimates whose band held the truth.
    pub band_coverage: Option<f64>,
}

pub fn summary(runs: &[MethodRun]) -> Summary {
    let per: Vec<f64> = runs
        .iter()
        .filter_map(|r| r.accuracy().median_abs_error)
        .collect();
    let worst = per
        .iter()
        .copied()
        .fold(None, |a: Option<f64>, x| Some(a.map_or(x, |a| a.max(x))));
    let best = per
        .iter()
        .copied()
        .fold(None, |a: Option<f64>, x| Some(a.map_or(x, |a| a.min(x))));
    Summary {
        band_coverage: accuracy_of(runs.iter().flat_map(|r| &r.samples)).band_coverage,
        estimates: runs.iter().map(|r| r.samples.len()).sum(),
        median_abs_error: stats::median(&per),
        worst_seed_abs_error: worst,
        best_seed_abs_error: best,
    }
}

/// ICIM results grouped by the truth (to the nearest 0.25 Gb/s): the
/// phases of a `steps` scenario.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TruthGroup {
    pub truth_gbps: f64,
    pub results: usize,
    /// Results over the time from the group's first to its last result,
    /// per ICIM flow and seed (at least 10 results, else none).
    pub results_per_s: Option<f64>,
    pub mean_packets: f64,
    pub median_estimate_gbps: f64,
    pub p10_estimate_gbps: f64,
    pub p90_estimate_gbps: f64,
    pub median_abs_error: f64,
}

pub fn groups(runs: &[TcpRun]) -> Vec<TruthGroup> {
    let mut keys: Vec<i64> = Vec::new();
    let key = |g: f64| (g * 4.0).round() as i64;
    for r in runs {
        for s in &r.icim {
            let k = key(s.truth.gbps());
            if !keys.contains(&k) {
                keys.push(k);
            }
        }
    }
    keys.sort();
    let flows: usize = runs
        .iter()
        .map(|r| r.conns.iter().filter(|c| c.icim).count())
        .sum::<usize>()
        .max(1);
    keys.into_iter()
        .map(|k| {
            let xs: Vec<_> = runs
                .iter()
                .flat_map(|r| r.icim.iter())
                .filter(|s| key(s.truth.gbps()) == k)
                .collect();
            let mut est: Vec<f64> = xs.iter().map(|s| s.result.value_bps.gbps()).collect();
            est.sort_by(f64::total_cmp);
            let err: Vec<f64> = xs
                .iter()
                .map(|s| ((s.result.value_bps.bps() - s.truth.bps()) / s.truth.bps()).abs())
                .collect();
            let first = xs
                .iter()
                .map(|s| s.at.as_secs_f64())
                .fold(f64::INFINITY, f64::min);
            let last = xs.iter().map(|s| s.at.as_secs_f64()).fold(0.0, f64::max);
            let q = |p: f64| est[((est.len() - 1) as f64 * p).round() as usize];
            TruthGroup {
                truth_gbps: k as f64 / 4.0,
                results: xs.len(),
                results_per_s: (xs.len() >= 10 && last > first)
                    .then(|| xs.len() as f64 / (last - first) / flows as f64),
                mean_packets: xs.iter().map(|s| f64::from(s.result.packets)).sum::<f64>()
                    / xs.len() as f64,
                median_estimate_gbps: q(0.5),
                p10_estimate_gbps: q(0.1),
                p90_estimate_gbps: q(0.9),
                median_abs_error: stats::median(&err).unwrap_or(0.0),
            }
        })
        .collect()
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct TcpSummary {
    pub by_truth: Vec<TruthGroup>,
    pub icim_results: usize,
    pub results_per_s: Option<f64>,
    pub mean_packets_per_measurement: Option<f64>,
    pub median_abs_error: Option<f64>,
    pub icim_mean_bps: Option<BitRate>,
    pub reno_mean_bps: Option<BitRate>,
    /// Sum of the ICIM flows' throughput, averaged over seeds (Table III's
    /// figure), and the same for the plain Reno flows.
    pub icim_total_bps: Option<BitRate>,
    pub reno_total_bps: Option<BitRate>,
}

pub fn tcp_summary(runs: &[TcpRun]) -> TcpSummary {
    let n: usize = runs.iter().map(|r| r.icim.len()).sum();
    let icim_conns: usize = runs
        .iter()
        .map(|r| r.conns.iter().filter(|c| c.icim).count())
        .sum();
    let time: f64 = runs.iter().map(|r| r.simulated.as_secs_f64()).sum();
    let packets: Vec<f64> = runs
        .iter()
        .flat_map(|r| r.icim.iter().map(|s| f64::from(s.result.packets)))
        .collect();
    let errs: Vec<f64> = runs
        .iter()
        .flat_map(|r| {
            r.icim
                .iter()
                .filter(|s| s.truth.is_positive())
                .map(|s| ((s.result.value_bps.bps() - s.truth.bps()) / s.truth.bps()).abs())
        })
        .collect();
    let by = |icim: bool| -> Vec<f64> {
        runs.iter()
            .flat_map(|r| {
                r.conns
                    .iter()
                    .zip(&r.throughput_bps)
                    .filter(move |(c, _)| c.icim == icim)
                    .map(|(_, t)| t.bps())
            })
            .collect()
    };
    let total = |icim: bool| -> Option<BitRate> {
        let sums: Vec<f64> = runs
            .iter()
            .filter(|r| r.conns.iter().any(|c| c.icim == icim))
            .map(|r| {
                r.conns
                    .iter()
                    .zip(&r.throughput_bps)
                    .filter(|(c, _)| c.icim == icim)
                    .map(|(_, t)| t.bps())
                    .sum()
            })
            .collect();
        stats::mean(&sums).map(BitRate::from_bps)
    };
    TcpSummary {
        by_truth: groups(runs),
        icim_results: n,
        results_per_s: (icim_conns > 0 && time > 0.0).then(|| {
            n as f64
                / (time * icim_conns as f64 / runs.len().max(1) as f64)
                / runs.len().max(1) as f64
                * runs.len() as f64
        }),
        mean_packets_per_measurement: stats::mean(&packets),
        median_abs_error: stats::median(&errs),
        icim_mean_bps: stats::mean(&by(true)).map(BitRate::from_bps),
        reno_mean_bps: stats::mean(&by(false)).map(BitRate::from_bps),
        icim_total_bps: total(true),
        reno_total_bps: total(false),
    }
}
